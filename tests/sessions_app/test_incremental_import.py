"""Incremental import, proved: a session file written in any batches and imported after each one ends as a one-shot
import of the final file does (issue 34, "Incremental import proved, not assumed").

For every registered agent format, Hypothesis writes a file of that agent's records (``tests/helpers/agent_records``)
the way agents and editors do: a first batch of exactly one record, cuts in the middle of a line completed later
(inside a UTF-8 character, between the CR and LF of a CRLF), blank lines, the file truncated or replaced under the
same name; after each batch it imports through
``import_sessions`` or the watcher's import (``watcher.import_changed``), one or the other at random. What users see
(records, calls and their numbers, events, line errors, the session's columns and statistics, the stored bytes) must
then equal what a single import of the final file stores. A session of several files (Claude Code's transcript and
its subagents' own files) written in batches interleaved in any order must end as one import of its folder stores it.
The watcher itself (watchfiles, its thread and its own connection) then follows one file of every agent at once over
the same kind of schedule.

Derandomized (a fixed seed) and a bounded number of examples: the whole file runs in about 10 s on a 2-core CI
machine. Each bug it found has its own test at the end, which failed before its fix.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.formats import khaelor
from compaction.formats import registry as format_registry
from sessions_app import models, services, watcher
from sessions_app.search_text import FTS_DOCSIZE_TABLE, TSV_TABLE
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.usage_cells import usage_cells
from tests.helpers.agent_records import KINDS, Lines, every_kind_once, record_lines
from tests.helpers.claude_code_lines import assistant
from tests.helpers.live_session import RunningWatcher
from tests.helpers.subagent_sessions import subagent_session

FORMATS = [module.FORMAT for module in format_registry.FORMATS]
PROPERTY = settings(
    # 12 per agent: about 10 s for the whole file on 2 cores. INCR_EXAMPLES=200 for a deeper run by hand.
    max_examples=int(os.environ.get("INCR_EXAMPLES", "12")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The contents the file holds, one after the other; each is written (appended when it extends the previous
    one, rewritten otherwise) and then imported by ``drivers[i]``."""

    contents: list[bytes]
    drivers: list[str]


def with_blank_lines(lines: Lines, blanks: list[int]) -> bytes:
    out = list(lines)
    for at in sorted(blanks, reverse=True):
        out.insert(min(at, len(out)), b"\n")
    return b"".join(out)


@st.composite
def schedules(draw: st.DrawFn, fmt: str) -> Schedule:
    lines = draw(record_lines(fmt))
    for at in draw(st.lists(st.integers(0, len(lines) - 1), max_size=2)):
        # A copy of a record at a time the store refuses (year 0 in UTC): a line the parser reads and the store
        # reports, which later imports read past.
        odd = _with_time(lines[at], "0001-01-01T00:00:00+05:00")
        if odd is not None:
            lines = [*lines[: at + 1], odd, *lines[at + 1 :]]
    if draw(st.booleans()):  # prompts beyond ASCII, as written (not \u-escaped): a cut may fall inside a character
        lines = [line.replace(b"question", "quéstion ✓".encode()) for line in lines]
    if draw(st.booleans()):  # CRLF line ends (a file written on Windows): a cut may fall between the two
        lines = [line[:-1] + b"\r\n" for line in lines]
    final = with_blank_lines(lines, draw(st.lists(st.integers(1, len(lines) + 1), max_size=3)))
    ends = [at + 1 for at, byte in enumerate(final) if byte == ord("\n")]  # where each line ends
    # Inside a UTF-8 character (after its first byte) or a CRLF (after its CR).
    inside = [at for at, byte in enumerate(final) if 0x80 <= byte < 0xC0 or (at and final[at - 1] == ord("\r"))]
    # Cuts at the end of a line (between records: where a reader holding records is caught), inside a character or a
    # CRLF, or anywhere (a line half-written, completed by the next batch).
    anywhere = st.sampled_from(ends) | st.integers(1, len(final))
    cuts = set(draw(st.lists(anywhere | st.sampled_from(inside) if inside else anywhere, max_size=5)))
    if draw(st.booleans()):
        cuts.add(len(lines[0]))  # a first import of exactly one record: the file a live session is first seen as
    cuts.add(len(final))
    ordered = sorted(cuts)
    contents = [final[:cut] for cut in ordered]
    if len(ordered) > 2 and draw(st.booleans()):
        # Truncated under the same name to an earlier length, then written on from there.
        at = draw(st.integers(1, len(ordered) - 2))
        back = draw(st.integers(0, at - 1))
        contents = [*contents[: at + 1], final[: ordered[back]], *contents[back + 1 :]]
    if draw(st.booleans()):
        # Another session of the same agent first stood under this name, then was replaced by this one.
        other = draw(record_lines(fmt))
        contents = [b"".join(other) + b'{"replaced": true}\n', *contents]
    drivers = draw(
        st.lists(st.sampled_from(["import_sessions", "watcher"]), min_size=len(contents), max_size=len(contents))
    )
    return Schedule(contents=contents, drivers=drivers)


