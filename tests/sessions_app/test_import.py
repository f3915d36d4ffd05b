"""Import service: bad input, idempotency, incremental import, atomicity."""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime, timedelta, timezone

import pytest
import zstandard
from django.db import IntegrityError, connection, connections, transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app import models, services
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import sessions as session_selectors
from tests.helpers.claude_code_lines import assistant, small_session, subagent_prompt, user, write

pytestmark = pytest.mark.django_db


def test_import_creates_one_session_with_calls(tmp_path):
    outcome = services.import_file(path=small_session(tmp_path))
    assert isinstance(outcome, services.FileImport)
    assert outcome.created and outcome.lines == 4 and outcome.errors == []
    session = models.Session.objects.get(pk=outcome.session)
    assert session.api_calls_main == 2
    assert session.peak_context == 1500
    assert session.project == "/home/me/proj"
    assert models.RawChunk.objects.filter(file__session=session).exists()


def test_original_bytes_are_kept(tmp_path):
    path = small_session(tmp_path)
    outcome = services.import_file(path=path)
    file = models.SourceFile.objects.get(session_id=outcome.session)
    assert b"".join(session_selectors.read_raw(file=file)) == path.read_bytes()
    assert all(bytes(c.data).startswith(zstandard.FRAME_HEADER) for c in models.RawChunk.objects.filter(file=file))


def test_original_bytes_stored_by_earlier_versions_still_read(tmp_path):
    """Chunks stored before zstd are zlib streams; a file may hold both once a grown file is imported again."""
    path = small_session(tmp_path)
    services.import_file(path=path)
    path.write_bytes(path.read_bytes() + user("u3", "a2", "and more").encode())
    outcome = services.import_file(path=path)
    file = models.SourceFile.objects.get(session_id=outcome.session)
    first = models.RawChunk.objects.filter(file=file).order_by("index").first()
    assert first is not None and models.RawChunk.objects.filter(file=file).count() == 2
    first.data = zlib.compress(zstandard.ZstdDecompressor().decompress(bytes(first.data)), 1)
    first.save()
    assert b"".join(session_selectors.read_raw(file=file)) == path.read_bytes()


@pytest.mark.django_db(transaction=True)  # the compressor's thread and PostgreSQL's writer thread really run
def test_chunks_compressed_out_of_step_are_stored_in_file_order(tmp_path, monkeypatch):
    """Chunks go to the database as the compressor's thread finishes them, while the file is still being read: some
    are done when the next chunk fills, some not. Whatever the timing, they are stored in order, each once, and read
    back as the file, also after an append."""
    import time

    monkeypatch.setattr(services, "RAW_CHUNK_BYTES", 2048)
    monkeypatch.setattr(services, "RAW_JOBS_IN_FLIGHT", 3)
    compress = services._hash_and_compress
    delays = iter([0.05, 0, 0, 0.03, 0, 0.02] * 100)

    def slow_sometimes(*args):
        time.sleep(next(delays))
        return compress(*args)

    monkeypatch.setattr(services, "_hash_and_compress", slow_sometimes)
    lines = []
    for n in range(1, 41):
        lines += [user(f"u{n}", f"a{n - 1}" if n > 1 else None, f"question {n} " * 20)]
        lines += [assistant(f"a{n}", f"u{n}", f"msg_{n}", f"answer {n} " * 20, ctx=1000 + n)]
    path = write(tmp_path, "s.jsonl", *lines[:50])
    first = services.import_file(path=path)
    path.write_bytes(path.read_bytes() + "".join(lines[50:]).encode())
    second = services.import_file(path=path)
    assert isinstance(second, services.FileImport) and second.lines == 30 and second.session == first.session
    file = models.SourceFile.objects.get(session_id=first.session)
    indexes = list(models.RawChunk.objects.filter(file=file).order_by("index").values_list("index", flat=True))
    assert indexes == list(range(len(indexes))) and len(indexes) > 2 * 3  # more chunks than may wait at once
    assert b"".join(session_selectors.read_raw(file=file)) == path.read_bytes()


