"""The hosted pages in a real Chromium (Debian's chromium + chromium-driver, driven by
Selenium): sign up, come back with a code, sign in again. Screenshots of each page go to the
artifacts directory, and one more on failure."""

import base64
import hashlib
import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from browser import navigation_wait
from conftest import unique_email, verify_email_in_browser

ARTIFACTS = os.environ.get("TODO_ARTIFACTS", "artifacts")


class Receiver(BaseHTTPRequestHandler):
    """The app's loopback redirect URI: records what the identity service sent back."""

    received = []

    def do_GET(self):
        query = parse_qs(urlparse(self.path).query)
        if "code" in query or "error" in query:  # not /favicon.ico
            Receiver.received.append(query)
        body = b"<!DOCTYPE html><title>Signed in</title><h1 id='done'>You can close this tab.</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def receiver():
    httpd = HTTPServer(("127.0.0.1", 0), Receiver)
    Receiver.received = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture()
def browser(request):
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        os.makedirs(ARTIFACTS, exist_ok=True)
        driver.save_screenshot(os.path.join(ARTIFACTS, f"failure-{request.node.name}.png"))
    driver.quit()


def shot(driver, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    driver.save_screenshot(os.path.join(ARTIFACTS, f"identity-{name}.png"))


def authorize_url(server, redirect, extra=None):
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    params = {
        "client_id": server.client_id,
        "response_type": "code",
        "redirect_uri": redirect,
        "scope": f"openid offline_access {server.client_id}",
        "state": secrets.token_urlsafe(8),
        "nonce": secrets.token_urlsafe(8),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    params.update(extra or {})
    return f"{server.base}/{server.tenant}/B2C_1_susi/oauth2/v2.0/authorize?{urlencode(params)}", params, verifier


def redeem(server, code, params, verifier):
    return requests.post(
        f"{server.base}/{server.tenant}/B2C_1_susi/oauth2/v2.0/token",
        data={
            "grant_type": "authorization_code",
            "client_id": server.client_id,
            "code": code,
            "redirect_uri": params["redirect_uri"],
            "code_verifier": verifier,
        },
    )


def test_sign_up_then_sign_in_in_chromium(server, receiver, browser):
    wait = navigation_wait(browser)
    email, password = unique_email("chromium"), "Browser-Pass1"

    url, params, verifier = authorize_url(server, receiver)
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "localAccountForm")))
    shot(browser, "sign-in")
    browser.find_element(By.ID, "createAccount").click()
    wait.until(ready.presence_of_element_located((By.ID, "attributeVerification")))
    shot(browser, "sign-up-email")
    verify_email_in_browser(browser, email)
    # An error first: mismatched passwords are reported on the page and typed input is kept.
    browser.find_element(By.ID, "newPassword").send_keys(password)
    browser.find_element(By.ID, "reenterPassword").send_keys(password + "x")
    browser.find_element(By.ID, "displayName").send_keys("Chrome User")
    browser.find_element(By.ID, "continue").click()
    error = wait.until(ready.presence_of_element_located((By.ID, "error")))
    assert "do not match" in error.text
    assert browser.find_element(By.ID, "email").get_attribute("value") == email
    shot(browser, "sign-up-error")
    browser.find_element(By.ID, "newPassword").send_keys(password)
    browser.find_element(By.ID, "reenterPassword").send_keys(password)
    shot(browser, "sign-up")
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    assert Receiver.received[-1]["state"] == [params["state"]]
    code = Receiver.received[-1]["code"][0]
    tokens = redeem(server, code, params, verifier)
    assert tokens.status_code == 200, tokens.text
    assert "id_token" in tokens.json()

    # Sign in again with prompt=login: the page asks for the password, and the code comes back.
    url, params, verifier = authorize_url(server, receiver, {"prompt": "login"})
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "localAccountForm")))
    browser.find_element(By.ID, "email").send_keys(email)
    browser.find_element(By.ID, "password").send_keys(password)
    browser.find_element(By.ID, "next").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    code = Receiver.received[-1]["code"][0]
    assert redeem(server, code, params, verifier).status_code == 200


def entra_url(server, redirect, extra=None):
    """An authorization on the Microsoft identity platform face (`/common`), as the MSAL Graph
    tutorial starts it."""
    url, params, verifier = authorize_url(server, redirect, {"scope": "openid profile offline_access User.Read", **(extra or {})})
    return url.replace(f"/{server.tenant}/B2C_1_susi/", "/common/"), params, verifier


def test_entra_consent_and_account_picker_in_chromium(server, receiver, browser):
    """SPEC §2.9 in a real browser: a new user signs up at /common and meets the consent page;
    a second one too; prompt=select_account then lists both, and the one clicked is signed in."""
    wait = navigation_wait(browser)
    people = [(unique_email("picker-a"), "Ada Picker"), (unique_email("picker-b"), "Bo Picker")]
    for index, (email, name) in enumerate(people):
        url, _, _ = entra_url(server, receiver, {"prompt": "login"} if index else None)
        browser.get(url)
        wait.until(ready.presence_of_element_located((By.ID, "localAccountForm")))
        assert not browser.find_elements(By.ID, "forgotPassword"), "the Entra face offers no B2C reset hand-off"
        browser.find_element(By.ID, "createAccount").click()
        wait.until(ready.presence_of_element_located((By.ID, "attributeVerification")))
        verify_email_in_browser(browser, email)
        browser.find_element(By.ID, "newPassword").send_keys("Picker-Pass1")
        browser.find_element(By.ID, "reenterPassword").send_keys("Picker-Pass1")
        browser.find_element(By.ID, "displayName").send_keys(name)
        browser.find_element(By.ID, "continue").click()
        wait.until(ready.presence_of_element_located((By.ID, "consentForm")))
        assert "Sign you in and read your profile" in browser.find_element(By.ID, "permissions").text
        assert browser.find_element(By.ID, "account").text == email
        shot(browser, f"entra-consent-{index}")
        browser.find_element(By.ID, "accept").click()
        wait.until(ready.presence_of_element_located((By.ID, "done")))
        assert "code" in Receiver.received[-1]

    url, params, verifier = entra_url(server, receiver, {"prompt": "select_account"})
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "useAnotherAccount")))
    shot(browser, "entra-account-picker")
    listed = browser.find_element(By.ID, "main").text
    assert people[0][0] in listed and people[1][0] in listed
    choice = [button for button in browser.find_elements(By.CSS_SELECTOR, "form.account button") if people[0][0] in button.text]
    assert len(choice) == 1
    choice[0].click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    code = Receiver.received[-1]["code"][0]
    tokens = requests.post(
        f"{server.base}/common/oauth2/v2.0/token",
        data={
            "grant_type": "authorization_code", "client_id": server.client_id, "code": code,
            "redirect_uri": params["redirect_uri"], "code_verifier": verifier,
        },
        timeout=30,
    )
    assert tokens.status_code == 200, tokens.text
    payload = tokens.json()["id_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["preferred_username"] == people[0][0] and claims["ver"] == "2.0"
