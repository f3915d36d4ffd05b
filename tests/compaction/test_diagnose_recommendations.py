"""Recommendations pinned on the shared samples: each says what to change and what the change would do.

Facts come from samples/klaude-code/README.md (overflow: "4 parallel Reads of about 55k chars each ... push
the next prompt to 229975 tokens", last usage 168538; 2.7.0: 11 identical StreamErrorItems, no compaction)
and docs/formats/claude-code.md §7 (idle-gap cache misses in entirecli_a6e4, 5-minute entries only).
"""

from __future__ import annotations

import json
import re

import pytest
from genai_prices import Usage as PackageUsage
from genai_prices import calc_price

from compaction.diagnose import CAP_LADDER, Diagnosis, Finding, diagnose
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.replay import replay
from compaction.strategies.registry import build_strategy
from compaction.transcript import ContextEvent
from compaction.transforms import ToolCap, cap_tool_results
from tests.compaction.diagnose_samples import KLAUDE_OVERFLOW, claude_sample

KLAUDE_270 = KLAUDE_OVERFLOW.parent / "5ccec58f0e704378a1297842bc337b8d"


def klaude(path) -> tuple[Diagnosis, list, object]:  # type: ignore[no-untyped-def]
    parser, records = parse_session(path)
    messages = history_messages(records)
    events = [r for r in records if isinstance(r, ContextEvent)]
    return diagnose(messages, events, info=parser.info), messages, parser.info


def only(result: Diagnosis, kind: str, subject: str | None = None) -> Finding:
    [found] = [r for r in result.recommendations if r.kind == kind and subject in (None, r.subject)]
    return found


def test_klaude_overflow_names_the_four_parallel_reads_after_the_last_request() -> None:
    result, _, _ = klaude(KLAUDE_OVERFLOW)
    burst = only(result, "late_arrivals")
    assert "4 Read results" in burst.finding
    assert "168,538 tokens recorded" in burst.finding and "229,975" in burst.finding
    assert "15,078 below" in burst.finding  # signed wording: below the 183,616 line, never "-15078 past"
    assert len(burst.evidence) == 4
    assert all(e.label.startswith("Read") for e in burst.evidence)
    # "about 55k chars each (output cut by the Read tool's 50000-char content limit)"
    sizes = [int(re.search(r"([\d,]+) characters", e.label).group(1).replace(",", "")) for e in burst.evidence]  # type: ignore[union-attr]
    assert all(54_000 <= size <= 56_000 for size in sizes)
    # klaude-code compares only the last usage with its line: a larger reserve, proved by the replay.
    assert burst.proof is not None
    assert burst.proof.overrides == {"reserve_tokens": "32000"}
    assert (burst.proof.overflows_before, burst.proof.overflows_after) == (1, 0)


def test_klaude_overflow_cap_on_read_results_is_proved_by_the_replay() -> None:
    result, messages, info = klaude(KLAUDE_OVERFLOW)
    oversized = only(result, "tool_outputs", "Read")
    proof = oversized.proof
    assert proof is not None and proof.cap_tool == "Read"
    assert proof.cap_chars is not None
    assert (proof.overflows_before, proof.overflows_after) == (1, 0)
    assert proof.peak_after < result.thresholds.autocompact  # type: ignore[operator]
    assert "the overflow after call 15 does not happen" in proof.summary
    assert oversized.rank == 1  # the finding that avoids the overflow comes first
    # The proof is the replay itself: the same strategy over the capped transcript, run here independently.
    strategy = build_strategy("klaude-code", info=info, overrides={})  # type: ignore[arg-type]
    capped, cut = cap_tool_results(messages, cap=ToolCap("Read", proof.cap_chars), estimate=strategy.estimate)
    assert cut > 0
    again = replay(capped, strategy=strategy, info=info)  # type: ignore[arg-type]
    assert (again.overflows, again.peak.tokens) == (0, proof.peak_after)
    assert replay(messages, strategy=strategy, info=info).overflows == 1  # type: ignore[arg-type]
    # The cap is the largest of the ladder that is enough: any larger one would not have kept under the line.
    for size in [c for c in CAP_LADDER if c > proof.cap_chars]:
        capped_more = cap_tool_results(messages, cap=ToolCap("Read", size), estimate=strategy.estimate)[0]
        looser = replay(capped_more, strategy=strategy, info=info)  # type: ignore[arg-type]
        assert looser.peak.tokens >= result.thresholds.autocompact  # type: ignore[operator]


