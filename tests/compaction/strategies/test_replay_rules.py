"""Each strategy's replay rules (``Strategy.replay_rules``): how its agent counts, when it acts, what a
compaction or a prune leaves in the view. The whole replay is tested in tests/compaction/test_replay.py.

Expected values follow the compaction docs: Claude Code acts at ``tokens >= line`` on last usage + an
estimate of what arrived (docs/compaction/claude-code.md §1.1, §4.1), klaude at ``tokens > line`` on the last usage
(klaude-code.md §3.2-3.3), KHAELOR above its (assumed) proactive line on the whole history.
"""

from __future__ import annotations

import math

import pytest

from compaction.strategies.base import Cut, Decision, ReplayRules, Strategy
from compaction.strategies.claude_code import (
    CLEARED_TOOL_RESULT_MESSAGE,
    ClaudeCodeParams,
    ClaudeCodeStrategy,
    estimate_message,
)
from compaction.strategies.khaelor import PRUNE_PLACEHOLDER, KhaelorStrategy
from compaction.strategies.klaude_code import COMPACTION, KlaudeCodeStrategy
from compaction.strategies.registry import STRATEGY_NAMES, build_strategy
from compaction.transcript import Block, Message
from tests.compaction.strategies.khaelor_log import Log

MODEL = "claude-opus-4-5-20251101"

# (counts, strict) per agent, from the docs named in the module docstring.
# Codex: last total + what arrived since, compared with `>=` (session/turn.rs, docs/formats/codex.md §6).
DOCUMENTED = {
    "claude-code": ("pending", False),
    "klaude-code": ("last_usage", True),
    "khaelor": ("actual", True),
    "codex": ("pending", False),
}


def rules_for(strategy: Strategy, version: str | None) -> ReplayRules:
    thresholds = strategy.thresholds(model=MODEL, version=version)
    return strategy.replay_rules(thresholds=thresholds, summary_tokens=1_000, version=version)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_every_strategy_counts_and_compares_as_its_agent(name: str) -> None:
    rules = rules_for(build_strategy(name, info=None, overrides={}), "2.8.1")
    assert (rules.counts, rules.strict) == DOCUMENTED[name]
    line = rules.thresholds.autocompact
    assert line is not None
    assert rules.level(line, idle_minutes=None) == (0 if rules.strict else 2)
    assert rules.level(line + 1, idle_minutes=None) == 2


# ----------------------------------------------------------------------------- Claude Code


def read_round(tool_id: str, chars: int) -> list[Message]:
    use = Block("tool_use", tool_id=tool_id, tool_name="Read", tool_input={"file_path": "/x"})
    result = Block("tool_result", "r" * chars, tool_id=tool_id, tool_name="Read")
    return [
        Message(1, "assistant", "assistant", blocks=[use], model=MODEL, call_key=tool_id),
        Message(2, "user", "tool_result", blocks=[result]),
    ]


def test_claude_code_legacy_microcompact_is_due_above_the_warning_line_before_2_1_88() -> None:
    legacy = rules_for(ClaudeCodeStrategy(ClaudeCodeParams(model=MODEL)), "2.1.20")
    current = rules_for(ClaudeCodeStrategy(ClaudeCodeParams(model=MODEL)), "2.1.88")
    warning, current_warning = legacy.thresholds.warning, current.thresholds.warning
    assert warning is not None and current_warning is not None
    assert (legacy.level(warning - 1, idle_minutes=None), legacy.level(warning, idle_minutes=None)) == (0, 1)
    assert current.level(current_warning, idle_minutes=None) == 0


def test_claude_code_time_based_microcompact_is_due_after_the_idle_gap_only_when_enabled() -> None:
    enabled = ClaudeCodeStrategy(ClaudeCodeParams(model=MODEL, time_based_mc_enabled=True, gap_threshold_minutes=60))
    rules = rules_for(enabled, "2.1.88")
    assert [rules.level(0, idle_minutes=idle) for idle in (None, 59.9, 60)] == [0, 0, 1]
    assert rules_for(ClaudeCodeStrategy(ClaudeCodeParams(model=MODEL)), "2.1.88").level(0, idle_minutes=600) == 0


def test_claude_code_prune_clears_the_chosen_results_in_place() -> None:
    rules = rules_for(ClaudeCodeStrategy(ClaudeCodeParams(model=MODEL)), "2.1.88")
    view = read_round("toolu_a", 8_000) + read_round("toolu_b", 8_000)
    before = rules.view_tokens(view)
    rules.apply_prune(view, ["toolu_a"], Decision("claude-code", False, 0, None, prune=["toolu_a"]))
    assert view[1].blocks[0].text == CLEARED_TOOL_RESULT_MESSAGE
    assert view[3].blocks[0].text == "r" * 8_000
    assert before - rules.view_tokens(view) == 2_000 - estimate_message(view[1])
    assert len(view) == 4


