"""Markdown of a transcript as safe HTML: markdown-it-py with raw HTML off, Pygments classes, then nh3.

Transcript text is untrusted. Raw HTML in it stays text (markdown-it escapes it), and the output is
sanitised again by nh3 with a short allow-list: no images (they would fetch), no style attributes (the
CSP forbids inline style; Pygments marks tokens with classes styled by static/pygments.css), links
only to http(s) and mailto.
"""

from __future__ import annotations

from typing import Any

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_TAGS = frozenset(nh3.ALLOWED_TAGS) - {"img", "area", "map"}
_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items() if tag in _TAGS},
    "span": {"class"},
    "code": {"class"},
    "a": {"href", "title"},
}
_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: Any) -> str:
    # A fence names its language; an unnamed or unknown one stays plain (guessing costs more than it reads).
    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    return highlight(code, lexer, _FORMATTER) if lexer is not None else ""


_MARKDOWN = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
    .enable("table")
    .enable("strikethrough")
)


def markdown_html(text: str) -> str:
    """``text`` rendered as sanitised HTML (safe to mark safe in a template)."""
    return nh3.clean(
        _MARKDOWN.render(text),
        tags=set(_TAGS),
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
