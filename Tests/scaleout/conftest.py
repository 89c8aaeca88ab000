"""The scale-out stage's fixtures: two todo-server instances on one PostgreSQL behind nginx,
started by scripts/test (start_scaleout in scripts/lib.sh), described by SCALE_* variables."""

import os
import subprocess
import sys

import pytest

# The browser helpers of the interop tests, and their deadline on every HTTP call.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
import http_deadline  # noqa: E402,F401


class Deployment:
    def __init__(self):
        def need(name):
            value = os.environ.get(name)
            if not value:
                pytest.fail(f"{name} is not set: scripts/test's scale-out stage sets it")
            return value

        self.identity = need("SCALE_IDENTITY_URL")
        self.api = need("SCALE_API_URL")
        self.instances = {
            "a": (f"http://127.0.0.1:{need('SCALE_A_IDENTITY_PORT')}", f"http://127.0.0.1:{need('SCALE_A_API_PORT')}"),
            "b": (f"http://127.0.0.1:{need('SCALE_B_IDENTITY_PORT')}", f"http://127.0.0.1:{need('SCALE_B_API_PORT')}"),
        }
        self.pids = {"a": int(need("SCALE_A_PID")), "b": int(need("SCALE_B_PID"))}
        self.database = need("SCALE_DATABASE_URL")
        self.data_key = need("SCALE_DATA_KEY")
        self.binary = need("TODO_SERVER_BIN")
        self.pg_ctl = need("SCALE_PG_CTL")
        import json

        with open(need("SCALE_SETTINGS")) as handle:
            self.settings = json.load(handle)
        self.tenant = self.settings["tenant"]
        self.client_id = self.settings["clientId"]

    def admin(self, *arguments, stdin=None):
        """todo-server's admin command on the shared database, from a data dir of its own."""
        environment = dict(os.environ, TODO_DATA_KEY=self.data_key)
        result = subprocess.run(
            [self.binary, *arguments, "--database-url", self.database, "--data-dir", os.environ.get("TMPDIR", "/tmp") + "/scale-admin"],
            input=stdin, capture_output=True, text=True, timeout=120, env=environment,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture(scope="session")
def deployment():
    return Deployment()
