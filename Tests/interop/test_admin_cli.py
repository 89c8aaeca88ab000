"""todo-server's admin commands as a user runs them: a subprocess on a fresh data directory,
checked through their output, their exit status and the running server's behaviour."""

import json
import os
import socket
import subprocess
import time

import pytest
import requests

from conftest import Server, unique_email


@pytest.fixture()
def admin(tmp_path):
    binary = os.environ["TODO_SERVER_BIN"]
    data = tmp_path / "data"

    def run(*arguments, stdin=None, check=True):
        result = subprocess.run(
            [binary, *arguments, "--data-dir", str(data)], input=stdin, capture_output=True, text=True, timeout=120
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    return run


def test_users_apps_and_keys_commands(admin, server):
    email = unique_email("admin")
    created = admin("users", "add", "--email", email, "--name", "Admin Made", "--password-stdin", stdin="Admin-Pass1\n")
    assert "oid" in created.stdout
    assert email in admin("users", "list").stdout

    duplicate = admin("users", "add", "--email", email.upper(), "--name", "Again", "--password-stdin", stdin="Admin-Pass1\n", check=False)
    assert duplicate.returncode != 0
    assert "already exists" in duplicate.stderr
    weak = admin("users", "add", "--email", unique_email(), "--name", "Weak", "--password-stdin", stdin="weak\n", check=False)
    assert weak.returncode != 0 and "password" in weak.stderr

    assert "unlocked" in admin("users", "unlock", email).stdout
    # Disable, enable and revoke go through the rules Graph's users API uses.
    assert "disabled" in admin("users", "disable", email).stdout
    assert "disabled" in admin("users", "list").stdout.split(email)[1].splitlines()[0]
    assert "enabled" in admin("users", "enable", email).stdout
    assert "disabled" not in admin("users", "list").stdout.split(email)[1].splitlines()[0]
    assert "revoked the sessions" in admin("users", "revoke-sessions", email).stdout
    assert "deleted" in admin("users", "delete", email).stdout
    assert email not in admin("users", "list").stdout
    missing = admin("users", "delete", "nobody@example.com", check=False)
    assert missing.returncode != 0 and "no account" in missing.stderr

    added = admin("apps", "add", "--name", "Scripted", "--kind", "confidential", "--redirect-uri", "https://app.example/cb").stdout
    client_id = added.split("client id: ")[1].split()[0]
    assert "client secret (shown once): " in added
    assert client_id in admin("apps", "list").stdout
    granted = admin("apps", "grant", client_id, "--api", "https://todob2c.onmicrosoft.com/tasks", "--scope", "tasks.read").stdout
    assert "scopes tasks.read" in granted
    assert "scopes tasks.read" in admin("apps", "list").stdout.split(client_id)[1]
    unknown_scope = admin("apps", "grant", client_id, "--api", "https://todob2c.onmicrosoft.com/tasks", "--scope", "payroll", check=False)
    assert unknown_scope.returncode != 0 and "exposes no scope" in unknown_scope.stderr
    assert "removed" in admin("apps", "remove", client_id).stdout
    assert client_id not in admin("apps", "list").stdout
    bad_kind = admin("apps", "add", "--name", "X", "--kind", "sideways", check=False)
    assert bad_kind.returncode != 0
    # Graph application permissions: JSON out, only served roles, only for confidential apps, nothing written on refusal.
    daemon = json.loads(admin("apps", "add", "--name", "Daemon", "--kind", "confidential", "--graph-permission",
                              "user.readwrite.all", "--json").stdout)
    assert set(daemon) == {"clientId", "clientSecret"}
    assert "roles User.ReadWrite.All" in admin("apps", "list").stdout.split(daemon["clientId"])[1]
    before = admin("apps", "list").stdout
    for extra in (["--kind", "confidential", "--graph-permission", "Directory.ReadWrite.All"], ["--graph-permission", "User.Read.All"]):
        refused = admin("apps", "add", "--name", "Nope", *extra, check=False)
        assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert admin("apps", "list").stdout == before
    # External ID's app-bound user flow: named flows only, spelled as the tenant spells them.
    bound = admin("apps", "add", "--name", "Bound", "--user-flow", "b2c_1_SIGN_UP", "--redirect-uri", "http://localhost").stdout
    bound_id = bound.split("client id: ")[1].split()[0]
    assert "user flow B2C_1_sign_up" in admin("apps", "list").stdout.split(bound_id)[1]
    no_flow = admin("apps", "add", "--name", "Y", "--user-flow", "B2C_1_nope", check=False)
    assert no_flow.returncode != 0 and "is not a user flow" in no_flow.stderr
    assert len(no_flow.stderr.strip().splitlines()) == 1

    before = admin("keys", "list").stdout.strip().splitlines()
    assert len(before) == 1 and before[0].endswith("active")
    old_kid = before[0].split()[0]
    # A rotation publishes the new key first; the old one signs until the new one's time.
    rotated = admin("keys", "rotate").stdout
    assert "published now, signs from" in rotated, rotated
    pending_kid = rotated.split()[2].rstrip(":")
    listed = admin("keys", "list").stdout
    assert "pending: published, signs from" in listed.split(pending_kid)[1].splitlines()[0], listed
    assert "active until" in listed.split(old_kid)[1].splitlines()[0], listed
    both = admin("keys", "rotate", "--now", "--activate-after", "5", check=False)
    assert both.returncode != 0 and "exclude" in both.stderr
    # --now: an emergency rotation signs at once; the others retire, still published.
    rotated = admin("keys", "rotate", "--now").stdout
    after = admin("keys", "list").stdout
    new_kid = rotated.split()[-1]
    assert rotated.startswith("new active key") and after.split(new_kid)[1].splitlines()[0].endswith("active"), after
    assert "retired, published until" in after.split(old_kid)[1].splitlines()[0], after

    # A kid is base64url and may begin with "-": it must still be accepted as the value.
    revoked = admin("keys", "revoke", "--kid", new_kid).stdout
    assert f"revoked {new_kid}" in revoked and "new active key" in revoked
    listed = admin("keys", "list").stdout
    assert f"{new_kid}" in listed and "withdrawn" in listed.split(new_kid)[1].splitlines()[0]
    unknown = admin("keys", "revoke", "--kid", "-no-such-kid", check=False)
    assert unknown.returncode != 0 and "no signing key" in unknown.stderr


def test_admin_commands_refuse_control_characters(admin):
    escape = admin("users", "add", "--email", unique_email(), "--name", "Eve\x1b[2J", "--password-stdin", stdin="Admin-Pass1\n", check=False)
    assert escape.returncode != 0 and "cannot be used" in escape.stderr
    nul_like = admin("users", "add", "--email", "eve@example.com\u200b", "--name", "Eve", "--password-stdin", stdin="Admin-Pass1\n", check=False)
    assert nul_like.returncode != 0 and "not a valid email" in nul_like.stderr
    app = admin("apps", "add", "--name", "Bad\u202eName", check=False)
    assert app.returncode != 0 and "--name" in app.stderr


def test_users_added_by_the_command_sign_in_on_the_running_server(server):
    binary = os.environ["TODO_SERVER_BIN"]
    data = os.path.dirname(os.environ["TODO_SETTINGS"])
    database = os.environ.get("TODO_SERVER_DATABASE_URL")
    email = unique_email("live")
    arguments = [binary, "users", "add", "--email", email, "--name", "Live", "--password-stdin", "--data-dir", data]
    if database:
        arguments += ["--database-url", database]
    result = subprocess.run(arguments, input="Live-Pass1\n", capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    response = server.ropc(email, "Live-Pass1")
    assert response.status_code == 200, response.text


def test_key_material_is_sealed_with_a_data_key_outside_the_database(admin, tmp_path):
    import sqlite3

    admin("keys", "rotate")
    key_file = tmp_path / "data" / "data-key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert len(key_file.read_text().strip()) == 43
    with sqlite3.connect(tmp_path / "data" / "todo.sqlite") as database:
        stored = [row[0] for row in database.execute("SELECT private_key_pem FROM signing_keys")]
    assert len(stored) == 2 and all(value.startswith("sealed:v1:") and "PRIVATE KEY" not in value for value in stored)

    # Another key (a second instance configured apart): one line naming the fix, non-zero exit.
    binary = os.environ["TODO_SERVER_BIN"]
    other = subprocess.run(
        [binary, "keys", "list", "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TODO_DATA_KEY": "A" * 43},
    )
    assert other.returncode != 0
    assert "TODO_DATA_KEY" in other.stderr and len(other.stderr.strip().splitlines()) == 1
    assert "active" in admin("keys", "list").stdout


def test_serve_refuses_broken_settings_and_tenant_files_in_one_line_each(admin, tmp_path):
    """serve stops before listening, with exit status 1 (no crash, no trace) and one line per problem."""
    broken = tmp_path / "tenant.yaml"
    broken.write_text("tenant: [unclosed\n")
    result = admin("serve", "--tenant-config", str(broken), "--identity-port", "1", "--api-port", "2", check=False)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "line 2, column 1" in lines[0] and str(broken) in lines[0], result.stderr

    bad = admin("serve", "--identity-port", "http", "--api-port", "70000", "--log-level", "loud", check=False)
    assert bad.returncode == 1, bad.stderr
    problems = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(problems) == 3, bad.stderr
    assert any("--identity-port (TODO_IDENTITY_PORT)" in line for line in problems)
    assert any("--api-port (TODO_API_PORT)" in line for line in problems)
    assert any("--log-level (TODO_LOG_LEVEL)" in line for line in problems)


def test_serve_names_why_the_database_cannot_be_used(admin):
    """A database that cannot be used stops serve at once with PostgreSQL's own reason in one
    line, not postgres-nio's "Generic description" and not after waiting."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    cases = [(f"postgres://todo@127.0.0.1:{closed_port}/todo", "Connection refused")]
    database = os.environ.get("TODO_SERVER_DATABASE_URL")
    if database:
        cases.append((database.rsplit("/", 1)[0] + "/no_such_database", 'database "no_such_database" does not exist'))
    for url, reason in cases:
        started = time.monotonic()
        result = admin("serve", "--database-url", url, "--identity-port", "1", "--api-port", "2", check=False)
        assert result.returncode == 1, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and reason in lines[0] and "Generic description" not in lines[0], result.stderr
        assert time.monotonic() - started < 20


def test_tenant_export_round_trips_and_reapplying_changes_nothing(admin, tmp_path):
    """`tenant export --with-users` writes the declaration (no secret or hash in clear);
    applying it again changes nothing; an edit is applied and reported; the accounts, with their
    passwords, come back where the data key is, and are refused in one line where it is not."""
    admin("users", "add", "--email", "kept@example.com", "--name", "Kept", "--password-stdin", stdin="Kept-Passw0rd\n")
    daemon = json.loads(admin("apps", "add", "--name", "Daemon", "--kind", "confidential", "--json").stdout)
    exported = tmp_path / "tenant.yaml"
    assert "exported" in admin("tenant", "export", "--with-users", "--output", str(exported)).stdout
    text = exported.read_text()
    assert oct(exported.stat().st_mode & 0o777) == "0o600"
    assert daemon["clientSecret"] not in text and "$2" not in text  # no secret, no bcrypt hash in clear
    assert "secretHashes" in text and "sealedPasswordHash: sealed:" in text and "kept@example.com" in text
    assert admin("tenant", "apply", str(exported)).stdout.strip() == "no changes"

    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace("displayName: Kept", "displayName: Kept Renamed").replace("displayName: TodoB2C", "displayName: TodoB2C Edited"))
    changes = admin("tenant", "apply", str(edited)).stdout
    assert "tenant todob2c.onmicrosoft.com updated" in changes and "user kept@example.com updated" in changes
    assert admin("tenant", "apply", str(edited)).stdout.strip() == "no changes"
    assert "Kept Renamed" in admin("users", "list").stdout

    # The accounts and the password come back on a fresh store that has the same data key…
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "data-key").write_bytes((tmp_path / "data" / "data-key").read_bytes())
    binary = os.environ["TODO_SERVER_BIN"]
    applied = subprocess.run([binary, "tenant", "apply", str(edited), "--data-dir", str(fresh)], capture_output=True, text=True, timeout=120)
    assert applied.returncode == 0, applied.stderr
    assert "user kept@example.com added" in applied.stdout
    listed = subprocess.run([binary, "users", "list", "--data-dir", str(fresh)], capture_output=True, text=True, timeout=120).stdout
    assert "Kept Renamed" in listed
    # …and are refused, in one line and with nothing written, where the key differs.
    other = tmp_path / "other"
    refused = subprocess.run([binary, "tenant", "apply", str(edited), "--data-dir", str(other)], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1 and "data key" in refused.stderr
    other_tenants = subprocess.run([binary, "tenant", "export", "--data-dir", str(other)], capture_output=True, text=True, timeout=120).stdout
    assert "TodoB2C Edited" not in other_tenants and "Daemon" not in other_tenants, "a refused apply wrote nothing"


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(data, identity_port, api_port, log):
    """A server of its own on `data`, started and waited for."""
    process = subprocess.Popen(
        [os.environ["TODO_SERVER_BIN"], "serve", "--data-dir", str(data), "--identity-port", str(identity_port),
         "--api-port", str(api_port), "--password-hash-cost", "4"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    import time

    for _ in range(200):
        try:
            if requests.get(f"http://127.0.0.1:{api_port}/healthz", timeout=1).status_code == 200:
                return process
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not start")


class CreationWatch:
    """The mode of each file created in `directory`, read the moment inotify reports it."""

    def __init__(self, directory):
        import ctypes
        import threading

        self.directory = directory
        self.modes = {}
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0
        assert self.libc.inotify_add_watch(self.fd, str(directory).encode(), 0x100) >= 0  # IN_CREATE
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        import select
        import struct

        while not self.stop.is_set():
            if not select.select([self.fd], [], [], 0.05)[0]:
                continue
            data = os.read(self.fd, 65536)
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + length].rstrip(b"\0").decode()
                offset += 16 + length
                try:
                    self.modes[name] = os.stat(self.directory / name).st_mode & 0o777
                except FileNotFoundError:
                    pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        import time as clock

        clock.sleep(0.3)
        self.stop.set()
        self.thread.join()
        os.close(self.fd)


def test_backup_and_restore_carry_accounts_and_tasks(tmp_path):
    """`backup` writes the whole store (0600, secrets still sealed); `restore` into a fresh store
    with the same data key brings back the account (its password works) and its tasks; a file
    that is not a backup is refused in one line, changing nothing."""
    binary = os.environ["TODO_SERVER_BIN"]
    source, target = tmp_path / "source", tmp_path / "target"
    identity_port, api_port = free_port(), free_port()
    log = open(tmp_path / "server.log", "w")
    server = serve(source, identity_port, api_port, log)
    try:
        subprocess.run([binary, "users", "add", "--email", "backed@example.com", "--name", "Backed", "--password-stdin",
                        "--data-dir", str(source)], input="Backup-Pass1\n", text=True, check=True, capture_output=True, timeout=60)
        settings = json.loads((source / "settings.json").read_text())
        minted = requests.post(f"http://127.0.0.1:{identity_port}/dev/tokens",
                               json={"user": "backed@example.com", "client": settings["clientId"]}, timeout=30).json()
        bearer = {"Authorization": f"Bearer {minted['access_token']}"}
        for title in ("first", "second"):
            assert requests.post(f"http://127.0.0.1:{api_port}/api/tasks", json={"title": title}, headers=bearer, timeout=30).status_code == 201
    finally:
        server.terminate()
        server.wait(timeout=30)

    backup = tmp_path / "backups" / "store.json"
    backup.parent.mkdir()
    # Every file that appears in the directory is watched as it is created (inotify): none may
    # ever be readable by others, even under umask 000 (F-8: the file was made 0644, then restricted).
    with CreationWatch(backup.parent) as watch:
        written = subprocess.run([binary, "backup", str(backup), "--data-dir", str(source)], capture_output=True, text=True,
                                 timeout=120, preexec_fn=lambda: os.umask(0))
    assert written.returncode == 0, written.stderr
    assert watch.modes and all(mode == 0o600 for mode in watch.modes.values()), {name: oct(mode) for name, mode in watch.modes.items()}
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
    text = backup.read_text()
    assert "Backup-Pass1" not in text and "BEGIN PRIVATE KEY" not in text
    assert "$2a$" not in text and "$2b$" not in text, "a password hash in clear"
    assert '"outbox"' not in text and '"verification_codes"' not in text

    target.mkdir()
    (target / "data-key").write_bytes((source / "data-key").read_bytes())
    restored = subprocess.run([binary, "restore", str(backup), "--data-dir", str(target)], capture_output=True, text=True, timeout=120)
    assert restored.returncode == 0, restored.stderr
    not_a_backup = tmp_path / "nonsense.json"
    not_a_backup.write_text('{"format": "something else"}')
    refused = subprocess.run([binary, "restore", str(not_a_backup), "--data-dir", str(target)], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr

    # The same public address (the issuer owns the tasks), the restored store behind it.
    server = serve(target, identity_port, api_port, log)
    try:
        settings = json.loads((target / "settings.json").read_text())
        token = requests.post(
            f"http://127.0.0.1:{identity_port}/{settings['tenant']}/B2C_1_ROPC/oauth2/v2.0/token",
            data={"grant_type": "password", "client_id": settings["clientId"], "username": "backed@example.com",
                  "password": "Backup-Pass1", "scope": f"openid {settings['clientId']}"}, timeout=30)
        assert token.status_code == 200, token.text
        listed = requests.get(f"http://127.0.0.1:{api_port}/api/tasks",
                              headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=30)
        assert sorted(item["title"] for item in listed.json()["items"]) == ["first", "second"]
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_admin_commands_hash_at_the_configured_cost(tmp_path):
    """`users add` makes its hash at the cost `serve` is told (TODO_PASSWORD_HASH_COST), not a cost of its own."""
    import sqlite3
    data = tmp_path / "data"
    for cost, email in [("4", "cheap@example.com"), ("11", "dear@example.com")]:
        result = subprocess.run(
            [os.environ["TODO_SERVER_BIN"], "users", "add", "--data-dir", str(data), "--email", email, "--name", "Cost", "--password-stdin"],
            input="Cost-Pass1\n", capture_output=True, text=True, timeout=120, env={**os.environ, "TODO_PASSWORD_HASH_COST": cost},
        )
        assert result.returncode == 0, result.stderr
    with sqlite3.connect(data / "todo.sqlite") as db:
        hashes = dict(db.execute("SELECT sign_in_name, password_hash FROM users").fetchall())
    assert hashes["cheap@example.com"].startswith("$2b$04$") and hashes["dear@example.com"].startswith("$2b$11$"), hashes
