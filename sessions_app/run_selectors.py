"""Reads for compaction previews, runs, reviews, comparisons and exports.

The preview is the one place that decides what a run will summarise: a run stores the preview's
inputs (strategy, parameters, point, cut) and the worker rebuilds the same preview from them, so
the transcript the reviewer saw is the transcript that is sent (checked by its sha256).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db.models import QuerySet
from django.urls import reverse

from compaction.strategies import claude_code as cc
from compaction.strategies import klaude_code as kc
from compaction.strategies.base import Cut, CutRefused, Decision, Strategy
from compaction.strategies.khaelor import KhaelorStrategy
from compaction.strategies.registry import EDITABLE, STRATEGY_LABELS, STRATEGY_NAMES, build_strategy
from compaction.summarize import SummaryRequest, build_user_content
from compaction.tokens import tiktoken_counts
from compaction.transcript import MAIN, Message
from sessions_app import models, selectors

LIST_EDGE = 40  # items shown at each end of a long head/middle/tail list; the rest is counted, not rendered
LABEL_CHARS = 120
REPLACED_TEXT_CHARS = 4000  # per message on the compare page
RECENT_DECIDED = 30


class PreviewError(ValueError):
    """The preview's inputs are unusable (unknown strategy, bad parameter, bad point); the message says why."""


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


# The page shows this much of a long summarizer transcript; a browser chokes on tens of megabytes of <pre>.
SHOWN_HEAD_CHARS = 40_000
SHOWN_TAIL_CHARS = 20_000


@dataclass(slots=True)
class PlannedRequest:
    """One summarizer call as the strategy builds it."""

    kind: str
    system: str
    transcript: str
    rounds: list[str] | None  # API-round groups, oldest first, when the strategy can drop them on prompt-too-long
    instructions: str
    max_tokens: int

    @property
    def user_content(self) -> str:
        """Exactly what the summarizer receives as the user message (before any prompt-too-long retry)."""
        return build_user_content(self.rounds or [self.transcript], truncated=False, instructions=self.instructions)

    def shown(self, *, head: int = SHOWN_HEAD_CHARS, tail: int = SHOWN_TAIL_CHARS) -> dict[str, Any]:
        """The user message for the page: whole when short, else its head and tail (the JSON twin has it all)."""
        text = self.user_content
        if len(text) <= head + tail:
            return {"chars": len(text), "head": text, "tail": "", "hidden": 0}
        return {"chars": len(text), "head": text[:head], "tail": text[-tail:], "hidden": len(text) - head - tail}

    def summary_request(self, *, model: str) -> SummaryRequest:
        return SummaryRequest(
            system=self.system,
            transcript=self.transcript,
            rounds=self.rounds,
            model=model,
            max_tokens=self.max_tokens,
            instructions=self.instructions,
        )


