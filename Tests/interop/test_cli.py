"""The `todo` command-line app as a user runs it: the built binary as a subprocess against the
running todo-server, checked through its output and exit status (SPEC §1)."""

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import Page, unique_email


@pytest.fixture()
def cli(tmp_path):
    binary = os.environ["TODO_CLI_BIN"]
    environment = dict(os.environ, TODO_TOKEN_CACHE=str(tmp_path / "cache.json"), NO_COLOR="1")

    def run(*arguments, stdin=None, check=True):
        result = subprocess.run([binary, *arguments], input=stdin, capture_output=True, text=True, timeout=120, env=environment)
        if check:
            assert result.returncode == 0, f"todo {' '.join(arguments)}: {result.stderr}"
        return result

    run.environment = environment
    run.binary = binary
    run.cache = tmp_path / "cache.json"
    return run


def add_user(email, password="Cli-Passw0rd", name="Cli User", settings=None, database_url=None):
    settings = Path(settings or os.environ["TODO_SETTINGS"])
    database_url = os.environ.get("TODO_SERVER_DATABASE_URL") if database_url is None else database_url
    command = [os.environ["TODO_SERVER_BIN"], "users", "add", "--data-dir", str(settings.parent), "--email", email, "--name", name,
               "--password-stdin"]
    if database_url:
        command += ["--database-url", database_url]
    subprocess.run(command, input=password + "\n", text=True, check=True, capture_output=True)
    return email


def login(cli, email, password="Cli-Passw0rd"):
    return cli("login", "--username", email, "--password-stdin", stdin=password + "\n")


def one_line_error(result):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_password_login_and_every_task_command(cli):
    email = add_user(unique_email("cli"))
    assert f"Signed in as {email}" in login(cli, email).stdout
    assert "Added" in cli("add", "Buy", "milk").stdout
    cli("add", "Walk the dog")
    tasks = json.loads(cli("list", "--json").stdout)
    assert [task["title"] for task in tasks] == ["Walk the dog", "Buy milk"]  # newest first, like the API

    human = cli("list").stdout
    assert "  1 [ ] Buy milk" in human and "  2 [ ] Walk the dog" in human and "2 open, 0 done" in human
    assert "Done 1 [x] Buy milk" in cli("done", "1").stdout
    assert [task["title"] for task in json.loads(cli("list", "--done", "--json").stdout)] == ["Buy milk"]
    assert [task["title"] for task in json.loads(cli("list", "--open", "--json").stdout)] == ["Walk the dog"]
    cli("undo", "1")
    assert not any(task["completed"] for task in json.loads(cli("list", "--json").stdout))
    prefix = tasks[0]["id"][:8]
    assert "Renamed" in cli("rename", prefix, "Walk the cat").stdout
    assert "Deleted" in cli("rm", "1").stdout
    assert [task["title"] for task in json.loads(cli("list", "--json").stdout)] == ["Walk the cat"]

    claims = json.loads(cli("whoami", "--json").stdout)["claims"]
    assert claims["emails"] == [email] and claims["name"] == "Cli User"
    profile = json.loads(cli("me", "--json").stdout)
    assert profile["mail"] == email and profile["displayName"] == "Cli User"

    # The cache is the user's alone.
    assert oct(cli.cache.stat().st_mode & 0o777) == "0o600"
    assert f"Signed out {email}" in cli("logout").stdout
    assert "todo login" in one_line_error(cli("list", check=False))


def test_two_accounts_and_switch(cli):
    first = add_user(unique_email("first"), name="First")
    second = add_user(unique_email("second"), name="Second")
    login(cli, first)
    cli("add", "first's task")
    login(cli, second)
    assert json.loads(cli("list", "--json").stdout) == []
    accounts = json.loads(cli("accounts", "--json").stdout)
    assert {account["username"] for account in accounts} == {first, second}
    assert [account["username"] for account in accounts if account["current"]] == [second]
    assert "Switched to" in cli("switch", first).stdout
    assert [task["title"] for task in json.loads(cli("list", "--json").stdout)] == ["first's task"]
    cli("logout", "--all")
    assert json.loads(cli("accounts", "--json").stdout) == []


