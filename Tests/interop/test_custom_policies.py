"""authlib's OpenID Connect client signing up, signing in, refreshing and resetting a password on
custom policies (B2C_1A_…) this project wrote in the IEF schema (Tests/interop/policies/local),
uploaded with `todo-server policies upload` to the running server, through the hosted pages."""

import os
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urljoin

import requests

from authlib.jose import JsonWebKey
from authlib.jose import jwt as jose_jwt

from conftest import Page, outbox_code, unique_email
from test_authlib_and_pyjwt import authorize, new_client, validate_id_token

LOCAL = Path(__file__).parent / "policies" / "local"


def policy_command(*arguments, check=True):
    """`todo-server policies …` against the running server's store."""
    command = [os.environ["TODO_SERVER_BIN"], "policies", *arguments, "--data-dir", str(Path(os.environ["TODO_SETTINGS"]).parent)]
    if os.environ.get("TODO_SERVER_DATABASE_URL"):
        command += ["--database-url", os.environ["TODO_SERVER_DATABASE_URL"]]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert not check or result.returncode == 0, result.stderr
    return result


def upload_local_policies(server):
    """The local-accounts policies, for the server's tenant, through the admin commands: the signing
    key set their JWT issuer names first (once per server), as B2C's setup makes it before the upload."""
    if policy_command("keys", "create", "TokenSigningKeyContainer", check=False).returncode == 0:
        policy_command("keys", "generate", "TokenSigningKeyContainer")
    with tempfile.TemporaryDirectory() as folder:
        for file in LOCAL.glob("*.xml"):
            (Path(folder) / file.name).write_text(file.read_text().replace("TENANT", server.tenant))
        policy_command("upload", folder)


def verified_claims(meta, token, client_id):
    """A token's claims, its signature, issuer and audience checked (a refreshed ID token has no nonce to check)."""
    jwks = JsonWebKey.import_key_set(requests.get(meta["jwks_uri"]).json())
    claims = jose_jwt.decode(token, jwks, claims_options={"iss": {"essential": True, "value": meta["issuer"]},
                                                          "aud": {"essential": True, "value": client_id}})
    claims.validate()
    return claims


def step(session, page, form_id, values):
    response = page.submit(session, form_id, values)
    assert response.status_code in (302, 303), response.text[:500]
    return Page(session.get(urljoin(page.response.url, response.headers["Location"])))


def test_authlib_signs_up_in_refreshes_and_resets_on_custom_policies(server):
    upload_local_policies(server)
    meta = server.discovery("B2C_1A_test_susi")
    assert "B2C_1A_test_susi" in meta["authorization_endpoint"]
    email, password = unique_email("ief"), "Custom-Pass1"
    browser = requests.Session()

    def sign_up(page):
        form = Page(page.submit(browser, "createAccountForm", {}))
        page = Page(browser.get(urljoin(page.response.url, form.response.headers["Location"])))
        page = step(browser, page, "emailVerificationControl", {"email": email})
        page = step(browser, page, "emailVerificationCodeForm", {"email_ver_input": outbox_code(browser, page.response.url, email)})
        assert "email_success" in page.response.text
        return page.submit(browser, "attributeVerification", {"newPassword": password, "reenterPassword": password, "displayName": "Ivy"})

    client = new_client(server)
    token, nonce = authorize(server, meta, client, browser, sign_up)
    claims = validate_id_token(meta, token["id_token"], server.client_id, nonce)
    assert claims["tfp"] == "B2C_1A_test_susi" and claims["newUser"] is True
    assert claims["name"] == "Ivy" and claims["greeting"] == "Hello Ivy" and claims["email"] == email.lower()
    # Signed with the policy's own key set (its JWKS verified it above), not the user flows' key.
    kid = jose_jwt.decode(token["id_token"], JsonWebKey.import_key_set(requests.get(meta["jwks_uri"]).json())).header["kid"]
    flow_keys = requests.get(server.discovery("B2C_1_susi")["jwks_uri"]).json()["keys"]
    assert kid not in {key["kid"] for key in flow_keys}
    # The Task API started before the policy was uploaded: it trusts the tenant, so it finds the
    # policy's key by the token's tfp and takes its access token.
    tasks = requests.get(f"{server.settings['taskAPI']}/api/tasks", headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=30)
    assert tasks.status_code == 200, tasks.text

    refreshed = client.refresh_token(meta["token_endpoint"], refresh_token=token["refresh_token"])
    again = verified_claims(meta, refreshed["id_token"], server.client_id)
    assert again["sub"] == claims["sub"] and again["greeting"] == "Hello Ivy", "a refresh keeps the sign-in's claims"

    # Reset on the reset policy, then sign in with the new password in a fresh browser.
    reset_meta = server.discovery("B2C_1A_test_reset")
    new_password = "Custom-Pass2"

    def reset(page):
        page = step(browser, page, "emailVerificationControl", {"email": email})
        page = step(browser, page, "emailVerificationCodeForm", {"email_ver_input": outbox_code(browser, page.response.url, email)})
        page = step(browser, page, "attributeVerification", {})
        return page.submit(browser, "attributeVerification", {"newPassword": new_password, "reenterPassword": new_password})

    reset_token, reset_nonce = authorize(server, reset_meta, new_client(server), browser, reset)
    assert validate_id_token(reset_meta, reset_token["id_token"], server.client_id, reset_nonce)["sub"] == claims["sub"]

    fresh = requests.Session()

    def sign_in(page):
        refused = page.submit(fresh, "localAccountForm", {"signInName": email, "password": password})
        assert refused.status_code == 400 and "Your password is incorrect." in refused.text
        return page.submit(fresh, "localAccountForm", {"signInName": email, "password": new_password})

    signed_in, nonce = authorize(server, meta, new_client(server), fresh, sign_in)
    assert validate_id_token(meta, signed_in["id_token"], server.client_id, nonce)["sub"] == claims["sub"]


