"""Usage across sessions: tokens and cost per day, week, month, project, model, agent or session.

The numbers are those of the sessions' own statistics (``compaction.stats.tally_session``): every stored API call
(``models.ApiCall``, each response once; an inline subagent's calls, known only from the copies its parent's
``progress`` records carry, are marked ``carried``), and the inline responses of sessions imported before those calls
were stored (``compaction.stats.embedded_response``, priced once by their key, not counted when a call of the
session has that key). A session's total here is the cost the session list shows (``Session.cost_usd``), and the
calls of subagents and the inline ones are also given apart: ccusage counts the first and not the second.

How it reads: one aggregate over the usage cells the import keeps (``models.UsageCell``: a session's calls and
inline responses summed per UTC quarter hour, model, side and price tier; ``sessions_app.usage_cells``), grouped
by (group, agent, model, side, tier), where the group of a day, week or month is first the cell's quarter hour,
turned into the reader's day in Python (every zone's offset is a whole number of quarter hours). Each row is a
``Cell``; prices apply per cell, at the moment of reading. A fixed number of queries, over cells, not calls or
records: the report costs the same whatever the archive holds beside the cells it sums.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db.models import F, Func, Max, Min, QuerySet, Sum
from django.db.models.fields import CharField

from compaction.costs import Price, exact_cost, price_for, round_usd, tier_rates
from compaction.formats.registry import FORMAT_LABELS
from compaction.transcript import Usage
from sessions_app import models
from sessions_app.selectors.sessions import SessionFilters, session_list

GROUPINGS = ("day", "week", "month", "project", "model", "agent", "session")
TIME_GROUPINGS = ("day", "week", "month")
Grouping = Literal["day", "week", "month", "project", "model", "agent", "session"]
logger = logging.getLogger(__name__)
UNDATED = "undated"  # the group of calls whose session gives no time at all


# Where a call's tokens come from: the main chain, a subagent's own file (ccusage counts both), or a subagent's
# response carried inline by a progress record of its parent (ccusage does not read those).
MAIN_SIDE, SUBAGENT_SIDE, INLINE_SIDE = "main", "subagent", "inline"
QUARTER = timedelta(minutes=15)  # the grain of the usage cells (every zone's offset is whole quarter hours)


def tier_of(price: Price | None) -> int | None:
    """Where ``price``'s long-context tier starts (``compaction.costs.Price.rates_for``), None without one."""
    return price.tier_start if price is not None and price.tier_start is not None else None


def model_price(model: str) -> Price | None:
    """The model's price as every usage number takes it (``MODEL_PRICES`` overrides genai-prices)."""
    return price_for(model, overrides=settings.MODEL_PRICES)


class UsageError(ValueError):
    """A report asked for something that does not exist (an unknown grouping or time zone)."""


@dataclass(frozen=True, slots=True)
class UsageQuery:
    by: Grouping = "day"
    since: date | None = None  # first day included, in ``time_zone``
    until: date | None = None  # last day included, in ``time_zone``
    time_zone: str = ""  # an IANA name; "" is settings.USAGE_TIME_ZONE
    model: str = ""  # calls of this model only
    # The sessions whose calls count: the session list's own filters (agent, project, search, flags). Its dates
    # are not used: a report's days are those of its calls.
    sessions: SessionFilters = field(default_factory=SessionFilters)

    @property
    def zone(self) -> ZoneInfo:
        return time_zone(name=self.time_zone)


def time_zone(*, name: str) -> ZoneInfo:
    """The zone named (settings.USAGE_TIME_ZONE for ""), or UsageError."""
    name = name or settings.USAGE_TIME_ZONE
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"Unknown time zone {name!r}: give an IANA name such as UTC or Europe/Paris.") from None


@dataclass(frozen=True, slots=True)
class Cell:
    """Token sums of the calls of one group, agent (format), model, side, on one side of the model's price tier."""

    group: Any
    agent: str
    model: str
    side: str
    long_context: bool
    calls: int
    usage: Usage