def test_an_import_leaves_the_cyclic_collector_as_it_found_it(tmp_path, monkeypatch):
    """The parse and the summary after it run without the cyclic collector; a worker that imports for days must get
    it back, and a failed parse must not leave it off."""
    import gc

    seen: list[bool] = []
    parse, finish = services._FileWriter._consume, services._FileWriter.finish

    def watching(self, read):
        seen.append(gc.isenabled())
        return parse(self, read)

    def watching_finish(self, info):
        seen.append(gc.isenabled())
        return finish(self, info)

    monkeypatch.setattr(services._FileWriter, "_consume", watching)
    monkeypatch.setattr(services._FileWriter, "finish", watching_finish)
    assert gc.isenabled()
    services.import_file(path=small_session(tmp_path))
    assert seen == [False, False] and gc.isenabled()
    monkeypatch.setattr(services._FileWriter, "_index_for_search", lambda self: 1 / 0)
    outcome = services.import_file(path=write(tmp_path, "b.jsonl", user("x1", None, "other")))
    assert isinstance(outcome, services.Rejected) and gc.isenabled()
    gc.disable()
    try:
        services.import_file(path=write(tmp_path, "c.jsonl", user("y1", None, "third")))
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_same_file_twice_is_one_session(tmp_path):
    path = small_session(tmp_path)
    first = services.import_file(path=path)
    second = services.import_file(path=path)
    assert second.created is False and second.lines == 0
    assert second.session == first.session
    assert models.Session.objects.count() == 1
    assert models.Message.objects.count() == 4


def test_same_content_under_another_name_is_one_session(tmp_path):
    path = small_session(tmp_path)
    services.import_file(path=path)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    again = services.import_file(path=copy)
    assert again.created is False
    assert models.Session.objects.count() == 1


def test_grown_file_imports_only_new_lines(tmp_path):
    path = small_session(tmp_path)
    first = services.import_file(path=path)
    with path.open("a") as f:
        f.write(user("u3", "a2", "and more"))
        f.write(assistant("a3", "u3", "msg_3", "ok", ctx=2500))
    second = services.import_file(path=path)
    assert second.session == first.session and second.created is False
    assert second.lines == 2
    session = models.Session.objects.get(pk=first.session)
    assert session.api_calls_main == 3 and session.peak_context == 2500
    assert list(models.Message.objects.filter(session=session).values_list("line", flat=True)) == [1, 2, 3, 4, 5, 6]
    file = models.SourceFile.objects.get(session=session)
    assert b"".join(session_selectors.read_raw(file=file)) == path.read_bytes()


def test_a_session_first_seen_with_one_record_grows(tmp_path):
    """A live session is usually first seen right after the agent wrote its first record (issue 34, item 1): its
    next lines are numbered after it, not on top of it."""
    path = write(tmp_path, "s.jsonl", user("u1", None, "hello"))
    first = services.import_file(path=path)
    assert isinstance(first, services.FileImport) and first.created
    for n in range(2, 5):
        with path.open("a") as f:
            f.write(assistant(f"a{n}", "u1", f"msg_{n}", "hi", ctx=1000 * n))
        grown = services.import_file(path=path)
        assert isinstance(grown, services.FileImport), grown
        assert grown.session == first.session and grown.errors == []
    seqs = list(models.Message.objects.filter(session_id=first.session).order_by("seq").values_list("seq", flat=True))
    assert seqs == [0, 1, 2, 3]
    session = models.Session.objects.get(pk=first.session)
    assert session.api_calls_main == 3 and (session.peak_call, session.peak_context) == (3, 4000)


def test_response_split_across_imports_keeps_max_output(tmp_path):
    path = write(tmp_path, "s.jsonl", user("u1", None, "hello"), assistant("a1", "u1", "msg_1", "part", ctx=900, out=2))
    first = services.import_file(path=path)
    with path.open("a") as f:
        f.write(assistant("a1b", "a1", "msg_1", "rest", ctx=900, out=77))
    services.import_file(path=path)
    call = models.ApiCall.objects.get(session_id=first.session)
    assert call.output_tokens == 77
    assert models.ApiCall.objects.filter(session_id=first.session).count() == 1


