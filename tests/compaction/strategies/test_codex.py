"""The codex strategy on the real rollouts: its lines, its count, its replay and the diagnosis wording."""

from __future__ import annotations

from compaction.diagnose import diagnose
from compaction.formats.codex import SUMMARY_PREFIX, CodexParser
from compaction.replay import replay
from compaction.strategies.codex import SUMMARIZATION_PROMPT, CodexStrategy
from compaction.strategies.registry import STRATEGY_NAMES, build_strategy, strategy_for_format
from compaction.transcript import ContextEvent, Message
from tests.conftest import CODEX_SAMPLES


def parsed(prefix: str):
    path = next(p for p in sorted(CODEX_SAMPLES.glob("*.jsonl")) if p.name.startswith(prefix))
    parser = CodexParser()
    with path.open("rb") as f:
        records = list(parser.parse(f))
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


def test_replay_fires_near_the_real_remote_compaction_and_drops_the_context():
    info, messages, _ = parsed("localpush__0.104.0-alpha.1__remote-compaction")
    strategy = build_strategy("codex", info=info, overrides={})
    result = replay(messages, strategy=strategy, info=info)
    compactions = [e for e in result.events if e.kind == "compaction"]
    assert compactions, result.events
    first = compactions[0]
    real_call, real_after = 184, 48_297  # SOURCES.md: after call 184, 209,950 before and 48,297 at the next call
    # Measured: call 187 and 57,362 tokens (see the closing note: the sample's encrypted reasoning is redacted).
    assert abs(first.at_call - real_call) <= 3
    assert abs(first.tokens_after - real_after) / real_after <= 0.20
    assert first.tokens_after < first.tokens_before / 3


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
