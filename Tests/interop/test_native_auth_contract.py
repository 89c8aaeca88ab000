"""External ID's native authentication API against its published contract (SPEC §2.15).

No third-party client for this API installs here: MSAL's native-auth SDKs are iOS, Android and
JavaScript. So this suite checks the wire itself, endpoint by endpoint, against the field names,
types, status codes and error codes Microsoft's native-authentication API reference documents
(facts restated in our own words; the expected shapes below are written for this project).
It drives the running server over real HTTP as such an SDK would, reading codes from the
development outbox."""

import base64
import json
import re
import uuid

import pytest
import requests

from conftest import unique_email

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z$")
ERROR_MEMBERS = {"error", "error_description", "error_codes", "timestamp", "trace_id", "correlation_id"}
# Members an error may add where the reference defines them.
ERROR_EXTRAS = {"suberror", "continuation_token", "required_attributes", "invalid_attributes", "unverified_attributes"}


class Native:
    def __init__(self, server):
        self.server = server
        self.base = f"{server.base}/{server.tenant}"

    def post(self, endpoint, **fields):
        fields.setdefault("client_id", self.server.client_id)
        response = requests.post(f"{self.base}/{endpoint}", data=fields, timeout=30)
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        assert "no-store" in response.headers.get("Cache-Control", ""), "the reference's answers carry tokens and are never cached"
        return response

    def code(self, email):
        outbox = requests.get(f"{self.server.base}/dev/outbox?format=json", timeout=30).json()["messages"]
        message = next(message for message in outbox if message["recipient"].lower() == email.lower())
        assert re.fullmatch(r"\d{8}", message["code"]), message
        return message["code"]


@pytest.fixture()
def native(server):
    return Native(server)


def ok(response, members):
    """A success: HTTP 200 with exactly these members."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == set(members), body
    assert isinstance(body.get("continuation_token", ""), str)
    return body


def refused(response, error, code, suberror=None, extras=()):
    """An error in the reference's form: 400, the six standard members, AADSTS in the description."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert ERROR_MEMBERS <= set(body) and set(body) - ERROR_MEMBERS <= ERROR_EXTRAS, body
    assert body["error"] == error and body["error_codes"] == [code], body
    assert body["error_description"].startswith(f"AADSTS{code}: "), body["error_description"]
    assert TIMESTAMP.match(body["timestamp"]), body["timestamp"]
    uuid.UUID(body["trace_id"])
    uuid.UUID(body["correlation_id"])
    assert body.get("suberror") == suberror, body
    assert set(extras) <= set(body), body
    return body


def sign_up(native, email, password="Contract-Passw0rd", name="Contract"):
    started = ok(native.post("signup/v1.0/start", username=email, challenge_type="oob password redirect", password=password,
                             attributes=json.dumps({"displayName": name})), {"continuation_token"})
    challenged = native.post("signup/v1.0/challenge", continuation_token=started["continuation_token"],
                             challenge_type="oob password redirect")
    done = ok(native.post("signup/v1.0/continue", continuation_token=challenged.json()["continuation_token"], grant_type="oob",
                          oob=native.code(email)), {"continuation_token"})
    return done["continuation_token"]


def test_sign_up_answers_the_reference_shapes(native):
    email = unique_email("contract")
    started = ok(native.post("signup/v1.0/start", username=email, challenge_type="oob password redirect"), {"continuation_token"})
    challenged = ok(native.post("signup/v1.0/challenge", continuation_token=started["continuation_token"],
                                challenge_type="oob password redirect"),
                    {"continuation_token", "challenge_type", "binding_method", "challenge_channel", "challenge_target_label",
                     "code_length", "interval"})
    assert challenged["challenge_type"] == "oob" and challenged["binding_method"] == "prompt"
    assert challenged["challenge_channel"] == "email" and challenged["code_length"] == 8 and isinstance(challenged["interval"], int)
    assert "*" in challenged["challenge_target_label"] and email not in challenged["challenge_target_label"]
    step = challenged["continuation_token"]
    refused(native.post("signup/v1.0/continue", continuation_token=step, grant_type="oob", oob="00000000"),
            "invalid_grant", 50181, "invalid_oob_value")
    # No password yet: credential_required with the next token; the challenge then asks for it.
    needed = refused(native.post("signup/v1.0/continue", continuation_token=step, grant_type="oob", oob=native.code(email)),
                     "credential_required", 55103, extras={"continuation_token"})
    password_step = ok(native.post("signup/v1.0/challenge", continuation_token=needed["continuation_token"],
                                   challenge_type="oob password redirect"), {"continuation_token", "challenge_type"})
    assert password_step["challenge_type"] == "password"
    refused(native.post("signup/v1.0/continue", continuation_token=password_step["continuation_token"], grant_type="password",
                        password="password"), "invalid_grant", 399246, "password_too_weak")
    attributes = refused(native.post("signup/v1.0/continue", continuation_token=password_step["continuation_token"],
                                     grant_type="password", password="Contract-Passw0rd"),
                         "attributes_required", 55106, extras={"continuation_token", "required_attributes"})
    required = attributes["required_attributes"]
    assert all(set(item) == {"name", "type", "required"} for item in required), required
    assert {"name": "displayName", "type": "string", "required": True} in required
    invalid = refused(native.post("signup/v1.0/continue", continuation_token=attributes["continuation_token"], grant_type="attributes",
                                  attributes=json.dumps({"displayName": ""})),
                      "invalid_grant", 55107, "attribute_validation_failed", extras={"invalid_attributes"})
    assert invalid["invalid_attributes"] == [{"name": "displayName"}]
    done = ok(native.post("signup/v1.0/continue", continuation_token=attributes["continuation_token"], grant_type="attributes",
                          attributes=json.dumps({"displayName": "Contract"})), {"continuation_token"})
    tokens = native.post("oauth2/v2.0/token", continuation_token=done["continuation_token"], grant_type="continuation_token",
                         username=email, scope=f"openid offline_access {native.server.client_id}", client_info="true")
    check_tokens(tokens)
    refused(native.post("signup/v1.0/start", username=email, challenge_type="oob password redirect"),
            "user_already_exists", 1003037)


