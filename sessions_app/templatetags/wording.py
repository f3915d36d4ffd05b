"""Template filters that turn stored identifiers into words a reader expects."""

from __future__ import annotations

from django import template

from compaction.strategies.registry import agent_name as registry_agent_name
from compaction.transcript import MAIN

register = template.Library()


@register.filter
def words(value: object) -> str:
    """ "tool_result" -> "tool result": record kinds and similar identifiers, as text."""
    return str(value).replace("_", " ")


@register.filter
def agent_name(value: object) -> str:
    """An agent's display name (of a session format or a strategy name), from the registry."""
    return registry_agent_name(str(value))


@register.filter
def chain_name(agent: object) -> str:
    """ "main" -> "main chain", "a1b2c3" -> "subagent a1b2c3": which transcript of a session a record is in."""
    return "main chain" if agent == MAIN else f"subagent {agent}"