@dataclass
class Preview:
    session: models.Session
    strategy_name: str
    overrides: dict[str, Any]
    total: int  # messages in the conversation view
    at: int
    call: int | None = None
    error: str = ""
    strategy: Strategy | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)  # the conversation view up to ``at``
    following_line: int | None = None  # source line of the first record after ``at`` (export stops there)
    decision: Decision | None = None
    auto_cut: Cut | None = None
    cut: Cut | None = None
    hand_cut: bool = False
    refused: str = ""
    requests: list[PlannedRequest] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    prune: list[Item] = field(default_factory=list)
    tokens_after: int = 0
    klaude_plan: kc.CompactionPlan | None = None
    klaude_details: dict[str, list[str]] | None = None

    @property
    def label(self) -> str:
        return STRATEGY_LABELS.get(self.strategy_name, self.strategy_name)

    @property
    def tokens_before(self) -> int:
        return self.decision.tokens_before if self.decision else 0

    @property
    def should_compact(self) -> bool:
        return bool(self.decision and self.decision.should_compact)

    @property
    def runnable(self) -> bool:
        return not self.error and not self.refused and self.cut is not None and bool(self.requests)

    @property
    def transcript(self) -> str:
        """Every user message the summarizer would receive, in order (one per request)."""
        if len(self.requests) == 1:
            return self.requests[0].user_content
        return "\n\n".join(
            f"===== request {i + 1}: {r.kind} =====\n{r.user_content}" for i, r in enumerate(self.requests)
        )

    @property
    def transcript_sha256(self) -> str:
        digest = hashlib.sha256()
        for request in self.requests:
            for part in (request.kind, request.system, request.user_content, str(request.max_tokens)):
                digest.update(part.encode())
                digest.update(b"\0")
        return digest.hexdigest()

    def middle(self) -> list[Message]:
        return self.messages[self.cut.start : self.cut.end] if self.cut else []

    def final_summary(self, replies: dict[str, str]) -> str:
        """The summary the agent would store, from the summarizer's raw replies keyed by request kind."""
        strategy = self.strategy
        if isinstance(strategy, cc.ClaudeCodeStrategy):
            return strategy.parse_summary(replies.get("compact", ""))
        if isinstance(strategy, KhaelorStrategy):
            return strategy.checkpoint_yaml(replies.get("checkpoint", ""), messages=self.messages)
        if isinstance(strategy, kc.KlaudeCodeStrategy):
            parsed = {kind: strategy.parse_summary(text) for kind, text in replies.items()}
            if self.klaude_plan is not None:
                return strategy.assemble_summary(self.klaude_plan, replies=parsed)
            history = parsed.get("update_history", parsed.get("history", ""))
            return history + kc.file_operation_blocks(self.klaude_details or {})
        return "\n\n".join(replies.values())


def default_strategy(session: models.Session) -> str:
    return session.format if session.format in STRATEGY_NAMES else STRATEGY_NAMES[0]


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


def _resolve_at(messages: Sequence[Message], *, at: int | None, call: int | None) -> int:
    if call is not None:
        positions = [i for i, m in enumerate(messages) if m.call_key == str(call)]
        if not positions:
            raise PreviewError(f"The main chain has no API call {call}.")
        return positions[-1] + 1  # the session as it stood once call ``call`` had answered
    if at is None:
        return len(messages)
    if not 0 <= at <= len(messages):
        raise PreviewError(f"The point must be between 0 and {len(messages)} (messages in the main chain).")
    return at


def _claude_code_requests(strategy: cc.ClaudeCodeStrategy, middle: Sequence[Message]) -> list[PlannedRequest]:
    # Rounds as Claude Code groups them (grouping.ts), so a prompt-too-long retry drops the oldest (compact.ts).
    rounds = [text for group in cc.group_by_api_round(middle) if (text := strategy.render_transcript(group))]
    if not rounds:
        return []
    return [
        PlannedRequest(
            kind="compact",
            system=cc.SUMMARIZER_SYSTEM_PROMPT,
            transcript="\n\n".join(rounds),
            rounds=rounds,
            instructions=strategy.prompt(),
            max_tokens=strategy.max_summary_tokens,
        )
    ]


def _klaude_request(request: kc.SummaryRequest) -> PlannedRequest:
    # klaude sends one user message made of its parts (§3.8) and never drops rounds: one indivisible round.
    return PlannedRequest(
        kind=request.kind,
        system=request.system,
        transcript=request.text,
        rounds=None,
        instructions="",
        max_tokens=request.max_tokens,
    )


def _klaude_hand_requests(
    strategy: kc.KlaudeCodeStrategy, messages: Sequence[Message], cut: Cut
) -> tuple[list[PlannedRequest], dict[str, list[str]]]:
    """klaude's history request for a cut placed by hand (no split-task prefix: the reviewer chose the end)."""
    kinds = [kc.item_type(m) for m in messages]
    summarized = [p for p in range(cut.start, cut.end) if kinds[p] in kc.MESSAGE_TYPES and kinds[p] != kc.SYSTEM]
    previous = next((kc.item_dict(messages[p]) for p in range(cut.end - 1, -1, -1) if kinds[p] == kc.COMPACTION), None)
    previous_summary = str(previous.get("summary") or "") if previous else None
    previous_details = previous.get("details") if previous else None
    details = kc.collect_file_operations(
        [kinds[p] for p in summarized],
        [kc.item_dict(messages[p]) for p in summarized],
        previous_details=previous_details if isinstance(previous_details, dict) else None,
        file_tracker_paths=strategy.file_tracker_paths,
    )
    if not summarized and not previous_summary:
        return [], details
    serialized = kc.serialize_items([kinds[p] for p in summarized], [kc.item_dict(messages[p]) for p in summarized])
    request = kc.history_request(
        serialized, previous_summary=previous_summary or None, focus=None, max_tokens=strategy.max_summary_tokens
    )
    return [_klaude_request(request)], details


