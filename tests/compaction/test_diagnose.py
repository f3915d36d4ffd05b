"""Overflow diagnosis: units on hand-made sessions, and the three real-sample statements.

Real-sample numbers come from samples/claude-code/SOURCES.md, docs/formats/claude-code.md §7 and
samples/klaude-code/README.md.
"""

from __future__ import annotations

import dataclasses

import orjson

from compaction.calls import Peak
from compaction.chain import lay_out
from compaction.diagnose import (
    Crossing,
    SeriesPoint,
    cache_reading,
    compaction_failures,
    context_series,
    describe_arrivals,
    diagnose,
    estimator_drift,
    fired_compactions,
    growth_per_call,
    largest_contributors,
    report_notes,
    threshold_crossings,
    verdict,
)
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.prompt_cache import MICROCOMPACT_CAUSE
from compaction.strategies.base import Thresholds
from compaction.transcript import MAIN, ApiCall, Block, ContextEvent, Message, SessionInfo, Usage
from tests.compaction.diagnose_samples import KLAUDE_OVERFLOW, claude_sample
from tests.conftest import SHARED

CLAUDE_SAMPLES = SHARED / "samples" / "claude-code"
KHAELOR_SAMPLE = SHARED / "samples" / "khaelor" / "ledger-migration.events.jsonl"
MODEL = "claude-opus-4-5-20251101"
INFO = SessionInfo(format="claude-code", agent_version="2.1.88", model=MODEL)


# ----------------------------------------------------------------------------- fixtures


class Session:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.events: list[ContextEvent] = []

    def _line(self) -> int:
        return len(self.messages) + 1

    def prompt(self, text: str = "do it", *, minute: int = 0) -> Session:
        stamp = f"2026-01-01T10:{minute:02d}:00Z"
        self.messages.append(Message(self._line(), "user", "prompt", blocks=[Block("text", text)], timestamp=stamp))
        return self

    def call(
        self, context: int, *, read: int = 0, created: int = 0, minute: int = 0, results: tuple[str, ...] = ()
    ) -> Session:
        key = f"msg_{self._line()}"
        stamp = f"2026-01-01T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"
        usage = Usage(
            input_tokens=context - read - created,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=created,
            output_tokens=20,
        )
        self.messages.append(
            Message(
                self._line(),
                "assistant",
                "assistant",
                blocks=[Block("text", "ok")],
                model=MODEL,
                call_key=key,
                usage=usage,
                timestamp=stamp,
            )
        )
        for index, tool in enumerate(results):
            block = Block("tool_result", text="x" * 8_000, tool_id=f"{key}_{index}", tool_name=tool)
            self.messages.append(Message(self._line(), "user", "tool_result", blocks=[block], timestamp=stamp))
        return self

    def event(self, kind: str, **fields: object) -> Session:
        marker = Message(self._line(), "meta", "system", raw_type=f"system/{kind}")
        if kind == "compaction":
            marker.raw_type = "system/compact_boundary"
        self.messages.append(marker)
        self.events.append(ContextEvent(kind=kind, line=marker.line, **fields))  # type: ignore[arg-type]
        return self


# ----------------------------------------------------------------------------- units


def test_crossings_and_the_gap_before_a_compaction() -> None:
    # 2.1.88 on a 200K window: warning 147,000, autocompact 167,000, blocking 177,000 (compaction doc §1.1).
    session = Session().prompt().call(30_000).call(150_000, results=("Read", "Read", "Bash"))
    session.event("compaction", trigger="auto", pre_tokens=175_000)
    session.prompt("next").call(40_000)
    result = diagnose(session.messages, session.events, info=INFO)
    # The recorded point is call 2 itself; the compaction's preTokens measured the prompt of call 3.
    assert [(c.line, c.call, c.source) for c in result.crossings] == [
        ("warning", 2, "recorded usage"),
        ("autocompact", 3, "compaction preTokens"),
    ]
    compaction = result.compactions[0]
    assert compaction.gap == 175_000 - 150_000
    assert compaction.past_threshold == 175_000 - 167_000
    assert compaction.arrived_after_last_call == "3 tool results (Read ×2, Bash ×1) (24k characters)"
    assert "crossed the 167k autocompact threshold after call 2" in result.verdict
    assert "175,000 tokens, 8,000 past the threshold" in result.verdict
    assert result.needed_compaction and not result.overflowed


