"""What filled the context, on small hand-made sessions whose every number is known."""

from __future__ import annotations

from compaction.composition import (
    BASELINE_PART,
    EARLIER_PART,
    REATTACHED_PART,
    PlacedEvent,
    composition,
    infer_unlogged,
)
from compaction.transcript import Block, ContextEvent, Message


def prompt(text: str = "fix the bug", **data: object) -> Message:
    return Message(line=0, role="user", kind="prompt", blocks=[Block("text", text)], data=dict(data))


def tool_call(tool_id: str, name: str, **data: object) -> Message:
    block = Block("tool_use", '{"path": "x"}', tool_id=tool_id, tool_name=name)
    return Message(line=0, role="assistant", kind="assistant", blocks=[block], data=dict(data))


def tool_result(tool_id: str, name: str, **data: object) -> Message:
    block = Block("tool_result", "output " * 50, tool_id=tool_id, tool_name=name)
    return Message(line=0, role="user", kind="tool_result", blocks=[block], data=dict(data))


def marker() -> Message:
    """A boundary record: it carries an event and never reaches the model."""
    return Message(line=0, role="meta", kind="system")


def summary(**data: object) -> Message:
    return Message(line=0, role="user", kind="compact_summary", blocks=[Block("text", "summary")], data=dict(data))


def split(messages, tokens, events, calls, *, at):
    """The composition of the ``at``-th call of ``calls`` [(first position, recorded context)]."""
    inferred = infer_unlogged(messages, tokens, events, calls)
    first, recorded = calls[at]
    return composition(
        messages, tokens=tokens, events=events, inferred=inferred, call=at, first=first, recorded=recorded
    )


def rows(result) -> dict[str, int]:
    return {p.part: p.tokens for p in result.parts}


# A session with a system prompt of 1,000 tokens: two tool calls, a microcompact that clears the Read
# result (500 tokens), then a compaction whose next request carries 50 re-attached tokens. The recorded
# numbers are what that request would weigh if our estimates were exact.
MESSAGES = [
    prompt(),  # 0: 10
    tool_call("t1", "Read"),  # 1: call 0, 10
    tool_result("t1", "Read"),  # 2: 500
    tool_call("t2", "Bash"),  # 3: call 1, 10
    tool_result("t2", "Bash"),  # 4: 300
    marker(),  # 5: the microcompact boundary
    tool_call("t3", "Bash"),  # 6: call 2, 10
    marker(),  # 7: the compaction boundary
    summary(),  # 8: 40
    tool_call("t4", "Read"),  # 9: call 3
]
TOKENS = [10, 10, 500, 10, 300, 0, 10, 0, 40, 10]
EVENTS = [
    PlacedEvent(5, ContextEvent(kind="microcompact", line=0, tool_ids=["t1"], tokens_saved=480)),
    PlacedEvent(7, ContextEvent(kind="compaction", line=0)),
]
CALLS = [(1, 1_010), (3, 1_520), (6, 1_330), (9, 1_090)]


def test_cleared_results_are_not_counted_and_the_parts_add_up():
    before = split(MESSAGES, TOKENS, EVENTS, CALLS, at=1)
    after = split(MESSAGES, TOKENS, EVENTS, CALLS, at=2)
    assert rows(before) == {BASELINE_PART: 1_000, "tool results: Read": 500, "tool calls": 10, "user text": 10}
    # The Read result was cleared: gone from the split, and the recorded drop is not pinned on anything else.
    assert rows(after) == {BASELINE_PART: 1_000, "tool results: Bash": 300, "tool calls": 20, "user text": 10}
    assert after.cleared_results == 1 and after.cleared_not_in_log == 0
    assert all(
        sum(p.tokens for p in split(MESSAGES, TOKENS, EVENTS, CALLS, at=n).parts) == CALLS[n][1] for n in range(4)
    )


def test_the_system_prompt_row_is_the_same_at_every_call():
    baselines = {rows(split(MESSAGES, TOKENS, EVENTS, CALLS, at=n)).get(BASELINE_PART) for n in range(4)}
    assert baselines == {1_000}


def test_compacted_history_is_gone_and_what_was_reattached_is_inferred():
    after = split(MESSAGES, TOKENS, EVENTS, CALLS, at=3)
    assert rows(after) == {BASELINE_PART: 1_000, REATTACHED_PART: 50, "compaction summary": 40}
    assert after.compacted_records == 6  # every record before the boundary that reached the model


def test_recorded_numbers_win_over_estimates_the_split_is_scaled_and_marked_estimated():
    # The agent's tokenizer counts the conversation twice as heavy as our estimate.
    doubled = [(1, 1_020), (3, 2_040)]
    result = split(MESSAGES[:4], TOKENS[:4], [], doubled, at=1)
    assert result.scale == 2.0 and not result.estimated
    assert rows(result) == {BASELINE_PART: 1_000, "tool results: Read": 1_000, "tool calls": 20, "user text": 20}
    assert all(p.estimated for p in result.parts)


