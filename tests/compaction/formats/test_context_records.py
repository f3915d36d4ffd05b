"""The record types by which an agent says it changed its own history, checked against every shared sample.

Each parser also reports such a record as a ``ContextEvent`` (compaction, microcompact, prune), from the
record itself; the table must name exactly the records those events come from, for all three formats.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compaction.formats import claude_code, codex, khaelor, klaude_code
from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.codex import CodexParser
from compaction.formats.context_records import (
    COMPACTION_RECORD_TYPES,
    PRUNE_RECORD_TYPES,
    is_compaction_record,
    is_context_record,
)
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import parse_session
from compaction.transcript import Block, ContextEvent, Message, Record
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES


def sample_records() -> Iterator[tuple[str, list[Record]]]:
    for path in sorted(CLAUDE_SAMPLES.glob("*.jsonl")):
        with open(path, "rb") as handle:
            yield path.name, list(ClaudeCodeParser().parse(handle))
    for path in sorted((KLAUDE_SAMPLES / "dot-klaude" / "projects").glob("*/sessions/*")):
        yield path.name, parse_session(path)[1]
    for path in sorted(KHAELOR_SAMPLES.glob("*.jsonl")):
        with open(path, "rb") as handle:
            yield path.name, list(KhaelorParser().parse(handle))
    for path in sorted(CODEX_SAMPLES.glob("*.jsonl")):
        with open(path, "rb") as handle:
            yield path.name, list(CodexParser().parse(handle))


SAMPLES = list(sample_records())


@pytest.mark.parametrize(("name", "records"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_the_table_names_the_records_the_parsers_report_as_context_changes(name: str, records: list[Record]) -> None:
    messages = [r for r in records if isinstance(r, Message)]
    events = [r for r in records if isinstance(r, ContextEvent)]
    compactions = [m for m in messages if m.raw_type in COMPACTION_RECORD_TYPES]
    prunes = [m for m in messages if m.raw_type in PRUNE_RECORD_TYPES]
    assert len(compactions) == sum(1 for e in events if e.kind == "compaction")
    assert len(prunes) == sum(1 for e in events if e.kind in ("microcompact", "prune"))
    assert all(is_compaction_record(m) and is_context_record(m) for m in compactions)
    assert all(is_context_record(m) and not is_compaction_record(m) for m in prunes)


def test_every_format_compacts_and_the_samples_hold_each_kind() -> None:
    # A sample per format with a real compaction, so the test above is not vacuous for any of them.
    assert all(module.COMPACTION_RECORD_TYPES for module in (claude_code, klaude_code, khaelor, codex))
    seen = {m.raw_type for _, records in SAMPLES for m in records if isinstance(m, Message)}
    # No public rollout holds a lone context_compacted event (docs/formats/codex.md §5): every compaction
    # there is a `compacted` line.
    assert seen >= COMPACTION_RECORD_TYPES - {codex.CONTEXT_COMPACTED_RECORD}
    assert seen >= PRUNE_RECORD_TYPES


def test_a_summary_counts_as_a_compaction_record_whatever_its_type() -> None:
    summary = Message(1, "user", "compact_summary", blocks=[Block("text", "so far")])
    prompt = Message(2, "user", "prompt", blocks=[Block("text", "go on")])
    assert is_compaction_record(summary) and is_context_record(summary)
    assert not is_compaction_record(prompt) and not is_context_record(prompt)
