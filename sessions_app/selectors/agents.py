"""Reads of a session's agents: the main chain and its subagents as a tree, and where each subagent was spawned."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import orjson
from django.db.models import Count, Max, Min

from compaction.formats import registry as format_registry
from compaction.transcript import CARRIED, MAIN
from sessions_app import models


@dataclass(slots=True)
class AgentSummary:
    agent: str
    messages: int
    calls: int
    peak: int
    depth: int = 0  # spawn depth: 0 for the main chain, 1 for what it started, ...
    spawn: SubagentSpawn | None = None
    compaction: bool = False  # the agent's own compaction request (``is_compaction_agent``), not a subagent
    peak_is_estimate: bool = False  # the main chain of a log without recorded usage: its peak is the estimate


def is_compaction_agent(*, session: models.Session, agent: str) -> bool:
    """Whether ``agent`` is the session's agent's own compaction request (its summariser's transcript, Claude Code's
    ``agent-acompact-*``), not a subagent the model started: the format's profile says by its id."""
    prefixes = format_registry.agent_profile(session.format).compaction_agent_prefixes
    return agent != MAIN and bool(prefixes) and agent.startswith(prefixes)


def agents(*, session: models.Session) -> list[AgentSummary]:
    """Main chain first, then the subagents as a tree by spawn (each under the agent that started it, in spawn
    order; subagents whose spawn is unknown last), each with its size (four queries).

    The main chain's calls and peak are the session's own (``api_calls_main``, ``peak_context``: a log without
    recorded usage counts its model's replies and has its estimated peak); a subagent's are its recorded calls."""
    counts = {
        row["agent"]: row
        for row in models.Message.objects.filter(session=session)
        .values("agent")
        .annotate(n=Count("id"), first=Min("seq"))
        .order_by()
    }
    calls = {
        row["agent"]: row
        for row in models.ApiCall.objects.filter(session=session)
        .values("agent")
        .annotate(n=Count("id"), peak=Max("context"))
        .order_by()
    }
    spawns = subagent_spawns(session=session)
    children: dict[str, list[str]] = {}
    for spawn in sorted(spawns.values(), key=lambda sp: sp.seq):
        if spawn.agent in counts and spawn.parent != spawn.agent:
            children.setdefault(spawn.parent, []).append(spawn.agent)
    ordered: list[tuple[str, int]] = []
    seen: set[str] = set()

    def visit(agent: str, depth: int) -> None:
        if agent in seen:
            return  # a malformed file naming its own ancestor as its child: listed once
        seen.add(agent)
        ordered.append((agent, depth))
        for child in children.get(agent, []):
            visit(child, depth + 1)

    if MAIN in counts:
        visit(MAIN, 0)
    for agent, _ in sorted(counts.items(), key=lambda kv: (kv[0] != MAIN, kv[1]["first"])):
        visit(agent, 0 if agent == MAIN else 1)
    result = []
    for agent, depth in ordered:
        c = calls.get(agent, {"n": 0, "peak": 0})
        main = agent == MAIN
        result.append(
            AgentSummary(
                agent=agent,
                messages=counts[agent]["n"],
                calls=session.api_calls_main if main else c["n"],
                peak=session.peak_context if main else c["peak"] or 0,
                depth=depth,
                spawn=spawns.get(agent),
                compaction=is_compaction_agent(session=session, agent=agent),
                peak_is_estimate=main and session.peak_is_estimate,
            )
        )
    return result


@dataclass(frozen=True, slots=True)
class SubagentSpawn:
    """Where a subagent was started: the Task/Agent call of its parent agent that its result names."""

    agent: str
    parent: str  # the agent whose call started it ("main" or another subagent)
    tool_id: str
    seq: int  # the record holding the call
    after_call: int  # calls of the parent up to the record holding the call (its own response's call included)

    # The Task/Agent call sits in the response of the parent's call ``after_call``: that call's number.
    description: str
    subagent_type: str

    @property
    def call(self) -> int:
        """The parent's call whose response holds the Task/Agent call."""
        return self.after_call


