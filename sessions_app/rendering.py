"""Markdown of a transcript as safe HTML: markdown-it-py with raw HTML off, Pygments classes, then nh3.

Transcript text is untrusted. Raw HTML in it stays text (markdown-it escapes it), and the output is
sanitised again by nh3 with a short allow-list: no images (they would fetch), no style attributes (the
CSP forbids inline style; Pygments marks tokens with classes styled by static/pygments.css), links
only to http(s) and mailto.
"""

from __future__ import annotations

from functools import cache
from typing import Any

# markdown-it, Pygments and nh3 load on the first render, not at import: the URL check of every
# ``manage.py`` command and the web process's start import this module through the views.


@cache
def _renderer() -> tuple[Any, dict[str, Any]]:
    import nh3
    from markdown_it import MarkdownIt
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    tags = frozenset(nh3.ALLOWED_TAGS) - {"img", "area", "map"}
    attributes: dict[str, set[str]] = {
        **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items() if tag in tags},
        "span": {"class"},
        "code": {"class"},
        "a": {"href", "title"},
    }
    formatter = HtmlFormatter(nowrap=True)

    def _highlight(code: str, lang: str, _attrs: Any) -> str:
        # A fence names its language; an unnamed or unknown one stays plain (guessing costs more than it reads).
        try:
            lexer = get_lexer_by_name(lang) if lang else None
        except ClassNotFound:
            lexer = None
        return highlight(code, lexer, formatter) if lexer is not None else ""

    markdown = (
        MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
        .enable("table")
        .enable("strikethrough")
    )
    clean = {
        "tags": set(tags),
        "attributes": attributes,
        "url_schemes": {"http", "https", "mailto"},
        "link_rel": "noopener noreferrer nofollow",
    }
    return markdown, clean


def markdown_html(text: str) -> str:
    """``text`` rendered as sanitised HTML (safe to mark safe in a template)."""
    import nh3

    markdown, clean = _renderer()
    return nh3.clean(markdown.render(text), **clean)


def warm_up() -> None:
    """Load the renderer now (the web process, at its start)."""
    _renderer()
