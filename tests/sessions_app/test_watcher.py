"""The live tail: a real watcher (watchfiles, inotify) on a temporary folder, the pages polled as htmx polls them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sessions_app import models, services, watcher
from sessions_app.selectors import live as live_selectors
from tests.helpers.live_session import RunningWatcher, assistant_line, user_line

# The watcher runs in a thread with its own connection, so it must see (and write) committed data.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-home-me-proj"
    folder.mkdir(parents=True)
    return tmp_path / "projects"


@pytest.fixture
def running(root: Path) -> Iterator[RunningWatcher]:
    w = RunningWatcher(root)
    w.thread.start()
    yield w
    w.stop.set()
    w.thread.join(timeout=10)
    assert not w.thread.is_alive(), "the watcher did not stop when asked"


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def _messages(session_id: int) -> int:
    return models.Message.objects.filter(session_id=session_id).count()


def _live_partial(client, session_id: int, seen: str):
    return client.get(f"/sessions/{session_id}/live/", {"seen": seen}, headers={"HX-Request": "true"})


def test_appended_lines_reach_the_session_page_and_timeline_without_a_reload(client_in, root, running):
    path = root / "-home-me-proj" / "live-1.jsonl"
    path.write_text(
        user_line("u1", None, "first question") + assistant_line("a1", "u1", "m1", "first answer", ctx=1200)
    )
    running.wait_for(
        lambda: models.Session.objects.filter(external_id="live-1").exists() and _messages_of("live-1") == 2
    )
    session = models.Session.objects.get(external_id="live-1")

    # What the page was rendered from: its placeholder carries this version, and the first poll triggers nothing.
    page = client_in.get(f"/sessions/{session.pk}/")
    version = f"{session.message_count}-{session.api_calls_main}-{session.api_calls_side}"
    assert f"?seen={version}" in page.content.decode()
    first = _live_partial(client_in, session.pk, version)
    assert "HX-Trigger" not in first and "Live" in first.content.decode()
    assert len(client_in.get(f"/sessions/{session.pk}/timeline.json").json()["series"]["main"]) == 1

    _append(path, user_line("u2", "a1", "second question") + assistant_line("a2", "u2", "m2", "GREW-MARKER", ctx=2400))
    running.wait_for(lambda: _messages(session.pk) == 4)

    # The poll tells the page the session grew; the transcript region then fetches itself again (htmx partial).
    poll = _live_partial(client_in, session.pk, version)
    assert poll["HX-Trigger"] == "session-grew"
    transcript = client_in.get(f"/sessions/{session.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert "GREW-MARKER" in transcript and 'id="transcript"' in transcript
    points = client_in.get(f"/sessions/{session.pk}/timeline.json").json()["series"]["main"]
    assert [p["context"] for p in points] == [1200, 2400]

    # A line the agent is still writing: nothing of it is stored until its end arrives.
    tail = assistant_line("a3", "a1", "m3", "PARTIAL-MARKER", ctx=3600)
    passes = running.passes
    _append(path, user_line("u3", "a2", "third question") + tail[:60])
    running.wait_for_pass_after(passes)
    assert _messages(session.pk) == 5
    assert "PARTIAL-MARKER" not in client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert not models.LineIssue.objects.filter(session=session).exists()

    _append(path, tail[60:])
    running.wait_for(lambda: _messages(session.pk) == 6)
    assert (
        "PARTIAL-MARKER" in client_in.get(f"/sessions/{session.pk}/", headers={"HX-Request": "true"}).content.decode()
    )
    points = client_in.get(f"/sessions/{session.pk}/timeline.json").json()["series"]["main"]
    assert [p["context"] for p in points] == [1200, 2400, 3600]
    assert not models.LineIssue.objects.filter(session=session).exists()
    # One session, grown in place: the watcher never created a second one for the same file.
    assert models.Session.objects.count() == 1


def _messages_of(external_id: str) -> int:
    return models.Message.objects.filter(session__external_id=external_id).count()


def test_catch_up_pass_imports_what_was_written_while_nobody_watched(root):
    path = root / "-home-me-proj" / "old.jsonl"
    path.write_text(user_line("u1", None, "hello") + assistant_line("a1", "u1", "m1", "hi", ctx=900))
    stop = threading.Event()
    seen: list[list[services.FileImport | services.Rejected]] = []
    thread = threading.Thread(
        target=watcher.watch_sessions,
        kwargs={"roots": [root], "stop_event": stop, "on_pass": lambda outcomes: (seen.append(outcomes), stop.set())},
    )
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    [outcome] = seen[0]
    assert isinstance(outcome, services.FileImport) and outcome.created and outcome.lines == 2


def test_journals_and_persisted_tool_results_are_not_watched(tmp_path):
    assert watcher.is_session_file(tmp_path / "p" / "abc.jsonl")
    assert watcher.is_session_file(tmp_path / "p" / "abc" / "subagents" / "agent-1.jsonl")
    assert not watcher.is_session_file(tmp_path / "p" / "journal.jsonl")
    assert not watcher.is_session_file(tmp_path / "p" / "abc" / "tool-results" / "x.jsonl")
    assert not watcher.is_session_file(tmp_path / "p" / "abc.json")


def test_live_status_marks_warning_and_compaction_crossings():
    crossings = live_selectors.upward_crossings(
        points=[(1, 10, 100), (2, 20, 160), (3, 30, 170), (4, 40, 50), (5, 50, 190)],
        lines={"warning": 150, "autocompact": 180},
    )
    assert [(c.line, c.call) for c in crossings] == [("warning", 2), ("warning", 5), ("autocompact", 5)]


def test_a_session_is_live_only_while_its_last_record_is_recent(root, settings):
    settings.SESSION_LIVE_SECONDS = 60
    path = root / "-home-me-proj" / "s.jsonl"
    path.write_text(user_line("u1", None, "hello") + assistant_line("a1", "u1", "m1", "hi", ctx=900))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    session = models.Session.objects.get(pk=outcome.session)
    assert live_selectors.live_status(session=session).live
    later = datetime.now(UTC) + timedelta(seconds=120)
    assert not live_selectors.live_status(session=session, now=later).live


def test_live_partial_and_json_mark_the_lines_a_growing_session_crossed(client_in, root):
    path = root / "-home-me-proj" / "s.jsonl"
    lines = [user_line("u1", None, "hello"), assistant_line("a1", "u1", "m1", "hi", ctx=20_000)]
    path.write_text("".join(lines))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    session = models.Session.objects.get(pk=outcome.session)
    first = client_in.get(f"/sessions/{session.pk}/live.json").json()
    assert first["live"] and first["crossings"] == [] and first["above"] is None
    warning, autocompact = first["thresholds"]["warning"], first["thresholds"]["autocompact"]
    assert 20_000 < warning < autocompact < first["window"]

    with path.open("a") as f:
        f.write(user_line("u2", "a1", "more") + assistant_line("a2", "u2", "m2", "big", ctx=autocompact + 10))
    services.import_file(path=path)
    grown = client_in.get(f"/sessions/{session.pk}/live.json").json()
    assert [(c["line"], c["call"]) for c in grown["crossings"]] == [("warning", 2), ("autocompact", 2)]
    assert grown["above"] == "autocompact"
    # The page saw none of these crossings yet: the partial marks both as new, and tells the page to refresh.
    partial = client_in.get(
        f"/sessions/{session.pk}/live/", {"seen": first["version"], "crossings": 0}, headers={"HX-Request": "true"}
    )
    html = partial.content.decode()
    assert partial["HX-Trigger"] == "session-grew"
    assert "Crossed the warning line" in html and "Crossed the compaction line" in html
    assert "Just crossed 2 lines" in html and "above-autocompact" in html


def test_an_agent_folder_created_after_start_is_followed(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # services.default_roots() looks under the home folder
    stop = threading.Event()
    seen: list[services.FileImport | services.Rejected] = []
    thread = threading.Thread(
        target=watcher.watch_sessions,
        kwargs={"stop_event": stop, "on_pass": seen.extend, "retry_roots_s": 0.2},
    )
    thread.start()
    try:
        time.sleep(0.3)  # watching, with no agent folder yet
        folder = tmp_path / ".claude" / "projects" / "-p"
        folder.mkdir(parents=True)
        (folder / "first.jsonl").write_text(
            user_line("u1", None, "hello") + assistant_line("a1", "u1", "m1", "hi", ctx=900)
        )
        deadline = time.monotonic() + 10
        while not models.Session.objects.filter(external_id="live-1").exists():
            assert time.monotonic() < deadline, "the new folder was not followed"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert [o.lines for o in seen if isinstance(o, services.FileImport)] == [2]


def test_a_file_first_seen_mid_line_is_waited_for_not_rejected(root):
    """A live session is often first seen while the agent writes its first line: the watcher's log said it rejected
    the file and its first pass counted it as not a session."""
    path = root / "-home-me-proj" / "live-1.jsonl"
    first = user_line("u1", None, "first question")
    path.write_text(first[: len(first) // 2])
    [outcome] = watcher.import_changed(paths=[path])
    assert isinstance(outcome, services.Rejected) and outcome.waiting
    assert " waiting for " in (watcher.describe(outcome) or "")
    assert "0 not a session, 1 still being written" in watcher.summary([outcome])
    assert outcome.as_json()["waiting"] is True
    _append(path, first[len(first) // 2 :])
    [outcome] = watcher.import_changed(paths=[path])
    assert isinstance(outcome, services.FileImport) and outcome.created and outcome.lines == 1
