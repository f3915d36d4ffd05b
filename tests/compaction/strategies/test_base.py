"""The neutral parts of the strategy protocol: session facts, recorded thresholds and the default replay rules."""

from __future__ import annotations

from compaction.strategies.base import (
    Cut,
    Decision,
    ReplayRules,
    Thresholds,
    recorded_thresholds,
    session_model,
    session_version,
)
from compaction.strategies.khaelor import KhaelorParams, KhaelorStrategy
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from compaction.transcript import Block, Message, SessionInfo, Usage

MODEL = "claude-opus-4-5-20251101"


def reply(line: int, *, model: str, synthetic: bool = False, context: int = 0, version: str | None = None) -> Message:
    data: dict[str, object] = {"synthetic": True} if synthetic else {}
    if version is not None:
        data["version"] = version
    usage = Usage(input_tokens=context) if context else None
    return Message(line, "assistant", "assistant", blocks=[Block("text", "ok")], model=model, usage=usage, data=data)


def text(line: int, chars: int = 40) -> Message:
    return Message(line, "user", "prompt", blocks=[Block("text", "p" * chars)])


def test_the_session_model_is_the_last_real_reply_s() -> None:
    messages = [reply(1, model=MODEL, version="2.8.1"), reply(2, model="<synthetic>", synthetic=True)]
    assert session_model(messages) == MODEL
    assert session_version(messages) == "2.8.1"
    assert session_model([text(1)]) is None and session_version([text(1)]) is None


def test_recorded_facts_win_over_the_session_info_which_fills_the_gaps() -> None:
    # klaude-code 2.7 has no compaction (klaude-code doc §3.14): the version decides whether a line exists.
    strategy = KlaudeCodeStrategy()
    old = SessionInfo(format="klaude-code", model=MODEL, agent_version="2.7.0")
    assert recorded_thresholds(strategy, [text(1)], info=old).autocompact is None
    recorded = [reply(1, model=MODEL, version="2.8.1")]
    assert recorded_thresholds(strategy, recorded, info=old).autocompact is not None
    assert strategy.session_thresholds(recorded, info=old) == recorded_thresholds(strategy, recorded, info=old)


def test_the_largest_recorded_context_reaches_the_strategy() -> None:
    # Without a recorded window KHAELOR takes the model's, which a larger recorded context proves wrong.
    strategy = KhaelorStrategy(KhaelorParams())
    small = recorded_thresholds(strategy, [reply(1, model="unknown-model", context=1_000)])
    large = recorded_thresholds(strategy, [reply(1, model="unknown-model", context=900_000)])
    assert large.window >= 900_000 > small.window


def neutral(autocompact: int | None = 100) -> ReplayRules:
    return ReplayRules(KhaelorStrategy(), thresholds=Thresholds(window=200, autocompact=autocompact), summary_tokens=5)


def test_neutral_rules_act_at_the_line_and_only_with_one() -> None:
    rules = neutral()
    assert (rules.level(99, idle_minutes=None), rules.level(100, idle_minutes=None)) == (0, 2)
    rules.strict = True
    assert (rules.level(100, idle_minutes=None), rules.level(101, idle_minutes=None)) == (0, 2)
    without_line = neutral(autocompact=None)
    assert without_line.level(10**9, idle_minutes=None) == 0
    assert not without_line.reactive  # no line: the agent does not compact after an overflow either


def test_neutral_rules_compact_only_a_decided_cut() -> None:
    rules = neutral()
    cut = Cut(0, 1, first_kept=1)
    assert rules.fires(Decision("x", should_compact=True, tokens_before=0, cut=cut))
    assert not rules.fires(Decision("x", should_compact=False, tokens_before=0, cut=cut))
    assert not rules.fires(Decision("x", should_compact=True, tokens_before=0, cut=None))


def test_neutral_compaction_keeps_the_real_head_and_the_tail_around_the_summary() -> None:
    rules = neutral()
    earlier_summary = rules.summary_message([], Cut(0, 0, first_kept=0))
    view = [text(1), earlier_summary, text(3), text(4), text(5)]
    origin: list[int | None] = [0, None, 2, 3, 4]
    summary = rules.summary_message(view, Cut(2, 4, first_kept=4))
    after, after_origin = rules.after_compaction(view, origin, Cut(2, 4, first_kept=4), summary)
    # The earlier simulated summary is folded into the new one; the prompt before it stays.
    assert after == [view[0], summary, view[4]]
    assert after_origin == [0, None, 4]
    assert len(summary.text) == 4 * rules.summary_tokens  # chars/4: the summary budget in tokens
    assert rules.view_tokens(after) == sum(rules.estimate(m) for m in after)
