"""Issue 33: a what-if that cannot contradict itself, and Claude Code's rules at both sides of their versions.

The samples are parsed once per process (``diagnose_samples.claude_sample`` is cached).
Sections (§) refer to `docs/compaction/claude-code.md`.
"""

from __future__ import annotations

import pytest

from compaction.formats.context_records import is_compaction_record
from compaction.preview import plan_preview
from compaction.replay import api_steps, replay
from compaction.strategies.claude_code import (
    POST_COMPACT_MAX_TOKENS_PER_FILE,
    POST_COMPACT_MAX_TOKENS_PER_SKILL,
    SKILLS_REATTACHED_SINCE,
    SM_COMPACT_REMOVED,
    SM_COMPACT_SINCE,
    THRASH_STOP_SINCE,
    TIME_BASED_MC_SINCE,
    ClaudeCodeParams,
    ClaudeCodeStrategy,
    post_compact_attachments,
)
from compaction.strategies.registry import build_strategy
from compaction.transcript import Block, Message, Usage
from tests.compaction.diagnose_samples import claude_sample

SMALL = "entirecli_a6e4c2a0fbd1-0_full.jsonl"  # 12 calls, one real auto compaction (2.0.76)
LONG = "entirecli_a5d8ec9bae67-0_full.jsonl"  # 227 calls on claude-sonnet-4-5, two real compactions (2.1.7)


