"""The protocol every compaction strategy implements, and the values it returns.

A strategy works on the *conversation view* of a session: the ``Message`` records that reach
the model, in order (bookkeeping and unknown records removed). Indices in ``Cut`` and
``Decision`` are positions in that list. ``at`` means "the session as it stood when
``messages[:at]`` existed" (None = the whole session).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Re-exported: strategy modules and older callers still import Thresholds from here.
from compaction.thresholds import Thresholds as Thresholds
from compaction.transcript import Message


@dataclass(slots=True)
class Cut:
    """messages[:start] is the kept head, messages[start:end] is summarised, messages[end:] the kept tail."""

    start: int
    end: int
    first_kept: int  # the agent's own index of the first kept item (klaude ``first_kept_index``)
    reason: str = ""


class CutRefused(ValueError):
    """A hand-placed cut that the strategy will not accept; the message says why."""


@dataclass(slots=True)
class Decision:
    strategy: str
    should_compact: bool
    tokens_before: int
    cut: Cut | None
    prune: list[str] = field(default_factory=list)  # tool ids whose results would be pruned
    tokens_after_estimate: int = 0
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Strategy(Protocol):
    name: str  # "claude-code" | "klaude-code" | "khaelor"
    label: str

    @property
    def max_summary_tokens(self) -> int:
        """The output budget the strategy gives its summarizer."""
        ...

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds: ...

    def estimate(self, message: Message) -> int:
        """The strategy's own token estimate of one message."""
        ...

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool: ...

    def select_prune(self, messages: Sequence[Message]) -> list[str]: ...

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None: ...

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        """Raise ``CutRefused`` when a hand-placed cut splits a tool call from its result or cuts a protected part."""
        ...

    def render_transcript(self, messages: Sequence[Message]) -> str:
        """The exact text the summarizer receives for the summarised middle."""
        ...

    def prompt(self) -> str:
        """The system/instruction prompt the agent sends its summarizer."""
        ...

    def parse_summary(self, raw: str) -> str: ...

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision: ...
