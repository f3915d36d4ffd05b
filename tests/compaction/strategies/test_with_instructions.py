"""A lab variant's instructions reach the summarizer as each agent takes them (compaction.strategies.base)."""

from __future__ import annotations

from compaction.strategies.base import PlannedRequest, with_instructions
from compaction.strategies.claude_code import NO_TOOLS_TRAILER, compact_prompt
from compaction.strategies.registry import build_strategy
from compaction.transcript import SessionInfo

TEXT = "Keep every file path and the failing test names."


def _strategy(name: str):
    return build_strategy(name, info=SessionInfo(format=name), overrides={})


def test_claude_code_takes_them_as_compact_does():
    strategy = _strategy("claude-code")
    request = PlannedRequest(
        kind="compact", system="s", transcript="t", rounds=None, instructions=strategy.prompt(), max_tokens=1
    )
    instructed = with_instructions(request, f"  {TEXT}\n", strategy=strategy)
    assert instructed.instructions == compact_prompt(TEXT)
    assert instructed.instructions.endswith(f"\n\nAdditional Instructions:\n{TEXT}{NO_TOOLS_TRAILER}")
    assert request.instructions == strategy.prompt()  # the preview's request is left as it was
    assert with_instructions(request, "  ", strategy=strategy) is request


def test_the_other_agents_get_the_text_after_their_own_prompt():
    klaude = _strategy("klaude-code")
    blocks = [{"type": "text", "text": "<instructions>summarise</instructions>"}]
    request = PlannedRequest(
        kind="history", system="s", transcript="t", rounds=None, instructions="", max_tokens=1, user_blocks=blocks
    )
    assert with_instructions(request, TEXT, strategy=klaude).user_blocks == [*blocks, {"type": "text", "text": TEXT}]
    khaelor = _strategy("khaelor")
    bare = PlannedRequest(kind="compact", system="s", transcript="t", rounds=None, instructions="", max_tokens=1)
    assert with_instructions(bare, TEXT, strategy=khaelor).instructions == TEXT
    codex = _strategy("codex")
    own = PlannedRequest(
        kind="compact", system="s", transcript="t", rounds=None, instructions=codex.prompt(), max_tokens=1
    )
    assert with_instructions(own, TEXT, strategy=codex).instructions == f"{codex.prompt()}\n\n{TEXT}"
