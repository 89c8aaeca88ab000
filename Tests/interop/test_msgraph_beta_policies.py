"""Microsoft's Graph beta SDK for Python (msgraph-beta-sdk) managing custom policies here (SPEC
§2.12), changed only in its base URL and authority host: upload a base and a relying party with
`PUT …/$value`, read one back, list them, see a broken one refused in Graph's error shape, and
delete. The policies are this project's own (Tests/interop/policies)."""

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
import requests
from msgraph_beta import GraphRequestAdapter, GraphServiceClient
from msgraph_beta.generated.models.o_data_errors.o_data_error import ODataError
from msgraph_beta.generated.models.trust_framework_key_set import TrustFrameworkKeySet
from msgraph_beta.generated.trust_framework.key_sets.item.generate_key.generate_key_post_request_body import (
    GenerateKeyPostRequestBody,
)
from msgraph_beta.generated.trust_framework.key_sets.item.upload_secret.upload_secret_post_request_body import (
    UploadSecretPostRequestBody,
)

from test_msgraph_sdk import graph_client

POLICIES = Path(__file__).parent / "policies"


def policy_app(settings_path):
    """A confidential app holding Graph's Policy.ReadWrite.TrustFramework and TrustFrameworkKeySet.ReadWrite.All,
    registered with the admin command."""
    result = subprocess.run(
        [os.environ["TODO_SERVER_BIN"], "apps", "add", "--data-dir", str(Path(settings_path).parent), "--name", "IEF deployer",
         "--kind", "confidential", "--graph-permission", "Policy.ReadWrite.TrustFramework",
         "--graph-permission", "TrustFrameworkKeySet.ReadWrite.All", "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return json.loads(result.stdout)


def beta_client(tls_server, app):
    return graph_client(tls_server, app, sdk=(GraphRequestAdapter, GraphServiceClient), version="beta")


def policy_xml(name, tenant):
    return (POLICIES / f"{name}.xml").read_text().replace("TENANT", tenant).encode()


def test_msgraph_beta_sdk_uploads_reads_lists_and_deletes_custom_policies(tls_server):
    app = policy_app(os.environ["TODO_TLS_SETTINGS"])
    tenant = tls_server.tenant

    async def scenario():
        client, credential = beta_client(tls_server, app)
        try:
            policies = client.trust_framework.policies
            # The relying party before its base: refused, in Graph's shape, naming the missing base.
            with pytest.raises(ODataError) as orphan:
                await policies.by_trust_framework_policy_id("B2C_1A_interop_rp").content.put(policy_xml("B2C_1A_interop_rp", tenant))
            assert orphan.value.response_status_code == 400 and orphan.value.error.code == "AADB2C"
            assert "b2c_1a_interopbase" in orphan.value.error.message.lower() and "not found" in orphan.value.error.message

            # The base names the key set its JWT issuer signs with: refused until the IEF setup's
            # first step, the key set with a generated RSA key, is done (through the SDK too).
            with pytest.raises(ODataError) as keyless:
                await policies.by_trust_framework_policy_id("B2C_1A_InteropBase").content.put(policy_xml("B2C_1A_InteropBase", tenant))
            assert keyless.value.response_status_code == 400 and "'B2C_1A_TokenSigningKeyContainer'" in keyless.value.error.message
            signing = client.trust_framework.key_sets.by_trust_framework_key_set_id("B2C_1A_TokenSigningKeyContainer")
            await client.trust_framework.key_sets.post(TrustFrameworkKeySet(id="TokenSigningKeyContainer"))
            key = await signing.generate_key.post(GenerateKeyPostRequestBody(use="sig", kty="RSA"))

            for name in ["B2C_1A_InteropBase", "B2C_1A_interop_rp"]:
                answer = await policies.by_trust_framework_policy_id(name).content.put(policy_xml(name, tenant))
                assert b"TrustFrameworkPolicy" in answer
            # The relying party publishes that key, and only it: its tokens are signed with it.
            meta = tls_server.discovery("B2C_1A_interop_rp")
            published = requests.get(meta["jwks_uri"], verify=tls_server.ca).json()["keys"]
            assert [(k["kid"], k["n"], k["e"]) for k in published] == [(key.kid, key.n, key.e)], published
            back = await policies.by_trust_framework_policy_id("B2C_1A_interop_rp").content.get()
            assert back == policy_xml("B2C_1A_interop_rp", tenant)
            listed = await policies.get()
            assert {"B2C_1A_InteropBase", "B2C_1A_interop_rp"} <= {policy.id for policy in listed.value}

            # A base change that would break the relying party built on it is refused; the base stays.
            broken = policy_xml("B2C_1A_InteropBase", tenant).replace(b'Id="subject"', b'Id="subjectRenamed"')
            with pytest.raises(ODataError) as refused:
                await policies.by_trust_framework_policy_id("B2C_1A_InteropBase").content.put(broken)
            assert refused.value.error.code == "AADB2C" and "'subject'" in refused.value.error.message
            assert await policies.by_trust_framework_policy_id("B2C_1A_InteropBase").content.get() == policy_xml("B2C_1A_InteropBase", tenant)

            await policies.by_trust_framework_policy_id("B2C_1A_interop_rp").delete()
            await policies.by_trust_framework_policy_id("B2C_1A_InteropBase").delete()
            await signing.delete()
            with pytest.raises(ODataError) as gone:
                await policies.by_trust_framework_policy_id("B2C_1A_interop_rp").get()
            assert gone.value.response_status_code == 404
        finally:
            await credential.close()

    asyncio.run(scenario())


def test_msgraph_beta_sdk_makes_key_sets(tls_server):
    """The IEF setup steps: a signing key set with a generated RSA key, a secret uploaded, the active key read back."""
    app = policy_app(os.environ["TODO_TLS_SETTINGS"])

    async def scenario():
        client, credential = beta_client(tls_server, app)
        try:
            key_sets = client.trust_framework.key_sets
            name = f"InteropSigning{os.getpid()}"
            created = await key_sets.post(TrustFrameworkKeySet(id=name))
            assert created.id == f"B2C_1A_{name}"
            generated = await key_sets.by_trust_framework_key_set_id(created.id).generate_key.post(
                GenerateKeyPostRequestBody(use="sig", kty="RSA"))
            assert generated.kty == "RSA" and generated.n and generated.e == "AQAB" and generated.d is None
            active = await key_sets.by_trust_framework_key_set_id(created.id).get_active_key.get()
            assert active.kid == generated.kid

            secret = await key_sets.by_trust_framework_key_set_id(created.id).upload_secret.post(
                UploadSecretPostRequestBody(use="sig", k="interop-secret"))
            assert secret.kty == "oct" and secret.k is None
            listed = await key_sets.get()
            assert created.id in {key_set.id for key_set in listed.value}

            await key_sets.by_trust_framework_key_set_id(created.id).delete()
            with pytest.raises(ODataError) as gone:
                await key_sets.by_trust_framework_key_set_id(created.id).get()
            assert gone.value.response_status_code == 404
        finally:
            await credential.close()

    asyncio.run(scenario())
