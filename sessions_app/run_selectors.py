"""Reads for compaction previews, runs, reviews, comparisons and exports.

The preview itself is ``compaction.preview.plan_preview``: this module loads the session, builds the
strategy from the user's parameters and adds what a page needs (segments with permalinks). A run stores
the preview's inputs (strategy, parameters, point, hand cut) and the worker rebuilds the same preview from
them, so the transcript the reviewer saw is the transcript that is sent (checked by its sha256).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from compaction.coverage import Coverage, CoverageItem, coverage, recorded_range
from compaction.preview import PreviewError, PreviewPlan, plan_preview
from compaction.strategies.base import (
    Cut,
    Decision,
    ExportInput,
    ModelChoice,
    PlannedRequest,
    Strategy,
    summary_model_choice,
)
from compaction.strategies.registry import STRATEGY_LABELS, build_strategy, editable_parameters, strategy_for_format
from compaction.summary_diff import SummaryDiff, compare
from compaction.tokens import tiktoken_counts
from compaction.transcript import MAIN, Message
from sessions_app import models, selectors

LIST_EDGE = 40  # items shown at each end of a long head/middle/tail list; the rest is counted, not rendered
LABEL_CHARS = 120
REPLACED_TEXT_CHARS = 4000  # per message on the compare page
RECENT_DECIDED = 30
# The page shows this much of a long summarizer transcript; a browser chokes on tens of megabytes of <pre>.
SHOWN_HEAD_CHARS = 40_000
SHOWN_TAIL_CHARS = 20_000


# ---------------------------------------------------------------------------------------------
# Preview


@dataclass(slots=True)
class Item:
    position: int  # index in the conversation view
    seq: int  # stored Message.seq, for the transcript permalink
    role: str
    kind: str
    label: str
    tokens: int  # the strategy's own estimate


@dataclass(slots=True)
class Segment:
    name: str  # head | middle | tail
    start: int
    end: int
    tokens: int
    first: list[Item]
    last: list[Item]  # empty unless the segment is longer than 2 * LIST_EDGE

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def hidden(self) -> int:
        return self.count - len(self.first) - len(self.last)


@dataclass(slots=True)
class ShownRequest:
    """One summarizer request for the page: whole when short, else its head and tail (the JSON twin counts it)."""

    request: PlannedRequest
    chars: int
    head: str
    tail: str
    hidden: int


def shown_request(
    request: PlannedRequest, *, head: int = SHOWN_HEAD_CHARS, tail: int = SHOWN_TAIL_CHARS
) -> ShownRequest:
    text = request.user_content
    if len(text) <= head + tail:
        return ShownRequest(request, len(text), text, "", 0)
    return ShownRequest(request, len(text), text[:head], text[-tail:], len(text) - head - tail)


@dataclass
class Preview:
    """A preview of one stored session: the pure plan plus what the page shows around it."""

    session: models.Session
    strategy_name: str
    overrides: dict[str, Any]
    after_call: int | None = None  # as asked (None: the end)
    cut_start: int | None = None  # hand cut as asked, in calls
    cut_end: int | None = None
    error: str = ""
    strategy: Strategy | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    plan: PreviewPlan | None = None
    segments: list[Segment] = field(default_factory=list)
    prune: list[Item] = field(default_factory=list)

    @property
    def label(self) -> str:
        return STRATEGY_LABELS.get(self.strategy_name, self.strategy_name)

    @property
    def decision(self) -> Decision | None:
        return self.plan.decision if self.plan else None

    @property
    def messages(self) -> list[Message]:
        return self.plan.messages if self.plan else []

    @property
    def cut(self) -> Cut | None:
        return self.plan.cut if self.plan else None

    @property
    def applied_cut(self) -> Cut | None:
        return self.plan.applied_cut if self.plan else None

    @property
    def auto_cut(self) -> Cut | None:
        return self.plan.auto_cut if self.plan else None

    @property
    def hand_cut(self) -> bool:
        return bool(self.plan and self.plan.by_hand)

    @property
    def refused(self) -> str:
        return self.plan.refused if self.plan else ""

    @property
    def requests(self) -> list[PlannedRequest]:
        return self.plan.summarizer.requests if self.plan else []

    @property
    def shown_requests(self) -> list[ShownRequest]:
        return [shown_request(r) for r in self.requests]

    @property
    def tokens_before(self) -> int:
        return self.plan.tokens_before if self.plan else 0

    @property
    def tokens_after(self) -> int:
        return self.plan.tokens_after_estimate if self.plan else 0

    @property
    def should_compact(self) -> bool:
        return bool(self.plan and self.plan.decision.should_compact)

    @property
    def runnable(self) -> bool:
        return not self.error and self.plan is not None and self.plan.runnable

    @property
    def transcript(self) -> str:
        return self.plan.transcript if self.plan else ""

    @property
    def transcript_sha256(self) -> str:
        return self.plan.summarizer.sha256 if self.plan else ""

    @property
    def cut_json(self) -> dict[str, Any] | None:
        return (
            self.plan.cut_json(self.plan.cut, by_hand=self.plan.by_hand, refused=self.plan.refused)
            if self.plan
            else None
        )

    def middle(self) -> list[Message]:
        cut = self.applied_cut
        return self.messages[cut.start : cut.end] if cut else []

    def final_summary(self, replies: dict[str, str]) -> str:
        """The summary the agent would store, from the summarizer's raw replies keyed by request kind."""
        assert self.plan is not None
        return self.plan.final_summary(replies)


