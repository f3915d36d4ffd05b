"""A summary request as the summarizer receives it, for the summarizer tests and the run tests."""

from __future__ import annotations

from compaction.summarize import (
    SummaryRequest,
)

SONNET = "claude-sonnet-5"


def make_request(*, rounds: list[str] | None = None, model: str = SONNET) -> SummaryRequest:
    rounds = rounds if rounds is not None else ["User: fix the login bug", "Assistant: I read auth/login.py"]
    return SummaryRequest(
        system="You are a helpful AI assistant tasked with summarizing conversations.",
        transcript="\n\n".join(rounds),
        rounds=rounds,
        model=model,
        max_tokens=20_000,
        instructions="Summarise the conversation so far.",
    )