def version_text(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def below(version: tuple[int, int, int]) -> str:
    return version_text((version[0], version[1], version[2] - 1))


def looping(version: str):
    """A parameter set whose compaction line sits below what a compaction leaves: it compacts again at every call."""
    messages, _, info = claude_sample(SMALL)
    strategy = ClaudeCodeStrategy(ClaudeCodeParams(model=info.model, version=version, pct_override=5))
    return replay(messages, strategy=strategy, info=info, follow_reality=False)


def test_a_looping_parameter_set_is_called_out_and_kept_compacting_before_2_1_89():
    result = looping(below(THRASH_STOP_SINCE))
    assert result.compactions >= 10
    assert result.thrashing is not None and result.thrashing["stopped_after_call"] is None
    assert result.thrashing["rapid_compactions"] == result.compactions - 1
    assert any("free too little" in n and "no rule that stops it" in n for n in result.notes)


def test_from_2_1_89_claude_code_stops_after_three_compactions_the_context_refills():
    result = looping(version_text(THRASH_STOP_SINCE))
    # The first compaction, then three that the context refilled within three turns: it stops there.
    assert result.thrashing is not None
    stopped = result.thrashing["stopped_after_call"]
    compactions = [e for e in result.events if e.kind == "compaction"]
    assert len(compactions) == 4 and stopped == compactions[-1].after_call
    assert "thrash-loop detection" in compactions[-1].reason
    assert any(f"stops after call {stopped}" in n for n in result.notes)


def test_the_peak_is_never_below_a_context_the_replay_compacts_at():
    for version in (below(THRASH_STOP_SINCE), version_text(THRASH_STOP_SINCE)):
        result = looping(version)
        attempted = [e.tokens_before for e in result.events if e.kind in ("compaction", "overflow")]
        assert attempted and result.peak.tokens >= max(attempted)


def test_another_agents_strategy_uses_the_sessions_model_limit_and_shows_the_overflow():
    messages, _, info = claude_sample(LONG)
    codex = build_strategy("codex", info=info, overrides={})
    result = replay(messages, strategy=codex, info=info)
    # Codex's own window for an unknown model is 272,000 and its line 244,800; the Claude model takes 200,000.
    assert result.window == 200_000 and not result.follow_reality
    overflow = next(e for e in result.events if e.kind == "overflow")
    assert overflow.tokens_before > 200_000
    assert any("accepts at most 200,000" in n for n in result.notes)
    # Another agent's version means nothing to Codex's version rules: no "Codex 2.1.7", no "None".
    assert "2.1.7" not in result.thresholds.source and "None" not in result.thresholds.source


def read(path: str, text: str, *, tool_id: str, partial: bool = False) -> list[Message]:
    args: dict[str, object] = {"file_path": path} | ({"offset": 10, "limit": 20} if partial else {})
    return [
        Message(
            line=1,
            role="assistant",
            kind="assistant",
            blocks=[Block("tool_use", tool_id=tool_id, tool_name="Read", tool_input=args)],
            usage=Usage(input_tokens=10),
        ),
        Message(line=2, role="user", kind="tool_result", blocks=[Block("tool_result", text=text, tool_id=tool_id)]),
    ]


def skill(name: str, text: str) -> list[Message]:
    return [
        Message(
            line=3,
            role="assistant",
            kind="assistant",
            blocks=[Block("tool_use", tool_id="s1", tool_name="Skill", tool_input={"skill": name})],
        ),
        Message(line=4, role="user", kind="tool_result", blocks=[Block("tool_result", text=text, tool_id="s1")]),
    ]


def test_post_compact_attachments_restore_the_last_five_files_each_capped():
    messages = []
    for n in range(7):
        messages += read(f"/src/f{n}.py", "x" * 4_000, tool_id=f"r{n}")  # 1,000 tokens each
    messages += read("/src/big.py", "y" * 40_000, tool_id="big")  # 10,000 tokens: capped at 5,000
    messages += read("/src/long.py", "z" * 40, tool_id="part", partial=True)  # only part shown: taken at the cap
    messages += read("/repo/CLAUDE.md", "m" * 4_000, tool_id="memory")  # never restored as a file
    attached = post_compact_attachments(messages, version="2.1.88")
    assert attached.files == 2 * POST_COMPACT_MAX_TOKENS_PER_FILE + 3 * 1_000


def test_invoked_skills_are_reattached_from_2_1_88_only():
    messages = skill("pdf", "s" * 40_000)  # 10,000 tokens: capped at 5,000
    assert post_compact_attachments(messages, version=version_text(SKILLS_REATTACHED_SINCE)).skills == (
        POST_COMPACT_MAX_TOKENS_PER_SKILL
    )
    assert post_compact_attachments(messages, version=below(SKILLS_REATTACHED_SINCE)).skills == 0


@pytest.mark.parametrize("follow", [True, False])
def test_the_replay_says_how_it_sized_what_claude_code_reattaches(follow):
    messages, _, info = claude_sample(LONG)
    strategy = ClaudeCodeStrategy(ClaudeCodeParams(model=info.model, version=info.agent_version))
    result = replay(messages, strategy=strategy, info=info, follow_reality=follow)
    # The session has real compactions: what Claude Code re-attached after them is measured, and said so.
    assert result.reattached_tokens is not None and result.reattached_tokens >= 0
    assert any("measured from this session's real compactions" in n for n in result.notes)


def rounds(version: str, *, contexts: list[int], result_chars: int | list[int]) -> list[Message]:
    """A prompt, then one API round per context: a Read call recorded at that context and its result."""
    messages = [Message(1, "user", "prompt", blocks=[Block("text", "p" * 400)], data={"version": version})]
    sizes = result_chars if isinstance(result_chars, list) else [result_chars] * len(contexts)
    for n, (context, chars) in enumerate(zip(contexts, sizes, strict=True)):
        tool_id = f"toolu_{n}"
        messages.append(
            Message(
                len(messages) + 1,
                "assistant",
                "assistant",
                blocks=[Block("tool_use", text="{}", tool_id=tool_id, tool_name="Read", tool_input={})],
                model="claude-sonnet-4-5",
                call_key=f"msg_{n}",
                usage=Usage(input_tokens=context, output_tokens=10),
                data={"version": version},
            )
        )
        result = Block("tool_result", text="r" * chars, tool_id=tool_id, tool_name="Read")
        messages.append(Message(len(messages) + 1, "user", "tool_result", blocks=[result], data={"version": version}))
    return messages


@pytest.mark.parametrize("version", ["2.1.141", "2.1.142"])
def test_reactive_compaction_keeps_the_newest_rounds_as_its_preserved_segment_from_2_1_142(version):
    # The last call is recorded at 125,000 on a window capped at 100,000 (§1.5: line 67,000), though Claude Code's
    # own count is far lower: the request overflows by 25,000. From 2.1.142 reactive compaction peels API rounds
    # (10,000 tokens each) from the tail until they cover that gap, summarises the rest and keeps them (§2.8).
    messages = rounds(version, contexts=[20_000, 25_000, 30_000, 35_000, 40_000, 125_000], result_chars=40_000)
    params = ClaudeCodeParams(model="claude-sonnet-4-5", version=version, auto_compact_window=100_000)
    result = replay(messages, strategy=ClaudeCodeStrategy(params), follow_reality=False)
    assert [e.kind for e in result.events][:1] == ["overflow"]
    reactive = [e for e in result.events if e.kind == "compaction" and e.trigger == "overflow"]
    if version == "2.1.141":
        assert not reactive  # no reactive compaction before 2.1.142: the turn ends with "Prompt is too long"
        return
    (compaction,) = reactive
    assert "preserved segment" in compaction.reason
    # Three rounds of 10,000 tokens cover the 25,000-token gap; they stay, with their tool results (then comes the
    # call that is retried).
    kept = [m for m in messages[compaction.first_kept : -2] if m.role == "assistant"]  # type: ignore[misc]
    assert len(kept) == 3
    # Claude Code peels by its own estimate; the context after holds them as they were sent: the session recorded
    # 5,000 tokens a round between those calls.
    assert compaction.tokens_after == result.baseline + result.summary_tokens + 3 * 5_000


@pytest.mark.parametrize(("version", "window"), [("2.1.155", 50_000), ("2.1.156", 100_000)])
def test_newer_versions_clamp_the_auto_compact_window_to_100k(version, window):
    strategy = ClaudeCodeStrategy(
        ClaudeCodeParams(model="claude-sonnet-4-5", version=version, auto_compact_window=50_000)
    )
    lines = strategy.thresholds(model="claude-sonnet-4-5", version=version)
    assert lines.window == window


@pytest.mark.parametrize(
    ("version", "clears"), [("2.1.11", False), ("2.1.12", True), ("2.1.22", True), ("2.1.23", False)]
)
def test_legacy_microcompact_compares_its_padded_saving_where_it_ran(version, clears):
    # Above the warning line (147,000 on 200K from 2.1.21) the newest Read results worth 40,000 tokens are kept
    # (two of 20,000 and the last one); the six older ones hold 16,000 tokens: 21,300 once padded by 4/3 (§2.4d,
    # estimateMessageTokens), above the 20,000 floor, though their plain estimate is below it. Observed in
    # 2.1.12-2.1.22 only.
    sizes = [4 * 2_667] * 6 + [4 * 20_000] * 2 + [40]
    contexts = [20_000 + 10_000 * n for n in range(8)] + [150_000]
    messages = rounds(version, contexts=contexts, result_chars=sizes)
    messages += rounds(version, contexts=[151_000], result_chars=40)[1:]
    messages[-2].call_key = "msg_last"
    strategy = ClaudeCodeStrategy(ClaudeCodeParams(model="claude-sonnet-4-5", version=version))
    result = replay(messages, strategy=strategy, follow_reality=False)
    prunes = [e for e in result.events if e.kind == "prune"]
    assert bool(prunes) is clears
    if clears:
        assert len(prunes[0].tool_ids) == 6


def idle_rounds(version: str, *, contexts: list[int], result_chars: int, idle_minutes: int) -> list[Message]:
    """``rounds`` with a timestamp on every record, a minute apart; the result before the last call comes
    ``idle_minutes`` later (the user came back): the request after it is sent that long after the last response."""
    messages = rounds(version, contexts=contexts, result_chars=result_chars)
    for index, message in enumerate(messages):
        minute = index + (idle_minutes if index >= len(messages) - 3 else 0)
        message.timestamp = f"2026-03-01T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"
    return messages


@pytest.mark.parametrize(("version", "kept"), [(below(TIME_BASED_MC_SINCE), 3), (version_text(TIME_BASED_MC_SINCE), 5)])
def test_the_microcompact_placeholder_cut_off_moves_from_tokens_to_a_count_at_2_1_88(version, kept):
    # Eight Read results of 15,000 tokens each, the context above the warning line (147,000), then an hour idle:
    # both microcompacts are asked for. Up to 2.1.87 the legacy one keeps the newest results worth 40,000 tokens, at
    # least 3 (§2.4d); 2.1.88 removed it, and its time-based one keeps the newest 5 whatever their size (§2.4a).
    # Every older result becomes the placeholder.
    messages = idle_rounds(
        version, contexts=[20_000 + 16_000 * n for n in range(8)] + [150_000], result_chars=60_000, idle_minutes=61
    )
    params = ClaudeCodeParams(
        model="claude-sonnet-4-5", version=version, legacy_microcompact=True, time_based_mc_enabled=True
    )
    result = replay(messages, strategy=ClaudeCodeStrategy(params), follow_reality=False)
    (prune,) = [e for e in result.events if e.kind == "prune"]
    reads = [b.tool_id for m in messages for b in m.blocks if b.kind == "tool_use"]
    # The last call's own Read has no result yet when it is sent: the cut-off counts the eight before it.
    assert prune.tool_ids == reads[: 8 - kept]
    assert ("legacy" in prune.reason) is (kept == 3)


def worded_rounds(version: str, *, calls: int) -> list[Message]:
    """A long pasted prompt (125,000 tokens), then ``calls`` rounds whose responses say a few words before their call
    (messages with text, as most do), each result 2,000 tokens (2,667 with the 4/3 padding); the recorded contexts
    grow by what each round adds, on 5,000 tokens of system prompt and tools."""
    rounds_added = 2_000 + 18  # the result, the call and its words
    messages = rounds(version, contexts=[130_100 + rounds_added * n for n in range(calls)], result_chars=8_000)
    messages[0].blocks = [Block("text", "p" * 500_000)]
    for message in messages:
        if message.role == "assistant":
            message.blocks.insert(0, Block("text", "Reading the next file."))
    return messages


@pytest.mark.parametrize(
    ("version", "preserved"),
    [
        (below(SM_COMPACT_SINCE), False),
        (version_text(SM_COMPACT_SINCE), True),
        (below(SM_COMPACT_REMOVED), True),
        (version_text(SM_COMPACT_REMOVED), False),
    ],
)
def test_session_memory_compaction_keeps_a_preserved_segment_from_2_1_88_until_2_1_156(version, preserved):
    # Autocompact once the count passes 167,000, with session-memory compaction switched on (§2.6 step 1): where
    # the build has it, the newest five rounds (five messages with text, ~13,400 padded tokens: over the 10,000
    # floor, under the 40,000 cap) stay verbatim; elsewhere the whole context is summarised.
    messages = worded_rounds(version, calls=20)
    params = ClaudeCodeParams(model="claude-sonnet-4-5", version=version, session_memory_compact=True)
    result = replay(messages, strategy=ClaudeCodeStrategy(params), follow_reality=False)
    (compaction,) = [e for e in result.events if e.kind == "compaction"]
    if not preserved:
        assert compaction.first_kept is None and "preserved segment" not in compaction.reason
        assert compaction.tokens_after == result.baseline + result.summary_tokens
        return
    assert compaction.first_kept is not None and "preserved segment" in compaction.reason
    before = next(s for s in range(len(messages)) if messages[s].call_key == f"msg_{compaction.after_call}")
    kept = messages[compaction.first_kept : before]  # up to the call the compaction comes before
    assert sum(m.role == "assistant" for m in kept) == 5 and kept[0].role == "assistant"
    # They stay in the context as they were sent (the recorded growth over them).
    assert compaction.tokens_after == pytest.approx(result.baseline + result.summary_tokens + 5 * 2_018, abs=50)


def partial_compaction(version: str, *, kept: str | None) -> list[Message]:
    """Six rounds of 10,000 tokens, then a compaction the user asked for after call 6 and one more call: a whole
    /compact (``kept`` None), or a partial one (§2.9, /rewind) whose boundary preserves the last two rounds
    (``up_to``: summarised up to them) or the prompt and the first two (``from``: summarised from after them)."""
    # The call after it sent the system prompt and tools (19,900, as the first call shows), the summary (1,000) and
    # what the compaction kept.
    after = 20_900 + {"up_to": 20_000, "from": 20_100}.get(kept or "", 0)
    messages = rounds(version, contexts=[20_000, 30_000, 40_000, 50_000, 60_000, 70_000, after], result_chars=40_000)
    for index, message in enumerate(messages):
        message.uuid, message.parent_uuid = f"u{index}", f"u{index - 1}" if index else None
    preserved = {"up_to": range(9, 13), "from": range(0, 5)}.get(kept or "", range(0))
    data: dict = {"version": version, "trigger": "manual", "pre_tokens": 70_000}
    if kept is not None:
        data |= {"messages_summarized": 13 - len(preserved), "preserved_uuids": [f"u{i}" for i in preserved]}
    boundary = Message(13, "meta", "system", raw_type="system/compact_boundary", uuid="cb", data=data)
    summary = Message(14, "user", "compact_summary", blocks=[Block("text", "s" * 4_000)], data={"version": version})
    return [*messages[:13], boundary, summary, *messages[13:]]


@pytest.mark.parametrize("version", ["2.1.87", "2.1.88"])
def test_a_partial_compaction_keeps_the_segment_its_boundary_preserves(version):
    # partialCompactConversation is first shown by the 2.1.88 source ([S88]) and no source dates it; the boundary's
    # preserved segment is the record that the build had it, so the rule follows the record on either side.
    def modelled(kept: str | None):
        params = ClaudeCodeParams(model="claude-sonnet-4-5", version=version)
        result = replay(
            partial_compaction(version, kept=kept), strategy=ClaudeCodeStrategy(params), follow_reality=False
        )
        (compaction,) = [e for e in result.events if e.kind == "compaction"]
        assert compaction.after_call == 6 and compaction.trigger == "manual"
        return compaction

    whole, up_to, since = modelled(None), modelled("up_to"), modelled("from")
    assert "strategy's own cut" in whole.reason and whole.first_kept is None
    # Up to: everything before the last two rounds is summarised; they stay as they were sent (10,000 tokens a round,
    # as the session recorded them).
    assert "partial compaction up to the preserved segment (4 records kept verbatim)" in up_to.reason
    assert up_to.first_kept == 9 and up_to.removed_messages == 9  # the prompt and four rounds
    assert whole.tokens_after == pytest.approx(20_900, rel=0.01)
    assert up_to.tokens_after == pytest.approx(40_900, rel=0.01)
    # From: the prompt and the first two rounds stay, the four rounds after them are summarised.
    assert "partial compaction from after the preserved segment (5 records kept verbatim)" in since.reason
    assert since.removed_messages == 8
    assert since.tokens_after == pytest.approx(41_000, rel=0.01)


def cut_after_first_compaction(name: str):
    """The sample as a live session is seen right after the agent compacted: its compaction records are the last
    lines, the call that follows them not written yet."""

    messages, _, info = claude_sample(name)
    first = next(p for p, m in enumerate(messages) if is_compaction_record(m))
    end = first
    while end < len(messages) and is_compaction_record(messages[end]):
        end += 1
    return messages[:end], info


@pytest.mark.parametrize("follow", [True, False])
def test_a_session_that_ends_on_a_real_compaction_is_replayed_up_to_it(follow):
    messages, info = cut_after_first_compaction(LONG)
    assert messages[-1].role != "assistant"  # the compaction records come after the last call
    strategy = build_strategy("claude-code", info=info, overrides={})
    result = replay(messages, strategy=strategy, info=info, follow_reality=follow)
    calls = [call for call, _ in result.series]
    compactions = [e for e in result.events if e.kind == "compaction"]
    # The agent decided before its next call, and its record says it compacted: the replay decides there too (no
    # point for a call the session has not sent yet).
    assert [e.after_call for e in compactions] == [calls[-1]]
    assert compactions[0].context_before == result.series[-1][1]
    assert compactions[0].context_after is not None and compactions[0].context_after < compactions[0].tokens_before
    assert compactions[0].followed is follow
    row = next(r for r in result.comparison if r.kind == "compaction")
    assert row.replayed_after_call == calls[-1] and row.counted_at_real is not None


@pytest.mark.parametrize("name", [LONG, SMALL])
def test_the_preview_at_a_real_compaction_models_the_context_after_as_the_replay_does(name):
    messages, _, info = claude_sample(name)
    strategy = build_strategy("claude-code", info=info, overrides={})
    modelled = replay(messages, strategy=strategy, info=info, follow_reality=False)
    for event in (e for e in modelled.events if e.kind == "compaction"):
        plan = plan_preview(messages, strategy=strategy, after_call=event.after_call, info=info)
        # One number: the preview's context after is the replay's, not the recorded context less the cut's estimate.
        assert plan.context_after_estimate == event.context_after
        real = plan.real or plan_preview(messages, strategy=strategy, after_call=event.after_call + 1, info=info).real
        assert real is not None and real.context_after is not None
        assert abs(plan.context_after_estimate - real.context_after) <= 0.2 * real.context_after
        assert plan.as_json()["context_after_estimate"] == plan.context_after_estimate


@pytest.mark.parametrize("follow", [True, False])
def test_recorded_vs_replayed_sets_each_real_context_after_beside_the_replayed_one(follow):
    messages, _, info = claude_sample(LONG)
    strategy = build_strategy("claude-code", info=info, overrides={})
    result = replay(messages, strategy=strategy, info=info, follow_reality=follow)
    recorded = {step.number: step.context for step in api_steps(messages)}
    rows = [r for r in result.comparison if r.kind == "compaction"]
    assert len(rows) == 2
    for row in rows:
        assert row.real_after_call is not None and row.replayed_after_call is not None
        assert row.real_context_after == recorded[row.real_after_call + 1]
        event = next(e for e in result.events if e.kind == "compaction" and e.after_call == row.replayed_after_call)
        assert row.replayed_context_after == event.context_after
        if follow:
            assert row.replayed_context_after == row.real_context_after
        else:
            assert abs(row.replayed_context_after - row.real_context_after) <= 0.2 * row.real_context_after


def test_a_session_that_simply_ends_is_not_compacted_after_its_last_call_when_following_what_happened():
    # The sample cut right before its compaction records: a prompt or results after the last call, no record that the
    # agent compacted there. Following what really happened, nothing is made up after the last call; a modelled
    # replay says what the strategy would do before the next call.

    messages, _, info = claude_sample(LONG)
    first = next(p for p, m in enumerate(messages) if is_compaction_record(m))
    cut = messages[:first]
    assert any(m.role == "user" for m in cut[-3:])
    strategy = build_strategy("claude-code", info=info, overrides={})
    followed = replay(cut, strategy=strategy, info=info, follow_reality=True)
    assert [e for e in followed.events if e.kind == "compaction"] == []
    modelled = replay(cut, strategy=strategy, info=info, follow_reality=False)
    assert [e.after_call for e in modelled.events if e.kind == "compaction"] == [modelled.series[-1][0]]
