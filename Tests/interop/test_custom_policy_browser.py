"""Chromium through a custom policy (B2C_1A_test_susi, this project's local-accounts policies in the
IEF schema): the unified page with B2C's element ids, "Sign up now", the email proven with a code,
the account written by the policy's directory profile, then a sign-in; the tokens verify with the
policy's own JWKS. Screenshots land in artifacts/ as identity-custom-*.png."""

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlparse

import requests
from authlib.jose import JsonWebKey
from authlib.jose import jwt as jose_jwt
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from browser import navigation_wait
from conftest import unique_email, verify_email_in_browser
from test_browser import Receiver, browser, receiver, shot  # noqa: F401 (fixtures)
from test_custom_policies import implicit_app, invitation, upload_invitation_policy, upload_local_policies

POLICY = "B2C_1A_test_susi"


def policy_authorize(server, redirect, meta, extra=None):
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    params = {
        "client_id": server.client_id, "response_type": "code", "redirect_uri": redirect,
        "scope": f"openid offline_access {server.client_id}", "state": secrets.token_urlsafe(8), "nonce": secrets.token_urlsafe(8),
        "code_challenge": challenge, "code_challenge_method": "S256", **(extra or {}),
    }
    return f"{meta['authorization_endpoint']}?{urlencode(params)}", params, verifier


def redeem_and_verify(server, meta, params, verifier):
    code = Receiver.received[-1]["code"][0]
    assert Receiver.received[-1]["state"] == [params["state"]]
    tokens = requests.post(meta["token_endpoint"], data={
        "grant_type": "authorization_code", "client_id": server.client_id, "code": code,
        "redirect_uri": params["redirect_uri"], "code_verifier": verifier}, timeout=30)
    assert tokens.status_code == 200, tokens.text
    keys = JsonWebKey.import_key_set(requests.get(meta["jwks_uri"], timeout=30).json())
    claims = jose_jwt.decode(tokens.json()["id_token"], keys, claims_options={
        "iss": {"essential": True, "value": meta["issuer"]}, "aud": {"essential": True, "value": server.client_id}})
    claims.validate()
    assert claims["nonce"] == params["nonce"] and claims["tfp"] == POLICY
    return claims


def test_custom_policy_sign_up_then_sign_in_in_chromium(server, receiver, browser):  # noqa: F811
    upload_local_policies(server)
    meta = server.discovery(POLICY)
    wait = navigation_wait(browser)
    email, password = unique_email("chromium-ief"), "Policy-Pass1"

    url, params, verifier = policy_authorize(server, receiver, meta)
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "signInName")))
    shot(browser, "custom-sign-in")
    browser.find_element(By.ID, "createAccount").click()
    wait.until(ready.presence_of_element_located((By.ID, "email_ver_but_send")))
    verify_email_in_browser(browser, email)
    shot(browser, "custom-sign-up-verified")
    browser.find_element(By.ID, "newPassword").send_keys(password)
    browser.find_element(By.ID, "reenterPassword").send_keys(password)
    browser.find_element(By.ID, "displayName").send_keys("Chromium Ief")
    shot(browser, "custom-sign-up")
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    signed_up = redeem_and_verify(server, meta, params, verifier)
    assert signed_up["newUser"] is True and signed_up["greeting"] == "Hello Chromium Ief"

    # prompt=login: the unified page asks again; a wrong password is told on the page.
    url, params, verifier = policy_authorize(server, receiver, meta, {"prompt": "login"})
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "signInName")))
    browser.find_element(By.ID, "signInName").send_keys(email)
    browser.find_element(By.ID, "password").send_keys("Wrong-Pass1")
    browser.find_element(By.ID, "next").click()
    wait.until(ready.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your password is incorrect."))
    assert browser.find_element(By.ID, "signInName").get_attribute("value") == email, "the typed address is kept"
    shot(browser, "custom-sign-in-error")
    browser.find_element(By.ID, "password").clear()
    browser.find_element(By.ID, "password").send_keys(password)
    browser.find_element(By.ID, "next").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    signed_in = redeem_and_verify(server, meta, params, verifier)
    assert signed_in["sub"] == signed_up["sub"] and "newUser" not in signed_in


def test_invitation_page_with_display_claims_in_chromium(server, receiver, browser):  # noqa: F811
    """An invitation (id_token_hint) in Chromium: the GetClaims step reads it, the page shows its
    DisplayClaims (the word, required: an empty submission is told so on the page), and the ID
    token in the redirect's fragment carries what the invitation said."""
    secret = upload_invitation_policy(server)
    client_id = implicit_app("Chromium invitations", receiver)
    meta = server.discovery("B2C_1A_test_invite")
    wait = navigation_wait(browser)
    email = unique_email("chromium-invitee")
    params = {"client_id": client_id, "redirect_uri": receiver, "scope": "openid", "response_type": "id_token",
              "nonce": secrets.token_urlsafe(8), "state": secrets.token_urlsafe(8), "id_token_hint": invitation(email, secret)}
    browser.get(f"{meta['authorization_endpoint']}?{urlencode(params)}")
    wait.until(ready.presence_of_element_located((By.ID, "word")))
    shot(browser, "custom-invitation")
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.text_to_be_present_in_element((By.TAG_NAME, "body"), "is required"))
    browser.find_element(By.ID, "word").send_keys("hello")
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    answer = {name: values[0] for name, values in parse_qs(urlparse(browser.current_url).fragment).items()}
    keys = JsonWebKey.import_key_set(requests.get(meta["jwks_uri"], timeout=30).json())
    claims = jose_jwt.decode(answer["id_token"], keys, claims_options={
        "iss": {"essential": True, "value": meta["issuer"]}, "aud": {"essential": True, "value": client_id}})
    claims.validate()
    assert claims["email"] == email and claims["word"] == "hello" and claims["nonce"] == params["nonce"]
    assert answer["state"] == params["state"]
