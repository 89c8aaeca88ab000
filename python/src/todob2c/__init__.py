"""TodoB2C for Python tests: start `todo-server` on free loopback ports and drive its test-control
surface (`/dev/*`): users, tokens, the outbox, faults and the clock. Standard library only."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

__all__ = ["TodoB2C", "TodoB2CError"]
__version__ = "0.9.0"


class TodoB2CError(Exception):
    """A refusal of the server (`error` and `error_description` of its answer), or a start that failed."""

    def __init__(self, message, code=None, status=None):
        super().__init__(message)
        self.code, self.status = code, status


# Calls to the server go straight to it on loopback, never through an http_proxy of the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _environment():
    """The environment without TODO_* and OTEL_* variables: a developer's own (a database URL, a
    data key, an OpenTelemetry collector of the app under test) must not reach the server or its
    admin commands; the test server exports nothing."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("TODO_", "OTEL_"))}
    environment["OTEL_SDK_DISABLED"] = "true"
    return environment


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TodoB2C:
    """One `todo-server serve` process and its data directory. `start()` returns once both
    listeners answer `/healthz`; `stop()` ends the process (SIGTERM, then SIGKILL) and removes
    the directory."""

    def __init__(self, binary=None, extra_args=(), timeout=60):
        self.binary = binary or os.environ.get("TODO_SERVER_BIN") or shutil.which("todo-server")
        if not self.binary:
            raise TodoB2CError("todo-server was not found: give --todob2c-binary, TODO_SERVER_BIN, or put it on PATH")
        self.extra_args, self.timeout = list(extra_args), timeout
        self.process = None
        self.data_dir = None
        self.settings = {}

    # -- lifecycle --

    def start(self):
        # A port found free can be taken before the server binds it: try again on new ports.
        last = None
        for _ in range(3):
            try:
                return self._start_once()
            except TodoB2CError as error:
                last = error
                self.stop()
        raise last

    def _start_once(self):
        self.data_dir = tempfile.mkdtemp(prefix="todob2c-")
        identity_port, api_port = _free_port(), _free_port()
        while api_port == identity_port:
            api_port = _free_port()
        self.log_path = os.path.join(self.data_dir, "server.log")
        command = [
            self.binary, "serve", "--data-dir", os.path.join(self.data_dir, "data"), "--identity-port", str(identity_port),
            "--api-port", str(api_port), "--password-hash-cost", "4", *self.extra_args,
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_environment())
        # The addresses the server writes its issuer and settings with (127.0.0.1): a token minted
        # through another name would carry another issuer.
        self.identity_url = f"http://127.0.0.1:{identity_port}"
        self.api_url = f"http://127.0.0.1:{api_port}"
        deadline = time.monotonic() + self.timeout
        for url in (f"{self.identity_url}/healthz", f"{self.api_url}/healthz"):
            while True:
                if self.process.poll() is not None:
                    raise TodoB2CError(f"todo-server exited ({self.process.returncode}): {self._log_tail()}")
                try:
                    with _DIRECT.open(url, timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise TodoB2CError(f"{url} did not answer within {self.timeout} s: {self._log_tail()}")
                time.sleep(0.1)
        with open(os.path.join(self.data_dir, "data", "settings.json"), encoding="utf-8") as file:
            self.settings = json.load(file)
        return self

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _log_tail(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                return log.read()[-2000:]
        except OSError:
            return "(no log)"

    # -- what a test needs --

    @property
    def client_id(self):
        return self.settings["clientId"]

    @property
    def tenant(self):
        return self.settings["tenant"]

    def authority(self, policy="B2C_1_susi"):
        """The B2C authority of a user flow: `{identity_url}/{tenant}/{policy}/`."""
        return f"{self.identity_url}/{self.tenant}/{policy}/"

    def create_user(self, email, password="Passw0rd!", name="Test User"):
        """A local account, made by `todo-server users add` on the running server's data."""
        result = subprocess.run(
            [self.binary, "users", "add", "--data-dir", os.path.join(self.data_dir, "data"), "--email", email, "--name", name,
             "--password-stdin"],
            input=password + "\n", capture_output=True, text=True, timeout=60, env=_environment())
        if result.returncode != 0:
            raise TodoB2CError(result.stderr.strip() or result.stdout.strip(), status=result.returncode)
        return {"email": email, "password": password, "name": name}

    def tokens(self, user, client=None, policy=None, scope=None, claims=None):
        """The token response a sign-in gives, from the real issuer (`POST /dev/tokens`)."""
        body = {"user": user, "client": client or self.client_id}
        for key, value in (("policy", policy), ("scope", scope), ("claims", claims)):
            if value is not None:
                body[key] = value
        return self._call("POST", "/dev/tokens", body)

    def outbox(self):
        """The mails sent, newest first, each with its `code` parsed out."""
        return self._call("GET", "/dev/outbox")["messages"]

    def latest_code(self, email):
        """The code of the newest mail to `email` that carries one, or None."""
        for message in self.outbox():
            if message["recipient"].lower() == email.lower() and message.get("code"):
                return message["code"]
        return None

    def fail_next(self, policy, error):
        """The next authorize or token call on the flow answers `error` (`AADB2C90091`, `server_error`, …) once."""
        self._call("POST", "/dev/faults", {"policy": policy, "error": error})

    def advance_clock(self, seconds):
        """Moves the server's time forward: tokens, codes and sessions expire without sleeping."""
        return self._call("POST", "/dev/clock", {"advanceSeconds": seconds})

    def reset(self):
        """Back to the seeded tenant: accounts, outbox, faults and the clock."""
        self._call("DELETE", "/dev/faults")
        self._call("DELETE", "/dev/clock")
        return self._call("POST", "/dev/reset", {})

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.identity_url + path, data=data, method=method, headers={"Accept": "application/json"})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with _DIRECT.open(request, timeout=30) as answer:
                text = answer.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as failure:
            text = failure.read().decode("utf-8", "replace")
            try:
                answer = json.loads(text)
            except ValueError:
                answer = {}
            raise TodoB2CError(answer.get("error_description") or text, code=answer.get("error"), status=failure.code) from None
