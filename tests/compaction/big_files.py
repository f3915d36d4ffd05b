"""Claude Code files too big to read at once, for the read-ahead tests."""

from __future__ import annotations

import json
from pathlib import Path


def claude_line(n: int, text: str) -> bytes:
    record = {
        "type": "assistant" if n % 2 else "user",
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n else None,
        "sessionId": "s-read-ahead",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text}
        if n % 2 == 0
        else {
            "id": f"msg_{n}",
            "role": "assistant",
            "model": "claude-opus-4-5-20251101",
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}},
            ],
            "usage": {
                "input_tokens": 5,
                "cache_creation_input_tokens": n,
                "cache_read_input_tokens": 0,
                "output_tokens": 3,
            },
        },
    }
    return json.dumps(record).encode() + b"\n"


def big_file(path: Path, *, size: int, tail: bytes = b"") -> Path:
    """A Claude Code session of at least ``size`` bytes with a bad line, an over-long line and ``tail`` last."""
    lines = []
    total, n = 0, 0
    while total < size:
        line = claude_line(n, f"text {n} " * 300)
        if n == 7:
            line = b"{not json\n"
        if n == 11:
            line = claude_line(n, "x" * 300_000)  # longer than the limit the tests give
        lines.append(line)
        total += len(line)
        n += 1
    path.write_bytes(b"".join(lines) + tail)
    return path
