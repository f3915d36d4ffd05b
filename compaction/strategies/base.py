"""The protocol every compaction strategy implements, and the values it returns.

A strategy works on the *conversation view* of a session: the ``Message`` records that reach
the model, in order (bookkeeping and unknown records removed). Indices in ``Cut`` and
``Decision`` are positions in that list. ``at`` means "the session as it stood when
``messages[:at]`` existed" (None = the whole session).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compaction.summarize import SummaryRequest, build_user_content
from compaction.transcript import Message


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


@dataclass(slots=True)
class PlannedRequest:
    """One summarizer call exactly as the agent builds it."""

    kind: str  # the agent's name for the call: "compact", "history", "task_prefix", "checkpoint", ...
    system: str
    transcript: str
    rounds: list[str] | None  # API-round groups, oldest first, when the agent drops them on prompt-too-long
    instructions: str
    max_tokens: int

    @property
    def user_content(self) -> str:
        """Exactly what the summarizer receives as the user message (before any prompt-too-long retry)."""
        return build_user_content(self.rounds or [self.transcript], truncated=False, instructions=self.instructions)

    def summary_request(self, *, model: str) -> SummaryRequest:
        return SummaryRequest(
            system=self.system,
            transcript=self.transcript,
            rounds=self.rounds,
            model=model,
            max_tokens=self.max_tokens,
            instructions=self.instructions,
        )


@dataclass(slots=True)
class SummarizerPlan:
    """The requests a compaction sends, and what the agent keeps to assemble the final summary from them."""

    requests: list[PlannedRequest] = field(default_factory=list)
    state: Any = None  # strategy-owned (klaude's plan and file details); opaque to callers

    @property
    def sha256(self) -> str:
        """One digest of every request: what a reviewer saw is what a run sends."""
        digest = hashlib.sha256()
        for request in self.requests:
            for part in (request.kind, request.system, request.user_content, str(request.max_tokens)):
                digest.update(part.encode())
                digest.update(b"\0")
        return digest.hexdigest()


@dataclass(slots=True)
class ExportInput:
    """What writing a compacted copy of a session in the agent's own format needs."""

    lines: Iterable[tuple[int, bytes]]  # (1-based line number, raw line with its newline) of the source file
    messages: Sequence[Message]  # the conversation view up to the point
    cut: Cut
    plan: SummarizerPlan
    summary: str  # the accepted final summary
    tokens_before: int
    stop_line: int | None  # the source line of the first record after the point (nothing from there is written)
    session_id: str
    project: str
    version: str


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

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        """The agent's own id of the first item kept after a cut ending at list position ``end``."""
        ...

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        """The summarizer requests the agent sends for ``cut`` (``prune``: results pruned in the same step)."""
        ...

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        """The summary the agent stores, from the summarizer's raw replies keyed by request kind."""
        ...

    @property
    def export_suffix(self) -> str | None:
        """The file suffix of a compacted export in the agent's own format; None when it has none."""
        ...

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """A compacted copy of the session, as the agent itself would leave it after the compaction."""
        ...