def test_contributors_are_ranked_by_size_within_the_fullest_segment() -> None:
    session = Session().prompt().call(10_000, results=("Bash",)).call(20_000, results=("Read", "Read"))
    session.call(40_000)
    result = diagnose(session.messages, [], info=INFO)
    assert [row.tool for row in result.contributors_by_tool] == ["Read", "Bash"]
    assert result.contributors_by_tool[0].chars == 16_000
    assert result.contributors_by_tool[0].tokens_estimate == 4_000
    # Everything the peak request (call 3) carried: prompt, two responses, three results; results first.
    assert len(result.contributors_by_message) == 6
    assert [row.kind for row in result.contributors_by_message[:3]] == ["tool_result"] * 3
    assert result.growth.largest_jumps[0].delta == 20_000
    assert "2 Read results" in result.growth.largest_jumps[0].arrived


def test_cache_miss_after_an_idle_gap_longer_than_five_minutes() -> None:
    session = Session().prompt()
    session.call(50_000, read=40_000, created=9_000, minute=0)
    session.call(51_000, read=49_000, created=1_000, minute=2)
    session.call(52_000, read=0, created=51_990, minute=20)  # 18 idle minutes: everything re-created
    result = diagnose(session.messages, [], info=INFO)
    assert result.cache.lifetime.minutes == 5
    [miss] = result.cache.misses
    assert miss.call == 3
    assert miss.recreated_tokens == 51_990
    assert "idle 18 min" in miss.cause


def test_the_lifetime_is_the_recorded_split_not_a_gap_that_seemed_to_keep_the_cache() -> None:
    session = Session().prompt()
    session.call(50_000, read=40_000, created=9_000, minute=0)
    session.call(51_000, read=49_000, created=1_000, minute=30)  # 30 idle minutes, cache still read
    result = diagnose(session.messages, [], info=INFO)
    assert result.cache.lifetime.minutes == 5  # no 1-hour write recorded (issue 36)
    assert result.cache.misses == []
    for message in session.messages:  # the same writes recorded as 1-hour ones
        if message.usage is not None:
            created = message.usage.cache_creation_input_tokens
            message.usage = dataclasses.replace(message.usage, cache_creation_1h_input_tokens=created)
    assert diagnose(session.messages, [], info=INFO).cache.lifetime.minutes == 60


def test_overflows_without_compaction_are_failures_and_three_open_the_breaker() -> None:
    session = Session().prompt().call(150_000)
    for _ in range(3):
        session.event("overflow", pre_tokens=205_000, message="prompt is too long: 205000 tokens > 200000 maximum")
    result = diagnose(session.messages, session.events, info=INFO)
    assert result.overflowed
    # Three identical failures are one row with a count.
    [failure] = result.failures
    assert (failure.followed_by, failure.repeats, failure.failed) == ("nothing", 3, True)
    assert any("Claude Code's circuit breaker" in note for note in result.notes)
    assert result.verdict.startswith("The prompt overflowed after call 1: 205,000 tokens")
    assert result.verdict.endswith("no compaction followed it.")


def test_nothing_to_compact_notice_is_a_failure() -> None:
    session = Session().prompt().call(20_000)
    session.messages.append(
        Message(9, "meta", "system", blocks=[Block("text", "Error: Not enough messages to compact.")])
    )
    result = diagnose(session.messages, [], info=INFO)
    assert [f.kind for f in result.failures] == ["nothing_to_compact"]


def test_given_calls_override_the_numbers_of_the_messages() -> None:
    session = Session().prompt().call(20_000).call(30_000)
    result = diagnose(session.messages, [], [ApiCall(MAIN, 2, "given-2", 0, Usage(input_tokens=190_000))], info=INFO)
    assert result.peak == Peak(call=2, tokens=190_000)
    assert result.as_json()["peak"] == {"call": 2, "tokens": 190_000}


def test_a_log_without_usage_says_what_it_cannot_answer() -> None:
    parser = KhaelorParser()
    with open(KHAELOR_SAMPLE, "rb") as handle:
        records = list(parser.parse(handle))
    messages = [r for r in records if isinstance(r, Message)]
    events = [r for r in records if isinstance(r, ContextEvent)]
    result = diagnose(messages, events, info=parser.info)
    assert not result.has_usage
    assert any("No usage is recorded" in note for note in result.notes)
    assert result.compactions  # the sample's context.compacted is still reported
    orjson.dumps(result.as_json())  # serialisable as is


