"""authlib's OAuth 2.0 / OIDC client and PyJWT against the identity service, configured with
nothing but the authority's discovery document."""

import requests
import jwt as pyjwt
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey
from authlib.jose import jwt as jose_jwt

from conftest import Page, complete_sign_up, unique_email

REDIRECT = "http://127.0.0.1:8765"


def new_client(server):
    return OAuth2Session(
        server.client_id,
        scope=f"openid offline_access {server.client_id}",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
        token_endpoint_auth_method="none",
    )


def authorize(server, meta, client, browser, fill):
    verifier = generate_token(48)
    nonce = generate_token(20)
    url, state = client.create_authorization_url(meta["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    page = Page(browser.get(url))
    response = fill(page)
    assert response.status_code == 302, response.text[:500]
    location = response.headers["Location"]
    assert location.startswith(REDIRECT + "?"), location
    token = client.fetch_token(meta["token_endpoint"], authorization_response=location, code_verifier=verifier)
    return token, nonce


def validate_id_token(meta, token, client_id, nonce):
    jwks = JsonWebKey.import_key_set(requests.get(meta["jwks_uri"]).json())
    claims = jose_jwt.decode(
        token,
        jwks,
        claims_options={
            "iss": {"essential": True, "value": meta["issuer"]},
            "aud": {"essential": True, "value": client_id},
            "nonce": {"essential": True, "value": nonce},
        },
    )
    claims.validate()
    return claims


def test_authlib_sign_up_sign_in_refresh_and_sign_out(server):
    meta = server.discovery("B2C_1_susi")
    email, password = unique_email("authlib"), "Interop-Pass1"

    browser = requests.Session()

    def sign_up(page):
        signup = Page(browser.get(page.link("createAccount")))
        return complete_sign_up(browser, signup, email, password, "Ada Authlib")

    client = new_client(server)
    token, nonce = authorize(server, meta, client, browser, sign_up)
    claims = validate_id_token(meta, token["id_token"], server.client_id, nonce)
    assert claims["name"] == "Ada Authlib"
    assert claims["emails"] == [email]
    assert claims["newUser"] is True
    assert claims["tfp"] == "B2C_1_susi"
    assert "idp" not in claims

    # A second sign-in in a fresh browser (no SSO cookie) goes through the sign-in page.
    fresh = requests.Session()
    client2 = new_client(server)
    token2, nonce2 = authorize(
        server,
        meta,
        client2,
        fresh,
        lambda page: page.submit(fresh, "localAccountForm", {"email": email.upper(), "password": password}),
    )
    claims2 = validate_id_token(meta, token2["id_token"], server.client_id, nonce2)
    assert claims2["oid"] == claims["oid"]
    assert "newUser" not in claims2

    # Refresh rotates the refresh token; the access token validates with PyJWT from the JWKS.
    refreshed = client2.refresh_token(meta["token_endpoint"], refresh_token=token2["refresh_token"])
    assert refreshed["refresh_token"] != token2["refresh_token"]
    signing_key = pyjwt.PyJWKClient(meta["jwks_uri"]).get_signing_key_from_jwt(refreshed["access_token"])
    access = pyjwt.decode(
        refreshed["access_token"],
        signing_key.key,
        algorithms=["RS256"],
        audience=server.client_id,
        issuer=meta["issuer"],
    )
    assert access["oid"] == claims["oid"]
    assert access["azp"] == server.client_id

    # Presented again at once (a client racing itself), the rotated-out token gets the same
    # successor; once the successor is used, the old token is a reused one and revokes the family.
    raced = requests.post(
        meta["token_endpoint"],
        data={"grant_type": "refresh_token", "client_id": server.client_id, "refresh_token": token2["refresh_token"]},
    )
    assert raced.status_code == 200 and raced.json()["refresh_token"] == refreshed["refresh_token"]
    moved_on = client2.refresh_token(meta["token_endpoint"], refresh_token=refreshed["refresh_token"])
    assert moved_on["refresh_token"] != refreshed["refresh_token"]
    reuse = requests.post(
        meta["token_endpoint"],
        data={"grant_type": "refresh_token", "client_id": server.client_id, "refresh_token": token2["refresh_token"]},
    )
    assert reuse.status_code == 400
    assert reuse.json()["error"] == "invalid_grant"
    assert reuse.json()["error_description"].startswith("AADB2C90129:")

    # Sign-out through the end_session_endpoint returns to the app with state.
    out = fresh.get(
        meta["end_session_endpoint"],
        params={"post_logout_redirect_uri": REDIRECT, "state": "bye", "id_token_hint": token2["id_token"]},
        allow_redirects=False,
    )
    assert out.status_code == 302
    assert out.headers["Location"] == REDIRECT + "?state=bye"


def test_pyjwt_rejects_tampered_and_wrong_audience_tokens(server):
    email, password = unique_email("pyjwt"), "Interop-Pass1"
    signup_user(server, email, password)
    meta = server.discovery("B2C_1_ROPC")
    token = server.ropc(email, password).json()["access_token"]
    key = pyjwt.PyJWKClient(meta["jwks_uri"]).get_signing_key_from_jwt(token).key
    pyjwt.decode(token, key, algorithms=["RS256"], audience=server.client_id, issuer=meta["issuer"])
    header, payload, signature = token.split(".")
    tampered = ".".join([header, payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB"), signature])
    for bad in (tampered,):
        try:
            pyjwt.decode(bad, key, algorithms=["RS256"], audience=server.client_id, issuer=meta["issuer"])
        except pyjwt.PyJWTError:
            pass
        else:
            raise AssertionError("a tampered token validated")
    try:
        pyjwt.decode(token, key, algorithms=["RS256"], audience="someone-else", issuer=meta["issuer"])
    except pyjwt.InvalidAudienceError:
        pass
    else:
        raise AssertionError("the wrong audience validated")


def signup_user(server, email, password):
    """Creates an account through the sign-up-only flow's hosted page, as a user would."""
    meta = server.discovery("B2C_1_sign_up")
    client = new_client(server)
    browser = requests.Session()
    authorize(
        server,
        meta,
        client,
        browser,
        lambda page: complete_sign_up(browser, page, email, password, "Ropc User"),
    )


def test_ropc_over_raw_http(server):
    email, password = unique_email("ropc"), "Interop-Pass1"
    signup_user(server, email, password)
    response = server.ropc(email, password)
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json()
    for field in ("access_token", "id_token", "refresh_token", "expires_in", "expires_on", "not_before", "profile_info"):
        assert field in body, field
    assert isinstance(body["expires_in"], int)
    assert body["token_type"] == "Bearer"

    wrong = server.ropc(email, "Wrong-Pass1")
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"
    description = wrong.json()["error_description"]
    assert description.startswith("AADB2C90225: ")
    assert "\r\nCorrelation ID: " in description and "\r\nTimestamp: " in description

    not_ropc = server.ropc(email, password, policy="B2C_1_susi")
    assert not_ropc.status_code == 400
    assert not_ropc.json()["error_description"].startswith("AADB2C90086")


def test_authlib_refresh_cannot_ask_for_more_than_was_granted(server):
    """RFC 6749 §6 through authlib's own refresh call: a sign-in for `openid offline_access` (no
    API) cannot be refreshed into a Microsoft Graph or Task API token on a B2C policy (the second
    outside attack found a Graph token issued so); the refused refresh costs the client nothing."""
    email, password = unique_email("narrow"), "Interop-Pass1"
    signup_user(server, email, password)
    granted = server.ropc(email, password, scope="openid offline_access")
    assert granted.status_code == 200, granted.text
    assert "access_token" not in granted.json()
    meta = server.discovery("B2C_1_ROPC")
    client = OAuth2Session(server.client_id, token_endpoint_auth_method="none")
    for wider in ("https://graph.microsoft.com/User.Read offline_access", f"openid {server.client_id}"):
        try:
            widened = client.refresh_token(meta["token_endpoint"], refresh_token=granted.json()["refresh_token"], scope=wider)
            raise AssertionError(f"refreshed into {wider}: {widened}")
        except Exception as error:  # authlib raises OAuthError for the 400
            assert "AADB2C90205" in str(getattr(error, "description", error)), error
    same = client.refresh_token(meta["token_endpoint"], refresh_token=granted.json()["refresh_token"])
    assert "id_token" in same and "access_token" not in same
