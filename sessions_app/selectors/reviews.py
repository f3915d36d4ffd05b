"""Reads for reviewing runs: the queue and its filters, verdicts and line comments, and what a summary lost
(its coverage checklist, its size against the budget and against what it replaces)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse

from compaction.coverage import Coverage, CoverageItem, coverage
from compaction.formats.registry import agent_profile
from compaction.strategies.registry import build_strategy
from compaction.tokens import tiktoken_counts
from compaction.transcript import MAIN, Message
from sessions_app import models
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors.runs import reviewable

RECENT_DECIDED = 30


@dataclass(slots=True)
class ReviewFilters:
    """The Reviews page's filters; empty means any."""

    agent: str = ""  # the session's format
    strategy: str = ""
    session: int | None = None
    reviewer: str = ""  # username of the latest verdict's author
    verdict: str = ""  # pending | accepted | rejected

    def apply(self, runs: QuerySet[models.CompactionRun]) -> QuerySet[models.CompactionRun]:
        if self.agent:
            runs = runs.filter(session__format=self.agent)
        if self.strategy:
            runs = runs.filter(strategy=self.strategy)
        if self.session is not None:
            runs = runs.filter(session_id=self.session)
        if self.reviewer:
            runs = runs.filter(reviewed_by__username=self.reviewer)
        if self.verdict:
            runs = runs.filter(review=self.verdict)
        return runs


def review_queue(
    *, filters: ReviewFilters | None = None, recent: int = RECENT_DECIDED
) -> tuple[list[models.CompactionRun], list[models.CompactionRun]]:
    """Runs waiting for a verdict (oldest first) and the most recent decisions, both filtered."""
    base = (
        (filters or ReviewFilters())
        .apply(reviewable())
        .select_related("session", "started_by", "reviewed_by")
        .prefetch_related("verdicts__by")
    )
    pending = list(base.filter(review=models.CompactionRun.Review.PENDING).order_by("created_at", "id"))
    decided = list(base.exclude(review=models.CompactionRun.Review.PENDING).order_by("-reviewed_at", "-id")[:recent])
    return pending, decided


def reviewers() -> list[str]:
    """Usernames that gave a verdict, for the reviewer filter."""
    return sorted(
        {
            name
            for name in models.ReviewVerdict.objects.exclude(by=None).values_list("by__username", flat=True).distinct()
            if name
        }
    )


def verdict_history(*, run: models.CompactionRun) -> list[models.ReviewVerdict]:
    """Every verdict on the run, oldest first: a changed verdict keeps the ones before it."""
    return list(models.ReviewVerdict.objects.filter(run=run).select_related("by").order_by("at", "id"))


def line_comments(*, run: models.CompactionRun) -> list[models.SummaryComment]:
    return list(models.SummaryComment.objects.filter(run=run).select_related("by"))


@dataclass(slots=True)
class SummaryLine:
    number: int  # 1-based
    text: str
    comments: list[models.SummaryComment]


def summary_lines(*, run: models.CompactionRun) -> list[SummaryLine]:
    """The run's summary as numbered lines, each with the comments attached to it."""
    by_line: dict[int, list[models.SummaryComment]] = {}
    for comment in line_comments(run=run):
        by_line.setdefault(comment.line, []).append(comment)
    return [SummaryLine(n, text, by_line.get(n, [])) for n, text in enumerate(run.summary.split("\n"), start=1)]