def test_a_log_that_starts_mid_session_keeps_the_earlier_history_in_its_own_row():
    # 5,000 tokens of history before the first line; a microcompact clears 2,000 of them (ids not in the log).
    messages = [prompt(), tool_call("t1", "Read"), tool_result("t1", "Read"), marker(), tool_call("t2", "Read")]
    tokens = [10, 10, 500, 0, 10]
    events = [PlacedEvent(3, ContextEvent(kind="microcompact", line=0, tool_ids=["old1", "old2"], tokens_saved=2_000))]
    calls = [(1, 6_010), (4, 4_520)]
    # No compaction shows the system prompt alone, so the inferred row holds the earlier history too and
    # the clearing comes out of it (said in a note) rather than out of the results the log holds.
    start, later = (split(messages, tokens, events, calls, at=n) for n in range(2))
    assert rows(start) == {BASELINE_PART: 6_000, "user text": 10}
    assert later.cleared_not_in_log == 2 and later.notes
    assert rows(later) == {BASELINE_PART: 4_000, "tool results: Read": 500, "tool calls": 10, "user text": 10}


def test_earlier_history_row_when_a_later_segment_shows_the_baseline():
    messages = [prompt(), tool_call("t1", "Read"), marker(), summary(), tool_call("t2", "Read")]
    tokens = [10, 10, 0, 40, 10]
    events = [PlacedEvent(2, ContextEvent(kind="compaction", line=0))]
    calls = [(1, 5_010), (4, 1_040)]
    first, second = (split(messages, tokens, events, calls, at=n) for n in range(2))
    assert rows(first) == {BASELINE_PART: 1_000, EARLIER_PART: 4_000, "user text": 10}
    assert rows(second) == {BASELINE_PART: 1_000, "compaction summary": 40}


def test_a_klaude_compaction_keeps_its_first_kept_index_onwards_without_leading_tool_results():
    messages = [
        prompt(index=0),
        tool_call("t1", "Read", index=1),
        tool_result("t1", "Read", index=2),
        tool_call("t2", "Bash", index=3),
        tool_result("t2", "Bash", index=4),
        summary(index=5, first_kept_index=2),
        tool_call("t3", "Bash", index=6),
    ]
    tokens = [10, 10, 500, 10, 300, 40, 10]
    # klaude's CompactionEntry is itself the summary record: the event sits on it, so it is not before it.
    events = [PlacedEvent(5, ContextEvent(kind="compaction", line=0, data={"first_kept_index": 2}))]
    result = split(messages, tokens, events, [(1, 1_010), (6, 1_350)], at=1)
    assert rows(result) == {BASELINE_PART: 1_000, "tool results: Bash": 300, "compaction summary": 40, "tool calls": 10}


def test_a_khaelor_compaction_replaces_only_its_cut():
    messages = [
        prompt(seq=1),
        tool_call("t1", "read_file", seq=2),
        tool_result("t1", "read_file", seq=3),
        tool_call("t2", "bash", seq=4),
        tool_result("t2", "bash", seq=5),
        summary(seq=6),
        tool_call("t3", "bash", seq=7),
    ]
    tokens = [10, 10, 500, 10, 300, 40, 10]
    cut = {"cut": {"fromSeq": 2, "toSeq": 3}}
    events = [PlacedEvent(5, ContextEvent(kind="compaction", line=0, data=cut))]
    # KHAELOR records no usage: the context is the estimate of what the model still saw.
    result = split(messages, tokens, events, [(1, None), (6, None)], at=1)
    assert result.estimated and result.context == 10 + 10 + 300 + 40
    assert rows(result) == {"tool results: bash": 300, "compaction summary": 40, "tool calls": 10, "user text": 10}


def test_a_prune_clears_like_a_microcompact():
    events = [PlacedEvent(5, ContextEvent(kind="prune", line=0, tool_ids=["t2"]))]
    result = split(MESSAGES[:7], TOKENS[:7], events, [(1, None), (6, None)], at=1)
    assert "tool results: Bash" not in rows(result) and rows(result)["tool results: Read"] == 500
    assert result.cleared_results == 1


def test_a_clearing_without_tool_ids_is_said_to_make_the_split_rougher():
    events = [PlacedEvent(5, ContextEvent(kind="microcompact", line=0, tokens_saved=480))]
    calls = [(1, 1_010), (3, 1_520), (6, 1_330)]
    result = split(MESSAGES[:7], TOKENS[:7], events, calls, at=2)
    assert any("no tool ids" in note for note in result.notes)
    # The Read result cannot be told apart, so it stays, scaled down with the rest to the recorded total.
    assert sum(rows(result).values()) == 1_330 and rows(result)["tool results: Read"] < 500