def test_errors_are_one_clear_line_and_nothing_is_lost(cli, tmp_path):
    email = add_user(unique_email("errors"))
    assert "sign-in failed" in one_line_error(login_result := cli(
        "login", "--username", email, "--password-stdin", stdin="wrong-password\n", check=False))
    assert "AADB2C" in login_result.stderr
    login(cli, email)
    cli("add", "keep me")
    assert "title" in one_line_error(cli("add", "   ", check=False))
    assert "no task 7" in one_line_error(cli("done", "7", check=False))
    assert "no task with id" in one_line_error(cli("rm", "ffffffff", check=False))
    assert "no settings" in one_line_error(cli("list", "--settings", str(tmp_path / "missing.json"), check=False))

    # The Task API is down: a settings copy that points at a closed port.
    settings = json.loads(Path(os.environ["TODO_SETTINGS"]).read_text())
    settings["taskAPI"] = "http://127.0.0.1:9"
    down = tmp_path / "down.json"
    down.write_text(json.dumps(settings))
    assert "cannot reach the Task API" in one_line_error(cli("list", "--settings", str(down), check=False))

    # A corrupted token cache is moved aside and reported; the tasks are still on the server.
    cli.cache.write_text("{ this is not json")
    corrupted = cli("list", check=False)
    assert corrupted.returncode != 0 and "corrupted" in corrupted.stderr and "todo login" in corrupted.stderr
    assert list(tmp_path.glob("cache.json.corrupt-*"))
    login(cli, email)
    assert [task["title"] for task in json.loads(cli("list", "--json").stdout)] == ["keep me"]


