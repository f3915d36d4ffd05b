"""Reads for comparing summaries side by side: every summary of a session (the agent's own and our runs'),
their coverage and differences, and the records a run's summary replaces."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.urls import reverse

from compaction.coverage import Coverage, coverage, recorded_range
from compaction.formats.registry import agent_profile
from compaction.strategies.registry import agent_name
from compaction.summary_diff import SummaryDiff, compare
from compaction.tokens import tiktoken_counts
from compaction.transcript import Message
from sessions_app import models
from sessions_app.selectors import summary_checks
from sessions_app.selectors import transcript as transcript_selectors
from sessions_app.selectors.previews import Preview

REPLACED_TEXT_CHARS = 4000  # per message on the compare page


@dataclass(slots=True)
class Candidate:
    """A summary of the session: the agent's own (a compact_summary record) or one of our runs."""

    key: str  # "agent-<seq>" or the run id
    label: str
    text: str
    tokens: int = 0  # tiktoken cl100k estimate
    url: str = ""
    structure: str = ""  # whose summary layout it follows: the strategy's name (the agent's, for its own)
    run_id: int | None = None  # set for one of our runs: it can be accepted or rejected
    review: str = ""
    coverage: Coverage | None = None  # filled by ``with_coverage``
    checks: summary_checks.SummaryChecks | None = None  # claims and rules, filled by ``with_coverage``


@dataclass(slots=True)
class ReplacedMessage:
    seq: int
    role: str
    kind: str
    text: str
    truncated: bool


def run_label(run: models.CompactionRun, *, review: bool = False) -> str:
    """ "run 3 (KHAELOR, claude-haiku-4-5, offline, pending)": the agent by the display name every page uses."""
    parts = [
        agent_name(run.strategy),
        run.model,
        *(["offline"] if run.offline else []),
        *([run.review] if review else []),
    ]
    return f"run {run.pk} ({', '.join(parts)})"


def summary_candidates(*, session: models.Session, exclude_run: int | None = None) -> list[Candidate]:
    """Every summary of a session: the agent's own compaction summaries, then runs made here (two queries)."""
    found = [
        Candidate(
            key=f"agent-{m.seq}",
            label=f"agent's own summary at #{m.seq}",
            text="\n".join(b.get("text", "") for b in m.blocks),
            url=reverse("sessions:message", args=[session.pk, m.seq]),
            structure=session.format,
        )
        for m in transcript_selectors.compaction_summaries(session=session).only("seq", "blocks_json")
    ]
    runs = models.CompactionRun.objects.filter(session=session, status=models.CompactionRun.Status.SUCCEEDED)
    if exclude_run is not None:
        runs = runs.exclude(pk=exclude_run)
    found.extend(
        Candidate(
            key=str(r.pk),
            label=run_label(r, review=True),
            text=r.summary,
            url=reverse("sessions:run", args=[r.pk]),
            structure=r.strategy,
            run_id=r.pk,
            review=r.review,
        )
        for r in runs.only("id", "strategy", "model", "offline", "review", "summary")
    )
    return found


def candidate(*, session: models.Session, key: str) -> Candidate | None:
    """One summary by its key; token counts filled."""
    match = next((c for c in summary_candidates(session=session) if c.key == key), None)
    if match is not None:
        (match.tokens,) = tiktoken_counts([match.text])
    return match


def run_candidate(run: models.CompactionRun) -> Candidate:
    (tokens,) = tiktoken_counts([run.summary]) if run.summary else (0,)
    return Candidate(
        key=str(run.pk),
        label=run_label(run),
        text=run.summary,
        tokens=tokens,
        url=reverse("sessions:run", args=[run.pk]),
        structure=run.strategy,
        run_id=run.pk,
        review=run.review,
    )


def with_coverage(candidate: Candidate, *, session: models.Session, messages: Sequence[Message]) -> Candidate:
    """The candidate with its coverage and its claim and rule checks: a run's over the range it summarised, the
    agent's over the range its own compaction summarised (compaction.coverage.recorded_range)."""
    if candidate.run_id is not None:
        run = models.CompactionRun.objects.filter(pk=candidate.run_id).only("cut_start", "cut_end", "summary").first()
        if run is not None and run.cut_end <= len(messages):
            candidate.coverage = coverage(
                messages,
                start=run.cut_start,
                end=run.cut_end,
                summary=candidate.text,
                tools=agent_profile(session.format).tools,
            )
            candidate.checks = summary_checks.checks(
                session=session,
                messages=messages,
                start=run.cut_start,
                end=run.cut_end,
                summary=candidate.text,
                seen_until=run.cut_end,
            )
        return candidate
    seq = int(candidate.key.removeprefix("agent-"))
    position = next((i for i, m in enumerate(messages) if m.data.get("row_seq") == seq), None)
    if position is not None:
        start, end = recorded_range(messages, position)
        candidate.coverage = coverage(
            messages, start=start, end=end, summary=candidate.text, tools=agent_profile(session.format).tools
        )
        candidate.checks = summary_checks.recorded_checks(session=session, messages=messages, position=position)
    return candidate


def compare_summaries(left: Candidate, right: Candidate) -> SummaryDiff:
    """Word and section differences, sections by the right-hand (reviewed) summary's structure."""
    return compare(left.text, right.text, strategy=right.structure or left.structure)


def replaced_messages(*, preview: Preview) -> tuple[list[ReplacedMessage], int]:
    """The messages a run's summary replaces, with their tiktoken size."""
    middle = preview.middle()
    texts = [m.text for m in middle]
    tokens = sum(tiktoken_counts(texts)) if texts else 0
    return [
        ReplacedMessage(
            seq=int(m.data.get("row_seq", 0)),
            role=m.role,
            kind=m.kind,
            text=text[:REPLACED_TEXT_CHARS],
            truncated=len(text) > REPLACED_TEXT_CHARS,
        )
        for m, text in zip(middle, texts, strict=True)
    ], tokens