def test_an_append_rewrites_only_the_calls_it_changes(tmp_path):
    """A live session grows a line at a time: its earlier calls are not written again (one UPDATE per append for
    the one call a split response raised, none otherwise)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    path = small_session(tmp_path)
    services.import_file(path=path)
    with path.open("a") as f:
        f.write(user("u3", "a2", "and more"))
    with CaptureQueriesContext(connection) as queries:
        services.import_file(path=path)
    assert not [q for q in queries.captured_queries if q["sql"].startswith('UPDATE "sessions_app_apicall"')]
    with path.open("a") as f:
        f.write(assistant("a2b", "a2", "msg_2", "the rest", ctx=1500, out=90))  # msg_2's last line: more output
    with CaptureQueriesContext(connection) as queries:
        services.import_file(path=path)
    updates = [q for q in queries.captured_queries if q["sql"].startswith('UPDATE "sessions_app_apicall"')]
    assert len(updates) == 1
    assert models.ApiCall.objects.get(key="msg_2").output_tokens == 90
    assert models.ApiCall.objects.get(key="msg_1").output_tokens == 5


def test_changed_file_is_replaced_not_duplicated(tmp_path):
    path = small_session(tmp_path)
    first = services.import_file(path=path)
    path.write_text(user("u1", None, "rewritten") + assistant("a1", "u1", "msg_9", "x", ctx=700))
    second = services.import_file(path=path)
    assert second.session == first.session
    assert models.Message.objects.filter(session_id=first.session).count() == 2
    assert models.Session.objects.get(pk=first.session).peak_context == 700


def test_partial_last_line_is_tolerated_then_completed(tmp_path):
    complete = assistant("a2", "u2", "msg_2", "sure", ctx=1500)
    path = write(tmp_path, "s.jsonl", user("u1", None, "hello"), user("u2", "u1", "x"), complete[:40])
    first = services.import_file(path=path)
    assert first.errors == [] and first.lines == 2
    path.write_text(user("u1", None, "hello") + user("u2", "u1", "x") + complete)
    second = services.import_file(path=path)
    assert second.lines == 1 and second.errors == []
    assert models.Session.objects.get(pk=first.session).peak_context == 1500


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ("{not json\n", "JSON"),
        ("[1, 2, 3]\n", "object"),
        ('"just a string"\n', "object"),
        (json.dumps({"type": "assistant", "uuid": "x", "message": "oops"}) + "\n", "message"),
        (json.dumps({"type": "user", "uuid": "y", "message": {"role": "user", "content": 42}}) + "\n", "content"),
    ],
)
def test_bad_line_reported_with_its_number_and_rest_imports(tmp_path, bad_line, expected):
    path = write(
        tmp_path, "s.jsonl", user("u1", None, "hello"), bad_line, assistant("a1", "u1", "msg_1", "hi", ctx=1000)
    )
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    assert [e["line"] for e in outcome.errors] == [2]
    assert expected.lower() in outcome.errors[0]["message"].lower()
    session = models.Session.objects.get(pk=outcome.session)
    assert session.api_calls_main == 1 and session.line_errors == 1
    assert models.LineIssue.objects.get(session=session).line == 2


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "binary"),
        (b'[{"type": "user"}, {"type": "assistant"}]', "array"),
        (b'{"name": "a", "price": 3}\n{"name": "b", "price": 4}\n', "unrelated"),
    ],
)
def test_not_a_session_is_rejected_whole(tmp_path, content, why):
    path = tmp_path / "thing.jsonl"
    path.write_bytes(content)
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.Rejected)
    assert why in outcome.message.lower()
    assert models.Session.objects.count() == 0
    assert models.SourceFile.objects.count() == 0


def test_crash_in_the_middle_leaves_the_database_as_before(tmp_path, monkeypatch):
    services.import_file(path=small_session(tmp_path))
    before = (models.Session.objects.count(), models.Message.objects.count(), models.RawChunk.objects.count())
    lines = [user("v0", None, "start")] + [
        assistant(f"b{i}", "v0", f"msg_b{i}", "x" * 50, ctx=1000 + i) for i in range(services.BATCH + 10)
    ]
    big = write(tmp_path, "big.jsonl", *lines)
    calls = {"n": 0}
    real_flush = services._FileWriter._flush_messages

    def failing_flush(self):
        calls["n"] += 1
        if calls["n"] == 2:  # after the first batch has been written
            raise RuntimeError("disk on fire")
        real_flush(self)

    monkeypatch.setattr(services._FileWriter, "_flush_messages", failing_flush)
    outcome = services.import_file(path=big)
    assert isinstance(outcome, services.Rejected)
    assert "nothing of it was kept" in outcome.message and "disk on fire" in outcome.message
    after = (models.Session.objects.count(), models.Message.objects.count(), models.RawChunk.objects.count())
    assert after == before


def test_a_failing_file_does_not_stop_the_others(tmp_path, monkeypatch):
    good = small_session(tmp_path)
    bad = write(tmp_path, "bad.jsonl", user("x1", None, "boom"))
    real = services._make_parser

    def parser_for(fmt, *, agent, path):
        if path.name == "bad.jsonl":
            raise KeyError("a parser bug")
        return real(fmt, agent=agent, path=path)

    monkeypatch.setattr(services, "_make_parser", parser_for)
    report = services.import_paths(paths=[bad, good])
    assert [r.path.rsplit("/", 1)[-1] for r in report.rejected] == ["bad.jsonl"]
    assert [i.path.rsplit("/", 1)[-1] for i in report.imported] == ["s-1.jsonl"]


def test_nul_characters_in_a_transcript_are_stored_safely(tmp_path):
    # PostgreSQL text and jsonb refuse NUL; the JSON escape \u0000 decodes to one.
    line = json.loads(user("u1", None, "a\u0000b"))
    line["cwd"] = "/home/\u0000me"
    path = write(tmp_path, "nul.jsonl", json.dumps(line) + "\n", assistant("a1", "u1", "msg_1", "ok", ctx=10))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.errors == []
    assert models.Session.objects.get(pk=outcome.session).project == "/home/\ufffdme"


def test_folder_import_attaches_subagents_to_their_parent(tmp_path):
    project = tmp_path / "-home-me-proj"
    (project / "s-1" / "subagents").mkdir(parents=True)
    small = small_session(tmp_path)
    (project / "s-1.jsonl").write_bytes(small.read_bytes())
    sub = project / "s-1" / "subagents" / "agent-abc1234.jsonl"
    sub.write_text(
        subagent_prompt("do a thing")
        + json.dumps(
            {
                **json.loads(assistant("sa1", "su1", "msg_s1", "done", ctx=4321)),
                "isSidechain": True,
                "agentId": "abc1234",
            }
        )
        + "\n"
    )
    report = services.import_paths(paths=[project])
    assert report.rejected == []
    sessions = {item.session for item in report.imported}
    assert len(sessions) == 1
    stats = call_selectors.session_stats(session=models.Session.objects.get()).as_json()
    assert stats["api_calls"] == {"main": 2, "side": 1}
    assert stats["max_context"] == {"main": 1500, "side": 4321}


def test_timestamps_are_stored_as_djangos_sqlite_backend_stores_them() -> None:
    """The import adapts timestamps for SQLite itself (per value, Django's adapter cost 30 ms on 16,000 records):
    the same text as Django's, for any offset and precision."""
    from datetime import datetime, timedelta, timezone

    from django.db import connection

    from sessions_app.services import _sqlite_utc_text

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's adaptation")
    for text in ("2025-01-02T03:04:05Z", "2025-01-02T03:04:05.123456+05:30", "2025-12-31T23:59:59.5-08:00"):
        moment = services.parse_timestamp(text)
        assert moment is not None
        assert _sqlite_utc_text(moment) == connection.ops.adapt_datetimefield_value(moment), text
    odd = datetime(2024, 2, 29, 0, 0, tzinfo=timezone(timedelta(hours=14)))
    assert _sqlite_utc_text(odd) == connection.ops.adapt_datetimefield_value(odd) == "2024-02-28 10:00:00"
    assert _sqlite_utc_text(None) is None
    assert services._sqlite_time_text(None) is None


def _djangos_sqlite_text(value: str | None) -> str | None:
    """What Django's SQLite backend stores for the time an agent wrote (the reference), or ValueError."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's adaptation")
    return connection.ops.adapt_datetimefield_value(services._timestamp(value))


_MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)  # a day inside the range: an offset may carry a time over its edge, which the reference refuses too


@settings(max_examples=400, deadline=None)
@given(
    moment=_MOMENTS,
    form=st.sampled_from(["ms-z", "whole-ms-z", "us-z", "s-z", "offset", "space"]),
    offset_minutes=st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_an_agents_time_is_stored_as_djangos_sqlite_backend_stores_it(moment, form, offset_minutes) -> None:
    """The import reads the SQLite text of the usual form ("...T03:04:05.678Z") off the string: the same text as
    Django's adapter of the parsed time, in that form and in every other, and the same refusal."""
    if form == "whole-ms-z":
        moment = moment.replace(microsecond=0)
    utc = moment.replace(tzinfo=None)
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    text = {
        "ms-z": utc.isoformat(timespec="milliseconds") + "Z",
        "whole-ms-z": utc.isoformat(timespec="milliseconds") + "Z",
        "us-z": utc.isoformat(timespec="microseconds") + "Z",
        "s-z": utc.isoformat(timespec="seconds") + "Z",
        "offset": local.isoformat(),
        "space": local.isoformat(" ", timespec="milliseconds"),
    }[form]
    assert services._sqlite_time_text(text) == _djangos_sqlite_text(text), text


@settings(max_examples=300, deadline=None)
@given(
    st.from_regex(r"\A[0-9]{4}-[0-9W]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[Zz+]?\Z")
    | st.text(max_size=30)
)
def test_an_odd_time_is_stored_as_djangos_sqlite_backend_stores_it(text) -> None:
    """Invalid digits, week dates, a lower-case zone, text: the quick reading must never differ from the reference
    (a time it cannot read is no time, one no database holds is refused)."""
    try:
        expected = _djangos_sqlite_text(text)
    except ValueError:
        with pytest.raises(ValueError):
            services._sqlite_time_text(text)
        return
    assert services._sqlite_time_text(text) == expected


@pytest.mark.django_db(transaction=True)
def test_an_import_checks_its_foreign_keys_as_its_rows_arrive():
    """PostgreSQL (Django's keys are deferred): a row naming a missing file fails at once, inside the import's
    transaction, not at its commit; SQLite checks deferred keys at the commit, which it does quickly. A raw chunk's
    key to its file is checked; a record's and a call's keys are not (models.Message.session)."""
    session = models.Session.objects.create(format="claude-code")
    file = models.SourceFile.objects.create(session=session, agent="main", path="x.jsonl", sha256="")
    with pytest.raises(IntegrityError), transaction.atomic():
        services._check_constraints_as_rows_arrive()
        writes = services._Writes(connections["default"])  # the wrapper: the writer thread uses this connection
        try:
            writes.submit(models.RawChunk, services.RAW_COLUMNS, [(file.pk + 1000, 0, b"zstd")])
            writes.drain()
        finally:
            writes.close()
        if connection.vendor == "postgresql":
            pytest.fail("the row was accepted: its foreign key was not checked when it arrived")
    assert not models.RawChunk.objects.exists()


def test_a_files_records_and_calls_go_with_it(tmp_path):
    """The database checks neither key of a record or a call (models.Message): deleting a file through the ORM
    still deletes what it contributed, and deleting a session deletes all of it and nothing of another."""
    first = services.import_file(path=small_session(tmp_path))
    other = services.import_file(
        path=write(tmp_path, "t.jsonl", user("v1", None, "another"), assistant("v2", "v1", "msg_v", "ok", ctx=800))
    )
    third = services.import_file(
        path=write(tmp_path, "w.jsonl", user("w1", None, "a third"), assistant("w2", "w1", "msg_w", "yes", ctx=900))
    )
    file = models.SourceFile.objects.get(session_id=first.session)
    assert models.Message.objects.filter(file=file).exists() and models.ApiCall.objects.filter(file=file).exists()
    file.delete()
    assert not models.Message.objects.filter(file_id=file.pk).exists()
    assert not models.ApiCall.objects.filter(file_id=file.pk).exists()
    kept = {model: model.objects.filter(session_id=third.session).count() for model in (models.Message, models.ApiCall)}
    assert all(kept.values())
    assert models.ApiCall.objects.filter(session_id=other.session).exists()
    models.Session.objects.filter(pk=other.session).delete()
    for model in (models.Message, models.ApiCall, models.SourceFile):
        assert not model.objects.filter(session_id=other.session).exists()
    assert not models.RawChunk.objects.filter(file__session_id=other.session).exists()
    assert {model: model.objects.filter(session_id=third.session).count() for model in kept} == kept


# A session of many calls: the import keeps only the calls still open (``services.OPEN_CALLS``), storing and tallying
# the others as they close, so its memory does not grow with the calls (issue 34: 525,000 calls took 728 MB).


def test_an_import_keeps_only_its_open_calls_and_stores_them_as_one_import_would(tmp_path, monkeypatch):
    most_open: list[int] = []

    class Watched(services.CallTracker):
        def add(self, message):
            started = super().add(message)
            most_open.append(self.open_calls)
            return started

    monkeypatch.setattr(services, "OPEN_CALLS", 2)
    monkeypatch.setattr(services, "CallTracker", Watched)
    lines = [user("u0", None, "start")]
    for n in range(1, 25):
        lines.append(assistant(f"a{n}", f"u{n - 1}", f"msg_{n}", f"reply {n}", ctx=100 + n, out=n))
        lines.append(user(f"u{n}", f"a{n}", f"prompt {n}"))
    outcome = services.import_file(path=write(tmp_path, "many.jsonl", *lines))
    assert max(most_open) <= 2 * 2 + 1  # closed down to OPEN_CALLS past twice as many
    session = models.Session.objects.get(pk=outcome.session)
    calls = list(models.ApiCall.objects.filter(session=session).order_by("number").values_list("number", "key", "seq"))
    seqs = dict(models.Message.objects.filter(session=session, kind="assistant").values_list("uuid", "seq"))
    assert calls == [(n, f"msg_{n}", seqs[f"a{n}"]) for n in range(1, 25)]
    assert session.api_calls_main == 24 and session.peak_context == 124 and session.peak_call == 24


def test_a_line_of_a_call_closed_already_raises_its_stored_output(tmp_path, monkeypatch):
    """A log interleaving more responses than are kept open: the late line still raises the stored output, and the
    session's summary (then read back from its rows) counts it."""
    monkeypatch.setattr(services, "OPEN_CALLS", 1)
    lines = [user("u0", None, "start"), assistant("a1", "u0", "msg_1", "first", ctx=100, out=5)]
    for n in range(2, 6):
        lines.append(assistant(f"a{n}", f"a{n - 1}", f"msg_{n}", f"reply {n}", ctx=100 + n, out=1))
    lines.append(assistant("a1b", "a5", "msg_1", "first, its last block", ctx=100, out=500))
    outcome = services.import_file(path=write(tmp_path, "late.jsonl", *lines))
    session = models.Session.objects.get(pk=outcome.session)
    first = models.ApiCall.objects.get(session=session, number=1)
    assert first.key == "msg_1" and first.output_tokens == 500
    assert models.ApiCall.objects.filter(session=session).count() == 5
    assert set(
        models.Message.objects.filter(session=session, uuid__in=["a1", "a1b"]).values_list("call_number", flat=True)
    ) == {1}
    assert session.api_calls_main == 5
    assert session.cost_usd == call_selectors.session_stats(session=session).cost.total_usd


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's page cache")
def test_an_import_gives_back_its_larger_page_cache(tmp_path):
    with connection.cursor() as cursor:
        before = cursor.execute("PRAGMA cache_size").fetchone()[0]
    seen: list[int] = []
    real = services._FileWriter.consume

    def consume(self, read):
        with connection.cursor() as cursor:
            seen.append(cursor.execute("PRAGMA cache_size").fetchone()[0])
        return real(self, read)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services._FileWriter, "consume", consume)
        services.import_file(path=small_session(tmp_path))
    assert seen == [-services.IMPORT_PAGE_CACHE_KIB]
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA cache_size").fetchone()[0] == before
