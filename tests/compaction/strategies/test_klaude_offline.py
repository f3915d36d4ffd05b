"""Offline klaude-code summaries keep klaude's own sections and take nothing from the prompt's template."""

from __future__ import annotations

import re

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.strategies.klaude_code import KlaudeCodeStrategy, KlaudeParams
from compaction.summarize import OfflineSummarizer
from tests.conftest import KLAUDE_SAMPLES

SESSIONS = sorted((KLAUDE_SAMPLES / "dot-klaude" / "projects").glob("*/sessions/*/events.jsonl"))
HISTORY_HEADINGS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
)
PREFIX_HEADINGS = ("## Original Request", "## Early Progress", "## Context for Suffix")
TEMPLATE_TEXT = ("[Ordered list", "[What is the user", "</instructions>", "[Completed tasks", "Objective: :")
DEVICE_PATH = re.compile(r"(?<![\w.-])/dev/")  # /dev/null, /dev/tty; not /home/dev/...
NUMBERED_CODE_LINE = re.compile(r"^\s*(?:[-*]\s*(?:\[.\]\s*)?|\d+\.\s*)?\d+(?:→|\t)", re.MULTILINE)


def test_offline_summaries_on_every_sample_are_clean_klaude_summaries() -> None:
    kinds_seen: set[str] = set()
    for events in SESSIONS:
        _, records = parse_session(events.parent)
        messages = history_messages(records)
        strategy = KlaudeCodeStrategy(KlaudeParams(keep_recent_tokens=500))
        cut = strategy.select_cut(messages)
        if cut is None:
            continue  # too small to compact at all: klaude makes no request either
        plan = strategy.summarizer_plan(messages, cut, prune=[], by_hand=False)
        replies = {r.kind: OfflineSummarizer().summarize(r.summary_request(model="x")).text for r in plan.requests}
        kinds_seen |= set(replies)
        summary = strategy.final_summary(replies, plan=plan, messages=messages)
        if {"history", "update_history"} & set(replies):
            assert all(f"\n{heading}\n" in f"\n{summary}\n" for heading in HISTORY_HEADINGS), events
        if "task_prefix" in replies:
            assert all(f"\n{heading}\n" in summary for heading in PREFIX_HEADINGS), events
            assert "**Task Context (current task):**" in summary
        assert not any(text in summary for text in TEMPLATE_TEXT), events
        assert not DEVICE_PATH.search(summary), events
        assert not NUMBERED_CODE_LINE.search(summary), events
    assert "task_prefix" in kinds_seen and {"history", "update_history"} & kinds_seen
