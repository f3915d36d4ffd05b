"""The codex strategy on the real rollouts: its lines, its count, its replay and the diagnosis wording."""

from __future__ import annotations

import io
import re

import orjson

from compaction.diagnose import diagnose
from compaction.formats.codex import SUMMARY_PREFIX, CodexParser
from compaction.replay import replay
from compaction.strategies.codex import SUMMARIZATION_PROMPT, CodexStrategy
from compaction.strategies.registry import STRATEGY_NAMES, build_strategy, strategy_for_format
from compaction.transcript import ContextEvent, Message
from tests.conftest import CODEX_SAMPLES

# localpush's redaction (SOURCES.md: "text redacted by its authors") writes each text as
# "[REDACTED_<FIELD> len=<N> sha=<hash>]"; N is the original length.
REDACTED = re.compile(rb"\[REDACTED_[A-Z_]+ len=(\d+) sha=[0-9a-f]+\]")


def sizes_restored(raw: bytes) -> bytes:
    """The rollout with each redacted text replaced by as many base64 characters as it had: Codex's estimates
    read sizes only, so this is the session as Codex measured it (the encrypted reasoning above all). A redacted
    image URL of hundreds of kilobytes is taken to have been an inline base64 image (what Codex Desktop sends)."""

    def restored(match: re.Match[bytes]) -> bytes:
        size = int(match.group(1))
        if match.group(0).startswith(b"[REDACTED_IMAGE_URL"):
            head = b"data:image/png;base64,"
            return head + b"A" * max(size - len(head), 0)
        return b"A" * size

    return REDACTED.sub(restored, raw)


def parsed(prefix: str, *, restore: bool = False):
    path = next(p for p in sorted(CODEX_SAMPLES.glob("*.jsonl")) if p.name.startswith(prefix))
    parser = CodexParser()
    raw = path.read_bytes()
    records = list(parser.parse(io.BytesIO(sizes_restored(raw) if restore else raw)))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    events = [r for r in records if isinstance(r, ContextEvent)]
    return parser.info, messages, events


def test_codex_is_registered_and_is_the_strategy_of_codex_sessions():
    assert "codex" in STRATEGY_NAMES and strategy_for_format("codex") == "codex"


def test_lines_follow_the_version_and_model():
    recent = CodexStrategy.from_session(parsed("localpush__0.104.0-alpha.1__rollout")[0], {})
    lines = recent.thresholds(model="gpt-5.3-codex", version="0.104.0-alpha.1")
    assert (lines.window, lines.effective_window, lines.autocompact) == (272_000, 258_400, 244_800)
    legacy = CodexStrategy.from_session(parsed("coda__0.44.0")[0], {})
    # Before #5292 the rollout reported the raw window and gpt-5-codex's limit was 350,000, above it.
    old = legacy.thresholds(model="gpt-5-codex", version="0.44.0")
    assert old.window == 272_000 and old.autocompact == 350_000 and "never fire" in old.source


REAL_CALL, REAL_AFTER = 184, 48_297  # SOURCES.md: compaction after call 184; 48,297 at the next call


def first_replayed_compaction(*, restore: bool):
    info, messages, _ = parsed("localpush__0.104.0-alpha.1__remote-compaction", restore=restore)
    strategy = build_strategy("codex", info=info, overrides={})
    # Modelled, not following the real compaction: what Codex's own rules would have done.
    result = replay(messages, strategy=strategy, info=info, follow_reality=False)
    compactions = [e for e in result.events if e.kind == "compaction"]
    assert compactions, result.events
    return compactions[0]


def test_replay_fires_at_the_real_remote_compaction_and_drops_the_context_as_it_did():
    # Codex's count after call 184 reaches 244,800 only with the encrypted reasoning of the earlier turns (issue 33's
    # bar: within one call). The redacted file records each ciphertext's length in its marker
    # (docs/formats/codex.md §11): read as the file is, it meets the compaction as the sizes restored do.
    for restore in (False, True):
        first = first_replayed_compaction(restore=restore)
        assert first.after_call == REAL_CALL, restore
        assert abs(first.tokens_after - REAL_AFTER) / REAL_AFTER <= 0.15, restore


