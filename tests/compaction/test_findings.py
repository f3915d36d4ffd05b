"""Issue 36's three diagnosis misses, reproduced on a shared sample and on sessions shaped like the reporter's, and
the findings that fix them: each with its tokens and dollars at stake, the calls it links to, the fix to paste and
the replayed saving that makes a "Try it" link."""

from __future__ import annotations

import pytest
from genai_prices import Usage as PackageUsage
from genai_prices import calc_price

from compaction.diagnose import Diagnosis, Finding, diagnose
from compaction.prompt_cache import EXPIRY, MODEL_SWITCH, PREFIX_CHANGE
from tests.compaction.diagnose_samples import claude_sample
from tests.compaction.finding_sessions import (
    BIG_COMMAND,
    claude_code_read_heavy,
    codex_two_compactions_one_huge_output,
)


def findings(result: Diagnosis, kind: str) -> list[Finding]:
    return [r for r in result.recommendations if r.kind == kind]


def test_a_session_writing_only_5_minute_entries_has_its_misses_after_idle_gaps_put_down_to_expiry() -> None:
    # docs/formats/claude-code.md §7: entirecli_a5d8 writes only 5-minute entries (its usage records the split:
    # ephemeral_5m_input_tokens, ephemeral_1h_input_tokens 0). It was given a 1-hour lifetime from gaps the cache
    # seemed to survive, and its misses after 7-16 idle minutes were blamed on a changed prefix.
    messages, events, info = claude_sample("entirecli_a5d8ec9bae67-0_full.jsonl")
    result = diagnose(messages, events, info=info)
    assert result.cache.lifetime.minutes == 5
    assert "wrote no 1-hour entries" in result.cache.lifetime.source
    misses = result.cache.misses
    assert [m.call for m in misses] == [5, 198, 220]
    assert all(m.kind == EXPIRY and m.lifetime_minutes == 5 for m in misses)
    assert [round(m.idle_minutes or 0) for m in misses] == [16, 12, 7]
    [expiry] = findings(result, "cache_misses")
    assert expiry.subject == EXPIRY and expiry.calls == [5, 198, 220]
    assert expiry.cost_usd == pytest.approx(sum(result.miss_costs[c] or 0 for c in (5, 198, 220)), abs=1e-6)
    # 0.67 + 0.58 + 0.71: each a prefix of 100k-123k tokens written again
    assert expiry.cost_usd is not None and expiry.cost_usd > 1.9
    assert "write 1-hour cache entries" in expiry.change


def test_read_results_that_fill_two_fifths_of_the_peak_lead_the_findings_with_a_replayed_saving() -> None:
    # Shaped like the reporter's session: Read results made up 62,864 of its 166,874 peak tokens, none of them
    # oversized alone; the only recommendation saved 1.4 % (a repeated read) and offered no "Try it".
    messages, events, info = claude_code_read_heavy()
    result = diagnose(messages, events, info=info)
    assert not result.compactions and not result.overflowed
    top = result.recommendations[0]
    assert (top.kind, top.subject, top.rank) == ("tool_outputs", "Read", 1)
    assert "62,800 of them were in the context at the 153,200-token peak (41%)" in top.finding
    assert top.cost_usd is not None and top.cost_usd > 1
    assert top.cost_usd == pytest.approx(sum(d.cost_usd or 0 for d in top.details), abs=1e-5)
    assert top.details[0].subject == "/home/me/proj/billing/part_0.py" and top.details[0].count == 2
    [fix] = top.fixes
    assert fix.where == "CLAUDE.md" and "offset and limit" in fix.text and fix.source.startswith("docs/formats/")
    # The replay proves the saving (the "Try it" link's parameters): the same session with Read capped.
    proof = top.proof
    assert proof is not None and (proof.cap_tool, proof.cap_chars) == ("Read", 10_000)
    assert (proof.peak_before, proof.peak_after) == (153_200, 110_400)
    assert proof.tokens_sent_after < proof.tokens_sent_before
    assert "fewer input tokens" in top.effect
    assert top.calls[0] == 2  # the first Read result went out with call 2


