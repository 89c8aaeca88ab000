"""The Task API over a real socket: a 10 MB header is refused without taking the server down,
slow and idle connections are closed, idle connections cannot exhaust the descriptor limit, and
browsers from an allowed origin get CORS headers."""

import http.client
import os
import resource
import socket
import subprocess
import time

import requests

from test_durability import free_port, sign_in, start


def start_with(environment, tmp_path):
    """todo-server serve with extra environment variables; returns it and its two ports."""
    binary = os.environ["TODO_SERVER_BIN"]
    identity_port, api_port = free_port(), free_port()
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        return start(binary, tmp_path / "data", identity_port, api_port), identity_port, api_port
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def test_ten_megabyte_header_is_refused_and_the_server_keeps_serving(tmp_path):
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    server = start(binary, data, identity_port, api_port)
    try:
        # A valid token, so that only the header's size can refuse the request.
        token = sign_in(binary, data, identity_port)
        head = f"GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n".encode()
        small = head + b"X-Padding: " + b"a" * 1024 + b"\r\n\r\n"
        with socket.create_connection(("127.0.0.1", api_port), timeout=10) as sock:
            sock.sendall(small)
            assert sock.recv(4096).startswith(b"HTTP/1.1 200"), "the same request with a small header must pass"
        answer = b""
        closed = False
        with socket.create_connection(("127.0.0.1", api_port), timeout=5) as sock:
            try:
                sock.sendall(head + b"X-Padding: " + b"a" * (10 * 1024 * 1024) + b"\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True  # refused while the header was still arriving
            except TimeoutError:
                pass  # the server answered and stopped reading: its answer is waiting
            try:
                answer = sock.recv(4096)
                closed = closed or answer == b""
            except ConnectionResetError:
                closed = True
        # Refused: an HTTP 4xx answer, or the connection closed without one; never served.
        assert closed or answer.startswith(b"HTTP/1.1 4"), answer[:100]
        assert requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=5).status_code == 200
        assert server.poll() is None, "the server died"
    finally:
        server.kill()
        server.wait()


def open_descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_connections_cannot_exhaust_the_descriptor_limit(tmp_path):
    """Under a 256-descriptor limit, 400 idle connections: the server stays under its limit,
    does not spin, its other port keeps answering, and once the idle timeout frees slots the
    crowded port answers again."""
    binary = os.environ["TODO_SERVER_BIN"]
    identity_port, api_port = free_port(), free_port()

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    environment = dict(os.environ, TODO_IDLE_TIMEOUT="3")
    server = subprocess.Popen(
        [binary, "serve", "--data-dir", str(tmp_path / "data"), "--identity-port", str(identity_port), "--api-port", str(api_port),
         "--password-hash-cost", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=low_limit, env=environment,
    )
    crowd = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        for _ in range(400):
            crowd.append(socket.create_connection(("127.0.0.1", api_port), timeout=10))
        time.sleep(0.5)
        assert open_descriptors(server.pid) < 256, "the server reached its descriptor limit"
        before = cpu_seconds(server.pid)
        time.sleep(2)
        assert cpu_seconds(server.pid) - before < 0.5, "the server spins while connections wait"
        # The other listener has its own share.
        assert requests.get(f"http://127.0.0.1:{identity_port}/healthz", timeout=5).status_code == 200
        # The crowd idles out (3 s each, in turns), and the port answers again.
        answered = None
        deadline = time.time() + 60
        while time.time() < deadline and answered is None:
            try:
                answered = requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=10).status_code
            except requests.RequestException:
                time.sleep(0.5)
        assert answered == 200
        assert server.poll() is None
    finally:
        for sock in crowd:
            sock.close()
        server.kill()
        server.wait()


def closed_within(sock, seconds):
    """Whether the server closes `sock` within `seconds` (reads until EOF or a reset)."""
    sock.settimeout(0.5)
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def test_a_trickled_body_is_cut_and_one_address_cannot_hold_the_listener(tmp_path):
    """The second outside attack's F-10: a body sent one byte every second used to hold its
    connection for ever (the idle timer restarts on every part); with the listener capped at 20,
    20 such connections from one address shut everyone out. Now a body must come at 1 KB/s once
    10 s have passed, and one address holds at most a quarter of the connections."""
    server, _, api_port = start_with({"TODO_MAX_CONNECTIONS": "20", "TODO_IDLE_TIMEOUT": "30"}, tmp_path)
    held = []
    try:
        trickler = socket.create_connection(("127.0.0.1", api_port), timeout=10)
        trickler.sendall(b"POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n")
        started = time.time()
        cut = False
        while time.time() - started < 25:
            try:
                trickler.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            if closed_within(trickler, 1):
                cut = True
                break
        waited = time.time() - started
        assert cut and waited < 15, f"the trickled body held its connection for {waited:.0f} s"
        trickler.close()

        # Five connections from 127.0.0.1 (a quarter of 20); the sixth is closed at once.
        for _ in range(5):
            held.append(socket.create_connection(("127.0.0.1", api_port), timeout=10))
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", api_port), timeout=10)
        assert closed_within(extra, 3), "a sixth connection from one address was kept"
        extra.close()
        # Another address is still served.
        other = socket.create_connection(("127.0.0.1", api_port), timeout=10, source_address=("127.0.0.2", 0))
        other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert other.recv(4096).startswith(b"HTTP/1.1 200")
        other.close()
        # Closing the held ones gives the address its share back.
        for sock in held:
            sock.close()
        held.clear()
        time.sleep(0.3)
        assert requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
        server.kill()
        server.wait()