def test_a_redaction_marker_counts_at_the_length_it_records():
    from compaction.formats.codex import item_size
    from compaction.strategies.codex import IMAGE_BYTES, encrypted_bytes, item_bytes, reasoning_tokens

    output = {"type": "function_call_output", "call_id": "c", "output": "[REDACTED_OUTPUT len=4000 sha=0123abcd]"}
    plain = {"type": "function_call_output", "call_id": "c", "output": "x" * 4000}
    assert item_size(output)["serialized_bytes"] == item_size(plain)["serialized_bytes"]
    image = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "image_url": "[REDACTED_IMAGE_URL len=900000 sha=0123abcd]"}],
    }
    sizes = item_size(image)
    # An image the model saw counts 7,373 bytes (history.rs), not its URL's recorded length.
    assert item_bytes(Message(line=1, role="user", kind="prompt", raw_type="r", data=sizes)) == (
        len(orjson.dumps(image)) - len(image["content"][0]["image_url"]) + IMAGE_BYTES
    )
    parser = CodexParser()
    reasoning = {
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "[REDACTED_ENCRYPTED_CONTENT len=8000 sha=ab]",
    }
    line = orjson.dumps({"timestamp": "2026-02-23T12:00:00.000Z", "type": "response_item", "payload": reasoning})
    item = next(r for r in parser.parse(io.BytesIO(line + b"\n")) if isinstance(r, Message))
    # Codex's estimate of the ciphertext it had: 8,000 base64 characters decoded, less the envelope, over 4.
    assert reasoning_tokens(item) == -(-encrypted_bytes(8000) // 4)
    # A marker that records no length is not one: the call's recorded reasoning tokens stand for it.
    unmarked = orjson.dumps({**orjson.loads(line), "payload": {**reasoning, "encrypted_content": "[REDACTED]"}})
    item = next(r for r in CodexParser().parse(io.BytesIO(unmarked + b"\n")) if isinstance(r, Message))
    assert reasoning_tokens(item) == 0


def test_the_034_diagnosis_says_it_filled_the_window_and_why():
    info, messages, events = parsed("openprintkit__0.34.0")
    verdict = diagnose(messages, events, info=info).verdict
    assert "filled 270,992 of 272,000 tokens" in verdict
    assert "0.34.0 predates auto-compaction" in verdict


def test_local_compaction_keeps_the_newest_user_messages_and_stores_the_prefixed_summary():
    info, messages, _ = parsed("test-framework__0.92.0")
    strategy = build_strategy("codex", info=info, overrides={"summary_tokens": 100})
    cut = strategy.select_cut(messages)
    assert cut is not None and cut.end == len(messages)
    plan = strategy.summarizer_plan(messages, cut, prune=[], by_hand=False)
    assert plan.requests[0].instructions == SUMMARIZATION_PROMPT
    assert strategy.final_summary({"compact": "done"}, plan=plan, messages=messages) == f"{SUMMARY_PREFIX}\ndone"
    kept = strategy.kept_user_messages(messages)  # type: ignore[attr-defined]
    assert kept and all(m.kind == "prompt" for m in kept)
    assert sum(len(m.text.encode()) for m in kept) <= 4 * 20_000


def test_the_preview_counts_the_user_messages_codex_puts_back_after_its_summary():
    from compaction.preview import plan_preview

    info, messages, _ = parsed("test-framework__0.92.0")
    strategy = build_strategy("codex", info=info, overrides={})
    plan = plan_preview(messages, strategy=strategy)
    cut = plan.applied_cut
    assert cut is not None
    carried = strategy.carried_over(plan.messages, cut)
    assert (
        carried == sum(strategy.estimate(m) for m in strategy.retained_messages(plan.messages[cut.start : cut.end])) > 0
    )  # type: ignore[attr-defined]
    summarised = sum(plan.estimates[cut.start : cut.end])
    assert plan.tokens_after_estimate == max(0, plan.tokens_before - summarised + carried)


def rollout(calls: list[tuple[str, int, int]]) -> bytes:
    """A small 0.104 rollout: one call per (model, reported window, input tokens), each a shell call and output."""

    def line(kind: str, payload: dict) -> dict:
        return {"timestamp": "2026-02-23T11:40:29.000Z", "type": kind, "payload": payload}

    lines = [
        line("session_meta", {"id": "s-1", "timestamp": "2026-02-23T11:40:29Z", "cwd": "/w", "cli_version": "0.104.0"}),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
    ]
    total = 0
    for number, (model, window, input_tokens) in enumerate(calls):
        total += input_tokens + 100
        last = {"input_tokens": input_tokens, "cached_input_tokens": 0, "output_tokens": 100}
        lines += [
            line("turn_context", {"cwd": "/w", "model": model, "approval_policy": "never"}),
            line(
                "response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": f"c{number}"}
            ),
            line(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {
                        "total_token_usage": {**last, "input_tokens": total, "total_tokens": total},
                        "last_token_usage": {**last, "reasoning_output_tokens": 0, "total_tokens": input_tokens + 100},
                        "model_context_window": window,
                    },
                },
            ),
            line("response_item", {"type": "function_call_output", "call_id": f"c{number}", "output": "ok"}),
        ]
    return b"".join(orjson.dumps(entry) + b"\n" for entry in lines)


