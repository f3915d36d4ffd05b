"""The klaude-code 2.8.1 goldens and the check that the project decides as klaude does on them."""

from __future__ import annotations

import gzip
import json
from functools import cache
from typing import Any

from compaction.strategies.base import Cut
from compaction.strategies.klaude_code import KlaudeCodeStrategy, item_type
from compaction.transcript import Message
from tests.compaction.goldens.klaude import sessions
from tests.compaction.goldens.klaude.regenerate import GOLDEN, TYPE_LETTERS


@cache
def goldens() -> dict[int, dict[str, Any]]:
    lines = gzip.decompress(GOLDEN.read_bytes()).decode().splitlines()
    header = json.loads(lines[0])
    assert header["generator_version"] == sessions.GENERATOR_VERSION
    return {entry["seed"]: entry for entry in map(json.loads, lines[1:])}


def assert_decides_as_klaude(strategy: KlaudeCodeStrategy, messages: list[Message], golden: dict[str, Any]) -> None:
    """The history's items, the threshold checks and every checkpoint's compaction equal klaude's (the golden)."""
    seed = golden.get("seed", golden.get("sample"))
    assert "".join(TYPE_LETTERS[item_type(m)] for m in messages) == golden["items"]
    assert [strategy.estimate(m) for m in messages] == golden["estimates"]
    assert strategy.sub_agent is golden["sub_agent"]

    # The timeline's checks (one forward scan) at the same checkpoints.
    scanned = {end: check for end, check in strategy.threshold_checks(messages)}
    for end, over, tokens, limit, _ in golden["checkpoints"]:
        check = scanned.get(end) or strategy.check_threshold(messages, at=end)
        assert (check.should_compact_threshold, check.tokens_for_threshold, check.context_limit) == (
            bool(over),
            tokens,
            limit,
        ), f"threshold_checks at {end}"

    for end, over, tokens, limit, outcome in golden["checkpoints"]:
        where = f"{seed} ({golden.get('scenario', 'sample')}), history[:{end}]"
        prefix = messages[:end]
        check = strategy.check_threshold(messages, at=end)
        assert (check.should_compact_threshold, check.tokens_for_threshold, check.context_limit) == (
            bool(over),
            tokens,
            limit,
        ), where
        decision = strategy.decide(prefix)
        assert decision.should_compact is (bool(over) and not golden["sub_agent"]), where

        plan = strategy.plan(prefix)
        if isinstance(outcome, str):
            assert (plan.can_compact, plan.error) == (False, outcome), where
            continue
        assert plan.can_compact, f"{where}: {plan.error}"
        assert (plan.first_kept_index, plan.tokens_before) == (outcome["first_kept"], outcome["tokens_before"]), where
        assert sessions.short(plan.details) == outcome["details"], where
        assert sessions.short(plan.kept_items_brief) == outcome["brief"], where
        shas = {
            r.kind: sessions.request_sha256(system=r.system, parts=r.parts, max_tokens=r.max_tokens)
            for r in plan.requests
        }
        assert {kind: sha[:16] for kind, sha in shas.items()} == outcome["requests"], where
        # The stored summary through the production path: klaude's own plan, the replies, final_summary.
        cut = Cut(plan.base_start_index, outcome["first_kept"], outcome["first_kept"])
        summarizer = strategy.summarizer_plan(prefix, cut, prune=[], by_hand=False)
        assert [r.transcript for r in summarizer.requests] == [r.text for r in plan.requests], where
        # The whole body klaude's Anthropic provider sends (system and user content blocks, cache_control, model,
        # max_tokens, temperature, tool_choice, tools) and its betas header.
        bodies = {r.kind: sessions.body_sha256(r.api_body(model=sessions.MODEL))[:16] for r in summarizer.requests}
        assert bodies == outcome["bodies"], where
        assert {r.extra_headers["anthropic-beta"] for r in summarizer.requests} <= {",".join(sessions.ANTHROPIC_BETAS)}
        replies = {kind: sessions.fake_reply(sha) for kind, sha in shas.items()}
        summary = strategy.final_summary(replies, plan=summarizer, messages=prefix)
        assert sessions.short(summary) == outcome["summary"], where
        view = [None, *strategy.post_compaction_view(prefix, plan)]
        assert sessions.short(view) == outcome["view"], where
