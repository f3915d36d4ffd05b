"""Every JSON twin answers its errors in JSON with the status: never an HTML page, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app import services
from tests.helpers.claude_code_lines import small_session

pytestmark = pytest.mark.django_db

MISSING = 424242
JSON_URLS = (
    "/sessions/{id}.json",
    "/sessions/{id}/timeline.json",
    "/sessions/{id}/diagnosis.json",
    "/sessions/{id}/preview.json",
    "/sessions/{id}/live.json",
    "/runs/{id}.json",
    "/runs/{id}/compare.json",
    "/imports/{id}.json",
)


def _json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    body = response.json()
    assert body["error"] and isinstance(body["error"], str)
    return body


@pytest.mark.parametrize("template", JSON_URLS)
def test_a_missing_object_is_a_json_404(client_in: Client, template: str) -> None:
    body = _json_error(client_in.get(template.format(id=MISSING)), 404)
    assert body["status"] == 404


@pytest.mark.parametrize(
    "path",
    [f"/sessions/{MISSING}/", f"/sessions/{MISSING}/timeline/", f"/runs/{MISSING}/", f"/sessions/{MISSING}/m/3/"],
)
def test_format_json_on_a_missing_page_is_a_json_404(client_in: Client, path: str) -> None:
    _json_error(client_in.get(path, {"format": "json"}), 404)


def test_a_missing_page_without_json_stays_html(client_in: Client) -> None:
    response = client_in.get(f"/sessions/{MISSING}/")
    assert response.status_code == 404 and not response["Content-Type"].startswith("application/json")


def test_an_unknown_json_address_is_a_json_404(client_in: Client) -> None:
    body = _json_error(client_in.get("/sessions/not-a-number.json"), 404)
    assert body["error"] == "Nothing at this address."
    _json_error(client_in.get("/no-such-thing.json"), 404)


def test_a_wrong_method_is_a_json_405_that_names_the_allowed_one(client_in: Client) -> None:
    response = client_in.post("/sessions.json")
    body = _json_error(response, 405)
    assert response["Allow"] == "GET" and "use GET" in body["error"]


def test_a_refused_csrf_token_is_a_json_403(reviewer) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    _json_error(client.post("/reviews.json"), 403)


def test_bad_parameters_never_give_a_500(client_in: Client, tmp_path) -> None:
    imported = services.import_file(path=small_session(tmp_path))
    assert isinstance(imported, services.FileImport)
    sid = imported.session
    bad = {
        "page": "x",
        "agent": "<nobody>",
        "call": "abc",
        "at": "-4",
        "cut_start": "z",
        "cut_end": "9999999999999999999999",
        "strategy": "no-such-strategy",
        "replay": "bogus",
        "cap_chars": "many",
        "since": "2026-13-45",
        "sort": "sideways",
        "q": '"unbalanced',
    }
    for template in JSON_URLS[:5] + (
        "/sessions.json",
        "/search.json",
        "/reviews.json",
        "/sessions/{id}/timeline/turn/",
    ):
        params = bad if template.endswith(".json") else {**bad, "format": "json"}
        response = client_in.get(template.format(id=sid), params)
        assert response.status_code < 500, (template, response.content[:300])
        assert response["Content-Type"].startswith("application/json"), template
        if response.status_code >= 400:
            _json_error(response, response.status_code)


def test_a_json_twin_asks_for_login_in_json(client: Client) -> None:
    body = _json_error(client.get("/sessions.json"), 401)
    assert "Log in" in body["error"]


@pytest.mark.parametrize(
    "q",
    ['"', "***", "NEAR(a b)", "a OR", "or", "-", '" OR "', "a\x00b", "x" * 5000, "ünïcödé 日本語", "-a -b", "'; --"],
)
def test_any_search_text_answers(client_in: Client, tmp_path, q: str) -> None:
    imported = services.import_file(path=small_session(tmp_path))
    assert isinstance(imported, services.FileImport)
    for url in ("/sessions.json", "/search.json", f"/sessions/{imported.session}.json", "/", "/search/"):
        response = client_in.get(url, {"q": q})
        assert response.status_code == 200, (url, response.content[:300])
