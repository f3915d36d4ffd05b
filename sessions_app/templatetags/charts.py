"""Geometry for the server-drawn bars (the overview's gauge and composition bar, the call panel's bar).

The CSP forbids inline styles, so sizes are SVG attributes in a 0-1000 wide viewBox (``preserveAspectRatio="none"``
stretches it to the bar's width): positions are per-mille of the bar's total.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import template

register = template.Library()

BAR = 1000  # the viewBox width of every bar


@register.filter
def permille(value: int | float | None, total: int | float | None) -> float:
    """``value`` as a position on a bar of ``total``: 0 to 1000, clamped; 0 without a total."""
    if not value or not total or total <= 0:
        return 0.0
    return round(min(max(value / total, 0.0), 1.0) * BAR, 2)


@register.filter
def segments(parts: Iterable[Mapping[str, Any]], total: int | float | None) -> list[dict[str, Any]]:
    """Parts (``part``, ``kind``, ``tokens``) laid end to end on a bar of ``total``, each with ``x`` and ``width``.

    ``shade`` tells apart neighbours of one colour family (tool results by tool): 0, 1, 2, 3, 0, ...
    """
    laid: list[dict[str, Any]] = []
    start = 0
    shades: dict[str, int] = {}
    for part in parts:
        tokens = int(part.get("tokens") or 0)
        if tokens <= 0:
            continue
        kind = str(part.get("kind") or "user")
        shade = shades.get(kind, 0)
        shades[kind] = shade + 1
        laid.append(
            {
                **part,
                "x": permille(start, total),
                "width": round(permille(start + tokens, total) - permille(start, total), 2),
                "shade": shade % 4,
                "percent": round(100 * tokens / total, 1) if total else 0.0,
            }
        )
        start += tokens
    return laid


@register.filter
def duration(seconds: float | None) -> str:
    """A session's length in words a reader scans: "2 h 05 min", "14 min 03 s", "42 s"; "–" when unknown."""
    if seconds is None or seconds < 0:
        return "–"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours:,} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


FOLD_AFTER = 8  # parts a bar's legend names one by one; the smaller rest share one segment


@register.filter
def folded(parts: Iterable[Mapping[str, Any]], keep: int = FOLD_AFTER) -> list[Mapping[str, Any]]:
    """At most ``keep`` parts: the largest ``keep - 1`` in their order, the rest folded into one ("12 smaller parts").

    A glance reads eight colours, not forty tools; the table and the JSON keep every part.
    """
    items = [p for p in parts if int(p.get("tokens") or 0) > 0]
    if len(items) <= keep:
        return items
    largest = sorted(range(len(items)), key=lambda i: -int(items[i]["tokens"]))[: keep - 1]
    kept = [items[i] for i in sorted(largest)]
    rest = [items[i] for i in range(len(items)) if i not in set(largest)]
    kinds = {str(p.get("kind")) for p in rest}
    return [
        *kept,
        {
            "part": f"{len(rest)} smaller parts",
            "kind": kinds.pop() if len(kinds) == 1 else "other",
            "tokens": sum(int(p["tokens"]) for p in rest),
        },
    ]
