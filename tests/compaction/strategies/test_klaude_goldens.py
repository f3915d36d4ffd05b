"""The project decides as the real klaude-code 2.8.1 does, on 240 generated sessions (goldens made by klaude's code).

``tests/compaction/goldens/klaude/klaude_2_8_1.jsonl.gz`` was written by ``regenerate.py`` running klaude-code 2.8.1
itself (its own virtualenv, Python 3.13) on the sessions ``sessions.py`` generates from seeds; this test regenerates
the same sessions without klaude and checks, for every session and every checkpoint of its history:

- the reloaded history (``Session.load``: which lines give items, their types, ``_estimate_tokens`` of each);
- ``should_compact_threshold`` (its verdict, tokens and limit) and whether the turn loop acts on it (never for a
  sub-agent, core/task.py);
- ``run_compaction``: its refusal, or the first kept index, tokens_before, file details, kept_items_brief, every
  summarizer request (system prompt, text parts, max_tokens) and the whole body klaude's Anthropic provider sends
  for it, the stored summary given the stand-in replies, and the history ``get_llm_history`` sends afterwards.

The body is also checked on the wire: the real ``anthropic`` SDK sends the project's requests to the scripted
server, which records them (``test_the_project_sends_klaude_2_8_1s_request_body``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.strategies.base import Cut
from compaction.strategies.klaude_code import KlaudeCodeStrategy, KlaudeParams, item_dict, item_type
from compaction.summarize import AnthropicSummarizer
from compaction.transcript import LineError, Message
from tests.anthropic_server import start_server
from tests.compaction.goldens.klaude import sessions
from tests.compaction.goldens.klaude.checks import assert_decides_as_klaude, goldens
from tests.compaction.goldens.klaude.regenerate import SAMPLES_GOLDEN
from tests.conftest import KLAUDE_SAMPLES


def test_the_goldens_cover_the_cases(tmp_path: Path) -> None:
    """The cases issue 10 names occur in the goldens (counted on the project's plans, which equal klaude's)."""
    all_goldens = goldens()
    assert len(all_goldens) >= 200
    assert {g["scenario"] for g in all_goldens.values()} == set(sessions.SCENARIOS)
    assert any(0 in g["items_per_line"] for g in all_goldens.values())  # lines klaude's reload drops
    found: Counter[str] = Counter()
    for seed, golden in all_goldens.items():
        session, strategy, messages, _ = _project(seed, tmp_path)
        for raw, items in zip(session.events.split(b"\n"), golden["items_per_line"], strict=False):
            for name, char in (("U+2028", "\u2028"), ("U+2029", "\u2029"), ("U+0085", "\u0085"), ("CR", "\r")):
                found[f"a line dropped for its raw {name}"] += items == 0 and char.encode() in raw
        for end, over, _, _, outcome in golden["checkpoints"]:
            found["sub-agent over the threshold"] += golden["sub_agent"] and over
            if isinstance(outcome, str):
                continue
            plan = strategy.plan(messages[:end])
            found[",".join(r.kind for r in plan.requests)] += 1
            found["UPDATE call on an empty <conversation>"] += not plan.summarized_indices and bool(
                plan.previous_summary
            )
            for position in plan.summarized_indices + plan.task_prefix_indices:
                kind, parts = item_type(messages[position]), item_dict(messages[position]).get("parts") or []
                texts = [p for p in parts if p.get("type") == "text" and p.get("text")]
                found["DeveloperMessage, no parts"] += kind == "DeveloperMessage" and not parts
                found["DeveloperMessage, image only"] += kind == "DeveloperMessage" and bool(parts) and not texts
                found["UserMessage, image only"] += kind == "UserMessage" and not texts
            if plan.task_start_index is not None:
                found["SystemMessage in a split task's prefix"] += any(
                    item_type(messages[p]) == "SystemMessage" for p in range(plan.task_start_index, end)
                )
    cases = [
        "a line dropped for its raw U+2028",
        "a line dropped for its raw U+2029",
        "a line dropped for its raw U+0085",
        "a line dropped for its raw CR",
        "history",
        "update_history",
        "task_prefix",
        "history,task_prefix",
        "update_history,task_prefix",
        "sub-agent over the threshold",
        "UPDATE call on an empty <conversation>",
        "DeveloperMessage, no parts",
        "DeveloperMessage, image only",
        "UserMessage, image only",
        "SystemMessage in a split task's prefix",
    ]
    assert all(found[case] >= 3 for case in cases), {case: found[case] for case in cases}


def _project(seed: int, tmp_path: Path) -> tuple[sessions.Session, KlaudeCodeStrategy, list[Message], list[Any]]:
    session = sessions.generate(seed)
    folder = tmp_path / f"s{seed:04d}"
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(session.events)
    if session.meta is not None:
        (folder / "meta.json").write_text(json.dumps(session.meta))
    parser, records = parse_session(folder)
    # meta.json (file_tracker, sub_agent_state) as the import reads it; the context_limit is the model config's,
    # which klaude reads from its config file, not from the session: the golden's input.
    strategy = KlaudeCodeStrategy.from_session(parser.info, {})
    strategy.params = KlaudeParams.for_limit(session.config_limit)
    return session, strategy, history_messages(records), records


@pytest.mark.parametrize("seed", range(sessions.SESSION_COUNT))
def test_the_project_decides_as_klaude_2_8_1(seed: int, tmp_path: Path) -> None:
    golden = goldens()[seed]
    session, strategy, messages, records = _project(seed, tmp_path)
    assert session.sha256 == golden["input_sha256"], "sessions.py no longer generates the session the golden saw"

    # The reloaded history: which lines klaude decodes, the items' types and estimates.
    per_line = [0] * len(golden["items_per_line"])
    for message in messages:
        per_line[message.line - 1] += 1
    assert per_line == golden["items_per_line"]
    physical = session.events.split(b"\n")[: len(per_line)]  # the file ends with "\n": no line after it
    for number, (raw, items) in enumerate(zip(physical, golden["items_per_line"], strict=True), start=1):
        # A line klaude's reload drops for a line break only str.splitlines() sees is reported as that line's error.
        if items == 0 and any(sep.encode() in raw for sep in ("\u2028", "\u2029", "\u0085", "\r")):
            errors = [r for r in records if isinstance(r, LineError) and r.line == number]
            assert errors and "splitlines" in errors[0].message, f"line {number} is no line error"
    assert_decides_as_klaude(strategy, messages, golden)


def test_the_project_sends_klaude_2_8_1s_request_body(tmp_path: Path) -> None:
    """Each kind of summarizer call (history, update_history, task_prefix), twice each, sent by the real SDK to the
    scripted server: the recorded body is the one klaude 2.8.1's provider builds (the golden's fingerprint), with
    the identity block first in ``system`` and each text part its own block, and the betas go as a header."""
    seen: Counter[str] = Counter()
    server = start_server()
    try:
        with AnthropicSummarizer(api_key="sk-ant-test-key", base_url=server.url, jitter=False) as summarizer:
            for seed, golden in sorted(goldens().items()):
                wanted = [
                    (end, outcome)
                    for end, _, _, _, outcome in golden["checkpoints"]
                    if isinstance(outcome, dict) and any(seen[kind] < 2 for kind in outcome["bodies"])
                ][:1]
                if not wanted:
                    continue
                (end, outcome), (_, strategy, messages, _) = wanted[0], _project(seed, tmp_path)
                prefix = messages[:end]
                cut = Cut(outcome["first_kept"], outcome["first_kept"], outcome["first_kept"])
                for request in strategy.summarizer_plan(prefix, cut, prune=[], by_hand=False).requests:
                    summarizer.summarize(request.summary_request(model=sessions.MODEL))
                    body, headers = server.requests[-1], server.request_headers[-1]
                    assert sessions.body_sha256(body)[:16] == outcome["bodies"][request.kind], (seed, end)
                    assert body["system"][0]["text"] == "You are Claude Code, Anthropic's official CLI for Claude."
                    assert len(body["messages"][0]["content"]) >= 2  # the parts as blocks, not one joined string
                    assert headers["anthropic-beta"] == ",".join(sessions.ANTHROPIC_BETAS)
                    seen[request.kind] += 1
                if all(seen[kind] >= 2 for kind in ("history", "update_history", "task_prefix")):
                    break
    finally:
        server.close()
    assert all(seen[kind] >= 2 for kind in ("history", "update_history", "task_prefix")), seen


def _sample_goldens() -> list[dict[str, Any]]:
    lines = gzip.decompress(SAMPLES_GOLDEN.read_bytes()).decode().splitlines()
    return [json.loads(line) for line in lines[1:]]


@pytest.mark.parametrize("golden", _sample_goldens(), ids=lambda g: g["sample"].rsplit("/", 1)[-1])
def test_the_real_samples_decide_as_klaude_2_8_1(golden: dict[str, Any]) -> None:
    """Every prefix of every real klaude-code sample, as klaude 2.8.1 decided it (its usage's limit as the config)."""
    folder = KLAUDE_SAMPLES / golden["sample"]
    events = (folder / "events.jsonl").read_bytes()
    meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").exists() else None
    meta_bytes = json.dumps(meta, sort_keys=True).encode() if meta is not None else b"-"
    assert hashlib.sha256(events + b"\0" + meta_bytes).hexdigest() == golden["input_sha256"], "the sample changed"
    parser, records = parse_session(folder)
    messages = history_messages(records)
    per_line = [0] * len(golden["items_per_line"])
    for message in messages:
        per_line[message.line - 1] += 1
    assert per_line == golden["items_per_line"]
    strategy = KlaudeCodeStrategy.from_session(parser.info, {})
    strategy.params = KlaudeParams.for_limit(golden["config_limit"])
    assert_decides_as_klaude(strategy, messages, golden)
