"""session_stats on hand-built records (no parser involved)."""

from __future__ import annotations

from compaction.stats import ListedEvent, MainAndSide, session_stats, tally_session
from compaction.transcript import MAIN, ApiCall, ContextEvent, LineError, Message, Record, Usage


def call_line(line: int, key: str, *, agent: str = MAIN, read: int = 10_000, out: int = 1) -> Message:
    return Message(
        line=line,
        role="assistant",
        kind="assistant",
        agent=agent,
        call_key=key,
        usage=Usage(input_tokens=2, cache_creation_input_tokens=100, cache_read_input_tokens=read, output_tokens=out),
    )


def test_empty_stream() -> None:
    data = session_stats([]).as_json()
    assert {key: data[key] for key in ("api_calls", "max_context", "peak", "events", "cost_usd")} == {
        "api_calls": {"main": 0, "side": 0},
        "max_context": {"main": 0, "side": 0},
        "peak": {"call": None, "tokens": 0},
        "events": [],
        "cost_usd": 0.0,
    }
    assert data["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_tokens": 0,
        "cache_creation_1h_tokens": 0,
        "cache_read_tokens": 0,
    }


def test_calls_are_deduplicated_per_agent_and_split_main_side() -> None:
    records: list[Record] = [
        call_line(1, "msg_a", read=50_000, out=3),
        call_line(2, "msg_a", read=50_000, out=900),  # same response, later line
        call_line(3, "msg_b", read=70_000),
        call_line(4, "msg_s1", agent="aac57f5", read=15_000),
        call_line(5, "msg_s1", agent="aac57f5", read=15_000),
        call_line(6, "msg_c", agent="acompact-946d2b", read=139_000),
        Message(line=7, role="assistant", kind="assistant", call_key="msg_synthetic", usage=None),
        Message(line=8, role="user", kind="prompt"),
        LineError(line=9, message="not valid JSON"),
    ]
    stats = session_stats(records).as_json()
    assert stats["api_calls"] == {"main": 2, "side": 2}
    assert stats["max_context"] == {"main": 2 + 100 + 70_000, "side": 2 + 100 + 139_000}
    # The headline peak is the main chain's: its largest context and the call (from 1) that sent it.
    assert stats["peak"] == {"call": 2, "tokens": 2 + 100 + 70_000}


def test_events_count_the_calls_of_their_own_agent_before_them() -> None:
    records: list[Record] = [
        call_line(1, "msg_a"),
        call_line(2, "msg_a"),
        call_line(3, "msg_b", read=20_000),
        call_line(4, "msg_side", agent="sidechain-aaaaaaaa"),  # side calls do not move a main event's after_call
        ContextEvent(kind="microcompact", line=5, trigger="auto", pre_tokens=60_888, tokens_saved=21_091),
        ContextEvent(kind="subagent_spawn", line=6, data={"tool_id": "toolu_1"}),  # not listed
        call_line(7, "msg_c", read=30_000),
        ContextEvent(kind="compaction", line=8, trigger="manual", pre_tokens=142_431),
        ContextEvent(kind="api_error", line=9, message="API Error: 500"),
        ContextEvent(kind="overflow", line=10, agent="aac57f5", message="prompt is too long"),
    ]
    listed = session_stats(records).as_json()["events"]
    assert [(e["kind"], e["after_call"], e["line"]) for e in listed] == [
        ("microcompact", 2, 5),
        ("compaction", 3, 8),
        ("api_error", 3, 9),
        ("overflow", 0, 10),  # aac57f5 made no call before it
    ]
    assert listed[0] == {
        "kind": "microcompact",
        "trigger": "auto",
        "pre_tokens": 60_888,
        "tokens_saved": 21_091,
        "after_call": 2,
        "agent": MAIN,
        "line": 5,
        "context_before": 2 + 100 + 20_000,  # call 2 (msg_b)
        "context_after": 2 + 100 + 30_000,  # call 3 (msg_c)
    }
    # After the last call there is no call after; an agent with no call has neither.
    assert [(e["context_before"], e["context_after"]) for e in listed[1:]] == [
        (2 + 100 + 30_000, None),
        (2 + 100 + 30_000, None),
        (None, None),
    ]
    assert listed[3]["agent"] == "aac57f5"


def event(kind: str, agent: str = MAIN) -> ListedEvent:
    return ListedEvent(kind=kind, agent=agent, trigger=None, pre_tokens=None, tokens_saved=None, after_call=0, line=1)


def test_flags_read_the_main_chain_events_in_order() -> None:
    rescued = tally_session(calls=[], events=[event("overflow"), event("compaction")])
    assert (
        rescued.has_compaction,
        rescued.overflowed(window=200_000),
        rescued.compaction_failed(agent_compacts=True),
    ) == (
        True,
        True,
        False,
    )
    failed = tally_session(calls=[], events=[event("compaction"), event("overflow"), event("overflow", agent="a1")])
    assert (failed.has_compaction, failed.compaction_failed(agent_compacts=True)) == (True, True)
    # An agent without compaction (klaude-code 2.7.0): an overflow is not a failed compaction.
    no_compaction = tally_session(calls=[], events=[event("overflow")])
    assert no_compaction.compaction_failed(agent_compacts=True)
    assert not no_compaction.compaction_failed(agent_compacts=False)
    side_only = tally_session(calls=[], events=[event("overflow", agent="a1"), event("compaction", agent="a1")])
    assert (
        side_only.has_compaction,
        side_only.overflowed(window=200_000),
        side_only.compaction_failed(agent_compacts=True),
    ) == (
        False,
        False,
        False,
    )


def test_a_main_context_beyond_the_window_is_an_overflow_without_any_event() -> None:
    calls = [
        ApiCall(agent=MAIN, number=1, key="k1", line=1, usage=Usage(input_tokens=210_000)),
        ApiCall(agent="a1", number=1, key="k2", line=2, usage=Usage(input_tokens=300_000)),
    ]
    stats = tally_session(calls=calls, events=[])
    assert stats.overflowed(window=200_000) and not stats.overflowed(window=1_000_000)
    assert stats.max_context == MainAndSide(main=210_000, side=300_000)