def build_preview(
    *,
    session: models.Session,
    strategy: str,
    overrides: dict[str, Any],
    at: int | None = None,
    call: int | None = None,
    start: int | None = None,
    end: int | None = None,
    messages: list[Message] | None = None,
) -> Preview:
    """What ``strategy`` would do to the main chain at point ``at`` (or after API call ``call``).

    ``start``/``end`` move the cut by hand; a cut the strategy refuses comes back with ``refused`` set.
    Never raises for bad input: ``error`` says what is wrong.
    """
    everything = messages if messages is not None else selectors.conversation(session=session, agent=MAIN)
    preview = Preview(session=session, strategy_name=strategy, overrides=overrides, total=len(everything), at=0)
    try:
        built = build_strategy(strategy, info=selectors.session_info(session=session), overrides=overrides)
        preview.at = _resolve_at(everything, at=at, call=call)
    except (ValueError, TypeError) as exc:  # UnknownStrategy and PreviewError are ValueErrors
        preview.error = str(exc)
        return preview
    preview.strategy = built
    preview.call = call
    preview.parameters = {name: getattr(built.params, name) for name in EDITABLE[strategy]}  # type: ignore[attr-defined]
    visible = everything[: preview.at]
    preview.messages = visible
    if preview.at < len(everything):
        preview.following_line = everything[preview.at].line
    estimates = [built.estimate(m) for m in visible]

    decision = built.decide(visible)
    preview.decision = decision
    auto = decision.cut or built.select_cut(visible)
    preview.auto_cut = auto
    cut = auto
    if start is not None or end is not None:
        default_start = auto.start if auto else 0
        default_end = auto.end if auto else len(visible)
        hand = Cut(
            start=default_start if start is None else start, end=default_end if end is None else end, first_kept=0
        )
        hand.first_kept = _first_kept(strategy, visible, hand.end)
        preview.hand_cut = auto is None or (hand.start, hand.end) != (auto.start, auto.end)
        if preview.hand_cut:
            try:
                built.check_cut(visible, hand)
            except CutRefused as exc:
                preview.refused = str(exc)
            cut = hand
    preview.cut = cut

    if cut is not None and not preview.refused:
        preview.requests = _requests(preview, built, visible, cut, decision)
        middle_tokens = sum(estimates[cut.start : cut.end])
        if not preview.hand_cut and decision.cut is not None:
            preview.tokens_after = decision.tokens_after_estimate
        else:
            preview.tokens_after = max(0, decision.tokens_before - middle_tokens)
    else:
        preview.tokens_after = decision.tokens_after_estimate or decision.tokens_before

    if cut is not None and 0 <= cut.start <= cut.end <= len(visible):
        bounds = [("head", 0, cut.start), ("middle", cut.start, cut.end), ("tail", cut.end, len(visible))]
    else:
        bounds = [("head", 0, len(visible))]
    preview.segments = [_segment(name, visible, a, b, estimates) for name, a, b in bounds]
    pruned = set(decision.prune)
    if pruned:
        preview.prune = [
            _item(visible, i, estimates)
            for i, m in enumerate(visible)
            if any(b.kind == "tool_result" and b.tool_id in pruned for b in m.blocks)
        ]
    return preview


