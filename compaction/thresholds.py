"""The token lines a session is measured against, in the core so the core needs no strategy to name them.

Each strategy fills one for a session (``Strategy.thresholds``); the timeline draws it and the
diagnosis compares recorded contexts with it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Thresholds:
    """Token lines a strategy draws on the timeline. None = the strategy has no such line."""

    window: int
    effective_window: int | None = None
    autocompact: int | None = None
    warning: int | None = None
    blocking: int | None = None
    source: str = ""  # where the formula and constants come from
    assumption: bool = False  # True when the numbers are our assumption, not the agent's code
