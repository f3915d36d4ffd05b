"""Reads of a session's subagents, inline and from their own files, as one type: what each did and cost.

A subagent is every agent of a session but the main chain: one with a file of its own (Claude Code's
``subagents/agent-<id>.jsonl``, kind ``file``), one known only from the copies its parent's ``progress`` records carry
(Claude Code's ``agent_progress``, kind ``inline``: its calls are stored ``carried``), or one whose own lines sit in its
parent's file (Claude Code 1.0.x's ``isSidechain`` lines, kind ``sidechain``). The kinds are Usage's sides
(``usage_cells``): ``inline`` there and here are the same calls, which ccusage leaves out. Its calls, tokens and cost
are those ``compaction.stats`` counts for the session (``cost_by_agent`` over ``priced_once``: each response once), so
the rows add up to the session's subagent share and, with the main chain's, to its total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.db.models import Count

from compaction.costs import SessionCost, add_usage, round_usd, usage_json
from compaction.stats import cost_by_agent
from compaction.transcript import MAIN, Usage
from sessions_app import memory_budget, models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors.agents import SubagentSpawn, is_compaction_agent, subagent_spawns
from sessions_app.selectors.calls import stored_calls, stored_embedded

SubagentKind = Literal["inline", "sidechain", "file"]


@dataclass(frozen=True, slots=True)
class SubagentRow:
    agent: str  # its agent id
    # "file": a transcript of its own; "inline": copies its parent's progress records carry; "sidechain": its own
    # lines in its parent's file
    kind: SubagentKind
    spawn: SubagentSpawn | None  # the call that started it (its tool id links both ways), or where it ran
    compaction: bool  # the agent's own compaction request (its summariser), not a subagent the model started
    calls: int
    usage: Usage
    cost_usd: float | None  # None: a model without a price
    cost: Decimal | None  # exact, for sums

    @property
    def tokens(self) -> int:
        u = self.usage
        return u.context + u.output_tokens

    def as_json(self) -> dict[str, Any]:
        spawn = self.spawn
        return {
            "agent": self.agent,
            "kind": self.kind,
            "compaction": self.compaction,
            "spawned_by": None
            if spawn is None
            else {"agent": spawn.parent, "tool_id": spawn.tool_id or None, "call": spawn.call},
            "description": spawn.description if spawn else "",
            "subagent_type": spawn.subagent_type if spawn else "",
            "calls": self.calls,
            "tokens": self.tokens,
            "usage": usage_json(self.usage),
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True, slots=True)
class Subagents:
    """A session's subagents, in spawn order, and their totals (the part of the session's numbers they make)."""

    rows: tuple[SubagentRow, ...]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    # Why no subagent is listed when the session's calls are over the memory budget (``memory_budget``), else "".
    refused: str = ""

    @property
    def calls(self) -> int:
        return sum(r.calls for r in self.rows)

    @property
    def tokens(self) -> int:
        return self.usage.context + self.usage.output_tokens

    def count(self, kind: SubagentKind) -> int:
        return sum(1 for r in self.rows if r.kind == kind)

    @property
    def inline_count(self) -> int:
        return self.count("inline")

    @property
    def sidechain_count(self) -> int:
        return self.count("sidechain")

    @property
    def file_count(self) -> int:
        return self.count("file")

    def by_agent(self) -> dict[str, SubagentRow]:
        return {r.agent: r for r in self.rows}

    def as_json(self) -> dict[str, Any]:
        return {
            "count": len(self.rows),
            "inline": self.count("inline"),
            "sidechain": self.count("sidechain"),
            "file": self.count("file"),
            "calls": self.calls,
            "tokens": self.tokens,
            "usage": usage_json(self.usage),
            "cost_usd": self.cost_usd,
            "rows": [r.as_json() for r in self.rows],
            "refused": self.refused or None,
        }


# Per process and session version (``updated_at``, which every write to the session's rows moves, and its record
# count), as the timeline's data is (views/timeline.py): the session page reads it for its transcript and for its
# overview's panel (``selectors.glance``), the live overview on every refresh. Frozen values, a row per subagent.
_FOUND: ProcessCache[tuple[Any, ...], Subagents] = ProcessCache(max_entries=64)


def subagents(*, session: models.Session) -> Subagents:
    """Every subagent of the session with its calls, tokens and cost (about eight queries, whatever its size; none
    when this process has read this version of the session). They are read off every call of the session: over the
    memory budget, none are listed and ``refused`` says why."""
    try:
        memory_budget.check(session=session, reads="calls")
    except memory_budget.SessionTooLarge as too_large:
        return Subagents(rows=(), refused=too_large.message)
    if settings.ANALYSIS_CACHE_SECONDS == 0:
        return _subagents(session=session)
    key = (session.pk, session.updated_at, session.message_count)
    return _FOUND.get_or_compute(key, lambda: _subagents(session=session), max_age_s=settings.ANALYSIS_CACHE_SECONDS)


def _subagents(*, session: models.Session) -> Subagents:
    costs: dict[str, SessionCost] = cost_by_agent(
        stored_calls(session=session), embedded=stored_embedded(session=session), prices=settings.MODEL_PRICES
    )
    calls: dict[str, int] = {}
    carried: set[str] = set()
    for agent, is_carried, n in (
        models.ApiCall.objects.filter(session=session)
        .exclude(agent=MAIN)
        .values_list("agent", "carried")
        .annotate(n=Count("id"))
        .order_by()
    ):
        calls[agent] = calls.get(agent, 0) + n
        if is_carried:
            carried.add(agent)
    firsts: dict[str, int] = {}
    for agent, seq in (
        models.Message.objects.filter(session=session).exclude(agent=MAIN).order_by("seq").values_list("agent", "seq")
    ):
        firsts.setdefault(agent, seq)
    with_files = set(
        models.SourceFile.objects.filter(session=session).exclude(agent=MAIN).values_list("agent", flat=True)
    )
    spawns = subagent_spawns(session=session)
    names = sorted(
        (set(firsts) | set(calls) | set(costs)) - {MAIN, ""},
        key=lambda a: (spawns[a].seq if a in spawns else firsts.get(a, 1 << 62), a),
    )
    rows = []
    total_usage = Usage()
    exact: Decimal | None = Decimal(0)
    for agent in names:
        cost = costs.get(agent)
        usage = Usage()
        if cost is not None:
            add_usage(usage, cost.usage)
        add_usage(total_usage, usage)
        row_exact = cost.exact if cost is not None and not cost.unpriced else (None if cost is not None else Decimal(0))
        exact = None if exact is None or row_exact is None else exact + row_exact
        rows.append(
            SubagentRow(
                agent=agent,
                kind=_kind(agent, with_files=with_files, carried=carried, calls=calls),
                spawn=spawns.get(agent),
                compaction=is_compaction_agent(session=session, agent=agent),
                calls=calls.get(agent, 0),
                usage=usage,
                cost_usd=cost.total_usd if cost is not None else 0.0,
                cost=row_exact,
            )
        )
    return Subagents(rows=tuple(rows), usage=total_usage, cost_usd=round_usd(exact) if exact is not None else None)


def _kind(agent: str, *, with_files: set[str], carried: set[str], calls: dict[str, int]) -> SubagentKind:
    """Where the subagent's records come from, by the rule Usage splits its cost by (``usage_cells``: a carried call
    is inline): its own file; copies in progress records (carried calls, or no call stored: a response only a
    progress record priced, ``stored_embedded``); else its own lines in its parent's file."""
    if agent in with_files:
        return "file"
    if agent in carried or not calls.get(agent):
        return "inline"
    return "sidechain"
