"""Graph as the tenant's management plane (SPEC §2.14), driven by clients nobody here wrote:
msgraph-sdk registers an app and adds its secret, makes a security group and puts a user in it;
MSAL for Python signs in with the new app and secret at once; after `/dev/clock` moves past the
access token's lifetime, MSAL's `acquire_token_silent` makes exactly one refresh and PyJWT
refuses the old token as expired."""

import asyncio
import datetime
import json
import os
import subprocess
import time
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urljoin, urlparse

import jwt
import msal
import requests
from msgraph.generated.applications.item.add_password.add_password_post_request_body import AddPasswordPostRequestBody
from msgraph.generated.models.application import Application
from msgraph.generated.models.group import Group
from msgraph.generated.models.o_data_errors.o_data_error import ODataError
from msgraph.generated.models.password_credential import PasswordCredential
from msgraph.generated.models.reference_create import ReferenceCreate
from msgraph.generated.models.web_application import WebApplication

from conftest import Page, outbox_code, unique_email
from test_msgraph_sdk import graph_client

REDIRECT = "http://localhost:8767/auth"


def manager_app(settings_path, permissions):
    """A confidential app holding several Graph application permissions (the admin command), in
    the TLS server's own store (its data directory's SQLite file, whichever server the other
    interop tests run against)."""
    command = [os.environ["TODO_SERVER_BIN"], "apps", "add", "--data-dir", str(Path(settings_path).parent), "--name", "Graph manager",
               "--kind", "confidential", "--json"]
    for permission in permissions:
        command += ["--graph-permission", permission]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    return json.loads(result.stdout)


def add_user(settings_path, email, password):
    command = [os.environ["TODO_SERVER_BIN"], "users", "add", "--data-dir", str(Path(settings_path).parent), "--email", email,
               "--name", "Gus Group", "--password-stdin"]
    result = subprocess.run(command, input=password + "\n", capture_output=True, text=True, check=True, timeout=60)
    # "created EMAIL oid ID"
    return result.stdout.split(" oid ")[1].split()[0]


class CountingSession(requests.Session):
    """MSAL's HTTP client, counting the token requests it makes."""

    def __init__(self, ca):
        super().__init__()
        self.verify = ca
        self.token_posts = 0

    def post(self, url, *args, **kwargs):
        if url.endswith("/oauth2/v2.0/token"):
            self.token_posts += 1
        return super().post(url, *args, **kwargs)