def default_strategy(session: models.Session) -> str:
    return strategy_for_format(session.format)


def _label(message: Message) -> str:
    for block in message.blocks:
        if block.kind == "tool_use":
            return f"tool call {block.tool_name or '?'}"
        if block.kind == "tool_result":
            text = " ".join(block.text.split())
            return f"result for {block.tool_name or 'tool'}: {text[:LABEL_CHARS]}"
    text = " ".join(message.text.split())
    return text[:LABEL_CHARS] if text else f"({message.raw_type or message.kind})"


def _item(messages: Sequence[Message], position: int, estimates: Sequence[int]) -> Item:
    message = messages[position]
    return Item(
        position=position,
        seq=int(message.data.get("row_seq", position)),
        role=message.role,
        kind=message.kind,
        label=_label(message),
        tokens=estimates[position],
    )


def _segment(name: str, messages: Sequence[Message], start: int, end: int, estimates: Sequence[int]) -> Segment:
    count = end - start
    if count > 2 * LIST_EDGE:
        first = range(start, start + LIST_EDGE)
        last: range = range(end - LIST_EDGE, end)
    else:
        first, last = range(start, end), range(0)
    return Segment(
        name=name,
        start=start,
        end=end,
        tokens=sum(estimates[start:end]),
        first=[_item(messages, i, estimates) for i in first],
        last=[_item(messages, i, estimates) for i in last],
    )


def build_preview(
    *,
    session: models.Session,
    strategy: str,
    overrides: dict[str, Any],
    after_call: int | None = None,
    cut_start: int | None = None,
    cut_end: int | None = None,
    messages: list[Message] | None = None,
) -> Preview:
    """What ``strategy`` would do to the main chain after API call ``after_call`` (None: the end).

    ``cut_start``/``cut_end`` (calls) move the cut by hand; a refused cut comes back with ``refused`` set.
    Never raises for bad input: ``error`` says what is wrong.
    """
    preview = Preview(
        session=session,
        strategy_name=strategy,
        overrides=overrides,
        after_call=after_call,
        cut_start=cut_start,
        cut_end=cut_end,
    )
    try:
        built = build_strategy(strategy, info=selectors.session_info(session=session), overrides=overrides)
    except (ValueError, TypeError) as exc:  # UnknownStrategy is a ValueError
        preview.error = str(exc)
        return preview
    preview.strategy = built
    preview.parameters = editable_parameters(built)
    everything = messages if messages is not None else selectors.conversation(session=session, agent=MAIN)
    try:
        with selectors.cycle_collection_paused():
            plan = plan_preview(
                everything,
                strategy=built,
                after_call=after_call,
                cut_start=cut_start,
                cut_end=cut_end,
                points=selectors.after_calls_of(everything),
            )
    except PreviewError as exc:
        preview.error = str(exc)
        return preview
    preview.plan = plan
    visible, estimates = plan.messages, plan.estimates
    cut = plan.applied_cut
    if cut is not None and 0 <= cut.start <= cut.end <= len(visible):
        bounds = [("head", 0, cut.start), ("middle", cut.start, cut.end), ("tail", cut.end, len(visible))]
    else:
        bounds = [("head", 0, len(visible))]
    preview.segments = [_segment(name, visible, a, b, estimates) for name, a, b in bounds]
    pruned = set(plan.decision.prune)
    if pruned:
        preview.prune = [
            _item(visible, i, estimates)
            for i, m in enumerate(visible)
            if any(b.kind == "tool_result" and b.tool_id in pruned for b in m.blocks)
        ]
    return preview


