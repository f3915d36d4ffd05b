"""Overflow diagnosis: units on hand-made sessions, and the three real-sample statements.

Real-sample numbers come from samples/claude-code/SOURCES.md, docs/formats/claude-code.md §7 and
samples/klaude-code/README.md.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import orjson

from compaction.diagnose import CallPoint, describe_arrivals, diagnose
from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.transcript import Block, ContextEvent, Message, SessionInfo, Usage

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CLAUDE_SAMPLES = SHARED / "samples" / "claude-code"
KLAUDE_OVERFLOW = (
    SHARED
    / "samples"
    / "klaude-code"
    / "dot-klaude"
    / "projects"
    / "home-dev-projects-webapp"
    / "sessions"
    / "e403978267e543c9ae7335a01662e2ce"
)
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
    assert [(c.line, c.call, c.source) for c in result.crossings] == [
        ("warning", 1, "recorded usage"),
        ("autocompact", 2, "compaction preTokens"),
    ]
    compaction = result.compactions[0]
    assert compaction.gap == 175_000 - 150_000
    assert compaction.past_threshold == 175_000 - 167_000
    assert compaction.arrived_after_last_call == "3 tool results (Read ×2, Bash ×1) (24k characters)"
    assert "crossed the 167k autocompact threshold before call 2" in result.verdict
    assert "175,000 tokens, 8,000 past the threshold" in result.verdict
    assert result.needed_compaction and not result.overflowed


def test_contributors_are_ranked_by_size_within_the_fullest_segment() -> None:
    session = Session().prompt().call(10_000, results=("Bash",)).call(20_000, results=("Read", "Read"))
    session.call(40_000)
    result = diagnose(session.messages, [], info=INFO)
    assert [row.tool for row in result.contributors_by_tool] == ["Read", "Bash"]
    assert result.contributors_by_tool[0].chars == 16_000
    assert result.contributors_by_tool[0].tokens_estimate == 4_000
    # Everything the peak request (call 2) carried: prompt, two responses, three results; results first.
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
    assert miss.call == 2
    assert miss.recreated_tokens == 51_990
    assert "idle 18 min" in miss.cause


def test_a_gap_that_keeps_the_cache_means_one_hour_cache_writes() -> None:
    session = Session().prompt()
    session.call(50_000, read=40_000, created=9_000, minute=0)
    session.call(51_000, read=49_000, created=1_000, minute=30)  # 30 idle minutes, cache still read
    result = diagnose(session.messages, [], info=INFO)
    assert result.cache.lifetime.minutes == 60
    assert result.cache.misses == []


def test_overflows_without_compaction_are_failures_and_three_open_the_breaker() -> None:
    session = Session().prompt().call(150_000)
    for _ in range(3):
        session.event("overflow", pre_tokens=205_000, message="prompt is too long: 205000 tokens > 200000 maximum")
    result = diagnose(session.messages, session.events, info=INFO)
    assert result.overflowed
    assert [f.followed_by for f in result.failures] == ["nothing"] * 3
    assert all(f.failed for f in result.failures)
    assert any("circuit breaker" in note for note in result.notes)
    assert result.verdict.startswith("The prompt overflowed before call 1: 205,000 tokens")
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
    result = diagnose(session.messages, [], [CallPoint(index=1, context=190_000)], info=INFO)
    assert result.peak == 190_000
    assert result.peak_call == 1


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


# ----------------------------------------------------------------------------- real samples


@cache
def claude_sample(name: str) -> tuple[list[Message], list[ContextEvent], SessionInfo]:
    parser = ClaudeCodeParser()
    with open(CLAUDE_SAMPLES / name, "rb") as handle:
        records = list(parser.parse(handle))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    return messages, [r for r in records if isinstance(r, ContextEvent)], parser.info


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
    assert result.peak == 325_602  # SOURCES.md max context main
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
