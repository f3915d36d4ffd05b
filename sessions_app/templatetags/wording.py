"""Template filters that turn stored identifiers into words a reader expects."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def words(value: object) -> str:
    """ "tool_result" -> "tool result": record kinds and similar identifiers, as text."""
    return str(value).replace("_", " ")
