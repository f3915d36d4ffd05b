"""Claude Code's summary request: the summarised messages themselves as Messages API turns, then the compact
prompt (docs/compaction/claude-code.md §2.6 step 3), and the offline reply in the compact prompt's nine sections.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import re

from compaction.strategies.base import Cut
from compaction.strategies.claude_code import (
    COMPACT_SUMMARY_SECTIONS,
    MISSING_TOOL_RESULT,
    SUMMARIZER_SYSTEM_PROMPT,
    ClaudeCodeStrategy,
    api_turns,
    compact_prompt,
)
from compaction.summarize import TRUNCATION_MARKER, build_messages
from compaction.transcript import Block, Message


def message(role: str, kind: str, *blocks: Block, key: str | None = None) -> Message:
    return Message(line=0, role=role, kind=kind, blocks=list(blocks), call_key=key)  # type: ignore[arg-type]


def use(tool_id: str, name: str = "Read", **tool_input: object) -> Block:
    return Block("tool_use", tool_id=tool_id, tool_name=name, tool_input=tool_input)


def result(tool_id: str, text: str, *, error: bool = False) -> Block:
    return Block("tool_result", text=text, tool_id=tool_id, is_error=error)


CONVERSATION = [
    message("user", "prompt", Block("text", "fix the parser in src/parse.py")),
    message("assistant", "assistant", Block("thinking", "SECRET"), Block("text", "Reading it."), key="m1"),
    message("assistant", "assistant", use("t1", file_path="src/parse.py"), key="m1"),
    message("user", "tool_result", result("t1", "     1→def parse(): pass")),
    message("user", "injected", Block("text", "<system-reminder>todo list is empty</system-reminder>")),
    message("assistant", "assistant", use("t2", "Bash", command="pytest 2>/dev/null"), key="m2"),
    message("user", "tool_result", result("t2", "FAILED test_parse.py::test_empty - ValueError", error=True)),
    message("user", "tool_result", result("ghost", "a result whose call is not in the request")),
    message(
        "assistant",
        "assistant",
        Block("image", media_type="image/png"),
        use("t3", "Edit", file_path="src/parse.py"),
        key="m3",
    ),
    message("system", "system", Block("text", "turn took 3 s")),  # never sent
]


def test_the_conversation_goes_as_turns_paired_and_merged_with_the_prompt_last() -> None:
    turns = build_messages([api_turns(CONVERSATION)], truncated=False, instructions=compact_prompt())
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Reading it."},  # earlier thinking is not sent (thinking disabled, §2.6)
        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/parse.py"}},
    ]
    # Tool results first in their user turn, then the reminder the agent injected there.
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]
    assert turns[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "t2", "content": turns[4]["content"][0]["content"], "is_error": True}
    ]  # the result without its call in the request is left out: the API refuses it
    assert turns[5]["content"][0] == {"type": "text", "text": "[image]"}
    # The call the records never answered gets a result, and the compact prompt joins that last user turn.
    assert turns[6]["content"] == [
        {"type": "tool_result", "tool_use_id": "t3", "content": MISSING_TOOL_RESULT},
        {"type": "text", "text": compact_prompt()},
    ]


def test_a_prompt_too_long_retry_and_a_cut_that_starts_on_a_reply_open_with_the_marker() -> None:
    rounds = [api_turns(CONVERSATION[:1]), api_turns(CONVERSATION[1:4])]
    assert build_messages(rounds[1:], truncated=True, instructions="go")[0] == {
        "role": "user",
        "content": [{"type": "text", "text": TRUNCATION_MARKER}],
    }
    assert build_messages(rounds[1:], truncated=False, instructions="go")[0]["content"][0]["text"] == TRUNCATION_MARKER
    assert build_messages(rounds, truncated=False, instructions="go")[0]["content"][0]["text"].startswith("fix the")


def test_the_plan_sends_the_sessions_model_the_fallback_system_prompt_and_one_round_per_response() -> None:
    strategy = ClaudeCodeStrategy()
    messages = [*CONVERSATION]
    messages[1] = message("assistant", "assistant", Block("text", "Reading it."), key="m1")
    messages[1].model = "claude-sonnet-4-5-20250929"
    assert strategy.summary_model(messages) == "claude-sonnet-4-5-20250929"
    (request,) = strategy.summarizer_plan(
        messages, Cut(0, len(messages), len(messages)), prune=[], by_hand=False
    ).requests
    assert request.system == SUMMARIZER_SYSTEM_PROMPT
    assert request.round_messages is not None and len(request.round_messages) == len(request.rounds or []) == 4
    assert request.api_messages == build_messages(
        request.round_messages, truncated=False, instructions=compact_prompt()
    )


def test_the_offline_reply_is_the_nine_sections_filled_from_the_messages_only() -> None:
    strategy = ClaudeCodeStrategy()
    (request,) = strategy.summarizer_plan(CONVERSATION, Cut(0, 10, 10), prune=[], by_hand=False).requests
    reply = request.offline_reply or ""
    summary = reply.split("<summary>\n", 1)[1]
    assert re.findall(r"^\d\. ([^:\n]+):$", summary, re.MULTILINE) == list(COMPACT_SUMMARY_SECTIONS)
    assert "   fix the parser in src/parse.py" in summary  # the request
    assert "- src/parse.py (written)" in summary  # read, then edited: listed once
    assert "ValueError" in summary.split("4. Errors and fixes:")[1].split("5.")[0]
    assert "- Ran: pytest (failed)" in summary  # the command, without its /dev/null
    assert "/dev/" not in reply and "→" not in reply and "system-reminder" not in reply and "SECRET" not in reply


def test_an_earlier_summary_in_the_range_is_carried_forward() -> None:
    earlier = (
        "This session is being continued from a previous conversation that ran out of context.\n\nSummary:\n"
        "1. Primary Request and Intent:\n   Port the ledger to SQLAlchemy 2.0\n\n"
        "6. All user messages:\n    - Port the ledger to SQLAlchemy 2.0\n    - keep the tests green\n\n"
        "7. Pending Tasks:\n   - update docs/migration.md\n\n8. Current Work:\n   models.py"
    )
    messages = [message("user", "compact_summary", Block("text", earlier)), *CONVERSATION[:4]]
    (request,) = ClaudeCodeStrategy().summarizer_plan(messages, Cut(0, 5, 5), prune=[], by_hand=False).requests
    reply = request.offline_reply or ""
    intent = reply.split("1. Primary Request and Intent:\n")[1].split("\n\n2.")[0]
    assert intent.startswith("   Port the ledger to SQLAlchemy 2.0\n   Later requests:\n   - fix the parser")
    user_messages = reply.split("6. All user messages:\n")[1].split("\n\n7.")[0]
    assert user_messages.splitlines() == [
        "    - Port the ledger to SQLAlchemy 2.0",
        "    - keep the tests green",
        "    - fix the parser in src/parse.py",
    ]
    assert "   - update docs/migration.md" in reply.split("7. Pending Tasks:\n")[1].split("\n\n8.")[0]
