"""Reads of a session's stored calls: a row as the core's ``ApiCall``, the session's statistics, and its
headline peak."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings

from compaction.calls import Peak
from compaction.stats import LISTED_EVENT_KINDS, ListedEvent, SessionStats, embedded_response, tally_session
from compaction.transcript import ApiCall, Message, Usage
from sessions_app import models

# The columns of a stored call (``models.ApiCall``) that ``neutral_call`` reads, in the order it takes them.
CALL_FIELDS = (
    "agent",
    "number",
    "key",
    "line",
    "model",
    "input_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "output_tokens",
    "cache_creation_1h_tokens",
)


def neutral_call(
    agent: str,
    number: int,
    key: str,
    line: int,
    model: str,
    input_tokens: int,
    cache_creation_tokens: int,
    cache_read_tokens: int,
    output_tokens: int,
    cache_creation_1h_tokens: int,
    timestamp: datetime | None = None,
) -> ApiCall:
    """A stored call (the ``CALL_FIELDS`` of a ``models.ApiCall`` row, and its timestamp where the reader needs
    it) as the core's one call type, ``compaction.transcript.ApiCall``: the one place storage becomes a call.

    The stored ``context`` column is not read: it is ``usage.context``, as the importer wrote it.
    """
    return ApiCall(
        agent=agent,
        number=number,
        key=key,
        line=line,
        usage=Usage(input_tokens, cache_creation_tokens, cache_read_tokens, output_tokens, cache_creation_1h_tokens),
        model=model or None,
        timestamp=timestamp.isoformat() if timestamp else None,
    )


def session_stats(*, session: models.Session) -> SessionStats:
    """The statistics of a stored session, by the one definition in ``compaction.stats`` (four queries)."""
    events = listed_events(
        models.ContextEvent.objects.filter(session=session, kind__in=LISTED_EVENT_KINDS).order_by("seq", "id")
    )
    # The calls of agents that recorded no usage: their model replies (compaction.calls.CallTracker).
    with_usage = set(models.ApiCall.objects.filter(session=session).values_list("agent", flat=True).distinct())
    responses = {agent: len(points) for agent, points in calls_without_usage(session, skip=with_usage).items()}
    return tally_session(
        calls=stored_calls(session=session),
        events=events,
        prices=settings.MODEL_PRICES,
        embedded=stored_embedded(session=session),
        responses=responses,
    )


def stored_calls(*, session: models.Session) -> Iterator[ApiCall]:
    """Every stored call of the session (every agent's, inline subagents' included), as the core's calls."""
    return (
        neutral_call(*row)
        for row in models.ApiCall.objects.filter(session=session).order_by().values_list(*CALL_FIELDS).iterator()
    )


def stored_embedded(*, session: models.Session) -> Iterator[ApiCall]:
    """Subagent responses known only from progress lines (``compaction.stats.embedded_response``): priced only where
    no stored call has their key (``compaction.stats.priced_once``), i.e. in a session imported before inline
    subagents were stored as such."""
    return (
        response
        for data_json in models.Message.objects.filter(
            session=session, raw_type="progress", data_json__contains='"response"'
        ).values_list("data_json", flat=True)
        if (
            response := embedded_response(
                Message(line=0, role="meta", kind="bookkeeping", data=orjson.loads(data_json))
            )
        )
        is not None
    )


def listed_events(rows: Iterable[models.ContextEvent]) -> Iterator[ListedEvent]:
    """Event rows (stored, or an import's about to be) as the statistics list them, in the order given."""
    return (
        ListedEvent(
            kind=e.kind,
            agent=e.agent,
            trigger=e.trigger or None,
            pre_tokens=e.pre_tokens,
            tokens_saved=e.tokens_saved,
            after_call=e.after_call,
            line=e.line,
        )
        for e in rows
    )


def calls_without_usage(session: models.Session, *, skip: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The calls of agents that recorded no usage, numbered as ``compaction.replay.api_steps`` numbers them.

    One call per assistant record the model wrote (not the agent's own synthetic replies), so such a log's
    estimates and markers sit on the same call numbers as its composition and its call panel.
    """
    rows = (
        models.Message.objects.filter(session=session, kind="assistant")
        .exclude(agent__in=skip)
        .order_by("agent", "seq")
        .values_list("agent", "seq", "data_json")
    )
    calls: dict[str, list[dict[str, Any]]] = {}
    for agent, seq, data_json in rows.iterator(chunk_size=2000):
        if '"synthetic"' in data_json and orjson.loads(data_json).get("synthetic"):
            continue
        points = calls.setdefault(agent, [])
        points.append({"call": len(points) + 1, "seq": seq})
    return calls


def session_peak(*, session: models.Session) -> Peak:
    """The session's headline peak as stored by its import (``compaction.stats``) or, without usage, its estimates."""
    return Peak(call=session.peak_call, tokens=session.peak_context)
