"""Offline summaries on every sample are in the agent's own format and hold only what the conversation says.

Claude Code: the compact prompt's nine sections inside ``<summary>`` (and formatCompactSummary's ``Summary:``
after parsing); klaude-code: its summary headings (and the task-prefix ones when the task is split); KHAELOR:
checkpoint YAML that the project's own strict checkpoint parser reads back; Codex: the handoff parts its prompt
asks for, stored after its summary prefix. None holds the summarizer's instructions, a /dev/ path or a numbered
line of a file view.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.codex import SUMMARY_PREFIX, CodexParser
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.preview import plan_preview
from compaction.strategies.base import Strategy
from compaction.strategies.claude_code import COMPACT_SUMMARY_SECTIONS
from compaction.strategies.codex import HANDOFF_SECTIONS, MEMENTO_PROMPT, MEMENTO_SECTIONS
from compaction.strategies.khaelor import parse_checkpoint
from compaction.strategies.klaude_code import SUMMARY_SECTIONS as KLAUDE_SECTIONS
from compaction.strategies.registry import build_strategy
from compaction.summarize import OfflineSummarizer
from compaction.summary_diff import sections
from compaction.transcript import MAIN, Message, SessionInfo
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

# What the summarizers' prompts hold and an extract must never repeat (today's complaints, issue 10).
TEMPLATE_TEXT = (
    "[Ordered list",
    "[What is the user",
    "</instructions>",
    "<instructions>",
    "[Detailed description]",
    "[Your thought process",
    "[Task 1]",
    "Objective: :",
    "Produce the checkpoint now",
    "Offline extractive summary",  # the analysis note, which formatCompactSummary strips
)
DEVICE_PATH = re.compile(r"(?<![\w.~/-])/dev/")  # /dev/null, /dev/tty; not /home/dev/...
NUMBERED_CODE_LINE = re.compile(r"\d+→|^\s*(?:[-*]\s*(?:\[.\]\s*)?|\d+\.\s*)?\d+\t", re.MULTILINE)
# A prompt line that is one of the format's headings ("1. Primary Request and Intent:", "## Goal"): the format
# itself, which the summary must repeat.
FORMAT_HEADING = re.compile(r"^\s*(?:#+ .*|(?:\d+\.\s+)?[\w &,()/-]+:)\s*$")
KLAUDE_PREFIX_HEADINGS = ("## Original Request", "## Early Progress", "## Context for Suffix")


def _main(records: Sequence[object]) -> list[Message]:
    return [
        r for r in records if isinstance(r, Message) and r.agent == MAIN and r.kind not in ("bookkeeping", "unknown")
    ]


def _parsed(path: Path, parser: ClaudeCodeParser | CodexParser | KhaelorParser) -> tuple[list[Message], SessionInfo]:
    with path.open("rb") as handle:
        messages = _main(list(parser.parse(handle)))
    return messages, parser.info


def sessions() -> Iterator[tuple[str, Path]]:
    for path in sorted(CLAUDE_SAMPLES.glob("*.jsonl")):
        yield "claude-code", path
    for path in sorted((KLAUDE_SAMPLES / "dot-klaude" / "projects").glob("*/sessions/*/events.jsonl")):
        yield "klaude-code", path
    for path in sorted(KHAELOR_SAMPLES.glob("*.jsonl")):
        yield "khaelor", path
    for path in sorted(CODEX_SAMPLES.glob("*.jsonl")):
        yield "codex", path


def load(agent: str, path: Path) -> tuple[list[Message], Strategy]:
    overrides: dict[str, object] = {}
    if agent == "klaude-code":
        _, records = parse_session(path.parent)
        messages = history_messages(records)
        info = None
        overrides = {"keep_recent_tokens": 500}  # a middle to summarise in every sample
    elif agent == "khaelor":
        messages, info = _parsed(path, KhaelorParser())
        overrides = {"protect_tail_tokens": 300}
    else:
        messages, info = _parsed(path, ClaudeCodeParser() if agent == "claude-code" else CodexParser())
    return messages, build_strategy(agent, info=info, overrides=overrides)


def offline_summary(messages: list[Message], strategy: Strategy) -> tuple[dict[str, str], str, list[str]] | None:
    """The offline replies by request kind, the agent's final summary, and the prompt lines sent with them."""
    plan = plan_preview(messages, strategy=strategy)
    if not plan.summarizer.requests:
        return None
    replies = {
        r.kind: OfflineSummarizer().summarize(r.summary_request(model="offline")).text for r in plan.summarizer.requests
    }
    prompt_lines = [
        line.strip()
        for r in plan.summarizer.requests
        for line in (r.system + "\n" + r.instructions).splitlines()
        if len(line.strip()) >= 25 and not FORMAT_HEADING.match(line)
    ]
    return replies, plan.final_summary(replies), prompt_lines


