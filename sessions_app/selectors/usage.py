"""Usage across sessions: tokens and cost per day, week, month, project, model, agent or session.

The numbers are those of the sessions' own statistics (``compaction.stats.tally_session``): every stored API call
(``models.ApiCall``, each response once; an inline subagent's calls, known only from the copies its parent's
``progress`` records carry, are marked ``carried``), and the inline responses of sessions imported before those calls
were stored (``compaction.stats.embedded_response``, priced once by their key, not counted when a call of the
session has that key). A session's total here is the cost the session list shows (``Session.cost_usd``), and the
calls of subagents and the inline ones are also given apart: ccusage counts the first and not the second.

How it reads, in a fixed number of queries whatever the number of sessions:
1. the models the selected calls name (their price tiers are per model: ``compaction.costs.Price``);
2. one aggregate over the calls, grouped by (group, agent, model, main or subagent, above the price tier or not),
   where the group of a day, week or month is first the call's UTC quarter hour (``UtcQuarterHour``);
3. the inline responses (``progress`` records with a ``response``), and the keys of calls they would repeat.
Each source yields ``Cell``s (one group, agent, model, side, tier: its token sums); prices apply per cell. A table of
cells kept by the import could later replace sources 2 and 3 without changing what is built from them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from django.conf import settings
from django.db.models import BooleanField, Case, CharField, Count, F, Func, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce

from compaction.costs import Price, exact_cost, price_for, round_usd, tier_rates
from compaction.formats.registry import FORMAT_LABELS
from compaction.stats import embedded_response
from compaction.transcript import MAIN, Message, Usage
from sessions_app import models
from sessions_app.selectors.sessions import SessionFilters, session_list

GROUPINGS = ("day", "week", "month", "project", "model", "agent", "session")
TIME_GROUPINGS = ("day", "week", "month")
Grouping = Literal["day", "week", "month", "project", "model", "agent", "session"]
# Where a call's tokens come from: the main chain, a subagent's own file (ccusage counts both), or a subagent's
# response carried inline by a progress record of its parent (ccusage does not read those).
MAIN_SIDE, SUBAGENT_SIDE, INLINE_SIDE = "main", "subagent", "inline"
UNDATED = "undated"  # the group of calls whose session gives no time at all


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

    def add(self, cell: Cell, *, price: Price | None) -> None:
        usage = cell.usage
        self.calls += cell.calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_creation_tokens += usage.cache_creation_input_tokens
        self.cache_creation_1h_tokens += usage.cache_creation_1h_input_tokens
        self.cache_read_tokens += usage.cache_read_input_tokens
        if price is not None:
            self.exact += exact_cost(usage, rates=tier_rates(price, long_context=cell.long_context))
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

    def add(self, cell: Cell, *, price: Price | None) -> None:
        self.numbers.add(cell, price=price)
        if cell.side == SUBAGENT_SIDE:
            self.subagents.add(cell, price=price)
        elif cell.side == INLINE_SIDE:
            self.inline_subagents.add(cell, price=price)
        self.by_model.setdefault(cell.model or "unknown model", Numbers()).add(cell, price=price)
        self.by_agent.setdefault(cell.agent, Numbers()).add(cell, price=price)

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
    calls = _calls(query=query, zone=zone)
    prices = Prices(_models(calls))
    rows: dict[Any, Row] = {}
    totals = Row(group="total", label="Total")
    for cell in _cells(calls=calls, query=query, zone=zone, prices=prices):
        price = prices.of(cell.model)
        row = rows.get(cell.group)
        if row is None:
            row = rows[cell.group] = Row(group=_group_text(cell.group, by=query.by), label="")
        row.add(cell, price=price)
        totals.add(cell, price=price)
    _label(rows, by=query.by)
    return UsageReport(query=query, rows=_ordered(rows, by=query.by), totals=totals)


def _calls(*, query: UsageQuery, zone: ZoneInfo) -> QuerySet[models.ApiCall]:
    calls = models.ApiCall.objects.all()
    return _within(calls, query=query, zone=zone, session_path="session")


class Prices:
    """Each model's price (``compaction.costs.price_for`` with the ``MODEL_PRICES`` overrides), looked up once."""

    def __init__(self, names: Iterable[str]) -> None:
        self.known: dict[str, Price | None] = {}
        for name in names:
            self.of(name)

    def of(self, model: str) -> Price | None:
        if model not in self.known:
            self.known[model] = price_for(model, overrides=settings.MODEL_PRICES)
        return self.known[model]


