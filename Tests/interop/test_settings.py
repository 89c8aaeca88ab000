"""settings.json as a client reads it: every address a tutorial's app needs, each answering."""

import requests


def test_settings_name_the_graph_origin_and_it_answers_in_graphs_form(server):
    graph = server.settings["graphBaseURL"]
    response = requests.get(f"{graph}/v1.0/me", timeout=30)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "InvalidAuthenticationToken"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
