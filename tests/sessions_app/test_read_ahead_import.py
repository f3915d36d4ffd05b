"""``manage.py import_sessions FILE`` with its read-ahead process (compaction.read_ahead) stores what the import
without one stores, row for row; a read-ahead that is lost or not claimed changes nothing of the import."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from compaction import read_ahead
from compaction.formats.reading import RAW_CHUNK_BYTES, RAW_ZSTD_LEVEL
from sessions_app import models, selectors, services
from tests.compaction.big_files import big_file, claude_line
from tests.conftest import REPO

# Columns that say when a row was written, not what it holds.
WRITTEN_AT = {"created_at", "updated_at", "imported_at"}
TABLES = ("session", "sourcefile", "message", "apicall", "contextevent", "lineissue", "rawchunk")


# manage.py as it runs, with what its read-ahead did written to stderr: started (a process forked), claimed (the
# import stored what it read).
WATCHED_MANAGE = r"""
import runpy, sys
from compaction import read_ahead

start_for_command, claim = read_ahead.start_for_command, read_ahead.claim
seen = {}


def watched_start_for_command(argv):
    start_for_command(argv)
    seen["started"] = read_ahead._pending is not None


def watched_claim(**kwargs):
    seen["claimed"] = (found := claim(**kwargs)) is not None
    return found


read_ahead.start_for_command, read_ahead.claim = watched_start_for_command, watched_claim
try:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print("READ-AHEAD:" + repr(sorted(seen.items())), file=sys.stderr)
"""


def manage(var: Path, *args: str, read_ahead_on: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SESSION_INSPECTOR_READ_AHEAD")}
    env.update(SESSION_INSPECTOR_VAR=str(var), DEBUG="0", SECRET_KEY="test-only-secret-key-" + "x" * 40)
    env["IMPORT_MAX_LINE_BYTES"] = "200000"  # the file's over-long line is a line error in both imports
    if not read_ahead_on:
        env["SESSION_INSPECTOR_READ_AHEAD"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", WATCHED_MANAGE, str(REPO / "manage.py"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def stored_rows(database: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(database) as db:
        rows = {}
        for table in TABLES:
            cursor = db.execute(f"SELECT * FROM sessions_app_{table} ORDER BY id")  # noqa: S608 - our own names
            keep = [i for i, column in enumerate(cursor.description) if column[0] not in WRITTEN_AT]
            rows[table] = [tuple(row[i] for i in keep) for row in cursor.fetchall()]
    return rows


def test_the_read_ahead_import_stores_what_the_import_without_it_stores(tmp_path):
    path = big_file(tmp_path / "s.jsonl", size=read_ahead.MIN_BYTES + 1024 * 1024, tail=b'{"type": "user", "cut')
    (tmp_path / "with").mkdir()
    manage(tmp_path / "with", "migrate", "-v0")
    shutil.copytree(tmp_path / "with", tmp_path / "without")
    ahead_run = manage(tmp_path / "with", "import_sessions", str(path), "--json")
    plain_run = manage(tmp_path / "without", "import_sessions", str(path), "--json", read_ahead_on=False)
    assert "READ-AHEAD:[('claimed', True), ('started', True)]" in ahead_run.stderr  # it really read ahead
    assert "READ-AHEAD:[('claimed', False), ('started', False)]" in plain_run.stderr
    with_ahead, without = json.loads(ahead_run.stdout), json.loads(plain_run.stdout)
    assert with_ahead == without
    (imported,) = with_ahead["imported"]
    assert imported["created"] and imported["lines"] > 1000
    assert [e["line"] for e in imported["errors"]] == [8, 12]  # the bad line and the over-long one
    assert imported["warnings"] and "incomplete" in imported["warnings"][0]
    ours, theirs = stored_rows(tmp_path / "with" / "db.sqlite3"), stored_rows(tmp_path / "without" / "db.sqlite3")
    for table in TABLES:
        assert ours[table] == theirs[table], table
    assert len(ours["rawchunk"]) >= 2 and len(ours["apicall"]) > 500


def _lost_read_ahead(path: Path, *, records: int) -> read_ahead.ReadAhead:
    """A read-ahead whose process sent the first ``records`` records of ``path`` and then died."""
    from compaction.formats import registry
    from compaction.formats.reading import SettledRead

    with path.open("rb", buffering=0) as f:
        read = SettledRead(
            registry.make_parser("claude-code", agent="main", path=path),
            f,
            settle=lambda _: None,
            max_line_bytes=1 << 25,
        )
        sent = [record for _, record in zip(range(records), read.records(), strict=False)]
    read_end, write_end = os.pipe()
    read_ahead._send(write_end, sent)
    os.close(write_end)  # the process is gone: the pipe ends without the last batch
    child = subprocess.Popen(["true"])  # a process to reap, as a read-ahead's is
    stat = path.stat()
    plan = read_ahead.Plan(
        path=str(path.resolve()),
        device=stat.st_dev,
        inode=stat.st_ino,
        size=stat.st_size,
        fmt="claude-code",
        agent="main",
        max_line_bytes=services.limit("IMPORT_MAX_LINE_BYTES"),
        chunk_bytes=RAW_CHUNK_BYTES,
        zstd_level=RAW_ZSTD_LEVEL,
    )
    return read_ahead.ReadAhead(plan, pid=child.pid, fd=read_end)


@pytest.mark.django_db(transaction=True)  # the fallback runs in a fresh transaction; the writer threads really run
def test_a_lost_read_ahead_is_read_again_here_and_nothing_of_it_is_kept(tmp_path, monkeypatch, caplog):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(claude_line(n, f"line {n}") for n in range(40)))
    monkeypatch.setattr(read_ahead, "_pending", _lost_read_ahead(path, records=15))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.created and outcome.lines == 40
    assert read_ahead._pending is None
    assert "read-ahead" in caplog.text and "lost" in caplog.text
    session = models.Session.objects.get(pk=outcome.session)
    assert models.Session.objects.count() == 1 and models.SourceFile.objects.count() == 1
    assert list(models.Message.objects.filter(session=session).values_list("line", flat=True)) == list(range(1, 41))
    file = models.SourceFile.objects.get(session=session)
    assert b"".join(selectors.read_raw(file=file)) == path.read_bytes()
    assert file.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.django_db(transaction=True)
def test_a_read_ahead_of_a_file_imported_before_is_abandoned(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(claude_line(n, f"line {n}") for n in range(40)))
    first = services.import_file(path=path)
    ahead = _lost_read_ahead(path, records=5)
    monkeypatch.setattr(read_ahead, "_pending", ahead)
    again = services.import_file(path=path)
    assert isinstance(again, services.FileImport) and again.session == first.session and again.lines == 0
    # Not claimed: still pending until the command ends, then stopped and reaped.
    assert read_ahead._pending is ahead
    read_ahead.abandon()
    assert read_ahead._pending is None and ahead._pid is None
