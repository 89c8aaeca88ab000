"""Multi-factor authentication (SPEC §2.11) with parts nobody here wrote: Chromium shows the
enrolment page, zxing-cpp reads the QR code from a screenshot of it, and pyotp computes the
authenticator's codes from the `otpauth://` URI the code carries. Without a browser: five wrong
codes end the sign-in with AADB2C90151, as B2C reports it to the app."""

import io
import time
from urllib.parse import parse_qs, urljoin, urlparse

import pyotp
import requests
import zxingcpp
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from browser import navigation_wait
from conftest import Page, complete_sign_up, unique_email, verify_email_in_browser
from test_browser import Receiver, authorize_url, browser, receiver, redeem, shot  # noqa: F401 (fixtures)

POLICY = "B2C_1_susi_mfa"


def mfa_url(server, redirect, extra=None):
    url, params, verifier = authorize_url(server, redirect, extra)
    return url.replace("/B2C_1_susi/", f"/{POLICY}/"), params, verifier


def redeem_mfa(server, code, params, verifier):
    return requests.post(
        f"{server.base}/{server.tenant}/{POLICY}/oauth2/v2.0/token",
        data={"grant_type": "authorization_code", "client_id": server.client_id, "code": code,
              "redirect_uri": params["redirect_uri"], "code_verifier": verifier},
        timeout=30,
    )


def test_enrol_from_the_qr_code_in_chromium_then_sign_in_with_a_code(server, receiver, browser):
    wait = navigation_wait(browser)
    email, password = unique_email("mfa"), "Mfa-Pass-1"
    url, params, verifier = mfa_url(server, receiver)
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "localAccountForm")))
    browser.find_element(By.ID, "createAccount").click()
    wait.until(ready.presence_of_element_located((By.ID, "attributeVerification")))
    verify_email_in_browser(browser, email)
    browser.find_element(By.ID, "newPassword").send_keys(password)
    browser.find_element(By.ID, "reenterPassword").send_keys(password)
    browser.find_element(By.ID, "displayName").send_keys("Mia Factor")
    browser.find_element(By.ID, "continue").click()

    # The enrolment page: what Chromium drew is read back by a decoder nobody here wrote.
    qr = wait.until(ready.presence_of_element_located((By.ID, "qrCode")))
    shot(browser, "mfa-enrol")
    decoded = zxingcpp.read_barcodes(Image.open(io.BytesIO(qr.screenshot_as_png)))
    assert [result.format.name for result in decoded] == ["QRCode"], decoded
    uri = decoded[0].text
    assert uri == browser.find_element(By.ID, "otpauthLink").get_attribute("href")
    totp = pyotp.parse_uri(uri)
    assert isinstance(totp, pyotp.TOTP) and totp.issuer == "TodoB2C" and totp.name == email
    # The key shown for typing is the same key.
    typed = browser.find_element(By.ID, "totpSecret").text.replace(" ", "")
    assert typed == totp.secret

    browser.find_element(By.ID, "otpCode").send_keys(totp.now())
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    code = Receiver.received[-1]["code"][0]
    tokens = redeem_mfa(server, code, params, verifier)
    assert tokens.status_code == 200, tokens.text

    # A new sign-in asks for a code, no QR code now; the next step's code is accepted (±1 step),
    # and the one used at enrolment is not accepted twice.
    url, params, verifier = mfa_url(server, receiver, {"prompt": "login"})
    browser.get(url)
    wait.until(ready.presence_of_element_located((By.ID, "localAccountForm")))
    browser.find_element(By.ID, "email").send_keys(email)
    browser.find_element(By.ID, "password").send_keys(password)
    browser.find_element(By.ID, "next").click()
    wait.until(ready.presence_of_element_located((By.ID, "otpCode")))
    assert not browser.find_elements(By.ID, "qrCode")
    shot(browser, "mfa-code")
    browser.find_element(By.ID, "otpCode").send_keys(totp.at(int(time.time()) + 30))
    browser.find_element(By.ID, "continue").click()
    wait.until(ready.presence_of_element_located((By.ID, "done")))
    code = Receiver.received[-1]["code"][0]
    assert redeem_mfa(server, code, params, verifier).status_code == 200


def test_five_wrong_codes_end_the_sign_in_with_aadb2c90151(server):
    email, password = unique_email("mfa-guess"), "Mfa-Pass-1"
    session = requests.Session()
    redirect = "http://127.0.0.1:9"
    url, params, _ = mfa_url(server, redirect)
    page = Page(session.get(url))
    # Sign up (the email proven through the outbox), which stops at the enrolment page.
    page = Page(session.get(page.link("createAccount")))
    created = complete_sign_up(session, page, email, password, "Guess Who")
    assert created.status_code in (302, 303), created.text[:300]
    enrol = Page(session.get(urljoin(created.url, created.headers["Location"])))
    assert "otpauth://totp/" in enrol.response.text
    outcome = None
    for _ in range(6):
        outcome = enrol.submit(session, "attributeVerification", {"code": "000000"})
        if outcome.status_code != 400:
            break
        enrol = Page(outcome)
    assert outcome.status_code == 302, outcome.text[:300]
    location = urlparse(outcome.headers["Location"])
    assert location.netloc == "127.0.0.1:9"
    error = parse_qs(location.query)
    assert error["error"] == ["access_denied"] and error["error_description"][0].startswith("AADB2C90151")
    assert error["state"] == [params["state"]]
