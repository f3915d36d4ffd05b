"""Every view as a page, as an htmx fragment and as JSON."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import models, services
from tests.helpers.claude_code_lines import (
    assistant,
    long_tool_session,
    small_session,
    subagent_prompt,
    user,
    write,
)
from tests.helpers.htmx import HTMX
from tests.helpers.worker import run_worker

pytestmark = pytest.mark.django_db


def test_login_required_everywhere(client, tmp_path):
    sid = services.import_file(path=small_session(tmp_path)).session
    for url in ["/", f"/sessions/{sid}/", "/import/", f"/sessions/{sid}/timeline/", f"/sessions/{sid}/diagnosis/"]:
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    for url in ["/sessions.json", f"/sessions/{sid}.json", f"/sessions/{sid}/timeline.json", "/?format=json"]:
        response = client.get(url)
        assert response.status_code == 401 and "Log in" in response.json()["error"], url


def test_session_list_page_fragment_and_json(client_in, tmp_path):
    sid = services.import_file(path=small_session(tmp_path)).session
    page = client_in.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<html" in html and f"/sessions/{sid}/" in html and "<meter" in html
    fragment = client_in.get("/", {"q": "proj"}, **HTMX)
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert f"/sessions/{sid}/" in fragment.content.decode()
    data = client_in.get("/", {"format": "json"}).json()
    assert data["count"] == 1
    (row,) = data["sessions"]
    assert row["id"] == sid and row["peak_context"] == 1500 and row["context_window"] == 200_000
    assert client_in.get("/sessions.json").json()["count"] == 1


def test_session_list_filters_and_sorts(client_in, tmp_path):
    a = services.import_file(path=small_session(tmp_path)).session
    b = long_tool_session(tmp_path)
    models.Session.objects.filter(pk=b).update(has_compaction=True)
    ids = lambda **q: [s["id"] for s in client_in.get("/", {"format": "json", **q}).json()["sessions"]]  # noqa: E731
    assert ids(has_compaction="1") == [b]
    assert ids(sort="peak") == [a, b]
    assert ids(sort="-peak") == [b, a]
    assert ids(agent="klaude-code") == []
    assert ids(q="no-such-thing") == []


def test_session_list_filters_by_project_model_date_and_paginates(client_in, tmp_path):
    from sessions_app.selectors import sessions as session_selectors

    sid = services.import_file(path=small_session(tmp_path)).session
    ids = lambda **q: [s["id"] for s in client_in.get("/", {"format": "json", **q}).json()["sessions"]]  # noqa: E731
    assert ids(project="/home/me/proj") == [sid] and ids(project="/elsewhere") == []
    assert ids(model="claude-opus-4-5-20251101") == [sid] and ids(model="claude-haiku-4-5") == []
    assert ids(since="2026-01-01", until="2026-01-01") == [sid]
    assert ids(since="2026-01-02") == [] and ids(until="2025-12-31") == []
    assert ids(since="not-a-date") == [sid]  # an unreadable date filters nothing rather than failing
    session = models.Session.objects.get(pk=sid)
    for i in range(session_selectors.PER_PAGE):
        models.Session.objects.create(format="claude-code", external_id=f"extra-{i}", started_at=session.started_at)
    first = client_in.get("/", {"format": "json"}).json()
    second = client_in.get("/", {"format": "json", "page": 2}).json()
    assert first["pages"] == 2 and len(first["sessions"]) == session_selectors.PER_PAGE and len(second["sessions"]) == 1
    assert client_in.get("/", {"page": "abc"}).status_code == 200


def test_session_list_query_count_does_not_grow(client_in, tmp_path):
    for i in range(3):
        p = tmp_path / f"d{i}"
        p.mkdir()
        long_tool_session(p, result_text=f"text {i}", n=1 + i)
    with CaptureQueriesContext(connection) as few:
        client_in.get("/")
    for i in range(3, 12):
        p = tmp_path / f"d{i}"
        p.mkdir()
        long_tool_session(p, result_text=f"text {i}", n=1)
    with CaptureQueriesContext(connection) as many:
        client_in.get("/")
    assert len(many) == len(few)


def test_session_page_fragment_and_json(client_in, tmp_path):
    sid = long_tool_session(tmp_path)
    page = client_in.get(f"/sessions/{sid}/")
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html
    assert '<strong class="tool-name">Read</strong>' in html and "show all (5,000 chars)" in html
    fragment = client_in.get(f"/sessions/{sid}/", {"q": "start"}, **HTMX).content.decode()
    assert "<html" not in fragment and 'id="transcript"' in fragment and "1 record match" in fragment
    data = client_in.get(f"/sessions/{sid}.json").json()
    assert data["session"]["id"] == sid
    assistant_msg = next(m for m in data["messages"] if m["kind"] == "assistant")
    (result,) = assistant_msg["results"]
    assert result["blocks"][0]["truncated"] is True and result["blocks"][0]["chars"] == 5000


def test_search_in_a_session_finds_quoted_and_non_ascii_text(client_in, tmp_path):
    path = write(tmp_path, "q.jsonl", user("u1", None, 'He said "größer" twice'), user("u2", "u1", "nothing"))
    sid = services.import_file(path=path).session
    for q in ('"größer"', "größer", 'said "'):
        data = client_in.get(f"/sessions/{sid}/", {"q": q, "format": "json"}).json()
        assert [m["seq"] for m in data["messages"]] == [0], q


def test_show_all_returns_the_whole_block(client_in, tmp_path):
    sid = long_tool_session(tmp_path)
    seq = models.Message.objects.get(session_id=sid, kind="tool_result").seq
    fragment = client_in.get(f"/sessions/{sid}/m/{seq}/blocks/0/", **HTMX)
    assert fragment.status_code == 200 and "R" * 5000 in fragment.content.decode()
    data = client_in.get(f"/sessions/{sid}/m/{seq}/blocks/0/", {"format": "json"}).json()
    assert data["chars"] == 5000 and len(data["text"]) == 5000
    assert client_in.get(f"/sessions/{sid}/m/{seq}/blocks/9/").status_code == 404


def test_permalink_redirects_to_the_page_holding_the_message(client_in, tmp_path):
    sid = long_tool_session(tmp_path, n=120, result_text="x")
    last = models.Message.objects.filter(session_id=sid).order_by("-seq").first()
    response = client_in.get(f"/sessions/{sid}/m/{last.seq}/")
    assert response.status_code == 302
    assert response["Location"].endswith(f"page=3#m{last.seq}")
    assert client_in.get(f"/sessions/{sid}/m/99999/").status_code == 404


def test_session_page_query_count_is_bounded(client_in, tmp_path):
    small = long_tool_session(tmp_path, n=5)
    (tmp_path / "big").mkdir()
    big = long_tool_session(tmp_path / "big", n=400, result_text="y" * 3000)
    with CaptureQueriesContext(connection) as q_small:
        client_in.get(f"/sessions/{small}/")
    with CaptureQueriesContext(connection) as q_big:
        client_in.get(f"/sessions/{big}/")
    assert len(q_big) == len(q_small)


def test_nul_in_query_parameters_is_not_an_error(client_in, tmp_path):
    sid = services.import_file(path=small_session(tmp_path)).session
    for url, params in [
        ("/", {"q": "a\x00b", "project": "\x00"}),
        (f"/sessions/{sid}/", {"q": "\x00", "agent": "m\x00"}),
    ]:
        assert client_in.get(url, params).status_code == 200


def test_pages_vary_on_htmx(client_in, tmp_path):
    assert "HX-Request" in client_in.get("/")["Vary"]


def test_missing_session_is_404(client_in):
    assert client_in.get("/sessions/424242/").status_code == 404
    assert client_in.get("/sessions/424242.json").status_code == 404


def test_transcript_content_is_escaped(client_in, tmp_path):
    evil = (
        '<script>alert(1)</script><img src=x onerror="alert(2)">'
        '<a href="javascript:alert(3)">x</a><svg onload="alert(4)"></svg>'
    )
    path = write(tmp_path, "evil.jsonl", user("u1", None, evil), assistant("a1", "u1", "msg_1", evil, ctx=10))
    sid = services.import_file(path=path).session
    html = client_in.get(f"/sessions/{sid}/").content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html and "<svg onload" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    csp = client_in.get(f"/sessions/{sid}/")["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def upload(client, *files, **extra):
    return client.post("/import/", {"files": list(files)}, **extra)


def imported_upload(client, files) -> dict:
    """Upload through the JSON twin, let the worker import, and return the finished import's report."""
    started = client.post("/import/?format=json", {"files": files})
    assert started.status_code == 202, started.content
    assert started.json()["status"] == "queued"
    run_worker()
    finished = client.get(started.json()["url"].rstrip("/") + ".json").json()
    assert finished["status"] == "done", finished
    return finished["report"]