def test_a_codex_command_output_of_117k_tokens_is_a_finding_with_its_command_fix_and_replayed_saving() -> None:
    # Shaped like the reporter's Codex session: two compactions and one 117,000-token command output, for which
    # the diagnosis said "nothing calls for a change".
    messages, events, info = codex_two_compactions_one_huge_output()
    result = diagnose(messages, events, info=info)
    assert len(result.compactions) == 2
    [outputs] = findings(result, "tool_outputs")
    assert outputs.rank == 1 and outputs.subject == "exec_command"
    biggest = outputs.details[0]
    assert biggest.subject == BIG_COMMAND and biggest.count == 1
    assert 117_000 <= biggest.tokens <= 119_000  # 468,000 characters, bytes/4 of the item as Codex counts
    assert biggest.cost_usd is not None and biggest.cost_usd > 0
    assert outputs.calls[0] == 22  # the call that first sent it
    # What it cost, from the price package directly: sent uncached with call 22, then read from the cache by calls
    # 23-33 (the first compaction comes after call 33), at gpt-5-codex's rates.
    [first_compaction, _] = result.compactions
    assert first_compaction.after_call == 33
    tokens = biggest.tokens
    uncached = calc_price(PackageUsage(input_tokens=tokens), model_ref="gpt-5-codex", provider_id="openai").total_price
    cached = calc_price(
        PackageUsage(input_tokens=tokens, cache_read_tokens=tokens), model_ref="gpt-5-codex", provider_id="openai"
    ).total_price
    assert biggest.cost_usd == pytest.approx(float(uncached + 11 * cached), rel=1e-6)
    assert [f.where for f in outputs.fixes] == ["AGENTS.md"]
    # Capping the output changes the replay (it did not: the Codex estimate read the item's measured size).
    proof = outputs.proof
    assert proof is not None and proof.cap_tool == "exec_command"
    assert proof.peak_after < proof.peak_before and proof.tokens_sent_after < proof.tokens_sent_before


def test_misses_by_cause_a_microcompact_is_a_prefix_change_and_a_model_switch_its_own() -> None:
    # docs/formats/claude-code.md §7: after entirecli_7662's microcompact cache_read collapses (call 7); its later
    # misses follow idle gaps in a session writing 5-minute entries.
    messages, events, info = claude_sample("entirecli_7662d755ef9f-2_full.jsonl")
    result = diagnose(messages, events, info=info)
    by_cause = {f.subject: f for f in findings(result, "cache_misses")}
    assert by_cause[PREFIX_CHANGE].calls == [7]
    assert by_cause[EXPIRY].calls == [24, 27, 37]
    assert all((f.cost_usd or 0) > 0 for f in by_cause.values())
    # spotter switches from claude-opus-4-6 to claude-haiku-4-5 before call 6: each model has its own cache.
    messages, events, info = claude_sample("spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    [switch] = findings(diagnose(messages, events, info=info), "cache_misses")
    assert (switch.subject, switch.calls) == (MODEL_SWITCH, [6])
    assert "claude-opus-4-6 to claude-haiku-4-5" in switch.finding


def test_a_session_far_past_its_warning_line_is_a_finding_with_the_agents_setting() -> None:
    messages, events, info = claude_sample("entirecli_a5d8ec9bae67-0_full.jsonl")
    result = diagnose(messages, events, info=info)
    [warning] = findings(result, "warning_line")
    line = result.thresholds.warning
    assert line is not None and warning.subject == "warning"
    assert len(warning.calls) >= 2  # it crossed the line again after each of its two compactions
    assert warning.tokens > 0 and warning.cost_usd is not None and warning.cost_usd > 0
    assert [f.where for f in warning.fixes] == ["~/.claude/settings.json"]
