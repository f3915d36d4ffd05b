"""Costs: our usage and cost of every Claude Code sample equal an independent reading of the same files.

The independent side reads the JSONL with ``json`` (no parser of ours), counts each API response once by
``message.id`` (input and cache numbers from its first line, output the largest, docs/formats/claude-code.md
§6.1-6.2), including the subagent responses that ``agent_progress`` lines carry (§6.4), and prices each one
with genai-prices' own ``calc_price`` (its code, not ours, does the arithmetic).

Sections (§) refer to docs/formats/claude-code.md.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.costs import (
    Cost,
    call_cost,
    exact_cost,
    price_for,
    round_usd,
    session_cost,
    tier_rates,
    usage_cost,
)
from compaction.formats.claude_code import ClaudeCodeParser
from compaction.stats import session_stats
from compaction.transcript import MAIN, ApiCall, Message, Usage
from tests.compaction.cost_oracle import independent_responses, package_cost
from tests.conftest import CLAUDE_SAMPLES

SAMPLE_FILES = sorted(CLAUDE_SAMPLES.rglob("*.jsonl"))


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_usage_and_cost_equal_an_independent_reading(path: Path) -> None:
    responses = independent_responses(path)
    with open(path, "rb") as handle:
        stats = session_stats(ClaudeCodeParser().parse(handle))
    usage = stats.cost.usage
    assert (
        usage.input_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        usage.output_tokens,
        usage.cache_creation_1h_input_tokens,
    ) == (
        sum(r["input"] for r in responses.values()),
        sum(r["created"] for r in responses.values()),
        sum(r["read"] for r in responses.values()),
        sum(r["output"] for r in responses.values()),
        sum(r["one_hour"] for r in responses.values()),
    )
    expected = sum((package_cost(r) for r in responses.values()), Decimal(0))
    assert stats.cost.unpriced == []
    assert stats.cost.total_usd == pytest.approx(float(expected), abs=1e-6)
    data = stats.as_json()
    assert data["cost_usd"] == pytest.approx(float(expected), abs=1e-6)
    assert set(data["usage"]) >= {"input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens"}


def test_the_samples_hold_1_hour_writes_and_the_cost_test_sees_them() -> None:
    # docs/formats/claude-code.md §7: cipherbox_c644, entirecli_ada8 and entireskills_* write 1-hour entries.
    one_hour = {path.name: sum(r["one_hour"] for r in independent_responses(path).values()) for path in SAMPLE_FILES}
    assert one_hour["cipherbox_c644f3afc869-1_full.jsonl"] > 0
    assert one_hour["entirecli_a6e4c2a0fbd1-0_full.jsonl"] == 0


def test_1_hour_cache_writes_are_priced_as_such() -> None:
    price = price_for("claude-opus-4-5-20251101")
    assert price is not None
    five = usage_cost(Usage(cache_creation_input_tokens=1_000_000), price=price)
    hour = usage_cost(
        Usage(cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=1_000_000), price=price
    )
    # Anthropic: a 5-minute write is 1.25x the input price, a 1-hour write 2x (opus 4.5: $5 input).
    assert five.total == pytest.approx(6.25)
    assert hour.total == pytest.approx(10.0)
    assert (hour.cache_write_1h, hour.cache_write_5m) == (pytest.approx(10.0), 0.0)


def test_a_parsed_1_hour_write_is_priced_at_the_1_hour_rate() -> None:
    # docs/formats/claude-code.md §6.3: entireskills_4982335ad847 line 745, "ephemeral_1h_input_tokens":3853.
    path = CLAUDE_SAMPLES / "entireskills_4982335ad847-0_raw_transcript.jsonl"
    with open(path, "rb") as handle:
        records = list(ClaudeCodeParser().parse(handle))
    [line] = [r for r in records if isinstance(r, Message) and r.line == 745]
    assert line.usage is not None
    assert (line.usage.cache_creation_input_tokens, line.usage.cache_creation_1h_input_tokens) == (3853, 3853)
    cost = call_cost(line.usage, model=line.model)
    assert cost is not None
    price = price_for(line.model)
    assert price is not None
    assert cost.cache_write_1h == pytest.approx(3853 * price.rates.cache_write_1h / 1_000_000)
    assert cost.cache_write_5m == 0


def test_long_context_requests_use_the_higher_tier_for_every_token() -> None:
    price = price_for("claude-sonnet-4-5-20250929")
    assert price is not None and price.tier_start == 200_000
    small = usage_cost(Usage(input_tokens=200_000), price=price)
    large = usage_cost(Usage(input_tokens=200_001), price=price)
    assert small.input == pytest.approx(0.6)
    assert large.input == pytest.approx(200_001 * 6 / 1_000_000)


def test_an_override_wins_and_an_unknown_model_is_unpriced() -> None:
    overrides = {"claude-opus-4-5-20251101": {"input": 1, "output": 2}, "my-model": {"input": 3, "output": 4}}
    cost = call_cost(Usage(input_tokens=1_000_000, output_tokens=1_000_000), model="my-model", overrides=overrides)
    assert cost is not None and cost.total == pytest.approx(7.0)
    assert price_for("claude-opus-4-5-20251101", overrides=overrides).source == "MODEL_PRICES setting"  # type: ignore[union-attr]
    assert call_cost(Usage(input_tokens=10), model="no-such-model-anywhere") is None
    total = session_cost([priced("no-such-model-anywhere", Usage(input_tokens=10))])
    assert total.unpriced == ["no-such-model-anywhere"] and total.total_usd is None


def test_every_model_in_the_samples_has_a_price(settings) -> None:  # type: ignore[no-untyped-def]
    models = {
        "claude-haiku-4-5-20251001",
        "claude-opus-4-5-20251101",
        "claude-opus-4-6",
        "claude-opus-4-7",
        "claude-sonnet-4-20250514",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5",
        "qwen3-coder-30b-a3b-instruct",  # klaude-code multi_compaction, served by LM Studio: the settings' entry
    }
    assert [m for m in sorted(models) if price_for(m, overrides=settings.MODEL_PRICES) is None] == []


def priced(model: str | None, usage: Usage) -> ApiCall:
    """A call as costs read it: its model and its usage."""
    return ApiCall(agent=MAIN, number=1, key="msg_1", line=1, usage=usage, model=model)


_MODELS = st.sampled_from(
    [
        None,
        "unknown-model-x",
        "<synthetic>",
        "claude-opus-4-5-20251101",
        "claude-sonnet-4-20250514",
        "claude-3-5-haiku-20241022",
    ]
)
_TOKENS = st.integers(0, 400_000)


@given(
    st.lists(
        st.builds(
            priced,
            _MODELS,
            st.builds(Usage, _TOKENS, _TOKENS, _TOKENS, st.integers(0, 50_000), st.integers(-5, 400_000)),
        ),
        max_size=60,
    )
)
@settings(max_examples=150, deadline=None)
def test_a_sessions_cost_is_its_calls_costs_added_in_order(calls: list[ApiCall]) -> None:
    """session_cost sums without making a Cost per call; its totals are exactly those of adding usage_cost's
    Costs one by one (the tiered Sonnet 4 price included), per model and in all."""
    result = session_cost(calls)
    total = Cost()
    per_model: dict[str, Cost] = {}
    for call in calls:
        price = price_for(call.model)
        if price is not None:
            assert call.usage is not None
            cost = usage_cost(call.usage, price=price)
            total = total + cost
            name = call.model or "unknown model"
            per_model[name] = per_model.get(name, Cost()) + cost
    assert result.cost == total
    assert {row.model: row.cost for row in result.by_model if row.cost is not None} == per_model


_USAGES = st.lists(
    st.builds(
        Usage,
        input_tokens=st.integers(0, 300_000),
        cache_creation_input_tokens=st.integers(0, 300_000),
        cache_read_input_tokens=st.integers(0, 300_000),
        output_tokens=st.integers(0, 64_000),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(usages=_USAGES, cut=st.integers(0, 30))
def test_a_total_is_the_same_however_its_calls_are_grouped(usages, cut):
    # Usage across sessions sums groups of calls (a day, a model, a session); each must round to the session's cents.
    model = "claude-sonnet-4-5"  # a model with a long-context tier: both tiers get drawn
    price = price_for(model)
    assert price is not None and price.tier_start is not None
    calls = [ApiCall(agent=MAIN, number=n, key=f"k{n}", line=n, usage=u, model=model) for n, u in enumerate(usages)]

    def exact(group: list[Usage]) -> Decimal:
        return sum(
            (exact_cost(u, rates=tier_rates(price, long_context=u.context > price.tier_start)) for u in group),
            Decimal(0),
        )

    whole = session_cost(calls).total_usd
    assert whole == round_usd(exact(usages[:cut]) + exact(usages[cut:]))
    assert whole == pytest.approx(session_cost(calls).cost.total, abs=1e-6)


def test_a_half_way_amount_rounds_to_even_whatever_the_order():
    # 0.7128575 USD (the agentv sample's total) summed as floats in two orders rounded to 0.712857 and 0.712858.
    assert round_usd(Decimal("0.7128575")) == 0.712858
    assert round_usd(Decimal("0.7128565")) == 0.712856
