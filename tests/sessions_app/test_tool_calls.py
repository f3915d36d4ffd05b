"""A tool call as the transcript shows it (sessions_app/tool_calls.py): its target and its diff, built from the whole
stored input whatever its length, for every agent's edit and patch tool shape."""

from __future__ import annotations

import orjson
import pytest
from django.urls import reverse

from sessions_app import html_export, models, services, tool_calls
from sessions_app.selectors.transcript import TRUNCATE_CHARS, render_block
from sessions_app.tool_calls import DIFF_ROWS
from tests.helpers.claude_code_lines import tool_call, user, write

LONG = "".join(f"line {i}\n" for i in range(300))  # well past the 2,000-character preview
PATCH = "*** Begin Patch\n*** Update File: src/a.py\n@@\n" + "".join(f"+{line}\n" for line in LONG.splitlines())
PATCH += "-the last old line\n*** End Patch"


def _call(tool: str, data: object) -> dict[str, object]:
    text = data if isinstance(data, str) else orjson.dumps(data).decode()
    return {"kind": "tool_use", "tool_name": tool, "tool_id": "t1", "text": text}


# Each agent's edit tool shape as the shared samples record it (KHAELOR's write_file assumed: no sample has one).
SHAPES = {
    "Claude Code / klaude-code Edit": (
        _call("Edit", {"replace_all": False, "file_path": "/a.py", "old_string": LONG, "new_string": LONG + "end"}),
        "/a.py",
        ("add", "+end"),
    ),
    "Claude Code MultiEdit": (
        _call("MultiEdit", {"file_path": "/a.py", "edits": [{"old_string": LONG, "new_string": LONG + "end"}]}),
        "/a.py",
        ("add", "+end"),
    ),
    "Claude Code / klaude-code Write": (
        _call("Write", {"file_path": "/n.txt", "content": LONG}),
        "/n.txt",
        ("add", "+line 299"),
    ),
    "Claude Code NotebookEdit": (
        _call(
            "NotebookEdit", {"notebook_path": "/n.ipynb", "cell_number": 3, "new_source": LONG, "edit_mode": "replace"}
        ),
        "/n.ipynb",
        ("add", "+line 299"),
    ),
    "KHAELOR edit_file": (
        _call("edit_file", {"path": "l/m.py", "old": LONG, "new": LONG + "end"}),
        "l/m.py",
        ("add", "+end"),
    ),
    "Codex apply_patch (freeform)": (_call("apply_patch", PATCH), "src/a.py", ("del", "-the last old line")),
    "Codex shell apply_patch": (
        _call("shell", {"command": ["apply_patch", PATCH]}),
        "src/a.py",
        ("del", "-the last old line"),
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_long_edit_reads_as_a_diff_of_its_whole_input_with_its_target(shape: str) -> None:
    raw, target, last_row = SHAPES[shape]
    assert len(str(raw["text"])) > TRUNCATE_CHARS
    block = render_block(0, raw)
    assert block.diff is not None and last_row in block.diff, shape
    assert block.target == target
    assert not any(line.startswith(("---", "+++", "*** Begin")) for _, line in block.diff)


def test_a_short_khaelor_edit_is_a_diff_too_and_other_tools_have_none() -> None:
    block = render_block(0, _call("edit_file", {"path": "m.py", "old": "session.query(", "new": "session.execute("}))
    assert block.diff == [("hunk", "@@ -1 +1 @@"), ("del", "-session.query("), ("add", "+session.execute(")]
    assert render_block(0, _call("Read", {"file_path": "/a.py"})).diff is None
    assert render_block(0, _call("Bash", {"command": "ls"})).diff is None


def test_other_long_calls_read_from_their_whole_input_as_a_command_a_prompt_or_indented_json() -> None:
    heredoc = "cat <<'EOF' > notes.md\n" + LONG + "EOF"
    shell = render_block(0, _call("shell", {"command": ["bash", "-lc", heredoc], "workdir": "/w"}))
    assert (shell.view_kind, shell.view, shell.view_chars) == ("command", heredoc[:TRUNCATE_CHARS], len(heredoc))
    assert shell.view_extra == "workdir: /w" and shell.cut
    assert render_block(0, _call("Bash", {"command": heredoc}), full=True).view == heredoc
    task = render_block(0, _call("Task", {"subagent_type": "x", "description": "Mock it up", "prompt": LONG}))
    assert (task.view_kind, task.description, task.target) == ("prompt", "Mock it up", "Mock it up")
    assert task.view == LONG[:TRUNCATE_CHARS] and task.cut
    other = render_block(0, _call("mcp__pencil__batch_design", {"filePath": "d.pen", "operations": LONG}))
    assert other.view_kind == "json" and other.view.startswith('{\n  "filePath": "d.pen",') and other.cut
    assert other.target == "d.pen"


def test_the_head_of_a_giant_input_still_names_its_file() -> None:
    head = '{"replace_all":false,"file_path":"/src/a \\"b\\".py","old_string":"x'
    assert tool_calls.tool_target(head, "Edit") == '/src/a "b".py'


def test_a_todo_list_and_a_question_name_themselves_on_the_folded_line() -> None:
    todos = [{"content": "Fix  it", "status": "in_progress"}, {"content": "Test", "status": "completed"}]
    assert render_block(0, _call("TodoWrite", {"todos": todos})).target == "2 tasks, 1 done; doing: Fix it"
    questions = [{"question": "Which one?", "header": "h", "options": []}, {"question": "And?"}]
    assert render_block(0, _call("AskUserQuestion", {"questions": questions})).target == "Which one? (+1 more)"


def test_a_very_long_diff_is_cut_with_its_size_and_whole_on_request() -> None:
    raw = _call("Write", {"file_path": "/big.txt", "content": LONG * 5})
    cut, whole = render_block(0, raw), render_block(0, raw, full=True)
    assert whole.diff is not None and cut.diff is not None
    assert len(whole.diff) == whole.diff_lines == 1501 and cut.diff_lines == 1501  # the hunk line and 1,500 lines
    assert len(cut.diff) == DIFF_ROWS and cut.diff_cut and not whole.diff_cut
    assert cut.diff == whole.diff[:DIFF_ROWS]


def test_two_long_texts_that_differ_throughout_are_compared_in_bounded_time_and_still_a_true_diff(monkeypatch) -> None:
    old = "keep 1\nkeep 2\nkeep 3\nkeep 4\na\nb\nc\nkeep 5\nkeep 6\n"
    new = "keep 1\nkeep 2\nkeep 3\nkeep 4\nx\ny\nkeep 5\nkeep 6\n"
    monkeypatch.setattr(tool_calls, "MAX_COMPARE", 5)  # 3 x 2 lines between the common head and tail: past it
    rows = render_block(0, _call("Edit", {"file_path": "/f", "old_string": old, "new_string": new})).diff or []
    assert rows[0] == ("hunk", "@@ -2,8 +2,7 @@")
    assert [line[1:] for cls, line in rows[1:] if cls != "add"] == old.splitlines()[1:]
    assert [line[1:] for cls, line in rows[1:] if cls != "del"] == new.splitlines()[1:]


@pytest.mark.django_db
def test_the_page_its_json_twin_and_the_html_export_show_the_same_diff(client_in, tmp_path) -> None:
    edit = {"file_path": "/home/me/proj/a.py", "old_string": LONG, "new_string": LONG + "the new last line"}
    path = write(
        tmp_path,
        "s-1.jsonl",
        user("u1", None, "edit it"),
        tool_call("a1", "u1", "msg_1", "toolu_1", ctx=1000, name="Edit", tool_input=edit),
    )
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    session = models.Session.objects.get(pk=outcome.session)
    body = client_in.get(f"/sessions/{session.pk}/").content.decode()
    row = '<span class="add">+the new last line</span>'
    assert row in body and "old_string" not in body  # a diff, not the cut JSON
    assert '<span class="tool-target quoted">/home/me/proj/a.py</span>' in body
    messages = client_in.get(f"/sessions/{session.pk}.json").json()["messages"]
    call = next(b for m in messages for b in m["blocks"] if b["kind"] == "tool_use")
    assert ["add", "+the new last line"] in call["diff"] and call["target"] == "/home/me/proj/a.py"
    seq = next(m["seq"] for m in messages if m["blocks"][0]["kind"] == "tool_use")
    whole = client_in.get(reverse("sessions:block", args=[session.pk, seq, 0])).content.decode()
    assert row in whole  # "show all" loads the same diff, and so does its JSON
    url = reverse("sessions:block", args=[session.pk, seq, 0])
    assert client_in.get(url, {"format": "json"}).json()["diff"] == call["diff"]
    exported = "".join(html_export.export_html(session=session))
    assert row in exported and "old_string" not in exported
    page_diff = body.split('<pre class="diff">')[1].split("</pre>")[0]
    assert page_diff in exported  # the same rows, from the same function
