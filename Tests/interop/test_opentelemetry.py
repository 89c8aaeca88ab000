"""OpenTelemetry export (SPEC §2.13) checked by a receiver built on opentelemetry-proto, the
OpenTelemetry project's own protobuf classes, decoding what `serve --otlp-endpoint` sends over
OTLP/HTTP: a span per request and per journey step, W3C trace context carried into an API
connector and taken from a caller of the Task API, the sign-in and token-grant counters and the
latency histogram, log records, and no password, code, token or email in any of it."""

import http.server
import json
import os
import re
import secrets
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import requests
import yaml
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from conftest import Page, complete_sign_up, unique_email
from test_admin_cli import free_port, serve
from test_authlib_and_pyjwt import REDIRECT

SIGNALS = {
    "/v1/traces": trace_service_pb2.ExportTraceServiceRequest,
    "/v1/metrics": metrics_service_pb2.ExportMetricsServiceRequest,
    "/v1/logs": logs_service_pb2.ExportLogsServiceRequest,
}


class Collector:
    """An OTLP/HTTP receiver: every request decoded with opentelemetry-proto, kept with its raw bytes."""

    def __init__(self):
        self.received = {path: [] for path in SIGNALS}
        self.raw = []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                message = SIGNALS[self.path]()
                message.ParseFromString(body)
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                collector.received[self.path].append(message)
                collector.raw.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self):
        return [span for request in self.received["/v1/traces"] for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]

    def metrics(self):
        return [metric for request in self.received["/v1/metrics"] for resource in request.resource_metrics
                for scope in resource.scope_metrics for metric in scope.metrics]

    def logs(self):
        return [record for request in self.received["/v1/logs"] for resource in request.resource_logs
                for scope in resource.scope_logs for record in scope.log_records]


