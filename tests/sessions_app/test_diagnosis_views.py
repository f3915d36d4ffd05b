"""Diagnosis page and what-if replay overlay: page, fragment-free JSON twins, the real samples."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.management import call_command

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.django_db


def import_path(path) -> int:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return outcome.session


def test_diagnosis_of_the_overflow_case_names_the_gap(client_in):
    sid = import_path(CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    (compaction,) = data["compactions"]
    # SOURCES.md: last recorded context 150,210, preTokens 176,700: ~26k of tool results after the last call.
    assert compaction["last_context"] == 150_210 and compaction["pre_tokens"] == 176_700
    assert compaction["gap"] == 176_700 - 150_210
    assert "150,210" in data["verdict"] and "176,700" in data["verdict"]
    page = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    assert "tokens arrived after it" in page and 'class="contributor"' in page


def test_diagnosis_page_lists_growth_jumps_and_cache_misses_with_their_cause(client_in):
    sid = import_path(CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl")
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    jump = data["growth"]["largest_jumps"][0]
    page = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    assert 'class="growth-jumps"' in page and jump["arrived"] in page
    # docs/formats/claude-code.md §7: after the microcompact the cache read collapses 151,207 -> 19,330.
    [after_microcompact] = [m for m in data["cache"]["misses"] if m["cache_read_before"] == 151_207]
    assert after_microcompact["cause"] == "microcompact changed the prompt prefix"
    assert 'class="cache-misses"' in page and "microcompact changed the prompt prefix" in page


def test_diagnosis_of_a_1m_window_session(client_in):
    sid = import_path(CLAUDE_SAMPLES / "entireskills_4982335ad847-0_raw_transcript.jsonl")
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    assert data["is_1m_window"] is True and data["window"] == 1_000_000
    assert data["needed_compaction"] is False and data["overflowed"] is False
    assert data["compactions"] == []


def test_diagnosis_of_the_klaude_overflow_sample(client_in):
    events = next(KLAUDE_SAMPLES.glob("dot-klaude/projects/*/sessions/e403978267e543c9ae7335a01662e2ce/events.jsonl"))
    sid = import_path(events)
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    overflow = [f for f in data["failures"] if f["kind"] == "overflow"]
    assert overflow and overflow[0]["followed_by"] == "compaction"
    assert overflow[0]["compaction_trigger"] == "overflow"
    assert models.Session.objects.get(pk=sid).overflowed


def test_diagnosis_says_plainly_when_there_is_no_usage(client_in, tmp_path):
    from tests.helpers.claude_code_lines import user, write

    sid = import_path(write(tmp_path, "no-usage.jsonl", user("u1", None, "hello"), user("u2", "u1", "again")))
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    assert data["has_usage"] is False
    assert data["verdict"]


def test_replay_overlay_on_the_timeline(client_in):
    sid = import_path(CLAUDE_SAMPLES / "entirecli_a5d8ec9bae67-0_full.jsonl")
    url = (
        f"/sessions/{sid}/timeline.json"
        "?replay=claude-code&replay=klaude-code&replay=khaelor&khaelor.protect_tail_tokens=30000"
    )
    data = client_in.get(url).json()
    assert set(data["replays"]) == {"claude-code", "klaude-code", "khaelor"}
    cc = data["replays"]["claude-code"]
    # Claude Code's own strategy compacts where the session did (two auto compactions).
    assert cc["compactions"] >= 2 and cc["peak"]["tokens"] <= cc["window"]
    assert all({"seq", "call", "context"} <= set(p) for p in cc["points"])
    # The peak is the largest context sent or attempted: a compaction's count (the request it would have sent) is
    # one, so the peak is never below a context the replay compacts at.
    attempted = [e["tokens_before"] for e in cc["events"] if e["kind"] in ("compaction", "overflow")]
    sent_or_attempted = [p["context"] for p in cc["points"] if p["call"] == cc["peak"]["call"]] + [
        e["tokens_before"]
        for e in cc["events"]
        if e["kind"] in ("compaction", "overflow") and e["after_call"] + 1 == cc["peak"]["call"]
    ]
    assert cc["peak"]["tokens"] == max(sent_or_attempted) >= max(attempted)
    page = client_in.get(f"/sessions/{sid}/timeline/", {"replay": ["khaelor"]}).content.decode()
    assert 'class="replay-row" data-strategy="khaelor"' in page
    bad = client_in.get(f"/sessions/{sid}/timeline.json?replay=khaelor&khaelor.protect_tail_tokens=lots").json()
    assert "error" in bad["replays"]["khaelor"]


def test_list_filters_overflowed_and_compaction_failed(client_in):
    for events in KLAUDE_SAMPLES.glob("dot-klaude/projects/*/sessions/*/events.jsonl"):
        import_path(events)
    overflowed = client_in.get("/", {"format": "json", "overflowed": "1"}).json()["sessions"]
    failed = client_in.get("/", {"format": "json", "compaction_failed": "1"}).json()["sessions"]
    ids = {s["external_id"] for s in overflowed}
    # README: `overflow` (rescued by an overflow compaction) and 2.7.0's overflow without compaction.
    assert {"e403978267e543c9ae7335a01662e2ce", "5ccec58f0e704378a1297842bc337b8d"} <= ids
    # 2.7.0 has no compaction (docs/formats/klaude-code.md §3.14): its overflow is no failed compaction, and the
    # 2.8.1 overflow was rescued by its overflow compaction.
    assert failed == []
    v270 = models.Session.objects.get(external_id="5ccec58f0e704378a1297842bc337b8d")
    assert (v270.agent_version, v270.overflowed, v270.compaction_failed) == ("2.7.0", True, False)


def test_diagnosis_json_links_each_proof_to_its_replay_and_help_pages_explain_each_agent(client_in):
    sid = import_path(
        KLAUDE_SAMPLES
        / "dot-klaude/projects/home-dev-projects-webapp/sessions/e403978267e543c9ae7335a01662e2ce/events.jsonl"
    )
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    proved = [r for r in data["recommendations"] if r["proof"]]
    assert proved and all(r["try_url"].startswith(f"/sessions/{sid}/timeline/?replay=klaude-code") for r in proved)
    html = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    assert html.index("What to change") < html.index("Threshold crossings")
    assert "/help/thresholds/klaude-code/" in html
    assert "docs/" not in html and "§" not in html  # sources users can open, not our internal docs
    for agent, expected in (("claude-code", "circuit breaker"), ("klaude-code", "183,616"), ("khaelor", "assumed")):
        page = client_in.get(f"/help/thresholds/{agent}/").content.decode()
        assert expected in page and "docs/" not in page
    assert client_in.get("/help/thresholds/nobody/").status_code == 404


def test_each_help_page_computes_the_lines_for_a_model_of_its_own_agent(client_in):
    # The Codex page said "Window (for claude-sonnet-4-5) 272,000": one example model for every agent.
    from compaction.strategies.registry import STRATEGY_NAMES, build_strategy

    examples = {}
    for agent in STRATEGY_NAMES:
        model = build_strategy(agent, info=None, overrides={}).example_model
        data = client_in.get(f"/help/thresholds/{agent}/", {"format": "json"}).json()
        assert model and data["example_model"] == model
        page = client_in.get(f"/help/thresholds/{agent}/").content.decode()
        assert f"<th>Window (for {model})</th>" in page
        examples[agent] = (model, data["window"])
    assert examples["codex"] == ("gpt-5.4", 272_000)
    assert examples["claude-code"] == ("claude-sonnet-4-5", 200_000)


def test_help_pages_name_settings_as_the_what_if_form_does_never_a_key_or_a_python_value(client_in):
    claude = client_in.get("/help/thresholds/claude-code/").content.decode()
    settings_table = claude.split("Settings you can change in a replay")[1]
    assert '<td>Auto-compact</td><td class="num">on</td>' in settings_table
    assert '<td>Session-memory compaction first (2.1.88 to 2.1.155)</td><td class="num">off</td>' in settings_table
    assert '<td>Time-based microcompact keeps the last</td><td class="num">5 tool results</td>' in settings_table
    assert "autocompact_enabled" not in claude and ">True<" not in claude and ">False<" not in claude
    khaelor = client_in.get("/help/thresholds/khaelor/").content.decode()
    assert '<td>Recent tool output never pruned</td><td class="num">40,000 tokens</td>' in khaelor
    assert '<td>Context window</td><td class="num">from the session</td>' in khaelor


def test_diagnose_json_is_the_diagnosis_twin_with_its_try_it_links(client_in):
    # The twin gave each replayed finding its "Try it" link, diagnose --json gave null for the same finding (and
    # findings --json gives the link): the command now serves the twin's report.
    sid = import_path(CLAUDE_SAMPLES / "agentv_1ed266d094ed-1_full.jsonl")
    twin = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    out = io.StringIO()
    call_command("diagnose", str(sid), "--json", stdout=out)
    command = orjson.loads(out.getvalue())
    assert any(r["try_url"] for r in twin["recommendations"])
    assert command["recommendations"] == twin["recommendations"]


def test_a_crossing_measured_by_a_compaction_is_before_its_call_on_every_surface(client_in):
    # The compaction's preTokens (176,700) measured the request about to be sent as call 68; call 68 went out after the
    # compaction, far smaller, as the timeline shows. "Crossed at call 68: 176,700" contradicted the timeline's call 68.
    sid = import_path(CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    data = client_in.get(f"/sessions/{sid}/diagnosis.json").json()
    reported = next(c for c in data["crossings"] if c["source"] == "compaction preTokens")
    recorded = next(c for c in data["crossings"] if c["source"] == "recorded usage")
    assert reported["before_call"] and not recorded["before_call"]
    timeline = client_in.get(f"/sessions/{sid}/timeline.json").json()
    at_call = {p["call"]: p["context"] for p in timeline["series"]["main"]}
    assert at_call[reported["call"]] < reported["tokens"] and at_call[recorded["call"]] == recorded["tokens"]
    page = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    crossings = page.split("Threshold crossings")[1].split("</table>")[0]
    assert "before <a" in crossings and "compaction preTokens" in crossings
    out = io.StringIO()
    call_command("diagnose", str(sid), stdout=out)
    assert f"before call {reported['call']}: {reported['tokens']:,} (compaction preTokens)" in out.getvalue()
    assert f"at call {recorded['call']}: {recorded['tokens']:,} (recorded usage)" in out.getvalue()
