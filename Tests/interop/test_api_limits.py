"""The Task API over a real socket: a 10 MB header is refused without taking the server down,
slow and idle connections are closed, and browsers from an allowed origin get CORS headers."""

import os
import socket
import time

import requests

from test_durability import free_port, start


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
    identity_port, api_port = free_port(), free_port()
    server = start(binary, tmp_path / "data", identity_port, api_port)
    try:
        request = (
            b"GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + b"a" * (10 * 1024 * 1024)
            + b"\r\n\r\n"
        )
        answer = b""
        with socket.create_connection(("127.0.0.1", api_port), timeout=5) as sock:
            try:
                sock.sendall(request)
                answer = sock.recv(4096)
            except OSError:
                pass  # the server may close the connection while the header is still arriving
        assert not answer.startswith(b"HTTP/1.1 2"), answer[:100]
        assert requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=5).status_code == 200
    finally:
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
