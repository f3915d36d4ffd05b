"""Search matches marked in escaped text, and a diff's lines as marked-up spans."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

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
def diff_spans(rows: list[tuple[str, str]], q: str) -> SafeString:
    """A diff's rows (css class, line) as one span a line, each line escaped and its search matches marked: made in
    one join (a diff of hundreds of lines costs a template loop far more)."""
    shown = (lambda line: highlight(line, q)) if parse_query(q or "").marked else escape
    return mark_safe(  # every line went through escape (or highlight, which escapes); the classes are tool_calls'
        "".join(f'<span class="{cls}">{shown(line)}</span>\n' for cls, line in rows)
    )