def check_tokens(response):
    """The token response the JavaScript SDK requires: every member present, Bearer, expires_in > 0, client_info."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert {"token_type", "scope", "expires_in", "ext_expires_in", "access_token", "refresh_token", "id_token", "client_info"} <= set(body)
    assert body["token_type"] == "Bearer" and body["expires_in"] > 0
    padded = body["client_info"] + "=" * (-len(body["client_info"]) % 4)
    info = json.loads(base64.urlsafe_b64decode(padded))
    assert set(info) >= {"uid", "utid"}, info
    return body


def test_sign_in_answers_the_reference_shapes(native):
    email = unique_email("contract-in")
    sign_up(native, email)
    started = ok(native.post("oauth2/v2.0/initiate", username=email, challenge_type="password redirect",
                             capabilities="registration_required mfa_required"), {"continuation_token"})
    challenged = ok(native.post("oauth2/v2.0/challenge", continuation_token=started["continuation_token"],
                                challenge_type="password redirect"), {"continuation_token", "challenge_type"})
    assert challenged["challenge_type"] == "password"
    step = challenged["continuation_token"]
    scope = f"openid offline_access {native.server.client_id}"
    refused(native.post("oauth2/v2.0/token", continuation_token=step, grant_type="password", password="Wrong-Passw0rd", scope=scope),
            "invalid_grant", 50126)
    check_tokens(native.post("oauth2/v2.0/token", continuation_token=step, grant_type="password", password="Contract-Passw0rd",
                             scope=scope, client_info="true"))
    # Spent, unknown, and the other refusals the reference lists for initiate.
    refused(native.post("oauth2/v2.0/token", continuation_token=step, grant_type="password", password="Contract-Passw0rd", scope=scope),
            "invalid_request", 55200)
    refused(native.post("oauth2/v2.0/initiate", username=email, challenge_type="password"), "invalid_request", 901007)
    refused(native.post("oauth2/v2.0/initiate", username=unique_email("nobody"), challenge_type="password redirect"),
            "user_not_found", 50034)
    refused(native.post("oauth2/v2.0/initiate", username="not-an-address", challenge_type="password redirect"),
            "invalid_request", 90100)
    unknown = native.post("oauth2/v2.0/initiate", client_id=str(uuid.uuid4()), username=email, challenge_type="password redirect")
    assert unknown.status_code == 400 and unknown.json()["error"] == "unauthorized_client"
    # A client that can take neither a password nor a code: the browser, in the reference's form.
    assert ok(native.post("oauth2/v2.0/initiate", username=email, challenge_type="redirect"), {"challenge_type"}) == {
        "challenge_type": "redirect"}


def test_password_reset_answers_the_reference_shapes(native):
    email = unique_email("contract-reset")
    sign_up(native, email)
    started = ok(native.post("resetpassword/v1.0/start", username=email, challenge_type="oob redirect"), {"continuation_token"})
    challenged = ok(native.post("resetpassword/v1.0/challenge", continuation_token=started["continuation_token"],
                                challenge_type="oob redirect"),
                    {"continuation_token", "challenge_type", "binding_method", "challenge_channel", "challenge_target_label",
                     "code_length", "interval"})
    proven = ok(native.post("resetpassword/v1.0/continue", continuation_token=challenged["continuation_token"], grant_type="oob",
                            oob=native.code(email)), {"continuation_token", "expires_in"})
    assert 0 < proven["expires_in"] <= 600
    refused(native.post("resetpassword/v1.0/submit", continuation_token=proven["continuation_token"], new_password="short"),
            "invalid_grant", 399246, "password_too_short")
    submitted = ok(native.post("resetpassword/v1.0/submit", continuation_token=proven["continuation_token"],
                               new_password="Contract-Reset1"), {"continuation_token", "poll_interval"})
    assert isinstance(submitted["poll_interval"], int)
    polled = ok(native.post("resetpassword/v1.0/poll_completion", continuation_token=submitted["continuation_token"]),
                {"status", "continuation_token"})
    assert polled["status"] == "succeeded"
    check_tokens(native.post("oauth2/v2.0/token", continuation_token=polled["continuation_token"], grant_type="continuation_token",
                             username=email, scope=f"openid offline_access {native.server.client_id}"))
    refused(native.post("resetpassword/v1.0/start", username=unique_email("nobody"), challenge_type="oob redirect"),
            "user_not_found", 50034)