class Connector:
    """An API connector that lets every sign-up continue, keeping the trace context it was sent."""

    def __init__(self):
        self.traceparents = []
        connector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                connector.traceparents.append(self.headers.get("traceparent"))
                body = json.dumps({"version": "1.0.0", "action": "Continue"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/check"


def attributes(item):
    def value(any_value):
        kind = any_value.WhichOneof("value")
        return getattr(any_value, kind) if kind else None
    return {pair.key: value(pair.value) for pair in item.attributes}


def wait_for(condition, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"not exported within {seconds} s: {what}")


def test_traces_metrics_and_logs_reach_an_otlp_receiver_with_nothing_secret(tmp_path):
    collector, connector = Collector(), Connector()
    data = tmp_path / "data"
    identity_port, api_port = free_port(), free_port()
    # A first start seeds the development tenant; its export, with an API connector before
    # sign-up, is the tenant the second start serves.
    with open(tmp_path / "first.log", "w") as log:
        first = serve(data, identity_port, api_port, log)
        first.terminate()
        first.wait(timeout=30)
    declaration = tmp_path / "tenant.yaml"
    subprocess.run([os.environ["TODO_SERVER_BIN"], "tenant", "export", "--data-dir", str(data), "--output", str(declaration)],
                   check=True, capture_output=True, timeout=60)
    tenant = yaml.safe_load(declaration.read_text())
    tenant["apiConnectors"] = [{"name": "check", "url": connector.url, "auth": "none"}]
    for flow in tenant["userFlows"]:
        if flow["name"] == "B2C_1_susi":
            flow["apiConnectors"] = {"beforeCreatingUser": "check"}
    declaration.write_text(yaml.safe_dump(tenant))

    environment = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="500",
                       OTEL_BLRP_SCHEDULE_DELAY="100")
    log = open(tmp_path / "serve.log", "w")
    process = subprocess.Popen(
        [os.environ["TODO_SERVER_BIN"], "serve", "--data-dir", str(data), "--identity-port", str(identity_port),
         "--api-port", str(api_port), "--password-hash-cost", "4", "--tenant-config", str(declaration),
         "--otlp-endpoint", collector.url],
        stdout=log, stderr=subprocess.STDOUT, env=environment)
    try:
        wait_for(lambda: _healthy(api_port), "the server's start")
        settings = json.loads((data / "settings.json").read_text())
        base, tenant_name, client_id = f"http://127.0.0.1:{identity_port}", settings["tenant"], settings["clientId"]
        email, password = unique_email("otel"), "Otel-Pass1"

        # A hosted sign-up through the flow with the connector, and the code redeemed (PKCE).
        browser = requests.Session()
        verifier = secrets.token_urlsafe(48)
        import base64
        import hashlib
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        authorize = (f"{base}/{tenant_name}/B2C_1_susi/oauth2/v2.0/authorize?client_id={client_id}&response_type=code"
                     f"&redirect_uri={REDIRECT}&scope=openid%20offline_access%20{client_id}&code_challenge={challenge}"
                     f"&code_challenge_method=S256&state=s1&nonce=n1")
        sign_in = Page(browser.get(authorize))
        done = complete_sign_up(browser, Page(browser.get(sign_in.link("createAccount"))), email, password, "Otto Tel")
        assert done.status_code == 302, done.text[:500]
        code = parse_qs(urlparse(done.headers["Location"]).query)["code"][0]
        verification = re.findall(r"\b\d{6}\b", browser.get(f"{base}/dev/outbox").text)
        tokens = requests.post(f"{base}/{tenant_name}/B2C_1_susi/oauth2/v2.0/token", data={
            "grant_type": "authorization_code", "client_id": client_id, "code": code, "redirect_uri": REDIRECT,
            "code_verifier": verifier, "scope": f"openid offline_access {client_id}"}, timeout=30).json()
        assert "access_token" in tokens, tokens

        # The Task API, called with a trace context of our own: its span joins our trace.
        trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
        listed = requests.get(f"http://127.0.0.1:{api_port}/api/tasks", timeout=30, headers={
            "Authorization": f"Bearer {tokens['access_token']}", "traceparent": f"00-{trace_id}-{parent_id}-01"})
        assert listed.status_code == 200, listed.text
        # The web app signs the same account in and lists its tasks: its calls to the token
        # endpoint and to the Task API carry its spans' trace context.
        web = requests.Session()
        sign_in_page = Page(web.get(f"http://127.0.0.1:{api_port}/auth/signin", timeout=30))
        returned = sign_in_page.submit(web, "localAccountForm", {"email": email, "password": password}, timeout=30)
        assert returned.status_code in (302, 303), returned.text[:300]
        web.get(returned.headers["Location"], timeout=30)
        assert web.get(f"http://127.0.0.1:{api_port}/todos", timeout=30).status_code == 200
        refused = requests.post(f"{base}/{tenant_name}/B2C_1_ROPC/oauth2/v2.0/token", data={
            "grant_type": "password", "client_id": client_id, "username": email, "password": "Wrong-Pass9",
            "scope": "openid"}, timeout=30)
        assert refused.status_code == 400

        # Spans arrive in batches: wait for every one the checks below look at.
        def spans_complete():
            spans = collector.spans()
            names = {span.name for span in spans}
            return ({"GET /api/tasks", "GET /todos", "POST api-connector", "POST /{tenant}/{policy}/oauth2/v2.0/token"} <= names
                    and any(s.name.startswith("journey step") and attributes(s).get("todo.journey.result") == "failed" for s in spans)
                    and any(s.trace_id.hex() == trace_id for s in spans))
        wait_for(spans_complete, "the spans")

        def metrics_complete():
            points = {metric.name: [attributes(point) for point in _points(metric)] for metric in collector.metrics()}
            grants = points.get("todo.token_grants", [])
            return ({"todo.sign_ins", "http.server.request.duration"} <= set(points)
                    and any(p.get("grant_type") == "password" and p.get("result") != "success" for p in grants)
                    and any(p.get("grant_type") == "authorization_code" for p in grants))
        wait_for(metrics_complete, "the metrics")
        wait_for(lambda: collector.logs(), "log records")
    finally:
        process.terminate()
        exit_code = process.wait(timeout=30)
        log.close()
    assert exit_code == 0, f"exit {exit_code} after SIGTERM"

    spans = collector.spans()
    by_id = {span.span_id: span for span in spans}
    # A span per request, named by its route (never its path), with its status.
    token_span = next(s for s in spans if s.name == "POST /{tenant}/{policy}/oauth2/v2.0/token")
    assert attributes(token_span)["http.route"] == "/{tenant}/{policy}/oauth2/v2.0/token"
    assert attributes(token_span)["todo.part"] == "identity"
    assert token_span.kind == Span.SPAN_KIND_SERVER
    # A span per journey step, a child of its request's span.
    steps = [s for s in spans if s.name.startswith("journey step")]
    server_kind = by_id[token_span.span_id].kind
    assert steps and all(s.parent_span_id in by_id and by_id[s.parent_span_id].kind == server_kind for s in steps), steps
    assert any(attributes(s).get("todo.journey.result") == "failed" and attributes(s).get("todo.error_code") for s in steps)
    # The connector was called with the trace context of the client span the step made.
    call = next(s for s in spans if s.name == "POST api-connector")
    assert connector.traceparents, "the connector was not called"
    sent = connector.traceparents[-1]
    assert sent == f"00-{call.trace_id.hex()}-{call.span_id.hex()}-01", (sent, call)
    assert by_id[call.parent_span_id].name.startswith("journey step")
    # The Task API's span is the child of the caller's context.
    tasks = next(s for s in spans if s.name == "GET /api/tasks")
    assert tasks.trace_id.hex() == trace_id and tasks.parent_span_id.hex() == parent_id
    assert attributes(tasks)["todo.part"] == "api"

    # The web app's page made client calls that joined its trace: the Task API's span and the
    # token endpoint's are children of the web app's client spans.
    def parent(span):
        return by_id.get(span.parent_span_id)
    page_span = next(s for s in spans if s.name == "GET /todos")
    api_calls = [s for s in spans if s.name.startswith("GET /api/tasks") and parent(s) is not None
                 and parent(s).kind == Span.SPAN_KIND_CLIENT and parent(s).parent_span_id == page_span.span_id]
    assert api_calls, "the Task API's span is not a child of the web app's call"
    assert any(parent(s) is not None and parent(s).kind == Span.SPAN_KIND_CLIENT for s in spans
               if s.name == "POST /{tenant}/{policy}/oauth2/v2.0/token"), "the token endpoint's span has no client parent"

    # The counters, by their bounded dimensions.
    points = {metric.name: [attributes(point) for point in _points(metric)] for metric in collector.metrics()}
    assert any(p.get("kind") == "signUp" and p.get("result") == "success" and p.get("policy") == "B2C_1_susi"
               for p in points["todo.sign_ins"]), points["todo.sign_ins"]
    grants = points["todo.token_grants"]
    assert any(p.get("grant_type") == "authorization_code" and p.get("result") == "success" for p in grants), grants
    assert any(p.get("grant_type") == "password" and p.get("result") != "success" for p in grants), grants
    assert any(p.get("http.route") == "/api/tasks" for p in points["http.server.request.duration"])

    # Outbound calls are our client spans, which name the host only: AsyncHTTPClient's own, which
    # record the full URL (an OAuth2 claims endpoint's query holds a token), are off.
    leaky = [(s.name, attributes(s)) for s in spans if "url.full" in attributes(s) or "url.query" in attributes(s)]
    assert not leaky, str(leaky)[:2000]
    # Nothing secret or personal anywhere: not in a span, a metric or a log record.
    secrets_sent = [email, password, "Wrong-Pass9", code, tokens["access_token"], tokens["id_token"], tokens["refresh_token"],
                    verifier] + verification
    everything = b"".join(collector.raw)
    text = "\n".join(str(message) for messages in collector.received.values() for message in messages)
    for secret in secrets_sent:
        assert secret.encode() not in everything and secret not in text, f"exported: {secret[:12]}…"


def _healthy(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except requests.ConnectionError:
        return False


def _points(metric):
    kind = metric.WhichOneof("data")
    return getattr(metric, kind).data_points


class SilentSink:
    """A collector that takes connections and never answers them."""

    def __init__(self):
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.held.append(connection)


import pytest  # noqa: E402


@pytest.mark.parametrize("sink", ["answers", "closed port", "never answers"])
def test_sigterm_with_telemetry_ends_the_process_cleanly_and_soon(tmp_path, sink):
    """Issue 51, F2: with an OTLP endpoint every SIGTERM ended in a crash (SIGILL) after 7-17 s."""
    collector = Collector() if sink == "answers" else None
    silent = SilentSink() if sink == "never answers" else None
    url = collector.url if collector else silent.url if silent else f"http://127.0.0.1:{free_port()}"
    identity_port, api_port = free_port(), free_port()
    environment = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="500", OTEL_BLRP_SCHEDULE_DELAY="100")
    with open(tmp_path / "serve.log", "w") as log:
        process = subprocess.Popen(
            [os.environ["TODO_SERVER_BIN"], "serve", "--data-dir", str(tmp_path / "data"), "--identity-port", str(identity_port),
             "--api-port", str(api_port), "--password-hash-cost", "4", "--otlp-endpoint", url],
            stdout=log, stderr=subprocess.STDOUT, env=environment)
        try:
            wait_for(lambda: _healthy(api_port), "the server's start")
            # Something to export: requests, their spans and measurements.
            for _ in range(3):
                requests.get(f"http://127.0.0.1:{identity_port}/healthz", timeout=5)
            # The exporters have work in flight: the collector got some, or the silent one holds a connection.
            if collector:
                wait_for(lambda: collector.metrics() or collector.spans(), "an export")
            if silent:
                wait_for(lambda: silent.held, "an export's connection")
            started = time.monotonic()
            process.terminate()
            code = process.wait(timeout=30)
            elapsed = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 0, f"exit {code} after SIGTERM: {(tmp_path / 'serve.log').read_text()[-2000:]}"
    assert elapsed < 12, f"SIGTERM took {elapsed:.1f} s"
