"""The hosted pages' languages over real HTTP (SPEC §2.11): `ui_locales` picks Spanish among
the dev tenant's declared languages, an undeclared one falls back to English, and a sign-up
in Spanish goes through to the app's code."""

from urllib.parse import parse_qs, urlencode, urlparse

import requests

from conftest import Page, complete_sign_up, unique_email


def start(server, ui_locales):
    session = requests.Session()
    params = {
        "client_id": server.client_id, "response_type": "code", "redirect_uri": "http://127.0.0.1:9",
        "scope": f"openid {server.client_id}", "state": "lang-state", "nonce": "n", "ui_locales": ui_locales,
    }
    page = Page(session.get(f"{server.base}/{server.tenant}/B2C_1_susi/oauth2/v2.0/authorize?{urlencode(params)}"))
    return session, page


def test_ui_locales_picks_the_pages_language(server):
    _, spanish = start(server, "es-MX en")
    assert spanish.response.status_code == 200
    assert '<html lang="es">' in spanish.response.text
    assert "Iniciar sesión" in spanish.response.text and "¿Olvidó su contraseña?" in spanish.response.text

    _, fallback = start(server, "de-DE")
    assert '<html lang="en">' in fallback.response.text and "Forgot your password?" in fallback.response.text

    # A sign-up in Spanish, through to the app.
    session, page = start(server, "es")
    signup = Page(session.get(page.link("createAccount")))
    assert "Enviar código de verificación" in signup.response.text
    created = complete_sign_up(session, signup, unique_email("es"), "Clave-Segura1", "Eva Español")
    assert created.status_code in (302, 303), created.text[:300]
    location = urlparse(created.headers["Location"])
    assert location.netloc == "127.0.0.1:9" and "code" in parse_qs(location.query)
