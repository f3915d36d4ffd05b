"""Transcript text rendered for reading."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from sessions_app.rendering import markdown_html

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(markdown_html(str(text)))  # markdown_html escapes raw HTML and sanitises its output (nh3)


@register.filter
def project_name(path: str) -> str:
    """A project as people name it: the last two folders of its directory (the full path goes in a title)."""
    parts = [p for p in str(path or "").replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:]) if parts else ""
