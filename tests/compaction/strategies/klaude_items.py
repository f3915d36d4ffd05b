"""Hand-made klaude-code history items (JSONL lines) and their messages as the real parser reads them."""

from __future__ import annotations

from typing import Any

import orjson

from compaction.formats.klaude_code import KlaudeCodeParser, history_messages
from compaction.transcript import Message


def lines_to_messages(lines: list[bytes]) -> list[Message]:
    return history_messages(KlaudeCodeParser().parse(lines))


def klaude_item(item_type: str, **data: Any) -> bytes:
    data.setdefault("created_at", "2025-12-08T09:00:00")
    return orjson.dumps({"type": item_type, "data": data}) + b"\n"


def klaude_user(text: str) -> bytes:
    return klaude_item("UserMessage", role="user", parts=[{"type": "text", "text": text}])


def klaude_assistant(calls: list[tuple[str, str]] | None = None, text: str = "", context: int | None = None) -> bytes:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [
        {"type": "tool_call", "call_id": cid, "id": None, "tool_name": "Read", "arguments_json": args}
        for cid, args in calls or []
    ]
    usage = None if context is None else {"context_size": context, "context_limit": 200000, "output_tokens": 1}
    return klaude_item(
        "AssistantMessage", role="assistant", response_id=None, parts=parts, usage=usage, stop_reason="stop"
    )
