"""Whole-session numbers: the one definition the importer's stored summary, the session page, its JSON
twin and ``manage.py session_stats`` all use.

These are the figures ``samples/claude-code/SOURCES.md`` lists per sample ("API calls main/side",
"max context main / sidechain", compaction metadata): calls are de-duplicated by ``CallTracker``,
context = input + cache creation + cache read of a call, "side" = every agent other than MAIN.
``tally_session`` takes neutral calls (``compaction.transcript.ApiCall``) and event rows, so stored rows
and a parsed record stream go through the same code; ``session_stats`` is the record-stream entry point.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compaction.calls import CallTracker, Peak, peak_of
from compaction.costs import CostTally, PriceOverrides, SessionCost, session_cost
from compaction.transcript import MAIN, ApiCall, ContextEvent, Message, Record, Usage

# Events that change (or fail to change) the window; subagent spawns are not listed.
LISTED_EVENT_KINDS = frozenset({"compaction", "microcompact", "prune", "api_error", "overflow"})
# What a session's cost cannot price when an agent's model replies recorded no usage (a KHAELOR log without
# ``model.usage``): they cost money no one knows, so the total is unknown, not $0.00 (``SessionCost.unpriced``).
NO_USAGE_RECORDED = "no usage recorded"


@dataclass(frozen=True, slots=True)
class MainAndSide:
    main: int = 0
    side: int = 0

    def as_json(self) -> dict[str, int]:
        return {"main": self.main, "side": self.side}


def embedded_response(message: Message) -> ApiCall | None:
    """The subagent response a bookkeeping record of another agent carries (``data["response"]``, see the Claude
    Code parser's ``agent_progress``), as a call of that subagent ("" when the record does not name it).

    Its number is 0: such a response is no call of its agent's own count (that count is the agent's own records');
    it is only priced, once by its key (``tally_session``). Its line is that of the record that carries it.
    """
    found = message.data.get("response")
    if not isinstance(found, dict) or not isinstance(found.get("id"), str):
        return None
    numbers = found.get("usage")
    if not isinstance(numbers, list) or len(numbers) != 5 or not all(isinstance(n, int) for n in numbers):
        return None
    model = found.get("model")
    agent = found.get("agent")
    return ApiCall(
        agent=agent if isinstance(agent, str) else "",
        number=0,
        key=found["id"],
        line=message.line,
        usage=Usage(*numbers),
        model=model if isinstance(model, str) else None,
        timestamp=message.timestamp,
    )


@dataclass(frozen=True, slots=True)
class ListedEvent:
    kind: str
    agent: str
    trigger: str | None
    pre_tokens: int | None
    tokens_saved: int | None
    after_call: int  # calls of the event's own agent before it: it happened between call N and call N+1
    line: int
    context_before: int | None = None  # the recorded context of call N (the last call before it)
    context_after: int | None = None  # the recorded context of call N+1 (the first call after it)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "agent": self.agent,
            "trigger": self.trigger,
            "pre_tokens": self.pre_tokens,
            "tokens_saved": self.tokens_saved,
            "after_call": self.after_call,
            "line": self.line,
            "context_before": self.context_before,
            "context_after": self.context_after,
        }


@dataclass(frozen=True, slots=True)
class SessionStats:
    api_calls: MainAndSide
    max_context: MainAndSide
    peak: Peak  # the main chain's headline peak (``compaction.calls.peak_of``): max_context.main and its call
    events: tuple[ListedEvent, ...]  # in file order
    cost: SessionCost  # usage and cost of every call, main chain and subagents, each response once

    @property
    def has_compaction(self) -> bool:
        return any(e.kind == "compaction" for e in self._main_events())

    def overflowed(self, *, window: int) -> bool:
        return any(e.kind == "overflow" for e in self._main_events()) or self.max_context.main > window

    def compaction_failed(self, *, agent_compacts: bool) -> bool:
        """An overflow of the main chain that no later compaction followed: compaction did not rescue it.

        Only for an agent that compacts (``Strategy.compacts``): where there is no compaction, none failed.
        """
        if not agent_compacts:
            return False
        kinds = [e.kind for e in self._main_events()]
        last_overflow = max((i for i, kind in enumerate(kinds) if kind == "overflow"), default=None)
        return last_overflow is not None and "compaction" not in kinds[last_overflow:]

    def _main_events(self) -> Iterable[ListedEvent]:
        return (e for e in self.events if e.agent == MAIN)

    def as_json(self) -> dict[str, Any]:
        return {
            "api_calls": self.api_calls.as_json(),
            "max_context": self.max_context.as_json(),
            "peak": self.peak.as_json(),
            "events": [e.as_json() for e in self.events],
            **self.cost.as_json(),
        }


def priced_once(calls: Iterable[ApiCall], *, embedded: Iterable[ApiCall] = ()) -> list[ApiCall]:
    """The one rule of what a session's cost counts: each API response once, by its key.

    ``calls`` are the agents' own stored calls (a subagent's, inline or from its file, included: an inline subagent's
    calls are the copies its parent's progress records carry, stored as its calls); the first call of a key is
    priced, a repeat is not. ``embedded`` responses (``embedded_response``: what a parent's progress record carries)
    are priced only when no call has their key, once per key, with the largest output any of their lines gives (the
    lines of one streamed response repeat its input, calls.py); with inline subagents stored as calls, that is only
    a session imported before they were. A call without usage is left out (it has nothing to price).
    """
    priced: list[ApiCall] = []
    keys: set[str] = set()
    for call in calls:
        if call.usage is not None and call.key not in keys:
            priced.append(call)
        keys.add(call.key)
    priced.extend(embedded_priced(embedded, keys=keys))
    return priced


def embedded_priced(embedded: Iterable[ApiCall], *, keys: set[str]) -> list[ApiCall]:
    """The ``embedded`` responses ``priced_once`` prices beside calls of ``keys``: those of no call's key, once per key,
    with the largest output any of their lines gives."""
    extra: dict[str, tuple[ApiCall, Usage]] = {}  # key -> the response, with a usage of its own
    for response in embedded:
        if response.usage is None or response.key in keys:
            continue
        seen = extra.get(response.key)
        if seen is None:
            usage = dataclasses.replace(response.usage)
            extra[response.key] = (dataclasses.replace(response, usage=usage), usage)
        else:
            seen[1].output_tokens = max(seen[1].output_tokens, response.usage.output_tokens)
    return [r for r, _ in extra.values()]


def cost_by_agent(
    calls: Iterable[ApiCall], *, embedded: Iterable[ApiCall] = (), prices: PriceOverrides | None = None
) -> dict[str, SessionCost]:
    """Usage and cost per agent, of the calls ``priced_once`` keeps: the parts add up to ``tally_session``'s cost."""
    by_agent: dict[str, list[ApiCall]] = {}
    for call in priced_once(calls, embedded=embedded):
        by_agent.setdefault(call.agent, []).append(call)
    return {agent: session_cost(group, overrides=prices) for agent, group in by_agent.items()}


def tally_session(
    *,
    calls: Iterable[ApiCall],
    events: Iterable[ListedEvent],
    prices: PriceOverrides | None = None,
    embedded: Iterable[ApiCall] = (),
    responses: Mapping[str, int] | None = None,
) -> SessionStats:
    """Count calls, the largest context per side, usage and cost; keep the listed events (others are dropped).

    ``calls`` are the agents' own calls; a call's context is ``ApiCall.context`` (0 without usage, which is then
    counted but not priced). ``prices`` are the price overrides (``compaction.costs``). ``embedded`` responses
    (``embedded_response``) cost what they cost
    but are not counted as calls (the call counts are those of the agents' own records); each response is
    priced once by its key, so one also present as a call of its own subagent file is not priced twice.
    """
    tally = SessionTally(prices=prices)
    for call in calls:
        tally.add(call)
    return tally.result(events=events, embedded=embedded, responses=responses)


class SessionTally:
    """``tally_session`` a call at a time, keeping what it sums and not the calls: per call, its key (each response
    is priced once) and its context in an array (an event's ``context_before``/``context_after``). The importer
    tallies the calls it stores as they close (``sessions_app.services``)."""

    def __init__(self, *, prices: PriceOverrides | None = None) -> None:
        self._count = {"main": 0, "side": 0}
        self._peak = {"main": 0, "side": 0}
        self._keys: set[str] = set()
        self._contexts: dict[str, array[int]] = {}  # agent -> its calls' contexts by number (-1: no such call)
        self._cost = CostTally(overrides=prices)

    def add(self, call: ApiCall) -> None:
        side = "main" if call.agent == MAIN else "side"
        self._count[side] += 1
        usage = call.usage
        context = usage.context if usage is not None else 0
        if context > self._peak[side]:
            self._peak[side] = context
        contexts = self._contexts.get(call.agent)
        if contexts is None:
            contexts = self._contexts[call.agent] = array("q")
        if call.number >= len(contexts):
            contexts.extend([-1] * (call.number + 1 - len(contexts)))
        contexts[call.number] = context
        if usage is not None and call.key not in self._keys:
            self._cost.add(call)
        self._keys.add(call.key)

    def _context(self, agent: str, number: int) -> int | None:
        contexts = self._contexts.get(agent)
        if contexts is None or not 0 <= number < len(contexts) or contexts[number] < 0:
            return None
        return contexts[number]

    def result(
        self,
        *,
        events: Iterable[ListedEvent],
        embedded: Iterable[ApiCall] = (),
        responses: Mapping[str, int] | None = None,
    ) -> SessionStats:
        # The rule of priced_once, a call at a time: each key's first call (add), then the embedded responses.
        for response in embedded_priced(embedded, keys=self._keys):
            self._cost.add(response)
        count = dict(self._count)
        unrecorded = False
        for agent, replies in (responses or {}).items():
            if agent not in self._contexts:  # an agent without recorded usage: each model reply is a call (CallTracker)
                count["main" if agent == MAIN else "side"] += replies
                unrecorded = unrecorded or replies > 0
        cost = self._cost.result()
        if unrecorded:
            cost.unpriced = sorted({*cost.unpriced, NO_USAGE_RECORDED})
        main = self._contexts.get(MAIN)
        return SessionStats(
            api_calls=MainAndSide(**count),
            max_context=MainAndSide(**self._peak),
            peak=peak_of((number, context) for number, context in enumerate(main) if context >= 0)
            if main
            else Peak(call=None, tokens=0),
            events=tuple(
                dataclasses.replace(
                    e,
                    context_before=self._context(e.agent, e.after_call),
                    context_after=self._context(e.agent, e.after_call + 1),
                )
                for e in events
                if e.kind in LISTED_EVENT_KINDS
            ),
            cost=cost,
        )


def _listed_event(event: ContextEvent, *, after_call: int) -> ListedEvent:
    # Formats write "no trigger" as None or "", storage keeps "": both mean none.
    return ListedEvent(
        kind=event.kind,
        agent=event.agent,
        trigger=event.trigger or None,
        pre_tokens=event.pre_tokens,
        tokens_saved=event.tokens_saved,
        after_call=after_call,
        line=event.line,
    )


def session_stats(records: Iterable[Record], *, prices: PriceOverrides | None = None) -> SessionStats:
    """The statistics of a parsed record stream (no storage involved)."""
    tracker = CallTracker()
    calls: list[ApiCall] = []
    events: list[ListedEvent] = []
    embedded: list[ApiCall] = []
    for record in records:
        if isinstance(record, Message):
            response = embedded_response(record) if record.kind == "bookkeeping" else None
            if response is not None:
                embedded.append(response)
            call = tracker.add(record)
            if call is not None:
                # input/cache are identical on every line of a call (claude-code.md §6.1): the first line decides.
                # The tracker keeps raising the output of this same call's usage as later lines of the response arrive.
                calls.append(call)
        elif isinstance(record, ContextEvent):
            events.append(_listed_event(record, after_call=tracker.count(record.agent)))
    return tally_session(calls=calls, events=events, prices=prices, embedded=embedded, responses=tracker.responses())
