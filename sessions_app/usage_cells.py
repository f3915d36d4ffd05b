"""Writes: the usage cells of a session (``models.UsageCell``), kept by every import of it.

A cell sums a session's calls in one UTC quarter hour, of one model, on one side (main chain, a subagent's own
file, an inline subagent's response) and one side of the model's long-context price tier. The Usage report
(``selectors.usage``) reads only cells, so it costs the same whatever the size of the archive.

A session's cells are made again whole each time an import writes to it (``keep_usage_cells``, from
``services._FileWriter.finish``): an append may raise a call's output, bring a call whose key an inline response
had (that response then no longer counts), or change the session's start (the time of calls that record none).
Remade from the session's own rows, the cells are the same however the file was imported; the session that an
import creates has them from what it stored, without reading them back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from compaction.costs import Price, add_usage
from compaction.stats import embedded_response
from compaction.transcript import MAIN, ApiCall, Message, Usage
from sessions_app import models
from sessions_app.selectors.usage import INLINE_SIDE, MAIN_SIDE, SUBAGENT_SIDE, model_price, tier_of


def quarter_of(when: datetime | None) -> datetime | None:
    """The UTC quarter hour ``when`` falls in (every zone's offset is a whole number of quarter hours)."""
    if when is None:
        return None
    when = when.astimezone(UTC)
    return when.replace(minute=when.minute // 15 * 15, second=0, microsecond=0)


@dataclass(slots=True)
class _Sums:
    calls: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0, 0, 0, 0, 0))

    def add(self, usage: Usage) -> None:
        self.calls += 1
        add_usage(self.usage, usage)


@dataclass(frozen=True, slots=True)
class InlineResponse:
    """An inline subagent's response (``compaction.stats.embedded_response``) and the stored time of its record."""

    response: ApiCall
    timestamp: datetime | None


def has_inline_cells(*, session: models.Session) -> bool:
    """Whether the session's cells count an inline subagent's response."""
    return models.UsageCell.objects.filter(session=session, side=INLINE_SIDE).exists()


def keep_usage_cells(
    *, session: models.Session, inline: Iterable[InlineResponse] | None = None, store: Any = models
) -> int:
    """Make ``session``'s usage cells again from its stored calls and inline responses; the number of cells.

    ``inline``: the inline responses, in record order, when the caller has them (an import that created the
    session); read from the session's ``progress`` records otherwise. ``store``: where ``ApiCall``, ``Message`` and
    ``UsageCell`` are (a migration's historical models; this app's models otherwise)."""
    found = usage_cells(session=session, inline=inline, store=store)
    store.UsageCell.objects.filter(session_id=session.pk).delete()
    store.UsageCell.objects.bulk_create(found, batch_size=1000)
    return len(found)


def usage_cells(
    *, session: models.Session, inline: Iterable[InlineResponse] | None = None, store: Any = models
) -> list[models.UsageCell]:
    """``session``'s usage cells as its rows give them (unsaved)."""
    started = session.started_at
    prices: dict[str, Price | None] = {}
    cells: dict[tuple[datetime | None, str, str, bool], _Sums] = {}
    keys: set[str] = set()

    def add(*, when: datetime | None, model: str, side: str, usage: Usage) -> None:
        if model not in prices:
            prices[model] = model_price(model)
        tier = tier_of(prices[model])
        long_context = tier is not None and usage.context > tier
        cells.setdefault((quarter_of(when or started), model, side, long_context), _Sums()).add(usage)

    rows = (
        store.ApiCall.objects.filter(session_id=session.pk)
        .order_by()
        .values_list(
            "key",
            "agent",
            "model",
            "timestamp",
            "input_tokens",
            "cache_creation_tokens",
            "cache_read_tokens",
            "output_tokens",
            "cache_creation_1h_tokens",
            "carried",
        )
    )
    for key, agent, model, timestamp, i, cw, cr, o, cw1, carried in rows.iterator(chunk_size=2000):
        keys.add(key)
        add(
            when=timestamp,
            model=model,
            # An inline subagent's calls (known from the copies its parent's progress records carry) are inline.
            side=INLINE_SIDE if carried else MAIN_SIDE if agent == MAIN else SUBAGENT_SIDE,
            usage=Usage(i, cw, cr, o, cw1),
        )
    # Each inline response once per session, unless a call of the session has its key (as tally_session prices
    # them); the lines of one streamed response repeat its input, the last has all of its output.
    responses: dict[str, tuple[InlineResponse, Usage]] = {}
    for found in inline_responses(session=session, store=store) if inline is None else inline:
        usage = found.response.usage
        if usage is None or found.response.key in keys:
            continue
        seen = responses.get(found.response.key)
        if seen is None:
            responses[found.response.key] = (found, dataclasses.replace(usage))
        else:
            seen[1].output_tokens = max(seen[1].output_tokens, usage.output_tokens)
    for found, usage in responses.values():
        add(when=found.timestamp, model=found.response.model or "", side=INLINE_SIDE, usage=usage)
    return [
        store.UsageCell(
            session_id=session.pk,
            quarter=quarter,
            model=model,
            side=side,
            long_context=long_context,
            tier_start=tier_of(prices[model]),
            calls=sums.calls,
            input_tokens=sums.usage.input_tokens,
            cache_creation_tokens=sums.usage.cache_creation_input_tokens,
            cache_creation_1h_tokens=sums.usage.cache_creation_1h_input_tokens,
            cache_read_tokens=sums.usage.cache_read_input_tokens,
            output_tokens=sums.usage.output_tokens,
        )
        for (quarter, model, side, long_context), sums in cells.items()
    ]


def inline_responses(*, session: models.Session, store: Any = models) -> list[InlineResponse]:
    """The inline subagents' responses the session's ``progress`` records carry, in record order."""
    records = store.Message.objects.filter(
        session_id=session.pk, raw_type="progress", data_json__contains='"response"'
    ).order_by("seq")
    found: list[InlineResponse] = []
    for timestamp, data_json in records.values_list("timestamp", "data_json").iterator(chunk_size=2000):
        response = embedded_response(Message(line=0, role="meta", kind="bookkeeping", data=orjson.loads(data_json)))
        if response is not None:
            found.append(InlineResponse(response=response, timestamp=timestamp))
    return found
