"""Microsoft's Graph SDK for Python (msgraph-sdk) reading the sign-in log (SPEC §2.13) with its
typed models: `auditLogs/signIns` filtered by user and result, paged with `@odata.nextLink`."""

import asyncio
import datetime
import os
import subprocess
from pathlib import Path

from kiota_abstractions.base_request_configuration import RequestConfiguration
from msgraph.generated.audit_logs.sign_ins.sign_ins_request_builder import SignInsRequestBuilder

from conftest import unique_email
from test_msgraph_sdk import daemon_app, graph_client, ropc


def test_msgraph_sdk_reads_sign_ins_filtered_and_paged(tls_server):
    email = unique_email("audit")
    subprocess.run(
        [os.environ["TODO_SERVER_BIN"], "users", "add", "--data-dir", str(Path(os.environ["TODO_TLS_SETTINGS"]).parent),
         "--email", email, "--name", "Audra", "--password-stdin"],
        input="Audit-Pass1\n", capture_output=True, text=True, check=True, timeout=60)
    assert ropc(tls_server, email, "Audit-Pass1").status_code == 200
    assert ropc(tls_server, email, "Audit-Pass1").status_code == 200
    assert ropc(tls_server, email, "Wrong-Pass1").status_code == 400
    app = daemon_app(os.environ["TODO_TLS_SETTINGS"], permission="AuditLog.Read.All")

    def options(filter_text, top=None):
        return RequestConfiguration(query_parameters=SignInsRequestBuilder.SignInsRequestBuilderGetQueryParameters(
            filter=filter_text, top=top))

    async def scenario():
        client, credential = graph_client(tls_server, app)
        try:
            mine = await client.audit_logs.sign_ins.get(request_configuration=options(f"userPrincipalName eq '{email}'"))
            assert len(mine.value) == 3, [entry.status for entry in mine.value]
            newest = mine.value[0]
            assert newest.status.error_code != 0 and "grant_type password" in newest.status.additional_details
            assert isinstance(newest.created_date_time, datetime.datetime) and newest.created_date_time.tzinfo is not None
            assert newest.app_id == tls_server.client_id and newest.user_display_name == "Audra"
            assert all(entry.user_id == newest.user_id and entry.correlation_id for entry in mine.value)
            ok = await client.audit_logs.sign_ins.get(
                request_configuration=options(f"userPrincipalName eq '{email}' and status/errorCode eq 0"))
            assert [entry.status.error_code for entry in ok.value] == [0, 0]
            # One at a time, through the SDK's own next-link request.
            first = await client.audit_logs.sign_ins.get(request_configuration=options(f"userId eq '{newest.user_id}'", top=1))
            ids = [entry.id for entry in first.value]
            link = first.odata_next_link
            while link:
                page = await client.audit_logs.sign_ins.with_url(link).get()
                ids += [entry.id for entry in page.value]
                link = page.odata_next_link
            assert len(ids) == 3 and len(set(ids)) == 3
            one = await client.audit_logs.sign_ins.by_sign_in_id(ids[0]).get()
            assert one.id == ids[0] and one.user_principal_name == email
        finally:
            await credential.close()

    asyncio.run(scenario())
