"""Microsoft's Graph SDK for Python (msgraph-sdk, with azure-identity for the app-only token)
managing B2C users here (SPEC §2.10), changed only in its base URL and authority host: create a
user, find it by its email identity, rename it, sign in as it, disable it, delete it."""

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests
from azure.identity.aio import ClientSecretCredential
from kiota_abstractions.base_request_configuration import RequestConfiguration
from kiota_authentication_azure.azure_identity_authentication_provider import AzureIdentityAuthenticationProvider
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph.generated.models.object_identity import ObjectIdentity
from msgraph.generated.models.o_data_errors.o_data_error import ODataError
from msgraph.generated.models.password_profile import PasswordProfile
from msgraph.generated.models.user import User
from msgraph.generated.users.item.user_item_request_builder import UserItemRequestBuilder
from msgraph.generated.users.users_request_builder import UsersRequestBuilder

from conftest import unique_email


def daemon_app(settings_path, permission="User.ReadWrite.All"):
    """A confidential app holding a Graph application permission, registered with the admin command."""
    result = subprocess.run(
        [os.environ["TODO_SERVER_BIN"], "apps", "add", "--data-dir", str(Path(settings_path).parent), "--name", "Graph daemon",
         "--kind", "confidential", "--graph-permission", permission, "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    app = json.loads(result.stdout)
    assert set(app) == {"clientId", "clientSecret"}
    return app


def graph_client(tls_server, app, sdk=(GraphRequestAdapter, GraphServiceClient), version="v1.0"):
    """A Graph SDK client (msgraph-sdk's, or `sdk` given as its adapter and client classes) for the
    app's client-credentials token, changed only in its authority and base URL."""
    adapter_class, client_class = sdk
    os.environ["REQUESTS_CA_BUNDLE"] = tls_server.ca
    os.environ["SSL_CERT_FILE"] = tls_server.ca
    credential = ClientSecretCredential(
        tls_server.settings["tenantId"], app["clientId"], app["clientSecret"], authority=tls_server.base,
        disable_instance_discovery=True,
    )
    graph = tls_server.settings["graphBaseURL"]
    auth = AzureIdentityAuthenticationProvider(
        credential, scopes=["https://graph.microsoft.com/.default"], allowed_hosts=[urlparse(graph).hostname]
    )
    adapter = adapter_class(auth)
    adapter.base_url = f"{graph}/{version}"
    return client_class(request_adapter=adapter), credential


def jwt_claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def ropc(tls_server, email, password):
    return requests.post(
        f"{tls_server.base}/{tls_server.tenant}/B2C_1_ROPC/oauth2/v2.0/token",
        data={"grant_type": "password", "client_id": tls_server.client_id, "username": email, "password": password,
              "scope": f"openid {tls_server.client_id}"},
        verify=tls_server.ca, timeout=30,
    )


def test_msgraph_sdk_creates_finds_renames_and_deletes_a_b2c_user(tls_server):
    app = daemon_app(os.environ["TODO_TLS_SETTINGS"])
    tenant = tls_server.tenant
    email = unique_email("graph")

    async def scenario():
        client, credential = graph_client(tls_server, app)
        try:
            # The dev tenant's own attribute, under Graph's name for it: a directory extension of the
            # tenant's b2c-extensions-app, whose id settings.json gives.
            loyalty = f"extension_{tls_server.settings['extensionsAppId'].replace('-', '')}_loyaltyNumber"
            created = await client.users.post(User(
                display_name="Grace Graph",
                identities=[ObjectIdentity(sign_in_type="emailAddress", issuer=tenant, issuer_assigned_id=email)],
                password_profile=PasswordProfile(password="Graph-Pass1", force_change_password_next_sign_in=False),
                password_policies="DisablePasswordExpiration",
                additional_data={loyalty: "L-0077"},
            ))
            assert created.id and created.display_name == "Grace Graph"
            selected = await client.users.by_user_id(created.id).get(request_configuration=RequestConfiguration(
                query_parameters=UserItemRequestBuilder.UserItemRequestBuilderGetQueryParameters(select=["id", loyalty])))
            assert selected.additional_data[loyalty] == "L-0077"

            query = UsersRequestBuilder.UsersRequestBuilderGetQueryParameters(
                filter=f"identities/any(c:c/issuerAssignedId eq '{email}' and c/issuer eq '{tenant}')",
                select=["id", "displayName", "identities", "accountEnabled"],
            )
            found = await client.users.get(request_configuration=RequestConfiguration(query_parameters=query))
            assert [user.id for user in found.value] == [created.id]
            assert found.value[0].identities[0].issuer_assigned_id == email
            assert found.value[0].account_enabled is True

            await client.users.by_user_id(created.id).patch(User(display_name="Grace Renamed"))
            renamed = await client.users.by_user_id(created.id).get()
            assert renamed.display_name == "Grace Renamed"

            # The user signs in at once, under the new name.
            signed_in = ropc(tls_server, email, "Graph-Pass1")
            assert signed_in.status_code == 200, signed_in.text
            # What Graph stored is the flow's `extension_loyaltyNumber` claim.
            assert jwt_claims(signed_in.json()["access_token"])["extension_loyaltyNumber"] == "L-0077"

            # Disabled: no sign-in; enabled again: back.
            await client.users.by_user_id(created.id).patch(User(account_enabled=False))
            refused = ropc(tls_server, email, "Graph-Pass1")
            assert refused.status_code == 400 and "AADB2C90111" in refused.json()["error_description"]
            await client.users.by_user_id(created.id).patch(User(account_enabled=True))
            assert ropc(tls_server, email, "Graph-Pass1").status_code == 200

            # Bad input in Graph's shape, and nothing stored: a weak password, a duplicate identity.
            with pytest.raises(ODataError) as weak:
                await client.users.post(User(
                    display_name="Weak", password_profile=PasswordProfile(password="short"),
                    identities=[ObjectIdentity(sign_in_type="emailAddress", issuer=tenant, issuer_assigned_id=unique_email("weak"))],
                ))
            assert weak.value.response_status_code == 400 and weak.value.error.code == "Request_BadRequest"
            with pytest.raises(ODataError) as duplicate:
                await client.users.post(User(
                    display_name="Twin", password_profile=PasswordProfile(password="Graph-Pass1"),
                    identities=[ObjectIdentity(sign_in_type="emailAddress", issuer=tenant, issuer_assigned_id=email.upper())],
                ))
            assert duplicate.value.response_status_code == 400 and "already exists" in duplicate.value.error.message

            await client.users.by_user_id(created.id).delete()
            with pytest.raises(ODataError) as gone:
                await client.users.by_user_id(created.id).get()
            assert gone.value.response_status_code == 404 and gone.value.error.code == "Request_ResourceNotFound"
            assert ropc(tls_server, email, "Graph-Pass1").status_code == 400
        finally:
            await credential.close()

    asyncio.run(scenario())
