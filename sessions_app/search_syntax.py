"""The search syntax, read once: what a query asks the index for and what a page marks come from one parse.

Web-search syntax: words and "quoted phrases" are all required, ``or`` between two of them means either, ``-word``
and ``-"phrase"`` exclude. The query (``selectors.search``) and the highlighter (``templatetags.search``) both read
``parse_query``'s result, so a page never marks what the query did not look for: an ``or``, or a word of an
excluded phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An item: a quoted phrase (its closing quote may be missing), perhaps excluded by a leading minus; else a word.
_ITEM = re.compile(r'(-?)"([^"]*)"?|(\S+)')
# A word shorter than this is not marked (a lone letter would light up the text); it is still looked for.
MARKED_MIN_CHARS = 2


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A query as the index reads it: ANDed groups of ORed items, and the excluded items."""

    groups: tuple[tuple[str, ...], ...]
    excluded: tuple[str, ...]
    # The whole query was one "quoted phrase": its text, which is then matched as written, not only by its words.
    phrase: str = ""

    @property
    def positive(self) -> tuple[str, ...]:
        """Every item a match may hold, in the order typed."""
        return tuple(item for group in self.groups for item in group)

    @property
    def marked(self) -> list[str]:
        """What a page marks, longest first: the positive items (a phrase query: the phrase, whatever its length)."""
        if self.phrase:
            return [self.phrase]
        return sorted({item for item in self.positive if len(item) >= MARKED_MIN_CHARS}, key=lambda t: (-len(t), t))


def parse_query(q: str) -> SearchQuery:
    """``q`` in web-search syntax. An item without a letter or digit is dropped (no index finds a word in it);
    an ``or`` with no item on one side of it is dropped too."""
    groups: list[list[str]] = []
    excluded: list[str] = []
    either = False
    found = _ITEM.findall(q)
    for minus, quoted, bare in found:
        text = bare or quoted
        if bare and bare.lower() == "or":
            either = bool(groups)
            continue
        negated = bool(minus) or (bare.startswith("-") and len(bare) > 1)
        if bare.startswith("-"):
            text = bare[1:]
        if not any(ch.isalnum() for ch in text):
            continue  # punctuation alone: no index finds a word in it
        if negated:
            excluded.append(text)
        elif either:
            groups[-1].append(text)
        else:
            groups.append([text])
        either = False
    stripped = q.strip()
    whole_phrase = len(found) == 1 and len(stripped) > 2 and stripped[0] == stripped[-1] == '"'
    return SearchQuery(
        groups=tuple(tuple(group) for group in groups),
        excluded=tuple(excluded),
        phrase=groups[0][0] if whole_phrase and groups else "",
    )