def _first_kept(strategy: str, messages: Sequence[Message], end: int) -> int:
    """The agent's own id of the first kept item: klaude's history index, KHAELOR's seq, else the position."""
    if strategy == "khaelor" and messages:
        if end < len(messages):
            return int(messages[end].data.get("seq", end))
        return int(messages[-1].data.get("seq", end)) + 1
    return end


def _requests(
    preview: Preview, strategy: Strategy, visible: list[Message], cut: Cut, decision: Decision
) -> list[PlannedRequest]:
    if isinstance(strategy, cc.ClaudeCodeStrategy):
        return _claude_code_requests(strategy, visible[cut.start : cut.end])
    if isinstance(strategy, KhaelorStrategy):
        middle = strategy.extract_middle(visible, cut, also_pruned=decision.prune)
        transcript = strategy.render_transcript(middle)
        return [
            PlannedRequest(
                kind="checkpoint",
                system=strategy.prompt(),
                # compaction.ts summarizeToCheckpointText wraps the transcript in one user message.
                transcript=KhaelorStrategy.summary_user_text(transcript),
                rounds=None,
                instructions="",
                max_tokens=strategy.max_summary_tokens,
            )
        ]
    if isinstance(strategy, kc.KlaudeCodeStrategy):
        if not preview.hand_cut:
            plan = strategy.plan(visible)
            if plan.can_compact:
                preview.klaude_plan = plan
                preview.klaude_details = plan.details
                return [_klaude_request(r) for r in plan.requests]
        requests, details = _klaude_hand_requests(strategy, visible, cut)
        preview.klaude_details = details
        return requests
    return []


def preview_for_run(*, run: models.CompactionRun, messages: list[Message] | None = None) -> Preview:
    """The preview a run was made from, rebuilt from what the run stored."""
    return build_preview(
        session=run.session,
        strategy=run.strategy,
        overrides=dict(run.parameters),
        at=run.at,
        start=run.cut_start,
        end=run.cut_end,
        messages=messages,
    )


def preview_json(preview: Preview) -> dict[str, Any]:
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

    def cut(c: Cut | None) -> dict[str, Any] | None:
        return None if c is None else {"start": c.start, "end": c.end, "first_kept": c.first_kept, "reason": c.reason}

    return {
        "session": {"id": session_id, "url": reverse("sessions:detail", args=[session_id])},
        "strategy": preview.strategy_name,
        "parameters": preview.parameters,
        "at": preview.at,
        "call": preview.call,
        "messages": preview.total,
        "error": preview.error or None,
        "should_compact": preview.should_compact,
        "reason": preview.decision.reason if preview.decision else None,
        "tokens_before": preview.tokens_before,
        "tokens_after_estimate": preview.tokens_after,
        "cut": cut(preview.cut),
        "auto_cut": cut(preview.auto_cut),
        "hand_cut": preview.hand_cut,
        "refused": preview.refused or None,
        "segments": {
            s.name: {
                "start": s.start,
                "end": s.end,
                "count": s.count,
                "tokens_estimate": s.tokens,
                "items": [item(i) for i in s.first + s.last],
                "hidden": s.hidden,
            }
            for s in preview.segments
        },
        "prune": [item(i) for i in preview.prune],
        "requests": [
            {"kind": r.kind, "system": r.system, "user_content": r.user_content, "max_tokens": r.max_tokens}
            | {"rounds": len(r.rounds) if r.rounds else 1}
            for r in preview.requests
        ],
        "transcript_sha256": preview.transcript_sha256 if preview.requests else None,
        "runnable": preview.runnable,
    }


# ---------------------------------------------------------------------------------------------
# Runs and reviews


class RunNotFound(LookupError):
    pass


def get_run(*, run_id: int) -> models.CompactionRun:
    try:
        return models.CompactionRun.objects.select_related("session", "started_by", "reviewed_by").get(pk=run_id)
    except models.CompactionRun.DoesNotExist:
        raise RunNotFound(f"No compaction run with id {run_id}.") from None


def reviewable() -> QuerySet[models.CompactionRun]:
    """Runs with a summary to review (a failed run has none)."""
    return models.CompactionRun.objects.filter(status=models.CompactionRun.Status.SUCCEEDED)


