"""KHAELOR against a line-by-line port of seed 002's ``compaction.ts``, the oracle (khaelor_seed.py).

The project reads the same logs through its real parser; ``select_cut``, ``decide`` and ``plan_preview`` must
name the oracle's cut, prune and transcript on random logs with earlier prunes and compactions, and on every
prefix of the sample.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.formats.khaelor import KhaelorParser
from compaction.preview import plan_preview
from compaction.strategies.base import Cut, CutRefused
from compaction.strategies.khaelor import KhaelorParams, KhaelorStrategy
from compaction.transcript import Message
from tests.compaction.strategies.khaelor_seed import (
    CONVERSATION_EVENT_TYPES,
    PRUNE_PLACEHOLDER,
    Event,
    SeqRange,
    build_conversation,
    is_pairing_safe_cut,
    messages_api_body,
    seed_extract_cut_events,
    seed_model_request,
    seed_render_transcript,
    seed_select_compaction_cut,
    seed_select_prune_candidates,
    seed_user_text,
)

SAMPLE = Path(__file__).resolve().parents[3].parent / "shared" / "samples" / "khaelor" / "ledger-migration.events.jsonl"


# ───────────────────────────── the project over the same events ─────────────────────────────


def parsed(events: list[Event]) -> list[Message]:
    lines = [orjson.dumps(e) + b"\n" for e in events]
    return [r for r in KhaelorParser().parse(lines) if isinstance(r, Message)]


def seq_range(messages: list[Message], start: int, end: int) -> SeqRange:
    return {"fromSeq": messages[start].data["seq"], "toSeq": messages[end - 1].data["seq"]}


def assert_agrees(events: list[Event], params: KhaelorParams) -> tuple[SeqRange | None, list[str]]:
    """select_cut, decide and the preview name the oracle's cut, prune and summarizer request."""
    strategy = KhaelorStrategy(params)
    messages = parsed(events)
    expected_cut = seed_select_compaction_cut(events, params)
    expected_prune = seed_select_prune_candidates(events, params)

    selected = strategy.select_cut(messages)
    assert (None if selected is None else seq_range(messages, selected.start, selected.end)) == expected_cut
    decision = strategy.decide(messages)
    decided = None if decision.cut is None else seq_range(messages, decision.cut.start, decision.cut.end)
    assert decided == expected_cut
    assert decision.prune == expected_prune["toolUseIds"]

    plan = plan_preview(messages, strategy=strategy)
    previewed = None if plan.auto_cut is None else seq_range(messages, plan.auto_cut.start, plan.auto_cut.end)
    assert previewed == expected_cut
    if expected_cut is not None:
        # The kernel records the prune first, then compresses the cut over the log that holds it.
        recorded = events
        if expected_prune["toolUseIds"]:
            recorded = [*events, {"seq": events[-1]["seq"] + 1, "type": "context.pruned", "payload": expected_prune}]
        middle = build_conversation(seed_extract_cut_events(recorded, expected_cut))
        transcript = seed_render_transcript(middle, params)
        assert plan.transcript == seed_user_text(transcript)
        # The whole summarizer request body, with the aux model session.started recorded (ADR-10).
        assert decision.cut is not None
        summarizer = strategy.summarizer_plan(messages, decision.cut, prune=decision.prune, by_hand=False)
        (request,) = summarizer.requests
        expected = seed_model_request(
            model="aux-model", transcript=transcript, max_output_tokens=params.summary_max_output_tokens
        )
        assert request.api_body(model="aux-model") == messages_api_body(expected)
    return expected_cut, expected_prune["toolUseIds"]


# ───────────────────────────── generated logs ─────────────────────────────

# Small protections so that logs of a few dozen events already prune, compact and compact again.
SMALL = KhaelorParams(protect_recent_tool_tokens=1_500, protect_tail_tokens=1_200, context_window=8_000)


class EventLog:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.calls: list[str] = []

    def add(self, type_: str, **payload: Any) -> None:
        self.events.append({"seq": len(self.events) + 1, "type": type_, "payload": payload})

    def result(self, tool_id: str, chars: int, status: str) -> None:
        self.add(f"tool.{status}", toolUseId=tool_id, modelText="r" * chars)
        self.calls.append(tool_id)