@dataclass(slots=True)
class Numbers:
    """Tokens and cost of a set of calls. ``cost_usd`` is None when a call with tokens has a model without a price
    (a partial sum would mislead), as ``compaction.costs.SessionCost.total_usd``."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_creation_1h_tokens: int = 0
    cache_read_tokens: int = 0
    exact: Decimal = Decimal(0)  # compaction.costs.exact_cost: the same cents however the calls are grouped
    unpriced: set[str] = field(default_factory=set)

    @property
    def cache_creation_5m_tokens(self) -> int:
        return self.cache_creation_tokens - self.cache_creation_1h_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_creation_tokens + self.cache_read_tokens

    @property
    def cost(self) -> float:
        """The cost of the priced calls (the chart's height, also where some call has no price)."""
        return float(self.exact)

    @property
    def cost_usd(self) -> float | None:
        return None if self.unpriced else round_usd(self.exact)

    def add(self, cell: Cell, *, cost: Decimal | None) -> None:
        """Add ``cell``, whose exact cost is ``cost`` (``cell_cost``; None: its model has no price)."""
        usage = cell.usage
        self.calls += cell.calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_creation_tokens += usage.cache_creation_input_tokens
        self.cache_creation_1h_tokens += usage.cache_creation_1h_input_tokens
        self.cache_read_tokens += usage.cache_read_input_tokens
        if cost is not None:
            self.exact += cost
        elif usage.context + usage.output_tokens:  # <synthetic> replies have no tokens and cost nothing
            self.unpriced.add(cell.model or "unknown model")

    def as_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "cache_creation_5m_tokens": self.cache_creation_5m_tokens,
            "cache_creation_1h_tokens": self.cache_creation_1h_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
            "unpriced_models": sorted(self.unpriced),
        }


@dataclass(slots=True)
class Row:
    """One group: its numbers, the same for its subagents' own calls and for inline subagents, and per model and
    per agent (the chart's stacks)."""

    group: str
    label: str
    numbers: Numbers = field(default_factory=Numbers)
    subagents: Numbers = field(default_factory=Numbers)
    inline_subagents: Numbers = field(default_factory=Numbers)
    by_model: dict[str, Numbers] = field(default_factory=dict)
    by_agent: dict[str, Numbers] = field(default_factory=dict)
    session: int | None = None  # the session's id, for a report by session

    def add(self, cell: Cell, *, cost: Decimal | None) -> None:
        self.numbers.add(cell, cost=cost)
        if cell.side == SUBAGENT_SIDE:
            self.subagents.add(cell, cost=cost)
        elif cell.side == INLINE_SIDE:
            self.inline_subagents.add(cell, cost=cost)
        self.by_model.setdefault(cell.model or "unknown model", Numbers()).add(cell, cost=cost)
        self.by_agent.setdefault(cell.agent, Numbers()).add(cell, cost=cost)

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "label": self.label,
            **({"session": self.session} if self.session is not None else {}),
            **self.numbers.as_json(),
            "subagents": self.subagents.as_json(),
            "inline_subagents": self.inline_subagents.as_json(),
            "models": {name: n.as_json() for name, n in sorted(self.by_model.items())},
            "agents": {name: n.as_json() for name, n in sorted(self.by_agent.items())},
        }


@dataclass(slots=True)
class UsageReport:
    query: UsageQuery
    rows: list[Row]
    totals: Row

    def as_json(self) -> dict[str, Any]:
        totals = self.totals.as_json()
        totals.pop("group")
        totals.pop("label")
        return {
            "by": self.query.by,
            "time_zone": self.query.zone.key,
            "since": self.query.since.isoformat() if self.query.since else None,
            "until": self.query.until.isoformat() if self.query.until else None,
            "rows": [row.as_json() for row in self.rows],
            "totals": totals,
        }


# ----------------------------------------------------------------------------- the report


def usage_report(*, query: UsageQuery) -> UsageReport:
    """Usage per group of ``query.by``, oldest period (or largest cost, for the other groupings) first."""
    if query.by not in GROUPINGS:
        raise UsageError(f"Unknown grouping {query.by!r}: one of {', '.join(GROUPINGS)}.")
    zone = query.zone
    prices = Prices(())
    rows: dict[Any, Row] = {}
    totals = Row(group="total", label="Total")
    for cell in _cells(query=query, zone=zone, prices=prices):
        cost = cell_cost(cell, price=prices.of(cell.model))
        row = rows.get(cell.group)
        if row is None:
            row = rows[cell.group] = Row(group=_group_text(cell.group, by=query.by), label="")
        row.add(cell, cost=cost)
        totals.add(cell, cost=cost)
    _label(rows, by=query.by)
    return UsageReport(query=query, rows=_ordered(rows, by=query.by), totals=totals)


def cell_cost(cell: Cell, *, price: Price | None) -> Decimal | None:
    """The exact cost of a cell's tokens at ``price`` (its rates above the tier for a long-context cell): the same
    cents however the cells are grouped, as cost is linear in the tokens. None without a price."""
    if price is None:
        return None
    return exact_cost(cell.usage, rates=tier_rates(price, long_context=cell.long_context))


