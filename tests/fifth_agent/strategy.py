"""The fifth agent's strategy: Claude Code's compaction rules under its own name, with its own summary sections
and no compacted format of its own to export."""

from __future__ import annotations

from compaction.agents import SummaryStructure
from compaction.strategies.claude_code import ClaudeCodeStrategy


class FifthStrategy(ClaudeCodeStrategy):
    name = "fifth-agent"
    label = "Fifth Agent (test)"
    short_label = "Fifth Agent"
    summary_structure = SummaryStructure(sections=("Where we are", "What is next"), heading="markdown")
    export_suffix = None  # type: ignore[assignment]  # no compacted format of its own: export refuses it
