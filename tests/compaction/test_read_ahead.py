"""compaction.read_ahead: a file read in a forked process gives what reading it here gives, record for record and byte
for byte; a small file, a subagent file or a file that is no session gets no read-ahead.

A fork wants a process without threads (``start`` refuses otherwise), and the test process may hold some (a live
server of the browser tests): each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compaction import read_ahead
from tests.compaction.big_files import big_file, claude_line
from tests.conftest import REPO

# Reads ``path`` through a read-ahead and here (``SettledRead``), and prints what differs.
COMPARE = r"""
import hashlib, json, sys, zstandard
from pathlib import Path
from compaction import read_ahead
from compaction.formats import registry
from compaction.formats.reading import SettledRead

path, max_line_bytes = Path(sys.argv[1]), int(sys.argv[2])
ahead = read_ahead.start(path, max_line_bytes=max_line_bytes)
if ahead is None:
    print(json.dumps({"started": False}))
    sys.exit()
frames = []
read = ahead.read(on_frame=lambda frame, size: frames.append((frame, size)))
records = list(read.records())
ahead.close()
settled = []
with path.open("rb", buffering=0) as f:
    local = SettledRead(
        registry.make_parser(ahead.plan.fmt, agent=ahead.plan.agent, path=path),
        f,
        settle=lambda piece: settled.append(bytes(piece)),
        max_line_bytes=max_line_bytes,
        block_bytes=ahead.plan.chunk_bytes,
    )
    expected = list(local.records())
stored = b"".join(zstandard.ZstdDecompressor().decompress(frame) for frame, _ in frames)
print(json.dumps({
    "started": True,
    "fmt": ahead.plan.fmt,
    "records": len(records),
    "same_records": records == expected,
    "kinds": sorted({type(r).__name__ for r in records}),
    "same_info": read.info == local.info,
    "lines_read": [read.lines_read, local.lines_read],
    "partial_line": [read.partial_line, local.partial_line],
    "same_bytes": stored == b"".join(settled),
    "frame_sizes": sum(size for _, size in frames) == len(stored) == read.consumed,
    "sha256": read.sha256 == hashlib.sha256(b"".join(settled)).hexdigest(),
    "frames": len(frames),
}))
"""


def run_compare(path: Path, *, max_line_bytes: int = 32 * 1024 * 1024) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", COMPARE, str(path), str(max_line_bytes)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_large_file_reads_the_same_ahead_as_here(tmp_path):
    path = big_file(tmp_path / "s.jsonl", size=read_ahead.MIN_BYTES + 3 * 1024 * 1024)
    result = run_compare(path, max_line_bytes=200_000)
    assert result["started"] and result["fmt"] == "claude-code"
    assert result["same_records"] and result["records"] > 1000
    assert result["kinds"] == ["LineError", "Message"]  # the bad line and the over-long one are line errors
    assert result["same_info"] and result["same_bytes"] and result["frame_sizes"] and result["sha256"]
    assert result["lines_read"][0] == result["lines_read"][1] > 1000
    assert result["frames"] >= 2  # more than one chunk: the frames come in file order


@pytest.mark.parametrize(
    ("tail", "partial"),
    [(b'{"type": "user", "uuid": "cut', True), (claude_line(10**6, "done").rstrip(b"\n"), False)],
    ids=["incomplete-last-line", "unterminated-but-complete"],
)
def test_an_unterminated_last_line_is_decided_as_here(tmp_path, tail, partial):
    path = big_file(tmp_path / "s.jsonl", size=read_ahead.MIN_BYTES, tail=tail)
    result = run_compare(path)
    assert result["same_records"] and result["same_bytes"] and result["sha256"] and result["frame_sizes"]
    assert result["partial_line"][0] == result["partial_line"][1]
    assert (result["partial_line"][0] is not None) is partial
    assert result["lines_read"][0] == result["lines_read"][1]


def test_a_small_file_gets_no_read_ahead(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(claude_line(n, "hi") for n in range(10)))
    assert run_compare(path) == {"started": False}


def test_a_subagent_file_gets_no_read_ahead(tmp_path):
    """Its agent and session are the database's to say (a parent found or not)."""
    folder = tmp_path / "s-1" / "subagents"
    folder.mkdir(parents=True)
    path = big_file(folder / "agent-abc1234.jsonl", size=read_ahead.MIN_BYTES)
    assert run_compare(path) == {"started": False}


def test_a_file_that_is_no_session_gets_no_read_ahead(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"hello": "world"}\n' * (read_ahead.MIN_BYTES // 19 + 1))
    assert run_compare(path) == {"started": False}


@pytest.mark.parametrize(
    "argv",
    [
        ["manage.py", "import_sessions"],
        ["manage.py", "import_sessions", "a.jsonl", "b.jsonl"],
        ["manage.py", "import_sessions", "--settings", "x", "a.jsonl"],
        ["manage.py", "session_stats", "a.jsonl"],
    ],
)
def test_only_the_plain_import_of_one_file_starts_a_read_ahead(argv, tmp_path, monkeypatch):
    started: list[Path] = []
    monkeypatch.setattr(read_ahead, "start", lambda path, **_: started.append(path))
    read_ahead.start_for_command(argv)
    assert started == []
    read_ahead.start_for_command(["manage.py", "import_sessions", str(tmp_path / "a.jsonl"), "--json"])
    assert started == [tmp_path / "a.jsonl"]
    monkeypatch.setenv("SESSION_INSPECTOR_READ_AHEAD", "0")
    read_ahead.start_for_command(["manage.py", "import_sessions", str(tmp_path / "a.jsonl")])
    assert len(started) == 1
    read_ahead.abandon()


def test_batches_wait_for_room_so_memory_stays_bounded():
    import threading

    batches = read_ahead._Batches(10)
    batches.put(b"a" * 6)
    second = threading.Thread(target=batches.put, args=(b"b" * 6,))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # 12 bytes would wait: the filling thread (and so the child) waits
    assert batches.get() == b"a" * 6
    second.join(5)
    assert not second.is_alive() and batches.get() == b"b" * 6
    batches.put(b"c" * 50)  # alone, a batch larger than the room is taken
    third = threading.Thread(target=batches.put, args=(b"d",))
    third.start()
    third.join(0.2)
    assert third.is_alive()
    batches.close()  # an abandoned read-ahead: the waiting thread goes on
    third.join(5)
    assert not third.is_alive()
