"""One JSONL line reader for every agent: the same file flaws are reported alike, with file line numbers."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.detect import detect_format
from compaction.formats.jsonl import UTF8_BOM, OverlongLine, json_objects, read_lines, read_settled_lines
from compaction.formats.khaelor import KhaelorParser
from compaction.formats.klaude_code import KlaudeCodeParser
from compaction.transcript import LineError, Message, Record, SessionInfo


def claude_code_record(n: int) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n > 1 else None,
        "sessionId": "11111111-2222-3333-4444-555555555555",
        "timestamp": f"2026-01-01T00:00:{n:02d}.000Z",
        "message": {"role": "user", "content": f"prompt {n}"},
    }


def klaude_code_record(n: int) -> dict[str, Any]:
    return {
        "type": "UserMessage",
        "data": {"role": "user", "parts": [{"type": "text", "text": f"prompt {n}"}], "created_at": "2026-01-01"},
    }


def khaelor_record(n: int) -> dict[str, Any]:
    return {"seq": n, "type": "user.message-created", "ts": f"2026-01-01T00:00:{n:02d}.000Z", "payload": {"text": "x"}}


Parser = ClaudeCodeParser | KlaudeCodeParser | KhaelorParser
AGENTS: dict[str, tuple[Callable[..., Parser], Callable[[int], dict[str, Any]]]] = {
    "claude-code": (ClaudeCodeParser, claude_code_record),
    "klaude-code": (KlaudeCodeParser, klaude_code_record),
    "khaelor": (KhaelorParser, khaelor_record),
}


def good(agent: str, n: int) -> bytes:
    return orjson.dumps(AGENTS[agent][1](n)) + b"\n"


def parse(agent: str, lines: list[bytes], **kwargs: Any) -> tuple[Parser, list[Record]]:
    parser = AGENTS[agent][0](**kwargs)
    return parser, list(parser.parse(lines))


def report(agent: str, lines: list[bytes], **kwargs: Any) -> tuple[list[tuple[int, str]], list[int], Any]:
    """(errors, lines that gave a Message, partial_last_line) — what a reader of the import sees."""
    parser, records = parse(agent, lines, **kwargs)
    errors = [(r.line, r.message) for r in records if isinstance(r, LineError)]
    message_lines = sorted({r.line for r in records if isinstance(r, Message)})
    return errors, message_lines, parser.info.data.get("partial_last_line")


def flawed_file(agent: str) -> list[bytes]:
    return [
        UTF8_BOM + good(agent, 1),  # 1: a BOM written by an editor or a Windows tool
        b"\n",  # 2
        b"  \r\n",  # 3
        b"{this is not json\n",  # 4
        b"[1, 2]\n",  # 5
        b'"a string"\n',  # 6
        b"null\n",  # 7
        b"42\n",  # 8
        good(agent, 2),  # 9
        good(agent, 3)[:20],  # 10: still being written
    ]


AGENT_NAMES = list(AGENTS)


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_every_flaw_is_reported_with_its_file_line_number(agent: str) -> None:
    errors, message_lines, partial = report(agent, flawed_file(agent))
    assert [line for line, _ in errors] == [4, 5, 6, 7, 8]
    assert errors[0][1].startswith("not valid JSON: ")
    assert [message for _, message in errors[1:]] == [
        "not a JSON object but an array",
        "not a JSON object but a string",
        "not a JSON object but null",
        "not a JSON object but a number",
    ]
    assert message_lines == [1, 9]  # the BOM line is a record, blank lines are silent
    assert partial == 10


def test_the_three_agents_report_the_same_flaws_in_the_same_words() -> None:
    reports = {agent: report(agent, flawed_file(agent)) for agent in AGENT_NAMES}
    assert reports["claude-code"] == reports["klaude-code"] == reports["khaelor"]


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_only_the_last_line_may_be_partial(agent: str) -> None:
    # A caller that stripped newlines must not turn a broken middle line into a silent "partial" one.
    errors, message_lines, partial = report(agent, [b'{"type": "us', good(agent, 1).rstrip(b"\n")])
    assert [line for line, _ in errors] == [1] and message_lines == [2] and partial is None


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_an_unterminated_last_line_that_parses_is_a_record(agent: str) -> None:
    errors, message_lines, partial = report(agent, [good(agent, 1), good(agent, 2).rstrip(b"\n")])
    assert (errors, message_lines, partial) == ([], [1, 2], None)


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_a_broken_last_line_with_its_newline_is_an_error(agent: str) -> None:
    errors, message_lines, partial = report(agent, [good(agent, 1), b'{"type": "us\n'])
    assert [line for line, _ in errors] == [2] and message_lines == [1] and partial is None


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_numbering_continues_from_first_line_and_a_bom_only_starts_a_file(agent: str) -> None:
    errors, message_lines, _ = report(agent, [b"\n", good(agent, 1), UTF8_BOM + good(agent, 2)], first_line=101)
    assert message_lines == [102] and [line for line, _ in errors] == [103]


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_a_bom_does_not_hide_the_format(agent: str) -> None:
    assert detect_format([UTF8_BOM + good(agent, 1)]) == agent


def test_the_reader_streams_lazily() -> None:
    def endless() -> Any:
        while True:
            yield b'{"a": 1}\n'

    stream = json_objects(endless(), first_line=1, info=SessionInfo(format="any"))
    assert [next(stream) for _ in range(3)] == [
        (1, b'{"a": 1}\n', {"a": 1}),
        (2, b'{"a": 1}\n', {"a": 1}),
        (3, b'{"a": 1}\n', {"a": 1}),
    ]


# -- read_settled_lines: read_lines' lines, a block at a time, with every byte settled --------------------------------


def _settled_read(data: bytes, *, max_line_bytes: int, block_bytes: int) -> tuple[list[Any], bytes, list[bytes]]:
    """(lines as (bytes or over-long size), settled bytes, settled bytes seen by each line when it was yielded)."""
    settled: list[bytes] = []
    lines: list[Any] = []
    seen: list[bytes] = []
    for line in read_settled_lines(
        io.BytesIO(data),
        settle=lambda piece: settled.append(bytes(piece)),
        max_line_bytes=max_line_bytes,
        block_bytes=block_bytes,
    ):
        lines.append(("overlong", line.size) if isinstance(line, OverlongLine) else line)
        seen.append(b"".join(settled))
    return lines, b"".join(settled), seen


def _reference(data: bytes, *, max_line_bytes: int) -> list[Any]:
    return [
        ("overlong", line.size) if isinstance(line, OverlongLine) else line
        for line in read_lines(io.BytesIO(data), max_line_bytes=max_line_bytes)
    ]


_FILE_BYTES = st.lists(
    st.one_of(st.binary(max_size=40), st.sampled_from([b"\n", b"\n\n", b'{"a": 1}\n', b"x" * 30])), max_size=25
).map(b"".join)


@given(data=_FILE_BYTES, max_line_bytes=st.integers(1, 40), block_bytes=st.integers(1, 50))
@settings(max_examples=400, deadline=None)
def test_the_block_reader_yields_what_the_line_reader_does_and_settles_every_byte(
    data: bytes, max_line_bytes: int, block_bytes: int
) -> None:
    lines, settled, seen = _settled_read(data, max_line_bytes=max_line_bytes, block_bytes=block_bytes)
    assert lines == _reference(data, max_line_bytes=max_line_bytes)
    # Every byte is settled, in order, but an unterminated last line that is not over-long (the caller decides).
    tail = lines[-1] if lines and isinstance(lines[-1], bytes) and not lines[-1].endswith(b"\n") else b""
    assert settled + tail == data
    # A line is yielded only once its bytes are settled.
    offset = 0
    for line, before in zip(lines, seen, strict=True):
        offset += line[1] if isinstance(line, tuple) else len(line)
        assert len(before) >= min(offset, len(settled))


def test_an_overlong_line_across_blocks_is_streamed_past_not_held() -> None:
    data = b'{"a": 1}\n' + b"y" * 100 + b"\n" + b'{"b": 2}\n'
    held: list[int] = []
    lines = []
    for line in read_settled_lines(
        io.BytesIO(data), settle=lambda piece: held.append(len(piece)), max_line_bytes=20, block_bytes=16
    ):
        lines.append(line)
    assert lines[0] == b'{"a": 1}\n' and lines[2] == b'{"b": 2}\n'
    assert isinstance(lines[1], OverlongLine) and lines[1].size == 101
    assert max(held) <= 20  # no piece larger than a block or the limit was ever assembled
    assert sum(held) == len(data)
