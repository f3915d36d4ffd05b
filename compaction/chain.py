"""The main chain of a session laid out once: its messages, its recorded calls, where each event sits among them, and
the session's own agent's estimate, record rule, tool roles and fixes (``session_chain``). What the diagnosis
(``compaction.diagnose``) and the after-compaction measures (``compaction.after_compaction``) both read."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compaction.agents import Fix, FixTopic, ToolRoles
from compaction.formats.registry import agent_profile, all_tool_roles
from compaction.replay import api_steps, is_compaction_record, main_agent
from compaction.strategies.base import Strategy
from compaction.strategies.registry import build_strategy, default_strategy, strategy_for_format
from compaction.transcript import ApiCall, Block, ContextEvent, Message, SessionInfo


@dataclass(slots=True)
class Chain:
    """The main chain laid out once: its messages, its recorded calls and where each event sits among them."""

    messages: list[Message]
    calls: list[ApiCall]  # its calls with a recorded context (``call_points``): each has its usage
    events: list[tuple[int, ContextEvent]]  # (position among the messages, event), in order
    # The estimate of one message the report sizes things with: the session's own strategy's (``diagnose``).
    estimate: Callable[[Message], int] = dataclasses.field(default_factory=lambda: default_strategy().estimate)
    estimator: str = dataclasses.field(default_factory=lambda: default_strategy().estimator_label)
    # Which records the agent sends to the model: its strategy's rule (``diagnose``).
    reaches_model: Callable[[Message], bool] = dataclasses.field(
        default_factory=lambda: default_strategy().reaches_model
    )
    # The agent's tool roles (its profile): which tools read, explore, spawn a subagent; every agent's without one.
    tools: ToolRoles = dataclasses.field(default_factory=all_tool_roles)
    # The texts the agent writes when a compaction could not run: its strategy's (``diagnose``).
    refusals: tuple[str, ...] = dataclasses.field(default_factory=lambda: default_strategy().compaction_refusals)
    # (first position, call number) of every call, with or without recorded usage (``api_steps``): the numbers a
    # point "after call N" uses, the same as the timeline's, also for a log that records no usage.
    numbered: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    # What a person can paste to avoid a finding: the agent's profile's (``diagnose``); none without one.
    fixes: tuple[Fix, ...] = ()
    # Read once (the messages of a chain do not change once laid out): call_starts, compaction_positions.
    _call_starts: list[int] | None = None
    _compactions: list[int] | None = None

    def fixes_for(self, topic: FixTopic) -> list[Fix]:
        return [fix for fix in self.fixes if fix.topic == topic]

    def carried_by(self, position: int) -> list[ApiCall]:
        """The recorded calls that sent what arrived at ``position``: those after it, up to the next compaction."""
        end = min((p for p in self.compaction_positions() if p > position), default=len(self.messages))
        return self.calls[self.count_before(position) : bisect.bisect_left(self.call_starts, end)]

    def block_tokens(self, message: Message, block: Block) -> int:
        """The estimate of one block, as the strategy would count a record holding only it."""
        if len(message.blocks) == 1:
            return self.estimate(message)
        alone = Message(
            line=message.line, role=message.role, kind=message.kind, blocks=[block], raw_type=message.raw_type
        )
        return self.estimate(alone)

    @property
    def call_starts(self) -> list[int]:
        if self._call_starts is None or len(self._call_starts) != len(self.calls):
            self._call_starts = [c.first for c in self.calls]
        return self._call_starts

    def count_before(self, position: int) -> int:
        """How many recorded calls start before ``position``: the list index of the first call after it."""
        return bisect.bisect_left(self.call_starts, position)

    def after_call(self, position: int) -> int:
        """The number of the last call before ``position``: a record there is "after call N" (0: none)."""
        if self.numbered:
            index = bisect.bisect_left([first for first, _ in self.numbered], position)
            return self.numbered[index - 1][1] if index else 0
        last = self.last_call_before(position)
        return last.number if last is not None else 0

    def last_call_before(self, position: int) -> ApiCall | None:
        index = self.count_before(position) - 1
        return self.calls[index] if index >= 0 else None

    def events_of(self, kind: str) -> list[tuple[int, ContextEvent]]:
        return [(p, e) for p, e in self.events if e.kind == kind]

    def compaction_positions(self) -> list[int]:
        """Compaction events and the records that mark a compaction (summaries, boundaries), read once."""
        if self._compactions is None:
            self._compactions = [p for p, _ in self.events_of("compaction")] + [
                i for i, m in enumerate(self.messages) if is_compaction_record(m)
            ]
        return self._compactions

    def segment_start(self, position: int) -> int:
        """Where the stretch of history that ``position`` belongs to starts: after the last compaction."""
        return max((p + 1 for p in self.compaction_positions() if p < position), default=0)


def session_chain(
    messages: Sequence[Message],
    events: Sequence[ContextEvent],
    *,
    info: SessionInfo,
    calls: Sequence[ApiCall] | None = None,
    strategy: Strategy | None = None,
) -> Chain:
    """The main chain laid out with the session's own agent's estimate, record rule, tool roles and fixes: what the
    diagnosis and the after-compaction measures read (one size of every block)."""
    strategy = strategy if strategy is not None else own_strategy(info=info)
    chain = lay_out(messages, events, calls)
    chain.estimate, chain.estimator = strategy.estimate, strategy.estimator_label
    chain.reaches_model, chain.tools = strategy.reaches_model, agent_profile(info.format).tools
    chain.refusals = strategy.compaction_refusals
    chain.fixes = agent_profile(info.format).fixes
    return chain


def lay_out(
    messages: Sequence[Message], events: Sequence[ContextEvent], calls: Sequence[ApiCall] | None = None
) -> Chain:
    """The main agent's messages and events; ``calls`` replace the recorded usage of the calls they name (by number)."""
    agent = main_agent(messages)
    own = [m for m in messages if m.agent == agent]
    every = api_steps(own)
    steps = [call for call in every if call.context]  # call_points, from the one api_steps
    if calls is not None:
        given = {c.number: c for c in calls}
        for step in steps:
            if step.number in given and given[step.number].usage is not None:
                step.usage = given[step.number].usage

    # Events carry the line of the record they came from; an event whose line is no message's sits where
    # its line would be (or at the end when the records are not in line order).
    lines = [m.line for m in own]
    ordered = all(a <= b for a, b in zip(lines, lines[1:], strict=False))
    first_of_line: dict[int, int] = {}
    for position, line in enumerate(lines):
        first_of_line.setdefault(line, position)

    def event_position(event: ContextEvent) -> int:
        if event.line in first_of_line:
            return first_of_line[event.line]
        return bisect.bisect_left(lines, event.line) if ordered else len(own)

    placed = sorted(
        ((event_position(e), i, e) for i, e in enumerate(events) if e.agent == agent), key=lambda t: (t[0], t[1])
    )
    numbered = [(s.first, s.number) for s in every]
    return Chain(messages=own, calls=steps, events=[(p, e) for p, _, e in placed], numbered=numbered)


def own_strategy(*, info: SessionInfo) -> Strategy:
    """The strategy that models the session's own format (the first registered one otherwise)."""
    return build_strategy(strategy_for_format(info.format), info=info, overrides={})