def assert_clean(summary: str, prompt_lines: list[str], where: str) -> None:
    assert not any(text in summary for text in TEMPLATE_TEXT), where
    assert not [line for line in prompt_lines if line in summary], where
    assert not DEVICE_PATH.search(summary), where
    assert not NUMBERED_CODE_LINE.search(summary), where


SESSIONS = list(sessions())


@pytest.mark.parametrize(
    ("agent", "path"), SESSIONS, ids=[f"{a}:{p.parent.name[:8]}/{p.name[:24]}" for a, p in SESSIONS]
)
def test_offline_summaries_on_every_sample_are_in_the_agents_own_format_and_clean(agent: str, path: Path) -> None:
    messages, strategy = load(agent, path)
    made = offline_summary(messages, strategy)
    if made is None:
        # The agent itself has nothing to compact at the end (a compaction just happened): take an earlier point.
        assert strategy.select_cut(messages) is None, path
        made = offline_summary(messages[: len(messages) * 2 // 3], strategy)
    if made is None:
        assert len(messages) < 5, f"{path.name}: a real session with nothing to summarise"
        return
    replies, summary, prompt_lines = made
    assert summary.strip()
    assert_clean(summary, prompt_lines, path.name)
    if agent == "claude-code":
        raw = replies["compact"]
        inside = re.search(r"<summary>\n([\s\S]*)\n</summary>\Z", raw)
        assert inside is not None, raw[:200]
        headings = re.findall(r"^(\d)\. ([^:\n]+):$", inside.group(1), re.MULTILINE)
        assert headings == [(str(n), name) for n, name in enumerate(COMPACT_SUMMARY_SECTIONS, start=1)]
        assert summary.startswith("Summary:\n1. Primary Request and Intent:")  # formatCompactSummary
        assert all(s.state != "missing" for s in sections(summary, strategy="claude-code"))
    elif agent == "klaude-code":
        if {"history", "update_history"} & set(replies):
            assert [s.state for s in sections(summary, strategy="klaude-code")].count("missing") == 0
            assert [s.name for s in sections(summary, strategy="klaude-code")] == list(KLAUDE_SECTIONS)
        if "task_prefix" in replies:
            assert all(f"\n{heading}\n" in summary for heading in KLAUDE_PREFIX_HEADINGS)
        assert "\n<read-files>\n" in summary or "\n<modified-files>\n" in summary  # klaude's file-operation blocks
    elif agent == "khaelor":
        checkpoint = parse_checkpoint(summary)
        assert checkpoint is not None and checkpoint.objective and checkpoint.current_state
    else:
        names = MEMENTO_SECTIONS if strategy.prompt() == MEMENTO_PROMPT else HANDOFF_SECTIONS  # type: ignore[attr-defined]
        reply = replies["compact"]
        assert re.findall(r"^## (.+)$", reply, re.MULTILINE) == list(names)
        assert reply in summary and (summary == reply or summary.startswith(SUMMARY_PREFIX))


def test_the_samples_offline_summaries_carry_files_requests_and_errors() -> None:
    # Not empty shells: across the samples the sections hold files read or written, requests, and errors.
    found = {"files": 0, "requests": 0, "errors": 0}
    for agent, path in SESSIONS:
        if agent != "claude-code":
            continue
        made = offline_summary(*load(agent, path))
        if made is None:
            continue
        bodies = {s.name: s.body for s in sections(made[1], strategy="claude-code")}
        found["files"] += "(none found)" not in bodies["Files and Code Sections"]
        found["requests"] += "(none found)" not in bodies["All user messages"]
        found["errors"] += "(none found)" not in bodies["Errors and fixes"]
    assert found["files"] >= 5 and found["requests"] >= 5 and found["errors"] >= 2, found