def preview_for_run(*, run: models.CompactionRun, messages: list[Message] | None = None) -> Preview:
    """The preview a run was made from, rebuilt from the inputs the run stored."""
    return build_preview(
        session=run.session,
        strategy=run.strategy,
        overrides=dict(run.parameters),
        after_call=run.after_call,
        cut_start=run.cut_start_call,
        cut_end=run.cut_end_call,
        messages=messages,
    )


def summary_model_for(*, preview: Preview, override: str | None = None) -> ModelChoice:
    """The model a run of this preview sends, and why: the agent's own summary model when the Anthropic API can
    run it (a Claude model), else SUMMARY_MODEL; the reviewer's override wins over both."""
    plan = preview.plan
    fallback = settings.SUMMARY_MODEL
    if plan is None:
        if override:
            return ModelChoice(override, "override", "chosen for this run", None)
        return ModelChoice(fallback, "fallback", "SUMMARY_MODEL: there is no preview to ask the agent's model of", None)
    return summary_model_choice(plan.strategy, plan.messages, fallback=fallback, override=override)


def model_choice_json(choice: ModelChoice) -> dict[str, Any]:
    return {"model": choice.model, "source": choice.source, "note": choice.note, "agent_model": choice.agent_model}


def preview_json(preview: Preview) -> dict[str, Any]:
    """The one JSON answer of a preview: the web twin and ``manage.py preview --json`` print this object."""
    session_id = preview.session.pk

    def item(i: Item) -> dict[str, Any]:
        return {
            "position": i.position,
            "seq": i.seq,
            "role": i.role,
            "kind": i.kind,
            "label": i.label,
            "tokens_estimate": i.tokens,
            "url": reverse("sessions:message", args=[session_id, i.seq]),
        }

    data: dict[str, Any] = {
        "session": {"id": session_id, "url": reverse("sessions:detail", args=[session_id])},
        "strategy": preview.strategy_name,
        "parameters": preview.parameters,
        "error": preview.error or None,
    }
    if preview.plan is None:
        return data | {"after_call": preview.after_call, "runnable": False}
    data |= preview.plan.as_json()
    data["segments"] = {
        s.name: {
            "start": s.start,
            "end": s.end,
            "count": s.count,
            "tokens_estimate": s.tokens,
            "items": [item(i) for i in s.first + s.last],
            "hidden": s.hidden,
        }
        for s in preview.segments
    }
    data["prune_items"] = [item(i) for i in preview.prune]
    data["run_url"] = reverse("sessions:run_create", args=[session_id])
    # What a run of this preview would send (the run form's "summary_model" field overrides it, in JSON too).
    data["summary_model"] = model_choice_json(summary_model_for(preview=preview))
    data["offline"] = not settings.ANTHROPIC_API_KEY
    return data


# ---------------------------------------------------------------------------------------------
# Runs and reviews


class RunNotFound(LookupError):
    pass


def get_run(*, run_id: int) -> models.CompactionRun:
    try:
        return (
            models.CompactionRun.objects.select_related("session", "started_by", "reviewed_by")
            .prefetch_related("verdicts__by")
            .get(pk=run_id)
        )
    except models.CompactionRun.DoesNotExist:
        raise RunNotFound(f"No compaction run with id {run_id}.") from None


def reviewable() -> QuerySet[models.CompactionRun]:
    """Runs with a summary to review (a failed run has none)."""
    return models.CompactionRun.objects.filter(status=models.CompactionRun.Status.SUCCEEDED)


def pending_review_count() -> int:
    return reviewable().filter(review=models.CompactionRun.Review.PENDING).count()


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


# ---------------------------------------------------------------------------------------------
# What a summary lost


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


def _row_seq(messages: Sequence[Message], position: int) -> int:
    return int(messages[position].data.get("row_seq", position)) if 0 <= position < len(messages) else position


def coverage_json(checked: Coverage | None, *, session_id: int, messages: Sequence[Message]) -> dict[str, Any] | None:
    if checked is None:
        return None
    data = checked.as_json()
    for item in data["items"]:
        seq = _row_seq(messages, item["position"])
        item["seq"] = seq
        item["url"] = reverse("sessions:message", args=[session_id, seq])
    return data


