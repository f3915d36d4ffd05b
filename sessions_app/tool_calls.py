"""A tool call as the transcript shows it: what it works on (its folded line's target), for an edit or a patch its
diff, and otherwise its input made readable (a shell call's command line, a subagent's task and prompt, any other
input as indented JSON). All are read from the call's whole stored input, never from a page's cut preview (a cut
input is not JSON): the transcript page, its JSON twin and the HTML export all take them from here.

Which tools edit, patch or run a command, and which input keys hold what, are the agents' tool roles (their profiles,
read through the registry); a rendered block does not know its agent, so every agent's roles apply.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import orjson

from compaction.agents import ToolRoles
from compaction.formats.registry import all_tool_roles

TARGET_CHARS = 90  # a folded tool call's target (a path, a command) is cut here; the call opens to show it whole
# A page shows this many diff lines of one call, then "show all" with the diff's size (the whole diff on request,
# and in the HTML export): a file written whole can be a diff of tens of thousands of lines.
DIFF_ROWS = 400

# Line pairs difflib may compare for one replacement: past it (two long texts that differ throughout, where difflib's
# time grows with the product) the part between the common head and tail is shown replaced whole, still a true diff.
# About 0.1 s on a 2-core machine under load; a small edit in a long file stays exact whatever its length.
MAX_COMPARE = 1_000_000

DiffRows = list[tuple[str, str]]  # (css class, line): "hunk", "add", "del", "file" or "" for context

_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_PATCH_ENVELOPE = ("*** Begin Patch", "*** End Patch", "*** End of File")
_PATCH_FILE_LINE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def patch_text(text: str, tool_name: str, *, tools: ToolRoles | None = None) -> str:
    """The patch of a patch tool's call (the freeform tool's input, its patch key, or a shell call's
    ``[patch tool, patch]`` command: before its freeform tool, Codex ran ``["apply_patch", "<patch>"]``,
    docs/formats/codex.md); "" for any other call."""
    tools = tools or all_tool_roles()
    if tool_name not in tools.patch and tool_name not in tools.shell:
        return ""
    value = _json_object(text)
    if value is None:
        return text if tool_name in tools.patch else ""
    if tool_name in tools.patch:
        return next((value[k] for k in tools.patch_keys if isinstance(value.get(k), str)), "")
    for key in tools.command_keys:
        command = value.get(key)
        if (
            isinstance(command, list)
            and len(command) == 2
            and command[0] in tools.patch
            and isinstance(command[1], str)
        ):
            return command[1]
    return ""


def patch_rows(patch: str) -> DiffRows:
    """An apply_patch envelope as diff lines: the envelope's own lines left out, each file named once ("update a.py")
    as the diff's heading, hunks, additions and deletions marked."""
    rows: DiffRows = []
    for line in str(patch).splitlines():
        if line.strip() in _PATCH_ENVELOPE:
            continue
        named = _PATCH_FILE_LINE.match(line)
        if named:
            rows.append(("file", f"{named.group(1).lower()} {named.group(2)}"))
        elif line.startswith("*** Move to: "):
            rows.append(("file", f"moved to {line.removeprefix('*** Move to: ')}"))
        else:
            rows.append((_line_class(line), line))
    return rows


def _line_class(line: str) -> str:
    return "hunk" if line.startswith("@@") else "add" if line[:1] == "+" else "del" if line[:1] == "-" else ""


