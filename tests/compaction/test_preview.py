"""The one preview: a point is a call, a hand cut changes the numbers, a refused cut is never applied."""

from __future__ import annotations

import pytest

from compaction.formats.khaelor import MODEL_TEXT_BLOCK, USER_MESSAGE
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.preview import PreviewError, plan_preview
from compaction.replay import after_calls, api_steps, position_after_call
from compaction.strategies.claude_code import ClaudeCodeParams, ClaudeCodeStrategy
from compaction.strategies.khaelor import KhaelorStrategy
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from compaction.transcript import Block, Message, SessionInfo, Usage
from tests.conftest import SHARED

KLAUDE_COMPACTED = (
    SHARED
    / "samples"
    / "klaude-code"
    / "dot-klaude"
    / "projects"
    / "home-dev-projects-webapp"
    / "sessions"
    / "bd8ec9a1f80345edbd7c9ec7081ab44d"
)


def _session(calls: int, *, context_step: int = 10_000, result_chars: int = 4_000) -> list[Message]:
    """A prompt, then ``calls`` calls that each run a Read whose result answers it."""
    messages = [Message(1, "user", "prompt", blocks=[Block("text", "start")], data={"version": "2.1.88"})]
    for n in range(calls):
        tool_id = f"t{n}"
        messages.append(
            Message(
                len(messages) + 1,
                "assistant",
                "assistant",
                blocks=[Block("tool_use", "", tool_id=tool_id, tool_name="Read", tool_input={"file_path": f"/f{n}"})],
                model="claude-sonnet-4-5",
                usage=Usage(input_tokens=context_step * (n + 1), output_tokens=20),
                call_key=f"msg_{n}",
                data={"version": "2.1.88"},
            )
        )
        messages.append(
            Message(
                len(messages) + 1,
                "user",
                "tool_result",
                blocks=[Block("tool_result", "r" * result_chars, tool_id=tool_id, tool_name="Read")],
            )
        )
    return messages


def _strategy() -> ClaudeCodeStrategy:
    return ClaudeCodeStrategy(ClaudeCodeParams(model="claude-sonnet-4-5", version="2.1.88"))


def test_a_point_is_after_a_call_with_its_results() -> None:
    messages = _session(5)
    points = after_calls(messages)
    assert [p.call for p in points] == [1, 2, 3, 4, 5]
    for point in points:
        assert point.position == position_after_call(messages, point.call)
    plan = plan_preview(messages, strategy=_strategy(), after_call=3)
    # Call 3 is the 3rd assistant record (position 5); its result follows at 6; call 4 starts at 7.
    assert plan.at == 7
    assert plan.messages[-1].kind == "tool_result"
    assert plan.after_call == 3
    assert plan.as_json()["after_call"] == 3
    # Without a point, the preview stands after the last call.
    assert plan_preview(messages, strategy=_strategy()).after_call == 5


def test_unknown_call_is_a_clear_error() -> None:
    with pytest.raises(PreviewError, match="call 9 does not exist: the main chain has calls 1 to 5"):
        plan_preview(_session(5), strategy=_strategy(), after_call=9)
    with pytest.raises(PreviewError, match="call 0 does not exist: the main chain has calls 1 to 5"):
        plan_preview(_session(5), strategy=_strategy(), after_call=0)


def test_a_hand_cut_changes_tokens_after() -> None:
    messages = _session(6)
    auto = plan_preview(messages, strategy=_strategy())
    assert auto.cut is not None and not auto.by_hand
    hand = plan_preview(messages, strategy=_strategy(), cut_end=3)
    assert hand.by_hand and not hand.refused
    assert hand.cut is not None and hand.cut.end == position_after_call(messages, 3)
    assert hand.tokens_before == auto.tokens_before
    assert hand.tokens_after_estimate != auto.tokens_after_estimate
    # What the hand cut summarises leaves the context: exactly the strategy's estimate of it.
    summarised = sum(hand.estimates[hand.cut.start : hand.cut.end])
    assert hand.tokens_after_estimate == hand.tokens_before - summarised
    assert hand.as_json()["cut"]["to_after_call"] == 3
    assert hand.as_json()["cut"]["by_hand"] is True