def subagent_spawns(*, session: models.Session) -> dict[str, SubagentSpawn]:
    """Each subagent's spawn point, by agent id (two queries).

    A Task/Agent call carries a tool id; its tool result names the subagent (``toolUseResult.agentId``, stored
    as ``agentId`` in the record's data), so the two meet on the tool id.
    """
    agent_of_tool: dict[str, str] = {}
    for blocks_json, data_json in models.Message.objects.filter(
        session=session, kind="tool_result", data_json__contains='"agentId"'
    ).values_list("blocks_json", "data_json"):
        agent_id = orjson.loads(data_json).get("agentId")
        if isinstance(agent_id, str):
            for block in orjson.loads(blocks_json):
                if block.get("kind") == "tool_result" and block.get("tool_id"):
                    agent_of_tool[block["tool_id"]] = agent_id
    spawns: dict[str, SubagentSpawn] = {}
    events = {
        event.data.get("tool_id") or "": event
        for event in models.ContextEvent.objects.filter(session=session, kind="subagent_spawn")
    }
    for tool_id, event in events.items():
        agent_id = agent_of_tool.get(tool_id)
        if agent_id is not None:
            spawns[agent_id] = _spawn(agent_id, event)
    _unnamed_spawns(session=session, spawns=spawns, events=events)
    return spawns


def _spawn(agent_id: str, event: models.ContextEvent) -> SubagentSpawn:
    return SubagentSpawn(
        agent=agent_id,
        parent=event.agent,
        tool_id=event.data["tool_id"],
        seq=event.seq,
        after_call=event.after_call,
        description=event.data.get("description") or "",
        subagent_type=event.data.get("subagent_type") or "",
    )


def _unnamed_spawns(
    *, session: models.Session, spawns: dict[str, SubagentSpawn], events: dict[str, models.ContextEvent]
) -> None:
    """Subagents no tool result names (up to four queries): an inline one by the spawning tool id its carried
    records keep (``compaction.transcript.CARRIED``); else one whose first record's parent is a record of another
    agent started there (Claude Code's compaction request points at the last record before it, docs/formats/
    claude-code.md): such a spawn has no tool id, and its call is the parent's last call up to that record."""
    firsts = (
        models.Message.objects.filter(session=session)
        .exclude(agent=MAIN)
        .values("agent")
        .annotate(first=Min("seq"))
        .order_by()
    )
    missing = {row["agent"]: row["first"] for row in firsts if row["agent"] not in spawns}
    if not missing:
        return
    heads = models.Message.objects.filter(session=session, seq__in=missing.values()).values_list(
        "agent", "parent_uuid", "data_json"
    )
    by_parent: dict[str, str] = {}  # parent uuid -> agent
    for agent, parent_uuid, data_json in heads:
        tool_id = orjson.loads(data_json).get(CARRIED) if CARRIED in data_json else None
        if isinstance(tool_id, str) and tool_id in events:
            spawns[agent] = _spawn(agent, events[tool_id])
        elif parent_uuid:
            by_parent[parent_uuid] = agent
    if not by_parent:
        return
    parents = [
        (by_parent[uuid], parent, seq)
        for uuid, parent, seq in models.Message.objects.filter(session=session, uuid__in=by_parent).values_list(
            "uuid", "agent", "seq"
        )
        if parent != by_parent[uuid] and by_parent[uuid] not in spawns
    ]
    call_seqs: dict[str, list[int]] = {}  # each parent's calls, by the seq of their first record
    for parent, seq in (
        models.ApiCall.objects.filter(session=session, agent__in={p for _, p, _ in parents})
        .order_by("seq")
        .values_list("agent", "seq")
    ):
        call_seqs.setdefault(parent, []).append(seq)
    for agent, parent, seq in parents:
        after_call = bisect.bisect_right(call_seqs.get(parent, []), seq)
        spawns[agent] = SubagentSpawn(
            agent=agent, parent=parent, tool_id="", seq=seq, after_call=after_call, description="", subagent_type=""
        )
