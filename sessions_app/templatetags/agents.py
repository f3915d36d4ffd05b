"""Template filters that ask the agents' profiles (``compaction.agents``) instead of naming an agent's tools."""

from __future__ import annotations

import re

import orjson
from django import template

from compaction.formats.registry import FORMATS, all_tool_roles

register = template.Library()

_ROLES = frozenset({"read", "edit", "patch", "shell", "search", "web", "spawn", "todo"})


@register.filter
def has_tool_role(tool_name: object, role: str) -> bool:
    """Whether an agent names a tool with this name for this role ("edit", "spawn", ...), e.g. to draw an edit as a
    diff or a spawn as a link to its subagent. A rendered block does not know its agent: every agent's roles."""
    if role not in _ROLES:
        raise ValueError(f"unknown tool role {role!r}: one of {', '.join(sorted(_ROLES))}")
    names: frozenset[str] = getattr(all_tool_roles(), role)
    return isinstance(tool_name, str) and tool_name in names


@register.simple_tag
def agent_uploads() -> list[dict[str, object]]:
    """Every registered agent, in registry order, with what to upload of it ("rollouts (rollout-*.jsonl)") and the
    folders under the home folder where it keeps its sessions (the Import page)."""
    return [
        {"label": module.LABEL, "hint": module.PROFILE.upload_hint, "folders": list(module.SESSION_FOLDERS)}
        for module in FORMATS
    ]


TARGET_CHARS = 90  # a folded tool call's target (a path, a command) is cut here; the call opens to show it whole
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


@register.filter
def tool_target(text: object, tool_name: object) -> str:
    """What a tool call works on, for its folded line: the file a path key names, the command line, the files a
    patch names, or else the input's first string value; "" when the input says none."""
    tools = all_tool_roles()
    text = str(text)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        files = _PATCH_FILE.findall(text) if tool_name in tools.patch else []
        return _cut(", ".join(files))
    if tool_name in tools.spawn and isinstance(value.get("description"), str) and value["description"].strip():
        return _cut(" ".join(value["description"].split()))  # a subagent's task, as its spawning call words it
    for key in tools.path_keys:
        if isinstance(value.get(key), str) and value[key]:
            return _cut(value[key])
    for key in tools.command_keys:
        command = value.get(key)
        if isinstance(command, list) and len(command) == 2 and command[0] in tools.patch:
            return _cut(", ".join(_PATCH_FILE.findall(str(command[1]))))  # a patch sent as a shell call
        if isinstance(command, list) and all(isinstance(part, str) for part in command):
            # ["bash", "-lc", "the command"]: the command line is the last word of a shell's argv
            command = command[-1] if len(command) == 3 and command[1].startswith("-") else " ".join(command)
        if isinstance(command, str) and command:
            return _cut(" ".join(command.split()))
    first = next((v for v in value.values() if isinstance(v, str) and v.strip()), "")
    return _cut(" ".join(first.split()))


def _cut(text: str) -> str:
    return text if len(text) <= TARGET_CHARS else text[: TARGET_CHARS - 1] + "\u2026"