def test_start_not_before_end_is_refused_and_not_applied() -> None:
    plan = plan_preview(_session(6), strategy=_strategy(), cut_start=4, cut_end=2)
    assert plan.refused.startswith("the cut must start before it ends")
    assert "cut_start 4 is not before cut_end 2" in plan.refused
    assert plan.applied_cut is None
    assert not plan.runnable and plan.summarizer.requests == []
    assert plan.tokens_after_estimate == plan.tokens_before  # nothing was cut
    data = plan.as_json()
    assert data["cut"]["refused"] == plan.refused and data["runnable"] is False


def test_a_cut_the_strategy_refuses_is_reported_not_applied() -> None:
    # klaude summarises from the previous compaction's first kept item (0 here), never from a later item.
    messages, info = _klaude()
    strategy = KlaudeCodeStrategy.for_limit(info.context_window)
    calls = [p.call for p in after_calls(messages)]
    plan = plan_preview(messages, strategy=strategy, cut_start=calls[1], cut_end=calls[3])
    assert plan.refused.startswith("klaude summarises from the previous compaction's first kept item")
    assert plan.applied_cut is None and not plan.runnable


def _klaude() -> tuple[list[Message], SessionInfo]:
    parser, records = parse_session(KLAUDE_COMPACTED)
    return history_messages(records), parser.info


def test_klaude_preview_before_its_recorded_compaction_reproduces_its_cut() -> None:
    messages, info = _klaude()
    entry_position = next(i for i, m in enumerate(messages) if m.raw_type == "CompactionEntry")
    entry = messages[entry_position].data["item"]
    last_call = [s for s in api_steps(messages) if s.end <= entry_position][-1].number
    plan = plan_preview(messages, strategy=KlaudeCodeStrategy.for_limit(info.context_window), after_call=last_call)
    assert plan.at == entry_position
    assert plan.cut is not None
    assert plan.cut.first_kept == entry["first_kept_index"]
    assert plan.decision.should_compact
    assert plan.transcript and plan.runnable


def _khaelor_log(usage_at: dict[int, int]) -> list[Message]:
    """A KHAELOR-shaped view: user message, then model text / usage events (seq order)."""
    messages: list[Message] = []
    seq = 0

    def add(message: Message) -> None:
        nonlocal seq
        seq += 1
        message.data.setdefault("seq", seq)
        messages.append(message)

    add(Message(1, "user", "prompt", blocks=[Block("text", "hello " * 50)], raw_type=USER_MESSAGE, data={}))
    for n in range(6):
        add(
            Message(
                len(messages) + 1,
                "assistant",
                "assistant",
                blocks=[Block("text", "answer " * 100)],
                raw_type=MODEL_TEXT_BLOCK,
                data={},
                usage=Usage(input_tokens=usage_at[n], output_tokens=50) if n in usage_at else None,
                call_key=f"c{n}" if n in usage_at else None,
            )
        )
        add(Message(len(messages) + 1, "user", "prompt", blocks=[Block("text", "more " * 20)], raw_type=USER_MESSAGE))
    return messages


def test_khaelor_preview_reports_the_real_context_at_any_call() -> None:
    recorded = {n: 150_000 + 1_000 * n for n in range(6)}  # the n-th model record (from 0) is call n + 1
    messages = _khaelor_log(recorded)
    strategy = KhaelorStrategy()
    for n in range(6):
        plan = plan_preview(messages, strategy=strategy, after_call=n + 1)
        assert plan.after_call == n + 1
        after = [
            m for m in plan.messages[plan.messages.index(next(m for m in plan.messages if m.call_key == f"c{n}")) + 1 :]
        ]
        since = sum(strategy.estimate(m) for m in after)
        assert plan.tokens_before == recorded[n] + 50 + since
        assert plan.tokens_before > 150_000


def test_khaelor_without_usage_counts_its_estimate() -> None:
    messages = _khaelor_log({})
    plan = plan_preview(messages, strategy=KhaelorStrategy())
    assert plan.tokens_before == KhaelorStrategy().context_estimate(messages) > 0