def replayed(calls: list[tuple[str, int, int]]):
    parser = CodexParser()
    records = list(parser.parse(io.BytesIO(rollout(calls))))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    return replay(messages, strategy=build_strategy("codex", info=parser.info, overrides={}), info=parser.info)


# gpt-5.4 configured to its 1,000,000-token max_context_window reports 950,000; gpt-5.3-codex's 272,000 reports
# 258,400 (docs/formats/codex.md §4, §6): limits 900,000 and 244,800.
LARGE, SMALL = ("gpt-5.4", 950_000), ("gpt-5.3-codex", 258_400)


def test_a_switch_to_a_smaller_window_compacts_with_the_previous_model_before_the_switch():
    before = [(*LARGE, tokens) for tokens in (100_000, 200_000, 260_000, 300_000)]
    result = replayed([*before, (*SMALL, 30_000)])
    compactions = [e for e in result.events if e.kind == "compaction"]
    # 260,000 and 300,000 are under gpt-5.4's limit; before the first gpt-5.3-codex call the count (300,100 and
    # what arrived since) is above gpt-5.3-codex's 244,800: the downshift check compacts there, with gpt-5.4.
    assert [e.after_call for e in compactions] == [4]
    assert "model downshift" in compactions[0].reason and "with gpt-5.4 before the switch" in compactions[0].reason
    assert "244,800" in compactions[0].reason


def test_each_call_is_held_to_its_own_models_limit_and_a_larger_window_is_no_downshift():
    def compactions(calls):
        return [e for e in replayed(calls).events if e.kind == "compaction"]

    assert not compactions([(*LARGE, t) for t in (100_000, 200_000, 260_000, 300_000)])
    # A model switch comes with a new turn: its pre-turn check uses the new model's limit, here the larger one.
    assert not compactions([(*SMALL, 100_000), (*SMALL, 240_000), (*LARGE, 250_000), (*LARGE, 280_000)])
    same = compactions([(*SMALL, 100_000), (*SMALL, 250_000), (*SMALL, 20_000)])
    assert [e.after_call for e in same] == [2]
    assert "reached the 244,800 auto-compact limit" in same[0].reason and "downshift" not in same[0].reason


def test_codex_cache_misses_claim_no_anthropic_lifetime():
    import orjson as json_

    info, messages, events = parsed("moonmind__0.57.0")
    diagnosis = diagnose(messages, events, info=info)
    cache = diagnosis.as_json()["cache"]
    # OpenAI's cache lifetime is not in our sources: none is assumed, no gap is called longer than it.
    assert cache["ttl_minutes"] is None and "not documented" in cache["ttl_source"]
    assert "idle_cache_misses" not in [r.kind for r in diagnosis.recommendations]
    assert any("after 53 idle min (OpenAI's cache lifetime is not documented)" in m["cause"] for m in cache["misses"])
    # What a miss cost: the input sent uncached (OpenAI records no cache writes).
    assert all(m["recreated_tokens"] > 0 for m in cache["misses"])
    assert b"5-minute" not in json_.dumps(diagnosis.as_json()) and b"5 min cache" not in json_.dumps(
        diagnosis.as_json()
    )


def test_an_item_counts_as_codex_serializes_it_with_inline_images_at_a_fixed_size():
    image = "data:image/png;base64," + "A" * 40_000
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": 'say "hi"\n'}, {"type": "input_image", "image_url": image}],
    }
    line = {"timestamp": "2026-02-23T11:40:29.000Z", "type": "response_item", "payload": item}
    meta = {"timestamp": "2026-02-23T11:40:29.000Z", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}
    parser = CodexParser()
    records = list(parser.parse(io.BytesIO(orjson.dumps(meta) + b"\n" + orjson.dumps(line) + b"\n")))
    (message,) = [r for r in records if isinstance(r, Message) and r.raw_type == "response_item/message"]
    # history.rs: serde_json of the item (quotes and newline escaped), the base64 payload replaced by 7,373 bytes.
    expected_bytes = len(orjson.dumps(item)) - 40_000 + 7_373
    assert CodexStrategy().estimate(message) == -(-expected_bytes // 4)


def test_a_call_without_an_id_is_rendered_without_one():
    # A web_search_call item has no call_id (docs/formats/codex.md: web_search_call{status, action}): the
    # summarizer's transcript names the call without printing "None".
    info, messages, _ = parsed("localpush__0.104.0-alpha.1__remote")
    searches = [m for m in messages if any(b.tool_name == "web_search" for b in m.blocks)]
    assert searches and all(b.tool_id is None for m in searches for b in m.blocks if b.tool_name == "web_search")
    text = CodexStrategy().render_transcript(searches)
    assert "[web_search call]" in text and "None" not in text