def test_describe_arrivals_counts_prompts_and_results() -> None:
    session = Session().prompt("hello").call(1_000, results=("Grep",))
    assert describe_arrivals(session.messages) == "1 Grep result and 1 user message (8k characters)"
    assert describe_arrivals([]) == "nothing that reached the model"


# ----------------------------------------------------------------------------- sections

LINES = Thresholds(window=200_000, autocompact=167_000, warning=147_000, blocking=177_000, source="test lines")


def test_lay_out_keeps_the_main_chain_and_places_events_among_its_messages() -> None:
    session = Session().prompt().call(30_000)
    session.event("microcompact")
    session.call(31_000)
    session.messages.append(Message(99, "assistant", "assistant", agent="sub-1", blocks=[Block("text", "x")]))
    session.events.append(ContextEvent(kind="compaction", line=99, agent="sub-1", pre_tokens=1))
    chain = lay_out(session.messages, session.events, [ApiCall(MAIN, 2, "given-2", 0, Usage(input_tokens=90_000))])
    assert all(m.agent == "main" for m in chain.messages)
    assert [(p, e.kind) for p, e in chain.events] == [(2, "microcompact")]
    assert [(c.number, c.context) for c in chain.calls] == [(1, 30_000), (2, 90_000)]
    assert chain.count_before(2) == 1 and chain.last_call_before(2) is chain.calls[0]
    assert chain.after_call(2) == 1  # the microcompact lies after call 1
    assert (chain.count_before(0), chain.after_call(0), chain.last_call_before(0)) == (0, 0, None)
    assert (chain.count_before(4), chain.after_call(4)) == (2, 2)


def test_context_series_adds_the_sizes_compactions_and_overflows_reported() -> None:
    session = Session().prompt().call(150_000)
    session.event("overflow", pre_tokens=205_000)
    session.event("compaction", trigger="overflow", pre_tokens=204_000)
    session.event("compaction", trigger="manual")  # no preTokens: no point
    session.prompt().call(40_000)
    series = context_series(lay_out(session.messages, session.events))
    # A recorded point is its call; a reported size measured the prompt of the next call.
    assert [(p.call, p.tokens, p.source) for p in series] == [
        (1, 150_000, "recorded usage"),
        (2, 205_000, "overflow error"),
        (2, 204_000, "compaction preTokens"),
        (2, 40_000, "recorded usage"),
    ]


def test_a_line_is_crossed_again_after_the_series_fell_below_it() -> None:
    series = [
        SeriesPoint(0, 1, 150_000, "recorded usage"),
        SeriesPoint(1, 2, 40_000, "recorded usage"),
        SeriesPoint(2, 3, 148_000, "recorded usage"),
    ]
    no_lines = Thresholds(window=200_000)
    assert threshold_crossings(series, thresholds=no_lines) == []
    assert threshold_crossings(series, thresholds=LINES) == [
        Crossing("warning", 147_000, 1, 150_000, "recorded usage"),
        Crossing("warning", 147_000, 3, 148_000, "recorded usage"),
    ]


def test_contributors_count_only_what_follows_the_last_compaction_before_the_peak() -> None:
    session = Session().prompt().call(100_000, results=("Bash", "Bash"))
    session.event("compaction", trigger="auto", pre_tokens=170_000)
    session.prompt().call(30_000, results=("Read",)).call(60_000)
    chain = lay_out(session.messages, session.events)
    peak = SeriesPoint(position=8, call=3, tokens=60_000, source="recorded usage")
    found = largest_contributors(chain, peak=peak)
    assert [(t.tool, t.results, t.chars) for t in found.by_tool] == [("Read", 1, 8_000)]
    assert found.scope.from_seq == 5 and found.scope.to_call == 3 and found.scope.tokens == 60_000


def test_growth_skips_jumps_across_a_compaction_but_counts_them_in_the_median() -> None:
    session = Session().prompt().call(20_000, results=("Read",)).call(60_000)
    session.event("compaction", trigger="auto", pre_tokens=170_000)
    session.messages.append(Message(len(session.messages) + 1, "user", "compact_summary", blocks=[Block("text", "s")]))
    session.prompt().call(10_000)
    found = growth_per_call(lay_out(session.messages, session.events))
    assert found.calls == 3
    assert found.median_delta == (40_000 - 50_000) // 2
    assert [(j.call, j.from_context, j.to_context) for j in found.largest_jumps] == [(2, 20_000, 60_000)]
    assert [a.kind for a in found.largest_jumps[0].messages] == ["tool_result"]


