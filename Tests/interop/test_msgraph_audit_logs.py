"""Microsoft's Graph SDK for Python (msgraph-sdk) reading the sign-in and audit logs (SPEC §2.13)
with its typed models: `auditLogs/signIns` filtered by user and result, paged with
`@odata.nextLink`; `auditLogs/directoryAudits` showing a Graph app's change to a user and B2C's
token-issuance records."""

import asyncio
import datetime
import os
import subprocess
from pathlib import Path

from kiota_abstractions.base_request_configuration import RequestConfiguration
from msgraph.generated.audit_logs.directory_audits.directory_audits_request_builder import DirectoryAuditsRequestBuilder
from msgraph.generated.audit_logs.sign_ins.sign_ins_request_builder import SignInsRequestBuilder
from msgraph.generated.models.object_identity import ObjectIdentity
from msgraph.generated.models.operation_result import OperationResult
from msgraph.generated.models.password_profile import PasswordProfile
from msgraph.generated.models.user import User

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


def test_msgraph_sdk_reads_directory_audits_of_a_change_and_of_token_issuance(tls_server):
    writer = daemon_app(os.environ["TODO_TLS_SETTINGS"])
    reader = daemon_app(os.environ["TODO_TLS_SETTINGS"], permission="AuditLog.Read.All")
    email = unique_email("audited")

    def options(filter_text, top=None):
        return RequestConfiguration(query_parameters=DirectoryAuditsRequestBuilder.DirectoryAuditsRequestBuilderGetQueryParameters(
            filter=filter_text, top=top))

    async def scenario():
        client, credential = graph_client(tls_server, writer)
        audits, audit_credential = graph_client(tls_server, reader)
        try:
            created = await client.users.post(User(
                display_name="Audie",
                identities=[ObjectIdentity(sign_in_type="emailAddress", issuer=tls_server.tenant, issuer_assigned_id=email)],
                password_profile=PasswordProfile(password="Audit-Pass2", force_change_password_next_sign_in=False),
            ))
            await client.users.by_user_id(created.id).patch(User(account_enabled=False))
            await client.users.by_user_id(created.id).patch(User(account_enabled=True))
            assert ropc(tls_server, email, "Audit-Pass2").status_code == 200

            about = await audits.audit_logs.directory_audits.get(
                request_configuration=options(f"targetResources/any(t:t/id eq '{created.id}')"))
            names = [entry.activity_display_name for entry in about.value]
            assert names[-1] == "Add user" and names.count("Update user") == 2, names
            added = about.value[-1]
            assert added.category == "UserManagement" and added.result == OperationResult.Success
            assert added.initiated_by.app.app_id == writer["clientId"] and added.initiated_by.app.display_name == "Graph daemon"
            assert added.target_resources[0].user_principal_name == email and added.target_resources[0].type == "User"
            disabled = about.value[-2]
            assert [(p.display_name, p.new_value) for p in disabled.target_resources[0].modified_properties] == [
                ("AccountEnabled", '["false"]')]

            issued = about.value[0]
            assert issued.activity_display_name == "Validate user credentials" and issued.logged_by_service == "B2C"
            details = {pair.key: pair.value for pair in issued.additional_details}
            assert details["PolicyId"] == "B2C_1_ROPC" and details["ApplicationId"] == tls_server.client_id
            assert issued.initiated_by.app.app_id == tls_server.client_id

            failures = await audits.audit_logs.directory_audits.get(request_configuration=options(
                f"initiatedBy/app/appId eq '{writer['clientId']}' and result eq 'failure'"))
            assert failures.value == []
            one = await audits.audit_logs.directory_audits.by_directory_audit_id(added.id).get()
            assert one.id == added.id and one.correlation_id == added.correlation_id
            assert "Audit-Pass2" not in repr(about.value)
        finally:
            await credential.close()
            await audit_credential.close()

    asyncio.run(scenario())