def test_msgraph_sdk_registers_an_app_msal_signs_in_with_it_and_the_clock_expires_its_token(tls_server):
    settings = os.environ["TODO_TLS_SETTINGS"]
    manager = manager_app(settings, ["Application.ReadWrite.All", "Group.ReadWrite.All", "User.Read.All"])
    email, password = unique_email("graphmgmt"), "Graph-Mgmt1"
    user_id = add_user(settings, email, password)

    async def register():
        client, credential = graph_client(tls_server, manager)
        try:
            app = await client.applications.post(Application(
                display_name="Made by msgraph-sdk", web=WebApplication(redirect_uris=[REDIRECT])))
            assert app.app_id and app.id and app.app_id != app.id
            assert app.web.redirect_uris == [REDIRECT]
            secret = await client.applications.by_application_id(app.id).add_password.post(
                AddPasswordPostRequestBody(password_credential=PasswordCredential(display_name="interop")))
            assert secret.secret_text and secret.hint == secret.secret_text[:3] and secret.key_id
            again = await client.applications.by_application_id(app.id).get()
            assert [c.key_id for c in again.password_credentials] == [secret.key_id]
            assert again.password_credentials[0].secret_text is None

            # A redirect URI B2C refuses: Graph's error, nothing registered.
            try:
                await client.applications.post(Application(
                    display_name="Fragment", web=WebApplication(redirect_uris=["https://app.example/cb#frag"])))
                raise AssertionError("a fragment redirect URI was accepted")
            except ODataError as error:
                assert error.response_status_code == 400 and error.error.code == "Request_BadRequest"
            listed = await client.applications.get()
            assert "Fragment" not in [a.display_name for a in listed.value]

            group = await client.groups.post(Group(
                display_name="Interop testers", mail_nickname="interoptesters", mail_enabled=False, security_enabled=True))
            await client.groups.by_group_id(group.id).members.ref.post(
                ReferenceCreate(odata_id=f"https://graph.microsoft.com/v1.0/directoryObjects/{user_id}"))
            member_of = await client.users.by_user_id(user_id).member_of.get()
            assert [entry.id for entry in member_of.value] == [group.id]
            members = await client.groups.by_group_id(group.id).members.get()
            assert [entry.id for entry in members.value] == [user_id]
            return app.app_id, secret.secret_text
        finally:
            await credential.close()

    app_id, secret = asyncio.run(register())

    # MSAL signs in with the app and secret Graph just made (the authorization code flow).
    os.environ["REQUESTS_CA_BUNDLE"] = tls_server.ca
    http = CountingSession(tls_server.ca)
    authority = f"{tls_server.base}/{tls_server.tenant}/B2C_1_susi"
    app = msal.ConfidentialClientApplication(app_id, client_credential=secret, authority=authority, http_client=http)
    scopes = [app_id]
    flow = app.initiate_auth_code_flow(scopes, redirect_uri=REDIRECT)
    browser = requests.Session()
    browser.verify = tls_server.ca
    page = Page(browser.get(flow["auth_uri"]))
    response = page.submit(browser, "localAccountForm", {"email": email, "password": password})
    assert response.status_code == 302, response.text[:300]
    query = {key: values[0] for key, values in parse_qs(urlparse(response.headers["Location"]).query).items()}
    result = app.acquire_token_by_auth_code_flow(flow, query)
    assert "access_token" in result, result
    old_token = result["access_token"]
    account = app.get_accounts()[0]
    assert app.acquire_token_silent(scopes, account=account)["token_source"] == "cache"

    keys = jwt.PyJWKClient(f"{tls_server.base}/{tls_server.tenant}/B2C_1_susi/discovery/v2.0/keys",
                           ssl_context=__import__("ssl").create_default_context(cafile=tls_server.ca))
    key = keys.get_signing_key_from_jwt(old_token).key
    jwt.decode(old_token, key, algorithms=["RS256"], audience=app_id)

    # The server's clock moves past the token's lifetime; the test's clock follows it.
    dev = f"{tls_server.base}/dev/clock"
    moved = requests.post(dev, json={"advanceSeconds": int(result["expires_in"]) + 120}, verify=tls_server.ca, timeout=30)
    assert moved.status_code == 200, moved.text
    offset = moved.json()["epochSeconds"] - time.time()
    real_time = time.time

    class ServerDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(real_time() + offset, tz)

    try:
        posts_before = http.token_posts
        with mock.patch("time.time", lambda: real_time() + offset), mock.patch("jwt.api_jwt.datetime", ServerDateTime):
            renewed = app.acquire_token_silent(scopes, account=account)
            assert renewed and renewed["token_source"] == "identity_provider", renewed
            assert renewed["access_token"] != old_token
            assert http.token_posts == posts_before + 1
            # And from the cache again: one refresh, not one per call.
            assert app.acquire_token_silent(scopes, account=account)["token_source"] == "cache"
            assert http.token_posts == posts_before + 1
            try:
                jwt.decode(old_token, key, algorithms=["RS256"], audience=app_id)
                raise AssertionError("PyJWT accepted the old token after the clock moved")
            except jwt.ExpiredSignatureError:
                pass
            jwt.decode(renewed["access_token"], key, algorithms=["RS256"], audience=app_id)
        # Backwards is refused and changes nothing.
        refused = requests.post(dev, json={"advanceSeconds": -60}, verify=tls_server.ca, timeout=30)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_request"
    finally:
        assert requests.delete(dev, verify=tls_server.ca, timeout=30).json()["offsetSeconds"] == 0


