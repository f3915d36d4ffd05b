"""A live Claude Code session for the watcher and the live page: lines stamped now, a watcher thread, and
the lines of a compaction and of calls with rising context."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sessions_app import services, watcher


def now(offset: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")


def user_line(uuid: str, parent: str | None, text: str) -> str:
    record = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "live-1",
        "version": "2.1.20",
        "cwd": "/home/me/proj",
        "timestamp": now(),
        "message": {"role": "user", "content": text},
    }
    return json.dumps(record) + "\n"


def assistant_line(uuid: str, parent: str, msg_id: str, text: str, *, ctx: int) -> str:
    record = {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "live-1",
        "version": "2.1.20",
        "timestamp": now(),
        "requestId": "req_" + msg_id,
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-5-20251101",
            "content": [{"type": "text", "text": text}],
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": ctx - 10,
                "cache_read_input_tokens": 0,
                "output_tokens": 5,
            },
        },
    }
    return json.dumps(record) + "\n"


class RunningWatcher:
    """``watcher.watch_sessions`` in a thread; counts its passes so a test can wait for the next one."""

    def __init__(self, root: Path) -> None:
        self.stop = threading.Event()
        self.passes = 0
        self.outcomes: list[services.FileImport | services.Rejected] = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(
            target=watcher.watch_sessions, kwargs={"roots": [root], "stop_event": self.stop, "on_pass": self._seen}
        )

    def _seen(self, outcomes: list[services.FileImport | services.Rejected]) -> None:
        with self._lock:
            self.passes += 1
            self.outcomes.extend(outcomes)

    def wait_for(self, condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "the watcher did not import the change in time"
            time.sleep(0.05)

    def wait_for_pass_after(self, count: int) -> None:
        self.wait_for(lambda: self.passes > count)


def compact_lines(*, parent: str, pre_tokens: int, trigger: str = "auto") -> str:
    """Claude Code's compaction as it writes it: a ``compact_boundary`` then the summary, hanging from it."""
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "parentUuid": None,
        "logicalParentUuid": parent,
        "sessionId": "live-1",
        "version": "2.1.20",
        "cwd": "/home/me/proj",
        "timestamp": now(),
        "uuid": "cb1",
        "level": "info",
        "isMeta": False,
        "compactMetadata": {"trigger": trigger, "preTokens": pre_tokens},
    }
    summary = {
        "type": "user",
        "parentUuid": "cb1",
        "sessionId": "live-1",
        "version": "2.1.20",
        "cwd": "/home/me/proj",
        "timestamp": now(),
        "uuid": "sum1",
        "isCompactSummary": True,
        "isVisibleInTranscriptOnly": True,
        "message": {"role": "user", "content": "This session is being continued. <b>SUMMARY</b> of the work so far."},
    }
    return json.dumps(boundary) + "\n" + json.dumps(summary) + "\n"


def rising_calls(contexts: list[int], *, start: int = 1, parent: str | None = None) -> str:
    """A user question and an answer per context, each answer one API call."""
    lines = []
    for n, ctx in enumerate(contexts, start=start):
        lines.append(user_line(f"u{n}", parent, f"question {n}"))
        lines.append(assistant_line(f"a{n}", f"u{n}", f"m{n}", f"answer {n}", ctx=ctx))
        parent = f"a{n}"
    return "".join(lines)
