"""The worker's analysis (composition at every call, the verdict), the session overview, and their pages and JSON."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from compaction.composition import BASELINE_PART, EARLIER_PART, PART_KINDS, part_kind
from sessions_app import models, services, sweeps
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import composition as composition_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import overview as overview_selectors
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.templatetags.charts import duration, folded, permille, segments
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import small_session
from tests.helpers.htmx import HTMX

pytestmark = pytest.mark.django_db

# A microcompact then an auto compaction (SOURCES.md); a subagent-heavy log; the other agents' samples.
MICRO_THEN_COMPACT = CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"


def imported(*paths) -> list[models.Session]:
    services.import_paths(paths=list(paths))
    sessions = list(models.Session.objects.order_by("id"))
    for session in sessions:
        services.estimate_session_tokens(session_id=session.pk)
    return [models.Session.objects.get(pk=s.pk) for s in sessions]


# ----------------------------------------------------------------------------- pure helpers


def test_part_kind_puts_every_part_in_one_palette_family():
    assert part_kind(BASELINE_PART) == "system"
    assert part_kind(EARLIER_PART) == "unlogged"
    assert part_kind("tool results: Read") == part_kind("tool results: unknown tool") == "tool-results"
    assert part_kind("compaction summary") == "summary"
    assert part_kind("user text") == part_kind("images") == "user"
    assert {part_kind(p) for p in ("tool calls", "thinking", "assistant text")} == {
        "tool-calls",
        "thinking",
        "assistant",
    }
    assert set(PART_KINDS) >= {part_kind(p) for p in ("injected context", "user text")}


def test_segments_lay_parts_end_to_end_in_per_mille():
    parts = [
        {"part": "a", "kind": "system", "tokens": 250},
        {"part": "empty", "kind": "user", "tokens": 0},
        {"part": "r1", "kind": "tool-results", "tokens": 500},
        {"part": "r2", "kind": "tool-results", "tokens": 250},
    ]
    laid = segments(parts, 1000)
    assert [(s["part"], s["x"], s["width"], s["shade"]) for s in laid] == [
        ("a", 0.0, 250.0, 0),
        ("r1", 250.0, 500.0, 0),
        ("r2", 750.0, 250.0, 1),  # the second of its family: a lighter shade
    ]
    assert [s["percent"] for s in laid] == [25.0, 50.0, 25.0]
    assert permille(300, 200) == 1000.0 and permille(None, 10) == 0.0 and permille(5, 0) == 0.0


def test_duration_reads_like_a_clock():
    assert duration(None) == "–"
    assert duration(42.4) == "42 s"
    assert duration(14 * 60 + 3) == "14 min 03 s"
    assert duration(2 * 3600 + 5 * 60) == "2 h 05 min"


# ----------------------------------------------------------------------------- the stored analysis


@pytest.mark.parametrize(
    "paths",
    [
        [MICRO_THEN_COMPACT],
        [CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl"],
        [KLAUDE_SAMPLES / "dot-klaude"],
        [KHAELOR_SAMPLES],
    ],
    ids=lambda paths: paths[0].name,
)
def test_the_series_is_the_call_panels_composition_at_every_call(paths):
    for session in imported(*paths):
        series = composition_selectors.composition_series(session=session)
        assert series["calls"], session
        for i, call in enumerate(series["calls"]):
            detail = composition_selectors.turn_detail(session=session, agent="main", call=call)
            after_call = {p["part"]: p["tokens"][i] for p in series["parts"] if p["tokens"][i]}
            assert after_call == {p["part"]: p["tokens"] for p in detail["composition"]}, (session, call)
            assert series["context"][i] == detail["context"] and series["estimated"][i] == detail["estimated"]
        kinds = [PART_KINDS.index(p["kind"]) for p in series["parts"]]
        assert kinds == sorted(kinds)  # stacked bottom-up by colour family


def test_analysis_is_stored_once_and_goes_stale_when_the_session_grows():
    [session] = imported(MICRO_THEN_COMPACT)
    assert overview_selectors.stored_analysis(session=session) is None
    before = session.updated_at
    analysis = services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    assert session.updated_at > before  # cached JSON answers of the old version are not served again
    assert overview_selectors.stored_analysis(session=session) == analysis
    assert analysis.verdict == diagnosis_selectors.diagnosis(session=session)["verdict"]
    assert analysis.composition == composition_selectors.composition_series(session=session)
    models.Session.objects.filter(pk=session.pk).update(message_count=session.message_count + 1)
    session.refresh_from_db()
    assert overview_selectors.stored_analysis(session=session) is None


def test_a_file_rewritten_with_as_many_records_is_analysed_again(tmp_path):
    """Readers compare the analysis's record count with the session's: a rewrite that keeps the count must not
    leave the old analysis standing for the new records."""
    path = small_session(tmp_path)
    session = models.Session.objects.get(pk=services.import_file(path=path).session)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    count = session.message_count
    assert overview_selectors.stored_analysis(session=session) is not None
    path.write_text(path.read_text().replace("hello", "goodbye"))  # same lines, other content: not an append
    services.import_file(path=path)
    session.refresh_from_db()
    assert session.message_count == count  # the case readers cannot tell by the count
    assert overview_selectors.stored_analysis(session=session) is None
    assert diagnosis_selectors.stored_diagnosis(session=session) is None
    services.analyse_session(session_id=session.pk)
    assert overview_selectors.stored_analysis(session=session) is not None


def test_the_estimate_task_queues_the_analysis(tmp_path):
    outcome = services.import_file(path=small_session(tmp_path))
    services.estimate_tokens_task.call(outcome.session)
    queued = DBTaskResult.objects.filter(task_path=services.analyse_session_task.module_path)
    assert [row.args_kwargs["args"] for row in queued] == [[outcome.session]]
    assert services.analyse_session(session_id=outcome.session) is not None  # what that task runs
    assert models.SessionAnalysis.objects.get(session_id=outcome.session).composition["calls"] == [1, 2]


@pytest.mark.django_db(transaction=True)  # the real worker runs the queued tasks
def test_analyses_queued_one_after_another_for_a_session_analyse_it_once(tmp_path):
    """A live session queues an analysis per append: an earlier one still waiting when a later one is queued is
    skipped (False), and the last one analyses the session as it is by then."""
    from tests.helpers.worker import run_worker

    outcome = services.import_file(path=small_session(tmp_path))  # its commit queues the estimates
    services.estimate_session_tokens(session_id=outcome.session)
    for _ in range(2):
        services.analyse_session_task.enqueue(outcome.session)
    run_worker()  # the estimate task queues one more analysis: three in all
    rows = DBTaskResult.objects.filter(task_path=services.analyse_session_task.module_path).order_by("enqueued_at")
    assert [(row.status, row.return_value) for row in rows] == [("SUCCESSFUL", False)] * 2 + [("SUCCESSFUL", True)]
    analysis = models.SessionAnalysis.objects.get(session_id=outcome.session)
    assert analysis.message_count == models.Session.objects.get(pk=outcome.session).message_count


@pytest.mark.django_db(transaction=True)
def test_a_lost_analysis_is_queued_again_by_the_sweep(tmp_path, settings):
    settings.STALE_AFTER_S = 60
    outcome = services.import_file(path=small_session(tmp_path))
    services.estimate_session_tokens(session_id=outcome.session)
    long_ago = timezone.now() - timedelta(minutes=5)
    models.Session.objects.filter(pk=outcome.session).update(updated_at=long_ago)
    DBTaskResult.objects.all().delete()
    assert sweeps.sweep_all().analyses_enqueued == 1
    assert sweeps.sweep_all().analyses_enqueued == 0  # one is pending already
    DBTaskResult.objects.all().delete()
    services.analyse_session(session_id=outcome.session)
    models.Session.objects.filter(pk=outcome.session).update(updated_at=long_ago)
    assert sweeps.sweep_all().analyses_enqueued == 0  # this version is analysed


# ----------------------------------------------------------------------------- the overview and its views


def test_overview_numbers_come_from_their_sources():
    [session] = imported(MICRO_THEN_COMPACT)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    view = overview_selectors.overview(session=session)
    thresholds = threshold_selectors.thresholds_for(session=session)
    stats = call_selectors.session_stats(session=session)
    assert view["lines"] == {"warning": thresholds["warning"], "autocompact": thresholds["autocompact"]}
    assert view["window"] == thresholds["window"] and view["peak_context"] == session.peak_context
    assert view["api_calls"] == stats.api_calls.as_json()
    assert (view["compactions"], view["microcompacts"]) == (1, 1)
    for kind in ("compaction", "microcompact"):  # the rows `session_stats` lists
        assert view[f"{kind}s"] == sum(1 for e in stats.events if e.kind == kind and e.agent == "main")
    peak = view["peak_composition"]
    assert peak["context"] == session.peak_context  # recorded usage: the split's peak is the session's peak
    assert sum(p["tokens"] for p in peak["parts"]) == peak["context"]
    detail = composition_selectors.turn_detail(session=session, agent="main", call=peak["call"])
    assert [(p["part"], p["tokens"]) for p in peak["parts"]] == sorted(
        ((p["part"], p["tokens"]) for p in detail["composition"]),
        key=lambda pt: [p["part"] for p in peak["parts"]].index(pt[0]),
    )
    assert view["verdict"] and not view["computing"]


def test_session_page_fragment_and_json_carry_the_overview(client_in):
    [session] = imported(MICRO_THEN_COMPACT)
    page = client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="overview agent-claude-code"' in page and "Computing" in page  # not analysed yet
    services.analyse_session(session_id=session.pk)
    page = client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="gauge-line line-warning"' in page and 'data-tokens="135000"' in page
    assert 'class="gauge-line line-autocompact"' in page and 'data-tokens="155000"' in page
    assert "svg" in page and 'class="part-tool-results' in page and "style=" not in page
    assert "Context crossed the 155k autocompact threshold" in page and f"/sessions/{session.pk}/diagnosis/" in page
    fragment = client_in.get(f"/sessions/{session.pk}/", {"page": 2}, **HTMX).content.decode()
    assert "<html" not in fragment and 'class="overview' not in fragment
    data = client_in.get(f"/sessions/{session.pk}.json").json()["overview"]
    assert data == {
        **overview_selectors.overview(session=session),
        "diagnosis_url": f"/sessions/{session.pk}/diagnosis/",
    }
    assert data["compactions"] == 1 and data["microcompacts"] == 1 and data["lines"]["autocompact"] == 155_000


def test_session_page_queries_do_not_grow_with_the_session(client_in):
    [session] = imported(MICRO_THEN_COMPACT)
    services.analyse_session(session_id=session.pk)
    with CaptureQueriesContext(connection) as queries:
        assert client_in.get(f"/sessions/{session.pk}/").status_code == 200
    assert len(queries) <= 30, [q["sql"][:120] for q in queries]


def test_timeline_json_serves_the_stored_composition_or_says_computing(client_in):
    [session] = imported(MICRO_THEN_COMPACT)
    data = client_in.get(f"/sessions/{session.pk}/timeline.json").json()
    assert data["composition"] is None and data["composition_status"] == "computing"
    services.analyse_session(session_id=session.pk)
    data = client_in.get(f"/sessions/{session.pk}/timeline.json").json()
    assert data["composition_status"] == "ready"
    comp = data["composition"]
    # The same numbers as `manage.py timeline SESSION --call N --json`, for calls around the two events.
    # The first call, calls 6 and 7 around the microcompact (after call 6), 30 and 31 around the compaction.
    for call in (1, 6, 7, 30, 31, comp["calls"][-1]):
        out = io.StringIO()
        call_command("timeline", str(session.pk), "--call", str(call), "--json", stdout=out)
        cli = json.loads(out.getvalue())
        i = comp["calls"].index(call)
        assert {p["part"]: p["tokens"][i] for p in comp["parts"] if p["tokens"][i]} == {
            p["part"]: p["tokens"] for p in cli["composition"]
        }
        assert sum(p["tokens"][i] for p in comp["parts"]) == cli["context"] == comp["context"][i]
    page = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    assert 'name="chart-mode" value="composition"' in page and 'id="marker-legend"' in page


def test_call_panel_composition_is_a_stacked_bar_with_a_legend(client_in):
    [session] = imported(MICRO_THEN_COMPACT)
    html = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"agent": "main", "call": 31}, **HTMX)
    text = html.content.decode()
    assert 'class="stacked-bar"' in text and "<rect" in text and 'class="legend"' in text and "style=" not in text
    assert 'class="part-summary' in text  # the compaction summary, in its own colour


def test_a_log_without_usage_puts_its_estimates_and_markers_on_the_call_numbers_of_its_composition():
    [session] = imported(KHAELOR_SAMPLES)
    services.analyse_session(session_id=session.pk)  # the worker's: the estimates' line is its composition's
    session.refresh_from_db()
    timeline = timeline_selectors.timeline(session=session)
    series = composition_selectors.composition_series(session=session)
    xs = [p["x"] for p in timeline["estimates"]["main"]]
    assert xs == sorted(xs) and xs[-1] == series["calls"][-1] and len(set(xs)) > 1
    [compaction] = [m for m in timeline["events"] if m["kind"] == "compaction"]
    after = series["calls"].index(compaction["x"]) + 1  # the first call after it (calls from 1)
    summary = next(p for p in series["parts"] if p["kind"] == "summary")
    assert summary["tokens"][after] > 0 and not any(summary["tokens"][:after])


def test_a_bar_folds_its_smallest_parts_into_one():
    parts = [{"part": f"tool results: t{i}", "kind": "tool-results", "tokens": 100 - i} for i in range(10)]
    parts.insert(0, {"part": BASELINE_PART, "kind": "system", "tokens": 5})
    shown = folded(parts, 4)
    assert [p["part"] for p in shown] == ["tool results: t0", "tool results: t1", "tool results: t2", "8 smaller parts"]
    assert shown[-1]["kind"] == "other" and sum(p["tokens"] for p in shown) == sum(p["tokens"] for p in parts)
    assert folded(parts[:3], 4) == parts[:3]
