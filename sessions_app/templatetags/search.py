"""Search matches marked in escaped text, and tool inputs made readable."""

from __future__ import annotations

import difflib
import re
from typing import Any

import orjson
from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from compaction.formats.registry import all_tool_roles
from sessions_app.search_syntax import parse_query

register = template.Library()


@register.filter
def highlight(text: str, q: str) -> SafeString:
    """``text`` escaped, each occurrence of what the query looked for wrapped in <mark> (case-insensitive): its
    positive items as the query parsed them (``search_syntax``), never an ``or`` or an excluded word."""
    text = str(text)
    found = parse_query(q or "").marked
    if not found:
        return escape(text)
    # Words match whole (a lone "in" must not light up every "inside"); the phrase anywhere, as SQLite finds it.
    pattern = re.compile("|".join(re.escape(t) if " " in t else rf"\b{re.escape(t)}\b" for t in found), re.IGNORECASE)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(f'<mark class="hit">{escape(match.group())}</mark>')
        last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # every piece of the record's text went through escape above


@register.filter
def pretty_json(text: str) -> str:
    """A tool call's input indented for reading; text that is not whole JSON (a cut block) as it is."""
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return text


@register.filter
def json_field(text: str, name: str) -> str:
    """One string field of a tool call's JSON input ("" when absent or the text is not whole JSON)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ""
    field = value.get(name) if isinstance(value, dict) else None
    return field if isinstance(field, str) else ""


# Which tools edit a file, run a command or take a patch: the agents' tool roles (their profiles). A shell call may
# carry a patch too: before its freeform patch tool, Codex ran ["apply_patch", "<patch>"] (docs/formats/codex.md §3).


@register.filter
def apply_patch_text(text: str, tool_name: str) -> str:
    """The patch of a patch tool's call (the freeform tool's input, or a shell call's ``[patch tool, patch]``
    command); "" for any other call."""
    tools = all_tool_roles()
    if tool_name in tools.patch:
        return text
    if tool_name not in tools.shell:
        return ""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ""
    command = value.get("command") if isinstance(value, dict) else None
    if isinstance(command, list) and len(command) == 2 and command[0] in tools.patch and isinstance(command[1], str):
        return command[1]
    return ""


@register.filter
def edit_diff(text: str, tool_name: str) -> list[tuple[str, str]]:
    """An edit tool's call as unified diff lines (css class, line), without file headers; [] for other tools or a
    cut input.

    The input's shape says the kind of edit: ``edits`` (several replacements), ``old_string``/``new_string`` (one),
    or ``content`` alone (a whole file written).
    """
    tools = all_tool_roles()
    if tool_name not in tools.edit:
        return []
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(value, dict):
        return []
    edits: list[tuple[Any, Any]]  # (old, new) as the JSON has them; checked to be strings below
    if isinstance(value.get("edits"), list):
        edits = [(e.get("old_string"), e.get("new_string")) for e in value["edits"] if isinstance(e, dict)]
    elif "old_string" in value or "new_string" in value:
        edits = [(value.get("old_string"), value.get("new_string"))]
    else:
        edits = [("", value.get("content"))]
    # No ---/+++ header: the file is on the call's folded line (agents.tool_target).
    rows: list[tuple[str, str]] = []
    for old, new in edits:
        if not isinstance(old, str) or not isinstance(new, str):
            return []
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
            if line.startswith(("---", "+++")):
                continue
            rows.append(
                (
                    "hunk" if line.startswith("@@") else "add" if line[:1] == "+" else "del" if line[:1] == "-" else "",
                    line,
                )
            )
    return rows


_PATCH_ENVELOPE = ("*** Begin Patch", "*** End Patch", "*** End of File")
_PATCH_FILE_LINE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")


@register.filter
def patch_rows(patch: str) -> list[tuple[str, str]]:
    """An apply_patch envelope as diff lines (css class, line): the envelope's own lines left out, each file named
    once ("update a.py") as the diff's heading, hunks, additions and deletions marked."""
    rows: list[tuple[str, str]] = []
    for line in str(patch).splitlines():
        if line.strip() in _PATCH_ENVELOPE:
            continue
        named = _PATCH_FILE_LINE.match(line)
        if named:
            rows.append(("file", f"{named.group(1).lower()} {named.group(2)}"))
        elif line.startswith("*** Move to: "):
            rows.append(("file", f"moved to {line.removeprefix('*** Move to: ')}"))
        else:
            rows.append(
                (
                    "hunk" if line.startswith("@@") else "add" if line[:1] == "+" else "del" if line[:1] == "-" else "",
                    line,
                )
            )
    return rows
