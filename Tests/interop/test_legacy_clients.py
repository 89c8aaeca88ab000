"""The seeds' legacy native clients (SPEC §2.8), driven request by request as their code does:
the ADAL-preview app's web view (no PKCE, catches the oob navigation) and the NXOAuth2 app
(reads settings-nxoauth2.plist, sends no state and no PKCE, posts `client_secret=` empty, then
the .NET TaskService format at {taskAPI}/api/tasks)."""

import html
import os
import plistlib
import re
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import requests

from conftest import Page, complete_sign_up, unique_email

OOB = "urn:ietf:wg:oauth:2.0:oob"


def caught_oob_navigation(response):
    """What a web view's navigation delegate sees: the page's refresh target, once it is oob."""
    assert response.status_code == 200, response.text[:300]
    match = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', response.text)
    assert match, response.text[:500]
    target = html.unescape(match.group(1))
    assert target.startswith(OOB + "?"), target
    return parse_qs(urlparse(target).query)


def sign_up_in_web_view(authorize_url, prefix):
    browser = requests.Session()
    page = Page(browser.get(authorize_url))
    # A sign-up flow opens on the sign-up page; a sign-up-or-sign-in one links to it.
    signup = Page(browser.get(page.link("createAccount"))) if "createAccount" in page.links else page
    return complete_sign_up(browser, signup, unique_email(prefix), "Legacy-Pass1", f"{prefix} user")


def test_adal_web_view_without_pkce_catches_the_oob_navigation(server):
    settings = server.settings
    authority = settings["authority"].rstrip("/")
    query = {
        "response_type": "code",
        "client_id": settings["clientId"],
        "redirect_uri": OOB,
        "scope": f"openid offline_access {settings['clientId']}",
        "state": "adal-state",
        "p": settings["emailSignUpPolicyId"],
    }
    navigation = caught_oob_navigation(sign_up_in_web_view(f"{authority}/oauth2/v2.0/authorize?{urlencode(query)}", "adal"))
    assert navigation["state"] == ["adal-state"]
    token = requests.post(
        f"{authority}/oauth2/v2.0/token?p={settings['emailSignUpPolicyId']}",
        data={"grant_type": "authorization_code", "code": navigation["code"][0], "redirect_uri": OOB, "client_id": settings["clientId"]},
        timeout=30,
    )
    assert token.status_code == 200, token.text
    access = token.json()["access_token"]
    created = requests.post(
        settings["taskWebAPI"], json={"task": "from ADAL"}, headers={"Authorization": f"Bearer {access}"}, timeout=30
    )
    assert created.status_code == 201, created.text
    tasks = requests.get(settings["taskWebAPI"], headers={"Authorization": f"Bearer {access}"}, timeout=30).json()
    assert [task["task"] for task in tasks] == ["from ADAL"]


def test_nxoauth2_request_sequence_from_its_plist(server):
    data_dir = os.path.dirname(os.environ["TODO_SETTINGS"])
    with open(os.path.join(data_dir, "settings-nxoauth2.plist"), "rb") as handle:
        plist = plistlib.load(handle)
    assert plist["accountIdentifier"] == "B2C_Account"
    assert plist["clientID"] == server.client_id and plist["clientSecret"] == ""
    assert plist["bhh"] == OOB
    assert plist["contentType"] == "application/x-www-form-urlencoded"
    assert plist["loginURL"] == f"{server.base}/{server.tenant}/login"

    # NXOAuth2Client's authorize URL: its own parameters appended to authURL; no state, no PKCE.
    scope = f"openid {plist['clientID']}"
    auth_query = urlencode({"client_id": plist["clientID"], "response_type": "code", "redirect_uri": plist["bhh"], "scope": scope})
    navigation = caught_oob_navigation(sign_up_in_web_view(f"{plist['authURL']}&{auth_query}", "nxoauth2"))
    assert "state" not in navigation

    # The token request as NXOAuth2 sends it: form body, an empty client_secret included.
    token = requests.post(
        plist["tokenURL"],
        data={
            "grant_type": "authorization_code",
            "client_id": plist["clientID"],
            "client_secret": plist["clientSecret"],
            "redirect_uri": plist["bhh"],
            "code": navigation["code"][0],
            "scope": scope,
        },
        headers={"Content-Type": plist["contentType"]},
        timeout=30,
    )
    assert token.status_code == 200, token.text
    body = token.json()
    bearer = {"Authorization": f"{body['token_type']} {body['access_token']}"}

    tasks_url = f"{plist['taskAPI']}/api/tasks"
    assert requests.get(tasks_url, headers=bearer, timeout=30).json() == []
    for name in ["buy milk", "call mum & dad"]:
        created = requests.post(tasks_url, data={"Text": name}, headers=bearer, timeout=30)
        assert created.status_code == 201, created.text
    listed = requests.get(tasks_url, headers=bearer, timeout=30)
    assert listed.status_code == 200
    assert [task["Text"] for task in listed.json()] == ["call mum & dad", "buy milk"]
    assert requests.get(tasks_url, timeout=30).status_code == 401
    assert requests.post(tasks_url, data={"Text": ""}, headers=bearer, timeout=30).status_code == 422


def test_an_oob_request_from_a_confidential_app_gets_an_error_page(server):
    settings = server.settings
    query = {
        "response_type": "code",
        "client_id": settings["webClientId"],
        "redirect_uri": OOB,
        "scope": "openid",
        "p": settings["signUpSignInPolicyId"],
    }
    response = requests.get(f"{settings['authority'].rstrip('/')}/oauth2/v2.0/authorize?{urlencode(query)}", allow_redirects=False, timeout=30)
    # An unregistered redirect URI is shown on a page, never redirected to (SPEC §2.3).
    assert response.status_code == 400
    assert "AADB2C90006" in response.text
    assert "Location" not in response.headers