@pytest.mark.django_db(transaction=True)  # the worker closes its connection, as a real one does
def test_upload_several_files_page_fragment_and_json(client_in, tmp_path):
    good = small_session(tmp_path)
    bad = SimpleUploadedFile("notes.jsonl", b'{"a": 1}\n')
    response = upload(client_in, SimpleUploadedFile("s-1.jsonl", good.read_bytes()), bad)
    assert response.status_code == 302
    waiting = client_in.get(response["Location"]).content.decode()
    assert "<html" in waiting and "Queued" in waiting and 'hx-trigger="every 1s"' in waiting
    run_worker()
    html = client_in.get(response["Location"]).content.decode()
    assert "s-1.jsonl" in html and "new session" in html and "notes.jsonl" in html and "unrelated" in html
    assert 'hx-trigger="every 1s"' not in html  # finished: the page stops polling
    again = upload(client_in, SimpleUploadedFile("s-1.jsonl", good.read_bytes()), **HTMX)
    assert again["HX-Redirect"].startswith("/imports/")
    run_worker()
    fragment = client_in.get(again["HX-Redirect"], **HTMX).content.decode()
    assert "<html" not in fragment and "unchanged" in fragment
    assert models.Session.objects.count() == 1


def test_an_import_is_shown_only_to_its_uploader_and_staff(client_in, tmp_path, django_user_model):
    response = upload(client_in, SimpleUploadedFile("s-1.jsonl", small_session(tmp_path).read_bytes()))
    other = django_user_model.objects.create_user(username="other", password="pw-other")
    from django.test import Client

    stranger = Client()
    stranger.force_login(other)
    assert stranger.get(response["Location"]).status_code == 404
    other.is_staff = True
    other.save()
    assert stranger.get(response["Location"]).status_code == 200


