"""Fuzz every parser with hypothesis: records of the format's own shape with any value in any field.

Whatever a line holds, a parser yields records and line errors and never raises (the README's per-line
rule); every line error names a line of the input. Bounded (a fixed number of examples, small records) so
CI stays fast; hypothesis' database keeps any failure it found for the next run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.formats import khaelor, klaude_code
from compaction.formats.claude_code import KNOWN_TYPES as CLAUDE_CODE_TYPES
from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.codex import ENVELOPE_TYPES as CODEX_ENVELOPE_TYPES
from compaction.formats.codex import RESPONSE_ITEM_TYPES as CODEX_ITEM_TYPES
from compaction.formats.codex import CodexParser
from compaction.formats.jsonl import OverlongLine
from compaction.formats.klaude_code import DETECT_TYPES as KLAUDE_CODE_TYPES
from compaction.transcript import ContextEvent, LineError, Message, Record

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # past 64 bits: orjson refuses, the stdlib writes them
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
counts = st.integers(min_value=-5, max_value=2**33) | json_values
timestamps = st.sampled_from(
    ["2026-01-01T00:00:00.000Z", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "not a time", ""]
) | st.text(max_size=10)


def shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """An object with any subset of the format's fields, each plausible or any JSON value at all."""
    return st.fixed_dictionaries({}, optional={key: value | json_values for key, value in fields.items()})


def deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"d": value}
    return value


usage = shaped(
    {
        "input_tokens": counts,
        "cache_creation_input_tokens": counts,
        "cache_read_input_tokens": counts,
        "output_tokens": counts,
    }
)
claude_block = shaped(
    {
        "type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "image", "redacted_thinking"]),
        "text": st.text(max_size=20),
        "thinking": st.text(max_size=20),
        "id": st.text(max_size=6),
        "name": st.text(max_size=6),
        "input": json_values | st.just(deep(300)),
        "tool_use_id": st.text(max_size=6),
        "content": st.text(max_size=20) | st.lists(json_values, max_size=2),
        "is_error": st.booleans(),
    }
)
claude_message = shaped(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.text(max_size=20) | st.lists(claude_block, max_size=3),
        "model": st.text(max_size=10),
        "id": st.sampled_from(["msg_1", "msg_2"]),
        "usage": usage,
        "stop_reason": st.sampled_from(["end_turn", "tool_use"]) | st.just({}),
    }
)
claude_record = shaped(
    {
        "type": st.sampled_from(sorted(CLAUDE_CODE_TYPES)),
        "subtype": st.sampled_from(["compact_boundary", "microcompact_boundary", "api_error", "informational"]),
        "uuid": st.sampled_from(["u1", "u2", "u3"]),
        "parentUuid": st.sampled_from(["u1", "u2", None]),
        "logicalParentUuid": st.sampled_from(["u1", None]),
        "sessionId": st.just("s-1"),
        "timestamp": timestamps,
        "isSidechain": st.booleans(),
        "agentId": st.sampled_from(["a1", "a2"]),
        "isMeta": st.booleans(),
        "isCompactSummary": st.booleans(),
        "isApiErrorMessage": st.booleans(),
        "requestId": st.sampled_from(["req_1", "req_2"]),
        "version": st.sampled_from(["2.1.20", "1.0.0", "x"]),
        "cwd": st.text(max_size=10),
        "message": claude_message,
        "compactMetadata": shaped({"trigger": st.text(max_size=6), "preTokens": counts}),
        "microcompactMetadata": shaped({"trigger": st.text(max_size=6), "tokensSaved": counts}),
        "compactedToolIds": st.lists(json_values, max_size=2),
        "toolUseResult": json_values,
        "summary": st.text(max_size=10),
        "content": st.text(max_size=10),
    }
)

klaude_part = shaped(
    {
        "type": st.sampled_from(
            ["text", "thinking_text", "tool_call", "image_url", "image_file", "thinking_signature"]
        ),
        "text": st.text(max_size=20),
        "arguments_json": st.text(max_size=20) | st.just(json.dumps(deep(300))),
        "call_id": st.text(max_size=6),
        "tool_name": st.text(max_size=6),
        "model_id": st.text(max_size=6),
        "url": st.text(max_size=10),
        "file_path": st.text(max_size=10),
        "mime_type": st.text(max_size=10),
    }
)
klaude_data = shaped(
    {
        "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]),
        "parts": st.lists(klaude_part, max_size=3),
        "created_at": timestamps,
        "response_id": st.text(max_size=6),
        "stop_reason": st.sampled_from(["stop", "length", "error", "aborted"]),
        "usage": shaped(
            {
                "input_tokens": counts,
                "cached_tokens": counts,
                "output_tokens": counts,
                "total_tokens": counts,
                "context_size": counts,
                "context_limit": counts,
                "model_name": st.text(max_size=6),
            }
        ),
        "call_id": st.text(max_size=6),
        "tool_name": st.text(max_size=6),
        "status": st.sampled_from(["success", "error"]),
        "output_text": st.text(max_size=20),
        "summary": st.text(max_size=20),
        "first_kept_index": counts,
        "tokens_before": counts,
        "error": st.text(max_size=10),
    }
)
klaude_record = shaped({"type": st.sampled_from(sorted(KLAUDE_CODE_TYPES)), "data": klaude_data})

