"""An acknowledged write survives `kill -9` of the server (SPEC §3): create a task, kill the
process without warning, start it again on the same data directory, and read the task back.
And a graceful shutdown (SIGTERM) lets a request that is already in flight finish. On the
PostgreSQL run (TODO_SERVER_DATABASE_URL) the server started here uses that database."""

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time

import requests


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def engine():
    """The run's database for servers and commands started here: none (SQLite in the data dir),
    or on the PostgreSQL run the running server's database, with its data key (instances
    sharing a database share the key)."""
    database = os.environ.get("TODO_SERVER_DATABASE_URL")
    if not database:
        return [], dict(os.environ)
    with open(os.path.join(os.path.dirname(os.environ["TODO_SETTINGS"]), "data-key")) as handle:
        return ["--database-url", database], dict(os.environ, TODO_DATA_KEY=handle.read().strip())


def start(binary, data, identity_port, api_port):
    arguments, environment = engine()
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", str(data), "--identity-port", str(identity_port), "--api-port", str(api_port),
         "--password-hash-cost", "4", *arguments],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=1).ok:
                return process
        except requests.RequestException:
            time.sleep(0.2)
    process.kill()
    raise AssertionError("todo-server did not start")


def sign_in(binary, data, identity_port):
    settings = json.loads((data / "settings.json").read_text())
    client = settings["clientId"]
    email = f"durable-{secrets.token_hex(4)}@example.com"
    arguments, environment = engine()
    subprocess.run(
        [binary, "users", "add", "--data-dir", str(data), "--email", email, "--name", "Dee", "--password-stdin", *arguments],
        input="Durable-Pass1\n", text=True, check=True, capture_output=True, env=environment, timeout=120,
    )
    return requests.post(
        f"http://127.0.0.1:{identity_port}/{settings['tenant']}/B2C_1_ROPC/oauth2/v2.0/token",
        data={"grant_type": "password", "client_id": client, "username": email,
              "password": "Durable-Pass1", "scope": f"openid {client}"},
    ).json()["access_token"]


def test_acknowledged_write_survives_kill_9(tmp_path):
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    server = start(binary, data, identity_port, api_port)
    try:
        headers = {"Authorization": f"Bearer {sign_in(binary, data, identity_port)}"}
        created = requests.post(f"http://127.0.0.1:{api_port}/api/tasks", json={"title": "survive kill -9"}, headers=headers)
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]
        server.send_signal(signal.SIGKILL)
        server.wait()
        server = start(binary, data, identity_port, api_port)
        fetched = requests.get(f"http://127.0.0.1:{api_port}/api/tasks/{task_id}", headers=headers)
        assert fetched.status_code == 200, fetched.text
        assert fetched.json()["title"] == "survive kill -9"
    finally:
        server.kill()
        server.wait()


def test_sigterm_lets_an_in_flight_request_finish(tmp_path):
    """The request's headers and half its body arrive, then SIGTERM: the server must keep the
    connection, answer the request once the body is complete, store the task, and only then exit 0."""
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    server = start(binary, data, identity_port, api_port)
    try:
        token = sign_in(binary, data, identity_port)
        body = json.dumps({"title": "finished during shutdown"}).encode()
        head = (
            f"POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1:{api_port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", api_port), timeout=20) as connection:
            connection.sendall(head + body[:10])
            time.sleep(0.5)
            server.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            assert server.poll() is None, "the server exited with a request in flight"
            connection.sendall(body[10:])
            response = b""
            while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                response += chunk
        status_line = response.split(b"\r\n", 1)[0]
        assert status_line == b"HTTP/1.1 201 Created", response[:300]
        assert b"finished during shutdown" in response
        assert server.wait(timeout=30) == 0
        # The answered write is stored.
        server = start(binary, data, identity_port, api_port)
        listed = requests.get(f"http://127.0.0.1:{api_port}/api/tasks", headers={"Authorization": f"Bearer {token}"})
        assert [task["title"] for task in listed.json()["items"]] == ["finished during shutdown"]
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def test_sigterm_under_load_loses_no_request_on_a_kept_alive_connection(tmp_path):
    """Issue 51's F7: at SIGTERM the server finished each request under way and then closed its
    connection without saying so, and closed idle ones at once, so a keep-alive client's next
    request on it was lost (about one per connection). Now a response after the shutdown began
    says `Connection: close` and an idle connection is given a moment for a request on its way:
    every request sent on a kept-alive connection is answered, and every 201 is stored."""
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    server = start(binary, data, identity_port, api_port)
    try:
        token = sign_in(binary, data, identity_port)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        lock = threading.Lock()
        outcome = {"created": 0, "lost_on_reused_connection": 0, "answers": 0}
        enough = threading.Barrier(9)

        def client():
            connection, reused, counted = None, False, False
            while True:
                try:
                    if connection is None:
                        connection, reused = http.client.HTTPConnection("127.0.0.1", api_port, timeout=30), False
                    connection.request("POST", "/api/tasks", body=json.dumps({"title": "under load"}), headers=headers)
                    answer = connection.getresponse()
                    answer.read()
                    with lock:
                        outcome["answers"] += 1
                        outcome["created"] += answer.status == 201
                    if not counted:
                        counted = True
                        enough.wait()
                    if (answer.getheader("Connection") or "").lower() == "close":
                        connection.close()
                        connection = None
                    else:
                        reused = True
                except ConnectionRefusedError:
                    return  # the listener has closed: nothing was sent
                except (http.client.HTTPException, OSError):
                    with lock:
                        outcome["lost_on_reused_connection"] += reused
                    if connection is not None:
                        connection.close()
                    connection = None
                    if server.poll() is not None:
                        return

        workers = [threading.Thread(target=client) for _ in range(8)]
        for worker in workers:
            worker.start()
        enough.wait()  # every client has had an answer and keeps its connection
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
        for worker in workers:
            worker.join(timeout=30)
        assert outcome["lost_on_reused_connection"] == 0, outcome
        server = start(binary, data, identity_port, api_port)
        stored, url = 0, f"http://127.0.0.1:{api_port}/api/tasks?limit=100"
        while url:
            page = requests.get(url, headers=headers)
            stored += len(page.json()["items"])
            url = page.links.get("next", {}).get("url")
            url = url and f"http://127.0.0.1:{api_port}{url}"
        assert stored == outcome["created"], (stored, outcome)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