@pytest.mark.django_db(transaction=True)  # the worker closes its connection, as a real one does
def test_upload_json_twin_lists_line_errors(client_in, tmp_path):
    content = (user("u1", None, "hi") + "{broken\n" + assistant("a1", "u1", "msg_1", "x", ctx=99)).encode()
    data = imported_upload(client_in, [SimpleUploadedFile("one.jsonl", content)])
    (item,) = data["imported"]
    assert item["errors"][0]["line"] == 2 and item["created"] is True


@pytest.mark.django_db(transaction=True)  # the worker closes its connection, as a real one does
def test_upload_zip_of_a_projects_folder(client_in, tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("projects/-home-me-proj/s-1.jsonl", small_session(tmp_path).read_bytes())
        zf.writestr(
            "projects/-home-me-proj/s-1/subagents/agent-abc1234.jsonl",
            subagent_prompt("sub task"),
        )
        zf.writestr("projects/-home-me-proj/notes.txt", "ignored")
        zf.writestr("../../escape.jsonl", "{}")
    archive = SimpleUploadedFile("projects.zip", buffer.getvalue(), content_type="application/zip")
    data = imported_upload(client_in, [archive])
    sessions = {item["session"] for item in data["imported"]}
    assert len(data["imported"]) == 2 and len(sessions) == 1
    assert [r["message"] for r in data["rejected"]] == ["Unsafe path in zip."]
    assert models.Message.objects.filter(agent="abc1234").count() == 1


@pytest.mark.django_db(transaction=True)  # the worker closes its connection, as a real one does
def test_bad_zips_are_reported_not_a_500(client_in, tmp_path):
    good = io.BytesIO()
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("p/a.jsonl", small_session(tmp_path).read_bytes())
    corrupt = bytearray(good.getvalue())
    corrupt[corrupt.index(b"hello") : corrupt.index(b"hello") + 5] = b"HELLO"  # stored member, CRC now wrong
    clash = io.BytesIO()
    with zipfile.ZipFile(clash, "w") as zf:
        zf.writestr("x.jsonl", "{}")
        zf.writestr("x.jsonl/y.jsonl", "{}")
    empty = io.BytesIO()
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("readme.txt", "nothing here")
    for content, says in (
        (bytes(corrupt), "Cannot unpack"),
        (clash.getvalue(), "Cannot unpack"),
        (empty.getvalue(), "no session files"),
    ):
        data = imported_upload(client_in, [SimpleUploadedFile("a.zip", content)])
        assert any(says in r["message"] for r in data["rejected"]), data


@pytest.mark.django_db(transaction=True)  # the worker closes its connection, as a real one does
def test_two_different_uploads_with_the_same_name_are_two_sessions(client_in):
    from tests.conftest import KLAUDE_SAMPLES

    first, second = sorted(KLAUDE_SAMPLES.glob("dot-klaude/projects/*/sessions/*/events.jsonl"))[:2]
    for events in (first, second):
        meta = events.with_name("meta.json")
        files = [
            SimpleUploadedFile("events.jsonl", events.read_bytes()),
            SimpleUploadedFile("meta.json", meta.read_bytes()),
        ]
        data = imported_upload(client_in, files)
        assert data["rejected"] == [] and data["imported"][0]["created"] is True
    sessions = models.Session.objects.order_by("id")
    assert [s.external_id for s in sessions] == [first.parent.name, second.parent.name]
    # meta.json uploaded beside events.jsonl is read: the work dir comes from it.
    assert all(s.project == "/home/dev/projects/webapp" for s in sessions)


def test_upload_without_files_says_so(client_in):
    response = client_in.post("/import/?format=json", {})
    assert response.status_code == 400
    assert response.json()["rejected"][0]["message"] == "Choose at least one file."
    assert models.UploadImport.objects.count() == 0


def test_an_upload_over_the_request_limit_is_refused_before_it_is_stored(client_in, settings, tmp_path):
    settings.UPLOAD_MAX_REQUEST_BYTES = 1000
    response = client_in.post("/import/?format=json", {"files": [SimpleUploadedFile("big.jsonl", b"x" * 5000)]})
    assert response.status_code == 413
    assert response.json()["rejected"][0]["message"].startswith("The upload is ")
    assert models.UploadImport.objects.count() == 0


def test_post_requires_csrf(client, reviewer, tmp_path):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    response = strict.post("/import/", {"files": [SimpleUploadedFile("a.jsonl", b"{}")]})
    assert response.status_code == 403