@dataclass(slots=True)
class ReviewFacts:
    """What a reviewer weighs beside the text: the coverage checklist, the size against the budget."""

    coverage: Coverage | None
    summary_tokens: int  # tiktoken estimate
    budget_tokens: int | None  # the strategy's output budget for its summarizer
    replaced_tokens: int | None  # tiktoken estimate of the summarised middle

    @property
    def compression(self) -> float | None:
        """How many times smaller the summary is than what it replaces."""
        if not self.replaced_tokens or not self.summary_tokens:
            return None
        return self.replaced_tokens / self.summary_tokens

    @property
    def budget_share(self) -> float | None:
        return self.summary_tokens / self.budget_tokens if self.budget_tokens else None

    def as_json(self, *, session_id: int, messages: Sequence[Message]) -> dict[str, Any]:
        return {
            "coverage": coverage_json(self.coverage, session_id=session_id, messages=messages),
            "summary_tokens_estimate": self.summary_tokens,
            "budget_tokens": self.budget_tokens,
            "budget_share": round(self.budget_share, 4) if self.budget_share is not None else None,
            "replaced_tokens_estimate": self.replaced_tokens,
            "compression_ratio": round(self.compression, 2) if self.compression is not None else None,
        }


def row_seq(messages: Sequence[Message], position: int) -> int:
    return int(messages[position].data.get("row_seq", position)) if 0 <= position < len(messages) else position


def coverage_json(checked: Coverage | None, *, session_id: int, messages: Sequence[Message]) -> dict[str, Any] | None:
    if checked is None:
        return None
    data = checked.as_json()
    for item in data["items"]:
        seq = row_seq(messages, item["position"])
        item["seq"] = seq
        item["url"] = reverse("sessions:message", args=[session_id, seq])
    return data


def coverage_links(checked: Coverage | None, *, messages: Sequence[Message]) -> list[tuple[CoverageItem, int]]:
    """Each checklist item with the stored seq of its record (for the page's permalink)."""
    if checked is None:
        return []
    return [(item, row_seq(messages, item.position)) for item in checked.items]


def _replaced_tokens(session: models.Session, messages: Sequence[Message], start: int, end: int) -> int | None:
    seqs = [int(m.data["row_seq"]) for m in messages[start:end] if "row_seq" in m.data]
    if not seqs:
        return None
    stored = list(
        models.Message.objects.filter(session=session, agent=MAIN, seq__in=seqs).values_list("tokens", flat=True)
    )
    if stored and all(t is not None for t in stored):
        return sum(t or 0 for t in stored)
    texts = [m.text for m in messages[start:end]]
    return sum(tiktoken_counts(texts)) if texts else 0  # the worker has not counted them yet


def run_coverage(*, run: models.CompactionRun, messages: Sequence[Message] | None = None) -> Coverage | None:
    """The checklist of the range a run summarised, marked against its summary (None before it has one)."""
    if not run.summary:
        return None
    conversation = (
        messages if messages is not None else conversation_selectors.conversation(session=run.session, agent=MAIN)
    )
    if run.cut_end > len(conversation):
        return None  # the session changed since the run: its positions no longer apply
    return coverage(
        conversation,
        start=run.cut_start,
        end=run.cut_end,
        summary=run.summary,
        tools=agent_profile(run.session.format).tools,
    )


def review_facts(*, run: models.CompactionRun, messages: Sequence[Message] | None = None) -> ReviewFacts:
    conversation = (
        messages if messages is not None else conversation_selectors.conversation(session=run.session, agent=MAIN)
    )
    try:
        strategy = build_strategy(
            run.strategy, info=conversation_selectors.session_info(session=run.session), overrides=dict(run.parameters)
        )
        budget: int | None = strategy.max_summary_tokens
    except (ValueError, TypeError):
        budget = None
    if run.summary_tokens is not None:
        summary_tokens = run.summary_tokens
    else:
        (summary_tokens,) = tiktoken_counts([run.summary]) if run.summary else (0,)
    in_range = run.cut_end <= len(conversation)
    return ReviewFacts(
        coverage=run_coverage(run=run, messages=conversation),
        summary_tokens=summary_tokens,
        budget_tokens=budget,
        replaced_tokens=_replaced_tokens(run.session, conversation, run.cut_start, run.cut_end) if in_range else None,
    )


def coverages(runs: Sequence[models.CompactionRun]) -> dict[int, Coverage | None]:
    """Each run's coverage (sessions are read once each: ``conversation_selectors.conversation`` keeps recent ones)."""
    return {run.pk: run_coverage(run=run) for run in runs}