def test_drift_divides_recorded_growth_by_the_estimate_of_what_arrived() -> None:
    session = Session().prompt().call(10_000, results=("Read",)).call(14_000)
    drift = estimator_drift(lay_out(session.messages, []))
    assert drift is not None
    # Between the calls: the first response ("ok", 1 token) and an 8,000-char result (2,000 tokens).
    assert (drift.recorded_growth, drift.estimated_growth) == (4_000, 2_001)
    assert drift.recorded_per_estimated_token == round(4_000 / 2_001, 3)
    assert estimator_drift(lay_out(Session().prompt().messages, [])) is None


def test_a_compaction_before_any_call_counts_what_arrived_since_the_session_start() -> None:
    session = Session().prompt("x" * 4_000)
    session.event("compaction", trigger="manual", pre_tokens=1_500)
    session.prompt().call(50_000)  # the peak lies after the compaction, in the next stretch of history
    [row] = fired_compactions(lay_out(session.messages, session.events), thresholds=LINES)
    assert row.last_call is None and row.gap is None
    assert row.arrived_after_last_call == "1 user message (4k characters)"
    assert row.past_threshold == 1_500 - 167_000


def test_failures_say_what_followed_each_error() -> None:
    session = Session().prompt().call(100_000)
    session.event("api_error", message="overloaded")
    session.call(101_000)
    session.event("overflow", pre_tokens=210_000)
    session.event("compaction", trigger="overflow", pre_tokens=209_000)
    session.call(50_000)
    found = compaction_failures(lay_out(session.messages, session.events))
    assert [(f.kind, f.after_call, f.followed_by, f.compaction_trigger, f.failed) for f in found.rows] == [
        ("api_error", 1, "call", None, False),
        ("overflow", 2, "compaction", "overflow", False),
    ]
    assert found.breaker_call is None


def test_the_diagnosis_cache_names_a_microcompact_between_the_calls() -> None:
    session = Session().prompt().call(150_000, read=149_000, minute=0)
    session.event("microcompact", tokens_saved=20_000)
    session.call(130_000, read=19_000, created=110_000, minute=1)
    reading = cache_reading(lay_out(session.messages, session.events))
    assert [(m.call, m.cause) for m in reading.misses] == [(2, MICROCOMPACT_CAUSE)]


def test_notes_and_verdict_of_a_log_without_usage() -> None:
    chain = lay_out(Session().prompt().messages, [])
    assumed = Thresholds(window=200_000, source="a guess", assumption=True)
    found = report_notes(chain, thresholds=assumed, breaker_call=4, agent="Claude Code", breaker=3)
    assert found[0].startswith("No usage is recorded")
    assert found[1] == "Thresholds are partly assumed: a guess"
    assert found[2].startswith("3 consecutive overflows without a compaction by call 4")
    assert verdict(chain, thresholds=assumed, peak=None, compactions=[], failures=[]).startswith(
        "No usage is recorded, so the log cannot show how full the window got"
    )


def test_a_manual_compaction_alone_means_no_automatic_compaction_was_needed() -> None:
    session = Session().prompt().call(90_000)
    session.event("compaction", trigger="manual", pre_tokens=91_000)
    chain = lay_out(session.messages, session.events)
    rows = fired_compactions(chain, thresholds=LINES)
    assert verdict(chain, thresholds=LINES, peak=None, compactions=rows, failures=[]) == (
        "A manual compaction ran after call 1 at 91,000 tokens; no automatic compaction was needed."
    )


def test_the_json_twin_keeps_its_field_names() -> None:
    session = Session().prompt().call(10_000, results=("Read",)).call(20_000)
    data = orjson.loads(orjson.dumps(diagnose(session.messages, [], info=INFO).as_json()))
    [jump] = data["growth"]["largest_jumps"]
    assert set(jump) == {"call", "from", "to", "delta", "arrived", "messages"}
    assert (jump["from"], jump["to"]) == (10_000, 20_000)
    assert set(data["cache"]) == {"ttl_minutes", "ttl_source", "misses", "recreated_tokens"}
    assert data["drift"]["recorded_growth"] == 10_000
    assert data["thresholds"]["window"] == 200_000


# ----------------------------------------------------------------------------- real samples


