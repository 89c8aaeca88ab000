#!/usr/bin/env bash
# Benchmark (not a test): the signed-in "My tasks" page (20 tasks) with a session cookie, beside
# GET /api/tasks with a bearer token for the same user, in the same run, same connections and
# threads. Reports requests per second, the ratio, and p99 latency.
source "$(dirname "$0")/../lib.sh"
bench_setup
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q --disable-pip-version-check requests

# Sign up through the web app and the hosted pages (as a browser would), add 20 tasks, and hand
# over the session cookie and a bearer token for the same user.
read -r COOKIE TOKEN < <(.venv/bin/python - "http://localhost:$API_PORT" "http://127.0.0.1:$PORT" "$TENANT" "$CLIENT" <<'PY'
import re, sys, requests
from html.parser import HTMLParser
web, identity, tenant, client = sys.argv[1:]
class Forms(HTMLParser):
    def __init__(self):
        super().__init__(); self.forms = []
    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form": self.forms.append({"action": attrs.get("action"), "id": attrs.get("id"), "fields": {}})
        elif tag == "input" and self.forms and attrs.get("name"): self.forms[-1]["fields"][attrs["name"]] = attrs.get("value", "")
session = requests.Session()
def submit(page, **values):
    parser = Forms(); parser.feed(page.text)
    form = next(f for f in parser.forms if f["id"] == "attributeVerification")
    return session.post(requests.compat.urljoin(page.url, form["action"]), data=dict(form["fields"], **values))
# The sign-up page's three steps: the address, the code from the dev outbox, the details.
page = submit(session.get(f"{web}/auth/signin?flow=signup"), email="bench-web@example.com")
code = re.search(r"\b(\d{6})\b", session.get(f"{identity}/dev/outbox").text.split("<li>")[1]).group(1)
page = submit(page, code=code)
tasks = submit(page, newPassword="Bench-Passw0rd", reenterPassword="Bench-Passw0rd", displayName="Bench")
csrf = re.search(r'name="csrf_token" value="([^"]+)"', tasks.text).group(1)
for i in range(20):
    session.post(f"{web}/todos", data={"csrf_token": csrf, "title": f"task {i + 1}"})
cookie = session.cookies.get("todo_session")
token = requests.post(f"{identity}/{tenant}/B2C_1_ROPC/oauth2/v2.0/token", data={
    "grant_type": "password", "client_id": client, "username": "bench-web@example.com", "password": "Bench-Passw0rd",
    "scope": f"openid {client}"}).json()["access_token"]
print(cookie, token)
PY
)
curl -fs -o /dev/null -H "Cookie: todo_session=$COOKIE" "http://localhost:$API_PORT/todos" || { echo "the session cookie does not work" >&2; exit 1; }

log "GET /api/tasks (bearer, same user, 20 tasks)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$API_PORT/api/tasks" | tee "$WORK/api.txt"
log "My tasks page (session cookie)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Cookie: todo_session=$COOKIE" \
  "http://localhost:$API_PORT/todos" | tee "$WORK/page.txt"

rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
p99() { awk '/ 99%/ {print $2}' "$1"; }
python3 - "$(rps "$WORK/api.txt")" "$(rps "$WORK/page.txt")" "$(p99 "$WORK/api.txt")" "$(p99 "$WORK/page.txt")" <<'PY'
import sys
api, page = map(float, sys.argv[1:3])
print(f"GET /api/tasks {api:.0f}/s (p99 {sys.argv[3]}); My tasks page {page:.0f}/s (p99 {sys.argv[4]}) = {page / api * 100:.0f}% of the API's rate")
PY
echo "peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"
