"""Whole-session numbers computed from a record stream, with no storage involved.

These are the figures ``samples/claude-code/SOURCES.md`` lists per sample ("API calls main/side",
"max context main / sidechain", compaction metadata), so real-data tests and the importer agree on
one definition: calls are de-duplicated by ``CallTracker``, context = input + cache creation + cache
read of a call, "side" = every agent other than MAIN.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compaction.calls import CallTracker
from compaction.transcript import MAIN, ContextEvent, Message, Record

# Events that change (or fail to change) the window; subagent spawns are not listed.
LISTED_EVENT_KINDS = frozenset({"compaction", "microcompact", "prune", "api_error", "overflow"})


def _side(agent: str) -> str:
    return "main" if agent == MAIN else "side"


def session_stats(records: Iterable[Record]) -> dict[str, Any]:
    """Count de-duplicated API calls and the largest context per side, and list the context events.

    Returns ``{"api_calls": {"main", "side"}, "max_context": {"main", "side"}, "events": [...]}``;
    each event is ``{"kind", "trigger", "pre_tokens", "tokens_saved", "after_call", "agent", "line"}``
    where ``after_call`` is the number of main-chain calls before the event.
    """
    tracker = CallTracker()
    api_calls = {"main": 0, "side": 0}
    max_context = {"main": 0, "side": 0}
    events: list[dict[str, Any]] = []
    for record in records:
        if isinstance(record, Message):
            call = tracker.add(record)
            if call is not None:
                side = _side(call.agent)
                api_calls[side] += 1
                # input/cache are identical on every line of a call (claude-code.md §6.1): the first line decides.
                max_context[side] = max(max_context[side], call.usage.context)
        elif isinstance(record, ContextEvent) and record.kind in LISTED_EVENT_KINDS:
            events.append(
                {
                    "kind": record.kind,
                    "trigger": record.trigger,
                    "pre_tokens": record.pre_tokens,
                    "tokens_saved": record.tokens_saved,
                    "after_call": tracker.count(MAIN),
                    "agent": record.agent,
                    "line": record.line,
                }
            )
    return {"api_calls": api_calls, "max_context": max_context, "events": events}