def write(path: Path, content: bytes) -> None:
    """Append what extends the file, as an agent does; rewrite it in place (same name, same inode) otherwise."""
    current = path.read_bytes() if path.exists() else b""
    if content.startswith(current):
        with path.open("ab") as f:
            f.write(content[len(current) :])
    else:
        with path.open("r+b") as f:
            f.truncate(0)
            f.write(content)


def import_with(driver: str, path: Path) -> None:
    if driver == "import_sessions":
        call_command("import_sessions", str(path), "--json", stdout=_Discard(), stderr=_Discard())
    else:
        watcher.import_changed(paths=[path])


class _Discard:
    def write(self, _text: str) -> None:
        pass


def _rows(queryset: Any, *exclude: str) -> list[dict[str, Any]]:
    skip = {"id", "session", "session_id", "file", "file_id", *exclude}
    return [{k: v for k, v in row.items() if k not in skip} for row in queryset.values()]


def _unindexed(session: models.Session) -> int:
    table = FTS_DOCSIZE_TABLE if connection.vendor == "sqlite" else TSV_TABLE
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {models.Message._meta.db_table} m WHERE m.session_id = %s "  # noqa: S608
            f"AND NOT EXISTS (SELECT 1 FROM {table} t WHERE t.id = m.id)",
            [session.pk],
        )
        return int(cursor.fetchone()[0])


def _stored_usage_cells(session: models.Session) -> list[dict[str, Any]]:
    """The session's usage cells as stored, which must be those its stored calls and records make now."""

    def key(cell: dict[str, Any]) -> tuple[Any, ...]:
        return (cell["quarter"] is not None, str(cell["quarter"]), cell["model"], cell["side"], cell["long_context"])

    stored = sorted(_rows(models.UsageCell.objects.filter(session=session)), key=key)
    skip = {"_state", "id", "session_id"}
    remade = sorted(
        ({k: v for k, v in vars(c).items() if k not in skip} for c in usage_cells(session=session)), key=key
    )
    assert stored == remade
    return stored


