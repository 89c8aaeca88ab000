"""Microsoft's MSAL for Python against the identity service over TLS, with only the authority
changed (https://learn.microsoft.com/entra/msal/python/). MSAL requires https, hence the --tls server."""

import os

import msal
import requests

from conftest import Page, complete_sign_up, unique_email


def test_msal_auth_code_flow_then_silent_refresh(tls_server):
    os.environ["REQUESTS_CA_BUNDLE"] = tls_server.ca
    authority = f"{tls_server.base}/{tls_server.tenant}/B2C_1_susi"
    app = msal.PublicClientApplication(tls_server.client_id, authority=authority)
    scopes = [tls_server.client_id]
    redirect = "http://localhost:8766"
    flow = app.initiate_auth_code_flow(scopes, redirect_uri=redirect)

    browser = requests.Session()
    browser.verify = tls_server.ca
    page = Page(browser.get(flow["auth_uri"]))
    signup = Page(browser.get(page.link("createAccount")))
    email, password = unique_email("msal"), "Interop-Pass1"
    response = complete_sign_up(browser, signup, email, password, "Mia Msal")
    assert response.status_code == 302, response.text[:300]
    location = response.headers["Location"]
    query = dict(pair.split("=", 1) for pair in location.split("?", 1)[1].split("&"))
    result = app.acquire_token_by_auth_code_flow(flow, {k: requests.utils.unquote(v) for k, v in query.items()})
    assert "access_token" in result, result
    assert result["id_token_claims"]["name"] == "Mia Msal"

    accounts = app.get_accounts()
    assert len(accounts) == 1
    account = accounts[0]
    assert account["home_account_id"].endswith(f"-b2c_1_susi.{tls_server.settings['tenantId']}")

    cached = app.acquire_token_silent(scopes, account=account)
    assert cached["token_source"] == "cache"
    refreshed = app.acquire_token_silent_with_error(scopes, account=account, force_refresh=True)
    assert refreshed.get("token_source") == "identity_provider", refreshed
    assert refreshed["access_token"] != result["access_token"]
