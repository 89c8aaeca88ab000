"""The --tls listener as a scanner sees it: TLS 1.2+ with forward-secret AEAD suites only, and a
development CA that can vouch only for the names it was made for, for about a year."""

import datetime
import json
import os
import socket
import ssl
from urllib.parse import urlparse

import pytest
import requests
from cryptography import x509


def _connect(tls_server, configure):
    url = urlparse(tls_server.base)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(tls_server.ca)
    configure(context)
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=url.hostname) as tls:
            return tls.version(), tls.cipher()[0]


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_1_0_and_1_1_are_refused_by_the_server(tls_server, version):
    def old(context):
        context.set_ciphers("ALL:@SECLEVEL=0")
        context.minimum_version = version
        context.maximum_version = version

    with pytest.raises(ssl.SSLError) as refused:
        _connect(tls_server, old)
    # The server's alert, not our own client declining to offer the version.
    assert refused.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION", refused.value


def test_cbc_suites_with_sha1_are_refused_by_the_server(tls_server):
    def cbc(context):
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:@SECLEVEL=0")

    with pytest.raises(ssl.SSLError) as refused:
        _connect(tls_server, cbc)
    assert refused.value.reason in ("SSLV3_ALERT_HANDSHAKE_FAILURE", "TLSV1_ALERT_INSUFFICIENT_SECURITY"), refused.value


def test_tls_1_2_with_gcm_and_tls_1_3_are_served(tls_server):
    def tls12(context):
        context.maximum_version = ssl.TLSVersion.TLSv1_2

    version, cipher = _connect(tls_server, tls12)
    assert version == "TLSv1.2" and ("GCM" in cipher or "CHACHA20" in cipher), cipher
    version, _ = _connect(tls_server, lambda context: None)
    assert version == "TLSv1.3"


def test_the_development_ca_is_name_constrained_and_short_lived(tls_server):
    with open(tls_server.ca, "rb") as handle:
        ca = x509.load_pem_x509_certificate(handle.read())
    constraints = ca.extensions.get_extension_for_class(x509.NameConstraints)
    assert constraints.critical
    permitted = {str(name.value) for name in constraints.value.permitted_subtrees}
    # DNS names only: BoringSSL (swift-nio-ssl) fails a chain whose CA has iPAddress constraints.
    assert permitted == {"localhost"}, permitted
    assert all(isinstance(name, x509.DNSName) for name in constraints.value.permitted_subtrees)
    # Key identifiers link the chain (RFC 5280 §4.2.1.1-2).
    ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert lifetime <= datetime.timedelta(days=399), lifetime


def test_the_web_app_reaches_the_identity_service_through_the_development_ca(tls_server):
    """The web app (a confidential client inside the server) fetches the identity service's
    discovery over TLS, trusting the same CA: sign-in starts with a redirect, not a 502."""
    settings = json.load(open(os.environ["TODO_TLS_SETTINGS"]))
    api = urlparse(settings["taskAPI"])
    response = requests.get(f"https://localhost:{api.port}/auth/signin", verify=tls_server.ca, allow_redirects=False, timeout=30)
    assert response.status_code in (302, 303), response.status_code
    assert "/oauth2/v2.0/authorize" in response.headers["Location"]
