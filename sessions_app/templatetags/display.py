"""Template filters for how levels look on every page (one place, so every bar and gauge agrees).

Numbers take Django's `intcomma` (humanize) everywhere: the one thousands-separator filter; `separators` applies
it to the numbers inside a sentence the product wrote."""

from __future__ import annotations

import re

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma

from compaction.transcript import cut_at_word
from sessions_app import models
from sessions_app.selectors import thresholds as threshold_selectors

register = template.Library()


@register.filter
def peak_level(session: models.Session) -> str:
    """The level class ("ok", "warn", "danger") of a session's peak bar; uses the list's precomputed bands."""
    return threshold_selectors.peak_level(session=session, bands=getattr(session, "bands", None))


# A run of four or more digits standing alone: not part of a version (2.0.76), a date, an id or a word.
_BARE_NUMBER = re.compile(r"(?<![\w#/:.\-])\d{4,}(?![\w/:\-]|\.\d)")


@register.filter
def separators(text: object) -> str:
    """Thousands separators in a sentence the product wrote (a threshold's formula): "window=200000" ->
    "window=200,000". Never for transcript text, which is quoted as written. Escapes like any filtered text."""
    return _BARE_NUMBER.sub(lambda m: intcomma(int(m.group()), use_l10n=False), str(text))


@register.filter
def words(kind: object) -> str:
    """A kind's identifier as words, as the chart's legend names it: "idle_gap" -> "idle gap"."""
    return str(kind).replace("_", " ")


@register.filter
def cut_words(text: object, limit: int) -> str:
    """A title shortened at a word, not in the middle of one ("truncatechars" cuts anywhere)."""
    return cut_at_word(str(text), int(limit))


@register.filter
def get_item(mapping: object, key: object) -> object:
    """``mapping[key]``, or None (a template cannot index a dict by a variable)."""
    return mapping.get(key) if isinstance(mapping, dict) else None
