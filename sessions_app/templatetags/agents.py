"""Template filters that ask the agents' profiles (``compaction.agents``) instead of naming an agent's tools."""

from __future__ import annotations

from django import template

from compaction.formats.registry import SESSION_FOLDERS, all_tool_roles, profiles

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
def agent_uploads() -> dict[str, list[str]]:
    """What to upload of every registered agent ("Codex rollouts (rollout-*.jsonl)") and all their folders under the
    home folder, in registry order (the upload page)."""
    return {
        "agents": [f"{label} {profile.upload_hint}".strip() for _, label, profile in profiles()],
        "folders": list(SESSION_FOLDERS),
    }