# The event types the parser knows: its module's dotted-name constants ("user.message-created", ...).
KHAELOR_TYPES = sorted(v for k, v in vars(khaelor).items() if k.isupper() and isinstance(v, str) and "." in v)
khaelor_payload = shaped(
    {
        "text": st.text(max_size=20),
        "thinking": st.text(max_size=20),
        "name": st.text(max_size=6),
        "input": json_values | st.just(deep(300)),
        "toolUseId": st.text(max_size=6),
        "toolUseIds": st.lists(json_values, max_size=2),
        "placeholder": st.text(max_size=6),
        "trigger": st.text(max_size=6),
        "cut": json_values,
        "model": st.text(max_size=6),
        "cwd": st.text(max_size=6),
        "version": st.text(max_size=6),
        "contextWindow": counts,
        "tokensBefore": counts,
        "tokensReclaimedEstimate": counts,
        "usage": usage,
        "messageId": st.text(max_size=6),
        "requestId": st.text(max_size=6),
        "steeringId": st.text(max_size=6),
    }
)
khaelor_record = shaped(
    {
        "seq": st.integers(min_value=-3, max_value=2**65),
        "type": st.sampled_from(KHAELOR_TYPES),
        "ts": timestamps,
        "payload": khaelor_payload,
        "sessionId": st.text(max_size=6),
    }
)


def lines_of(records: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[bytes]]:
    """JSONL lines: mostly records of the format, some of them broken, blank, partial or over-long."""
    record_line = records.map(lambda r: (json.dumps(r) + "\n").encode())
    odd_line = st.sampled_from([b"\n", b"   \n", b"not json\n", b"[1, 2]\n", b"\xff\xfe\n", b'{"type": "user"'])
    overlong = st.just(OverlongLine(size=10**9, limit=32 * 1024 * 1024))
    return st.lists(record_line | odd_line | overlong, max_size=8)


def run(parse: Callable[[Iterable[bytes]], Iterator[Record]], lines: list[bytes]) -> None:
    records = list(parse(iter(lines)))
    for record in records:
        assert isinstance(record, Message | ContextEvent | LineError)
        if isinstance(record, LineError):
            assert 1 <= record.line <= len(lines) and record.message


@FUZZ
@given(lines_of(claude_record))
def test_claude_code_parser_never_raises(lines):
    run(ClaudeCodeParser().parse, lines)


@FUZZ
@given(lines_of(klaude_record))
def test_klaude_code_parser_never_raises(lines):
    run(klaude_code.KlaudeCodeParser(meta=None).parse, lines)


@FUZZ
@given(lines_of(khaelor_record))
def test_khaelor_parser_never_raises(lines):
    run(khaelor.KhaelorParser().parse, lines)


# Codex (issue 34, item 3): an envelope of any known type, or a flat line, with any value in any field it reads.
codex_usage = shaped(
    {
        "input_tokens": counts,
        "cached_input_tokens": counts,
        "output_tokens": counts,
        "reasoning_output_tokens": counts,
        "total_tokens": counts,
    }
)
codex_item = shaped(
    {
        "type": st.sampled_from(sorted(CODEX_ITEM_TYPES | {"token_count", "user_message", "agent_message"})),
        "role": st.sampled_from(["user", "assistant", "developer", "system"]),
        "content": st.lists(
            shaped({"type": st.sampled_from(["input_text", "output_text"]), "text": st.text(max_size=8)}), max_size=2
        ),
        "summary": st.lists(shaped({"type": st.just("summary_text"), "text": st.text(max_size=8)}), max_size=2),
        "encrypted_content": st.text(max_size=8),
        "name": st.text(max_size=6),
        "namespace": st.text(max_size=6),
        "arguments": st.text(max_size=12),
        "input": st.text(max_size=12),
        "call_id": st.text(max_size=6),
        "output": st.text(max_size=12) | shaped({"content": st.text(max_size=6)}),
        "action": shaped({"type": st.text(max_size=6), "command": st.lists(st.text(max_size=4), max_size=2)}),
        "phase": st.text(max_size=6),
        "id": st.text(max_size=6),
        "message": st.text(max_size=12),
        "model": st.text(max_size=8),
        "model_context_window": counts,
        "replacement_history": st.lists(json_values, max_size=2),
        "info": shaped(
            {"total_token_usage": codex_usage, "last_token_usage": codex_usage, "model_context_window": counts}
        ),
    }
)
codex_record = (
    shaped(
        {
            "timestamp": timestamps,
            "type": st.sampled_from(sorted(CODEX_ENVELOPE_TYPES)),
            "payload": codex_item,
        }
    )
    | codex_item
    | shaped({"record_type": st.text(max_size=6)})
)


@FUZZ
@given(lines_of(codex_record))
def test_codex_parser_never_raises(lines):
    run(CodexParser().parse, lines)
