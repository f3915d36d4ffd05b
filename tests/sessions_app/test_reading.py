"""Reading a transcript: tool calls folded to one line, prompts as (safe) markdown, one role label, filter chips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from sessions_app import models, services
from tests.helpers.claude_code_lines import assistant, tool_call, tool_result, user, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(tmp_path: Path) -> models.Session:
    path = write(
        tmp_path,
        "s-1.jsonl",
        user("u1", None, "Please **fix** the bug <script>alert(1)</script>\n\n- in `app.py`"),
        tool_call("a1", "u1", "msg_1", "toolu_reading_1", ctx=2000),
        tool_result("r1", "a1", "toolu_reading_1", "def main():\n    return 1 / 0\n"),
        assistant("a2", "r1", "msg_2", "Fixed the **division**.", ctx=3000),
    )
    services.import_paths(paths=[path])
    return models.Session.objects.get()


def _page(client: Client, session: models.Session, **query: str) -> str:
    return client.get(f"/sessions/{session.pk}/", query).content.decode()


def test_a_tool_call_is_one_folded_line_with_tool_target_size_and_outcome(client_in: Client, session) -> None:
    body = _page(client_in, session)
    call = re.search(r'<details class="block tool-use[^"]*"([^>]*)><summary>(.*?)</summary>', body, re.S)
    assert call is not None
    assert "open" not in call.group(1)  # folded until opened
    line = call.group(2)
    assert "Read" in line and "/src/app.py" in line and "29 chars out" in line and ">ok<" in line
    assert "toolu_reading_1" not in body  # no tool id anywhere a reader looks


def test_a_prompt_is_markdown_and_its_html_stays_text(client_in: Client, session) -> None:
    body = _page(client_in, session)
    assert "Please <strong>fix</strong> the bug &lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<li>in <code>app.py</code></li>" in body and "<script>alert" not in body


def test_the_role_is_named_once(client_in: Client, session) -> None:
    body = _page(client_in, session)
    assert '<span class="who">assistant</span>' in body
    assert '<span class="muted small">assistant</span>' not in body


def test_filter_chips_choose_records_and_keep_their_state_in_the_url(client_in: Client, session) -> None:
    body = _page(client_in, session, show="prompts")
    assert body.count('<li class="msg ') == 1 and "kind-prompt" in body
    chip = re.search(r'<a class="chip on" role="button" aria-pressed="true" data-chip="prompts" href="([^"]*)"', body)
    assert chip is not None and "show=" not in chip.group(1)  # pressing it again shows everything
    tools = re.search(r'data-chip="tools" href="([^"]*)"', body)
    assert tools is not None and "show=prompts%2Ctools" in tools.group(1)
    both = _page(client_in, session, show="prompts,tools")
    assert both.count('<li class="msg ') == 2  # the call, its result under it, and the prompt
    assert "No records of this kind" in _page(client_in, session, show="errors")
