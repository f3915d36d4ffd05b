"""A tool call as the transcript shows it: what it works on (its folded line's target) and, for an edit or a patch,
its diff. Both are read from the call's whole stored input, never from a page's cut preview (a cut input is not
JSON): the transcript page, its JSON twin and the HTML export all take them from here.

Which tools edit, patch or run a command, and which input keys hold what, are the agents' tool roles (their profiles,
read through the registry); a rendered block does not know its agent, so every agent's roles apply.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import orjson

from compaction.agents import ToolRoles
from compaction.formats.registry import all_tool_roles

TARGET_CHARS = 90  # a folded tool call's target (a path, a command) is cut here; the call opens to show it whole
# A page shows this many diff lines of one call, then "show all" with the diff's size (the whole diff on request,
# and in the HTML export): a file written whole can be a diff of tens of thousands of lines.
DIFF_ROWS = 400

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
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
            if not line.startswith(("---", "+++")):
                rows.append((_line_class(line), line))
    return rows


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


def tool_target(text: str, tool_name: str) -> str:
    """What a tool call works on, for its folded line: the file a path key names, the command line, the files a
    patch names, or else the input's first string value; "" when the input says none."""
    tools = all_tool_roles()
    value = _json_object(text)
    if value is None:
        files = _PATCH_FILE.findall(text) if tool_name in tools.patch else []
        return _cut(", ".join(files))
    if tool_name in tools.spawn and isinstance(value.get("description"), str) and value["description"].strip():
        return _cut(" ".join(value["description"].split()))  # a subagent's task, as its spawning call words it
    for key in tools.path_keys:
        if isinstance(value.get(key), str) and value[key]:
            return _cut(value[key])
    patch = patch_text(text, tool_name, tools=tools)
    if patch:
        return _cut(", ".join(_PATCH_FILE.findall(patch)))  # a patch sent as a shell call, or in a patch key
    for key in tools.command_keys:
        command = value.get(key)
        if isinstance(command, list) and all(isinstance(part, str) for part in command):
            # ["bash", "-lc", "the command"]: the command line is the last word of a shell's argv
            command = command[-1] if len(command) == 3 and command[1].startswith("-") else " ".join(command)
        if isinstance(command, str) and command:
            return _cut(" ".join(command.split()))
    first = next((v for v in value.values() if isinstance(v, str) and v.strip()), "")
    return _cut(" ".join(first.split()))


def _cut(text: str) -> str:
    return text if len(text) <= TARGET_CHARS else text[: TARGET_CHARS - 1] + "\u2026"