def test_f9f6_compaction_gap_is_tool_output_after_the_last_call() -> None:
    # docs/formats/claude-code.md §7: preTokens 176,700 vs last context 150,210, "nine parallel tool
    # results (~110 k chars) arrived after the last call".
    messages, events, info = claude_sample("entirecli_f9f6f611b469-0_full.jsonl")
    result = diagnose(messages, events, info=info)
    [compaction] = result.compactions
    assert (compaction.pre_tokens, compaction.last_context) == (176_700, 150_210)
    assert compaction.gap == 176_700 - 150_210
    arrived = compaction.arrived
    assert arrived and all(row.kind == "tool_result" for row in arrived)
    assert "tool result" in compaction.arrived_after_last_call or "Bash result" in compaction.arrived_after_last_call
    chars = int(compaction.arrived_after_last_call.rsplit("(", 1)[1].split("k")[0]) * 1000
    assert 90_000 <= chars <= 120_000
    assert "176,700" in result.verdict and "150,210" in result.verdict
    assert result.verdict.startswith("Context crossed the 155k autocompact threshold")


def test_entireskills_1m_session_never_needed_compaction() -> None:
    messages, events, info = claude_sample("entireskills_4982335ad847-0_raw_transcript.jsonl")
    result = diagnose(messages, events, info=info)
    assert result.is_1m_window
    assert result.peak.tokens == 325_602  # SOURCES.md max context main
    # The headline peak names the first main-chain call that recorded that context.
    contexts = [(c.number, c.context) for c in lay_out(messages, events).calls]
    assert result.peak.call == next(call for call, context in contexts if context == 325_602)
    assert not result.needed_compaction
    assert not result.overflowed
    assert result.compactions == []
    assert "never needed compaction" in result.verdict
    assert "1M" in result.verdict


def test_klaude_overflow_is_an_overflow_error_followed_by_an_overflow_compaction() -> None:
    parser, records = parse_session(KLAUDE_OVERFLOW)
    messages = history_messages(records)
    events = [r for r in records if isinstance(r, ContextEvent)]
    result = diagnose(messages, events, info=parser.info)
    assert result.overflowed
    [failure] = [f for f in result.failures if f.kind == "overflow"]
    assert failure.tokens == 229_975  # README: "prompt is too long: 229975 tokens > 200000 maximum"
    assert failure.followed_by == "compaction"
    assert failure.compaction_trigger == "overflow"
    assert not failure.failed
    [compaction] = result.compactions
    assert compaction.trigger == "overflow"
    assert compaction.pre_tokens == 168_538  # README: tokens_before 168538
    assert "4 Read results" in compaction.arrived_after_last_call
    assert "overflowed" in result.verdict and "overflow compaction followed" in result.verdict


def test_compactions_that_leave_little_room_and_a_line_close_to_the_window() -> None:
    # 2.1.88 on a 200K window: autocompact at 167,000, so 33,000 tokens between the line and the window.
    session = Session().prompt().call(160_000)
    session.event("compaction", trigger="auto", pre_tokens=168_000)
    session.call(150_000)  # 90% of the line right after compacting
    session.event("compaction", trigger="auto", pre_tokens=168_000)
    session.call(60_000).call(100_000)  # one turn of 40,000 tokens: more than the 33,000 of room
    result = diagnose(session.messages, session.events, info=INFO)
    timing = [r for r in result.recommendations if r.kind == "compaction_timing"]
    assert [r.title for r in timing] == [
        "Compactions that leave little room",
        "The compaction line is close to the window",
    ]
    assert "still 150,000 tokens (90% of the 167,000 line)" in timing[0].finding
    assert "a compaction loop" in timing[0].finding
    assert "40,000 tokens (call 4)" in timing[1].finding and "33,000 tokens between" in timing[1].finding


def test_a_refusal_notice_counts_only_in_the_words_of_the_sessions_own_agent() -> None:
    """Each strategy declares the texts its agent writes when a compaction could not run: Claude Code's words in a
    klaude-code session are quoted text, not a klaude refusal, and klaude's own words are one."""
    klaude = SessionInfo(format="klaude-code", agent_version="2.8.1", model=MODEL)
    for text, failures in (
        ("Error: Not enough messages to compact.", []),
        ("Nothing to compact (session too small)", ["nothing_to_compact"]),
    ):
        session = Session().prompt().call(20_000)
        session.messages.append(Message(9, "meta", "system", blocks=[Block("text", text)]))
        result = diagnose(session.messages, [], info=klaude)
        assert [f.kind for f in result.failures] == failures, text
