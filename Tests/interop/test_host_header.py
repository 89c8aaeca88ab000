"""What the Host header may change: the identity service writes URLs and issuers for its own
names and port only, and the web app sends the identity service no reply URL it made up."""

import os
from urllib.parse import parse_qs, urlparse

import requests


def test_a_foreign_port_or_name_in_host_does_not_reach_urls(server):
    port = urlparse(server.base).port
    url = f"{server.base}/{server.tenant}/B2C_1_susi/v2.0/.well-known/openid-configuration"
    own = requests.get(url, headers={"Host": f"localhost:{port}"}).json()
    assert own["issuer"].startswith(f"http://localhost:{port}/")
    for host in (f"localhost:{port + 1}", "attacker.example", f"attacker.example:{port}"):
        document = requests.get(url, headers={"Host": host}).json()
        for key in ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri"):
            assert host not in document[key], (host, key, document[key])


def test_the_web_app_sends_a_registered_reply_url_whatever_the_host(server):


    web = os.environ["TODO_WEB_URL"]
    port = urlparse(web).port
    response = requests.get(f"http://127.0.0.1:{port}/auth/signin", headers={"Host": "attacker.example"}, allow_redirects=False)
    assert response.status_code in (302, 303)
    reply = parse_qs(urlparse(response.headers["Location"]).query)["redirect_uri"][0]
    assert "attacker.example" not in reply
    assert reply.endswith(f":{port}/auth/openid/return")


def test_metrics_are_served_to_local_requests_only():
    web = os.environ["TODO_WEB_URL"]
    port = urlparse(web).port
    assert requests.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
    # What a reverse proxy on this machine forwards: a public name.
    assert requests.get(f"http://127.0.0.1:{port}/metrics", headers={"Host": "todo.example.com"}).status_code == 404
    # Or a proxy that keeps the loopback Host but says whom it forwards for.
    assert requests.get(f"http://127.0.0.1:{port}/metrics", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 404


def _ropc_from(source, server, username, password):
    """ROPC over a connection from the given loopback address (Linux routes all of 127/8 locally)."""
    import http.client
    from urllib.parse import urlencode

    base = urlparse(server.base)
    connection = http.client.HTTPConnection(base.hostname, base.port, timeout=10, source_address=(source, 0))
    body = urlencode({
        "grant_type": "password", "client_id": server.client_id, "username": username, "password": password,
        "scope": f"openid {server.client_id}",
    })
    connection.request("POST", f"/{server.tenant}/B2C_1_ROPC/oauth2/v2.0/token", body,
                       {"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    return response.status, text


def test_lockout_falls_on_the_failing_source(server):
    import subprocess

    from conftest import unique_email

    email = unique_email("lock")
    data = os.path.dirname(os.environ["TODO_SETTINGS"])
    arguments = [os.environ["TODO_SERVER_BIN"], "users", "add", "--email", email, "--name", "Locked", "--password-stdin",
                 "--data-dir", data]
    if os.environ.get("TODO_SERVER_DATABASE_URL"):
        arguments += ["--database-url", os.environ["TODO_SERVER_DATABASE_URL"]]
    subprocess.run(arguments, input="Lock-Pass1\n", text=True, check=True, capture_output=True, timeout=120)
    for guess in range(10):
        _ropc_from("127.0.0.2", server, email, f"Wrong-{guess}")
    status, text = _ropc_from("127.0.0.2", server, email, "Lock-Pass1")
    assert status == 400 and "AADB2C90114" in text, text
    # The owner, elsewhere, is not locked out.
    status, text = _ropc_from("127.0.0.1", server, email, "Lock-Pass1")
    assert status == 200, text


def test_the_simulated_facebook_answers_loopback_hosts_only(server):
    """F-2 of the second outside attack: a Host that is not this machine's (a balancer's, or a
    DNS name pointing here) gets nothing from the simulated provider, its dialog or callback."""
    port = urlparse(server.base).port
    dialog = f"{server.base}/facebook.com/dialog/oauth?state=x&redirect_uri=http://localhost:{port}/{server.tenant}/oauth2/authresp"
    callback = f"{server.base}/{server.tenant}/oauth2/authresp?state=x&code=y"
    for url in (dialog, callback):
        for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}"):
            response = requests.get(url, headers={"Host": host}, allow_redirects=False)
            assert response.status_code == 403, (url, host, response.status_code)
            assert "this machine only" in response.text
        # A local reverse proxy's request names 127.0.0.1 but says it forwarded someone.
        for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
            proxied = requests.get(url, headers={"Host": f"127.0.0.1:{port}", header: "203.0.113.9"}, allow_redirects=False)
            assert proxied.status_code == 403, (url, header, proxied.status_code)
        local = requests.get(url, headers={"Host": f"localhost:{port}"}, allow_redirects=False)
        assert local.status_code == 400, (url, local.status_code)
