"""Shared fixtures for the interop tests: they talk to a running todo-server (started by
scripts/test) exactly like third-party apps would, over real HTTP on loopback."""

import json
import os
import secrets
from html.parser import HTMLParser
from urllib.parse import urljoin

import pytest
import requests


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


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, so fixtures can screenshot failures."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
