"""klaude-code 2.8.1's summarizer request where it differs from a naive reading (core/compaction/compaction.py)."""

from __future__ import annotations

from typing import Any

from compaction.strategies.klaude_code import (
    DEVELOPER,
    SYSTEM,
    UPDATE_SUMMARIZATION_PROMPT,
    USER,
    KlaudeCodeStrategy,
    KlaudeParams,
    serialize_items,
)
from tests.compaction.strategies.klaude_items import klaude_assistant, klaude_item, klaude_user, lines_to_messages

IMAGE = {"type": "image_url", "url": "https://example.test/a.png"}


def test_developer_and_system_messages_without_text_are_left_out() -> None:
    # _serialize_conversation appends [Developer] / [System] only when the joined text parts are not empty.
    kinds = [USER, DEVELOPER, DEVELOPER, SYSTEM, DEVELOPER]
    items: list[dict[str, Any]] = [
        {"parts": [{"type": "text", "text": "go"}]},
        {"parts": []},
        {"parts": [IMAGE]},
        {"parts": [{"type": "text", "text": ""}]},
        {"parts": [{"type": "text", "text": "a reminder"}]},
    ]
    assert serialize_items(kinds, items) == "[User]: go\n\n[Developer]: a reminder"


HEAD = [
    klaude_user("go"),
    klaude_assistant(text="first answer"),
    klaude_item("CompactionEntry", summary="S-previous", first_kept_index=2, tokens_before=10),
    klaude_item("SystemMessage", role="system", parts=[{"type": "text", "text": "a system note"}]),
]


def test_a_previous_summary_and_nothing_new_still_sends_the_update_call_on_an_empty_conversation() -> None:
    messages = lines_to_messages([*HEAD, klaude_user("x" * 8000)])
    plan = KlaudeCodeStrategy(KlaudeParams(keep_recent_tokens=1000)).plan(messages)
    assert plan.can_compact and plan.summarized_indices == [] and plan.task_prefix_indices == []
    (request,) = plan.requests
    assert request.kind == "update_history"
    text = "".join(request.parts)
    assert text.startswith("<conversation>\n\n</conversation>\n\n<previous-summary>\nS-previous\n</previous-summary>")
    assert UPDATE_SUMMARIZATION_PROMPT in text and "a system note" not in text


def test_with_a_task_prefix_an_empty_history_reuses_the_previous_summary_and_skips_system_messages() -> None:
    system_in_the_task = klaude_item(
        "SystemMessage", role="system", parts=[{"type": "text", "text": "a task system note"}]
    )
    task = [klaude_user("x" * 4000), system_in_the_task, klaude_assistant(text="y" * 4000, context=5000)]
    messages = lines_to_messages([*HEAD, *task])
    plan = KlaudeCodeStrategy(KlaudeParams(keep_recent_tokens=1000)).plan(messages)
    assert plan.split_task and plan.summarized_indices == []
    assert [r.kind for r in plan.requests] == ["task_prefix"]
    text = "".join(plan.requests[0].parts)
    assert "[User]: xxx" in text and "system note" not in text
