"""Reads of what filled the context: at one call (the call panel) and at every call (the worker stores it)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, cast

from compaction.composition import (
    PART_KINDS,
    Inferred,
    PlacedEvent,
    composition,
    compositions,
    infer_unlogged,
    part_kind,
)
from compaction.transcript import MAIN, ApiCall, ContextEvent, EventKind, Message
from sessions_app import models
from sessions_app.selectors.conversation import conversation
from sessions_app.selectors.diagnosis import layers_before

# Events that change what the model still sees, read back for "What filled the context".
_HISTORY_EVENT_KINDS = ("compaction", "microcompact", "prune")


@dataclass(slots=True)
class _CompositionInputs:
    messages: list[Message]
    tokens: list[int]
    events: list[PlacedEvent]
    steps: list[ApiCall]  # the agent's calls located in ``messages`` (``compaction.replay.api_steps``)
    inferred: Inferred


def _composition_inputs(*, session: models.Session, agent: str) -> _CompositionInputs:
    """The agent's records, their stored estimates, its history-changing events and what the log never shows.

    Three queries (two of them none when ``conversation`` is cached), whatever the session's size.
    """
    from compaction.replay import api_steps

    messages = conversation(session=session, agent=agent)
    stored = {
        seq: tokens if tokens is not None else -(-chars // 4)  # ceil(chars / 4) until tiktoken has run
        for seq, tokens, chars in models.Message.objects.filter(session=session, agent=agent).values_list(
            "seq", "tokens", "chars"
        )
    }
    row_seqs = [int(m.data["row_seq"]) for m in messages]
    tokens = [stored.get(seq, 0) for seq in row_seqs]
    events = [
        PlacedEvent(
            # The carrying record is the event's own (a klaude or KHAELOR summary), so it is not "before" it.
            before=bisect.bisect_left(row_seqs, row.seq),
            event=ContextEvent(
                kind=cast(EventKind, row.kind),
                line=row.line,
                agent=row.agent,
                trigger=row.trigger or None,
                pre_tokens=row.pre_tokens,
                post_tokens=row.post_tokens,
                tokens_saved=row.tokens_saved,
                tool_ids=list(row.tool_ids or []),
                data=dict(row.data or {}),
            ),
        )
        for row in models.ContextEvent.objects.filter(
            session=session, agent=agent, kind__in=_HISTORY_EVENT_KINDS
        ).order_by("seq", "id")
    ]
    steps = api_steps(messages)
    inferred = infer_unlogged(messages, tokens, events, [(step.first, step.context or None) for step in steps])
    return _CompositionInputs(messages=messages, tokens=tokens, events=events, steps=steps, inferred=inferred)


def turn_detail(*, session: models.Session, agent: str, call: int) -> dict[str, Any]:
    """One API call: its numbers, the records of its response, and what filled the context at that point.

    The same object is the call panel of the timeline page, its JSON twin and ``manage.py timeline --call``.
    A log without recorded usage numbers its calls like the replay (one per assistant record); their
    context is then the estimate. A fixed number of queries.
    """
    inputs = _composition_inputs(session=session, agent=agent)
    step = next((s for s in inputs.steps if s.number == call), None)
    if step is None:
        raise models.ApiCall.DoesNotExist(f"No call {call} for agent {agent}.")
    api_call = models.ApiCall.objects.filter(session=session, agent=agent, number=call).first()
    split = composition(
        inputs.messages,
        tokens=inputs.tokens,
        events=inputs.events,
        call=call,
        first=step.first,
        recorded=step.context or None,
        inferred=inputs.inferred,
    )
    records = inputs.messages[step.first : step.end]
    # Records of other calls can sit between a streamed response's records; a call key says whose they are.
    own = [m for m in records if m.call_key == str(call)] or records
    response = [int(m.data["row_seq"]) for m in own]
    first = inputs.messages[step.first]
    return {
        "agent": agent,
        **split.as_json(),
        "seq": response[0] if response else int(first.data["row_seq"]),
        "model": api_call.model if api_call else first.model or "",
        "timestamp": api_call.timestamp.isoformat() if api_call and api_call.timestamp else first.timestamp,
        "input": api_call.input_tokens if api_call else None,
        "cache_read": api_call.cache_read_tokens if api_call else None,
        "cache_creation": api_call.cache_creation_tokens if api_call else None,
        "output": api_call.output_tokens if api_call else None,
        "response_seqs": response,
        "layers": layers_before(session=session, call=call) if agent == MAIN else None,
    }


def composition_series(*, session: models.Session, agent: str = MAIN) -> dict[str, Any]:
    """What filled the context at every call of an agent, by the one definition the call panel uses.

    Columns, so the timeline stacks them as they are: ``calls`` (the call numbers, also the main chain's x),
    ``context`` and ``estimated`` per call, and one row of tokens per part, adding up to each call's context
    (``turn_detail`` gives the same numbers for one call). Parts are ordered by colour family, bottom first,
    then by their largest share. Too slow for a request on a long session: the worker stores it
    (``services.analyse_session``).
    """
    inputs = _composition_inputs(session=session, agent=agent)
    splits = list(
        compositions(
            inputs.messages,
            tokens=inputs.tokens,
            events=inputs.events,
            inferred=inputs.inferred,
            calls=[(step.number, step.first, step.context or None) for step in inputs.steps],
        )
    )
    labels: dict[str, list[int]] = {}
    for i, split in enumerate(splits):
        for part in split.parts:
            row = labels.get(part.part)
            if row is None:  # not setdefault: its default, a row of every call, was built for every part of every call
                row = labels[part.part] = [0] * len(splits)
            row[i] = part.tokens
    order = sorted(labels, key=lambda label: (PART_KINDS.index(part_kind(label)), -max(labels[label]), label))
    return {
        "agent": agent,
        "calls": [split.call for split in splits],
        "context": [split.context for split in splits],
        "estimated": [split.estimated for split in splits],
        "parts": [{"part": label, "kind": part_kind(label), "tokens": labels[label]} for label in order],
    }


def peak_composition(series: dict[str, Any], *, call: int | None) -> dict[str, Any] | None:
    """What filled the context at the session's peak call ``call`` (``session_peak``), from a ``composition_series``.

    Without a peak call (a log whose estimates are not done), the series' own largest context, the first of equals.
    """
    if not series.get("calls"):
        return None
    calls = series["calls"]
    largest = max(range(len(calls)), key=lambda i: (series["context"][i], -i))
    at = calls.index(call) if call in calls else largest
    return {
        "call": series["calls"][at],
        "context": series["context"][at],
        "estimated": series["estimated"][at],
        "parts": [
            {"part": p["part"], "kind": p["kind"], "tokens": p["tokens"][at]}
            for p in series["parts"]
            if p["tokens"][at]
        ],
    }
