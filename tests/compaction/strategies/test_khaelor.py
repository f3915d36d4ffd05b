"""KHAELOR-style compaction: every rule of compaction.ts (seeds/002), plus properties over generated sessions."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.formats.khaelor import KhaelorParser
from compaction.preview import PreviewPlan, plan_preview
from compaction.replay import after_calls
from compaction.strategies.base import Cut, CutRefused, context_estimates
from compaction.strategies.claude_code import ClaudeCodeStrategy
from compaction.strategies.khaelor import (
    BLOCK_TRUNCATION_SUFFIX,
    PRUNE_PLACEHOLDER,
    SUMMARY_SYSTEM_PROMPT,
    TRANSCRIPT_TRUNCATION_MARKER,
    Checkpoint,
    CheckpointProcess,
    KhaelorParams,
    KhaelorStrategy,
    collect_running_processes,
    estimate_tokens,
    parse_checkpoint,
    parse_checkpoint_lenient,
    serialize_checkpoint,
)
from compaction.summarize import AnthropicSummarizer, OfflineSummarizer
from compaction.transcript import Message, SessionInfo
from tests.anthropic_server import ok_blocks, start_server
from tests.compaction.strategies.khaelor_log import Log
from tests.compaction.strategies.khaelor_seed import CONVERSATION_EVENT_TYPES
from tests.conftest import SHARED

SEED = SHARED / "seeds" / "002_7d11f98384e41155.txt"
SAMPLE = SHARED / "samples" / "khaelor" / "ledger-migration.events.jsonl"

CONVERSATION = CONVERSATION_EVENT_TYPES
RESULT_TYPES = {"tool.completed", "tool.failed", "tool.cancelled"}


def index_of(messages: list[Message], seq: int) -> int:
    return next(i for i, m in enumerate(messages) if m.data["seq"] == seq)


def seed_text() -> str:
    return SEED.read_text(encoding="utf-8")


PLACEHOLDER_TOKENS = math.ceil(len(PRUNE_PLACEHOLDER) / 4)


# ───────────────────────────── constants come from the seed ─────────────────────────────


def test_the_placeholder_and_markers_are_the_seeds_verbatim() -> None:
    seed = seed_text()
    assert f'"{PRUNE_PLACEHOLDER}"' in seed
    assert json.dumps(BLOCK_TRUNCATION_SUFFIX, ensure_ascii=False) in seed
    assert json.dumps(TRANSCRIPT_TRUNCATION_MARKER, ensure_ascii=False) in seed


def test_the_default_options_are_the_seeds() -> None:
    seed = seed_text()
    defaults = seed[seed.index("DEFAULT_COMPACTION_OPTIONS") :]

    def option(name: str) -> int:
        match = re.search(rf"{name}: ([\d_]+)", defaults)
        assert match is not None
        return int(match.group(1).replace("_", ""))

    params = KhaelorParams()
    assert params.protect_recent_tool_tokens == option("protectRecentToolTokens")
    assert params.protect_tail_tokens == option("protectTailTokens")
    assert params.summary_max_output_tokens == option("summaryMaxOutputTokens")
    assert params.max_block_chars == option("maxBlockChars")
    assert params.max_transcript_chars == option("maxTranscriptChars")
    assert KhaelorStrategy().max_summary_tokens == option("summaryMaxOutputTokens")


def test_the_summary_prompt_is_the_seeds_line_for_line() -> None:
    # The seed page collapsed leading whitespace and escaped the backticks of the template literal.
    seed = seed_text().replace("\\`", "`")
    body = seed[seed.index("SUMMARY_SYSTEM_PROMPT = `") :]
    body = body[: body.index("`;")]
    for line in SUMMARY_SYSTEM_PROMPT.splitlines():
        assert line.strip() in body
    assert SUMMARY_SYSTEM_PROMPT.startswith("You summarize an engineering agent's conversation")
    assert SUMMARY_SYSTEM_PROMPT.endswith("Be specific and factual; never invent results.")
    assert KhaelorStrategy().prompt() == SUMMARY_SYSTEM_PROMPT


def test_the_estimate_is_ceil_of_chars_over_four() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


# ───────────────────────────── thresholds ─────────────────────────────


def test_thresholds_take_the_recorded_window_and_mark_the_trigger_as_an_assumption() -> None:
    info = SessionInfo(format="khaelor", model="claude-sonnet-4-5", context_window=150_000, data={"aux_model": "h"})
    strategy = KhaelorStrategy.for_session(info)
    thresholds = strategy.thresholds(model=None, version=None)
    assert thresholds.window == 150_000
    assert thresholds.autocompact == 120_000  # 80 % (docs/formats/khaelor.md)
    assert thresholds.assumption is True and "assumption" in thresholds.source
    assert strategy.summary_model([]) == "h"
    assert strategy.should_compact(messages=[], context_tokens=120_001) is True
    assert strategy.should_compact(messages=[], context_tokens=120_000) is False


def test_without_a_recorded_window_the_models_window_is_used() -> None:
    thresholds = KhaelorStrategy().thresholds(model="claude-sonnet-4-5", version=None)
    assert thresholds.window == 200_000 and thresholds.autocompact == 160_000


# ───────────────────────────── prune selection ─────────────────────────────


def test_prune_protects_the_newest_40k_tokens_of_tool_output() -> None:
    log = Log()
    log.user()
    for n in range(1, 6):
        log.call(f"c{n}", chars=48_000)  # 12,000 tokens each: the newest three (36,000) fit under 40,000
    decision = KhaelorStrategy().prune_decision(log.messages())
    assert decision.tool_use_ids == ["c1", "c2"]
    assert decision.placeholder == PRUNE_PLACEHOLDER
    assert decision.tokens_reclaimed_estimate == 2 * (12_000 - PLACEHOLDER_TOKENS)


def test_prune_protection_includes_output_that_reaches_exactly_40k() -> None:
    log = Log()
    log.user()
    for n in range(1, 4):
        log.call(f"c{n}", chars=80_000)  # 20,000 tokens each: the newest two are exactly 40,000
    assert KhaelorStrategy().select_prune(log.messages()) == ["c1"]


def test_results_no_bigger_than_the_placeholder_are_never_candidates() -> None:
    log = Log()
    log.user()
    log.call("tiny", chars=PLACEHOLDER_TOKENS * 4)
    log.call("old", chars=PLACEHOLDER_TOKENS * 4 + 1)
    log.call("new", chars=160_000)  # exactly 40,000 tokens: protected, and nothing older is
    assert KhaelorStrategy().select_prune(log.messages()) == ["old"]


def test_a_newest_result_above_the_window_is_itself_a_candidate_as_in_the_seed() -> None:
    # compaction.ts breaks out of the protection loop before protecting the result that crosses the line,
    # so a single newest result above 40,000 tokens protects nothing, not even itself.
    log = Log()
    log.user()
    log.call("old", chars=400)
    log.call("huge", chars=160_004)
    assert KhaelorStrategy().select_prune(log.messages()) == ["old", "huge"]


def test_prune_skips_results_already_pruned_or_inside_an_earlier_compaction() -> None:
    log = Log()
    log.user()
    log.text()
    log.call("compacted", chars=10_000)
    log.call("pruned", chars=10_000)
    log.call("left", chars=10_000)
    log.add("context.pruned", toolUseIds=["pruned"], placeholder=PRUNE_PLACEHOLDER, tokensReclaimedEstimate=1)
    log.add(
        "context.compacted",
        checkpointYaml="objective: x\n",
        cut={"fromSeq": 2, "toSeq": 4},
        trigger="proactive-token-budget",
        tokensBefore=1,
        summaryModel="h",
    )
    log.call("new", chars=160_000)
    assert KhaelorStrategy().select_prune(log.messages()) == ["left"]


# ───────────────────────────── cut selection ─────────────────────────────


def test_nothing_to_compact_without_a_user_message_or_a_middle() -> None:
    no_user = Log()
    no_user.text(100_000)
    assert KhaelorStrategy().select_cut(no_user.messages()) is None
    small = Log()
    small.user()
    small.call("c1")
    small.text()
    assert KhaelorStrategy().select_cut(small.messages()) is None  # all of it is the 20k-token tail


def test_the_latest_user_message_and_everything_after_it_stay() -> None:
    log = Log()
    head = log.user("objective")
    first = log.text()
    log.request("c1")
    last = log.result("c1")
    latest = log.user("next")
    log.text(100_000)  # 25,000 tokens: the token floor alone would keep only this
    messages = log.messages()
    cut = KhaelorStrategy().select_cut(messages)
    assert cut is not None
    assert (cut.start, cut.end) == (index_of(messages, first), index_of(messages, last) + 1)
    assert index_of(messages, head) < cut.start and index_of(messages, latest) == cut.end
    assert f"fromSeq {first} toSeq {last}" in cut.reason


def test_the_tail_keeps_at_least_20k_tokens_and_to_seq_walks_down_to_a_pairing_safe_cut() -> None:
    log = Log()
    log.user()
    first = log.text()
    log.request("c1")  # its result opens the 20k-token tail, so the cut must stop before the call
    log.result("c1", chars=48_000)
    log.call("c2", chars=48_000)
    log.text()
    messages = log.messages()
    cut = KhaelorStrategy().select_cut(messages)
    assert cut is not None
    assert (cut.start, cut.end) == (index_of(messages, first), index_of(messages, first) + 1)


def test_parallel_calls_keep_the_cut_before_the_first_unanswered_call() -> None:
    log = Log()
    log.user()
    first = log.text()
    log.request("a")
    log.request("b")
    log.result("a")
    log.result("b", chars=80_000)  # the tail starts here
    log.text()
    messages = log.messages()
    cut = KhaelorStrategy().select_cut(messages)
    assert cut is not None and cut.end == index_of(messages, first) + 1


def test_a_call_without_a_result_is_never_inside_the_cut() -> None:
    log = Log()
    log.user()
    log.text()
    log.call("done")
    answered = log.text()
    log.request("interrupted")
    log.text()
    log.text(80_000)
    messages = log.messages()
    cut = KhaelorStrategy().select_cut(messages)
    assert cut is not None and cut.end == index_of(messages, answered) + 1


def test_a_new_cut_restarts_at_the_first_event_and_takes_the_old_range_with_its_checkpoint() -> None:
    log = Log()
    log.user()
    first = log.text()
    log.call("old", chars=400)
    log.text()
    checkpoint = log.add(
        "context.compacted",
        checkpointYaml="objective: earlier work\n",
        cut={"fromSeq": 2, "toSeq": 4},
        trigger="proactive-token-budget",
        tokensBefore=1,
        summaryModel="h",
    )
    log.call("mid")
    log.text(80_000)
    messages = log.messages()
    cut = KhaelorStrategy().select_cut(messages)
    assert cut is not None
    assert cut.start == index_of(messages, first)  # the seed's cut walks every conversation event
    assert cut.start < index_of(messages, checkpoint) < cut.end
    transcript = KhaelorStrategy().render_transcript(KhaelorStrategy().extract_middle(messages, cut))
    assert "[user]\nobjective: earlier work" in transcript
    # buildConversation (assumed the LlmHistory projection) lets the checkpoint stand for its own cut.
    assert "[tool_use bash old]" not in transcript


# ───────────────────────────── hand-placed cuts ─────────────────────────────


def hand_log() -> tuple[list[Message], dict[str, int]]:
    log = Log()
    seqs = {"head": log.user(), "text": log.text()}
    seqs["request"] = log.request("c1")
    seqs["result"] = log.result("c1")
    seqs["text2"] = log.text()
    seqs["tail"] = log.text(80_000)
    messages = log.messages()
    return messages, {name: index_of(messages, seq) for name, seq in seqs.items()}


@pytest.mark.parametrize(
    ("first", "last", "why"),
    [
        ("text", "request", "pairing-safe"),  # ends between a call and its result
        ("result", "text2", "pairing-safe"),  # starts between a call and its result
    ],
)
def test_check_cut_refuses_with_a_reason(first: str, last: str, why: str) -> None:
    messages, at = hand_log()
    with pytest.raises(CutRefused, match=why):
        KhaelorStrategy().check_cut(messages, Cut(start=at[first], end=at[last] + 1, first_kept=0))


def test_check_cut_accepts_a_safe_cut_and_the_selected_one() -> None:
    messages, at = hand_log()
    strategy = KhaelorStrategy()
    strategy.check_cut(messages, Cut(start=at["text"], end=at["text2"], first_kept=0))
    # compressEvents refuses only what is not pairing-safe: a hand cut may take the head or the tail.
    strategy.check_cut(messages, Cut(start=at["head"], end=at["text2"] + 1, first_kept=0))
    strategy.check_cut(messages, Cut(start=at["text"], end=at["tail"] + 1, first_kept=0))
    selected = strategy.select_cut(messages)
    assert selected is not None
    strategy.check_cut(messages, selected)
    with pytest.raises(CutRefused, match="empty"):
        strategy.check_cut(messages, Cut(start=2, end=2, first_kept=0))


# ───────────────────────────── middle and transcript ─────────────────────────────


def test_the_transcript_renders_roles_tools_errors_and_omits_thinking() -> None:
    log = Log()
    log.add("model.text-block-completed", text="hello")
    log.add("model.thinking-block-completed", thinking="SECRET THOUGHT")
    log.add("tool.requested", toolUseId="t1", name="read_file", input={"path": "a.py"})
    log.add("tool.failed", toolUseId="t1", modelText="no such file")
    log.add("user.steering-queued", steeringId="s", text="be quick")
    log.add("user.steering-injected", steeringId="s")
    log.add("process.started", processId="p", command="make")
    transcript = KhaelorStrategy().render_transcript(log.messages())
    assert transcript == "\n\n".join(
        [
            "[assistant]\nhello",
            '[tool_use read_file t1]\n{"path":"a.py"}',
            "[tool_result t1 (error)]\nno such file",
            "[user]\nbe quick",
        ]
    )


def test_the_middle_shows_placeholders_for_prunes_recorded_anywhere_and_decided_now() -> None:
    log = Log()
    log.user()
    log.call("early", chars=500)
    log.call("now", chars=500)
    log.text(80_000)
    log.add("context.pruned", toolUseIds=["early"], placeholder="[custom placeholder]", tokensReclaimedEstimate=1)
    messages = log.messages()
    strategy = KhaelorStrategy()
    cut = strategy.select_cut(messages)
    assert cut is not None
    transcript = strategy.render_transcript(strategy.extract_middle(messages, cut, also_pruned=["now"]))
    assert "[tool_result early]\n[custom placeholder]" in transcript  # the placeholder the event recorded
    assert f"[tool_result now]\n{PRUNE_PLACEHOLDER}" in transcript
    assert "r" * 500 not in transcript


def test_each_block_is_capped_at_4000_chars() -> None:
    log = Log()
    log.add("model.text-block-completed", text="a" * 4_000)
    log.add("model.text-block-completed", text="b" * 4_001)
    first, second = KhaelorStrategy().render_transcript(log.messages()).split("\n\n", 1)
    assert first == "[assistant]\n" + "a" * 4_000
    assert second == "[assistant]\n" + "b" * 4_000 + BLOCK_TRUNCATION_SUFFIX


def test_the_transcript_is_capped_at_300k_keeping_the_first_40_and_last_50_percent() -> None:
    log = Log()
    for n in range(100):
        log.add("model.text-block-completed", text=f"{n:04d}" * 1_000)  # 4,000 chars each, 400k in all
    messages = log.messages()
    whole = KhaelorStrategy(KhaelorParams(max_transcript_chars=10**9)).render_transcript(messages)
    capped = KhaelorStrategy().render_transcript(messages)
    assert len(whole) > 300_000
    assert capped == whole[:120_000] + TRANSCRIPT_TRUNCATION_MARKER + whole[-150_000:]


# ───────────────────────────── summary parsing and the checkpoint ─────────────────────────────

CHECKPOINT = """\
objective: Ship it.
completed:
  - wrote the parser