def pending_review_count() -> int:
    return reviewable().filter(review=models.CompactionRun.Review.PENDING).count()


def review_queue(*, recent: int = RECENT_DECIDED) -> tuple[list[models.CompactionRun], list[models.CompactionRun]]:
    """Pending reviews (oldest first) and the most recent decisions."""
    base = reviewable().select_related("session", "started_by", "reviewed_by")
    pending = list(base.filter(review=models.CompactionRun.Review.PENDING).order_by("created_at", "id"))
    decided = list(base.exclude(review=models.CompactionRun.Review.PENDING).order_by("-reviewed_at", "-id")[:recent])
    return pending, decided


def session_runs(*, session: models.Session, limit: int = 50) -> list[models.CompactionRun]:
    runs = models.CompactionRun.objects.filter(session=session).select_related("session", "started_by", "reviewed_by")
    return list(runs[:limit])


def run_json(run: models.CompactionRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": reverse("sessions:run", args=[run.pk]),
        "session": run.session_id,
        "strategy": run.strategy,
        "parameters": run.parameters,
        "at": run.at,
        "cut": {"start": run.cut_start, "end": run.cut_end, "first_kept": run.first_kept},
        "transcript_sha256": run.transcript_sha256,
        "transcript_chars": run.transcript_chars,
        "model": run.model,
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
        key=str(run.pk), label=label, text=run.summary, tokens=tokens, url=reverse("sessions:run", args=[run.pk])
    )


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


def _now_iso_z() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


EXPORTABLE = {("claude-code", "claude-code"), ("klaude-code", "klaude-code")}  # (strategy, session format)


def can_export(run: models.CompactionRun) -> bool:
    """An accepted run of the session's own agent, which has a compacted format of its own to write."""
    return run.review == models.CompactionRun.Review.ACCEPTED and (run.strategy, run.session.format) in EXPORTABLE


def export_compacted(*, run: models.CompactionRun) -> ExportFile:
    """An accepted run's summary applied to its session, in the agent's own format."""
    if run.review != models.CompactionRun.Review.ACCEPTED or not run.summary:
        raise ExportRefused("Only an accepted summary can be exported.")
    preview = preview_for_run(run=run)
    if preview.error or preview.cut is None or preview.refused:
        raise ExportRefused(preview.error or preview.refused or "The run's cut no longer applies to the session.")
    if preview.transcript_sha256 != run.transcript_sha256:
        raise ExportRefused("The session changed since this run: its transcript no longer matches.")
    messages = preview.messages
    seqs = [int(m.data["row_seq"]) for m in messages if "row_seq" in m.data]
    file_ids = set(
        models.Message.objects.filter(session=run.session, agent=MAIN, seq__in=seqs).values_list("file_id", flat=True)
    )
    if len(file_ids) != 1:
        raise ExportRefused("The main chain spans several source files; export needs one.")
    source = models.SourceFile.objects.get(pk=file_ids.pop())
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", run.session.external_id) or f"session-{run.session_id}"
    if run.strategy == "claude-code" and run.session.format == "claude-code":
        return ExportFile(
            filename=f"{stem}.compacted-run{run.pk}.jsonl",
            content_type="application/x-ndjson",
            chunks=_claude_code_export(run=run, preview=preview, source=source),
        )
    if run.strategy == "klaude-code" and run.session.format == "klaude-code":
        return ExportFile(
            filename=f"{stem}.compacted-run{run.pk}.events.jsonl",
            content_type="application/x-ndjson",
            chunks=_klaude_export(run=run, preview=preview, source=source),
        )
    raise ExportRefused(
        "Export writes the agent's own format: a Claude Code run of a Claude Code session, "
        "or a klaude-code run of a klaude-code session."
    )


