"""Reads for a compaction preview.

The preview itself is ``compaction.preview.plan_preview``: this module loads the session, builds the
strategy from the user's parameters and adds what a page needs (segments with permalinks). A run stores
the preview's inputs (strategy, parameters, point, hand cut) and the worker rebuilds the same preview from
them, so the transcript the reviewer saw is the transcript that is sent (checked by its sha256)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.urls import reverse

from compaction.formats.registry import agent_profile
from compaction.preview import PreviewError, PreviewPlan, plan_preview
from compaction.rules import Rule, rules_in_force
from compaction.strategies.base import Cut, Decision, ModelChoice, PlannedRequest, Strategy, summary_model_choice
from compaction.strategies.registry import STRATEGY_LABELS, build_strategy, editable_parameters, strategy_for_format
from compaction.transcript import MAIN, Message
from sessions_app import models
from sessions_app.selectors import conversation as conversation_selectors

LIST_EDGE = 40  # items shown at each end of a long head/middle/tail list; the rest is counted, not rendered
LABEL_CHARS = 120


# The page shows this much of a long summarizer transcript; a browser chokes on tens of megabytes of <pre>.
SHOWN_HEAD_CHARS = 40_000
SHOWN_TAIL_CHARS = 20_000


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
    def rules(self) -> list[tuple[Rule, int]]:
        """The rules in force at the point (compaction/rules.py), each with the stored seq of its record."""
        if self.plan is None:
            return []
        messages = self.plan.messages
        found = rules_in_force(
            messages, self.plan.at, sources=agent_profile(self.session.format).instructions, points=self.plan.points
        )
        return [(r, int(messages[r.position].data.get("row_seq", r.position))) for r in found]

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
    info = conversation_selectors.session_info(session=session)
    try:
        built = build_strategy(strategy, info=info, overrides=overrides)
    except (ValueError, TypeError) as exc:  # UnknownStrategy is a ValueError
        preview.error = str(exc)
        return preview
    preview.strategy = built
    preview.parameters = editable_parameters(built)
    everything = messages if messages is not None else conversation_selectors.conversation(session=session, agent=MAIN)
    try:
        plan = plan_preview(
            everything,
            strategy=built,
            after_call=after_call,
            cut_start=cut_start,
            cut_end=cut_end,
            points=conversation_selectors.after_calls_of(everything),
            info=info,
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
    data["rules_in_force"] = [
        rule.as_json() | {"seq": seq, "url": reverse("sessions:message", args=[session_id, seq])}
        for rule, seq in preview.rules
    ]
    data["run_url"] = reverse("sessions:run_create", args=[session_id])
    # What a run of this preview would send (the run form's "summary_model" field overrides it, in JSON too).
    data["summary_model"] = model_choice_json(summary_model_for(preview=preview))
    data["offline"] = not settings.ANTHROPIC_API_KEY
    return data