def test_cors_for_an_allowed_origin(tmp_path):
    server, _, api_port = start_with({"TODO_CORS_ORIGINS": "http://app.example"}, tmp_path)
    try:
        preflight = requests.options(
            f"http://127.0.0.1:{api_port}/api/tasks",
            headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization, content-type"},
        )
        assert preflight.status_code in (200, 204)
        assert preflight.headers.get("Access-Control-Allow-Origin") == "http://app.example"
        assert "POST" in preflight.headers.get("Access-Control-Allow-Methods", "")
        unauthenticated = requests.get(f"http://127.0.0.1:{api_port}/api/tasks", headers={"Origin": "http://app.example"})
        assert unauthenticated.status_code == 401
        assert unauthenticated.headers.get("Access-Control-Allow-Origin") == "http://app.example"
        missing = requests.get(
            f"http://127.0.0.1:{api_port}/api/tasks/00000000-0000-0000-0000-000000000000",
            headers={"Origin": "http://app.example", "Authorization": "Bearer not-a-token"},
        )
        assert missing.headers.get("Access-Control-Allow-Origin") == "http://app.example"
        stranger = requests.options(
            f"http://127.0.0.1:{api_port}/api/tasks",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "DELETE"},
        )
        assert "Access-Control-Allow-Origin" not in stranger.headers
    finally:
        server.kill()
        server.wait()


def test_slow_and_idle_connections_are_closed(tmp_path):
    server, identity_port, api_port = start_with({"TODO_IDLE_TIMEOUT": "2"}, tmp_path)
    try:
        for port in (identity_port, api_port):
            # A header that never ends (slowloris), and a connection that never sends anything.
            slow = socket.create_connection(("127.0.0.1", port), timeout=10)
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            idle = socket.create_connection(("127.0.0.1", port), timeout=10)
            started = time.monotonic()
            for sock in (slow, idle):
                with sock:
                    # recv returns b"" once the server closes; a timeout here means it never did.
                    assert sock.recv(1024) == b"", "the server answered instead of closing"
            assert time.monotonic() - started < 8
            # Other clients are served meanwhile and after.
            assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        server.kill()
        server.wait()


def test_a_flood_of_the_identity_port_leaves_the_task_api_its_keys(tmp_path):
    """Issue 51's F8: the Task API fetched its issuer's keys through the identity port as a
    127.0.0.1 client, so idle connections from 127.0.0.1 filling that address's share made every
    authenticated call of a fresh server answer 503. In one process the keys come from the
    identity service without a socket."""
    server, identity_port, api_port = start_with({"TODO_MAX_CONNECTIONS": "20"}, tmp_path)
    held = []
    try:
        token = sign_in(os.environ["TODO_SERVER_BIN"], tmp_path / "data", identity_port)
        # 127.0.0.1 takes its whole share of the identity port (a quarter of 20), as a flood
        # would: connections are opened until the server closes one at once, so the share is
        # full (the sign-in's own connection may still count for a moment).
        for _ in range(10):
            sock = socket.create_connection(("127.0.0.1", identity_port), timeout=10)
            if closed_within(sock, 0.5):
                sock.close()
                break
            held.append(sock)
        else:
            raise AssertionError("the identity port kept ten connections from one address")
        assert len(held) >= 4, len(held)
        # The API has fetched no key yet; a caller from another address is served.
        api = http.client.HTTPConnection("127.0.0.1", api_port, timeout=15, source_address=("127.0.0.2", 0))
        api.request("GET", "/api/tasks", headers={"Authorization": f"Bearer {token}"})
        answer = api.getresponse()
        assert answer.status == 200, (answer.status, answer.read()[:300])
        api.close()
    finally:
        for sock in held:
            sock.close()
        server.kill()
        server.wait()