def _claude_code_export(*, run: models.CompactionRun, preview: Preview, source: models.SourceFile) -> Iterator[bytes]:
    """Head lines, a manual compact_boundary, the isCompactSummary message, then the kept lines (§8.1-8.2).

    Kept records are re-emitted byte for byte; only a parentUuid that pointed into the summarised part is
    re-linked to the summary message (as Claude Code's preservedMessages loaders do).
    """
    assert preview.cut is not None and isinstance(preview.strategy, cc.ClaudeCodeStrategy)
    messages, cut = preview.messages, preview.cut
    session = run.session
    middle_first = messages[cut.start].line if cut.start < len(messages) else None
    tail_first = messages[cut.end].line if cut.end < len(messages) else None
    stop = preview.following_line
    boundary_uuid, summary_uuid = str(uuid.uuid4()), str(uuid.uuid4())
    moment = _now_iso_z()
    envelope = {
        "isSidechain": False,
        "userType": "external",
        "cwd": session.project,
        "sessionId": session.external_id,
        "version": session.agent_version,
    }
    dropped: set[str] = set()
    last_dropped: str | None = None

    def marker() -> bytes:
        metadata: dict[str, Any] = {"trigger": "manual", "preTokens": preview.tokens_before}
        boundary = {
            "parentUuid": None,
            "logicalParentUuid": last_dropped,
            **envelope,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "timestamp": moment,
            "uuid": boundary_uuid,
            "level": "info",
            "compactMetadata": metadata,
        }
        content = preview.strategy.continuation_message(run.summary, version=session.agent_version or None, auto=False)  # type: ignore[union-attr]
        summary = {
            "parentUuid": boundary_uuid,
            **envelope,
            "type": "user",
            "message": {"role": "user", "content": content},
            "isVisibleInTranscriptOnly": True,
            "isCompactSummary": True,
            "uuid": summary_uuid,
            "timestamp": moment,
        }
        return orjson.dumps(boundary) + b"\n" + orjson.dumps(summary) + b"\n"

    emitted_marker = False
    for number, line in _raw_lines(source):
        if stop is not None and number >= stop:
            break
        if middle_first is not None and number >= middle_first and (tail_first is None or number < tail_first):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("uuid"), str):
                dropped.add(obj["uuid"])
                last_dropped = obj["uuid"]
            continue
        if middle_first is not None and number >= middle_first and not emitted_marker:
            yield marker()
            emitted_marker = True
        if dropped and b"parentUuid" in line:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = None
            if isinstance(obj, dict) and obj.get("parentUuid") in dropped:
                obj["parentUuid"] = summary_uuid
                yield orjson.dumps(obj) + b"\n"
                continue
        yield line
    if not emitted_marker:
        yield marker()


def _klaude_export(*, run: models.CompactionRun, preview: Preview, source: models.SourceFile) -> Iterator[bytes]:
    """The history up to the point, then the CompactionEntry klaude would append (docs/formats/klaude-code.md §1.3).

    klaude never rewrites events.jsonl: a compaction appends an entry whose first_kept_index points into the
    history, so the kept items are the lines from that index on.
    """
    assert preview.cut is not None and isinstance(preview.strategy, kc.KlaudeCodeStrategy)
    messages, cut = preview.messages, preview.cut
    for number, line in _raw_lines(source):
        if preview.following_line is not None and number >= preview.following_line:
            break
        yield line
    plan = preview.klaude_plan
    kept = [m for m in messages[cut.end :] if kc.item_type(m) != kc.COMPACTION]
    brief = (
        plan.kept_items_brief
        if plan is not None
        else kc.kept_items_brief([kc.item_type(m) for m in kept], [kc.item_dict(m) for m in kept])
    )
    entry = {
        "type": kc.COMPACTION,
        "data": {
            "summary": run.summary,
            "first_kept_index": cut.first_kept,
            "tokens_before": preview.tokens_before,
            "details": preview.klaude_details,
            "kept_items_brief": brief,
            # klaude writes naive local time with microseconds (§1.2 "Timestamps").
            "created_at": datetime.now().isoformat(timespec="microseconds"),
        },
    }
    # klaude's codec: json.dumps defaults (", " and ": " separators), not ASCII-escaped (§1.2).
    yield (json.dumps(entry, ensure_ascii=False) + "\n").encode()
