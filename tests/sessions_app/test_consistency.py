"""One session, one story: every page's JSON twin and every command's JSON agree on each headline number and on
each call reference, for every shared sample of all four agents (issue 32).

A call is "call N", the N-th main-chain API call numbered from 1; an event is "after call N", between call N and
call N+1. Each check below compares two places that must say the same thing, so an off-by-one anywhere (a peak
one call late, an event one call early, a preview that means another point) fails here.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import call_command

from sessions_app import models, services
from tests.conftest import AGENT_SAMPLE_FOLDERS

pytestmark = pytest.mark.django_db

# Events that change the window, as session_stats lists them; the timeline adds derived ones (cache misses, idle
# gaps, subagent spawns), which have no twin in the statistics.
WINDOW_EVENTS = {"compaction", "microcompact", "prune", "api_error", "overflow"}


def _command(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


def _web(client: Any, url: str) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return orjson.loads(response.content)


def _imported(folder: Path) -> list[models.Session]:
    report = services.import_paths(paths=[folder])
    assert not report.rejected, report.rejected
    sessions = list(models.Session.objects.order_by("id"))
    for session in sessions:
        # The worker's estimates, then its analysis: a log without recorded usage (KHAELOR) gets its peak from the
        # composition the analysis stores.
        services.estimate_session_tokens(session_id=session.pk)
        services.analyse_session(session_id=session.pk)
    return [models.Session.objects.get(pk=s.pk) for s in sessions]


def _window_events(events: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(e["kind"], e["agent"], e["after_call"]) for e in events if e["kind"] in WINDOW_EVENTS]


def _check_session(client: Any, session: models.Session) -> None:
    sid = str(session.pk)
    stats = _command("session_stats", sid)
    timeline_cmd = _command("timeline", sid)
    timeline_web = _web(client, f"/sessions/{sid}/timeline.json")
    diagnosis_web = _web(client, f"/sessions/{sid}/diagnosis.json")
    diagnosis_cmd = _command("diagnose", sid)
    page = _web(client, f"/sessions/{sid}.json")
    detail, overview = page["session"], page["overview"]
    listed = next(s for s in _web(client, "/sessions.json?per_page=200")["sessions"] if s["id"] == session.pk)
    where = f"{session.format} session {sid} ({session.title[:40]!r})"

    # The peak: one definition, the same call and tokens everywhere.
    peak = stats["peak"]
    for name, other in (
        ("timeline command", timeline_cmd["peak"]),
        ("timeline twin", timeline_web["peak"]),
        ("diagnosis twin", diagnosis_web["peak"]),
        ("diagnose command", diagnosis_cmd["peak"]),
        ("session overview", overview["peak"]),
    ):
        if session.peak_is_estimate:
            continue  # a log without usage: its estimated peak is checked against the overview below
        assert other == peak, (where, name, other, peak)
    assert overview["peak"] == {"call": session.peak_call, "tokens": session.peak_context}, where
    assert listed["peak"] == detail["peak"] == overview["peak"], where

    # The peak's call is the call that recorded those tokens (not the one before or after it).
    main = {p["call"]: p["context"] for p in timeline_web["series"].get("main", [])}
    if peak["call"] is not None and not session.peak_is_estimate:
        assert main[peak["call"]] == peak["tokens"], (where, peak)
        assert peak["tokens"] == max(main.values()), where
        assert all(main[c] < peak["tokens"] for c in main if c < peak["call"]), (where, "first of equals")
    # Calls are numbered from 1, with no gap; a log without usage counts its model replies, as its chart does.
    assert sorted(main) == list(range(1, len(main) + 1)), where
    estimated_axis = [p["x"] for p in timeline_web["estimates"].get("main", [])]
    calls = len(main) if main else max(estimated_axis, default=0)
    assert calls == stats["api_calls"]["main"] == detail["api_calls"]["main"] == listed["api_calls"]["main"], where

    # Every session with calls has a peak on one of them (estimated, and labelled so, for a log without usage).
    if calls:
        assert overview["peak"]["tokens"] > 0 and 1 <= overview["peak"]["call"] <= calls, (where, overview["peak"])
    # The first glance tells the peak's story: the sparkline's largest point and the treemap are at the peak.
    assert overview["sparkline"]["largest"] == overview["peak"]["tokens"], where
    if overview["treemap"] is not None:
        assert (overview["treemap"]["call"], overview["treemap"]["context"]) == (
            overview["peak"]["call"],
            overview["peak"]["tokens"],
        ), where
    if session.peak_is_estimate:
        # A log without usage: its timeline's line is the same estimate, peaking at the same call.
        line = {p["x"]: p["estimate"] for p in timeline_web["estimates"]["main"]}
        assert max(line.values()) == line[overview["peak"]["call"]] == overview["peak"]["tokens"], where
        assert timeline_web["peak"] == diagnosis_web["peak"] == stats["peak"] == overview["peak"], where

    # Events: the same kinds at the same points in the statistics and the timeline (twin and command).
    expected = _window_events(stats["events"])
    assert _window_events(timeline_web["events"]) == expected, where
    assert _window_events(timeline_cmd["events"]) == expected, where
    assert diagnosis_web["events"] == diagnosis_cmd["events"] == stats["events"], where
    # The chart draws each event where its number says: after call N sits at x = N.
    for event in timeline_web["events"]:
        if event["kind"] in WINDOW_EVENTS and event["agent"] == "main":
            assert event["x"] == event["after_call"], (where, event)
    by_point = {
        (e["kind"], e["agent"], e["after_call"]): e for e in timeline_web["events"] if e["kind"] in WINDOW_EVENTS
    }
    for event in stats["events"]:
        if event["agent"] != "main":
            continue
        # context_before is call N's recorded context, context_after call N+1's: the same on both.
        assert event["context_before"] == main.get(event["after_call"]), (where, event)
        assert event["context_after"] == main.get(event["after_call"] + 1), (where, event)
        shown = by_point[(event["kind"], event["agent"], event["after_call"])]
        assert (shown["context_before"], shown["context_after"]) == (
            event["context_before"],
            event["context_after"],
        ), (where, event)

    # The diagnosis's compactions sit at the same points as the recorded compaction events.
    recorded_compactions = [
        e["after_call"] for e in stats["events"] if e["kind"] == "compaction" and e["agent"] == "main"
    ]
    assert [c["after_call"] for c in diagnosis_web["compactions"]] == recorded_compactions, where

    # The live band: its calls, its last context and the calls it says the lines were crossed at.
    live = _web(client, f"/sessions/{sid}/live.json")
    assert live["api_calls"] == detail["api_calls"], where
    assert live["context"] == (main[max(main)] if main else None), where
    for crossing in live["crossings"]:
        assert main[crossing["call"]] == crossing["context"] >= crossing["threshold"], (where, crossing)

    # The replay of the session's own agent runs on the same call numbers as the recorded series.
    replayed = _command("replay", sid, "--strategy", session.format)
    replayed_calls = [call for call, _ in replayed["series"]]
    assert replayed_calls == [call for call, _ in replayed["recorded"]] == list(range(1, calls + 1)), where
    if main:
        assert dict(replayed["recorded"]) == main, where

    # Counts and cost: the overview, the statistics, the timeline and the diagnosis count the same events.
    main_kinds = [e["kind"] for e in stats["events"] if e["agent"] == "main"]
    for kind, key in (("compaction", "compactions"), ("microcompact", "microcompacts"), ("prune", "prunes")):
        assert overview[key] == main_kinds.count(kind), (where, kind)
    assert len(diagnosis_web["compactions"]) == overview["compactions"], where
    assert stats["api_calls"]["side"] == detail["api_calls"]["side"] == listed["api_calls"]["side"], where
    assert stats["max_context"]["side"] == detail["max_context"]["side"], where
    assert listed["cost_usd"] == detail["cost_usd"] == overview["cost_usd"], where
    if stats["cost_usd"] is None:
        assert detail["cost_usd"] is None, where
    else:
        assert detail["cost_usd"] == pytest.approx(stats["cost_usd"]), where

    # The window: the list, the session page, the overview and the timeline say the same.
    assert listed["context_window"] == detail["context_window"] == overview["window"], where
    assert overview["window"] == timeline_web["thresholds"]["window"], where

    # A number copied from a page into Preview means that point: "after call N" in, "after call N" out.
    if main:
        point = peak["call"] if peak["call"] is not None else max(main)
        preview_web = _web(client, f"/sessions/{sid}/preview.json?at={point}")
        preview_cmd = _command("preview", sid, "--strategy", session.format, "--at", str(point))
        assert preview_web["after_call"] == preview_cmd["after_call"] == point, where
        for compaction in recorded_compactions:
            if compaction in main:
                assert _web(client, f"/sessions/{sid}/preview.json?at={compaction}")["after_call"] == compaction
        # A run from that point keeps it: the command, the run's twin, the reviews queue and the run page (unless
        # there is nothing to summarise there, which the preview says).
        if preview_web["runnable"]:
            _check_run_keeps_the_point(client, session, point)


def _check_run_keeps_the_point(client: Any, session: models.Session, point: int) -> None:
    sid, where = str(session.pk), f"{session.format} session {session.pk}"
    made = _command("compact", sid, "--strategy", session.format, "--at", str(point))
    assert made["after_call"] == point, where
    assert _web(client, f"/runs/{made['id']}.json")["after_call"] == point, where
    queued = _web(client, "/reviews.json")
    assert [r["after_call"] for r in queued["pending"] if r["id"] == made["id"]] == [point], where
    run_page = client.get(f"/runs/{made['id']}/").content.decode()
    assert f'href="/sessions/{sid}/preview/?at={point}"' in run_page, where


@pytest.mark.slow
@pytest.mark.parametrize("agent", sorted(AGENT_SAMPLE_FOLDERS))
def test_every_page_and_command_tells_the_same_story(client_in, settings, agent: str) -> None:
    settings.ANTHROPIC_API_KEY = ""  # runs summarise offline: no model is called
    sessions = _imported(AGENT_SAMPLE_FOLDERS[agent])
    assert sessions
    for session in sessions:
        _check_session(client_in, session)