class Prices:
    """Each model's price (``compaction.costs.price_for`` with the ``MODEL_PRICES`` overrides), looked up once."""

    def __init__(self, names: Iterable[str]) -> None:
        self.known: dict[str, Price | None] = {}
        for name in names:
            self.of(name)

    def of(self, model: str) -> Price | None:
        if model not in self.known:
            self.known[model] = model_price(model)
        return self.known[model]


def _within(qs: QuerySet[models.UsageCell], *, query: UsageQuery, zone: ZoneInfo) -> QuerySet[models.UsageCell]:
    """The usage cells of the query's sessions, model and days. A day's bounds in any zone are UTC quarter hours,
    so a cell is wholly inside or outside them."""
    scope = query.sessions
    if scope.format:
        qs = qs.filter(session__format=scope.format)
    if scope.project:
        qs = qs.filter(session__project=scope.project)
    if scope.q or scope.has_compaction or scope.overflowed or scope.compaction_failed or scope.archived:
        listed = session_list(filters=replace(scope, since=None, until=None))
        qs = qs.filter(session__in=listed.order_by().values("pk"))
    if query.model:
        qs = qs.filter(model=query.model)
    if query.since is not None:
        qs = qs.filter(quarter__gte=_midnight(query.since, zone))
    if query.until is not None:
        qs = qs.filter(quarter__lt=_midnight(query.until + timedelta(days=1), zone))
    return qs


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time.min, tzinfo=zone)


