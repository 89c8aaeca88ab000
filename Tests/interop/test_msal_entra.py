"""Microsoft's MSAL for Python on the Microsoft identity platform face (SPEC §2.9), as the MSAL
Graph tutorial uses it: a policy-less authority (`/common`, `/organizations`, the tenant id),
scope User.Read, the account's username from the ID token, Graph /me, a silent refresh. Only the
authority (and where MSAL validates it, its instance discovery) point here."""

import base64
import json
import os
from urllib.parse import parse_qsl, urljoin, urlparse

import msal
import pytest
import requests

from conftest import Page, complete_sign_up, unique_email

REDIRECT = "http://localhost:8766"


def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def redirect_parameters(response):
    assert response.status_code in (302, 303), response.text[:500]
    location = response.headers["Location"]
    assert location.startswith(REDIRECT), location
    return dict(parse_qsl(urlparse(location).query))


def sign_up_and_consent(browser, auth_uri, email, name):
    """A new user through the hosted pages, then Entra's consent page, accepted."""
    page = Page(browser.get(auth_uri))
    signup = Page(browser.get(page.link("createAccount")))
    response = complete_sign_up(browser, signup, email, "Entra-Pass1", name)
    assert response.status_code in (302, 303), response.text[:300]
    consent = Page(browser.get(urljoin(response.url, response.headers["Location"])))
    assert "consentForm" in consent.response.text, consent.response.text[:500]
    assert "Sign you in and read your profile" in consent.response.text
    return consent, consent.submit(browser, "consentForm", {})


def make_app(tls_server, segment, discovery):
    authority = f"{tls_server.base}/{segment}"
    if discovery == "pointed here":
        return msal.PublicClientApplication(
            tls_server.client_id, authority=authority, instance_discovery=f"{tls_server.base}/common/discovery/instance"
        )
    return msal.PublicClientApplication(tls_server.client_id, authority=authority, validate_authority=False)


@pytest.mark.parametrize(
    "segment,discovery",
    [("common", "pointed here"), ("organizations", "pointed here"), ("tenantId", "pointed here"), ("common", "off")],
)
def test_msal_graph_tutorial_on_entra_authorities(tls_server, segment, discovery):
    os.environ["REQUESTS_CA_BUNDLE"] = tls_server.ca
    tenant_id = tls_server.settings["tenantId"]
    app = make_app(tls_server, tenant_id if segment == "tenantId" else segment, discovery)
    scopes = ["User.Read"]
    flow = app.initiate_auth_code_flow(scopes, redirect_uri=REDIRECT)

    browser = requests.Session()
    browser.verify = tls_server.ca
    email = unique_email("entra")
    _, accepted = sign_up_and_consent(browser, flow["auth_uri"], email, "Erin Entra")
    result = app.acquire_token_by_auth_code_flow(flow, redirect_parameters(accepted))
    assert "access_token" in result, result

    id_claims = result["id_token_claims"]
    assert id_claims["ver"] == "2.0"
    assert id_claims["tid"] == tenant_id
    assert id_claims["iss"] == f"{tls_server.base}/{tenant_id}/v2.0"
    assert id_claims["preferred_username"] == email

    accounts = app.get_accounts()
    assert len(accounts) == 1
    account = accounts[0]
    assert account["username"] == email
    assert account["home_account_id"] == f"{id_claims['oid']}.{tenant_id}"

    me = requests.get(
        f"{tls_server.settings['graphBaseURL']}/v1.0/me",
        headers={"Authorization": f"Bearer {result['access_token']}"},
        verify=tls_server.ca,
        timeout=30,
    )
    assert me.status_code == 200, me.text
    assert me.json()["userPrincipalName"] == email and me.json()["displayName"] == "Erin Entra"

    cached = app.acquire_token_silent(scopes, account=account)
    assert cached["token_source"] == "cache"
    refreshed = app.acquire_token_silent_with_error(scopes, account=account, force_refresh=True)
    assert refreshed.get("token_source") == "identity_provider", refreshed
    assert refreshed["access_token"] != result["access_token"]
    assert claims(refreshed["access_token"])["scp"] == "User.Read"

    # The next sign-in in the same browser needs no password and no second consent.
    second = app.initiate_auth_code_flow(scopes, redirect_uri=REDIRECT)
    again = browser.get(second["auth_uri"], allow_redirects=False)
    assert "code" in redirect_parameters(again)


def test_msal_reports_a_refused_consent_and_an_unknown_tenant_in_entras_form(tls_server):
    os.environ["REQUESTS_CA_BUNDLE"] = tls_server.ca
    app = make_app(tls_server, "common", "pointed here")
    flow = app.initiate_auth_code_flow(["User.Read"], redirect_uri=REDIRECT)
    browser = requests.Session()
    browser.verify = tls_server.ca
    page = Page(browser.get(flow["auth_uri"]))
    signup = Page(browser.get(page.link("createAccount")))
    response = complete_sign_up(browser, signup, unique_email("decline"), "Entra-Pass1", "Dee Cline")
    consent = Page(browser.get(urljoin(response.url, response.headers["Location"])))
    cancel = [form for form in consent.forms if "cancel" in (form["action"] or "")][0]
    declined = browser.post(urljoin(consent.response.url, cancel["action"]), data=cancel["fields"], allow_redirects=False)
    result = app.acquire_token_by_auth_code_flow(flow, redirect_parameters(declined))
    assert result["error"] == "access_denied", result
    assert result["error_description"].startswith("AADSTS65004:")

    with pytest.raises(ValueError):
        make_app(tls_server, "nobody.onmicrosoft.com", "off")
    with pytest.raises(ValueError, match="invalid_instance"):
        msal.PublicClientApplication(
            tls_server.client_id,
            authority="https://login.example.net/common",
            instance_discovery=f"{tls_server.base}/common/discovery/instance",
        )
