"""Shared fixtures for the interop tests: they talk to a running todo-server (started by
scripts/test) exactly like third-party apps would, over real HTTP on loopback."""

import html
import json
import os
import re
import secrets
from html.parser import HTMLParser
from urllib.parse import urljoin

import pytest
import requests

import http_deadline  # noqa: F401  (a deadline on every HTTP call)


class Server:
    def __init__(self, base, settings_path, ca=None):
        self.base = base.rstrip("/")
        with open(settings_path) as handle:
            self.settings = json.load(handle)
        self.tenant = self.settings["tenant"]
        self.client_id = self.settings["clientId"]
        self.ca = ca

    def discovery(self, policy):
        response = requests.get(
            f"{self.base}/{self.tenant}/{policy}/v2.0/.well-known/openid-configuration", verify=self.ca or True
        )
        response.raise_for_status()
        return response.json()

    def ropc(self, username, password, scope=None, policy="B2C_1_ROPC"):
        return requests.post(
            f"{self.base}/{self.tenant}/{policy}/oauth2/v2.0/token",
            data={
                "grant_type": "password",
                "client_id": self.client_id,
                "username": username,
                "password": password,
                "scope": scope or f"openid offline_access {self.client_id}",
                "response_type": "token id_token",
            },
            verify=self.ca or True,
        )


@pytest.fixture(scope="session")
def server():
    return Server(os.environ["TODO_IDENTITY_URL"], os.environ["TODO_SETTINGS"])


@pytest.fixture(scope="session")
def tls_server():
    base = os.environ.get("TODO_TLS_IDENTITY_URL")
    if not base:
        pytest.fail("TODO_TLS_IDENTITY_URL is not set: scripts/test starts a --tls server for these tests")
    return Server(base, os.environ["TODO_TLS_SETTINGS"], ca=os.environ["TODO_TLS_CA"])


def unique_email(prefix="user"):
    return f"{prefix}-{secrets.token_hex(4)}@example.com"


class _Forms(HTMLParser):
    def __init__(self):
        super().__init__()
        self.forms, self.links, self._form = [], {}, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._form = {"id": attrs.get("id"), "action": attrs.get("action"), "fields": {}}
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and attrs.get("name"):
            self._form["fields"][attrs["name"]] = attrs.get("value", "")
        elif tag == "a" and attrs.get("id"):
            self.links[attrs["id"]] = attrs.get("href")

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None


class Page:
    """A hosted page as a browser would see it: its forms and links."""

    def __init__(self, response):
        self.response = response
        parser = _Forms()
        parser.feed(response.text)
        self.forms, self.links = parser.forms, parser.links

    def form(self, form_id):
        for form in self.forms:
            if form["id"] == form_id:
                return form
        raise AssertionError(f"no form {form_id!r} on {self.response.url}: {self.response.text[:500]}")

    def submit(self, session, form_id, values, **kwargs):
        form = self.form(form_id)
        data = dict(form["fields"])
        data.update(values)
        return session.post(urljoin(self.response.url, form["action"]), data=data, allow_redirects=False, **kwargs)

    def link(self, link_id):
        return urljoin(self.response.url, self.links[link_id])


def outbox_code(session, page_url, email):
    """The code in the newest development-outbox message to `email` (newest first on the page)."""
    outbox = session.get(urljoin(page_url, "/dev/outbox")).text
    escaped = html.escape(email, quote=True)
    for item in outbox.split("<li>")[1:]:
        if escaped in item:
            match = re.search(r"\b(\d{6})\b", item)
            if match:
                return match.group(1)
    raise AssertionError(f"no code for {email} in the outbox")


def complete_sign_up(session, page, email, password, name):
    """B2C's sign-up page with email verification, as a user goes through it: "Send
    verification code", the code from the mail (the dev outbox), "Verify code", then the password
    and name and "Create". Returns the final response (the redirect to the app)."""

    def step(current, values):
        response = current.submit(session, "attributeVerification", values)
        assert response.status_code == 303, response.text[:500]
        return Page(session.get(urljoin(response.url, response.headers["Location"])))

    code_page = step(page, {"email": email})
    assert "email_ver_input" in code_page.response.text, code_page.response.text[:500]
    details = step(code_page, {"code": outbox_code(session, code_page.response.url, email)})
    assert "email_success" in details.response.text, details.response.text[:500]
    return details.submit(
        session, "attributeVerification", {"newPassword": password, "reenterPassword": password, "displayName": name}
    )


def verify_email_in_browser(driver, email, timeout=20):
    """The first two steps of the sign-up page in a real browser (Selenium): the address, "Send
    verification code", the code from the dev outbox, "Verify code"; leaves the details step."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready

    from browser import navigation_wait

    wait = navigation_wait(driver, timeout)
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "email_ver_but_send").click()
    wait.until(ready.presence_of_element_located((By.ID, "email_ver_input")))
    code = outbox_code(requests.Session(), driver.current_url, email)
    driver.find_element(By.ID, "email_ver_input").send_keys(code)
    driver.find_element(By.ID, "email_ver_but_verify").click()
    wait.until(ready.presence_of_element_located((By.ID, "email_success")))


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, so fixtures can screenshot failures."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
