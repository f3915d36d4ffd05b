"""What a summary lost: the checklist of the summarised range, marked against the agent's own and an offline summary."""

from __future__ import annotations

import json
import re

import pytest

from compaction.coverage import Coverage, checklist, coverage, mark, recorded_range
from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import history_messages, parse_session
from compaction.strategies.base import Cut
from compaction.strategies.claude_code import ClaudeCodeStrategy
from compaction.summarize import OfflineSummarizer
from compaction.transcript import MAIN, Block, Message
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

CIPHERBOX = CLAUDE_SAMPLES / "cipherbox_c644f3afc869-1_full.jsonl"
FILE_TOOLS = {"Read", "Write", "Edit", "MultiEdit", "NotebookEdit"}


def _conversation(path) -> list[Message]:
    with path.open("rb") as handle:
        return [
            r
            for r in ClaudeCodeParser().parse(handle)
            if isinstance(r, Message) and r.agent == MAIN and r.kind not in ("bookkeeping", "unknown")
        ]


def _files_in_the_file_before_the_boundary(path) -> set[str]:
    """Read straight from the JSONL, apart from the parser: main-chain file tool calls before the first boundary."""
    paths: set[str] = set()
    for raw in path.read_text().splitlines():
        record = json.loads(raw)
        if record.get("subtype") == "compact_boundary":
            break
        if record.get("type") != "assistant" or record.get("isSidechain"):
            continue
        for block in record["message"].get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in FILE_TOOLS:
                paths.add(block["input"]["file_path"])
    return paths


@pytest.fixture(scope="module")
def cipherbox() -> tuple[list[Message], int, Coverage]:
    messages = _conversation(CIPHERBOX)
    position = next(i for i, m in enumerate(messages) if m.kind == "compact_summary")
    start, end = recorded_range(messages, position)
    return messages, position, coverage(messages, start=start, end=end, summary=messages[position].text)


def test_the_agents_own_summary_lists_every_file_really_touched(cipherbox) -> None:
    messages, position, checked = cipherbox
    assert messages[checked.end].raw_type == "system/compact_boundary" and checked.start == 0
    listed = {i.key for i in checked.items if i.kind in ("file_read", "file_written")}
    assert listed == _files_in_the_file_before_the_boundary(CIPHERBOX) and listed
    by_path = {i.key: i for i in checked.items if i.kind in ("file_read", "file_written")}
    # The summary names these two (as "designs/DESIGN.md" and ".planning/…/14-CONTEXT.md")…
    design = next(p for p in by_path if p.endswith("designs/DESIGN.md"))
    context = next(p for p in by_path if p.endswith("14-CONTEXT.md"))
    assert by_path[design].found and by_path[design].match == "exact" and by_path[design].kind == "file_read"
    assert by_path[context].found and by_path[context].kind == "file_written"
    # …and never names the file whose Read failed as too large (it names a .jsonl beside it).
    too_large = next(p for p in by_path if p.endswith(".REDACTED.txt"))
    assert not by_path[too_large].found and ".REDACTED.txt" not in messages[position].text
    # Each item links to its record: the record's tool call names the path.
    for item in by_path.values():
        assert any(
            b.kind == "tool_use" and item.key in json.dumps(b.tool_input) for b in messages[item.position].blocks
        )
    figures = checked.figures()
    assert figures["files"] == (sum(i.found for i in by_path.values()), len(by_path))
    assert checked.line.startswith("requests ") and f"files {figures['files'][0]}/{figures['files'][1]}" in checked.line


def test_an_offline_summary_that_omits_a_file_is_marked_so(cipherbox) -> None:
    messages, _, agents = cipherbox
    strategy = ClaudeCodeStrategy()
    plan = strategy.summarizer_plan(messages, Cut(agents.start, agents.end, agents.end), prune=[], by_hand=True)
    offline = OfflineSummarizer().summarize(plan.requests[0].summary_request(model="offline")).text
    checked = coverage(messages, start=agents.start, end=agents.end, summary=offline)
    files = [i for i in checked.items if i.kind in ("file_read", "file_written")]
    named = [i for i in files if i.found]
    assert named, "the extractive summary keeps some tool calls with their paths"
    dropped = named[0]
    name = dropped.key.rsplit("/", 1)[-1]
    omitting = re.sub(r"\S*" + re.escape(name), "(a file)", offline)
    assert name not in omitting
    again = coverage(messages, start=agents.start, end=agents.end, summary=omitting)
    after = {(i.kind, i.key): i for i in again.items}
    assert not after[(dropped.kind, dropped.key)].found and after[(dropped.kind, dropped.key)].match == ""
    for item in files:
        if item.key.rsplit("/", 1)[-1] != name:
            assert after[(item.kind, item.key)].found == item.found
    assert again.figures()["files"][0] < checked.figures()["files"][0]


def _message(position: int, role, kind, *blocks: Block) -> Message:
    return Message(line=position + 1, role=role, kind=kind, blocks=list(blocks))