def _within(qs: QuerySet[Any], *, query: UsageQuery, zone: ZoneInfo, session_path: str) -> QuerySet[Any]:
    """``qs`` (calls or records) limited to the query's sessions, model and days."""
    scope = query.sessions
    if scope.format:
        qs = qs.filter(**{f"{session_path}__format": scope.format})
    if scope.project:
        qs = qs.filter(**{f"{session_path}__project": scope.project})
    if scope.q or scope.has_compaction or scope.overflowed or scope.compaction_failed:
        listed = session_list(filters=replace(scope, since=None, until=None))
        qs = qs.filter(**{f"{session_path}__in": listed.order_by().values("pk")})
    if query.model:
        qs = qs.filter(model=query.model)
    when = Coalesce("timestamp", f"{session_path}__started_at")
    if query.since is not None:
        qs = qs.alias(at=when).filter(at__gte=_midnight(query.since, zone))
    if query.until is not None:
        qs = qs.alias(at=when).filter(at__lt=_midnight(query.until + timedelta(days=1), zone))
    return qs


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time.min, tzinfo=zone)


def _models(calls: QuerySet[models.ApiCall]) -> list[str]:
    return list(calls.order_by().values_list("model", flat=True).distinct())


class UtcQuarterHour(Func):
    """A time's UTC quarter hour as text, ``YYYY-MM-DD HH:MM`` (minutes 00, 15, 30 or 45), in the database's own
    functions: every zone's offset is a whole number of quarter hours, so the day, week and month of each quarter
    hour in any zone are found in Python from the few quarter hours there are (``_period``), where ``TruncDate``
    with a zone ran a Python function per call on SQLite (three quarters of the report's time on the samples).
    Cells keyed by UTC quarter hour do not depend on the reader's zone: an import could keep them as they are."""

    output_field = CharField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django stores an aware time on SQLite as UTC text, "YYYY-MM-DD HH:MM:SS[.ffffff]".
        template = (
            "(substr(%(expressions)s, 1, 14) || "
            "substr('0' || (CAST(substr(%(expressions)s, 15, 2) AS INTEGER) / 15 * 15), -2))"
        )
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = (
            "(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:') || "
            "lpad(((EXTRACT(MINUTE FROM %(expressions)s AT TIME ZONE 'UTC'))::int / 15 * 15)::text, 2, '0'))"
        )
        return self.as_sql(compiler, connection, template=template, **extra)


def _group_expression(*, by: str, session_path: str) -> Any:
    if by in TIME_GROUPINGS:
        return UtcQuarterHour(Coalesce("timestamp", f"{session_path}__started_at"))
    if by == "project":
        return F(f"{session_path}__project")
    if by == "model":
        return F("model")
    if by == "agent":
        return F(f"{session_path}__format")
    return F(f"{session_path}_id")


def _period(when: datetime | None, *, by: str, zone: ZoneInfo) -> date | None:
    """The day, the week's Monday or the month's first day that ``when`` falls in, in ``zone``."""
    if when is None:
        return None
    day = when.astimezone(zone).date()
    if by == "week":
        return day - timedelta(days=day.weekday())
    if by == "month":
        return day.replace(day=1)
    return day


@functools.lru_cache(maxsize=4096)
def _quarter_period(quarter: str, by: str, zone: ZoneInfo) -> date:
    return _period(datetime.fromisoformat(quarter).replace(tzinfo=UTC), by=by, zone=zone)  # type: ignore[return-value]


def _long_context(prices: Prices) -> Any:
    """True for a call above its model's price tier (compaction.costs.Price.rates_for), per model in SQL."""
    tiers = [
        When(model=name, context__gt=p.tier_start, then=Value(True))
        for name, p in prices.known.items()
        if p is not None and p.tier_start is not None
    ]
    return Case(*tiers, default=Value(False), output_field=BooleanField()) if tiers else Value(False)


def _cells(*, calls: QuerySet[models.ApiCall], query: UsageQuery, zone: ZoneInfo, prices: Prices) -> Iterator[Cell]:
    yield from _stored_cells(calls=calls, query=query, zone=zone, prices=prices)
    yield from _inline_cells(query=query, zone=zone, prices=prices)