def coverage_links(checked: Coverage | None, *, messages: Sequence[Message]) -> list[tuple[CoverageItem, int]]:
    """Each checklist item with the stored seq of its record (for the page's permalink)."""
    if checked is None:
        return []
    return [(item, _row_seq(messages, item.position)) for item in checked.items]


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
    conversation = messages if messages is not None else selectors.conversation(session=run.session, agent=MAIN)
    if run.cut_end > len(conversation):
        return None  # the session changed since the run: its positions no longer apply
    return coverage(conversation, start=run.cut_start, end=run.cut_end, summary=run.summary)


def review_facts(*, run: models.CompactionRun, messages: Sequence[Message] | None = None) -> ReviewFacts:
    conversation = messages if messages is not None else selectors.conversation(session=run.session, agent=MAIN)
    try:
        strategy = build_strategy(
            run.strategy, info=selectors.session_info(session=run.session), overrides=dict(run.parameters)
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
    """Each run's coverage (sessions are read once each: ``selectors.conversation`` keeps recent ones)."""
    return {run.pk: run_coverage(run=run) for run in runs}


def session_runs(*, session: models.Session, limit: int = 50) -> list[models.CompactionRun]:
    runs = models.CompactionRun.objects.filter(session=session).select_related("session", "started_by", "reviewed_by")
    return list(runs[:limit])


def preview_url(run: models.CompactionRun) -> str:
    """The preview a run was made from: its strategy, parameters, point and hand cut, in the URL."""
    query = [("strategy", run.strategy)]
    for name, value in (("at", run.after_call), ("cut_start", run.cut_start_call), ("cut_end", run.cut_end_call)):
        if value is not None:
            query.append((name, str(value)))
    query += [(k, "" if v is None else str(v)) for k, v in dict(run.parameters).items()]
    return reverse("sessions:preview", args=[run.session_id]) + "?" + urlencode(query)


def run_json(run: models.CompactionRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": reverse("sessions:run", args=[run.pk]),
        "preview_url": preview_url(run),
        "session": run.session_id,
        "strategy": run.strategy,
        "parameters": run.parameters,
        "after_call": run.after_call,
        "at": run.at,
        "cut": {
            "from": run.cut_start,
            "to": run.cut_end,
            "first_kept": run.first_kept,
            "cut_start_call": run.cut_start_call,
            "cut_end_call": run.cut_end_call,
        },
        "transcript_sha256": run.transcript_sha256,
        "transcript_chars": run.transcript_chars,
        "model": run.model,
        "model_source": run.model_source or None,
        "model_note": run.model_note or None,
        "offline": run.offline,
        "status": run.status,
        "finished": run.finished,
        "progress_text": run.progress_text if not run.finished else None,
        "summary": run.summary or None,
        "summary_tokens": run.summary_tokens,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": float(run.cost_usd) if run.cost_usd is not None else None,
        "duration_s": run.duration_s,
        "attempts": run.attempts,
        "error": run.error or None,
        "started_by": run.started_by.get_username() if run.started_by else None,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "review": {
            "status": run.review,
            "comment": run.review_comment,
            "by": run.reviewed_by.get_username() if run.reviewed_by else None,
            "at": run.reviewed_at.isoformat() if run.reviewed_at else None,
            "history": [
                {
                    "decision": v.decision,
                    "comment": v.comment,
                    "by": v.by.get_username() if v.by else None,
                    "at": v.at.isoformat(),
                }
                for v in run.verdicts.all()
            ],
        },
    }


# ---------------------------------------------------------------------------------------------
# Side by side


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


@dataclass(slots=True)
class ReplacedMessage:
    seq: int
    role: str
    kind: str
    text: str
    truncated: bool


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
        for m in selectors.compaction_summaries(session=session).only("seq", "blocks_json")
    ]
    runs = models.CompactionRun.objects.filter(session=session, status=models.CompactionRun.Status.SUCCEEDED)
    if exclude_run is not None:
        runs = runs.exclude(pk=exclude_run)
    found.extend(
        Candidate(
            key=str(r.pk),
            label=f"run {r.pk} ({r.strategy}, {r.model}{', offline' if r.offline else ''}, {r.review})",
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
    label = f"run {run.pk} ({run.strategy}, {run.model}{', offline' if run.offline else ''})"
    return Candidate(
        key=str(run.pk),
        label=label,
        text=run.summary,
        tokens=tokens,
        url=reverse("sessions:run", args=[run.pk]),
        structure=run.strategy,
        run_id=run.pk,
        review=run.review,
    )


def with_coverage(candidate: Candidate, *, session: models.Session, messages: Sequence[Message]) -> Candidate:
    """The candidate with its coverage: a run's over the range it summarised, the agent's over the range its
    own compaction summarised (compaction.coverage.recorded_range)."""
    if candidate.run_id is not None:
        run = models.CompactionRun.objects.filter(pk=candidate.run_id).only("cut_start", "cut_end", "summary").first()
        if run is not None and run.cut_end <= len(messages):
            candidate.coverage = coverage(messages, start=run.cut_start, end=run.cut_end, summary=candidate.text)
        return candidate
    seq = int(candidate.key.removeprefix("agent-"))
    position = next((i for i, m in enumerate(messages) if m.data.get("row_seq") == seq), None)
    if position is not None:
        start, end = recorded_range(messages, position)
        candidate.coverage = coverage(messages, start=start, end=end, summary=candidate.text)
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


# ---------------------------------------------------------------------------------------------
# Export


class ExportRefused(ValueError):
    pass


@dataclass(slots=True)
class ExportFile:
    filename: str
    content_type: str
    chunks: Iterator[bytes]


def _raw_lines(file: models.SourceFile) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes with its newline) of a stored file, streamed from its raw chunks."""
    number = 0
    pending = b""
    for chunk in selectors.read_raw(file=file):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            number += 1
            yield number, line + b"\n"
    if pending:
        yield number + 1, pending + b"\n"


# Why each agent would resume from a real compaction recorded after the point, not from the exported one: its
# loader starts from its LAST compaction record.
LAST_COMPACTION_WINS = {
    # docs/formats/claude-code.md §8.5: the boundary's parentUuid is null and the file is never rewritten; Claude
    # Code ignores what precedes the last compact_boundary on reload.
    "claude-code": "Claude Code resumes from the last compact_boundary in the file",
    # docs/formats/klaude-code.md §3.12: "Only the newest entry matters".
    "klaude-code": "klaude-code resumes from the last CompactionEntry in events.jsonl",
    # docs/formats/khaelor.md: a context.compacted event replaces the events of its cut; the later one's cut
    # reaches past this one.
    "khaelor": "KHAELOR resumes from the last context.compacted event in the log",
}


FOREIGN_EXPORT = (
    "Export writes the agent's own format: it needs a run of the session's own agent "
    "(Claude Code, klaude-code, KHAELOR or Codex)."
)


@dataclass(frozen=True, slots=True)
class ExportShape:
    """What an export of a run writes after the point, said before the download."""

    ends_at_point: bool  # nothing recorded after the point is written
    why: str  # one sentence a reviewer reads next to the Export link
    later_compactions: int  # the agent's own compactions recorded after the point

    def as_json(self) -> dict[str, Any]:
        return {"ends_at_point": self.ends_at_point, "why": self.why, "later_compactions": self.later_compactions}


def _export_shape(*, strategy: Strategy, source: models.SourceFile, following_line: int | None) -> ExportShape:
    """Whether the export ends at the point: always for an agent whose export does (Codex); otherwise when the
    agent recorded a real compaction after the point, since its loader would resume from that one."""
    label = strategy.short_label
    later = (
        models.ContextEvent.objects.filter(
            session=source.session_id, file=source, agent=MAIN, kind="compaction", line__gte=following_line
        ).count()
        if following_line is not None
        else 0
    )
    if not strategy.export_keeps_after_point:
        return ExportShape(
            True,
            f"The {label} export ends at the point: its compacted record holds the whole context {label} resumes "
            "from, so nothing recorded after the point is written.",
            later,
        )
    if following_line is None:
        return ExportShape(False, "The point is the end of the session: nothing was recorded after it.", 0)
    if later:
        rule = LAST_COMPACTION_WINS.get(strategy.name, f"{label} resumes from its last compaction")
        return ExportShape(
            True,
            f"The export ends at the point: {label} compacted again later ({later} time{'s' * (later > 1)}), and "
            f"{rule}, so keeping what follows would resume from that compaction, not from this summary.",
            later,
        )
    return ExportShape(
        False,
        f"The export keeps every line recorded after the point: {label} did not compact again after it.",
        0,
    )


def _main_source(*, run: models.CompactionRun, plan: PreviewPlan) -> models.SourceFile:
    seqs = [int(m.data["row_seq"]) for m in plan.messages if "row_seq" in m.data]
    file_ids = set(
        models.Message.objects.filter(session=run.session, agent=MAIN, seq__in=seqs).values_list("file_id", flat=True)
    )
    if len(file_ids) != 1:
        raise ExportRefused("The main chain spans several source files; export needs one.")
    return models.SourceFile.objects.get(pk=file_ids.pop())


def _checked_preview(
    *, run: models.CompactionRun, messages: list[Message] | None = None
) -> tuple[Preview, PreviewPlan, Cut]:
    """The run's own preview, refused when its cut no longer applies or the session changed since the run."""
    preview = preview_for_run(run=run, messages=messages)
    plan, cut = preview.plan, preview.applied_cut
    if preview.error or plan is None or cut is None:
        raise ExportRefused(preview.error or preview.refused or "The run's cut no longer applies to the session.")
    if preview.transcript_sha256 != run.transcript_sha256:
        raise ExportRefused("The session changed since this run: its transcript no longer matches.")
    return preview, plan, cut


def export_info(*, run: models.CompactionRun, messages: list[Message] | None = None) -> dict[str, Any]:
    """What the run page and its JSON twin say about the export before the download: whether it can be taken
    now (``url``), whether it ends at the point and why, or why there is none (``refused``).

    The shape is said for a finished run of the session's own agent even before it is accepted: a reviewer
    decides knowing what the export will hold.
    """
    refused: str | None = None
    if run.status != models.CompactionRun.Status.SUCCEEDED or not run.summary:
        refused = "Only a finished run with a summary can be exported."
    elif not _own_format(run):
        refused = FOREIGN_EXPORT
    if refused is None:
        try:
            _, plan, _ = _checked_preview(run=run, messages=messages)
            shape = _export_shape(
                strategy=plan.strategy, source=_main_source(run=run, plan=plan), following_line=plan.following_line
            )
        except ExportRefused as exc:
            refused = str(exc)
    if refused is not None:
        none = {"available": False, "url": None, "ends_at_point": None, "why": None, "later_compactions": None}
        return none | {"refused": refused}
    accepted = run.review == models.CompactionRun.Review.ACCEPTED
    return {
        "available": accepted,
        "url": reverse("sessions:run_export", args=[run.pk]) if accepted else None,
        **shape.as_json(),
        "refused": None if accepted else "Only an accepted summary can be exported.",
    }


def _own_format(run: models.CompactionRun) -> bool:
    """A run of the session's own agent, when that agent has a compacted format of its own to write."""
    if run.strategy != run.session.format:
        return False
    try:
        return build_strategy(run.strategy, info=None, overrides={}).export_suffix is not None
    except ValueError:
        return False


def can_export(run: models.CompactionRun) -> bool:
    """An accepted run of the session's own agent, when that agent has a compacted format of its own to write."""
    return run.review == models.CompactionRun.Review.ACCEPTED and _own_format(run)


def export_compacted(*, run: models.CompactionRun) -> ExportFile:
    """An accepted run's summary applied to its session, in the agent's own format."""
    if run.review != models.CompactionRun.Review.ACCEPTED or not run.summary:
        raise ExportRefused("Only an accepted summary can be exported.")
    if not can_export(run):
        raise ExportRefused(FOREIGN_EXPORT)
    _, plan, cut = _checked_preview(run=run)
    source = _main_source(run=run, plan=plan)
    shape = _export_shape(strategy=plan.strategy, source=source, following_line=plan.following_line)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", run.session.external_id) or f"session-{run.session_id}"
    data = ExportInput(
        lines=_raw_lines(source),
        messages=plan.messages,
        cut=cut,
        plan=plan.summarizer,
        summary=run.summary,
        tokens_before=plan.tokens_before,
        stop_line=plan.following_line,
        session_id=run.session.external_id,
        project=run.session.project,
        version=run.session.agent_version,
        summary_model=run.model,
        end_at_point=shape.ends_at_point,
    )
    chunks = plan.strategy.export_compacted(data)
    try:
        # A writer says what it cannot write before its first line; refuse then, not halfway through a download.
        first = next(chunks, b"")
    except ValueError as exc:
        raise ExportRefused(f"The {run.strategy} export cannot be written: {exc}") from None
    return ExportFile(
        filename=f"{stem}.compacted-run{run.pk}{plan.strategy.export_suffix}",
        content_type="application/x-ndjson",
        chunks=itertools.chain([first], chunks),
    )