def test_checklist_kinds_and_how_each_is_matched() -> None:
    messages = [
        _message(0, "user", "prompt", Block("text", "Please migrate the billing service to the new payments client")),
        _message(
            1,
            "assistant",
            "assistant",
            Block("text", "I'll convert the retry loop to exponential backoff instead of fixed sleeps."),
            Block("tool_use", tool_id="t1", tool_name="Read", tool_input={"file_path": "/repo/src/billing/client.py"}),
            Block("tool_use", tool_id="t2", tool_name="Bash", tool_input={"command": "pytest -q tests/billing"}),
            Block(
                "tool_use",
                tool_id="t3",
                tool_name="TodoWrite",
                tool_input={
                    "todos": [
                        {"content": "Convert the retry loop", "status": "completed"},
                        {"content": "Update the webhook handler signature", "status": "pending"},
                    ]
                },
            ),
        ),
        _message(
            2,
            "user",
            "tool_result",
            Block("tool_result", "print(1)", tool_id="t1", tool_name="Read"),
            Block("tool_result", "E   KeyError: 'amount'\n1 failed", tool_id="t2", tool_name="Bash", is_error=True),
        ),
        _message(
            3,
            "assistant",
            "assistant",
            Block("tool_use", tool_id="t4", tool_name="Edit", tool_input={"file_path": "/repo/src/billing/retry.py"}),
        ),
    ]
    items = checklist(messages, 0, len(messages))
    assert [(i.kind, i.key or i.text) for i in items] == [
        ("request", "Please migrate the billing service to the new payments client"),
        ("decision", "I'll convert the retry loop to exponential backoff instead of fixed sleeps."),
        ("file_read", "/repo/src/billing/client.py"),
        ("command", "pytest -q tests/billing"),
        ("error", "KeyError"),
        ("file_written", "/repo/src/billing/retry.py"),
        ("open_task", "Update the webhook handler signature"),
    ]
    assert next(i for i in items if i.kind == "command").detail == "failed"
    summary = (
        "The user asked to migrate billing to the new payments client. Read src/billing/client.py; "
        "ran pytest -q which failed with KeyError. Decided on exponential backoff for the retry loop, not fixed sleeps."
    )
    mark(items, summary)
    found = {i.kind: i.found for i in items}
    assert found == {
        "request": True,
        "decision": True,
        "file_read": True,
        "command": True,
        "error": True,
        "file_written": False,  # retry.py is not named
        "open_task": False,  # the webhook task is not kept
    }
    assert next(i for i in items if i.kind == "file_read").match == "exact"  # a trailing part of the path
    assert next(i for i in items if i.kind == "command").match == "program and first argument"
    # The task list written before a later range is still the one open at that range's cut.
    later = checklist(messages, 2, len(messages))
    assert [(i.kind, i.text, i.position) for i in later if i.kind == "open_task"] == [
        ("open_task", "Update the webhook handler signature", 1)
    ]
    mark(items, "client.py was read")
    assert next(i for i in items if i.kind == "file_read").match == "file name"


def test_klaude_recorded_summary_covers_its_own_range() -> None:
    folder = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/bd8ec9a1f80345edbd7c9ec7081ab44d"
    messages = history_messages(parse_session(folder / "events.jsonl")[1])
    position = next(i for i, m in enumerate(messages) if m.kind == "compact_summary")
    # samples/klaude-code/README.md: the entry at index 44 keeps from index 40; the first compaction starts at 0.
    assert (position, recorded_range(messages, position)) == (44, (0, 40))
    checked = coverage(messages, start=0, end=40, summary=messages[position].text)
    reads = {i.key: i.found for i in checked.items if i.kind == "file_read"}
    # klaude appends the files it read as <read-files> to its summary (klaude-code doc §3.9), so each read is found.
    assert reads and all(reads.values())


def test_khaelor_recorded_checkpoint_covers_its_cut() -> None:
    with (KHAELOR_SAMPLES / "ledger-migration.events.jsonl").open("rb") as handle:
        records = list(KhaelorParser().parse(handle))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    position = next(i for i, m in enumerate(messages) if m.kind == "compact_summary")
    start, end = recorded_range(messages, position)
    # The sample's cut is fromSeq 4 to toSeq 35.
    assert (messages[start].data["seq"], messages[end - 1].data["seq"]) == (4, 35)
    checked = coverage(messages, start=start, end=end, summary=messages[position].text)
    written = {i.key: i.found for i in checked.items if i.kind == "file_written"}
    assert set(written) == {"ledger/models_0.py", "ledger/models_1.py"}
    # The checkpoint names models_0.py itself and models_1.py only inside "models_0.py..models_3.py".
    assert written["ledger/models_0.py"] is True
    failed = next(i for i in checked.items if i.kind == "command" and i.key == "pytest -q")
    assert failed.detail == "failed"