current_state: tests pass
important_files:
  - path: a.py
    reason: the parser
changes: []
failed_attempts: []
decisions:
  - keep it small
next_steps:
  - review
"""


@pytest.mark.parametrize(
    "raw",
    [
        CHECKPOINT,
        f"```yaml\n{CHECKPOINT}```",
        f"```\n{CHECKPOINT}\n```\n",
        f"Here is the checkpoint you asked for.\n\n{CHECKPOINT}",
        f"Sure:\n```\n{CHECKPOINT}```",
    ],
    ids=["plain", "fenced-yaml", "fenced", "leading-prose", "prose-then-fence"],
)
def test_lenient_parse_strips_fences_and_leading_prose(raw: str) -> None:
    checkpoint = parse_checkpoint_lenient(raw)
    assert checkpoint.objective == "Ship it."
    assert checkpoint.completed == ["wrote the parser"]
    assert checkpoint.current_state == "tests pass"
    assert [(f.path, f.reason) for f in checkpoint.important_files] == [("a.py", "the parser")]
    assert checkpoint.changes == [] and checkpoint.failed_attempts == []
    assert checkpoint.decisions == ["keep it small"]
    assert checkpoint.next_steps == ["review"]


def test_an_unparseable_summary_becomes_the_current_state() -> None:
    raw = "  I could not produce a checkpoint.\nThe work is half done.  "
    checkpoint = parse_checkpoint_lenient(raw)
    assert checkpoint.current_state == raw.strip()
    assert checkpoint.objective == "" and checkpoint.next_steps == []
    parsed_back = parse_checkpoint_lenient(serialize_checkpoint(checkpoint))
    assert parsed_back.current_state == raw.strip()  # a multi-line state survives the YAML-like form


def test_the_samples_checkpoint_survives_a_parse_and_serialize_round_trip() -> None:
    with SAMPLE.open("rb") as f:
        compacted = [json.loads(line) for line in f if b'"context.compacted"' in line]
    yaml = compacted[0]["payload"]["checkpointYaml"]
    assert serialize_checkpoint(parse_checkpoint_lenient(yaml)) == yaml


def test_empty_sections_serialize_as_empty_lists() -> None:
    text = serialize_checkpoint(Checkpoint(objective="x"))
    for key in ("completed", "important_files", "changes", "failed_attempts", "decisions", "next_steps"):
        assert f"\n{key}: []\n" in text
    assert text.endswith("running_processes: []\n")


def test_running_processes_come_from_process_events() -> None:
    log = Log()
    log.add("process.started", processId="p1", command="pytest")
    log.add("process.started", processId="p2", command="npm run dev")
    log.add("process.exited", processId="p1", exitCode=0)
    assert collect_running_processes(log.messages()) == [CheckpointProcess(id="p2", command="npm run dev")]


def test_the_samples_running_processes_match_its_checkpoint() -> None:
    with SAMPLE.open("rb") as f:
        records = list(KhaelorParser().parse(f))
    messages = [r for r in records if isinstance(r, Message)]
    compacted = next(m for m in messages if m.raw_type == "context.compacted")
    before = [m for m in messages if m.data["seq"] < compacted.data["seq"]]
    recorded = parse_checkpoint_lenient(compacted.text).running_processes
    assert collect_running_processes(before) == recorded


def test_the_compaction_payload_has_the_seeds_shape() -> None:
    messages, at = hand_log()
    strategy = KhaelorStrategy()
    cut = Cut(start=at["text"], end=at["text2"], first_kept=0)
    payload = strategy.compaction_payload(
        CHECKPOINT, messages=messages, cut=cut, trigger="user-command", tokens_before=123, summary_model="h"
    )
    assert payload["cut"] == {"fromSeq": messages[at["text"]].data["seq"], "toSeq": messages[at["result"]].data["seq"]}
    assert (payload["trigger"], payload["tokensBefore"], payload["summaryModel"]) == ("user-command", 123, "h")
    assert payload["checkpointYaml"] == CHECKPOINT + "running_processes: []\n"
    assert "Transcript of the conversation segment to checkpoint:\n\nT\n\n" in strategy.summary_user_text("T")


# ───────────────────────────── the decision ─────────────────────────────


def test_decide_prunes_first_and_compacts_only_over_the_trigger() -> None:
    log = Log()
    log.user()
    for n in range(1, 6):
        log.call(f"c{n}", chars=48_000)
    messages = log.messages()
    strategy = KhaelorStrategy(KhaelorParams(context_window=100_000))  # trigger at 80,000
    quiet = strategy.decide(messages, context_tokens=70_000)
    assert quiet.prune == ["c1", "c2"] and quiet.should_compact is False
    loud = strategy.decide(messages, context_tokens=150_000)
    assert loud.should_compact is True and loud.cut is not None
    assert loud.tokens_after_estimate < 150_000
    assert loud.details["threshold"] == 80_000 and loud.details["threshold_is_assumption"] is True


# ───────────────────────────── properties over generated sessions ─────────────────────────────

SMALL = KhaelorParams(protect_recent_tool_tokens=400, protect_tail_tokens=200)

step = st.one_of(
    st.tuples(st.just("text"), st.integers(0, 600)),
    st.tuples(st.just("thinking"), st.integers(0, 600)),
    st.tuples(st.just("user"), st.integers(0, 200)),
    st.tuples(st.just("call"), st.integers(0, 900)),
    st.tuples(st.just("parallel"), st.integers(0, 900)),
    st.tuples(st.just("unanswered"), st.integers(0, 10)),
    st.tuples(st.just("steering"), st.integers(0, 100)),
    st.tuples(st.just("process"), st.integers(0, 3)),
    st.tuples(st.just("prune"), st.integers(0, 10)),
    st.tuples(st.just("compact"), st.integers(0, 0)),
)


def build(steps: list[tuple[str, int]], *, leading_user: bool) -> Log:
    log = Log()
    calls: list[str] = []
    if leading_user:
        log.user()
    for n, (kind, size) in enumerate(steps):
        tool_id = f"t{n}"
        if kind == "text":
            log.text(size)
        elif kind == "thinking":
            log.add("model.thinking-block-completed", thinking="h" * size)
        elif kind == "user":
            log.user("u" * size)
        elif kind == "call":
            log.call(tool_id, size, status=("completed", "failed", "cancelled")[size % 3])
            calls.append(tool_id)
        elif kind == "parallel":
            log.request(f"{tool_id}a")
            log.request(f"{tool_id}b")
            log.result(f"{tool_id}b", size)
            log.text(size // 3)
            log.result(f"{tool_id}a", size // 2)
            calls += [f"{tool_id}a", f"{tool_id}b"]
        elif kind == "unanswered":
            log.request(tool_id)
        elif kind == "steering":
            log.add("user.steering-queued", steeringId=tool_id, text="s" * size)
            log.add("user.steering-injected", steeringId=tool_id)
        elif kind == "process":
            event = "process.started" if size % 2 == 0 else "process.exited"
            log.add(event, processId=f"p{size // 2}", command="make")
        elif kind == "prune" and calls:
            ids = calls[: size % (len(calls) + 1)]
            log.add("context.pruned", toolUseIds=ids, placeholder=PRUNE_PLACEHOLDER, tokensReclaimedEstimate=0)
        elif kind == "compact":
            cut = KhaelorStrategy(SMALL).select_cut(log.messages())
            if cut is not None:
                messages = log.messages()
                log.add(
                    "context.compacted",
                    checkpointYaml="objective: so far\n",
                    cut={"fromSeq": messages[cut.start].data["seq"], "toSeq": messages[cut.end - 1].data["seq"]},
                    trigger="proactive-token-budget",
                    tokensBefore=0,
                    summaryModel="h",
                )
    return log


def compacted_ranges(messages: list[Message]) -> list[tuple[int, int]]:
    cuts = [m.data["payload"]["cut"] for m in messages if m.raw_type == "context.compacted"]
    return [(c["fromSeq"], c["toSeq"]) for c in cuts]


def consumed(seq: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= seq <= b for a, b in ranges)


def tool_id(message: Message) -> str:
    return str(message.data["payload"]["toolUseId"])


# Long, tool-heavy sessions, mostly opening with the objective, so that most examples have a cut and a prune.
heavy_step = st.one_of(step, st.tuples(st.sampled_from(["call", "parallel", "text"]), st.integers(100, 2_400)))
sessions = st.builds(
    build, st.lists(heavy_step, min_size=6, max_size=40), leading_user=st.sampled_from([True, True, True, False])
)
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(log=sessions)
def test_every_selected_cut_is_pairing_safe(log: Log) -> None:
    messages = log.messages()
    cut = KhaelorStrategy(SMALL).select_cut(messages)
    if cut is None:
        return
    results = {tool_id(m): i for i, m in enumerate(messages) if m.raw_type in RESULT_TYPES}
    requests = {tool_id(m): i for i, m in enumerate(messages) if m.raw_type == "tool.requested"}
    for i in range(cut.start, cut.end):
        if messages[i].raw_type == "tool.requested":
            assert cut.start <= results.get(tool_id(messages[i]), -1) < cut.end
        if messages[i].raw_type in RESULT_TYPES:
            assert cut.start <= requests[tool_id(messages[i])] < cut.end
    KhaelorStrategy(SMALL).check_cut(messages, cut)  # the strategy accepts its own cut


@PROPERTY_SETTINGS
@given(log=sessions)
def test_head_and_tail_are_never_inside_the_cut(log: Log) -> None:
    messages = log.messages()
    cut = KhaelorStrategy(SMALL).select_cut(messages)
    if cut is None:
        return
    users = [i for i, m in enumerate(messages) if m.raw_type == "user.message-created"]
    assert users and users[0] < cut.start
    if len(users) > 1:  # the latest user message, when it is not the head, and all after it stay
        assert users[-1] >= cut.end
    tail_tokens = 0  # the seed prices every conversation event by its raw text, pruned or compacted
    for m in messages[cut.end :]:
        if m.raw_type not in CONVERSATION or m.raw_type == "user.steering-injected":
            continue
        tail_tokens += math.ceil(len(m.blocks[0].text) / 4)
    assert tail_tokens >= SMALL.protect_tail_tokens


@PROPERTY_SETTINGS
@given(log=sessions)
def test_prune_never_touches_the_newest_protected_tool_output(log: Log) -> None:
    messages = log.messages()
    selected = KhaelorStrategy(SMALL).select_prune(messages)
    ranges = compacted_ranges(messages)
    already = {i for m in messages if m.raw_type == "context.pruned" for i in m.data["payload"]["toolUseIds"]}
    eligible = [
        (tool_id(m), math.ceil(len(m.blocks[0].text) / 4))
        for m in messages
        if m.raw_type in RESULT_TYPES and tool_id(m) not in already and not consumed(m.data["seq"], ranges)
    ]
    newer_tokens = 0  # tool output from this result to the newest, inclusive
    for result_id, tokens in reversed(eligible):
        newer_tokens += tokens
        if newer_tokens <= SMALL.protect_recent_tool_tokens:
            assert result_id not in selected
        elif tokens > math.ceil(len(PRUNE_PLACEHOLDER) / 4):
            assert result_id in selected
    assert not already & set(selected)


@PROPERTY_SETTINGS
@given(log=sessions, bounds=st.tuples(st.integers(0, 120), st.integers(0, 120)))
def test_every_accepted_hand_cut_is_pairing_safe(log: Log, bounds: tuple[int, int]) -> None:
    messages = log.messages()
    start, end = sorted(bounds)
    strategy = KhaelorStrategy(SMALL)
    try:
        strategy.check_cut(messages, Cut(start=start, end=end, first_kept=0))
    except CutRefused as refused:
        assert str(refused)  # always says why
        return
    inside = [i for i in range(start, end) if messages[i].raw_type in CONVERSATION]
    assert inside
    calls = {tool_id(messages[i]) for i in inside if messages[i].raw_type == "tool.requested"}
    answers = {tool_id(messages[i]) for i in inside if messages[i].raw_type in RESULT_TYPES}
    assert calls == answers & calls  # every call inside has its result inside
    requested_anywhere = {tool_id(m) for m in messages if m.raw_type == "tool.requested"}
    assert answers & requested_anywhere <= calls  # and no result inside lost its call


def test_the_generated_sessions_exercise_cuts_and_prunes() -> None:
    # Guard against a generator that never produces a cut or a prune (the properties would pass vacuously).
    log = build([("call", 900)] * 3 + [("text", 600)] * 3 + [("compact", 0), ("call", 900)] * 2, leading_user=True)
    messages = log.messages()
    assert KhaelorStrategy(SMALL).select_prune(messages)
    assert any(m.raw_type == "context.compacted" for m in messages)


def test_the_checkpoint_reply_joins_completed_text_blocks_with_a_newline() -> None:
    # compaction.ts summarizeToCheckpointText: completedBlocks.join("\n"), so a checkpoint split across blocks
    # still parses key by key.
    messages, at = hand_log()
    strategy = KhaelorStrategy()
    plan = strategy.summarizer_plan(
        messages, Cut(start=at["text"], end=at["text2"], first_kept=0), prune=[], by_hand=True
    )
    (request,) = plan.requests
    server = start_server()
    try:
        server.script(ok_blocks("objective: migrate the ledger", "next_steps:\n  - run the tests"))
        with AnthropicSummarizer(api_key="sk-ant-test-key", base_url=server.url, sleep=lambda _: None) as summarizer:
            reply = summarizer.summarize(request.summary_request(model="aux")).text
    finally:
        server.close()
    assert reply == "objective: migrate the ledger\nnext_steps:\n  - run the tests"
    checkpoint = parse_checkpoint_lenient(reply)
    assert (checkpoint.objective, checkpoint.next_steps) == ("migrate the ledger", ["run the tests"])


# ───────────────────────────── offline checkpoint ─────────────────────────────

NUMBERED_CODE_LINE = re.compile(r"^\s*(?:-\s*)?\d+(?:→|\t)", re.MULTILINE)


def offline_run(messages: list[Message], strategy: KhaelorStrategy, cut: Cut) -> str:
    """What a run without an API key stores: the offline summarizer's reply through KHAELOR's own assembly."""
    plan = strategy.summarizer_plan(messages, cut, prune=strategy.select_prune(messages), by_hand=False)
    (request,) = plan.requests
    reply = OfflineSummarizer().summarize(request.summary_request(model="aux")).text
    return strategy.final_summary({"checkpoint": reply}, plan=plan, messages=messages)


def test_offline_checkpoints_on_every_prefix_of_the_sample_are_clean_checkpoint_yaml() -> None:
    with SAMPLE.open("rb") as f:
        messages = [r for r in KhaelorParser().parse(f) if isinstance(r, Message)]
    head = next(m.text for m in messages if m.raw_type == "user.message-created")
    checked, with_files = 0, 0
    for params in (KhaelorParams(), KhaelorParams(protect_tail_tokens=50)):
        strategy = KhaelorStrategy(params)
        for n in range(1, len(messages) + 1):
            cut = strategy.select_cut(messages[:n])
            if cut is None:
                continue
            checkpoint_yaml = offline_run(messages[:n], strategy, cut)
            parsed = parse_checkpoint(checkpoint_yaml)
            assert parsed is not None and parsed.objective == head
            with_files += bool(parsed.important_files and parsed.current_state)
            assert "/dev/" not in checkpoint_yaml
            assert "<" not in checkpoint_yaml and "[]`" not in checkpoint_yaml  # nothing of the prompt's template
            assert not NUMBERED_CODE_LINE.search(checkpoint_yaml)
            checked += 1
    assert checked > 10 and with_files > 10


def test_the_offline_checkpoint_takes_only_requests_files_errors_and_the_last_step() -> None:
    log = Log()
    log.user("Port the parser to Rust")
    log.add("tool.requested", toolUseId="r1", name="read_file", input={"path": "src/parser.py"})
    log.add("tool.completed", toolUseId="r1", modelText="29→def parse(text):\n30→    return text")
    log.add("tool.requested", toolUseId="w1", name="write_file", input={"path": "/dev/null", "content": "x"})
    log.add("tool.completed", toolUseId="w1", modelText="ok")
    log.add("tool.requested", toolUseId="e1", name="edit_file", input={"path": "src/lib.rs", "old": "a", "new": "b"})
    log.add("tool.completed", toolUseId="e1", modelText="Applied 1 edit to src/lib.rs")
    log.add("tool.requested", toolUseId="b1", name="bash", input={"command": "cargo test 2>/dev/null"})
    log.add("tool.failed", toolUseId="b1", modelText="12\terror[E0425]\nerror: could not compile `parser`")
    log.add("user.steering-injected", text="also keep the Python API")
    log.text(40)
    log.text(90_000)  # the protected tail
    messages = log.messages()
    strategy = KhaelorStrategy()
    cut = strategy.select_cut(messages)
    assert cut is not None
    parsed = parse_checkpoint(offline_run(messages, strategy, cut))
    assert parsed is not None
    assert parsed.objective == "Port the parser to Rust"
    assert [(f.path, f.reason) for f in parsed.important_files] == [
        ("src/parser.py", "read by read_file"),
        ("src/lib.rs", "written by edit_file"),
    ]
    assert parsed.changes == parsed.completed == ["edit_file src/lib.rs"]
    assert parsed.failed_attempts == ["bash cargo test failed: error: could not compile `parser`"]
    assert parsed.current_state == "t" * 40
    assert parsed.next_steps == ["Continue with the latest user request: also keep the Python API"]


def test_a_view_with_a_prune_applied_prices_as_a_view_built_with_it() -> None:
    """decide() prices its middle on the current view with the prune applied (``_View.with_pruned``), not on a
    view rebuilt from every message: both must give every event the same estimate."""
    from compaction.strategies.khaelor import _View

    log = Log()
    log.user()
    for n in range(1, 6):
        log.call(f"c{n}", chars=48_000)
    messages = log.messages()
    built = _View(messages, also_pruned=["c1", "c2"])
    applied = _View(messages).with_pruned(["c1", "c2"])
    assert [built.estimate(i) for i in built.conversation] == [applied.estimate(i) for i in applied.conversation]
    assert built.estimate(built.result_index["c1"]) == estimate_tokens(PRUNE_PLACEHOLDER)
    assert not applied.exact  # never grown into a longer view


@PROPERTY_SETTINGS
@given(log=sessions)
def test_a_view_grown_event_by_event_prices_its_context_as_a_view_built_whole(log: Log) -> None:
    """A replay grows one view call by call, through prunes and compactions, keeping its context total and its
    text estimates as it goes (``_View.context_total``, ``_Estimates``): every prefix must price as a view built
    from it alone."""
    from compaction.strategies.khaelor import _View

    messages = log.messages()
    strategy = KhaelorStrategy(SMALL)
    for end in range(1, len(messages) + 1):
        grown = strategy._view(messages[:end])
        built = _View(messages[:end])
        assert [grown.estimate(i) for i in grown.conversation] == [built.estimate(i) for i in built.conversation]
        assert grown.context_total() == sum(built.estimate(i) for i in built.conversation)
        assert strategy.context_estimate(messages[:end]) == grown.context_total()


def test_a_view_after_a_replayed_compaction_prices_its_messages_afresh() -> None:
    """After a compaction the replay's view is a new list (head, checkpoint, tail) holding the same message objects:
    the estimates kept per message serve it, and its total is that of a view built from it alone."""
    from compaction.strategies.khaelor import _View

    log = Log()
    log.user()
    for n in range(1, 8):
        log.call(f"c{n}", chars=4_000)
        log.text(400)
    log.user("go on")
    messages = log.messages()
    strategy = KhaelorStrategy(SMALL)
    for end in range(1, len(messages) + 1):
        strategy._view(messages[:end])
    cut = strategy.select_cut(messages)
    assert cut is not None
    rules = strategy.replay_rules(
        thresholds=strategy.thresholds(model=None, version=None), summary_tokens=50, version=None
    )
    summary = rules.summary_message(messages, cut)
    view, _ = rules.after_compaction(messages, list(range(len(messages))), cut, summary)
    assert strategy.context_estimate(view) == _View(view).context_total()
    assert strategy.context_estimate(view) < strategy.context_estimate(messages)


def test_another_agents_record_is_admitted_as_one_event_per_block_with_its_fields_kept() -> None:
    """``admit`` builds each event field by field (faster than ``dataclasses.replace``): it must be what
    ``replace`` gives, every field but the block, the type and the data kept."""
    from dataclasses import fields, replace

    from compaction.transcript import Block, Usage

    strategy = KhaelorStrategy(SMALL)
    rules = strategy.replay_rules(
        thresholds=strategy.thresholds(model=None, version=None), summary_tokens=50, version=None
    )
    record = Message(
        line=7,
        role="assistant",
        kind="assistant",
        agent="main",
        blocks=[Block("text", "hello"), Block("tool_use", '{"command": "ls"}', tool_id="t1", tool_name="Bash")],
        uuid="u7",
        parent_uuid="u6",
        timestamp="2025-01-02T03:04:05.678Z",
        model="claude-x",
        call_key="msg_1",
        usage=Usage(1, 2, 3, 4),
        raw_type="assistant",
        data={"requestId": "r1"},
        raw="{}",
    )
    admitted = rules.admit(record)
    assert [m.raw_type for m in admitted] == ["model.text-block-completed", "tool.requested"]
    for n, (event, block) in enumerate(zip(admitted, record.blocks, strict=True), start=1):
        expected = replace(
            record,
            blocks=[block],
            raw_type=event.raw_type,
            data={"seq": n, "payload": {"toolUseId": block.tool_id} if block.tool_id else {}},
        )
        assert [getattr(event, f.name) for f in fields(Message)] == [getattr(expected, f.name) for f in fields(Message)]


# ───────────────────────────── a preview after a real compaction ─────────────────────────────
#
# compaction.ts selectCompactionCut walks every conversation event of the log, those inside an earlier
# compaction's cut included (only selectPruneCandidates skips them, inAnyRange), and counts the checkpoint
# (context.compacted) as a conversation event priced by its checkpointYaml. The oracle test keeps the cut the
# seed's; the preview must price it by what is still in the context: a replaced event is already gone.


def compacted_log(*, tail_chars: int) -> tuple[list[Message], dict[str, int]]:
    """Head, an old call a real compaction replaced (10,000 raw tokens), its checkpoint, then live work."""
    log = Log()
    seqs = {"head": log.user()}
    seqs["first"] = log.text()
    log.call("old", chars=40_000)
    log.text()
    seqs["checkpoint"] = log.add(
        "context.compacted",
        checkpointYaml="objective: earlier work\n",
        cut={"fromSeq": seqs["first"], "toSeq": seqs["first"] + 3},
        trigger="proactive-token-budget",
        tokensBefore=10_020,
        summaryModel="h",
    )
    seqs["mid"] = log.call("mid", chars=8_000)
    log.text(tail_chars)
    return log.messages(), seqs


def plan_of(messages: list[Message], params: KhaelorParams, **kwargs: Any) -> PreviewPlan:
    return plan_preview(messages, strategy=KhaelorStrategy(params), **kwargs)


def replaced_positions(messages: list[Message]) -> set[int]:
    ranges = compacted_ranges(messages)
    return {i for i, m in enumerate(messages) if m.raw_type in CONVERSATION and consumed(m.data["seq"], ranges)}


def assert_numbers_agree(plan: PreviewPlan) -> None:
    """Segments, tokens before and tokens after say the same thing: only what is in the context counts."""
    strategy = plan.strategy
    assert isinstance(strategy, KhaelorStrategy)
    assert plan.estimates == strategy.context_estimates(plan.messages)
    assert sum(plan.estimates) == strategy.context_estimate(plan.messages)
    assert all(plan.estimates[i] == 0 for i in replaced_positions(plan.messages))
    cut = plan.applied_cut
    if cut is not None:
        live = sum(plan.estimates[cut.start : cut.end])
        shown = plan.cut_json(cut, by_hand=plan.by_hand, refused="")
        assert shown is not None and shown["tokens_in_context"] == live
        if not plan.decision.prune:
            assert plan.tokens_after_estimate == plan.tokens_before - live
    assert 0 <= plan.tokens_after_estimate <= plan.tokens_before


def test_a_cut_taking_the_old_range_with_its_checkpoint_subtracts_only_the_checkpoint() -> None:
    messages, seqs = compacted_log(tail_chars=8_000)
    params = KhaelorParams(context_window=4_000, protect_tail_tokens=3_000)  # trigger at 3,200
    plan = plan_of(messages, params)
    cut = plan.auto_cut
    assert cut is not None and plan.decision.should_compact
    # The seed's cut: from the first event after the head, over the old range and its checkpoint.
    assert cut.start == index_of(messages, seqs["first"]) < index_of(messages, seqs["checkpoint"]) < cut.end
    assert_numbers_agree(plan)
    checkpoint_tokens = estimate_tokens("objective: earlier work\n")
    assert sum(plan.estimates[cut.start : cut.end]) == checkpoint_tokens  # not the 10,000 replaced tokens
    assert plan.tokens_after_estimate == plan.tokens_before - checkpoint_tokens > 0
    assert plan.decision.details["cut"]["middle_tokens"] == checkpoint_tokens
    assert plan.decision.details["cut"]["replaced_events"] == 4


def test_a_cut_inside_the_replaced_range_reclaims_nothing_and_says_why() -> None:
    # A larger protected tail walks back (pricing every event raw, as the seed does) into the replaced range: the
    # seed's cut is then made of replaced events only, and compacting it takes nothing out of the context.
    messages, seqs = compacted_log(tail_chars=8_000)
    params = KhaelorParams(context_window=4_000, protect_tail_tokens=4_010)
    plan = plan_of(messages, params)
    cut = plan.auto_cut
    assert cut is not None and plan.decision.should_compact
    assert all(i in replaced_positions(messages) for i in range(cut.start, cut.end) if messages[i].raw_type)
    assert_numbers_agree(plan)
    assert sum(plan.estimates[cut.start : cut.end]) == 0
    assert plan.tokens_after_estimate == plan.tokens_before > 0  # before the fix: clamped to 0
    assert "already replaced by an earlier compaction" in plan.decision.reason


def test_a_hand_cut_over_replaced_and_live_events_subtracts_only_the_live_ones() -> None:
    messages, seqs = compacted_log(tail_chars=8_000)
    params = KhaelorParams(context_window=4_000, protect_tail_tokens=3_000)
    # After call 1 (the old call's request, replaced) to after call 4 (the mid call's result, live).
    plan = plan_of(messages, params, cut_start=1, cut_end=4)
    cut = plan.cut
    assert plan.by_hand and not plan.refused and cut is not None
    assert (messages[cut.start].data["seq"], messages[cut.end - 1].data["seq"]) == (seqs["first"] + 1, seqs["mid"])
    assert_numbers_agree(plan)
    mid_tokens = sum(plan.strategy.estimate(m) for m in messages[cut.end - 2 : cut.end])
    live = estimate_tokens("objective: earlier work\n") + mid_tokens
    assert sum(plan.estimates[cut.start : cut.end]) == live
    assert plan.tokens_after_estimate == plan.tokens_before - live > 0


def test_the_samples_preview_after_its_real_compaction_counts_only_the_live_context() -> None:
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    messages = [
        r for r in KhaelorParser().parse(lines) if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")
    ]
    points = after_calls(messages)
    compacted_at = index_of(messages, 43)  # context.compacted, cut fromSeq 4 toSeq 35
    strategy = KhaelorStrategy(KhaelorParams(context_window=200_000))
    after = []
    for point in points:
        plan = plan_preview(messages, strategy=strategy, after_call=point.call, points=points)
        assert_numbers_agree(plan)
        if point.position > compacted_at:
            after.append(plan)
    assert after
    for plan in after:
        cut = plan.applied_cut
        assert cut is not None
        # The seed's cut (the oracle test checks it) lies inside the range the real compaction replaced...
        assert 4 <= messages[cut.start].data["seq"] <= messages[cut.end - 1].data["seq"] <= 35
        # ...so it holds nothing of the context: tokens after is tokens before, never a clamped 0.
        assert sum(plan.estimates[cut.start : cut.end]) == 0
        assert plan.tokens_after_estimate == plan.tokens_before > 0
    # Numbers the issue reported (issue 32): after calls 24 and 28 the context is 269 and 6,533 tokens.
    by_call = {plan.after_call: plan for plan in after}
    assert (by_call[24].tokens_before, by_call[24].tokens_after_estimate) == (269, 269)
    assert (by_call[28].tokens_before, by_call[28].tokens_after_estimate) == (6_533, 6_533)


def test_a_strategy_without_its_own_context_estimates_keeps_its_estimate_of_every_message() -> None:
    messages, _ = compacted_log(tail_chars=100)
    other = ClaudeCodeStrategy()
    assert not hasattr(other, "context_estimates")
    assert context_estimates(other, messages) == [other.estimate(m) for m in messages]
