"""klaude-code never threshold-compacts a sub-agent session (core/task.py: ``ctx.sub_agent_state is None``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.replay import replay
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from tests.conftest import KLAUDE_SAMPLES

SESSIONS = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"
# meta.json sub_agent_state as klaude writes it (protocol/model.py SubAgentState).
SUB_AGENT_STATE = {"sub_agent_type": "Task", "sub_agent_desc": "explore", "sub_agent_prompt": "find the bug"}


def session_copy(tmp_path: Path, *, sub_agent: bool) -> Path:
    source = SESSIONS / "bd8ec9a1f80345edbd7c9ec7081ab44d"
    target = tmp_path / source.name
    target.mkdir()
    (target / "events.jsonl").write_bytes((source / "events.jsonl").read_bytes())
    meta = json.loads((source / "meta.json").read_text())
    meta["sub_agent_state"] = SUB_AGENT_STATE if sub_agent else None
    (target / "meta.json").write_text(json.dumps(meta))
    return target


@pytest.mark.parametrize("sub_agent", [False, True])
def test_a_sub_agent_session_over_the_threshold_is_not_compacted(tmp_path: Path, sub_agent: bool) -> None:
    parser, records = parse_session(session_copy(tmp_path, sub_agent=sub_agent))
    messages = history_messages(records)
    # A limit the session's context is far over, so only the sub-agent rule can hold the compaction back.
    strategy = KlaudeCodeStrategy.from_session(parser.info, {"context_limit": 20_000})
    assert strategy.sub_agent is sub_agent
    decision = strategy.decide(messages)
    assert decision.cut is not None
    assert decision.should_compact is not sub_agent
    assert ("sub-agent" in decision.reason) is sub_agent


@pytest.mark.parametrize("sub_agent", [False, True])
def test_a_replay_of_a_sub_agent_session_never_threshold_compacts(tmp_path: Path, sub_agent: bool) -> None:
    parser, records = parse_session(session_copy(tmp_path, sub_agent=sub_agent))
    messages = history_messages(records)
    strategy = KlaudeCodeStrategy.from_session(parser.info, {"context_limit": 20_000})
    result = replay(messages, strategy=strategy, info=parser.info)
    compactions = [e.reason for e in result.events if e.kind == "compaction"]
    assert ("threshold" in compactions) is not sub_agent
    # A context overflow still compacts a sub-agent (core/task.py's TurnError path is not gated).
    assert any(reason.startswith("reactive compaction after the overflow") for reason in compactions)
