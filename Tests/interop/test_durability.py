"""An acknowledged write survives `kill -9` of the server (SPEC §3): create a task, kill the
process without warning, start it again on the same data directory, and read the task back."""

import json
import os
import signal
import socket
import subprocess
import time

import requests


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(binary, data, identity_port, api_port):
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", str(data), "--identity-port", str(identity_port), "--api-port", str(api_port),
         "--password-hash-cost", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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


def test_acknowledged_write_survives_kill_9(tmp_path):
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    server = start(binary, data, identity_port, api_port)
    try:
        settings = json.loads((data / "settings.json").read_text())
        client = settings["clientId"]
        subprocess.run(
            [binary, "users", "add", "--data-dir", str(data), "--email", "durable@example.com", "--name", "Dee", "--password-stdin"],
            input="Durable-Pass1\n", text=True, check=True, capture_output=True,
        )
        token = requests.post(
            f"http://127.0.0.1:{identity_port}/{settings['tenant']}/B2C_1_ROPC/oauth2/v2.0/token",
            data={"grant_type": "password", "client_id": client, "username": "durable@example.com",
                  "password": "Durable-Pass1", "scope": f"openid {client}"},
        ).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
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
