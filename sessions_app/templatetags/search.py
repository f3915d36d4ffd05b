"""Search matches marked in escaped text."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


def terms(q: str) -> list[str]:
    """What a query marks: the phrase and each word, quotes dropped, excluded (-word) words left out."""
    phrase = q.strip().strip('"')
    words = [w.strip('"') for w in q.split() if not w.startswith("-")]
    return sorted({t for t in [phrase, *words] if t}, key=len, reverse=True)


@register.filter
def highlight(text: str, q: str) -> SafeString:
    """``text`` escaped, each occurrence of the query's terms wrapped in <mark> (case-insensitive)."""
    text = str(text)
    found = terms(q or "")
    if not found:
        return escape(text)
    pattern = re.compile("|".join(re.escape(t) for t in found), re.IGNORECASE)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(f'<mark class="hit">{escape(match.group())}</mark>')
        last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # every piece of the record's text went through escape above
