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
