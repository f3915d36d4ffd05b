"""What each of an agent's context-management layers would do before one main-chain request.

Claude Code runs five layers before every API call, then a blocking check (seed 003, "五层防线"; compaction doc
§2.0, query.ts): ① the tool-result budget, ② snip, ③ microcompact, ④ context collapse, ⑤ autocompact. For a
point "after call N" this module asks the strategy, in that order, whether each layer is on for the session
(and why: feature gate, version, setting), what it would remove and how many tokens, and what is left after
it. The strategy owns the rules (``LayeredStrategy.context_layers``); this module only finds the point, the
recorded next request and the real records there, so every interface (CLI, timeline panel, diagnosis) gets
one answer.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compaction.formats.context_records import is_context_record
from compaction.replay import api_steps, main_agent, position_after_call
from compaction.strategies.base import Layer
from compaction.transcript import Message, SessionInfo


@dataclass(slots=True)
class LayerReport:
    after_call: int  # after this main-chain call: the layers run before the next request
    next_call: int | None  # the request they shape (None after the last call)
    strategy: str
    version: str | None
    tokens_before: int  # what the agent counts before its layers run
    layers: list[Layer]
    tokens_after: int  # the request after every layer
    recorded_next: int | None  # the recorded context of the next request, to compare with
    real_events: list[dict[str, Any]]  # the real agent's own compaction / prune records at this point
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@runtime_checkable
class LayeredStrategy(Protocol):
    """A strategy that can say what each of its layers would do to the request after ``messages[:at]``."""

    name: str

    def context_layers(self, messages: Sequence[Message], *, at: int) -> tuple[int, list[Layer], list[str]]:
        """(the agent's count before the layers, the layers in order, notes)."""
        ...


class NoLayers(ValueError):
    """The strategy models no per-request layers."""


def layers_at(
    messages: Sequence[Message], *, strategy: object, call: int, info: SessionInfo | None = None
) -> LayerReport:
    """The layers of ``strategy`` after main-chain call ``call`` (raises ``ValueError`` for a missing call)."""
    if not isinstance(strategy, LayeredStrategy):
        raise NoLayers(f"{getattr(strategy, 'name', strategy)} has no per-request layers to show.")
    agent = main_agent(messages)
    own = [m for m in messages if m.agent == agent]
    position = position_after_call(own, call)
    steps = api_steps(own)
    following = next((s for s in steps if s.number > call), None)
    stop = following.first if following is not None else len(own)
    real_events = [_real_event(m) for m in own[position:stop] if is_context_record(m) and m.kind != "compact_summary"]
    before, layers, notes = strategy.context_layers(own, at=position)
    versions = (m.data["version"] for m in reversed(own[:position]) if isinstance(m.data.get("version"), str))
    version = next(versions, None)
    return LayerReport(
        after_call=call,
        next_call=following.number if following is not None else None,
        strategy=strategy.name,
        version=version or (info.agent_version if info else None),
        tokens_before=before,
        layers=layers,
        tokens_after=layers[-1].tokens_after if layers else before,
        recorded_next=(following.context or None) if following is not None else None,
        real_events=real_events,
        notes=notes,
    )


def _real_event(message: Message) -> dict[str, Any]:
    data = message.data
    ids = data.get("cleared_tool_ids")
    return {
        "record": message.raw_type,
        "line": message.line,
        "trigger": data.get("trigger"),
        "pre_tokens": data.get("pre_tokens"),
        "tokens_saved": data.get("tokens_saved"),
        "tool_ids": list(ids) if isinstance(ids, list) else [],
    }
