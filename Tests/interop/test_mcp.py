"""`todo-server mcp` (SPEC §6) with the Model Context Protocol's own Python SDK (PyPI `mcp`) as the
client, over stdio: the tools are listed, then a user signs up through a code read from the
outbox tool (native authentication over HTTP) and gets a token; faults, the clock, the trace and
refusals through the tools."""

import asyncio
import json
import os

import requests
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER_BIN = os.environ.get("TODO_SERVER_BIN", ".build/debug/todo-server")
TOOLS = {
    "system_info", "create_user", "mint_tokens", "read_outbox", "inject_fault", "clear_faults", "advance_clock", "reset_clock",
    "read_journey_trace", "reset_accounts",
}


def with_session(body):
    """Starts `todo-server mcp` as a subprocess the SDK talks to, runs `body(session)`."""

    async def main():
        # The server reads TODO_* variables; the test's own must not reach it.
        environment = {key: value for key, value in os.environ.items() if not key.startswith("TODO_")}
        parameters = StdioServerParameters(command=SERVER_BIN, args=["mcp"], env=environment)
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                assert initialized.serverInfo.name == "todo-b2c"
                return await body(session)

    return asyncio.run(asyncio.wait_for(main(), 240))


async def call(session, name, arguments=None):
    result = await session.call_tool(name, arguments or {})
    text = result.content[0].text
    return result.isError, (text if result.isError else json.loads(text))


def test_tools_sign_a_user_up_through_the_outbox_and_get_a_token():
    async def body(session):
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        for tool in listed.tools:
            assert tool.description and tool.inputSchema["type"] == "object"
        _, info = await call(session, "system_info")
        base, client = f"{info['identityUrl'].rstrip('/')}/{info['tenant']}", info["clientId"]
        email = "mcp-agent@example.com"

        def native(endpoint, **fields):
            response = requests.post(f"{base}/{endpoint}", data={"client_id": client, **fields}, timeout=30)
            assert response.status_code == 200, response.text
            return response.json()

        started = native("signup/v1.0/start", username=email, password="Agent-Passw0rd", challenge_type="oob password redirect",
                         attributes=json.dumps({"displayName": "Agent"}))
        challenged = native("signup/v1.0/challenge", continuation_token=started["continuation_token"])
        failed, outbox = await call(session, "read_outbox", {"recipient": email})
        assert not failed and len(outbox["messages"]) == 1
        code = outbox["messages"][0]["code"]
        assert len(code) == 8 and code in outbox["messages"][0]["body"]
        done = native("signup/v1.0/continue", continuation_token=challenged["continuation_token"], grant_type="oob", oob=code)
        tokens = native("oauth2/v2.0/token", continuation_token=done["continuation_token"], grant_type="continuation_token",
                        username=email, scope=f"openid offline_access {client}")
        assert tokens["token_type"] == "Bearer" and tokens["access_token"].count(".") == 2
        # The same account, minted through the tool, is accepted by the Task API.
        failed, minted = await call(session, "mint_tokens", {"user": email})
        assert not failed and minted["refresh_token"]
        listed = requests.get(f"{info['apiUrl'].rstrip('/')}/api/tasks", headers={"Authorization": "Bearer " + minted["access_token"]},
                              timeout=30)
        assert listed.status_code == 200
        return True

    assert with_session(body)


def test_faults_clock_and_refusals_through_the_tools():
    async def body(session):
        _, info = await call(session, "system_info")
        failed, user = await call(session, "create_user", {"email": "tool-user@example.com", "password": "Tool-Passw0rd"})
        assert not failed and user["email"] == "tool-user@example.com"
        token_url = info["authorities"]["B2C_1_ROPC"] + "oauth2/v2.0/token"
        form = {"grant_type": "password", "client_id": info["clientId"], "username": "tool-user@example.com", "password": "Tool-Passw0rd",
                "scope": f"openid {info['clientId']}"}
        failed, _ = await call(session, "inject_fault", {"policy": "B2C_1_ROPC", "error": "server_error"})
        assert not failed
        assert requests.post(token_url, data=form, timeout=30).json()["error"] == "server_error"
        assert requests.post(token_url, data=form, timeout=30).status_code == 200
        # Two hours on, a minted access token is refused by the Task API.
        _, minted = await call(session, "mint_tokens", {"user": "tool-user@example.com"})
        failed, moved = await call(session, "advance_clock", {"seconds": 7200})
        assert not failed and moved["now"]
        refused = requests.get(f"{info['apiUrl'].rstrip('/')}/api/tasks", headers={"Authorization": "Bearer " + minted["access_token"]},
                               timeout=30)
        assert refused.status_code == 401
        # Refusals are tool errors carrying the server's reason; nothing is changed by them.
        failed, reason = await call(session, "advance_clock", {"seconds": -1})
        assert failed and "forward" in reason
        failed, reason = await call(session, "inject_fault", {"policy": "B2C_1_nope", "error": "server_error"})
        assert failed and "AADB2C" in reason
        failed, reason = await call(session, "create_user", {"email": "TOOL-USER@example.com"})
        assert failed
        failed, reason = await call(session, "read_journey_trace", {"correlationId": "00000000-0000-0000-0000-000000000000"})
        assert failed and "No sign-in" in reason
        failed, reset = await call(session, "reset_accounts")
        assert not failed and reset["accountsRemoved"] == 1
        return True

    assert with_session(body)


def test_sigterm_stops_the_system_and_removes_its_data(tmp_path):
    """An agent that stops the server leaves nothing behind: no data directory (keys, accounts)."""
    import signal
    import subprocess

    environment = {key: value for key, value in os.environ.items() if not key.startswith("TODO_")}
    environment["TMPDIR"] = str(tmp_path)
    process = subprocess.Popen([SERVER_BIN, "mcp"], env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        # Up: the protocol answers (the system started before it).
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}).encode() + b"\n")
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "todo-b2c", answer
        assert list(tmp_path.glob("todob2c-test-*/settings.json")), "the system runs in TMPDIR"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert not list(tmp_path.glob("todob2c-test-*")), list(tmp_path.iterdir())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
