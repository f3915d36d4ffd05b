"""Markdown of untrusted transcript text: rendered, highlighted, and inert."""

from __future__ import annotations

import orjson
import pytest
from django.test import Client
from django.urls import reverse

from sessions_app import models, services
from sessions_app.rendering import markdown_html
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.tool_calls import patch_rows, tool_diff, tool_target
from tests.conftest import CLAUDE_SAMPLES


def test_a_reply_renders_headings_lists_and_highlighted_code() -> None:
    html = markdown_html("# Plan\n\n- first\n- second\n\n```python\nx = 1  # one\n```\n")
    assert "<h1>Plan</h1>" in html
    assert "<ul>\n<li>first</li>" in html
    assert '<code class="language-python"><span class="n">x</span>' in html  # Pygments token classes


def test_raw_html_and_script_urls_stay_inert() -> None:
    html = markdown_html(
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n[a](javascript:alert(3)) ![i](https://x.test/i.png)'
    )
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_an_unknown_fence_language_stays_plain_text() -> None:
    html = markdown_html("```no-such-language\n<b>x</b>\n```")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html


def test_edit_calls_read_as_diffs() -> None:
    edit = orjson.dumps({"file_path": "/a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"}).decode()
    rows = tool_diff(edit, "Edit") or []
    assert ("del", "-y = 2") in rows and ("add", "+y = 3") in rows and ("", " x = 1") in rows
    multi = orjson.dumps({"file_path": "/a.py", "edits": [{"old_string": "a", "new_string": "b"}]}).decode()
    assert ("add", "+b") in (tool_diff(multi, "MultiEdit") or [])
    assert ("add", "+hello") in (
        tool_diff(orjson.dumps({"file_path": "/n.txt", "content": "hello"}).decode(), "Write") or []
    )
    assert tool_diff(edit, "Read") is None and tool_diff(edit[:20], "Edit") is None  # other tools, a cut input
    assert not any(line.startswith(("---", "+++")) for _, line in rows)  # the file is on the call's folded line


def test_a_patch_reads_as_a_diff_without_its_envelope() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    assert patch_rows(patch) == [("file", "update a.py"), ("hunk", "@@"), ("del", "-x = 1"), ("add", "+x = 2")]


@pytest.mark.django_db
def test_the_empty_list_under_filters_offers_to_clear_them(client_in: Client) -> None:
    body = client_in.get(reverse("sessions:list"), {"q": "nothing-matches-this"}).content.decode()
    assert 'class="clear-filters"' in body
    assert 'class="clear-filters"' not in client_in.get(reverse("sessions:list")).content.decode()


@pytest.mark.django_db
def test_peak_bars_are_banded_by_the_sessions_own_thresholds(client_in: Client) -> None:
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_short.jsonl"])
    session = models.Session.objects.get()
    thresholds = threshold_selectors.thresholds_for(session=session)
    assert thresholds["warning"] and thresholds["autocompact"]
    body = client_in.get(reverse("sessions:list")).content.decode()
    assert f'low="{thresholds["warning"]}" high="{thresholds["autocompact"]}" optimum="0"' in body


def test_the_transcript_page_shows_edit_calls_as_diffs(client_in: Client) -> None:
    from sessions_app import services
    from tests.conftest import CLAUDE_SAMPLES

    outcome = services.import_file(path=CLAUDE_SAMPLES / "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl")
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.index_search(session_id=outcome.session)  # what the task worker runs after a large import (PostgreSQL)
    body = client_in.get(f"/sessions/{outcome.session}/", {"q": "Demo/CLAUDE.md"}).content.decode()
    # Folded to one line (tool, target), no tool id; the diff opens on its first hunk, without ---/+++ headers.
    assert '<strong class="tool-name">Edit</strong> <span class="tool-target quoted">' in body
    assert '<pre class="diff"><span class="hunk">@@' in body and '<span class="hunk">---' not in body
    assert "toolu_" not in body.split('class="messages"')[1].split("</summary>")[0]


def test_a_tool_calls_target_is_its_file_command_patch_or_task() -> None:
    def target(tool: str, data: object) -> str:
        return tool_target(orjson.dumps(data).decode(), tool)

    assert target("Read", {"file_path": "/src/app.py", "limit": 20}) == "/src/app.py"
    assert target("shell", {"command": ["bash", "-lc", "pytest  -q"]}) == "pytest -q"
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"
    assert target("shell", {"command": ["apply_patch", patch]}) == "a.py"
    assert tool_target(patch, "apply_patch") == "a.py"
    assert target("Task", {"subagent_type": "general-purpose", "description": "Check the config"}) == "Check the config"
    assert len(target("Bash", {"command": "x" * 500})) == 90
