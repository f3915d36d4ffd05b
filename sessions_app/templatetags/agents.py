"""Template filters that ask the agents' profiles (``compaction.agents``) instead of naming an agent's tools."""

from __future__ import annotations

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
