"""klaude-code 2.8.1 compaction: reproduce klaude's own decisions (expected/*.json) and the doc's rules.

Sections (§) refer to docs/formats/klaude-code.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, replace
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.strategies.base import Cut, CutRefused
from compaction.strategies.klaude_code import (
    COMPACTION_SUMMARY_PREFIX,
    MAX_TOOL_CALL_CHARS,
    MAX_TOOL_OUTPUT_CHARS,
    SUMMARIZATION_SYSTEM_PROMPT,
    TOOL_RESULT,
    TRUNCATION_MARKER,
    KlaudeCodeStrategy,
    KlaudeParams,
    file_operation_blocks,
    is_context_overflow,
)
from compaction.transcript import Message
from tests.compaction.strategies.klaude_items import klaude_assistant, klaude_item, klaude_user, lines_to_messages
from tests.conftest import SHARED

SAMPLES = SHARED / "samples" / "klaude-code"
DOC = SHARED / "docs" / "formats" / "klaude-code.md"
SAMPLE_INDEX: dict[str, dict[str, Any]] = (
    json.loads((SAMPLES / "samples.json").read_text()) if (SAMPLES / "samples.json").is_file() else {}
)
EXPECTED = (
    {p.stem: json.loads(p.read_text()) for p in sorted((SAMPLES / "expected").glob("*.json"))} if SAMPLE_INDEX else {}
)
needs_samples = pytest.mark.skipif(not SAMPLE_INDEX, reason="shared klaude-code samples not available")


@cache
def sample(name: str) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    parser, records = parse_session(SAMPLES / SAMPLE_INDEX[name]["dir"])
    return tuple(history_messages(records)), tuple(parser.info.data["file_tracker_paths"])


EVALUATIONS = [
    pytest.param(name, i, id=f"{name}-limit-{e['config_context_limit']}")
    for name, data in EXPECTED.items()
    for i, e in enumerate(data["evaluations"])
]


# --- reproduce expected/*.json ------------------------------------------------------------------


@needs_samples
@pytest.mark.parametrize(("name", "i"), EVALUATIONS)
def test_config_and_threshold_check(name: str, i: int) -> None:
    evaluation = EXPECTED[name]["evaluations"][i]
    messages, _ = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(evaluation["config_context_limit"])
    assert {
        "reserve_tokens": strategy.params.reserve_tokens,
        "keep_recent_tokens": strategy.params.keep_recent_tokens,
        "max_summary_tokens": strategy.max_summary_tokens,
    } == evaluation["compaction_config"]
    check = strategy.check_threshold(messages)
    assert check.context_limit == evaluation["effective_context_limit"]
    assert check.threshold_tokens == evaluation["threshold_tokens"]
    assert check.tokens_for_threshold == evaluation["tokens_for_threshold"]
    assert check.tokens_source == evaluation["tokens_source"]
    assert check.should_compact_threshold is evaluation["should_compact_threshold"]


@needs_samples
@pytest.mark.parametrize(("name", "i"), EVALUATIONS)
def test_cut_plan(name: str, i: int) -> None:
    evaluation = EXPECTED[name]["evaluations"][i]
    messages, tracker = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(evaluation["config_context_limit"], file_tracker_paths=tracker)
    plan = asdict(strategy.plan(messages))
    compared = {k: v for k, v in evaluation["cut"].items() if k in plan}
    # every decision field klaude reports must be one we reproduce
    assert {"raw_cut_index", "adjusted_cut_index", "first_kept_index", "error", "can_compact"} <= compared.keys()
    assert {k: plan[k] for k in compared} == compared


@needs_samples
@pytest.mark.parametrize(("name", "i"), EVALUATIONS)
def test_summarizer_calls_summary_and_view_after(name: str, i: int) -> None:
    evaluation = EXPECTED[name]["evaluations"][i]
    messages, tracker = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(evaluation["config_context_limit"], file_tracker_paths=tracker)
    plan = strategy.plan(messages)
    calls = evaluation["cut"]["summarizer_calls"]
    assert len(plan.requests) == len(calls)
    for request, call in zip(plan.requests, calls, strict=True):
        text = request.text
        assert request.kind == call["kind"]
        assert request.max_tokens == call["max_tokens"]
        assert request.system == SUMMARIZATION_SYSTEM_PROMPT
        assert len(request.parts) == call["n_text_parts"]
        assert len(text) == call["input_chars"]
        assert text.startswith(call["input_head"])
        assert text.endswith(call["input_tail"])
    if not plan.can_compact:
        return
    replies = {call["kind"]: call["stub_reply"] for call in calls}
    summary = strategy.assemble_summary(plan, replies=replies)
    assert summary == evaluation["cut"]["summary_with_stub"]
    after = evaluation["cut"]["llm_view_after"]
    kept = strategy.post_compaction_view(messages, plan)
    assert kept == after["source_indices"]
    assert 1 + len(kept) == after["n_items"]
    assert strategy.estimate_view(messages, [None, *kept], summary=summary) == after["estimated_tokens"]


@needs_samples
@pytest.mark.parametrize(("name", "i"), EVALUATIONS)
def test_decide_matches_plan(name: str, i: int) -> None:
    evaluation = EXPECTED[name]["evaluations"][i]
    messages, _ = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(evaluation["config_context_limit"])
    decision = strategy.decide(messages)
    assert decision.strategy == "klaude-code"
    assert decision.should_compact is evaluation["should_compact_threshold"]
    cut = evaluation["cut"]
    if cut["first_kept_index"] is None:
        assert decision.cut is None
        assert decision.reason == cut["error"]
        assert strategy.select_cut(messages) is None
    else:
        expected_cut = Cut(cut["base_start_index"], cut["first_kept_index"], cut["first_kept_index"])
        assert decision.cut is not None
        assert (decision.cut.start, decision.cut.end, decision.cut.first_kept) == (
            expected_cut.start,
            expected_cut.end,
            expected_cut.first_kept,
        )
        assert decision.tokens_before == cut["tokens_before"]
        # klaude's view after = the summary message + the kept view; the decision estimates the kept view
        summary_tokens = max(1, (len(cut["summary_with_stub"]) + 3) // 4)
        assert decision.tokens_after_estimate == cut["llm_view_after"]["estimated_tokens"] - summary_tokens
        assert strategy.select_cut(messages) == decision.cut


@needs_samples
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_item_estimates_and_totals(name: str) -> None:
    expected = EXPECTED[name]
    messages, _ = sample(name)
    strategy = KlaudeCodeStrategy()
    estimates = [strategy.estimate(m) for m in messages]
    for item in expected["items"]:
        if item["is_message"]:
            assert estimates[item["index"]] == item["estimated_tokens"], item["index"]
        assert sum(estimates[item["index"] :]) == item["tokens_from_here_to_end"]
    totals = expected["totals"]
    assert sum(estimates) == totals["estimated_tokens_full_history"]
    view = strategy.llm_view(messages)
    assert view == totals["llm_view_source_indices"]
    last = totals["compaction_entries"][-1] if totals["compaction_entries"] else None
    summary = messages[last].text if last is not None else ""
    assert strategy.estimate_view(messages, view, summary=summary) == totals["estimated_tokens_llm_view"]
    last_usage = next(m.usage for m in reversed(messages) if m.usage is not None)
    assert last_usage.context == totals["last_context_tokens"]


@needs_samples
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_timeline_checks(name: str) -> None:
    timeline = EXPECTED[name]["timeline"]
    messages, _ = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(timeline["context_limit"])
    got = [
        {
            "prefix_len": prefix,
            "next_item": messages[prefix].raw_type,
            "tokens_for_threshold": check.tokens_for_threshold,
            "tokens_source": check.tokens_source,
            "should_compact_threshold": check.should_compact_threshold,
        }
        for prefix, check in strategy.threshold_checks(messages)
    ]
    assert got == timeline["checks"]


# --- reproduce the CompactionEntries klaude itself wrote -------------------------------------------

RECORDED_RE = re.compile(r"^compaction\[\w+\] at index (\d+):")
RECORDED = [
    pytest.param(name, int(found.group(1)), id=f"{name}-{found.group(1)}")
    for name, info in SAMPLE_INDEX.items()
    for found in map(RECORDED_RE.match, info["events"])
    if found
]


@needs_samples
@pytest.mark.parametrize(("name", "index"), RECORDED)
def test_recorded_compactions_are_reproduced(name: str, index: int) -> None:
    messages, tracker = sample(name)
    entry = messages[index].data["item"]
    strategy = KlaudeCodeStrategy.for_limit(SAMPLE_INDEX[name]["context_limit"])
    plan = strategy.plan(messages, at=index)
    assert plan.first_kept_index == entry["first_kept_index"]
    assert plan.tokens_before == entry["tokens_before"]
    assert plan.kept_items_brief == entry["kept_items_brief"]
    assert bool(plan.split_task) == entry["summary"].startswith(COMPACTION_SUMMARY_PREFIX)
    # meta.json's file_tracker is the end state, so read_files can only be bracketed; modified_files is exact
    assert plan.details is not None
    assert plan.details["modified_files"] == entry["details"]["modified_files"]
    assert set(plan.details["read_files"]) <= set(entry["details"]["read_files"])
    with_tracker = KlaudeCodeStrategy(strategy.params, file_tracker_paths=tracker).plan(messages, at=index)
    assert with_tracker.details is not None
    assert set(entry["details"]["read_files"]) <= set(with_tracker.details["read_files"])
    assert entry["summary"].endswith(file_operation_blocks(entry["details"]))


@needs_samples
def test_failed_manual_compaction_is_nothing_to_compact() -> None:
    name = "multi_compaction"
    failures = [
        m.groups()
        for e in SAMPLE_INDEX[name]["events"]
        if (m := re.match(r"^compaction\[manual\] attempted before index (\d+) failed: (.*) \(nothing persisted\)$", e))
    ]
    assert failures
    messages, _ = sample(name)
    strategy = KlaudeCodeStrategy.for_limit(SAMPLE_INDEX[name]["context_limit"])
    for index, error in failures:
        plan = strategy.plan(messages, at=int(index))
        assert (plan.can_compact, plan.error) == (False, error)


# --- rules from the doc ----------------------------------------------------------------------------


def _doc_config_table() -> list[tuple[int | None, int, int, int]]:
    rows = re.findall(r"^\| (none|\d+) \| (\d+) \| (\d+) \| (\d+) \|$", DOC.read_text(), re.MULTILINE)
    return [(None if a == "none" else int(a), int(b), int(c), int(d)) for a, b, c, d in rows]


@pytest.mark.skipif(not DOC.is_file(), reason="shared docs not available")
def test_config_table_from_the_doc() -> None:
    rows = _doc_config_table()
    assert len(rows) >= 5
    for limit, reserve, keep, max_summary in rows:
        params = KlaudeParams.for_limit(limit)
        assert (params.reserve_tokens, params.keep_recent_tokens, params.max_summary_tokens) == (
            reserve,
            keep,
            max_summary,
        )


@pytest.mark.parametrize(
    ("text", "overflow"),
    [
        ("BadRequestError Error code: 400 - {'message': 'prompt is too long: 229651 tokens > 200000 maximum'}", True),
        ("400 status code (no body)", True),
        ("413 (no body)", True),
        ("APIStatusError 400 status code (no body)", False),  # the status rule is anchored (§3.13)
        ("RateLimitError too many tokens per minute", True),  # a TPM error also matches (§3.13)
        ("This model's maximum context length is 128000 tokens", True),
        ("APIConnectionError Connection error.", False),
        ("", False),
        (None, False),
    ],
)
def test_overflow_detection(text: str | None, overflow: bool) -> None:
    assert is_context_overflow(text) is overflow


def _developer(text: str) -> bytes:
    return klaude_item("DeveloperMessage", role="developer", parts=[{"type": "text", "text": text}], ui_extra=None)


def _result(call_id: str, output: str, *, ui_extra: Any = None) -> bytes:
    return klaude_item(
        "ToolResultMessage", role="tool", call_id=call_id, tool_name="Read", status="success", output_text=output,
        parts=[], ui_extra=ui_extra,
    )  # fmt: skip


def _quirk_history() -> list[Message]:
    # §3.5's worked example: [User, Assistant(call a), ToolResult(40000), Developer(8000), Assistant(call b),
    # ToolResult(4000), Assistant("done")]
    return lines_to_messages(
        [
            klaude_user("go"),
            klaude_assistant([("a", "{}")]),
            _result("a", "x" * 40000),
            _developer("r" * 8000),
            klaude_assistant([("b", "{}")]),
            _result("b", "y" * 4000),
            klaude_assistant(text="done"),
        ]
    )


def test_reminder_quirk_reproduced() -> None:
    messages = _quirk_history()
    params = replace(KlaudeParams.for_limit(None), keep_recent_tokens=1500)  # keep = 1500 as in §3.5
    plan = KlaudeCodeStrategy(params).plan(messages)
    assert (plan.raw_cut_index, plan.adjusted_cut_index) == (3, 5)
    assert messages[plan.adjusted_cut_index].raw_type == "ToolResultMessage"
    # get_llm_history then drops that leading tool result (§3.12)
    assert KlaudeCodeStrategy(params).post_compaction_view(messages, plan) == [6]


def test_reminder_quirk_can_be_turned_off() -> None:
    messages = _quirk_history()
    params = replace(KlaudeParams.for_limit(None), keep_recent_tokens=1500, reproduce_reminder_quirk=False)
    strategy = KlaudeCodeStrategy(params)
    cut = strategy.select_cut(messages)
    assert cut is not None and messages[cut.end].raw_type == "AssistantMessage"
    strategy.check_cut(messages, cut)


def test_check_cut_refuses_splitting_a_call_from_its_result() -> None:
    messages = _quirk_history()
    strategy = KlaudeCodeStrategy()
    with pytest.raises(CutRefused):
        strategy.check_cut(messages, Cut(0, 5, 5))  # keeps result b, summarises call b
    with pytest.raises(CutRefused):
        strategy.check_cut(messages, Cut(1, 4, 4))  # klaude always starts at the previous first kept item
    with pytest.raises(CutRefused):
        strategy.check_cut(messages, Cut(0, 0, 0))
    strategy.check_cut(messages, Cut(0, 4, 4))


def test_serialization_truncates_tool_io() -> None:
    long_args = '{"file_path": "' + "p" * (MAX_TOOL_CALL_CHARS + 10) + '"}'
    messages = lines_to_messages(
        [
            klaude_user("hi"),
            klaude_assistant([("a", long_args)], text="ok"),
            _result("a", "z" * (MAX_TOOL_OUTPUT_CHARS + 1)),
        ]
    )
    text = KlaudeCodeStrategy().render_transcript(messages)
    blocks = text.split("\n\n")
    assert blocks[0] == "[User]: hi"
    assert blocks[1] == "[Assistant]: ok"
    assert blocks[2] == f"[Assistant tool calls]: Read({long_args[:MAX_TOOL_CALL_CHARS]}{TRUNCATION_MARKER})"
    assert blocks[3] == f"[Tool result]: {'z' * MAX_TOOL_OUTPUT_CHARS}{TRUNCATION_MARKER}"


def test_file_operations_heuristics() -> None:
    messages = lines_to_messages(
        [
            klaude_user("start"),
            klaude_assistant([("a", '{"file_path": "/w.py", "content": "x"}'), ("b", '{"path": "/r.py"}')]),
            _result("a", "ok"),
            _result("b", "ok", ui_extra={"type": "diff", "files": [{"file_path": "/d.py", "lines": []}]}),
            klaude_user("next " * 40000),
            klaude_assistant(text="done"),
        ]
    )
    params = replace(KlaudeParams.for_limit(None), keep_recent_tokens=10)
    plan = KlaudeCodeStrategy(params, file_tracker_paths=["/tracked.py", "/w.py"]).plan(messages)
    assert plan.details == {"read_files": ["/r.py", "/tracked.py"], "modified_files": ["/d.py", "/w.py"]}
    summary = KlaudeCodeStrategy(params).assemble_summary(plan, replies={"history": "S"})
    assert summary.startswith("S\n\n<read-files>\n")
    assert summary.endswith("<modified-files>\n/d.py\n/w.py\n</modified-files>")


def test_parse_summary_strips_and_rejects_empty() -> None:
    strategy = KlaudeCodeStrategy()
    assert strategy.parse_summary("  ## Goal\n  ") == "## Goal"
    with pytest.raises(ValueError, match="empty output"):
        strategy.parse_summary(" \n ")


def test_thresholds_for_builtin_model_and_2_7() -> None:
    strategy = KlaudeCodeStrategy()
    lines = strategy.thresholds(model="claude-opus-4-5-20251101", version="2.8.1")
    params = KlaudeParams.for_limit(None)
    assert lines.window - params.reserve_tokens == lines.autocompact
    assert lines.assumption is False
    assert strategy.thresholds(model="claude-opus-4-5-20251101", version="2.7.0").autocompact is None
    assert strategy.select_prune([]) == []


def test_positions_must_be_history_indices() -> None:
    messages = lines_to_messages([klaude_user("a"), klaude_user("b")])
    with pytest.raises(ValueError, match="history index"):
        KlaudeCodeStrategy().plan(messages[1:])


# --- pairing safety, generated sessions ------------------------------------------------------------

turn_strategy = st.tuples(
    st.integers(min_value=0, max_value=3),  # tool calls in this turn (0 = the final answer)
    st.lists(st.integers(min_value=0, max_value=12000), min_size=3, max_size=3),  # result sizes
    st.booleans(),  # a reminder at the turn start
)
session_strategy = st.lists(
    st.tuples(st.integers(min_value=1, max_value=4000), st.lists(turn_strategy, min_size=1, max_size=6)),
    min_size=1,
    max_size=5,
)


def _build(session: list[tuple[int, list[tuple[int, list[int], bool]]]], *, reminders: bool) -> list[bytes]:
    lines: list[bytes] = []
    call = 0
    for prompt_chars, turns in session:
        lines.append(klaude_user("u" * prompt_chars))
        for n_calls, sizes, reminder in turns:
            if reminders and reminder:
                lines.append(_developer("<system-reminder>" + "r" * 400 + "</system-reminder>"))
            ids = [f"call_{call + k}" for k in range(n_calls)]
            call += n_calls
            lines.append(
                klaude_assistant([(cid, '{"file_path": "/f.py"}') for cid in ids], text="t" if not ids else "")
            )
            lines.extend(_result(cid, "o" * size) for cid, size in zip(ids, sizes, strict=False))
    return lines


def _assert_pairing_safe(messages: list[Message], first_kept: int, *, allow_quirk: bool = False) -> None:
    call_position: dict[str, int] = {}
    for position, message in enumerate(messages):
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_id:
                call_position[block.tool_id] = position
    if not allow_quirk:
        assert messages[first_kept].raw_type != TOOL_RESULT
    for position in range(first_kept, len(messages)):
        message = messages[position]
        if message.raw_type == TOOL_RESULT:
            assert call_position[message.blocks[0].tool_id or ""] >= first_kept, (position, first_kept)


def _simulate(lines: list[bytes], keep: int, *, quirk: bool) -> list[Message]:
    """Replay the session, compacting whenever klaude could at a turn start, as a long session would."""
    params = replace(KlaudeParams.for_limit(None), keep_recent_tokens=keep, reproduce_reminder_quirk=quirk)
    strategy = KlaudeCodeStrategy(params)
    history: list[bytes] = []
    for line in lines:
        history.append(line)
        messages = lines_to_messages(history)
        plan = strategy.plan(messages)
        if plan.can_compact and plan.first_kept_index is not None:
            _assert_pairing_safe(messages, plan.first_kept_index)
            cut = strategy.select_cut(messages)
            assert cut is not None
            strategy.check_cut(messages, cut)
            if len(history) % 3 == 0:  # compact at some of the possible points
                history.append(
                    klaude_item("CompactionEntry", summary="s", first_kept_index=plan.first_kept_index, tokens_before=1,
                          details=None, kept_items_brief=[])
                )  # fmt: skip
    return lines_to_messages(history)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=session_strategy, keep=st.integers(min_value=1, max_value=20000))
def test_cut_is_pairing_safe_on_generated_sessions(session: Any, keep: int) -> None:
    _simulate(_build(session, reminders=False), keep, quirk=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=session_strategy, keep=st.integers(min_value=1, max_value=20000))
def test_cut_is_pairing_safe_with_reminders_when_quirk_is_off(session: Any, keep: int) -> None:
    _simulate(_build(session, reminders=True), keep, quirk=False)
