"""The fixture as a project's suite uses it, against the real binary (scripts/test runs these)."""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

import pytest

from todob2c import TodoB2C, TodoB2CError

# Straight to the server on loopback, never through an http_proxy of the environment.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_form(url, form):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with DIRECT.open(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failure:
        return failure.code, json.loads(failure.read())


def ropc(todob2c, email, password):
    return post_form(todob2c.authority("B2C_1_ROPC") + "oauth2/v2.0/token", {
        "grant_type": "password", "client_id": todob2c.client_id, "username": email, "password": password,
        "scope": f"openid {todob2c.client_id}"})


def test_settings_name_the_running_server(todob2c):
    assert todob2c.settings["clientId"] == todob2c.client_id
    assert todob2c.settings["authority"].startswith(todob2c.identity_url)
    with DIRECT.open(todob2c.authority() + "v2.0/.well-known/openid-configuration", timeout=30) as answer:
        assert json.loads(answer.read())["issuer"].startswith(todob2c.identity_url)


def test_a_created_user_signs_in_and_gets_minted_tokens(todob2c):
    todob2c.create_user("alice@example.com", "Passw0rd!", "Alice")
    status, answer = ropc(todob2c, "alice@example.com", "Passw0rd!")
    assert status == 200 and answer["access_token"]
    minted = todob2c.tokens("alice@example.com", claims={"role": "admin"})
    assert minted["token_type"] == "Bearer" and minted["refresh_token"]
    # The Task API takes the minted token.
    request = urllib.request.Request(todob2c.api_url + "/api/tasks", headers={"Authorization": "Bearer " + minted["access_token"]})
    with DIRECT.open(request, timeout=30) as answer:
        assert answer.status == 200


def test_each_test_starts_from_the_seeded_tenant(todob2c):
    # What the test before left: its user is gone; the clock is the wall clock, no fault is armed.
    with pytest.raises(TodoB2CError) as gone:
        todob2c.tokens("alice@example.com")
    assert gone.value.status == 400 and "alice@example.com" in str(gone.value)
    # reset() itself, within one test: an account, a mail, a fault and a moved clock all go.
    todob2c.create_user("erin@example.com")
    todob2c.fail_next("B2C_1_ROPC", "server_error")
    todob2c.advance_clock(3600)
    assert todob2c.reset()["accountsRemoved"] == 1
    assert todob2c._call("GET", "/dev/clock")["offsetSeconds"] == 0
    todob2c.create_user("erin@example.com")
    assert ropc(todob2c, "erin@example.com", "Passw0rd!")[0] == 200, "the armed fault was disarmed"


def test_the_outbox_holds_the_code_of_a_sign_up(todob2c):
    base = f"{todob2c.identity_url}/{todob2c.tenant}/signup/v1.0/"
    status, started = post_form(base + "start", {
        "client_id": todob2c.client_id, "username": "carol@example.com", "password": "Str0ng-Pass!",
        "challenge_type": "oob password redirect", "attributes": json.dumps({"displayName": "Carol"})})
    assert status == 200, started
    status, challenged = post_form(base + "challenge", {"client_id": todob2c.client_id, "continuation_token": started["continuation_token"]})
    assert status == 200, challenged
    code = todob2c.latest_code("carol@example.com")
    assert code and len(code) == 8
    status, done = post_form(base + "continue", {
        "client_id": todob2c.client_id, "continuation_token": challenged["continuation_token"], "grant_type": "oob", "oob": code})
    assert status == 200, done
    assert ropc(todob2c, "carol@example.com", "Str0ng-Pass!")[0] == 200


def test_a_fault_fails_the_next_call_once_and_the_clock_expires_tokens(todob2c):
    todob2c.create_user("dave@example.com")
    todob2c.fail_next("B2C_1_ROPC", "server_error")
    status, answer = ropc(todob2c, "dave@example.com", "Passw0rd!")
    assert status >= 400 and answer["error"] == "server_error"
    assert ropc(todob2c, "dave@example.com", "Passw0rd!")[0] == 200
    token = todob2c.tokens("dave@example.com")["access_token"]
    todob2c.advance_clock(7200)
    request = urllib.request.Request(todob2c.api_url + "/api/tasks", headers={"Authorization": "Bearer " + token})
    with pytest.raises(urllib.error.HTTPError) as refused:
        DIRECT.open(request, timeout=30)
    assert refused.value.code == 401


def test_refusals_carry_the_servers_code(todob2c):
    with pytest.raises(TodoB2CError) as unknown:
        todob2c.fail_next("B2C_1_nope", "server_error")
    assert unknown.value.status == 404 and "AADB2C90037" in str(unknown.value)
    with pytest.raises(TodoB2CError):
        todob2c.advance_clock(-5)


def test_a_server_of_its_own_stops_and_leaves_nothing():
    server = TodoB2C().start()
    data_dir, process = server.data_dir, server.process
    server.stop()
    assert process.poll() is not None and not os.path.exists(data_dir)
    with pytest.raises(OSError):
        DIRECT.open(server.identity_url + "/healthz", timeout=5)


def test_the_servers_environment_has_no_telemetry_or_todo_settings_of_the_caller(monkeypatch):
    import todob2c

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "app-under-test")
    monkeypatch.setenv("TODO_DATABASE_URL", "postgres://elsewhere/db")
    environment = todob2c._environment()
    assert not [key for key in environment if key.startswith(("OTEL_EXPORTER", "OTEL_SERVICE", "TODO_"))]
    assert environment["OTEL_SDK_DISABLED"] == "true"
