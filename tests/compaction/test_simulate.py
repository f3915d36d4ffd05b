"""The settings simulator's arithmetic (compaction/simulate.py): the modelled cost of a path and the recommendation."""

from __future__ import annotations

import pytest

from compaction.simulate import ProjectSummary, Totals, modelled_input_cost, recommend, summarise

# Round rates (USD per million tokens) so each amount below is worked out by hand.
PRICES = {"m": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write_5m": 2, "cache_write_1h": 4}}


def test_a_path_reads_what_the_previous_call_sent_and_writes_the_rest() -> None:
    models = {1: "m", 2: "m", 3: "m"}
    contexts = [(1, 1_000_000), (2, 1_500_000), (3, 2_000_000)]
    # call 1 writes 1M ($2); call 2 reads 1M ($0.1) and writes 0.5M ($1); call 3 reads 1.5M, writes 0.5M ($1.15).
    plain = modelled_input_cost(contexts=contexts, models=models, compactions=[], summary_tokens=0, prices=PRICES)
    assert plain == pytest.approx(2 + 1.1 + 1.15)
    # A compaction after call 2 of 1.5M tokens into 100k: the summarizer reads 1.5M ($0.15) and writes 100k of
    # output ($1); call 3 then writes its whole context ($4) instead of reading the prefix.
    compacted = modelled_input_cost(
        contexts=[(1, 1_000_000), (2, 1_500_000), (3, 300_000)],
        models=models,
        compactions=[(2, 1_500_000)],
        summary_tokens=100_000,
        prices=PRICES,
    )
    assert compacted == pytest.approx(2 + 1.1 + 0.15 + 1 + 0.6)
    assert modelled_input_cost(contexts=contexts, models={1: "no-such-model"}, compactions=[], summary_tokens=0) is None


def _summary(happened_cost: float, settings: list[tuple[float, int]], uncosted: int = 0) -> ProjectSummary:
    happened = Totals(sessions=2, overflows=0, cost_usd=happened_cost, uncosted=uncosted)
    tried = [Totals(sessions=2, overflows=o, cost_usd=c, uncosted=uncosted) for c, o in settings]
    return ProjectSummary(project="p", happened=happened, settings=tried)


def test_the_recommendation_is_the_cheapest_setting_that_overflows_no_more() -> None:
    summary = _summary(10.0, [(7.0, 1), (8.0, 0), (9.5, 0)])
    recommend(summary)
    assert summary.recommended == 1 and summary.saving_usd == pytest.approx(2.0)
    within_noise = _summary(10.0, [(9.95, 0)])
    recommend(within_noise)
    assert within_noise.recommended is None and "keep what you have" in within_noise.why
    unpriced = _summary(0.0, [(0.0, 0)], uncosted=2)
    recommend(unpriced)
    assert unpriced.recommended is None and "No cost can be compared" in unpriced.why
    partly = _summary(10.0, [(8.0, 0)], uncosted=1)
    recommend(partly)
    assert partly.recommended == 0 and "Costs are of the 1 sessions that can be priced" in partly.why


def test_sessions_sum_per_project_and_for_all_skipped_ones_apart() -> None:
    def row(project: str, cost: float, estimate: float) -> dict:
        peak = {"call": 1, "tokens": 100}
        happened = {"compactions": 1, "overflows": 0, "peak": peak, "cost_usd": cost}
        outcome = {"compactions": 2, "overflows": 0, "peak": peak, "estimated_cost_usd": estimate}
        return {"project": project, "happened": happened, "outcomes": [outcome]}

    unpriced = row("b", 0.0, 0.0)
    unpriced["outcomes"][0]["estimated_cost_usd"] = None  # a log without usage: no estimate
    rows = [row("a", 1.0, 0.5), row("b", 2.0, 2.5), {"project": "a", "skipped": "too large"}, unpriced]
    everything, a, b = summarise(rows, settings=1)
    assert (everything.project, a.project, b.project) == ("", "a", "b")
    # Costs over the same sessions on both sides: the one without an estimate is counted, not costed.
    assert everything.happened.cost_usd == 3.0 and everything.settings[0].cost_usd == 3.0
    assert everything.happened.as_json()["sessions_costed"] == 2 and everything.happened.sessions == 3
    assert a.skipped == 1 and a.recommended == 0 and a.saving_usd == pytest.approx(0.5)
    assert b.recommended is None
