"""klaude-code importer: inline fixtures for the parsing rules, then the six shared samples.

Sections (§) refer to docs/formats/klaude-code.md.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

from compaction.formats.klaude_code import (
    FORMAT,
    KlaudeCodeParser,
    history_messages,
    parse_session,
    read_meta,
    session_files,
)
from compaction.transcript import ContextEvent, LineError, Message, Record
from tests.conftest import SHARED

SAMPLES = SHARED / "samples" / "klaude-code"
SAMPLE_INDEX: dict[str, dict[str, Any]] = (
    json.loads((SAMPLES / "samples.json").read_text()) if (SAMPLES / "samples.json").is_file() else {}
)
needs_samples = pytest.mark.skipif(not SAMPLE_INDEX, reason="shared klaude-code samples not available")


# --- tiny hand-made items (shapes from docs/formats/klaude-code.md §1.3) --------------------------


def line(item_type: str, **data: Any) -> bytes:
    data.setdefault("created_at", "2025-12-08T09:14:43.562000")
    return orjson.dumps({"type": item_type, "data": data}) + b"\n"


def user(text: str) -> bytes:
    return line("UserMessage", id=None, response_id=None, role="user", parts=[{"type": "text", "text": text}])


def developer(text: str) -> bytes:
    return line("DeveloperMessage", role="developer", parts=[{"type": "text", "text": text}], ui_extra=None)


def usage(context_size: int | None, *, cached: int = 0, output: int = 10, limit: int | None = 200000) -> dict[str, Any]:
    total = (context_size or 0) if context_size is not None else 500 + output
    return {
        "input_tokens": total - output,
        "cached_tokens": cached,
        "output_tokens": output,
        "context_size": context_size,
        "context_limit": limit,
        "max_tokens": None,
        "total_tokens": total,
        "model_name": "claude-opus-4-5-20251101",
    }


def assistant(
    response_id: str,
    *,
    text: str = "",
    calls: tuple[tuple[str, str, str], ...] = (),
    usage_dict: dict[str, Any] | None = None,
    stop_reason: str = "tool_use",
    thinking: str = "",
) -> bytes:
    parts: list[dict[str, Any]] = []
    if thinking:
        parts.append({"type": "thinking_text", "id": None, "text": thinking, "model_id": "claude-opus-4-5-20251101"})
        parts.append({"type": "thinking_signature", "id": None, "signature": "sig", "format": "anthropic"})
    if text:
        parts.append({"type": "text", "text": text})
    for call_id, name, arguments in calls:
        parts.append(
            {"type": "tool_call", "call_id": call_id, "id": None, "tool_name": name, "arguments_json": arguments}
        )
    return line(
        "AssistantMessage",
        role="assistant",
        response_id=response_id,
        parts=parts,
        usage=usage_dict,
        stop_reason=stop_reason,
    )


def tool_result(call_id: str, name: str, output: str, *, status: str = "success", ui_extra: Any = None) -> bytes:
    return line(
        "ToolResultMessage",
        role="tool",
        call_id=call_id,
        tool_name=name,
        status=status,
        output_text=output,
        parts=[],
        ui_extra=ui_extra,
    )


def compaction_entry(first_kept_index: int, tokens_before: int, summary: str = "## Goal\n- x") -> bytes:
    return line(
        "CompactionEntry",
        summary=summary,
        first_kept_index=first_kept_index,
        tokens_before=tokens_before,
        details={"read_files": [], "modified_files": []},
        kept_items_brief=[],
    )


def stream_error(text: str) -> bytes:
    return line("StreamErrorItem", error=text)


def task_metadata() -> bytes:
    return line(
        "TaskMetadataItem", main_agent={"usage": None, "model_name": "m", "turn_count": 1}, sub_agent_task_metadata=[]
    )


def parse(lines: list[bytes], **kwargs: Any) -> tuple[KlaudeCodeParser, list[Record]]:
    parser = KlaudeCodeParser(**kwargs)
    return parser, list(parser.parse(lines))


PROMPT_TOO_LONG = (
    "BadRequestError Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
    "'message': 'prompt is too long: 229651 tokens > 200000 maximum'}, 'request_id': 'req_1'}"
)


# --- line-level rules ------------------------------------------------------------------------------


def test_one_record_per_non_blank_line_with_line_numbers() -> None:
    lines = [user("hi"), b"\n", b"   \n", developer("<system-reminder>r</system-reminder>"), task_metadata()]
    parser, records = parse(lines)
    messages = [r for r in records if isinstance(r, Message)]
    assert [m.line for m in messages] == [1, 4, 5]
    assert [m.data["index"] for m in messages] == [0, 1, 2]
    assert [m.kind for m in messages] == ["prompt", "injected", "bookkeeping"]
    assert parser.info.format == FORMAT


def test_first_line_offsets_line_numbers() -> None:
    _, records = parse([user("a"), user("b")], first_line=10)
    assert [r.line for r in records] == [10, 11]


def test_bad_lines_become_line_errors_and_are_not_indexed() -> None:
    lines = [
        user("a"),
        b"{not json\n",
        b"[1, 2]\n",
        orjson.dumps({"type": "UserMessage", "data": "oops"}) + b"\n",
        user("b"),
    ]
    _, records = parse(lines)
    errors = [r for r in records if isinstance(r, LineError)]
    assert [e.line for e in errors] == [2, 3, 4]
    assert "JSON" in errors[0].message
    assert history_messages(records)[1].text == "b"
    assert history_messages(records)[1].data["index"] == 1  # klaude's loader skipped the bad lines too


def test_unknown_type_is_kept_verbatim_outside_the_history_index() -> None:
    future = b'{"type": "FutureItem", "data": {"x": 1}}\n'
    _, records = parse([user("a"), future, user("b")])
    unknown = records[1]
    assert isinstance(unknown, Message)
    assert unknown.kind == "unknown"
    assert unknown.raw == future.strip().decode()
    assert unknown.data["index"] is None
    assert [m.data["index"] for m in history_messages(records)] == [0, 1]


def test_partial_last_line_is_tolerated() -> None:
    parser, records = parse([user("a"), b'{"type": "UserMessage", "da'])
    assert not any(isinstance(r, LineError) for r in records)
    assert len(records) == 1
    assert parser.info.data["partial_last_line"] == 2


def test_complete_last_line_without_newline_is_parsed() -> None:
    parser, records = parse([user("a"), user("b").rstrip(b"\n")])
    assert [r.text for r in records if isinstance(r, Message)] == ["a", "b"]
    assert "partial_last_line" not in parser.info.data


# --- item shapes ---------------------------------------------------------------------------------


def test_anthropic_usage_context_equals_context_size() -> None:
    # klaude's Anthropic client: input_tokens = input + cache_read, context_size = that + output (§1.3)
    recorded = {"input_tokens": 11113, "cached_tokens": 10093, "output_tokens": 121, "context_size": 11234}
    _, records = parse([assistant("msg_1", text="x", usage_dict={**recorded, "context_limit": 200000})])
    message = records[0]
    assert isinstance(message, Message) and message.usage is not None
    assert message.usage.context == recorded["context_size"]
    assert message.usage.cache_read_input_tokens == recorded["cached_tokens"]
    assert message.usage.output_tokens == recorded["output_tokens"]
    assert message.call_key == "msg_1"
    assert message.data["usage"]["input_tokens"] == recorded["input_tokens"]


def test_usage_without_context_size_falls_back_to_total_tokens() -> None:
    recorded = usage(None, output=40)
    _, records = parse([assistant("chatcmpl-1", text="x", usage_dict=recorded)])
    assert isinstance(records[0], Message) and records[0].usage is not None
    assert records[0].usage.context == recorded["total_tokens"]


def test_aborted_and_error_responses_carry_no_timeline_usage() -> None:
    lines = [
        assistant("msg_a", text="partial", usage_dict=usage(5000), stop_reason="aborted"),
        assistant("msg_b", text="partial", usage_dict=usage(6000), stop_reason="error"),
        assistant("msg_c", text="no usage", usage_dict=None, stop_reason="stop"),
    ]
    _, records = parse(lines)
    assert [r.usage for r in records if isinstance(r, Message)] == [None, None, None]
    assert records[0].data["usage"]["context_size"] == 5000  # type: ignore[union-attr]


def test_assistant_blocks_thinking_text_and_tool_calls() -> None:
    raw = assistant(
        "msg_1",
        thinking="let me look",
        text="Reading it.",
        calls=(("toolu_1", "Read", '{"file_path": "/a.py"}'), ("toolu_2", "Bash", "not json")),
        usage_dict=usage(1000),
    )
    parser, records = parse([raw])
    message = records[0]
    assert isinstance(message, Message)
    assert [b.kind for b in message.blocks] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.blocks[2].tool_input == {"file_path": "/a.py"}
    assert message.blocks[2].tool_id == "toolu_1" and message.blocks[2].tool_name == "Read"
    assert message.blocks[3].tool_input == "not json"
    assert message.model == "claude-opus-4-5-20251101"
    assert parser.info.context_window == 200000
    assert message.data["item"]["parts"][1]["type"] == "thinking_signature"  # klaude's payload kept whole


def test_tool_result_block_and_subagent_link() -> None:
    lines = [
        tool_result("toolu_1", "Bash", "boom", status="error"),
        tool_result("toolu_2", "Task", "done", ui_extra={"type": "session_id", "session_id": "abc"}),
    ]
    _, records = parse(lines)
    first, second = records
    assert isinstance(first, Message) and isinstance(second, Message)
    assert first.kind == "tool_result" and first.role == "user"
    assert (first.blocks[0].tool_id, first.blocks[0].tool_name, first.blocks[0].is_error) == ("toolu_1", "Bash", True)
    assert second.blocks[0].is_error is False
    assert second.data["sub_agent_session_id"] == "abc"


def test_continue_prompt_is_injected() -> None:
    _, records = parse([user("<system>continue</system>")])
    assert isinstance(records[0], Message) and records[0].kind == "injected"


def test_stream_errors_are_overflow_or_api_error() -> None:
    lines = [stream_error(PROMPT_TOO_LONG), stream_error("APIConnectionError Connection error.")]
    _, records = parse(lines)
    events = [r for r in records if isinstance(r, ContextEvent)]
    assert [e.kind for e in events] == ["overflow", "api_error"]
    assert events[0].data["prompt_tokens"] == 229651 and events[0].data["limit"] == 200000
    assert [e.data["index"] for e in events] == [0, 1]
    # the event follows its Message
    assert isinstance(records[0], Message) and records[1] is events[0]


def test_compaction_triggers_are_inferred_from_position() -> None:
    lines = [
        user("task"),  # 0
        assistant("m1", calls=(("c1", "Read", "{}"),), usage_dict=usage(1000)),  # 1
        tool_result("c1", "Read", "x"),  # 2
        stream_error(PROMPT_TOO_LONG),  # 3
        compaction_entry(1, 1000),  # 4: right after an overflow error
        assistant("m2", calls=(("c2", "Read", "{}"),), usage_dict=usage(2000)),  # 5
        tool_result("c2", "Read", "y"),  # 6
        developer("<system-reminder>r</system-reminder>"),  # 7
        compaction_entry(5, 2000),  # 8: at a turn start
        assistant("m3", text="done", usage_dict=usage(3000), stop_reason="stop"),  # 9
        task_metadata(),  # 10
        compaction_entry(9, 3000),  # 11: between tasks, far below the threshold
        user("next"),  # 12
        assistant("m4", text="done", usage_dict=usage(190000), stop_reason="stop"),  # 13
        task_metadata(),  # 14
        compaction_entry(12, 190000),  # 15: between tasks, above 200000 - 16384
    ]
    parser, records = parse(lines)
    events = [r for r in records if isinstance(r, ContextEvent) and r.kind == "compaction"]
    assert [e.trigger for e in events] == ["overflow", "threshold", "manual", "threshold"]
    assert [e.data["first_kept_index"] for e in events] == [1, 5, 9, 12]
    assert [e.pre_tokens for e in events] == [1000, 2000, 3000, 190000]
    assert parser.info.agent_version == "2.8.x"


def test_repeated_overflow_without_compaction_means_2_7() -> None:
    parser, _ = parse([user("a"), stream_error(PROMPT_TOO_LONG), stream_error(PROMPT_TOO_LONG)])
    assert parser.info.agent_version == "2.7.0"


def test_version_unknown_without_evidence() -> None:
    parser, _ = parse([user("a"), assistant("m", text="b", usage_dict=usage(10), stop_reason="stop")])
    assert parser.info.agent_version is None


def test_meta_fills_session_info(tmp_path: Path) -> None:
    session = tmp_path / "0123abcd"
    session.mkdir()
    (session / "events.jsonl").write_bytes(user("Fix the bug\nsecond line"))
    meta = {
        "id": "0123abcd",
        "work_dir": "/home/dev/x",
        "model_name": "claude-opus-4-5-20251101",
        "file_tracker": {"/home/dev/x/a.py": {"mtime": 1.0, "content_sha256": None, "is_memory": False}},
        "created_at": 1765185243.512,
        "user_messages": ["Fix the bug\nsecond line"],
        "sub_agent_state": None,
    }
    (session / "meta.json").write_text(json.dumps(meta, indent=2))
    assert session_files(session) == (session / "events.jsonl", session / "meta.json")
    assert session_files(session / "events.jsonl") == (session / "events.jsonl", session / "meta.json")
    parser, _ = parse_session(session)
    info = parser.info
    assert (info.session_id, info.cwd, info.model) == ("0123abcd", "/home/dev/x", "claude-opus-4-5-20251101")
    assert info.title == "Fix the bug"
    assert info.data["file_tracker_paths"] == ["/home/dev/x/a.py"]
    assert info.data["meta_created_at"] == meta["created_at"]


def test_missing_meta(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_bytes(user("a"))
    assert session_files(tmp_path) == (tmp_path / "events.jsonl", None)
    assert read_meta(None) == {}
    assert read_meta(tmp_path / "meta.json") == {}


# --- the shared samples ----------------------------------------------------------------------------

COMPACTION_EVENT_RE = re.compile(r"^compaction\[(\w+)\] at index (\d+): first_kept_index=(\d+) tokens_before=(\d+)$")
OVERFLOW_EVENT_RE = re.compile(r"^overflow error at index (\d+) \(prompt=(\d+)\)$")


@cache  # four tests read each sample and none changes what it gets: parsed once
def _sample(name: str) -> tuple[KlaudeCodeParser, list[Record]]:
    return parse_session(SAMPLES / SAMPLE_INDEX[name]["dir"])


@needs_samples
@pytest.mark.parametrize("name", sorted(SAMPLE_INDEX))
def test_sample_imports_cleanly(name: str) -> None:
    sample = SAMPLE_INDEX[name]
    parser, records = _sample(name)
    assert [r for r in records if isinstance(r, LineError)] == []
    messages = history_messages(records)
    assert len(messages) == sample["items"]
    assert [m.data["index"] for m in messages] == list(range(sample["items"]))
    assert parser.info.session_id == sample["session_id"]
    assert parser.info.model == sample["model"]
    assert parser.info.context_window == sample["context_limit"]
    assert parser.info.cwd == "/home/dev/projects/webapp"  # README.md: meta.json.work_dir of every sample


@needs_samples
@pytest.mark.parametrize("name", sorted(SAMPLE_INDEX))
def test_sample_events_match_samples_json(name: str) -> None:
    _, records = _sample(name)
    events = [r for r in records if isinstance(r, ContextEvent)]
    expected: list[tuple[Any, ...]] = []
    for text in SAMPLE_INDEX[name]["events"]:
        if found := COMPACTION_EVENT_RE.match(text):
            trigger, index, first_kept, before = found.groups()
            expected.append(("compaction", trigger, int(index), int(first_kept), int(before)))
        elif found := OVERFLOW_EVENT_RE.match(text):
            index, prompt = found.groups()
            expected.append(("overflow", None, int(index), None, int(prompt)))
    got = [(e.kind, e.trigger, e.data["index"], e.data.get("first_kept_index"), e.pre_tokens) for e in events]
    assert got == expected


@needs_samples
@pytest.mark.parametrize("name", sorted(SAMPLE_INDEX))
def test_sample_version_detection(name: str) -> None:
    parser, records = _sample(name)
    has_compaction = any(isinstance(r, ContextEvent) and r.kind == "compaction" for r in records)
    if SAMPLE_INDEX[name]["generated_with"].endswith("2.7.0"):
        assert parser.info.agent_version == "2.7.0"
    elif has_compaction:
        assert parser.info.agent_version == "2.8.x"
    else:
        assert parser.info.agent_version is None  # a 2.8.1 file without a compaction looks like 2.7.0 (§1.5)


EXPECTED_FILES = sorted((SAMPLES / "expected").glob("*.json")) if SAMPLE_INDEX else []


@needs_samples
@pytest.mark.parametrize("path", EXPECTED_FILES, ids=[p.stem for p in EXPECTED_FILES])
def test_sample_items_match_klaude_view(path: Path) -> None:
    expected = json.loads(path.read_text())
    _, records = _sample(path.stem)
    messages = history_messages(records)
    assert len(messages) == expected["input"]["history_items"]
    for item in expected["items"]:
        message = messages[item["index"]]
        assert message.raw_type == item["type"]
        assert message.timestamp == item["created_at"]
        if item["type"] == "AssistantMessage":
            tool_names = [b.tool_name for b in message.blocks if b.kind == "tool_use"]
            assert tool_names == item["tool_calls"]
            if item["usage_counts_for_threshold"]:
                assert message.usage is not None
                assert message.usage.context == item["usage"]["context_size"]
                assert message.usage.cache_read_input_tokens == item["usage"]["cached_tokens"]
                assert message.usage.output_tokens == item["usage"]["output_tokens"]
            else:
                assert message.usage is None
        elif item["type"] == "ToolResultMessage":
            block = message.blocks[0]
            assert (block.tool_id, block.tool_name, len(block.text)) == (
                item["call_id"],
                item["tool_name"],
                item["output_chars"],
            )
            assert block.is_error == (item["status"] != "success")
        elif item["type"] == "CompactionEntry":
            assert message.data["first_kept_index"] == item["first_kept_index"]
            assert len(message.text) == item["summary_chars"]
    assert [i for i, m in enumerate(messages) if m.raw_type == "CompactionEntry"] == expected["totals"][
        "compaction_entries"
    ]