def _first_string(value: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((value[k] for k in keys if isinstance(value.get(k), str)), None)


def edit_rows(value: dict[str, Any], *, tools: ToolRoles) -> DiffRows | None:
    """An edit tool's input as unified diff lines without file headers (the file is on the call's folded line);
    None when the input has no shape the agents' edit keys describe.

    The shape says the kind of edit: a list of replacements, one replacement (old and new text), or a whole file
    (or notebook cell) written (its content, all added).
    """
    edits: list[tuple[Any, Any]]  # (old, new) as the JSON has them; checked to be strings below
    listed = next((value[k] for k in tools.edits_keys if isinstance(value.get(k), list)), None)
    if listed is not None:
        edits = [
            (_first_string(e, tools.old_keys), _first_string(e, tools.new_keys)) for e in listed if isinstance(e, dict)
        ]
    elif any(k in value for k in tools.old_keys + tools.new_keys):
        edits = [(_first_string(value, tools.old_keys) or "", _first_string(value, tools.new_keys) or "")]
    else:
        content = _first_string(value, tools.content_keys)
        if content is None:
            return None
        edits = [("", content)]
    rows: DiffRows = []
    for old, new in edits:
        if not isinstance(old, str) or not isinstance(new, str):
            return None
        rows.extend((_line_class(line), line) for line in _unified(old.splitlines(), new.splitlines()))
    return rows


def _unified(a: list[str], b: list[str], context: int = 3) -> list[str]:
    """Unified diff lines without file headers; bounded work (``MAX_COMPARE``)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if (len(a) - head - tail) * (len(b) - head - tail) <= MAX_COMPARE:
        diff = difflib.unified_diff(a, b, lineterm="", n=context)
        return [line for line in diff if not line.startswith(("---", "+++"))]
    start, a_end, b_end = max(head - context, 0), len(a) - tail, len(b) - tail
    after = min(tail, context)
    lines = [f"@@ -{start + 1},{a_end + after - start} +{start + 1},{b_end + after - start} @@"]
    lines += [" " + line for line in a[start:head]]
    lines += ["-" + line for line in a[head:a_end]] + ["+" + line for line in b[head:b_end]]
    lines += [" " + line for line in a[a_end : a_end + after]]
    return lines


def tool_diff(text: str, tool_name: str) -> DiffRows | None:
    """A call's diff from its whole input: a patch (a patch tool's, or one sent as a shell command) or an edit;
    None for a call that is neither (it shows its input)."""
    tools = all_tool_roles()
    patch = patch_text(text, tool_name, tools=tools)
    if patch:
        return patch_rows(patch)
    if tool_name not in tools.edit:
        return None
    value = _json_object(text)
    return edit_rows(value, tools=tools) if value is not None else None


def can_diff(tool_name: str) -> bool:
    """Whether a call of this tool may be drawn as a diff (an edit or a patch tool; a shell call only once its input
    is read whole)."""
    tools = all_tool_roles()
    return tool_name in tools.edit or tool_name in tools.patch


@dataclass(frozen=True, slots=True)
class InputView:
    """A call's input as read: ``text`` of ``kind`` "command" (the command line), "prompt" (a subagent's prompt,
    its task in ``description``) or "json" (the input indented; the input as stored when it is not JSON); a command's
    other input fields (its folder, its timeout, its description) in ``extra``, "key: value" each."""

    kind: str
    text: str
    description: str = ""
    extra: str = ""


def _command_line(value: dict[str, Any], *, tools: ToolRoles) -> str:
    """The command line of a shell call's input: a command key's string, or its argv (``["bash", "-lc", "the
    command"]``: the command line is the last word of a shell's argv); "" when none."""
    for key in tools.command_keys:
        command = value.get(key)
        if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
            command = command[-1] if len(command) == 3 and command[1].startswith("-") else " ".join(command)
        if isinstance(command, str) and command:
            return command
    return ""


def input_view(text: str, tool_name: str) -> InputView:
    """A call's whole input as the transcript shows it when it is no diff."""
    tools = all_tool_roles()
    value = _json_object(text)
    if value is None:
        return InputView(kind="json", text=text)
    if tool_name in tools.spawn:
        prompt, description = value.get("prompt"), value.get("description")
        if isinstance(prompt, str):
            return InputView(
                kind="prompt", text=prompt, description=description if isinstance(description, str) else ""
            )
    if tool_name in tools.shell:
        command = _command_line(value, tools=tools)
        if command:
            rest = {k: v for k, v in value.items() if k not in tools.command_keys and v not in (None, "", [], {})}
            extra = " \u00b7 ".join(
                f"{k}: {v if isinstance(v, str) else orjson.dumps(v).decode()}" for k, v in rest.items()
            )
            return InputView(kind="command", text=command, extra=extra)
    return InputView(kind="json", text=orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def tool_target(text: str, tool_name: str) -> str:
    """What a tool call works on, for its folded line: the file a path key names, the command line, the files a
    patch names, or else the input's first string value; "" when the input says none."""
    tools = all_tool_roles()
    value = _json_object(text)
    if value is None:
        if tool_name in tools.patch:
            return _cut(", ".join(_PATCH_FILE.findall(text)))
        # The head of a giant input (the rest is not read for a page): the first path key it names.
        named = (re.search(rf'"{re.escape(key)}"\s*:\s*"((?:[^"\\]|\\.)+)"', text) for key in tools.path_keys)
        found = next((m for m in named if m), None)
        return _cut(_json_string(found.group(1))) if found else ""
    if tool_name in tools.spawn and isinstance(value.get("description"), str) and value["description"].strip():
        return _cut(" ".join(value["description"].split()))  # a subagent's task, as its spawning call words it
    for key in tools.path_keys:
        if isinstance(value.get(key), str) and value[key]:
            return _cut(value[key])
    patch = patch_text(text, tool_name, tools=tools)
    if patch:
        return _cut(", ".join(_PATCH_FILE.findall(patch)))  # a patch sent as a shell call, or in a patch key
    command = _command_line(value, tools=tools)
    if command:
        return _cut(" ".join(command.split()))
    listed = _listed_target(value, tool_name, tools=tools)
    if listed:
        return _cut(listed)
    first = next((v for v in value.values() if isinstance(v, str) and v.strip()), "")
    return _cut(" ".join(first.split()))


def _listed_target(value: dict[str, Any], tool_name: str, *, tools: ToolRoles) -> str:
    """A call whose input is a list: the task list a todo tool writes ("3 tasks, 1 in progress": ``todos`` of
    {content, status}) or the first question an ask tool asks (``questions`` of {question})."""
    if tool_name in tools.todo and isinstance(value.get("todos"), list):
        todos = [t for t in value["todos"] if isinstance(t, dict)]
        doing = [t for t in todos if t.get("status") == "in_progress"]
        done = sum(1 for t in todos if t.get("status") == "completed")
        said = f"{len(todos)} task{'s' if len(todos) != 1 else ''}, {done} done"
        content = doing[0].get("content") if doing else None
        return f"{said}; doing: {' '.join(content.split())}" if isinstance(content, str) else said
    if tool_name in tools.ask and isinstance(value.get("questions"), list):
        questions = [
            q["question"] for q in value["questions"] if isinstance(q, dict) and isinstance(q.get("question"), str)
        ]
        more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
        return f"{' '.join(questions[0].split())}{more}" if questions else ""
    return ""


def _json_string(escaped: str) -> str:
    try:
        value = orjson.loads(f'"{escaped}"')
    except orjson.JSONDecodeError:
        return escaped
    return value if isinstance(value, str) else escaped


def _cut(text: str) -> str:
    return text if len(text) <= TARGET_CHARS else text[: TARGET_CHARS - 1] + "\u2026"
