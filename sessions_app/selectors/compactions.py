"""Compactions across sessions: how many, when, at what context, what each cost and what it bought, grouped by
project, agent and agent version; and the sessions that compacted again and again without freeing space.

Reality first: every row is a compaction the session recorded (its stored ``ContextEvent``), numbered by the one call
numbering (``after_call``: between call N and call N+1). Its context before and after are calls N and N+1's recorded
contexts, as ``session_stats`` lists them. What it cost is the summariser's own call where the agent records it
(Claude Code's ``acompact`` subagent, docs/formats/claude-code.md §11), priced by ``compaction.costs``; what it bought
is the tokens it freed times the calls until the next compaction (or the session's end), priced as cache reads,
which each of those calls would have re-sent; the break-even is the calls it takes to pay its cost back. How long it
took is measured only where the agent records the summariser's request and response. A fixed number of queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import IntegerField, OuterRef, Subquery

from compaction.costs import call_cost, price_for
from compaction.transcript import MAIN, Usage
from sessions_app import models
from sessions_app.selectors.sessions import SessionFilters, session_list

# Claude Code runs its compaction as a forked agent whose file is agent-acompact-<id>.jsonl: its calls are the
# summariser's (docs/formats/claude-code.md §8.4). Named by the agent prefix the importer gives those files.
SUMMARISER_AGENT_PREFIX = "acompact"
# A compaction freed little when the next call's context kept this share of the one before it...
LITTLE_FREED_SHARE = 0.8
# ...or when the next compaction came within this many calls (compaction.diagnose's loop).
LOOP_CALLS = 3
GROUPINGS = ("project", "agent", "version")
LISTED = 50  # compactions listed one by one, the latest first; the groups and totals count every one


@dataclass(slots=True)
class CompactionRow:
    session_id: int
    title: str
    project: str
    agent: str
    version: str
    after_call: int
    when: str | None
    trigger: str
    context_before: int | None
    context_after: int | None
    calls_until_next: int  # calls from call N+1 to the next compaction (or the session's last call)
    cost_usd: float | None  # the summariser's call, where recorded
    duration_seconds: float | None  # the summariser's request to its response, where recorded
    read_rate: float | None  # USD per token read from the cache, for the session's model
    # Worked out once from the fields above (__post_init__): the groups, the totals and the page read each several
    # times, over every compaction in scope (properties cost the Findings page 0.2 s at 3,000 compactions).
    freed: int | None = field(init=False)
    bought_tokens: int | None = field(init=False)  # tokens the calls until the next compaction did not re-send
    bought_usd: float | None = field(init=False)
    break_even_calls: float | None = field(init=False)  # calls that pay the summariser back (None: not measurable)
    freed_little: bool = field(init=False)

    def __post_init__(self) -> None:
        before, after = self.context_before, self.context_after
        self.freed = None if before is None or after is None else before - after
        # Freed × the calls until the next compaction, at the cache-read price each of those calls would have paid.
        self.bought_tokens = None if self.freed is None else max(self.freed, 0) * self.calls_until_next
        rate = self.read_rate
        self.bought_usd = None if self.bought_tokens is None or rate is None else self.bought_tokens * rate
        self.break_even_calls = None
        if self.cost_usd is not None and rate is not None and self.freed is not None and self.freed > 0:
            self.break_even_calls = self.cost_usd / (self.freed * rate)
        self.freed_little = (
            before is not None
            and after is not None
            and (after >= LITTLE_FREED_SHARE * before or self.calls_until_next < LOOP_CALLS)
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "title": self.title,
            "project": self.project,
            "agent": self.agent,
            "version": self.version,
            "after_call": self.after_call,
            "when": self.when,
            "trigger": self.trigger,
            "context_before": self.context_before,
            "context_after": self.context_after,
            "freed": self.freed,
            "calls_until_next": self.calls_until_next,
            "bought_tokens": self.bought_tokens,
            "bought_usd": _round(self.bought_usd),
            "cost_usd": _round(self.cost_usd),
            "break_even_calls": None if self.break_even_calls is None else round(self.break_even_calls, 2),
            "duration_seconds": self.duration_seconds,
            "freed_little": self.freed_little,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(slots=True)
class CompactionGroup:
    group: str
    compactions: int = 0
    sessions: set[int] = field(default_factory=set)
    freed: int = 0
    bought_tokens: int = 0
    bought_usd: float = 0.0
    cost_usd: float = 0.0
    freed_little: int = 0

    def add(self, row: CompactionRow) -> None:
        self.compactions += 1
        self.sessions.add(row.session_id)
        if row.freed is not None and row.freed > 0:
            self.freed += row.freed
        self.bought_tokens += row.bought_tokens or 0
        self.bought_usd += row.bought_usd or 0.0
        self.cost_usd += row.cost_usd or 0.0
        self.freed_little += row.freed_little

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "compactions": self.compactions,
            "sessions": len(self.sessions),
            "freed": self.freed,
            "bought_tokens": self.bought_tokens,
            "bought_usd": round(self.bought_usd, 6),
            "cost_usd": round(self.cost_usd, 6),
            "freed_little": self.freed_little,
        }


@dataclass(slots=True)
class CompactionsReport:
    by: str
    rows: list[CompactionRow]
    groups: list[CompactionGroup]
    thrashing: list[dict[str, Any]]  # sessions that compacted twice or more, freeing little each time
    total: CompactionGroup = field(default_factory=lambda: CompactionGroup(group="all"))  # every row added up
    listed: list[CompactionRow] = field(default_factory=list)  # the latest LISTED, the latest first

    def __post_init__(self) -> None:
        for row in self.rows:
            self.total.add(row)
        self.listed = sorted(self.rows, key=lambda r: (r.when is not None, r.when or ""), reverse=True)[:LISTED]

    def as_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "totals": self.total.as_json(),
            "groups": [group.as_json() for group in self.groups],
            "compactions": [row.as_json() for row in self.listed],
            "listed": min(len(self.rows), LISTED),
            "thrashing": self.thrashing,
        }


def compactions_report(*, filters: SessionFilters, by: str = "project") -> CompactionsReport:
    """Every recorded main-chain compaction of the sessions the filters select, grouped ``by`` project, agent or
    agent version (ValueError for another grouping)."""
    if by not in GROUPINGS:
        raise ValueError(f"Unknown grouping {by!r}: choose from {', '.join(GROUPINGS)}.")
    scope = session_list(filters=filters).order_by().values("pk")
    calls = models.ApiCall.objects.filter(session=OuterRef("session"), agent=MAIN)
    # Only the columns the rows need (no model instances, no JSON parsed): 30 ms for 3,000 compactions instead of 0.8 s
    # (bench/findings_bench.py).
    events = list(
        models.ContextEvent.objects.filter(session__in=scope, agent=MAIN, kind="compaction")
        .annotate(
            before=Subquery(calls.filter(number=OuterRef("after_call")).values("context")[:1]),
            after=Subquery(
                calls.filter(number=OuterRef("after_call") + 1).values("context")[:1], output_field=IntegerField()
            ),
        )
        .order_by("session_id", "seq", "id")
        .values(
            "session_id",
            "after_call",
            "timestamp",
            "trigger",
            "before",
            "after",
            "session__title",
            "session__external_id",
            "session__project",
            "session__format",
            "session__agent_version",
            "session__model",
            "session__api_calls_main",
        )
    )
    summarisers = _summariser_calls([e["session_id"] for e in events])
    rates: dict[str, float | None] = {}
    rows: list[CompactionRow] = []
    for index, event in enumerate(events):
        session_id, model = event["session_id"], event["session__model"]
        following = events[index + 1] if index + 1 < len(events) else None
        last_call = (
            following["after_call"] if following is not None and following["session_id"] == session_id else None
        ) or event["session__api_calls_main"]
        summariser = _nearest(summarisers.get(session_id, []), event["timestamp"])
        if model not in rates:
            price = price_for(model or None, overrides=settings.MODEL_PRICES)
            rates[model] = float(price.rates.cache_read) / 1_000_000 if price is not None else None
        rows.append(
            CompactionRow(
                session_id=session_id,
                title=event["session__title"] or event["session__external_id"],
                project=event["session__project"],
                agent=event["session__format"],
                version=event["session__agent_version"],
                after_call=event["after_call"],
                when=event["timestamp"].isoformat() if event["timestamp"] else None,
                trigger=event["trigger"],
                context_before=event["before"],
                context_after=event["after"],
                calls_until_next=max(last_call - event["after_call"], 0),
                cost_usd=summariser[0] if summariser else None,
                duration_seconds=summariser[1] if summariser else None,
                read_rate=rates[model],
            )
        )
    groups: dict[str, CompactionGroup] = {}
    for row in rows:
        key = {"project": row.project, "agent": row.agent, "version": f"{row.agent} {row.version}".strip()}[by]
        groups.setdefault(key, CompactionGroup(group=key)).add(row)
    return CompactionsReport(
        by=by,
        rows=rows,
        groups=sorted(groups.values(), key=lambda g: (-g.compactions, g.group)),
        thrashing=_thrashing(rows),
    )


def _thrashing(rows: list[CompactionRow]) -> list[dict[str, Any]]:
    by_session: dict[int, list[CompactionRow]] = {}
    for row in rows:
        by_session.setdefault(row.session_id, []).append(row)
    out = []
    for session_id, own in by_session.items():
        little = [r for r in own if r.freed_little]
        if len(own) >= 2 and len(little) >= 2:
            out.append(
                {
                    "session": session_id,
                    "title": own[0].title,
                    "compactions": len(own),
                    "freed_little": len(little),
                    "after_calls": [r.after_call for r in little],
                }
            )
    return sorted(out, key=lambda s: -s["freed_little"])


def _summariser_calls(session_ids: list[int]) -> dict[int, list[tuple[Any, float | None, float | None]]]:
    """Per session, its summariser calls: (response time, cost, seconds from its request to its response)."""
    if not session_ids:
        return {}
    firsts = models.Message.objects.filter(session=OuterRef("session"), agent=OuterRef("agent")).order_by("seq")
    found: dict[int, list[tuple[Any, float | None, float | None]]] = {}
    for call in (
        models.ApiCall.objects.filter(session__in=set(session_ids), agent__startswith=SUMMARISER_AGENT_PREFIX)
        .annotate(asked=Subquery(firsts.values("timestamp")[:1]))
        .order_by("session_id", "timestamp")
    ):
        usage = Usage(
            call.input_tokens,
            call.cache_creation_tokens,
            call.cache_read_tokens,
            call.output_tokens,
            call.cache_creation_1h_tokens,
        )
        cost = call_cost(usage, model=call.model or None, overrides=settings.MODEL_PRICES)
        asked = call.asked  # type: ignore[attr-defined]
        seconds = (call.timestamp - asked).total_seconds() if call.timestamp and asked else None
        found.setdefault(call.session_id, []).append(
            (call.timestamp, cost.total if cost is not None else None, seconds)
        )
    return found


def _nearest(
    summarisers: list[tuple[Any, float | None, float | None]], recorded: datetime | None
) -> tuple[float | None, float | None] | None:
    """The summariser call that answered before this compaction was ``recorded`` and after the one before it."""
    if recorded is None or not summarisers:
        return None
    before = [s for s in summarisers if s[0] is not None and s[0] <= recorded]
    if not before:
        return None
    _, cost, seconds = before[-1]
    summarisers.remove(before[-1])
    return cost, seconds