class LocalDay(Func):
    """A cell's quarter hour's day in a zone, as text (``YYYY-MM-DD``), in the database: PostgreSQL converts with its
    own zone table; SQLite, which has none, adds the zone's offset, constant between the zone's transitions
    (``offsets``), each a CASE branch. Grouped by day in SQL, a report reads a row per day, model and side, not
    one per quarter hour (8,000 rows of the 2,200-session archive, priced one by one: 0.6 s)."""

    output_field = CharField()

    def __init__(self, expression: Any, *, zone: ZoneInfo, offsets: tuple[tuple[datetime, int], ...]) -> None:
        super().__init__(expression)
        self.zone, self.offsets = zone, offsets

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        sql, params = compiler.compile(self.source_expressions[0])
        *changes, (_, last) = self.offsets
        cases = "".join(f" WHEN {sql} < %s THEN %s" for _ in changes)
        case_params: list[Any] = []
        for until, minutes in changes:
            case_params += [*params, until.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"), f"{minutes:+d} minutes"]
        modifier = f"CASE{cases} ELSE %s END" if changes else "%s"
        return f"date({sql}, {modifier})", [*params, *case_params, f"{last:+d} minutes"]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"((({sql}) AT TIME ZONE %s)::date)::text", [*params, self.zone.key]


@functools.lru_cache(maxsize=64)
def zone_offsets(zone: ZoneInfo, first: datetime, last: datetime) -> tuple[tuple[datetime, int], ...]:
    """The zone's offsets (minutes) from ``first`` to ``last``: (until, offset) for each span but the last, whose
    until is ``last``; found day by day, and the transition's quarter hour by bisection."""

    def offset(when: datetime) -> int:
        delta = when.astimezone(zone).utcoffset()
        return int(delta.total_seconds() // 60) if delta is not None else 0

    spans: list[tuple[datetime, int]] = []
    day, current = first, offset(first)
    while day < last:
        nxt = min(day + timedelta(days=1), last)
        if offset(nxt) != current:
            lo, hi = day, nxt  # offset(lo) == current != offset(hi): the change is in (lo, hi]
            while (steps := (hi - lo) // QUARTER) > 1:  # both on the quarter-hour grid, as the cells are
                mid = lo + steps // 2 * QUARTER
                lo, hi = (mid, hi) if offset(mid) == current else (lo, mid)
            spans.append((hi, current))
            current = offset(hi)
        day = nxt
    spans.append((last, current))
    return tuple(spans)


def _group_expression(*, by: str, zone: ZoneInfo, offsets: tuple[tuple[datetime, int], ...]) -> Any:
    if by in TIME_GROUPINGS:
        return LocalDay("quarter", zone=zone, offsets=offsets)
    if by == "project":
        return F("session__project")
    if by == "model":
        return F("model")
    if by == "agent":
        return F("session__format")
    return F("session_id")


@functools.lru_cache(maxsize=8192)
def _day_period(day: str, by: str) -> date:
    """The day, the week's Monday or the month's first day of a local day written ``YYYY-MM-DD``."""
    found = date.fromisoformat(day)
    if by == "week":
        return found - timedelta(days=found.weekday())
    if by == "month":
        return found.replace(day=1)
    return found


def _cells(*, query: UsageQuery, zone: ZoneInfo, prices: Prices) -> Iterator[Cell]:
    """The query's usage cells (``models.UsageCell``, kept by the import) summed per group, agent, model, side and
    price tier: one aggregate query, whatever the number of sessions."""
    cells = _within(models.UsageCell.objects.all(), query=query, zone=zone)
    offsets: tuple[tuple[datetime, int], ...] = ()
    if query.by in TIME_GROUPINGS:
        span = cells.order_by().aggregate(first=Min("quarter"), last=Max("quarter"))
        if span["first"] is None:
            return
        offsets = zone_offsets(zone, span["first"], span["last"])
    rows = (
        cells.order_by()
        .annotate(g=_group_expression(by=query.by, zone=zone, offsets=offsets), fmt=F("session__format"))
        .values("g", "fmt", "model", "side", "long_context", "tier_start")
        .annotate(
            n=Sum("calls"),
            i=Sum("input_tokens"),
            cw=Sum("cache_creation_tokens"),
            cw1=Sum("cache_creation_1h_tokens"),
            cr=Sum("cache_read_tokens"),
            o=Sum("output_tokens"),
        )
    )
    timed = query.by in TIME_GROUPINGS
    stale: set[str] = set()
    for r in rows:
        if tier_of(prices.of(r["model"])) != r["tier_start"] and r["model"] not in stale:
            stale.add(r["model"])
            # Split at a tier the prices no longer have: the worker's sweep splits them again
            # (sweeps.rebuild_stale_usage_cells); until then they are priced as they were split.
            logger.warning(
                "usage cells of %s were split at another price tier; the worker's sweep redoes them", r["model"]
            )
        yield Cell(
            group=_day_period(r["g"], query.by) if timed and r["g"] is not None else r["g"],
            agent=r["fmt"],
            model=r["model"],
            side=r["side"],
            long_context=bool(r["long_context"]),
            calls=r["n"] or 0,
            usage=Usage(r["i"] or 0, r["cw"] or 0, r["cr"] or 0, r["o"] or 0, r["cw1"] or 0),
        )


def _group_text(group: Any, *, by: str) -> str:
    """The group as ccusage writes its period: 2026-02-21, 2026-02; a week as the ISO date of its first day."""
    if group is None:
        return UNDATED if by in TIME_GROUPINGS else ""
    if by == "month":
        return group.strftime("%Y-%m")
    if by in ("day", "week"):
        return (group.date() if isinstance(group, datetime) else group).isoformat()
    return str(group)


def _label(rows: dict[Any, Row], *, by: str) -> None:
    """What a person reads for each group: the session's title, the agent's name; the group itself otherwise."""
    if by == "session":
        sessions = models.Session.objects.in_bulk([g for g in rows if g is not None])
        for key, row in rows.items():
            found = sessions.get(key)
            row.session = key
            row.group = (found.external_id or str(key)) if found else str(key)
            row.label = (found.title or found.external_id or f"session {key}") if found else row.group
        return
    for row in rows.values():
        row.label = FORMAT_LABELS.get(row.group, row.group) if by == "agent" else (row.group or "(none)")


def _ordered(rows: dict[Any, Row], *, by: str) -> list[Row]:
    if by in TIME_GROUPINGS:
        return sorted(rows.values(), key=lambda r: (r.group == UNDATED, r.group))
    return sorted(rows.values(), key=lambda r: (-(r.numbers.cost or 0.0), r.group))


# ----------------------------------------------------------------------------- CSV

CSV_COLUMNS = (
    "group",
    "label",
    "input_tokens",
    "output_tokens",
    "cache_creation_5m_tokens",
    "cache_creation_1h_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "total_tokens",
    "cost_usd",
    "calls",
    "subagent_tokens",
    "subagent_cost_usd",
    "inline_subagent_tokens",
    "inline_subagent_cost_usd",
)


def csv_rows(*, report: UsageReport) -> Iterable[list[Any]]:
    """A header row, then one row per group (no total row: a spreadsheet sums)."""
    yield list(CSV_COLUMNS)
    for row in report.rows:
        n = row.numbers
        yield [
            row.group,
            row.label,
            n.input_tokens,
            n.output_tokens,
            n.cache_creation_5m_tokens,
            n.cache_creation_1h_tokens,
            n.cache_creation_tokens,
            n.cache_read_tokens,
            n.total_tokens,
            "" if n.cost_usd is None else f"{n.cost_usd:.6f}",
            n.calls,
            row.subagents.total_tokens,
            "" if row.subagents.cost_usd is None else f"{row.subagents.cost_usd:.6f}",
            row.inline_subagents.total_tokens,
            "" if row.inline_subagents.cost_usd is None else f"{row.inline_subagents.cost_usd:.6f}",
        ]