INVITE = Path(__file__).parent / "policies" / "invite"
INVITATION_AUDIENCE, INVITATION_ISSUER = "invitations-of-the-interop-suite", "https://invites.example"
_invitation_secrets = {}


def server_command(*arguments):
    """`todo-server …` against the running server's store."""
    command = [os.environ["TODO_SERVER_BIN"], *arguments, "--data-dir", str(Path(os.environ["TODO_SETTINGS"]).parent)]
    if os.environ.get("TODO_SERVER_DATABASE_URL"):
        command += ["--database-url", os.environ["TODO_SERVER_DATABASE_URL"]]
    return command


def upload_invitation_policy(server):
    """The invitation policy and its key set B2C_1A_IdTokenHintKey with a fresh secret, once per
    server (the tests that use it share it): the secret the app signs invitations with."""
    import base64
    import secrets as stdlib_secrets

    if server.base in _invitation_secrets:
        return _invitation_secrets[server.base]
    upload_local_policies(server)
    secret = base64.b64encode(stdlib_secrets.token_bytes(32)).decode()
    policy_command("keys", "create", "IdTokenHintKey")
    uploaded = subprocess.run(server_command("policies", "keys", "upload-secret", "IdTokenHintKey", "--secret-stdin"),
                              input=secret + "\n", capture_output=True, text=True, timeout=120)
    assert uploaded.returncode == 0, uploaded.stderr
    with tempfile.TemporaryDirectory() as folder:
        text = (INVITE / "B2C_1A_test_invite.xml").read_text().replace("TENANT", server.tenant)
        (Path(folder) / "B2C_1A_test_invite.xml").write_text(text)
        policy_command("upload", folder)
    _invitation_secrets[server.base] = secret
    return secret


def implicit_app(name, redirect):
    """An app allowed the implicit response types (a journey that signs nobody in answers with an
    ID token only), redirecting to `redirect`: its client id."""
    import json

    app = subprocess.run(server_command("apps", "add", "--name", name, "--allow-implicit", "--redirect-uri", redirect, "--json"),
                         capture_output=True, text=True, timeout=120)
    assert app.returncode == 0, app.stderr
    return json.loads(app.stdout)["clientId"]


def invitation(email, secret, lifetime=600):
    """An invitation as Microsoft's id_token_hint sample mints one: PyJWT, HS256, the shared secret."""
    import time

    import jwt as pyjwt

    now = int(time.time())
    claims = {"userId": email, "name": "Ivy Invitee", "nbf": now, "exp": now + lifetime, "iss": INVITATION_ISSUER, "aud": INVITATION_AUDIENCE}
    return pyjwt.encode(claims, secret, algorithm="HS256")


def test_pyjwt_invitation_hint_runs_the_get_claims_journey(server):
    """PyJWT signs the invitation with HS256 and the secret uploaded as B2C_1A_IdTokenHintKey; the
    policy's GetClaims step checks it and reads its claims. An expired one and one signed with
    another secret are refused in B2C's words."""
    import secrets as stdlib_secrets
    from urllib.parse import parse_qs, urlencode, urlparse

    import jwt as pyjwt

    secret = upload_invitation_policy(server)
    client_id = implicit_app("Invitations", "https://jwt.ms")
    meta = server.discovery("B2C_1A_test_invite")
    email = unique_email("invitee")

    def start(hint):
        nonce = stdlib_secrets.token_hex(8)
        query = urlencode({"client_id": client_id, "redirect_uri": "https://jwt.ms", "scope": "openid", "response_type": "id_token",
                           "nonce": nonce, "state": "s1", "id_token_hint": hint})
        browser = requests.Session()
        return browser, browser.get(f"{meta['authorization_endpoint']}?{query}", allow_redirects=False), nonce

    def fragment(response):
        assert response.status_code == 302, response.text[:500]
        location = response.headers["Location"]
        assert location.startswith("https://jwt.ms#"), location
        return {name: values[0] for name, values in parse_qs(urlparse(location).fragment).items()}

    def follow(browser, response):
        while response.status_code in (302, 303) and not response.headers["Location"].startswith("https://jwt.ms"):
            response = browser.get(urljoin(response.url, response.headers["Location"]), allow_redirects=False)
        return response

    browser, first, nonce = start(invitation(email, secret))
    page = Page(follow(browser, first))
    answer = fragment(follow(browser, page.submit(browser, "attributeVerification", {"word": "hello"})))
    key = pyjwt.PyJWKClient(meta["jwks_uri"]).get_signing_key_from_jwt(answer["id_token"]).key
    token = pyjwt.decode(answer["id_token"], key, algorithms=["RS256"], audience=client_id, issuer=meta["issuer"])
    assert token["email"] == email and token["name"] == "Ivy Invitee" and token["word"] == "hello" and token["nonce"] == nonce

    for hint, code in [(invitation(email, secret, lifetime=-3600), "AADB2C90208"),
                       (invitation(email, "another-secret-of-32-characters!"), "AADB2C90233")]:
        _, refused, _ = start(hint)
        parameters = fragment(refused)
        assert parameters["error"] == "invalid_request" and parameters["error_description"].startswith(code + ":"), parameters
        assert parameters["state"] == "s1" and "id_token" not in parameters