# ----------------------------------------------------------------------------- klaude-code


def klaude_item(index: int) -> Message:
    return Message(
        index, "user", "prompt", blocks=[Block("text", "u" * 400)], raw_type="UserMessage", data={"index": index}
    )


def test_klaude_admits_records_without_their_recorded_index() -> None:
    rules = rules_for(KlaudeCodeStrategy.for_limit(200_000), "2.8.1")
    original = klaude_item(7)
    [admitted] = rules.admit(original)
    assert admitted.data["index"] is None
    assert original.data["index"] == 7  # the session's record is not changed


def test_klaude_compacts_its_plan_s_cut_whatever_should_compact_says() -> None:
    rules = rules_for(KlaudeCodeStrategy.for_limit(200_000), "2.8.1")
    cut = Cut(0, 1, first_kept=1)
    assert rules.fires(Decision("klaude-code", should_compact=False, tokens_before=0, cut=cut))
    assert not rules.fires(Decision("klaude-code", should_compact=True, tokens_before=0, cut=None))


def test_klaude_summary_replaces_everything_before_the_first_kept_item() -> None:
    rules = rules_for(KlaudeCodeStrategy.for_limit(200_000), "2.8.1")
    view = [klaude_item(i) for i in range(5)]
    cut = Cut(1, 3, first_kept=3)
    summary = rules.summary_message(view, cut)
    assert summary.raw_type == COMPACTION
    after, origin = rules.after_compaction(view, [0, 1, 2, 3, 4], cut, summary)
    assert after == [summary, view[3], view[4]]
    assert origin == [None, 3, 4]
    # The simulated CompactionEntry carries no text; it counts as the summary budget.
    assert rules.view_tokens(after) == rules.view_tokens(view[3:]) + 1_000


# ----------------------------------------------------------------------------- KHAELOR


def test_khaelor_admits_its_events_as_they_are_and_converts_other_agents_records_per_block() -> None:
    rules = rules_for(KhaelorStrategy(), None)
    log = Log()
    log.user()
    [event] = log.messages()
    assert rules.admit(event) == [event]
    use = Block("tool_use", tool_id="toolu_1", tool_name="Read", tool_input={})
    thinking = Block("thinking", "hmm")
    reply = Message(1, "assistant", "assistant", blocks=[thinking, Block("text", "ok"), use], model=MODEL)
    failed = Message(2, "user", "tool_result", blocks=[Block("tool_result", "no", tool_id="toolu_1", is_error=True)])
    meta = Message(3, "meta", "bookkeeping", blocks=[Block("text", "title")])
    converted = rules.admit(reply) + rules.admit(failed) + rules.admit(meta)
    assert [m.raw_type for m in converted] == [
        "model.thinking-block-completed",
        "model.text-block-completed",
        "tool.requested",
        "tool.failed",
    ]
    assert [m.data["seq"] for m in converted] == [1, 2, 3, 4]
    assert converted[2].data["payload"] == {"toolUseId": "toolu_1"}


def test_khaelor_prune_is_a_context_pruned_event_that_leaves_the_placeholder() -> None:
    rules = rules_for(KhaelorStrategy(), None)
    log = Log()
    log.user()
    log.call("t1", chars=8_000)
    log.call("t2", chars=8_000)
    view = log.messages()
    before = rules.view_tokens(view)
    rules.apply_prune(view, ["t1"], Decision("khaelor", False, 0, None, prune=["t1"]))
    assert view[-1].raw_type == "context.pruned"
    assert view[-1].data["payload"]["toolUseIds"] == ["t1"]
    assert before - rules.view_tokens(view) == 2_000 - math.ceil(len(PRUNE_PLACEHOLDER) / 4)


def test_khaelor_compaction_keeps_the_prune_events_it_summarises() -> None:
    rules = rules_for(KhaelorStrategy(), None)
    log = Log()
    log.user()
    log.call("t1", chars=8_000)
    log.call("t2", chars=8_000)
    log.call("t3", chars=40)
    view = log.messages()
    rules.apply_prune(view, ["t1"], Decision("khaelor", False, 0, None, prune=["t1"]))
    view.append(log.messages()[-1])  # a later event after the prune
    origin: list[int | None] = list(range(len(view)))
    cut = Cut(1, len(view) - 1, first_kept=len(view) - 1)
    summary = rules.summary_message(view, cut)
    after, after_origin = rules.after_compaction(view, origin, cut, summary)
    assert [m.raw_type for m in after] == [
        "user.message-created",
        "context.pruned",
        "context.compacted",
        view[-1].raw_type,
    ]
    assert after_origin == [0, 7, None, 8]
    assert summary.data["seq"] == view[cut.end - 1].data["seq"]