def what_users_see() -> list[dict[str, Any]]:
    """Every stored session, as the pages and the JSON read it: columns, statistics, records, calls, events, line
    errors, the original bytes, and whether its records are in the search index."""
    seen: list[dict[str, Any]] = []
    for session in models.Session.objects.order_by("id"):
        seen.append(
            {
                "session": _rows(models.Session.objects.filter(pk=session.pk), "imported_at", "updated_at")[0],
                "stats": dataclasses.asdict(call_selectors.session_stats(session=session)),
                "records": _rows(models.Message.objects.filter(session=session).order_by("seq")),
                "calls": _rows(models.ApiCall.objects.filter(session=session).order_by("agent", "number")),
                "events": _rows(
                    models.ContextEvent.objects.filter(session=session).order_by("seq", "line", "kind"), "imported_at"
                ),
                "line_errors": _rows(models.LineIssue.objects.filter(session=session).order_by("line", "message")),
                "files": [
                    {
                        **_rows(models.SourceFile.objects.filter(pk=file.pk), "imported_at")[0],
                        "bytes": b"".join(session_selectors.read_raw(file=file)),
                    }
                    for file in models.SourceFile.objects.filter(session=session).order_by("id")
                ],
                "unindexed": _unindexed(session),
                "usage_cells": _stored_usage_cells(session),
            }
        )
    seen.sort(key=lambda one: [file["path"] for file in one["files"]])  # not by id: in the order of their files
    return orjson.loads(orjson.dumps(seen, default=str))  # one form for both sides (times, floats, bytes)


def forget_everything() -> None:
    models.Session.objects.all().delete()


def one_shot(path: Path) -> list[dict[str, Any]]:
    forget_everything()
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    return what_users_see()


def check_schedule(path: Path, schedule: Schedule, importer: Callable[[str, Path], None]) -> None:
    forget_everything()
    if path.exists():
        path.unlink()
    for content, driver in zip(schedule.contents, schedule.drivers, strict=True):
        write(path, content)
        importer(driver, path)
    grown = what_users_see()
    assert grown == one_shot(path)


def test_every_registered_format_has_a_generator() -> None:
    assert sorted(FORMATS) == sorted(KINDS)


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FORMATS)
@PROPERTY
@given(data=st.data())
def test_imports_after_each_batch_end_as_one_import_of_the_final_file(tmp_path, fmt, data) -> None:
    schedule = data.draw(schedules(fmt))
    check_schedule(tmp_path / "session.jsonl", schedule, import_with)


@pytest.mark.django_db(transaction=True)  # the watcher's thread has its own connection: it sees committed rows only
def test_the_running_watcher_ends_as_one_import_of_each_final_file(tmp_path) -> None:
    """The watcher itself (watchfiles on a folder, its thread) following one file of every agent at once, each holding
    every kind of its records: first one record, then a line cut in its middle, the rest of it and more, the file
    truncated under the same name, then written to its end."""
    root = tmp_path / "agent"
    root.mkdir()
    schedules: dict[Path, list[bytes]] = {}
    for fmt in FORMATS:
        lines = every_kind_once(fmt)
        final = with_blank_lines(lines, [2])
        ends = [at + 1 for at, byte in enumerate(final) if byte == ord("\n")]
        schedules[root / f"{fmt}.jsonl"] = [lines[0], final[: ends[4] + 9], final[: ends[6]], final[: ends[3]], final]
    running = RunningWatcher(root)
    running.thread.start()
    try:
        running.wait_for(lambda: running.passes >= 1)  # caught up with the empty folder
        for step in range(len(next(iter(schedules.values())))):
            passes = running.passes
            for path, contents in schedules.items():
                write(path, contents[step])
            running.wait_for_pass_after(passes)
        stored = models.SourceFile.objects.order_by("path")
        final_sizes = sorted((str(path.resolve()), len(contents[-1])) for path, contents in schedules.items())
        running.wait_for(lambda: list(stored.values_list("path", "size")) == final_sizes)
    finally:
        running.stop.set()
        running.thread.join(timeout=10)
    assert not running.thread.is_alive()
    grown = what_users_see()
    forget_everything()
    for path in schedules:
        assert isinstance(services.import_file(path=path), services.FileImport)
    assert grown == what_users_see()