def test_claude_code_microcompact_sample_biggest_repeated_reads() -> None:
    messages, events, info = claude_sample("entirecli_f9f6f611b469-0_full.jsonl")
    assert any(e.kind == "microcompact" for e in events)
    result = diagnose(messages, events, info=info)
    repeated = only(result, "repeated_reads")
    top = repeated.details[0]
    assert top.subject.endswith("/cmd/entire/cli/explain.go")
    assert top.count == 27
    assert top.tokens == 10_890
    assert repeated.tokens == sum(d.tokens for d in repeated.details) == 11_270
    assert repeated.evidence and repeated.evidence[0].label.startswith("read 1 of")


def test_idle_gap_cache_miss_and_what_it_cost() -> None:
    messages, events, info = claude_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl")
    result = diagnose(messages, events, info=info)
    misses = only(result, "cache_misses", "expiry")
    first = misses.details[0]
    assert first.subject == "call 3" and first.tokens == 153_863
    assert result.cache.lifetime.minutes == 5
    assert first.minutes is not None and first.minutes > 5
    # The miss cost the re-written prefix at the 5-minute write price instead of the cache-read price.
    assert info.model == "claude-opus-4-5-20251101"
    written = calc_price(
        PackageUsage(input_tokens=153_863, cache_write_tokens=153_863),
        model_ref="claude-opus-4-5-20251101",
        provider_id="anthropic",
    ).total_price
    read = calc_price(
        PackageUsage(input_tokens=153_863, cache_read_tokens=153_863),
        model_ref="claude-opus-4-5-20251101",
        provider_id="anthropic",
    ).total_price
    assert first.cost_usd == pytest.approx(float(written - read), abs=1e-6)
    assert misses.cost_usd == pytest.approx(sum(d.cost_usd for d in misses.details), abs=1e-6)  # type: ignore[misc]
    assert f"${first.cost_usd:,.2f}" in misses.finding


def test_klaude_270_is_diagnosed_as_klaude_code_without_compaction() -> None:
    result, _, _ = klaude(KLAUDE_270)
    text = json.dumps(result.as_json())
    assert "Claude Code" not in text  # no Claude Code rule, estimator or breaker on a klaude-code session
    assert "circuit breaker" not in text
    assert result.agent == "klaude-code" and not result.agent_compacts
    # README: 11 identical StreamErrorItems (the first attempt and 10 retries): one row with a count.
    [failure] = result.failures
    assert (failure.kind, failure.repeats) == ("overflow", 11)
    oversized = only(result, "tool_outputs", "Read")
    assert oversized.proof is not None and oversized.proof.overflows_after == 0
    assert "does not compact" in only(result, "late_arrivals").change


def test_each_compaction_and_cache_miss_carries_its_cost() -> None:
    messages, events, info = claude_sample("entirecli_a6e4c2a0fbd1-0_full.jsonl")
    result = diagnose(messages, events, info=info)
    [compaction] = result.compactions
    assert compaction.next_call is not None and compaction.next_call_cost_usd is not None
    [first] = [m for m in messages if m.usage is not None and m.call_key and m.line >= compaction.line][:1]
    usage = first.usage
    assert usage is not None
    expected = calc_price(
        PackageUsage(
            input_tokens=usage.context,
            cache_write_tokens=usage.cache_creation_input_tokens,
            cache_read_tokens=usage.cache_read_input_tokens,
            output_tokens=usage.output_tokens,
        ),
        model_ref="claude-opus-4-5-20251101",
        provider_id="anthropic",
    ).total_price
    assert compaction.next_call_cost_usd == pytest.approx(float(expected), abs=1e-6)
    misses = result.as_json()["cache"]["misses"]
    assert misses and all(m["extra_cost_usd"] is not None and m["extra_cost_usd"] > 0 for m in misses)


def test_a_session_far_from_its_limit_says_so_in_one_sentence_and_still_lists_findings() -> None:
    # SOURCES.md: entireskills_4982335ad847 peaks at 325,602 tokens in a 1M window; it writes 1-hour entries.
    messages, events, info = claude_sample("entireskills_4982335ad847-0_raw_transcript.jsonl")
    result = diagnose(messages, events, info=info)
    assert result.verdict.count(". ") == 0 and result.verdict.endswith("never needed compaction.")
    misses = only(result, "cache_misses", "expiry")
    assert result.cache.lifetime.minutes == 60
    assert "already writes 1-hour entries" in misses.change
    assert "after 1,001 idle minutes" in misses.finding  # thousands separators in sentences too
