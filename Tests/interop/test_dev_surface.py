"""The test-control surface as a tester's script uses it (issue 11): tokens without a browser
from `todo-server token` and `POST /dev/tokens`, accepted by the Task API like a sign-in's; the
outbox as JSON; and nothing of it for a Host the service does not answer to."""

import json
import os
import subprocess
from pathlib import Path

import requests

from conftest import unique_email
from test_cli import add_user


def task_api(server):
    return server.settings["taskAPI"]


def test_todo_server_token_mints_what_the_task_api_accepts(server):
    email = add_user(unique_email("minted"))
    command = [os.environ["TODO_SERVER_BIN"], "token", "--data-dir", str(Path(os.environ["TODO_SETTINGS"]).parent),
               "--user", email, "--client", server.client_id]
    if os.environ.get("TODO_SERVER_DATABASE_URL"):
        command += ["--database-url", os.environ["TODO_SERVER_DATABASE_URL"]]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    tokens = json.loads(result.stdout)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    created = requests.post(f"{task_api(server)}/api/tasks", json={"title": "minted"}, headers=bearer, timeout=30)
    assert created.status_code == 201, created.text
    assert [item["title"] for item in requests.get(f"{task_api(server)}/api/tasks", headers=bearer, timeout=30).json()["items"]] == ["minted"]

    unknown = subprocess.run(command[:-4] + ["--user", "nobody@example.com", "--client", server.client_id],
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr


def test_dev_tokens_and_the_outbox_over_http(server):
    email = add_user(unique_email("devhttp"))
    minted = requests.post(f"{server.base}/dev/tokens", json={"user": email, "client": server.client_id}, timeout=30)
    assert minted.status_code == 200, minted.text
    bearer = {"Authorization": f"Bearer {minted.json()['access_token']}"}
    assert requests.get(f"{task_api(server)}/api/tasks", headers=bearer, timeout=30).status_code == 200
    outbox = requests.get(f"{server.base}/dev/outbox", headers={"Accept": "application/json"}, timeout=30)
    assert outbox.status_code == 200 and isinstance(outbox.json()["messages"], list)

    # A Host this service does not answer to gets no surface (DNS rebinding gets nowhere).
    for path in ("/dev/tokens", "/dev/reset"):
        foreign = requests.post(f"{server.base}{path}", json={"user": email, "client": server.client_id},
                                headers={"Host": "rebound.example"}, timeout=30)
        assert foreign.status_code == 404, path
