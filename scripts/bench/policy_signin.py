"""Interactive sign-ins through the hosted pages, as a browser makes them (authorize, the sign-in
page, the form post, the code redeemed), on several policies in interleaved rounds (each ratio is a
policy against the one before it), measuring the
server's CPU time (utime + stime from /proc) per sign-in. Used by scripts/bench/policy.sh."""

import base64
import hashlib
import html
import json
import os
import re
import secrets
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import requests

BASE, TENANT, CLIENT, PID, EMAIL, PASSWORD = sys.argv[1:7]
POLICIES = sys.argv[7].split(",")
ROUNDS, COUNT = int(os.environ.get("ROUNDS", "3")), int(os.environ.get("COUNT", "60"))
TICKS = os.sysconf("SC_CLK_TCK")
REDIRECT = "http://127.0.0.1:8765"


def cpu_seconds():
    fields = open(f"/proc/{PID}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def sign_in(policy):
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    session = requests.Session()
    page = session.get(f"{BASE}/{TENANT}/{policy}/oauth2/v2.0/authorize", params=dict(
        client_id=CLIENT, response_type="code", redirect_uri=REDIRECT, scope=f"openid {CLIENT}", code_challenge=challenge,
        code_challenge_method="S256", nonce="n", state="s"))
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.text).group(1))
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    # The built-in page names the field `email`; a custom policy's unified page `signInName`.
    fields = {"csrf_token": csrf, "password": PASSWORD, "email": EMAIL, "signInName": EMAIL}
    answer = session.post(urljoin(BASE, action), data=fields, allow_redirects=False)
    code = parse_qs(urlparse(answer.headers["Location"]).query)["code"][0]
    token = requests.post(f"{BASE}/{TENANT}/{policy}/oauth2/v2.0/token", data=dict(
        grant_type="authorization_code", client_id=CLIENT, code=code, redirect_uri=REDIRECT, code_verifier=verifier))
    assert token.status_code == 200, token.text
    if policy == "B2C_1A_bench_rich":
        # The sub-journeys and their ten transformations ran: their last claims are in the token.
        payload = token.json()["id_token"].split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims.get("mailbox") and claims.get("tags") == ["rich"] and claims.get("isExample") is True, claims


results = {policy: [] for policy in POLICIES}
for policy in POLICIES:
    sign_in(policy)  # warm-up: the custom policy is compiled on its first use
for round in range(ROUNDS):
    for policy in POLICIES:
        start = cpu_seconds()
        for _ in range(COUNT):
            sign_in(policy)
        results[policy].append((cpu_seconds() - start) / COUNT * 1000)
for policy, samples in results.items():
    samples.sort()
    print(f"{policy}: {samples[len(samples) // 2]:.2f} ms of server CPU per sign-in (median of {ROUNDS} rounds of {COUNT})")
medians = [sorted(results[p])[len(results[p]) // 2] for p in POLICIES]
for index in range(1, len(POLICIES)):
    print(f"ratio {POLICIES[index]} / {POLICIES[index - 1]}: {medians[index] / medians[index - 1]:.2f}x")
