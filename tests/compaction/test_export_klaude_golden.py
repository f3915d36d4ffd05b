"""klaude-code's own loader (2.8.1) reads our export: the golden beside it was written by klaude's code.

The export is the ``compacted`` sample with an offline summary applied after call 13 (0-based 12 when the golden
was written, hence its file name), before klaude's own compaction at index 44: as the web export does, it ends at
the point (klaude resumes from its newest CompactionEntry, which would otherwise be the sample's own).
``goldens/klaude_2_8_1_loader.py`` says how the golden was produced; here our parser and our model of
``get_llm_history`` must read the same export the way klaude did.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.preview import plan_preview
from compaction.strategies.base import ExportInput
from compaction.strategies.klaude_code import KlaudeCodeStrategy, item_type
from compaction.strategies.registry import build_strategy
from compaction.summarize import OFFLINE_MODEL, OfflineSummarizer
from tests.conftest import KLAUDE_SAMPLES

COMPACTED = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/bd8ec9a1f80345edbd7c9ec7081ab44d"
GOLDEN = Path(__file__).parent / "goldens" / "klaude_export_compacted_at_call_12.json"
AFTER_CALL = 13  # "after call 13": the 13th call, 0-based index 12 in the golden's name


def exported(after_call: int = AFTER_CALL) -> bytes:
    """What the export of an accepted offline run after call ``after_call`` writes (the same inputs the web export
    uses)."""
    parser, records = parse_session(COMPACTED / "events.jsonl")
    messages = history_messages(records)
    strategy = build_strategy("klaude-code", info=parser.info, overrides={})
    plan = plan_preview(messages, strategy=strategy, after_call=after_call)
    assert plan.applied_cut is not None and plan.following_line is not None
    summarizer = OfflineSummarizer()
    replies = {
        r.kind: summarizer.summarize(r.summary_request(model=OFFLINE_MODEL)).text for r in plan.summarizer.requests
    }
    raw = (COMPACTED / "events.jsonl").read_bytes().splitlines(keepends=True)
    data = ExportInput(
        lines=enumerate(raw, start=1),
        messages=plan.messages,
        cut=plan.applied_cut,
        plan=plan.summarizer,
        summary=plan.final_summary(replies),
        tokens_before=plan.tokens_before,
        stop_line=plan.following_line,
        session_id=parser.info.session_id or "",
        project=parser.info.cwd or "",
        version=parser.info.agent_version or "",
        # klaude compacted again after the point (what the web export learns from the stored events).
        end_at_point=any(m.kind == "compact_summary" and m.line >= plan.following_line for m in messages),
    )
    return b"".join(strategy.export_compacted(data))


def test_klaude_reads_the_export_as_our_parser_does(tmp_path) -> None:
    golden = json.loads(GOLDEN.read_text())
    body = exported()
    path = tmp_path / "events.jsonl"
    path.write_bytes(body)
    _, records = parse_session(path)
    messages = history_messages(records)
    # Every line decodes in klaude (none skipped) and in our parser, to the same item types in the same order.
    assert golden["lines"] == len(body.splitlines()) == len(messages)
    assert [item_type(m) for m in messages] == golden["items"]
    entries = [i for i, m in enumerate(messages) if m.kind == "compact_summary"]
    assert entries == [e["index"] for e in golden["compaction_entries"]]
    for position, entry in zip(entries, golden["compaction_entries"], strict=True):
        assert messages[position].data["first_kept_index"] == entry["first_kept_index"]
        assert hashlib.sha256(messages[position].text.encode()).hexdigest() == entry["summary_sha256"]
    # What klaude sends its model right after our entry, and at the end: the same, since ours is the last line.
    strategy = KlaudeCodeStrategy()
    for position, view in zip(entries, golden["llm_history_after_each_entry"], strict=True):
        assert strategy.llm_view(messages, at=position + 1) == view
    assert strategy.llm_view(messages) == golden["llm_history_at_end"]
    # Our entry sits at the point and is klaude's newest: the history it resumes from starts with our summary.
    (ours,) = golden["compaction_entries"]
    assert ours["first_kept_index"] < ours["index"] == golden["lines"] - 1
    assert golden["llm_history_at_end"][0] is None  # None: the summary klaude injects as a user message
    assert ours["summary_sha256"] == hashlib.sha256(messages[entries[0]].text.encode()).hexdigest()


if __name__ == "__main__":
    Path(sys.argv[1]).parent.mkdir(parents=True, exist_ok=True)
    Path(sys.argv[1]).write_bytes(exported())
