"""Format detection from content: every real sample, and every reject case."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.formats.detect import HEAD_LINES, detect_format
from compaction.transcript import NotASession
from tests.conftest import SHARED

SAMPLES = SHARED / "samples"

CLAUDE_CODE_FILES = sorted(
    [*SAMPLES.glob("claude-code/*.jsonl"), *SAMPLES.glob("claude-code/*/subagents/agent-*.jsonl")]
)
KLAUDE_CODE_FILES = sorted(SAMPLES.glob("klaude-code/dot-klaude/projects/*/sessions/*/events.jsonl"))
KHAELOR_FILES = sorted(SAMPLES.glob("khaelor/*.jsonl"))


def head_of(path: Path) -> list[bytes]:
    with path.open("rb") as handle:
        return list(islice(handle, HEAD_LINES))


def test_samples_exist() -> None:
    # SOURCES.md lists 20 top-level transcripts plus 2 spotter subagent files; klaude README lists six sessions.
    assert len(CLAUDE_CODE_FILES) == 22
    assert len(KLAUDE_CODE_FILES) == 6
    assert len(KHAELOR_FILES) == 1


@pytest.mark.parametrize("path", CLAUDE_CODE_FILES, ids=lambda p: p.name)
def test_claude_code_samples(path: Path) -> None:
    assert detect_format(head_of(path), name=path.name) == "claude-code"


@pytest.mark.parametrize("path", KLAUDE_CODE_FILES, ids=lambda p: p.parent.name)
def test_klaude_code_samples(path: Path) -> None:
    assert detect_format(head_of(path), name=str(path)) == "klaude-code"


@pytest.mark.parametrize("path", KHAELOR_FILES, ids=lambda p: p.name)
def test_khaelor_samples(path: Path) -> None:
    assert detect_format(head_of(path), name=path.name) == "khaelor"


@pytest.mark.parametrize(
    ("first_line", "expected"),
    [
        # Claude Code files start with many record kinds (claude-code.md §12.2).
        (b'{"type":"summary","summary":"Title","leafUuid":"x"}\n', "claude-code"),
        (b'{"type":"last-prompt","leafUuid":"x","sessionId":"s"}\n', "claude-code"),
        (b'{"type":"permission-mode","permissionMode":"default","sessionId":"s"}\n', "claude-code"),
        (b'{"parentUuid":null,"isSidechain":false,"type":"progress","data":{"type":"hook_progress"}}\n', "claude-code"),
        # a record type newer than our list still carries the envelope
        (b'{"type":"worktree-state","sessionId":"s","parentUuid":null}\n', "claude-code"),
        (b'{"type": "CompactionEntry", "data": {"summary": "s", "first_kept_index": 3}}\n', "klaude-code"),
        (b'{"seq": 1, "type": "session.started", "payload": {"model": "m"}}\n', "khaelor"),
    ],
)
def test_single_line_shapes(first_line: bytes, expected: str) -> None:
    assert detect_format([first_line]) == expected


def test_file_name_is_not_used() -> None:
    khaelor_line = b'{"seq": 1, "type": "user.message-created", "payload": {"text": "hi"}}\n'
    assert detect_format([khaelor_line], name="abc.jsonl") == "khaelor"
    assert detect_format([khaelor_line], name="events.jsonl") == "khaelor"
    with pytest.raises(NotASession):
        detect_format([b'{"a": 1}\n'], name="11111111-2222-3333-4444-555555555555.jsonl")


def test_blank_lines_and_a_cut_last_line_are_tolerated() -> None:
    line = b'{"type":"file-history-snapshot","messageId":"m","snapshot":{},"isSnapshotUpdate":false}\n'
    assert detect_format([b"\n", line, b"   \n", line, b'{"type":"user","mess']) == "claude-code"


def test_a_bad_line_inside_a_session_is_left_to_the_parser() -> None:
    # The parser reports it with its line number; the rest of the file still imports.
    summary = b'{"type":"summary","summary":"t"}\n'
    assert detect_format([summary, b"garbage\n", summary]) == "claude-code"


def test_majority_wins_over_a_stray_line() -> None:
    unrelated = b'{"type":"note","text":"hello"}\n'
    khaelor_line = b'{"seq": 2, "type": "tool.requested", "payload": {"toolUseId": "t"}}\n'
    assert detect_format([unrelated, khaelor_line, khaelor_line]) == "khaelor"


@pytest.mark.parametrize(
    ("head", "says"),
    [
        ([], "empty"),
        ([b"\n", b"  \n"], "empty"),
        ([b'{"type":"user"}\x00\x00\n'], "binary"),
        ([b"\x89PNG\r\n", b"\x1a\n\x00\x00\x00\rIHDR"], "binary"),
        ([b"\xff\xfe\xfa not utf-8\n", b"more\n"], "binary"),
        ([b'[{"type": "user"}, {"type": "assistant"}]\n'], "JSON array"),
        ([b"[\n", b'  {"type": "user"},\n', b"  {}\n", b"]\n"], "JSON array"),
        ([b"{\n", b'  "id": "abc",\n', b'  "work_dir": "/x"\n', b"}\n"], "single JSON document"),
        ([b'{"a": 1}\n', b'{"b": 2}\n'], "unrelated JSONL"),
        ([b'{"type": "event", "data": {}}\n'], "unrelated JSONL"),
        ([b"1\n", b"2\n"], "not of objects"),
        ([b"# README\n", b"Some text\n"], "not valid JSON"),
        ([b"Some text without a newline"], "not valid JSON"),
    ],
)
def test_rejects(head: list[bytes], says: str) -> None:
    with pytest.raises(NotASession) as caught:
        detect_format(head, name="upload.jsonl")
    assert says in str(caught.value)
    assert str(caught.value).startswith("upload.jsonl: ")


LIVE_FIRST_LINES = [
    CLAUDE_CODE_FILES[0],
    KLAUDE_CODE_FILES[0],
    KHAELOR_FILES[0],
    *sorted(SAMPLES.glob("codex/*.jsonl"))[:1],
]


@pytest.mark.parametrize("cut", ["in its middle", "in a character"])
@pytest.mark.parametrize("path", LIVE_FIRST_LINES, ids=lambda p: p.name)
def test_a_first_line_still_being_written_is_not_called_something_else(path: Path, cut: str) -> None:
    """A live session is often first seen while its first line is being written: said so, not "not valid JSON" or
    "binary content" (found growing the shared samples in odd chunks, a first import at zero complete records)."""
    first = path.read_bytes().splitlines(keepends=True)[0]
    if cut == "in a character":
        first = first.rstrip(b"}\n") + '"é"}\n'.encode() if first.isascii() else first
        at = next(i for i, byte in enumerate(first) if byte >= 0xC0) + 1
    else:
        at = len(first) // 2
    with pytest.raises(NotASession, match="nothing to import yet: the file's only line is incomplete"):
        detect_format([first[:at]], name="live.jsonl")


@pytest.mark.parametrize("path", LIVE_FIRST_LINES, ids=lambda p: p.name)
def test_a_first_record_whose_crlf_is_cut_in_half_is_recognised(path: Path) -> None:
    first = path.read_bytes().splitlines()[0]
    assert detect_format([first + b"\r"]) == detect_format([first + b"\r\n"])


def test_meta_json_of_a_klaude_session_is_not_a_session() -> None:
    # A real pretty-printed meta.json beside events.jsonl (klaude-code.md §1.1) must be rejected, not guessed.
    meta = KLAUDE_CODE_FILES[0].with_name("meta.json")
    with pytest.raises(NotASession, match="single JSON document"):
        detect_format(head_of(meta))


def test_compact_single_line_json_document_is_unrelated() -> None:
    document = orjson.dumps({"id": "abc", "work_dir": "/x", "todos": []}) + b"\n"
    with pytest.raises(NotASession, match="unrelated JSONL"):
        detect_format([document])


# ----------------------------------------------------------------------------- detection is total (issue 34, item 2)

_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Every field a format module's ``vote`` reads, with any JSON value.
_VOTED_KEYS = ["type", "payload", "seq", "data", "sessionId", "record_type", "id", "timestamp", "role", "call_id",
               "summary", "instructions", "git", "uuid", "message"]  # fmt: skip


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.dictionaries(st.sampled_from(_VOTED_KEYS), _ANY_JSON, max_size=5), min_size=1, max_size=4))
def test_detection_answers_a_format_or_not_a_session_for_any_value_in_any_field(records):
    # The stdlib writes integers past 64 bits too, which orjson refuses to read: the head holds them as written.
    head = [json.dumps(record).encode() + b"\n" for record in records]
    try:
        assert detect_format(head, name="fuzzed.jsonl") in ("claude-code", "klaude-code", "khaelor", "codex")
    except NotASession as refused:
        assert str(refused).startswith("fuzzed.jsonl: ")


@pytest.mark.parametrize("odd", [{"x": 1}, [1, 2], [], {}])
def test_an_object_or_array_as_a_record_type_is_no_crash(odd):
    """The measured failure: a ``type`` that is an object or an array crashed the Codex module's vote (asked first)."""
    head = [orjson.dumps({"type": odd, "payload": {}}) + b"\n", orjson.dumps({"type": odd, "data": {}}) + b"\n"]
    with pytest.raises(NotASession):
        detect_format(head, name="odd.jsonl")
