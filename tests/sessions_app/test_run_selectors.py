from __future__ import annotations

from compaction.strategies.base import PlannedRequest
from sessions_app.selectors.previews import shown_request


def planned(text: str) -> PlannedRequest:
    return PlannedRequest(kind="history", system="s", transcript=text, rounds=None, instructions="", max_tokens=10)


def test_a_short_transcript_is_shown_whole():
    shown = shown_request(planned("abc"), head=10, tail=5)
    assert shown.head.startswith("abc") and shown.hidden == 0 and shown.tail == ""


def test_a_long_transcript_is_shown_as_head_and_tail():
    request = planned("H" * 50 + "M" * 1000 + "T" * 30)
    shown = shown_request(request, head=50, tail=30)
    assert shown.chars == len(request.user_content)
    assert set(shown.head) <= {"H"} and shown.tail.endswith("T" * 30)
    assert shown.hidden == len(request.user_content) - 80