@st.composite
def folder_schedules(draw: st.DrawFn, files: dict[Path, bytes]) -> list[tuple[Path, bytes, str]]:
    """A session of several files (a main transcript and its subagents' files) written as agents write them: each
    file in batches (a first one of exactly one record, or of half a line, cuts anywhere), the files' batches
    interleaved in any order, the main file's first batch not necessarily first. Each step: (file, its content
    then, the importer)."""
    batches: list[list[bytes]] = []
    for content in files.values():
        ends = [at + 1 for at, byte in enumerate(content) if byte == ord("\n")]
        cuts = set(draw(st.lists(st.sampled_from(ends) | st.integers(1, len(content)), max_size=3)))
        cuts.add(draw(st.sampled_from([ends[0], ends[0] // 2])))  # one record, or none yet (its first half)
        cuts.add(len(content))
        batches.append([content[:cut] for cut in sorted(cuts)])
    order = draw(st.permutations([n for n, steps in enumerate(batches) for _ in steps]))
    paths = list(files)
    taken = [0] * len(batches)
    steps = []
    for n in order:
        steps.append((paths[n], batches[n][taken[n]], draw(st.sampled_from(["import_sessions", "watcher"]))))
        taken[n] += 1
    return steps


def _in_file_order(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``what_users_see`` without ``seq``, the session-wide record order, which follows the order files were imported
    in (a subagent's lines read before or after its parent's later ones): each row by its content (its file, line,
    agent) instead, and the files by their path."""
    for one in seen:
        for key in ("records", "calls", "events"):
            rows = [{k: v for k, v in row.items() if k != "seq"} for row in one[key]]
            one[key] = sorted(rows, key=lambda row: orjson.dumps(row, option=orjson.OPT_SORT_KEYS))
        one["files"].sort(key=lambda file: file["path"])  # stored in the order they came
    return seen


@pytest.mark.django_db
@PROPERTY
@given(data=st.data())
def test_a_session_of_several_files_written_in_any_order_ends_as_one_import_of_its_folder(tmp_path, data) -> None:
    """Claude Code's main transcript and its subagents' own files (one that also reached the parent only as its
    ``agent_progress`` copies, the compaction request's), each written in batches, interleaved in any order: the
    session ends as one import of the folder stores it (the gap in which a subagent file imported before its parent
    stayed a session of its own)."""
    forget_everything()
    example = Path(tempfile.mkdtemp(dir=tmp_path))  # tmp_path is the test's, shared by its examples
    source, live = example / "source", example / "live"
    source.mkdir()
    subagent_session(source)
    final = {path.relative_to(source): path.read_bytes() for path in sorted(source.rglob("*.jsonl"))}
    for relative, content, driver in data.draw(folder_schedules({live / r: c for r, c in final.items()})):
        relative.parent.mkdir(parents=True, exist_ok=True)
        write(relative, content)
        import_with(driver, relative)
    grown = _in_file_order(what_users_see())
    forget_everything()
    services.import_paths(paths=[live])
    assert grown == _in_file_order(what_users_see())


# ----------------------------------------------------------------------------------------------- what it found


@pytest.mark.django_db
def test_a_rewritten_file_leaves_nothing_of_what_its_old_content_said(tmp_path) -> None:
    """Found by the property: a main file rewritten in place kept the session's columns its new content does not
    set (here the context window, from the old content's token count), as no import of the new content has them."""
    lines = every_kind_once("codex")
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(lines))
    services.import_file(path=path)
    assert models.Session.objects.get().context_window == 258400
    path.write_bytes(lines[0])  # the session's first record only, under the same name
    services.import_file(path=path)
    grown = what_users_see()
    assert grown[0]["session"]["context_window"] is None
    assert grown == one_shot(path)


@pytest.mark.django_db
def test_response_items_imported_before_their_token_count_get_their_call_when_it_arrives(tmp_path) -> None:
    """Found by the property: Codex (0.92 on) writes a response's items before its call's token count, and its
    reader holds them until the count comes. An import that ended between the two stored them without a call, and
    the next import, storing only new lines, left them so: the transcript showed the items of no call and the call
    started at the token count's row."""
    lines = every_kind_once("codex")
    call_line = next(n for n, line in enumerate(lines) if b'"function_call"' in line)
    count_line = next(n for n, line in enumerate(lines) if b"token_count" in line and n > call_line)
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(lines[:count_line]))  # the items, not yet their count
    services.import_file(path=path)
    path.write_bytes(b"".join(lines))
    services.import_file(path=path)
    grown = what_users_see()
    item = next(r for r in grown[0]["records"] if r["line"] == call_line + 1)
    assert item["call_number"] is not None
    [call] = [c for c in grown[0]["calls"] if c["number"] == item["call_number"]]
    assert call["seq"] <= item["seq"]  # the call starts at its first item, not at its token count's row
    assert grown == one_shot(path)


def _with_time(line: bytes, value: str) -> bytes | None:
    """``line`` with its record's time set to ``value`` (each agent's own field), or None if it records none."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None  # the generator's line error
    for holder, key in ((record, "timestamp"), (record, "ts"), (record.get("data"), "created_at")):
        if isinstance(holder, dict) and key in holder:
            holder[key] = value
            return orjson.dumps(record) + b"\n"
    return None


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("odd", ["9999-99-99", "+275760-09-13T00:00:00Z", "0001-01-01T00:00:00+05:00"])
def test_an_unreadable_time_in_the_last_record_leaves_the_session_its_readable_start_and_end(tmp_path, fmt, odd):
    """Found growing hostile samples: a session's start and end were its first and last time as written, readable or
    not. An unreadable one (a string that sorts after every time, a year past 9999, one before year 1 in UTC) blanked
    the end (or the start), so the duration, on a one-shot import; an import that had read the lines before it kept
    the old end, so the two disagreed."""
    lines = every_kind_once(fmt)
    odd_line = next(changed for line in reversed(lines) if (changed := _with_time(line, odd)) is not None)
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(lines))
    services.import_file(path=path)
    readable = models.Session.objects.values_list("started_at", "ended_at").get()
    assert None not in readable
    path.write_bytes(b"".join([*lines, odd_line]))
    services.import_file(path=path)
    grown = what_users_see()
    assert grown == one_shot(path)
    assert models.Session.objects.values_list("started_at", "ended_at").get() == readable


def _nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return value


def _unstorable_reply(fmt: str) -> bytes:
    """A reply of ``fmt`` that its parser reads but the store refuses: Claude Code's with recorded usage (a call) at a
    time no database holds, KHAELOR's text block (a call of a log without usage) nested deeper than orjson writes."""
    if fmt == "claude-code":
        record = orjson.loads(assistant("a9", "u0", "msg_9", "odd", ctx=2000))
        record["timestamp"] = "0001-01-01T00:00:00+05:00"  # year 0 in UTC
        return orjson.dumps(record) + b"\n"
    event = {"seq": 90, "type": khaelor.MODEL_TEXT_BLOCK, "ts": "2026-10-02T09:01:30.000Z", "sessionId": "k-1"}
    return json.dumps({**event, "payload": {"text": "odd", "extra": _nested(300)}}).encode() + b"\n"  # not orjson


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["claude-code", "khaelor"])
def test_a_line_the_store_refused_is_no_call_when_later_imports_read_past_it(tmp_path, fmt) -> None:
    """Found growing hostile samples: a record the store refused (its line's error) fed no call when its line was new,
    but the next import, reading past the lines stored before, fed it to the call tracker: every later call (and
    every event "after call N") was numbered one higher than a one-shot import of the file numbers it."""
    lines = [line for line in every_kind_once(fmt) if khaelor.MODEL_USAGE.encode() not in line]  # KHAELOR: no usage
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join([*lines[:3], _unstorable_reply(fmt)]))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    assert [(e["line"], e["message"][:22]) for e in outcome.errors] == [(4, "cannot store this reco")]
    path.write_bytes(b"".join([*lines[:3], _unstorable_reply(fmt), *lines[3:]]))
    services.import_file(path=path)
    assert what_users_see() == one_shot(path)