def build(steps: list[tuple[str, int]], *, leading_user: bool) -> list[Event]:
    log = EventLog()
    if leading_user:
        log.add("user.message-created", text="migrate the ledger")
    for n, (kind, size) in enumerate(steps):
        tool_id = f"t{n}"
        if kind == "text":
            log.add("model.text-block-completed", text="t" * size)
        elif kind == "thinking":
            log.add("model.thinking-block-completed", thinking="h" * size)
        elif kind == "user":
            log.add("user.message-created", text="u" * (size // 10))
        elif kind == "call":
            log.add("tool.requested", toolUseId=tool_id, name="bash", input={"command": "x" * (size % 50)})
            log.result(tool_id, size, ("completed", "failed", "cancelled")[size % 3])
        elif kind == "parallel":
            log.add("tool.requested", toolUseId=f"{tool_id}a", name="read", input={"path": "a"})
            log.add("tool.requested", toolUseId=f"{tool_id}b", name="read", input={"path": "b"})
            log.result(f"{tool_id}b", size, "completed")
            log.add("model.text-block-completed", text="p" * (size // 3))
            log.result(f"{tool_id}a", size // 2, "completed")
        elif kind == "unanswered":
            log.add("tool.requested", toolUseId=tool_id, name="bash", input={})
        elif kind == "steering":
            log.add("user.steering-queued", steeringId=tool_id, text="s" * size)
            log.add("user.steering-injected", steeringId=tool_id)
        elif kind == "prune" and log.calls:
            # A prune as KHAELOR records it, or an arbitrary earlier one (a different protection in force then).
            ids = seed_select_prune_candidates(log.events, SMALL)["toolUseIds"] if size % 2 else log.calls[: size // 2]
            if ids:
                log.add("context.pruned", toolUseIds=ids, placeholder=PRUNE_PLACEHOLDER, tokensReclaimedEstimate=0)
        elif kind == "compact":
            cut = seed_select_compaction_cut(log.events, SMALL)
            if cut is not None:
                log.add(
                    "context.compacted",
                    checkpointYaml="objective: " + "o" * size,
                    cut=cut,
                    trigger="proactive-token-budget",
                    tokensBefore=0,
                    summaryModel="aux",
                )
    return log.events


# Mostly tool work, so that most logs prune, compact, and cut again through an earlier compacted range.
KINDS = ["call"] * 6 + ["parallel", "text", "text", "thinking", "steering", "unanswered", "user", "prune", "prune"]
step = st.one_of(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 3_000)),
    st.tuples(st.just("compact"), st.integers(0, 600)),
)
logs = st.builds(build, st.lists(step, min_size=12, max_size=50), leading_user=st.sampled_from([True] * 5 + [False]))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=logs)
def test_select_cut_decide_and_the_preview_agree_with_the_seed(events: list[Event]) -> None:
    if events:
        assert_agrees(events, SMALL)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=logs, data=st.data())
def test_a_hand_cut_is_refused_exactly_when_the_seed_finds_it_not_pairing_safe(events: list[Event], data: Any) -> None:
    # compressEvents throws only for a cut that is not pairing-safe: head, tail and earlier compacted ranges are
    # the reviewer's to take. (The project also needs one conversation event in the cut, for fromSeq and toSeq.)
    messages = parsed(events)
    conversation = [i for i, m in enumerate(messages) if m.raw_type in CONVERSATION_EVENT_TYPES]
    if not conversation:
        return
    first = data.draw(st.sampled_from(conversation))
    last = data.draw(st.sampled_from([i for i in conversation if i >= first]))
    safe = is_pairing_safe_cut(events, seq_range(messages, first, last + 1))
    try:
        KhaelorStrategy(SMALL).check_cut(messages, Cut(start=first, end=last + 1, first_kept=0))
    except CutRefused as refused:
        assert not safe and "pairing-safe" in str(refused)
    else:
        assert safe


def test_the_generated_logs_reach_the_cases_that_used_to_differ() -> None:
    # Guard against a generator that never prunes, compacts twice, or cuts through an earlier compacted range.
    steps = [("call", 3_000), ("text", 100)] * 3 + [("prune", 1), ("compact", 50)]
    events = build(steps * 3 + [("call", 300)], leading_user=True)
    kinds = [e["type"] for e in events]
    assert kinds.count("context.compacted") >= 2 and "context.pruned" in kinds
    cut, _ = assert_agrees(events, SMALL)
    first_range = next(e["payload"]["cut"] for e in events if e["type"] == "context.compacted")
    assert cut is not None and cut["fromSeq"] <= first_range["fromSeq"]  # the old range is taken again


def test_a_giant_pruned_result_in_the_recent_tail_still_leaves_a_cut() -> None:
    # The seed prices the pruned result by its raw modelText in the tail walk, so the tail floor is reached at
    # it and the middle before it is compacted; pricing it as the placeholder would walk back to the head.
    log = EventLog()
    log.add("user.message-created", text="migrate the ledger")
    for n in range(4):
        log.add("model.text-block-completed", text="t" * 400)
        log.add("tool.requested", toolUseId=f"c{n}", name="read", input={"path": f"f{n}"})
        log.result(f"c{n}", 12_000, "completed")
    log.add("tool.requested", toolUseId="giant", name="bash", input={"command": "cat dump"})
    log.result("giant", 400_000, "completed")
    log.add("context.pruned", toolUseIds=["giant"], placeholder=PRUNE_PLACEHOLDER, tokensReclaimedEstimate=99_977)
    log.add("model.text-block-completed", text="done")
    params = KhaelorParams(context_window=12_000)
    cut, _ = assert_agrees(log.events, params)
    giant_seq = next(
        e["seq"] for e in log.events if e["type"] == "tool.requested" and e["payload"]["toolUseId"] == "giant"
    )
    assert cut == {"fromSeq": 2, "toSeq": giant_seq - 1}
    decision = KhaelorStrategy(params).decide(parsed(log.events))
    assert decision.should_compact  # 12,000 tokens of results are over the 9,600-token trigger


def test_every_prefix_of_the_sample_agrees_with_the_seed() -> None:
    events = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    small = KhaelorParams(protect_recent_tool_tokens=400, protect_tail_tokens=300)
    cuts = [
        assert_agrees(events[:n], params)[0] for n in range(1, len(events) + 1) for params in (KhaelorParams(), small)
    ]
    assert any(cut is not None for cut in cuts)