def _stored_cells(
    *, calls: QuerySet[models.ApiCall], query: UsageQuery, zone: ZoneInfo, prices: Prices
) -> Iterator[Cell]:
    rows = (
        calls.order_by()
        .annotate(
            g=_group_expression(by=query.by, session_path="session"),
            fmt=F("session__format"),
            sub=Case(When(agent=MAIN, then=Value(False)), default=Value(True), output_field=BooleanField()),
            long=_long_context(prices),
        )
        .values("g", "fmt", "model", "sub", "carried", "long")
        .annotate(
            n=Count("id"),
            i=Sum("input_tokens"),
            cw=Sum("cache_creation_tokens"),
            cw1=Sum("cache_creation_1h_tokens"),
            cr=Sum("cache_read_tokens"),
            o=Sum("output_tokens"),
        )
    )
    timed = query.by in TIME_GROUPINGS
    for r in rows:
        yield Cell(
            group=_quarter_period(r["g"], query.by, zone) if timed and r["g"] is not None else r["g"],
            agent=r["fmt"],
            model=r["model"],
            side=INLINE_SIDE if r["carried"] else SUBAGENT_SIDE if r["sub"] else MAIN_SIDE,
            long_context=bool(r["long"]),
            calls=r["n"],
            usage=Usage(r["i"] or 0, r["cw"] or 0, r["cr"] or 0, r["o"] or 0, r["cw1"] or 0),
        )


def _inline_cells(*, query: UsageQuery, zone: ZoneInfo, prices: Prices) -> Iterator[Cell]:
    """The inline subagents' responses, each once per session, as ``tally_session`` prices them: not when a call of
    the session has its key; the lines of one streamed response repeat its input, the last has all of its output."""
    records = _within(
        models.Message.objects.filter(raw_type="progress", data_json__contains='"response"'),
        query=_any_model(query),
        zone=zone,
        session_path="session",
    )
    found: dict[tuple[int, str], tuple[Any, str, Any]] = {}  # (session, key) -> (group source, agent, response)
    for session_id, started, project, fmt, timestamp, data_json in records.order_by().values_list(
        "session_id", "session__started_at", "session__project", "session__format", "timestamp", "data_json"
    ):
        response = embedded_response(Message(line=0, role="meta", kind="bookkeeping", data=orjson.loads(data_json)))
        if response is None or response.usage is None:
            continue
        if query.model and response.model != query.model:
            continue
        seen = found.get((session_id, response.key))
        if seen is not None:
            seen[2].usage.output_tokens = max(seen[2].usage.output_tokens, response.usage.output_tokens)
            continue
        when = timestamp or started
        source = {
            "session": session_id,
            "project": project,
            "agent": fmt,
            "model": response.model or "",
            "when": when,
        }
        found[(session_id, response.key)] = (source, fmt, response)
    if not found:
        return
    repeated = set(
        models.ApiCall.objects.filter(session_id__in={s for s, _ in found}, key__in={k for _, k in found}).values_list(
            "session_id", "key"
        )
    )
    for (session_id, key), (source, fmt, response) in found.items():
        if (session_id, key) in repeated:
            continue
        usage = response.usage
        model = response.model or ""
        price = prices.of(model)
        long_context = bool(price and price.tier_start is not None and usage.context > price.tier_start)
        yield Cell(
            group=_python_group(source, by=query.by, zone=zone),
            agent=fmt,
            model=model,
            side=INLINE_SIDE,
            long_context=long_context,
            calls=1,
            usage=usage,
        )


def _any_model(query: UsageQuery) -> UsageQuery:
    """The query for progress records: their model is checked on the response they carry (the column is empty)."""
    return UsageQuery(
        by=query.by, since=query.since, until=query.until, time_zone=query.time_zone, sessions=query.sessions
    )


def _python_group(source: dict[str, Any], *, by: str, zone: ZoneInfo) -> Any:
    """The group of an inline response, as ``_group_expression`` and ``_period`` give it for a stored call."""
    if by in TIME_GROUPINGS:
        return _period(source["when"], by=by, zone=zone)
    if by == "agent":
        return source["agent"]
    return source[by]


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
