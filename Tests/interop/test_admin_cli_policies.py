"""`todo-server policies` as a user runs it: custom policies and their key sets on a fresh data
directory, checked through the commands' output and exit status."""

import os

from test_admin_cli import admin  # noqa: F401 (fixture)


def test_policies_commands(admin, tmp_path):  # noqa: F811
    """`todo-server policies`: a directory of this project's own policies uploads in any order;
    list, show and delete; a broken one is one line on standard error, a non-zero exit, nothing stored."""
    source = os.path.join(os.path.dirname(__file__), "policies")
    folder = tmp_path / "policies"
    folder.mkdir()
    for name in (n for n in os.listdir(source) if n.endswith(".xml")):
        with open(os.path.join(source, name)) as handle:
            (folder / name).write_text(handle.read().replace("TENANT", "todob2c.onmicrosoft.com"))
    # The JWT issuer's key set first, as B2C's setup has it: without it the upload names it and stores nothing.
    keyless = admin("policies", "upload", str(folder), check=False)
    assert keyless.returncode != 0 and len(keyless.stderr.strip().splitlines()) == 1
    assert "'B2C_1A_TokenSigningKeyContainer'" in keyless.stderr and admin("policies", "list").stdout.strip() == ""
    admin("policies", "keys", "create", "TokenSigningKeyContainer")
    admin("policies", "keys", "generate", "TokenSigningKeyContainer")
    uploaded = admin("policies", "upload", str(folder))
    assert uploaded.stdout.split() == ["created", "B2C_1A_InteropBase", "created", "B2C_1A_interop_rp"]
    listed = admin("policies", "list").stdout.splitlines()
    assert listed == ["B2C_1A_interop_rp  (base B2C_1A_InteropBase)", "B2C_1A_InteropBase"]
    assert admin("policies", "show", "b2c_1a_interop_rp").stdout == (folder / "B2C_1A_interop_rp.xml").read_text()

    broken = tmp_path / "broken.xml"
    broken.write_text((folder / "B2C_1A_interop_rp.xml").read_text().replace('ReferenceId="Interop"', 'ReferenceId="Elsewhere"'))
    refused = admin("policies", "upload", str(broken), check=False)
    assert refused.returncode != 0
    assert len(refused.stderr.strip().splitlines()) == 1 and "'Elsewhere'" in refused.stderr
    assert admin("policies", "show", "B2C_1A_interop_rp").stdout == (folder / "B2C_1A_interop_rp.xml").read_text()

    base_first = admin("policies", "delete", "B2C_1A_InteropBase", check=False)
    assert base_first.returncode != 0 and "B2C_1A_interop_rp" in base_first.stderr
    assert admin("policies", "delete", "B2C_1A_interop_rp").stdout.strip() == "deleted B2C_1A_interop_rp"
    assert admin("policies", "list").stdout.splitlines() == ["B2C_1A_InteropBase"]
    missing = admin("policies", "show", "B2C_1A_nothing", check=False)
    assert missing.returncode != 0 and "no custom policy" in missing.stderr


def test_policy_key_commands(admin):  # noqa: F811
    """`todo-server policies keys`: key sets made, filled and listed without ever showing a secret; a bad
    request is one line on standard error and a non-zero exit."""
    assert admin("policies", "keys", "create", "TokenSigningKeyContainer").stdout.strip() == "created B2C_1A_TokenSigningKeyContainer"
    assert admin("policies", "keys", "create", "B2C_1A_FacebookSecret").stdout.strip() == "created B2C_1A_FacebookSecret"
    again = admin("policies", "keys", "create", "TokenSigningKeyContainer", check=False)
    assert again.returncode != 0 and len(again.stderr.strip().splitlines()) == 1
    kid = admin("policies", "keys", "generate", "B2C_1A_TokenSigningKeyContainer").stdout.strip()
    assert len(kid) > 20
    secret_kid = admin("policies", "keys", "upload-secret", "B2C_1A_FacebookSecret", "--secret-stdin", stdin="s3cret-value\n").stdout.strip()
    no_stdin = admin("policies", "keys", "upload-secret", "B2C_1A_FacebookSecret", check=False)
    assert no_stdin.returncode != 0 and "--secret-stdin" in no_stdin.stderr
    wrong_use = admin("policies", "keys", "generate", "B2C_1A_TokenSigningKeyContainer", "--use", "other", check=False)
    assert wrong_use.returncode != 0 and "use must be sig or enc" in wrong_use.stderr
    listed = admin("policies", "keys", "list").stdout
    assert f"  {kid}  sig  RSA" in listed and f"  {secret_kid}  sig  oct" in listed
    assert "s3cret-value" not in listed
    assert admin("policies", "keys", "delete", "B2C_1A_FacebookSecret").stdout.strip() == "deleted B2C_1A_FacebookSecret"
    missing = admin("policies", "keys", "delete", "B2C_1A_FacebookSecret", check=False)
    assert missing.returncode != 0 and "no key set" in missing.stderr
    assert "B2C_1A_FacebookSecret" not in admin("policies", "keys", "list").stdout