class Lines:
    """Standard error of a running `todo`, line by line (a reader thread, so waiting never blocks)."""

    def __init__(self, process):
        self.queue = queue.Queue()
        threading.Thread(target=self._read, args=(process.stderr,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.queue.put(line)

    def url(self, deadline=30):
        """The next sign-in URL `todo login --no-browser` prints."""
        seen = ""
        end = time.time() + deadline
        while time.time() < end:
            try:
                line = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            seen += line
            if line.strip().startswith("http"):
                return line.strip()
        raise AssertionError(f"no URL printed: {seen}")


def test_browser_login_through_the_loopback_redirect(cli, server):
    email = add_user(unique_email("browser"))
    process = subprocess.Popen([cli.binary, "login", "--no-browser", "--timeout", "60"], env=cli.environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = Lines(process).url()
        assert "code_challenge_method=S256" in url and "response_mode=form_post" in url
        # `todo login` asks again, as the tutorials' apps do: no silent sign-in from an old SSO cookie.
        assert "prompt=login" in url
        browser = requests.Session()
        page = Page(browser.get(url))
        answer = page.submit(browser, "localAccountForm", {"email": email, "password": "Cli-Passw0rd"})
        # form_post: a page whose form posts the code to the CLI's loopback listener.
        posted = Page(answer)
        form = posted.forms[0]
        assert form["action"].startswith("http://127.0.0.1:")
        closed = browser.post(form["action"], data=form["fields"])
        assert "You can close this tab" in closed.text
        out = process.stdout.read()
        assert process.wait(timeout=30) == 0
        assert f"Signed in as {email}" in out
    finally:
        process.kill()
    assert json.loads(cli("whoami", "--json").stdout)["claims"]["emails"] == [email]


def test_forgot_password_during_login_leads_into_the_reset_flow(cli):
    process = subprocess.Popen([cli.binary, "login", "--no-browser", "--timeout", "60"], env=cli.environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(process)
        browser = requests.Session()
        page = Page(browser.get(lines.url()))
        error_page = browser.get(page.link("forgotPassword"))
        # AADB2C90118 comes back to the CLI as a form_post; it then starts the reset flow.
        form = Page(error_page).forms[0]
        assert form["fields"]["error"] == "access_denied" and "AADB2C90118" in form["fields"]["error_description"]
        browser.post(form["action"], data=form["fields"])
        reset_url = lines.url()
        assert "B2C_1_reset" in reset_url
        assert 'id="sendCode"' in browser.get(reset_url).text
    finally:
        process.kill()
        process.wait()


def test_login_with_sso_lets_the_browser_session_answer(cli):
    process = subprocess.Popen([cli.binary, "login", "--sso", "--no-browser", "--timeout", "60"], env=cli.environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "prompt=" not in Lines(process).url()
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("variable", ["HOME", "XDG_CONFIG_HOME"])
def test_the_token_cache_follows_home_and_xdg_config_home(tmp_path, variable):
    """Foundation's home directory on Linux is the passwd entry's; the CLI follows the
    environment instead, so two sandboxes never share a cache."""
    email = add_user(unique_email("cache"))
    environment = {key: value for key, value in os.environ.items() if key not in ("TODO_TOKEN_CACHE", "XDG_CONFIG_HOME")}
    environment[variable] = str(tmp_path)
    environment["NO_COLOR"] = "1"
    result = subprocess.run([os.environ["TODO_CLI_BIN"], "login", "--username", email, "--password-stdin"],
                            input="Cli-Passw0rd\n", capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr
    expected = tmp_path / (".config/todob2c/token-cache.json" if variable == "HOME" else "todob2c/token-cache.json")
    assert expected.exists()
    assert email in subprocess.run([os.environ["TODO_CLI_BIN"], "whoami"], capture_output=True, text=True, timeout=60,
                                   env=environment).stdout


def test_every_command_works_against_the_tls_server_through_the_settings_ca(tmp_path, tls_server):
    """settings.json of `serve --tls` names its development CA (`caCertificate`); the CLI trusts
    it for the identity service and the Task API alike."""
    settings = os.environ["TODO_TLS_SETTINGS"]
    assert json.loads(Path(settings).read_text())["caCertificate"]
    # The TLS server of scripts/test keeps its data in SQLite in its data dir.
    email = add_user(unique_email("tls"), settings=settings, database_url="")
    environment = dict(os.environ, TODO_SETTINGS=settings, TODO_TOKEN_CACHE=str(tmp_path / "cache.json"), NO_COLOR="1")

    def run(*arguments, stdin=None):
        result = subprocess.run([os.environ["TODO_CLI_BIN"], *arguments], input=stdin, capture_output=True, text=True,
                                timeout=120, env=environment)
        assert result.returncode == 0, f"todo {' '.join(arguments)}: {result.stderr}"
        return result.stdout

    assert f"Signed in as {email}" in run("login", "--username", email, "--password-stdin", stdin="Cli-Passw0rd\n")
    run("add", "Over", "TLS")
    assert "Over TLS" in run("list")


@pytest.mark.parametrize("tutorial", ["settings.plist", "settings-nxoauth2.plist"])
def test_the_cli_reads_either_tutorials_plist(cli, tutorial):
    """`todo --settings` takes the ADAL tutorial's settings.plist or the NXOAuth2 tutorial's
    plist (SPEC §2.8): the same account, the same tasks, whichever file names the system."""
    plist = str(Path(os.environ["TODO_SETTINGS"]).parent / tutorial)
    email = add_user(unique_email("plist"))
    signed_in = cli("login", "--settings", plist, "--username", email, "--password-stdin", stdin="Cli-Passw0rd\n")
    assert f"Signed in as {email}" in signed_in.stdout
    cli("add", "--settings", plist, "From", "a", "plist")
    assert "From a plist" in cli("list", "--settings", plist).stdout
    # The tasks are the user's, whatever settings file the CLI read them through.
    assert "From a plist" in cli("list").stdout


def test_native_signup_login_and_reset_in_the_terminal(cli):
    """External ID's native authentication in the CLI (SPEC §2.15): no browser; the emailed code from
    the development server's outbox; the signed-in account works with every task command."""
    email = unique_email("native")
    created = cli("signup", "--username", email, "--name", "Native Cli", "--password-stdin", "--code-from-outbox",
                  stdin="Native-Passw0rd\n")
    assert f"Signed up and signed in as {email}" in created.stdout
    assert "Added" in cli("add", "From the terminal").stdout
    claims = json.loads(cli("whoami", "--json").stdout)["claims"]
    assert claims["name"] == "Native Cli" and claims["ver"] == "2.0"
    cli("logout")

    wrong = cli("login", "--native", "--username", email, "--password-stdin", stdin="Wrong-Passw0rd\n", check=False)
    assert one_line_error(wrong) == "todo: the user name or password is not valid"
    assert f"Signed in as {email}" in cli("login", "--native", "--username", email, "--password-stdin",
                                          stdin="Native-Passw0rd\n").stdout
    assert [task["title"] for task in json.loads(cli("list", "--json").stdout)] == ["From the terminal"]

    again = cli("signup", "--username", email, "--password-stdin", "--code-from-outbox", stdin="Other-Passw0rd\n", check=False)
    assert one_line_error(again) == "todo: an account with that email address exists already"
    reset = cli("password-reset", "--native", "--username", email, "--password-stdin", "--code-from-outbox",
                stdin="Newer-Passw0rd\n")
    assert f"Password changed; signed in as {email}" in reset.stdout
    old = cli("login", "--native", "--username", email, "--password-stdin", stdin="Native-Passw0rd\n", check=False)
    assert one_line_error(old) == "todo: the user name or password is not valid"
    bad = cli("login", "--code-from-outbox", check=False)
    assert bad.returncode != 0 and "--code-from-outbox needs --native" in bad.stderr


def test_server_version_names_its_commit():
    """`todo-server --version`: the version and the commit this checkout's build came from."""
    import re

    printed = subprocess.run([os.environ["TODO_SERVER_BIN"], "--version"], capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    match = re.fullmatch(r"todo-server (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12})(-modified)?\)\n", printed.stdout)
    assert match, printed.stdout
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2]).stdout.strip()
    assert match.group(2) == head
