"""KHAELOR event log → neutral model (docs/formats/khaelor.md)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from compaction.formats.khaelor import FORMAT, KhaelorParser
from compaction.transcript import ContextEvent, LineError, Message, Record
from tests.conftest import SHARED

SAMPLE = SHARED / "samples" / "khaelor" / "ledger-migration.events.jsonl"


def lines_of(*events: dict[str, Any] | bytes) -> list[bytes]:
    return [e if isinstance(e, bytes) else orjson.dumps(e) + b"\n" for e in events]


def parse(lines: list[bytes], **kwargs: Any) -> tuple[KhaelorParser, list[Record]]:
    parser = KhaelorParser(**kwargs)
    return parser, list(parser.parse(lines))


def messages(records: list[Record]) -> list[Message]:
    return [r for r in records if isinstance(r, Message)]


def events(records: list[Record]) -> list[ContextEvent]:
    return [r for r in records if isinstance(r, ContextEvent)]


def errors(records: list[Record]) -> list[LineError]:
    return [r for r in records if isinstance(r, LineError)]


def ev(seq: int, type_: str, **payload: Any) -> dict[str, Any]:
    return {"seq": seq, "type": type_, "ts": f"2026-10-02T09:00:{seq:02d}.000Z", "payload": payload}


# ───────────────────────────── the real sample ─────────────────────────────


def sample_events() -> list[dict[str, Any]]:
    with SAMPLE.open("rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_the_sample_imports_without_errors_one_message_per_line() -> None:
    with SAMPLE.open("rb") as f:
        parser = KhaelorParser()
        records = list(parser.parse(f))
    raw = sample_events()
    assert errors(records) == []
    assert [m.data["seq"] for m in messages(records)] == [e["seq"] for e in raw]
    assert [m.raw_type for m in messages(records)] == [e["type"] for e in raw]
    assert "partial_last_line" not in parser.info.data


def test_the_sample_prunes_and_compactions_appear_as_events() -> None:
    with SAMPLE.open("rb") as f:
        records = list(KhaelorParser().parse(f))
    raw = sample_events()
    pruned = [e for e in raw if e["type"] == "context.pruned"]
    compacted = [e for e in raw if e["type"] == "context.compacted"]
    assert pruned and compacted  # the sample has both (docs/formats/khaelor.md)

    prunes = [e for e in events(records) if e.kind == "prune"]
    assert [p.tool_ids for p in prunes] == [e["payload"]["toolUseIds"] for e in pruned]
    assert [p.tokens_saved for p in prunes] == [e["payload"]["tokensReclaimedEstimate"] for e in pruned]
    assert [p.data["placeholder"] for p in prunes] == [e["payload"]["placeholder"] for e in pruned]

    compactions = [e for e in events(records) if e.kind == "compaction"]
    assert [c.trigger for c in compactions] == [e["payload"]["trigger"] for e in compacted]
    assert [c.pre_tokens for c in compactions] == [e["payload"]["tokensBefore"] for e in compacted]
    assert [c.data["cut"] for c in compactions] == [e["payload"]["cut"] for e in compacted]
    assert [c.data["checkpointYaml"] for c in compactions] == [e["payload"]["checkpointYaml"] for e in compacted]
    assert [c.data["summaryModel"] for c in compactions] == [e["payload"]["summaryModel"] for e in compacted]
    # Events sit on the line of the event that caused them.
    assert [c.line for c in compactions] == [e["seq"] for e in compacted]


def test_the_sample_session_info_comes_from_session_started() -> None:
    with SAMPLE.open("rb") as f:
        parser = KhaelorParser()
        list(parser.parse(f))
    raw = sample_events()
    started = next(e for e in raw if e["type"] == "session.started")
    info = parser.info
    assert info.format == FORMAT == "khaelor"
    assert info.session_id == started["sessionId"]
    assert info.model == started["payload"]["model"]
    assert info.context_window == started["payload"]["contextWindow"]
    first_prompt = next(e for e in raw if e["type"] == "user.message-created")["payload"]["text"]
    assert info.title == first_prompt.splitlines()[0]  # titled by its first prompt, not its id
    assert info.cwd == started["payload"]["cwd"]
    assert info.data["aux_model"] == started["payload"]["auxModel"]
    assert info.started_at == raw[0]["ts"]
    assert info.ended_at == raw[-1]["ts"]


# ───────────────────────────── mapping of event types ─────────────────────────────


def test_conversation_events_map_to_roles_kinds_and_blocks() -> None:
    _, records = parse(
        lines_of(
            ev(1, "user.message-created", text="do it"),
            ev(2, "model.thinking-block-completed", thinking="hmm"),
            ev(3, "model.text-block-completed", text="on it"),
            ev(4, "tool.requested", toolUseId="t1", name="bash", input={"command": "ls -l"}),
            ev(5, "tool.completed", toolUseId="t1", modelText="a\nb"),
            ev(6, "tool.requested", toolUseId="t2", name="bash", input={"command": "false"}),
            ev(7, "tool.failed", toolUseId="t2", modelText="exit 1"),
            ev(8, "tool.requested", toolUseId="t3", name="read_file", input={"path": "x"}),
            ev(9, "tool.cancelled", toolUseId="t3", modelText="[cancelled by user]"),
        )
    )
    got = messages(records)
    assert [(m.role, m.kind) for m in got] == [
        ("user", "prompt"),
        ("assistant", "assistant"),
        ("assistant", "assistant"),
        ("assistant", "assistant"),
        ("user", "tool_result"),
        ("assistant", "assistant"),
        ("user", "tool_result"),
        ("assistant", "assistant"),
        ("user", "tool_result"),
    ]
    assert got[0].text == "do it"
    assert got[1].blocks[0].kind == "thinking" and got[1].blocks[0].text == "hmm"
    assert got[2].blocks[0].kind == "text" and got[2].text == "on it"
    use = got[3].blocks[0]
    assert (use.kind, use.tool_id, use.tool_name, use.tool_input) == ("tool_use", "t1", "bash", {"command": "ls -l"})
    assert use.text == '{"command":"ls -l"}'  # JSON.stringify form
    result = got[4].blocks[0]
    assert (result.kind, result.tool_id, result.tool_name, result.text, result.is_error) == (
        "tool_result",
        "t1",
        "bash",
        "a\nb",
        False,
    )
    assert got[6].blocks[0].is_error is True  # failed
    assert got[8].blocks[0].is_error is False  # cancelled is not an error
    assert all(m.data["seq"] == m.line for m in got)
    assert got[3].data["payload"] == {"toolUseId": "t1", "name": "bash", "input": {"command": "ls -l"}}
    assert got[4].timestamp == "2026-10-02T09:00:05.000Z"


def test_steering_injection_carries_the_queued_text() -> None:
    _, records = parse(
        lines_of(
            ev(1, "user.steering-queued", steeringId="s1", text="also keep migrations"),
            ev(2, "user.steering-injected", steeringId="s1"),
        )
    )
    queued, injected = messages(records)
    assert (queued.role, queued.kind) == ("meta", "bookkeeping")
    assert (injected.role, injected.kind) == ("user", "injected")
    assert injected.text == "also keep migrations"


def test_process_and_prune_records_are_system_records_without_text() -> None:
    _, records = parse(
        lines_of(
            ev(1, "process.started", processId="p1", command="npm run dev"),
            ev(2, "process.exited", processId="p1", exitCode=0),
            ev(3, "context.pruned", toolUseIds=["t1"], placeholder="[gone]", tokensReclaimedEstimate=10),
        )
    )
    got = messages(records)
    assert [(m.role, m.kind) for m in got] == [("system", "system")] * 3
    assert all(m.blocks == [] for m in got)  # nothing here reaches the model as text
    assert got[0].data["payload"]["command"] == "npm run dev"


def test_model_usage_is_an_assistant_record_with_anthropic_usage() -> None:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 30, "output_tokens": 5}
    _, records = parse(lines_of(ev(7, "model.usage", usage=usage, model="claude-sonnet-4-5")))
    (message,) = messages(records)
    assert (message.role, message.kind, message.model) == ("assistant", "assistant", "claude-sonnet-4-5")
    assert message.usage is not None and message.usage.context == 60 and message.usage.output_tokens == 5
    assert message.call_key  # the CallTracker needs one


def test_unknown_types_are_kept_verbatim() -> None:
    line = b'{"seq": 3, "type": "agent.mood-changed", "payload": {"mood": "calm"}}'
    _, records = parse([line + b"\n"])
    (message,) = messages(records)
    assert (message.role, message.kind, message.raw_type) == ("meta", "unknown", "agent.mood-changed")
    assert message.raw == line.decode()


# ───────────────────────────── overflow ─────────────────────────────


def test_a_tool_failure_saying_the_prompt_overflowed_is_an_overflow_event() -> None:
    _, records = parse(
        lines_of(
            ev(1, "tool.failed", toolUseId="t1", modelText="API error: prompt is too long: 210000 tokens > 200000"),
            ev(2, "tool.failed", toolUseId="t2", modelText="AssertionError: expected 3, got 4"),
        )
    )
    overflows = [e for e in events(records) if e.kind == "overflow"]
    assert [(e.line, e.tool_ids) for e in overflows] == [(1, ["t1"])]
    assert "prompt is too long" in overflows[0].message


def test_a_reactive_overflow_compaction_is_also_an_overflow_event() -> None:
    payload = {
        "checkpointYaml": "objective: x\n",
        "cut": {"fromSeq": 2, "toSeq": 5},
        "trigger": "reactive-overflow",
        "tokensBefore": 201000,
        "summaryModel": "claude-haiku-4-5",
    }
    _, records = parse(lines_of(ev(9, "context.compacted", **payload)))
    (message,) = messages(records)
    assert (message.role, message.kind, message.text) == ("user", "compact_summary", "objective: x\n")
    kinds = [(e.kind, e.trigger, e.pre_tokens) for e in events(records)]
    assert kinds == [("overflow", "reactive-overflow", 201000), ("compaction", "reactive-overflow", 201000)]


# ───────────────────────────── bad lines ─────────────────────────────


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"{not json\n", "not valid JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"type": "user.message-created", "payload": {}}\n', "seq"),
        (b'{"seq": true, "type": "user.message-created", "payload": {}}\n', "seq"),
        (b'{"seq": 1, "payload": {}}\n', "type"),
        (b'{"seq": 1, "type": "user.message-created", "payload": [1]}\n', "payload"),
    ],
)
def test_a_bad_line_is_a_line_error_and_the_rest_still_imports(line: bytes, why: str) -> None:
    good = lines_of(ev(1, "user.message-created", text="a"), ev(3, "model.text-block-completed", text="b"))
    _, records = parse([good[0], line, good[1]])
    (error,) = errors(records)
    assert error.line == 2 and why in error.message
    assert [m.line for m in messages(records)] == [1, 3]


def test_blank_lines_yield_nothing_but_keep_their_numbers() -> None:
    _, records = parse([b"\n", b"  \n", *lines_of(ev(1, "user.message-created", text="a"))], first_line=10)
    assert [(type(r).__name__, r.line) for r in records] == [("Message", 12)]


def test_a_partial_last_line_is_tolerated() -> None:
    good = lines_of(ev(1, "user.message-created", text="a"))
    parser, records = parse([*good, b'{"seq": 2, "type": "model.text-bl'])
    assert errors(records) == []
    assert len(messages(records)) == 1
    assert parser.info.data["partial_last_line"] == 2


def test_a_complete_bad_last_line_is_still_an_error() -> None:
    parser, records = parse([*lines_of(ev(1, "user.message-created", text="a")), b"{oops\n"])
    assert [e.line for e in errors(records)] == [2]
    assert "partial_last_line" not in parser.info.data


def test_the_parser_streams_lazily() -> None:
    def endless() -> Any:
        seq = 0
        while True:
            seq += 1
            yield orjson.dumps(ev(seq, "model.text-block-completed", text="x")) + b"\n"

    parser = KhaelorParser()
    stream = parser.parse(endless())
    first = [next(stream) for _ in range(3)]
    assert [r.line for r in first] == [1, 2, 3]
