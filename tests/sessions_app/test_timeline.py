"""Token timeline: series, markers and thresholds from the real samples; page, fragment, JSON, CLI."""

from __future__ import annotations

import io
import json
from datetime import date
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import models, services
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.views import timeline as timeline_views
from tests.compaction.formats.claude_code_expected import EXPECTED
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import long_tool_session
from tests.helpers.htmx import HTMX

pytestmark = pytest.mark.django_db


def import_sample(name: str) -> models.Session:
    outcome = services.import_file(path=CLAUDE_SAMPLES / name)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return models.Session.objects.get(pk=outcome.session)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_main_series_peak_and_compaction_markers_match_sources_md(name):
    _, _, max_main, _, compactions, microcompacts = EXPECTED[name]
    data = timeline_selectors.timeline(session=import_sample(name))
    main = data["series"].get("main", [])
    assert max((p["context"] for p in main), default=0) == max_main
    markers = data["events"]
    assert [(m["trigger"], m["pre_tokens"]) for m in markers if m["kind"] == "compaction"] == compactions
    assert [(m["trigger"], m["pre_tokens"], m["tokens_saved"]) for m in markers if m["kind"] == "microcompact"] == [
        mc[:3] for mc in microcompacts
    ]


def test_compaction_marker_of_the_small_auto_compaction_sample():
    data = timeline_selectors.timeline(session=import_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl"))
    (marker,) = [m for m in data["events"] if m["kind"] == "compaction"]
    main = data["series"]["main"]
    # SOURCES.md: last pre-compaction turn 154,992; auto, preTokens 155,250; first post-compaction turn 49,761.
    assert main[marker["after_call"] - 1]["context"] == 154_992
    assert (marker["trigger"], marker["pre_tokens"]) == ("auto", 155_250)
    assert main[marker["after_call"]]["context"] == 49_761
    assert marker["context_before"] == 154_992 and marker["tokens_after"] == 49_761
    assert marker["gap_after_last_usage"] == 155_250 - 154_992


def test_gap_after_last_usage_is_shown_for_the_overflow_case():
    data = timeline_selectors.timeline(session=import_sample("entirecli_f9f6f611b469-0_full.jsonl"))
    (marker,) = [m for m in data["events"] if m["kind"] == "compaction"]
    # SOURCES.md: last context 150,210, preTokens 176,700: tool output that arrived after the last call.
    assert marker["context_before"] == 150_210
    assert marker["gap_after_last_usage"] == 176_700 - 150_210


def test_cache_miss_after_microcompact_is_a_marker_not_a_prune():
    data = timeline_selectors.timeline(session=import_sample("entirecli_7662d755ef9f-2_full.jsonl"))
    misses = [m for m in data["events"] if m["kind"] == "cache_miss"]
    # SOURCES.md: after the microcompact cache_read collapses 151,207 -> 19,330 and the cache is rebuilt.
    assert any("151,207" in m["message"] for m in misses)


def test_idle_gaps_are_measured_against_the_lifetime_the_session_wrote():
    # Every cache write of this session is a 1-hour one (ephemeral_1h_input_tokens): its 6- and 40-minute pauses
    # leave the cache warm, its pause of 60,043 s (1,000.7 min) does not. Marker and miss cause say the same minutes.
    data = timeline_selectors.timeline(session=import_sample("entireskills_4982335ad847-0_raw_transcript.jsonl"))
    [gap] = [m for m in data["events"] if m["kind"] == "idle_gap"]
    assert (gap["after_call"], gap["seconds"], gap["lifetime_minutes"]) == (83, 60_043, 60)
    assert gap["message"].startswith("1,001 min idle, longer than the 1-hour cache lifetime")
    [miss] = [m for m in data["events"] if m["kind"] == "cache_miss" and m["call"] == gap["after_call"] + 1]
    assert miss["cause"] == "idle 1,001 min > 60 min cache lifetime"


def test_window_comes_from_the_model_not_a_constant():
    session = import_sample("entireskills_4982335ad847-0_raw_transcript.jsonl")
    data = timeline_selectors.timeline(session=session)
    assert data["thresholds"]["window"] == 1_000_000
    assert max(p["context"] for p in data["series"]["main"]) == 325_602


def test_claude_code_thresholds_by_version():
    new = timeline_selectors.timeline(session=import_sample("spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"))
    old = timeline_selectors.timeline(session=import_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl"))
    # docs/compaction/claude-code.md §1.5, §1.8: 200k model, CC >= 2.1.21 vs earlier.
    assert (new["thresholds"]["autocompact"], new["thresholds"]["warning"], new["thresholds"]["blocking"]) == (
        167_000,
        147_000,
        177_000,
    )
    assert old["thresholds"]["autocompact"] == 155_000


def test_subagents_are_separate_series():
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"])
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04"])
    session = models.Session.objects.get()
    series = timeline_selectors.timeline(session=session)["series"]
    assert set(series) == {"main", "aac57f5", "acompact-946d2b"}
    assert max(p["context"] for p in series["acompact-946d2b"]) == 139_534


def test_other_strategies_thresholds_can_be_shown():
    session = import_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl")
    klaude = timeline_selectors.timeline(session=session, strategy="klaude-code")["thresholds"]
    khaelor = timeline_selectors.timeline(session=session, strategy="khaelor")["thresholds"]
    assert klaude["strategy"] == "klaude-code" and klaude["autocompact"] < klaude["window"]
    assert khaelor["assumption"] is True


def test_klaude_and_khaelor_markers_appear():
    report = services.import_paths(paths=[KLAUDE_SAMPLES / "dot-klaude", KHAELOR_SAMPLES])
    assert report.rejected == []
    assert len(report.imported) == 7 and all(item.errors == [] for item in report.imported)
    assert {item.format for item in report.imported} == {"klaude-code", "khaelor"}
    kinds: dict[str, set[str]] = {}
    for session in models.Session.objects.all():
        kinds.setdefault(session.format, set()).update(
            m["kind"] for m in timeline_selectors.timeline(session=session)["events"]
        )
    assert {"compaction", "overflow"} <= kinds["klaude-code"]
    assert {"compaction", "prune"} <= kinds["khaelor"]


@pytest.mark.django_db(transaction=True)  # the worker closes its connection when it is done
def test_estimates_are_stored_once_by_the_background_worker(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        session = import_sample("spotter_tool_heavy.jsonl")
    assert models.Message.objects.filter(session=session, tokens__isnull=False).count() == 0
    call_command(
        "db_worker", "--batch", "--no-startup-delay", "--no-reload", stdout=io.StringIO(), stderr=io.StringIO()
    )
    session.refresh_from_db()
    assert session.estimates_ready
    assert not models.Message.objects.filter(session=session, tokens__isnull=True).exists()
    data = timeline_selectors.timeline(session=session)
    assert data["estimates"]["main"] and all(p["estimate"] >= 0 for p in data["estimates"]["main"])


def test_a_log_without_usage_gets_an_estimated_peak():
    report = services.import_paths(paths=[KHAELOR_SAMPLES])
    (item,) = report.imported
    session = models.Session.objects.get(pk=item.session)
    assert session.peak_context == 0 and not models.ApiCall.objects.filter(session=session).exists()
    # No usage recorded, but calls all the same: the model's replies (compaction.calls.CallTracker).
    replies = models.Message.objects.filter(session=session, agent="main", kind="assistant").count()
    assert session.api_calls_main == replies > 0
    services.estimate_session_tokens(session_id=session.pk)
    session.refresh_from_db()
    # Its peak waits for the composition (the worker's analysis, which follows the estimates): no other count.
    assert session.peak_call is None and timeline_selectors.main_call_estimates(session=session) is None
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    # The largest of the calls' own estimates (the points the chart draws at each call), not of any record.
    points = timeline_selectors.main_call_estimates(session=session)
    assert points and [p["x"] for p in points] == list(range(1, session.api_calls_main + 1))
    assert session.peak_is_estimate and session.peak_context == max(p["estimate"] for p in points) > 0
    assert session.peak_call == next(p["x"] for p in points if p["estimate"] == session.peak_context)


def _khaelor_pruned_log(path):
    """A KHAELOR log without usage: a large tool result, a reply, the agent's prune of that result, then two short
    turns. Before the prune the context holds the result; after it, only its placeholder."""

    def event(seq, type_, **payload):
        ts = f"2026-10-02T09:00:{seq:02d}.000Z"
        return {"seq": seq, "type": type_, "ts": ts, "sessionId": "k-prune", "payload": payload}

    big = " ".join(f"row{i}" for i in range(4000))
    records = [
        event(1, "session.started", model="claude-sonnet-4-5", contextWindow=200_000, cwd="/w"),
        event(2, "user.message-created", text="Read the ledger."),
        event(3, "tool.requested", toolUseId="t1", name="read_file", input={"path": "ledger.csv"}),
        event(4, "tool.completed", toolUseId="t1", modelText=big),
        event(5, "model.text-block-completed", text="It holds four thousand rows."),
        event(6, "context.pruned", toolUseIds=["t1"], placeholder="[pruned]", tokensReclaimedEstimate=8000),
        event(7, "user.message-created", text="Now sum the first column."),
        event(8, "model.text-block-completed", text="The sum is 42."),
        event(9, "user.message-created", text="Thanks."),
        event(10, "model.text-block-completed", text="You are welcome."),
    ]
    file = path / "pruned.events.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    return file


def test_a_log_without_usage_tells_one_story_of_its_context_the_prune_included(client_in, tmp_path):
    report = services.import_paths(paths=[_khaelor_pruned_log(tmp_path)])
    (item,) = report.imported
    session = models.Session.objects.get(pk=item.session)
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)
    session.refresh_from_db()
    composition = models.SessionAnalysis.objects.get(session=session).composition
    contexts = dict(zip(composition["calls"], composition["context"], strict=True))
    prune = models.ContextEvent.objects.get(session=session, kind="prune")
    # The agent pruned the large result: every call after it sent less than the last call before it.
    before = contexts[prune.after_call]
    assert all(contexts[call] < before for call in contexts if call > prune.after_call), contexts
    # The peak, the sparkline, the timeline's line and the treemap: the same call and the same tokens.
    assert session.peak_is_estimate and (session.peak_call, session.peak_context) == (prune.after_call, before)
    page = client_in.get(f"/sessions/{session.pk}.json").json()["overview"]
    assert page["peak"] == {"call": prune.after_call, "tokens": before}
    assert page["sparkline"]["largest"] == before and page["sparkline"]["estimated"]
    assert [(p["call"], p["context"]) for p in page["sparkline"]["points"]] == sorted(contexts.items())
    assert (page["treemap"]["call"], page["treemap"]["context"]) == (prune.after_call, before)
    timeline = client_in.get(f"/sessions/{session.pk}/timeline.json").json()
    assert [(p["x"], p["estimate"]) for p in timeline["estimates"]["main"]] == sorted(contexts.items())
    assert timeline["peak"] == page["peak"] == client_in.get(f"/sessions/{session.pk}/diagnosis.json").json()["peak"]
    # The diagnosis page labels it an estimate, as the session page does (it printed a bare number).
    diagnosis = " ".join(client_in.get(f"/sessions/{session.pk}/diagnosis/").content.decode().split())
    assert f"peak ≈{before:,} at" in diagnosis and "(estimate)" in diagnosis


def test_an_append_that_stores_no_record_keeps_a_log_without_usages_peak(tmp_path):
    # Half a line appended (the agent still writing it): nothing stored, the analysis still that of these records, yet
    # the import's refresh set the peak to its recorded one, 0, until the worker analysed the session again.
    log = _khaelor_pruned_log(tmp_path)
    (item,) = services.import_paths(paths=[log]).imported
    services.estimate_session_tokens(session_id=item.session)
    services.analyse_session(session_id=item.session)
    analysed = models.Session.objects.get(pk=item.session)
    assert analysed.peak_is_estimate and analysed.peak_context > 0
    with log.open("ab") as f:
        f.write(b'{"type": "message.created", "ti')
    services.import_file(path=log)
    after = models.Session.objects.get(pk=item.session)
    assert after.message_count == analysed.message_count
    assert (after.peak_context, after.peak_call, after.peak_is_estimate) == (
        analysed.peak_context,
        analysed.peak_call,
        True,
    )


def test_a_log_without_usage_the_worker_refuses_shows_no_made_up_peak(client_in, tmp_path, settings):
    report = services.import_paths(paths=[_khaelor_pruned_log(tmp_path)])
    (item,) = report.imported
    settings.WORKER_ANALYSIS_MAX_SESSION_BYTES = 1  # too large for the worker: no composition will come
    services.estimate_session_tokens(session_id=item.session)
    assert services.analyse_session(session_id=item.session) is None
    session = models.Session.objects.get(pk=item.session)
    assert session.peak_call is None and session.peak_context == 0
    overview = client_in.get(f"/sessions/{session.pk}.json").json()["overview"]
    assert overview["not_analysed"] and overview["sparkline"]["refused"] and not overview["sparkline"]["points"]
    assert not overview["sparkline"]["computing"]
    assert client_in.get(f"/sessions/{session.pk}/timeline.json").json()["estimates"].get("main", []) == []
    html = client_in.get(f"/sessions/{session.pk}/").content.decode()
    assert "No peak: the session is too large" in html and "<strong>≈0</strong>" not in html


def test_timeline_page_fragment_json_and_query_count(client_in, tmp_path):
    small = long_tool_session(tmp_path, n=3)
    (tmp_path / "big").mkdir()
    big = long_tool_session(tmp_path / "big", n=300)
    services.estimate_session_tokens(session_id=big)
    page = client_in.get(f"/sessions/{big}/timeline/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="timeline-data"' in html and "uPlot" in html
    data = client_in.get(f"/sessions/{big}/timeline.json").json()
    assert len(data["series"]["main"]) == 300 and data["thresholds"]["window"] == 200_000
    turn = client_in.get(f"/sessions/{big}/timeline/turn/", {"agent": "main", "call": 11}, **HTMX)
    fragment = turn.content.decode()
    assert turn.status_code == 200 and "<html" not in fragment and "call 11" in fragment and "composition" in fragment
    full = client_in.get(f"/sessions/{big}/timeline/turn/", {"agent": "main", "call": 11}).content.decode()
    assert "<html" in full and "call 11" in full
    turn_json = client_in.get(f"/sessions/{big}/timeline/turn/", {"call": 11, "format": "json"}).json()
    assert turn_json["context"] == 5 + 100 + 10 and any(
        p["part"].startswith("tool results: Read") for p in turn_json["composition"]
    )
    assert client_in.get(f"/sessions/{big}/timeline/turn/", {"call": 9999}).status_code == 404
    timeline_views._PAGE_DATA.clear()  # computed, not kept from the requests above
    with CaptureQueriesContext(connection) as q_small:
        client_in.get(f"/sessions/{small}/timeline/")
    with CaptureQueriesContext(connection) as q_big:
        client_in.get(f"/sessions/{big}/timeline/")
    assert len(q_big) == len(q_small)
    # Asked again while the session is unchanged, the page reuses its data (per process, per session version).
    with CaptureQueriesContext(connection) as q_again:
        client_in.get(f"/sessions/{big}/timeline/")
    assert len(q_again) < len(q_big)


def test_timeline_command_json():
    import_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl")
    out = io.StringIO()
    call_command("timeline", str(CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert set(data) >= {"series", "events", "thresholds"}
    assert set(data["series"]["main"][0]) == {"call", "context", "output", "timestamp"}
    assert max(p["context"] for p in data["series"]["main"]) == 154_992


def test_the_cost_line_reaches_the_sessions_total_with_its_inline_subagents(client_in):
    # cipherbox_c644f3afc869-1: subagents known only from the main log's progress records are calls of their own
    # (on their lanes), so the chart's cost line ends at the session's total (it fell short of it before).
    session = import_sample("cipherbox_c644f3afc869-1_full.jsonl")
    data = timeline_selectors.timeline(session=session)
    charted = data["cost"]["total_usd"]
    assert session.cost_usd is not None and round(session.cost_usd, 2) == round(charted, 2)
    assert {"a2ffcc6", "af26473"} <= set(data["series"])
    html = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    assert f"${charted:,.2f} in all" in html.split('id="show-cost"')[1].split("</label>")[0]


@pytest.mark.parametrize("folder", [CLAUDE_SAMPLES, KLAUDE_SAMPLES / "dot-klaude"], ids=["claude-code", "klaude-code"])
def test_the_cost_line_ends_at_the_sessions_own_cost_to_the_last_digit(folder):
    # The line summed each call's cost rounded to 6 decimals, in floats: "mix phx.server doesnt seem to start" ended
    # at $0.144447 where its page, list and session_stats say $0.144448 (and at a cent's edge the page would say
    # "over the charted calls of the session's" of a line that charts every call).
    services.import_paths(paths=[folder])
    checked = 0
    for session in models.Session.objects.exclude(cost_usd=None).exclude(api_calls_main=0):
        cost = timeline_selectors.timeline(session=session)["cost"]
        assert cost["total_usd"] == cost["points"][-1]["cumulative_usd"] == session.cost_usd, session.title
        checked += 1
    assert checked


def test_the_page_holds_the_same_data_its_json_twin_sends(client_in):
    session = import_sample("entirecli_a5d8ec9bae67-0_full.jsonl")
    html = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    opening = '<script id="timeline-data" type="application/json">'
    start = html.index(opening) + len(opening)
    embedded = json.loads(html[start : html.index("</script>", start)])
    twin = client_in.get(f"/sessions/{session.pk}/timeline.json")
    assert twin["Content-Type"] == "application/json"
    assert embedded == json.loads(twin.content) and embedded["series"]["main"]


def test_the_pages_data_cannot_close_its_element():
    hostile = {"text": "</script><script>alert(1)</script> & <!--", "n": [1, 2.5, None, True]}
    script = timeline_views.timeline_data_script(hostile)
    body = script.removeprefix('<script id="timeline-data" type="application/json">').removesuffix("</script>")
    assert "<" not in body and ">" not in body and "&" not in body
    assert json.loads(body) == hostile
    # Keys that are not strings and values JSON has no type for are written as text, as the standard library's
    # encoder with Django's does for the types it knows, never an error page.
    odd = timeline_views.timeline_json({1: Decimal("1.5"), "when": date(2025, 1, 2)})
    assert json.loads(odd) == {"1": "1.5", "when": "2025-01-02"}


def test_a_replay_that_fails_inside_says_so_in_its_row_and_the_command_too(client_in, tmp_path, monkeypatch, caplog):
    # A fault inside a replay (the 53 MB bench's misaligned view raised this ValueError) costs that replay only: the
    # timeline, its JSON and the other replays answer, the row says it failed in words, the log has the trace.
    from compaction.strategies.khaelor import KhaelorStrategy

    def failing(self, **kwargs):
        raise ValueError("zip() argument 2 is shorter than argument 1")

    monkeypatch.setattr(KhaelorStrategy, "replay_rules", failing)
    session = long_tool_session(tmp_path, n=3)
    timeline_views._PAGE_DATA.clear()
    data = client_in.get(f"/sessions/{session}/timeline.json?replay=khaelor&replay=claude-code").json()
    error = data["replays"]["khaelor"]["error"]
    assert error.startswith("KHAELOR's replay stopped on an internal error") and "zip()" not in error
    assert "points" in data["replays"]["claude-code"] and "error" not in data["replays"]["claude-code"]
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)
    page = client_in.get(f"/sessions/{session}/timeline/?replay=khaelor")
    assert page.status_code == 200 and "KHAELOR&#x27;s replay stopped on an internal error" in page.content.decode()
    with pytest.raises(CommandError, match="KHAELOR's replay stopped on an internal error"):
        call_command("replay", str(session), "--strategy", "khaelor")
    out = io.StringIO()
    call_command("simulate", "--strategy", "khaelor", "--json", stdout=out)
    (row,) = json.loads(out.getvalue())["sessions"]
    assert row["skipped"].startswith("KHAELOR's replay stopped on an internal error")


def test_the_timeline_form_on_a_calls_page_submits_with_that_call(client_in):
    # Every call link lands on /timeline/turn/?call=N; the form there had no action, so Show and Replay went to the
    # turn URL without a call: 404 "No such API call".
    session = import_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl")
    page = client_in.get(f"/sessions/{session.pk}/timeline/turn/?call=3").content.decode()
    form = page.split('id="timeline-form"')[1].split(">", 1)[0]
    assert f'action="/sessions/{session.pk}/timeline/turn/"' in form
    assert '<input type="hidden" name="call" value="3">' in page
    shown = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"agent": "main", "call": "3", "strategy": "codex"})
    assert shown.status_code == 200 and 'id="turn-main-3"' in shown.content.decode()
    # The plain timeline's form stays on the timeline.
    plain = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    assert f'action="/sessions/{session.pk}/timeline/"' in plain.split('id="timeline-form"')[1].split(">", 1)[0]


def test_the_follow_reality_default_is_worded_for_each_strategy(client_in):
    # Every strategy's choice read "default (the own agent: on)", on a Codex session's Claude Code fieldset too,
    # where the default is off: only the session's own agent follows what really happened by default.
    outcome = services.import_file(path=KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    page = client_in.get(f"/sessions/{outcome.session}/timeline/").content.decode()
    fieldsets = {f.split('value="', 1)[1].split('"', 1)[0]: f for f in page.split('name="replay"')[1:]}
    assert "default (own agent: on)" in fieldsets["khaelor"]
    for other in ("claude-code", "klaude-code", "codex"):
        assert "default (other agent: off)" in fieldsets[other].split("</fieldset>")[0]
    assert "the own agent" not in page and "own agent: on" not in fieldsets["codex"]


def test_the_caption_of_a_log_without_usage_counts_its_replies_not_zero_calls(client_in):
    # KHAELOR records no usage: the caption said "0 API calls on the main chain ... as recorded" beside a session
    # page that counts 28 calls (its replies).
    outcome = services.import_file(path=KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    session = models.Session.objects.get(pk=outcome.session)
    page = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    caption = page.split('id="timeline-caption"')[1].split("</p>")[0]
    assert f"{session.api_calls_main} calls on the main chain, counted as the model's replies" in caption
    assert "0 API calls" not in caption and session.api_calls_main > 0
    assert "{#" not in page  # a template comment spread over lines is printed, not dropped
