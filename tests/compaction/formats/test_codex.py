"""The Codex rollout reader: detection, API calls by the token rule, response items grouped with their call."""

from __future__ import annotations

import json

import pytest

from compaction.formats.codex import FORMAT, CodexParser
from compaction.formats.detect import detect_format
from compaction.replay import api_steps
from compaction.transcript import ContextEvent, Message
from tests.conftest import CODEX_SAMPLES


def read(lines: list[dict]) -> tuple[CodexParser, list[Message], list[ContextEvent]]:
    parser = CodexParser()
    records = list(parser.parse([(json.dumps(line) + "\n").encode() for line in lines]))
    return (
        parser,
        [r for r in records if isinstance(r, Message)],
        [r for r in records if isinstance(r, ContextEvent)],
    )


def token_count(total: int, last_input: int, *, cached: int = 0, output: int = 10) -> dict:
    last = {
        "input_tokens": last_input,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "reasoning_output_tokens": 0,
        "total_tokens": last_input + output,
    }
    totals = {**last, "total_tokens": total}
    return {
        "type": "event_msg",
        "payload": {
            "type": "token_count",
            "info": {"total_token_usage": totals, "last_token_usage": last, "model_context_window": 258400},
        },
    }


def item(payload: dict) -> dict:
    return {"type": "response_item", "payload": payload}


USER = item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]})
REASONING = item(
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAA"}
)
CALL = item({"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c1"})
OUTPUT = item({"type": "function_call_output", "call_id": "c1", "output": "a.py"})
META = {"type": "session_meta", "payload": {"id": "s1", "cli_version": "0.92.0", "cwd": "/w"}}


@pytest.mark.parametrize("path", sorted(CODEX_SAMPLES.glob("*.jsonl")), ids=lambda p: p.name[:30])
def test_every_sample_is_detected_as_codex(path):
    assert detect_format(path.read_bytes().splitlines(keepends=True)[:50]) == FORMAT


@pytest.mark.parametrize(
    "order",
    [
        [USER, token_count(100, 90), REASONING, CALL, OUTPUT],  # 0.34-0.57: the count comes first
        [USER, REASONING, CALL, token_count(100, 90), OUTPUT],  # 0.92 on: the count follows the response
    ],
    ids=["count-first", "count-after"],
)
def test_a_calls_response_items_carry_its_usage_in_either_order(order):
    _, messages, _ = read([META, *order])
    steps = api_steps([m for m in messages if m.kind not in ("bookkeeping", "unknown")])
    assert len(steps) == 1 and steps[0].context == 90
    reasoning = next(m for m in messages if m.raw_type == "response_item/reasoning")
    call = next(m for m in messages if m.raw_type == "response_item/function_call")
    assert reasoning.usage is not None and call.usage is not None and reasoning.call_key == call.call_key
    assert [m.line for m in messages] == sorted(m.line for m in messages)  # file order kept
    conversation = [m for m in messages if m.kind not in ("bookkeeping", "unknown")]
    first = conversation[steps[0].first]
    assert first.line > 2  # the request holds the user message only, never the response
    assert all(m.usage is None for m in conversation[: steps[0].first])


def test_re_emits_and_estimate_rows_are_not_calls_and_mirrors_are_bookkeeping():
    mirror = {"type": "event_msg", "payload": {"type": "user_message", "message": "go"}}
    parser, messages, _ = read(
        [META, USER, mirror, REASONING, CALL, token_count(100, 90), token_count(100, 90), OUTPUT, token_count(100, 0)]
    )
    assert sum(1 for m in messages if m.usage is not None and m.raw_type == "event_msg/token_count") == 1
    assert parser.info.data["estimate_rows"] == 1
    assert [m.kind for m in messages if m.raw_type == "event_msg/user_message"] == ["bookkeeping"]
    assert [m.kind for m in messages if m.raw_type == "response_item/message"] == ["prompt"]


def test_cached_input_is_part_of_the_context():
    _, messages, _ = read([META, USER, token_count(1000, 900, cached=600), REASONING])
    usage = next(m.usage for m in messages if m.usage is not None)
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.context) == (300, 600, 900)


def test_unknown_types_are_kept_verbatim_and_never_reach_the_model():
    _, messages, _ = read([META, {"type": "world_state", "payload": {"x": 1}}, item({"type": "hologram"}), USER])
    unknown = [m for m in messages if m.kind == "unknown"]
    assert [m.raw_type for m in unknown] == ["world_state", "response_item/hologram"]
    assert all(m.role == "meta" and m.raw for m in unknown)


def test_a_remote_compaction_draws_one_marker_with_its_kept_items():
    compacted = {
        "type": "compacted",
        "payload": {
            "message": "",
            "replacement_history": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "compaction", "encrypted_content": "gAAAAB"},
            ],
        },
    }
    following = {"type": "event_msg", "payload": {"type": "context_compacted"}}
    parser, messages, events = read([META, USER, token_count(100, 90), REASONING, compacted, following])
    assert [(e.kind, e.trigger, e.data["replacement_items"]) for e in events] == [("compaction", "remote", 2)]
    summary = next(m for m in messages if m.raw_type == "compacted")
    assert summary.kind == "compact_summary" and [b.kind for b in summary.blocks] == ["redacted_thinking"]
    assert parser.info.data["compactions"][0]["before_input"] == 90


def test_the_first_real_prompt_titles_the_session_cut_at_a_word():
    context = item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x"}]}
    )
    long_prompt = "Explain why " + "the worker pulls jobs " * 10
    prompt = item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": long_prompt}]})
    parser, _, _ = read([META, context, prompt, USER])
    title = parser.info.title
    assert title is not None and title.endswith("\u2026") and len(title) <= 120
    kept = title.removesuffix("\u2026")
    assert long_prompt.startswith(kept) and long_prompt[len(kept)] == " "  # cut between two words