def test_msgraph_beta_sdk_creates_a_user_flow_with_a_custom_attribute_and_the_export_shows_it(tls_server):
    from msgraph_beta import GraphRequestAdapter as BetaAdapter, GraphServiceClient as BetaClient
    from msgraph_beta.generated.models.b2c_identity_user_flow import B2cIdentityUserFlow
    from msgraph_beta.generated.models.identity_user_flow_attribute import IdentityUserFlowAttribute
    from msgraph_beta.generated.models.identity_user_flow_attribute_assignment import IdentityUserFlowAttributeAssignment
    from msgraph_beta.generated.models.identity_user_flow_attribute_data_type import IdentityUserFlowAttributeDataType
    from msgraph_beta.generated.models.identity_user_flow_attribute_input_type import IdentityUserFlowAttributeInputType
    from msgraph_beta.generated.models.o_data_errors.o_data_error import ODataError as BetaError
    from msgraph_beta.generated.models.user_flow_type import UserFlowType

    settings = os.environ["TODO_TLS_SETTINGS"]
    manager = manager_app(settings, ["IdentityUserFlow.ReadWrite.All"])
    suffix = os.urandom(3).hex()

    async def scenario():
        client, credential = graph_client(tls_server, manager, sdk=(BetaAdapter, BetaClient), version="beta")
        try:
            attribute = await client.identity.user_flow_attributes.post(IdentityUserFlowAttribute(
                display_name=f"shoeSize{suffix}", description="Shoe size", data_type=IdentityUserFlowAttributeDataType.Int64))
            assert attribute.id.endswith(f"_shoeSize{suffix}") and attribute.data_type == IdentityUserFlowAttributeDataType.Int64
            try:
                await client.identity.user_flow_attributes.post(IdentityUserFlowAttribute(
                    display_name=f"money{suffix}", data_type=IdentityUserFlowAttributeDataType.UnknownFutureValue))
                raise AssertionError("an unknown attribute type was accepted")
            except BetaError as error:
                assert error.response_status_code == 400 and error.error.code == "Request_BadRequest"

            flow = await client.identity.b2c_user_flows.post(B2cIdentityUserFlow(
                id=f"Interop{suffix}", user_flow_type=UserFlowType.SignUpOrSignIn, user_flow_type_version=3.0))
            assert flow.id == f"B2C_1_Interop{suffix}" and flow.user_flow_type == UserFlowType.SignUpOrSignIn
            assignment = await client.identity.b2c_user_flows.by_b2c_identity_user_flow_id(flow.id).user_attribute_assignments.post(
                IdentityUserFlowAttributeAssignment(
                    user_attribute=IdentityUserFlowAttribute(id=attribute.id), is_optional=True, requires_verification=False,
                    user_input_type=IdentityUserFlowAttributeInputType.TextBox, display_name="Shoe size"))
            assert assignment.id == attribute.id
            listed = await client.identity.b2c_user_flows.by_b2c_identity_user_flow_id(flow.id).user_attribute_assignments.get()
            assert [a.id for a in listed.value] == ["DisplayName", attribute.id]
            return flow.id
        finally:
            await credential.close()

    flow_id = asyncio.run(scenario())

    # The flow's sign-up page collects the attribute.
    browser = requests.Session()
    browser.verify = tls_server.ca
    query = {"client_id": tls_server.client_id, "response_type": "code", "redirect_uri": "http://localhost:8766",
             "scope": "openid", "code_challenge": "x" * 43, "code_challenge_method": "S256"}
    first = Page(browser.get(f"{tls_server.base}/{tls_server.tenant}/{flow_id}/oauth2/v2.0/authorize", params=query))
    email = unique_email("flow")
    signup = Page(browser.get(first.link("createAccount")))

    def step(current, values):
        response = current.submit(browser, "attributeVerification", values)
        assert response.status_code == 303, response.text[:500]
        return Page(browser.get(urljoin(response.url, response.headers["Location"])))

    code_page = step(signup, {"email": email})
    details = step(code_page, {"code": outbox_code(browser, code_page.response.url, email)})
    assert f'name="extension_shoeSize{suffix}"' in details.response.text, details.response.text[:500]

    # The export shows what Graph made.
    command = [os.environ["TODO_SERVER_BIN"], "tenant", "export", "--data-dir", str(Path(settings).parent)]
    exported = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    assert flow_id in exported and f"extension_shoeSize{suffix}" in exported


def test_msgraph_sdk_manages_a_custom_authentication_extension_and_the_export_shows_it(tls_server):
    from msgraph.generated.models.azure_ad_token_authentication import AzureAdTokenAuthentication
    from msgraph.generated.models.custom_extension_client_configuration import CustomExtensionClientConfiguration
    from msgraph.generated.models.http_request_endpoint import HttpRequestEndpoint
    from msgraph.generated.models.on_token_issuance_start_custom_extension import OnTokenIssuanceStartCustomExtension
    from msgraph.generated.models.on_token_issuance_start_return_claim import OnTokenIssuanceStartReturnClaim

    settings = os.environ["TODO_TLS_SETTINGS"]
    manager = manager_app(settings, ["CustomAuthenticationExtension.ReadWrite.All"])
    name = f"claims{os.urandom(3).hex()}"

    async def scenario():
        client, credential = graph_client(tls_server, manager)
        try:
            created = await client.identity.custom_authentication_extensions.post(OnTokenIssuanceStartCustomExtension(
                display_name=name, description="Loyalty tier",
                endpoint_configuration=HttpRequestEndpoint(target_url="https://api.example/claims"),
                authentication_configuration=AzureAdTokenAuthentication(resource_id="api://claims.example"),
                client_configuration=CustomExtensionClientConfiguration(timeout_in_milliseconds=2000, maximum_retries=0),
                claims_for_token_configuration=[OnTokenIssuanceStartReturnClaim(claim_id_in_api_response="loyaltyTier")]))
            # The SDK reads the derived type back by its @odata.type.
            assert isinstance(created, OnTokenIssuanceStartCustomExtension), type(created)
            assert created.endpoint_configuration.target_url == "https://api.example/claims"
            assert created.authentication_configuration.resource_id == "api://claims.example"
            assert [c.claim_id_in_api_response for c in created.claims_for_token_configuration] == ["loyaltyTier"]
            item = client.identity.custom_authentication_extensions.by_custom_authentication_extension_id(created.id)
            await item.patch(OnTokenIssuanceStartCustomExtension(
                endpoint_configuration=HttpRequestEndpoint(target_url="https://api.example/v2/claims")))
            read = await item.get()
            assert read.display_name == name and read.endpoint_configuration.target_url == "https://api.example/v2/claims"
            listed = await client.identity.custom_authentication_extensions.get()
            assert created.id in [e.id for e in listed.value]
            return created.id
        finally:
            await credential.close()

    asyncio.run(scenario())
    command = [os.environ["TODO_SERVER_BIN"], "tenant", "export", "--data-dir", str(Path(settings).parent)]
    exported = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    assert name in exported and "https://api.example/v2/claims" in exported, exported
