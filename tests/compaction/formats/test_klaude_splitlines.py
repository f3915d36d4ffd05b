"""klaude-code reloads events.jsonl with str.splitlines(): a raw U+2028, U+2029 or U+0085 loses its line."""

from __future__ import annotations

import json

import pytest

from compaction.formats.klaude_code import KlaudeCodeParser, history_messages
from compaction.transcript import LineError, Message


def line(item_type: str, **data: object) -> bytes:
    # klaude's encode_jsonl_line: json.dumps(..., ensure_ascii=False), so the separators stay raw.
    data.setdefault("created_at", "2025-12-08T09:00:00")
    return (json.dumps({"type": item_type, "data": data}, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_a_line_with_a_raw_unicode_line_break_is_a_line_error_and_later_indices_move_down(separator: str) -> None:
    lines = [
        line("UserMessage", role="user", parts=[{"type": "text", "text": "go"}]),
        line("ToolResultMessage", role="tool", call_id="a", tool_name="Bash", status="success",
             output_text=f"before{separator}after", parts=[]),
        line("AssistantMessage", role="assistant", parts=[{"type": "text", "text": "done"}], stop_reason="stop"),
    ]  # fmt: skip
    records = list(KlaudeCodeParser().parse(lines))
    errors = [r for r in records if isinstance(r, LineError)]
    assert [e.line for e in errors] == [2] and "splitlines" in errors[0].message
    history = history_messages(records)
    assert [m.text for m in history] == ["go", "done"]  # the assistant is item 1 in klaude's reloaded history
    assert all(isinstance(m, Message) for m in history)


def test_an_escaped_line_break_is_kept() -> None:
    escaped = (json.dumps({"type": "UserMessage", "data": {"role": "user", "parts": [
        {"type": "text", "text": "a\u2028b"}], "created_at": "2025-12-08T09:00:00"}}) + "\n").encode()  # fmt: skip
    records = list(KlaudeCodeParser().parse([escaped]))
    assert not any(isinstance(r, LineError) for r in records)
    assert [m.text for m in history_messages(records)] == ["a\u2028b"]


@pytest.mark.parametrize("separator", ["\u2028", "\u0085", "\x0c", "\x1e", "\r"])
def test_two_items_parted_by_a_break_only_splitlines_sees_are_both_read(separator: str) -> None:
    # Outside a string no JSON reader takes the break, but klaude's loader splits there and decodes both pieces.
    first, second = (line("UserMessage", parts=[{"type": "text", "text": t}]).rstrip(b"\n") for t in ("a", "b"))
    records = list(
        KlaudeCodeParser().parse([first + separator.encode() + second + b"\n", line("UserMessage", parts=[])])
    )
    assert not any(isinstance(r, LineError) for r in records)
    history = history_messages(records)
    assert [(m.line, m.data["index"]) for m in history] == [(1, 0), (1, 1), (2, 2)]


def test_a_lone_carriage_return_between_json_tokens_loses_the_line() -> None:
    # JSON takes the CR as whitespace; read_text()'s universal newlines and splitlines() break the line there.
    broken = line("UserMessage", parts=[{"type": "text", "text": "x"}]).replace(b', "data"', b',\r"data"', 1)
    records = list(KlaudeCodeParser().parse([broken, line("UserMessage", parts=[{"type": "text", "text": "y"}])]))
    errors = [r for r in records if isinstance(r, LineError)]
    assert [e.line for e in errors] == [1] and "CR" in errors[0].message
    assert [m.text for m in history_messages(records)] == ["y"]


def test_a_line_ending_in_crlf_is_one_line() -> None:
    crlf = line("UserMessage", parts=[{"type": "text", "text": "x"}]).replace(b"\n", b"\r\n")
    records = list(KlaudeCodeParser().parse([crlf]))
    assert not any(isinstance(r, LineError) for r in records)
    assert [m.text for m in history_messages(records)] == ["x"]
