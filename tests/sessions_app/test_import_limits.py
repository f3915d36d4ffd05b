"""Limits: no line, zip member or upload is read whole without a cap, and each refusal names its file.

The memory test runs the import in a fresh process and reads that process's peak resident size, so what
pytest itself holds does not count, and nothing the import allocated lingers in the test process.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sessions_app import models, services
from tests.helpers.claude_code_lines import small_session

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
pytestmark = pytest.mark.django_db


def staged_zip(tmp_path: Path, members: dict[str, bytes]) -> list[tuple[str, str]]:
    with zipfile.ZipFile(tmp_path / "up.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return [("up.zip", "up.zip")]


def test_a_member_larger_than_the_limit_is_not_unpacked(tmp_path, settings):
    settings.UPLOAD_MAX_MEMBER_BYTES = 10_000
    session = small_session(tmp_path).read_bytes()
    staged = staged_zip(tmp_path, {"p/ok.jsonl": session, "p/huge.jsonl": b"x" * 20_000})
    report = services.import_staged(folder=tmp_path, staged=staged)
    assert [r.as_json() for r in report.rejected] == [
        {
            "path": "up.zip:p/huge.jsonl",
            "message": "Unpacks to 20,000 bytes, more than 10,000 per file (UPLOAD_MAX_MEMBER_BYTES); not unpacked. "
            "Import such a file from disk with `manage.py import_sessions`.",
        }
    ]
    assert [i.path for i in report.imported] == ["upload:up.zip/p/ok.jsonl"]
    assert not (tmp_path / "z0" / "p" / "huge.jsonl").exists()


def test_a_zip_unpacking_to_more_than_the_limit_stops(tmp_path, settings):
    settings.UPLOAD_MAX_UNZIPPED_BYTES = 1500
    staged = staged_zip(tmp_path, {f"p/{n}.jsonl": b"y" * 1000 for n in range(3)})
    report = services.import_staged(folder=tmp_path, staged=staged)
    assert [r.path for r in report.rejected][:1] == ["up.zip:p/1.jsonl"]
    assert "unpacks to more than 1,500 bytes (UPLOAD_MAX_UNZIPPED_BYTES)" in report.rejected[0].message


def lying_zip(path: Path, members: dict[str, bytes], *, declared: dict[str, int]) -> None:
    """A zip whose headers (local and central) give some members an uncompressed size other than their content's:
    what a crafted zip bomb does to slip past a check of the declared sizes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    raw = bytearray(path.read_bytes())
    for name, size in declared.items():
        for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header, central directory
            start = 0
            while (at := raw.find(signature, start)) >= 0:
                name_at = at + (30 if signature == b"PK\x03\x04" else 46)
                if raw[name_at : name_at + len(name)] == name.encode():
                    struct.pack_into("<I", raw, at + size_at, size)
                start = at + 4
    path.write_bytes(bytes(raw))


def test_a_member_inflating_past_its_declared_size_is_refused_by_name_and_never_written_past_it(tmp_path):
    """Issue 34 item 5: a member checked against its declared size while it streams, not only before."""
    bomb = b'{"type": "user"}\n' * 200_000  # 3.4 MB inflating from a few KB
    lying_zip(
        tmp_path / "up.zip",
        {"p/ok.jsonl": small_session(tmp_path).read_bytes(), "p/bomb.jsonl": bomb},
        declared={"p/bomb.jsonl": 1_000},
    )
    report = services.import_staged(folder=tmp_path, staged=[("up.zip", "up.zip")])
    [refused] = report.rejected
    assert refused.path == "up.zip:p/bomb.jsonl"
    assert "more than the 1,000 bytes its zip header declares" in refused.message, refused.message
    assert not (tmp_path / "z0" / "p" / "bomb.jsonl").exists()  # nothing of it stays on disk
    # What the zip held that was sound is imported all the same.
    assert [i.path for i in report.imported] == ["upload:up.zip/p/ok.jsonl"]
    assert models.Session.objects.count() == 1


def test_a_member_shorter_than_its_declared_size_is_refused_by_name(tmp_path):
    lying_zip(tmp_path / "up.zip", {"p/short.jsonl": b'{"type": "user"}\n' * 50}, declared={"p/short.jsonl": 10_000})
    report = services.import_staged(folder=tmp_path, staged=[("up.zip", "up.zip")])
    assert [r.as_json() for r in report.rejected] == [
        {
            "path": "up.zip:p/short.jsonl",
            "message": "Cannot unpack: it ends after 850 bytes, although its zip header declares 10,000 (a damaged "
            "zip?); nothing of it was kept.",
        }
    ]
    assert not (tmp_path / "z0" / "p" / "short.jsonl").exists()


def test_unpacking_a_member_never_writes_past_its_declared_size(tmp_path):
    """What reaches the disk, counted as it is written: never more than the header declared, however far the
    member inflates (here 20 MB from 20 KB)."""
    lying_zip(tmp_path / "up.zip", {"bomb.jsonl": b"\n" * 20_000_000}, declared={"bomb.jsonl": 4_096})
    written = io.BytesIO()
    with zipfile.ZipFile(tmp_path / "up.zip") as zf:
        why = services.unpack_member(zf, zf.infolist()[0], written)
    assert why is not None and "4,096 bytes" in why
    assert len(written.getvalue()) <= 4_096


def test_a_zip_with_too_many_members_is_refused_whole(tmp_path, settings):
    settings.UPLOAD_MAX_ZIP_MEMBERS = 2
    staged = staged_zip(tmp_path, {f"p/{n}.jsonl": b"{}\n" for n in range(3)})
    report = services.import_staged(folder=tmp_path, staged=staged)
    assert [r.as_json() for r in report.rejected] == [
        {"path": "up.zip", "message": "The zip holds 3 files, more than 2 (UPLOAD_MAX_ZIP_MEMBERS)."}
    ]
    assert report.imported == []


def test_too_many_session_files_in_one_upload_imports_nothing(tmp_path, settings):
    settings.UPLOAD_MAX_SESSION_FILES = 2
    session = small_session(tmp_path).read_bytes()
    staged = staged_zip(tmp_path, {f"p/{n}.jsonl": session.replace(b"s-1", f"s-{n}".encode()) for n in range(3)})
    report = services.import_staged(folder=tmp_path, staged=staged)
    assert report.imported == [] and models.Session.objects.count() == 0
    assert report.rejected[0].message.startswith("The upload holds 3 session files; at most 2 are imported")


def test_a_giant_record_gets_a_labelled_rough_estimate(tmp_path, settings):
    settings.TOKEN_ESTIMATE_MAX_CHARS = 1000
    lines = small_session(tmp_path).read_text().splitlines(keepends=True)
    big = json.loads(lines[2])
    big["message"]["content"] = "z" * 4001  # no whitespace: the case tiktoken is slowest on
    path = tmp_path / "big.jsonl"
    path.write_text("".join([*lines, json.dumps(big) + "\n"]))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    services.estimate_session_tokens(session_id=outcome.session)
    rough = models.Message.objects.get(session_id=outcome.session, line=5)
    assert (rough.tokens, rough.tokens_method) == (1001, "chars/4")
    exact = models.Message.objects.get(session_id=outcome.session, line=3)
    assert exact.tokens_method == "tiktoken" and exact.tokens is not None and exact.tokens < 10


MEASURE = r"""
import json, os, sys, time, zipfile
from pathlib import Path

import django

django.setup()
from django.core.management import call_command

call_command("migrate", verbosity=0)
from sessions_app import models, services

work = Path(sys.argv[1])
MIB = 1024 * 1024
results = {}

# 1. A zip bomb: a few MB holding one member of 1 GiB + 1 MiB without a newline.
with zipfile.ZipFile(work / "bomb.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
    with zf.open("proj/s.jsonl", "w", force_zip64=True) as member:
        block = b"x" * MIB
        for _ in range(1025):
            member.write(block)
report = services.import_staged(folder=work, staged=[("bomb.zip", "bomb.zip")])
results["bomb"] = [r.as_json() for r in report.rejected]
results["bomb_zip_bytes"] = (work / "bomb.zip").stat().st_size

# 2. A zip member within the limits that is one 200 MB line: unpacked, read past, refused.
with zipfile.ZipFile(work / "line.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
    with zf.open("proj/one-line.jsonl", "w", force_zip64=True) as member:
        member.write(b'{"type":"user","message":{"content":"')
        for _ in range(200):
            member.write(b"y" * MIB)
        member.write(b'"}}')
report = services.import_staged(folder=work, staged=[("line.zip", "line.zip")])
results["one_line"] = [r.as_json() for r in report.rejected]

# 3. A real session with a 100 MB line in the middle and a 20 MB record without whitespace: imports, with the
# long line as a line error; the token estimate of the 20 MB record does not stall.
head = Path(sys.argv[2]).read_bytes()
session = work / "session.jsonl"
with session.open("wb") as out:
    out.write(head)
    out.write(b'{"type":"user","uuid":"big","sessionId":"s-1","message":{"content":"')
    for _ in range(100):
        out.write(b"w" * MIB)
    out.write(b'"}}\n')
    record = {"type": "user", "uuid": "u20", "parentUuid": "a2", "sessionId": "s-1",
              "message": {"role": "user", "content": "v" * (20 * MIB)}}
    out.write(json.dumps(record).encode() + b"\n")
outcome = services.import_file(path=session)
results["session_errors"] = outcome.errors
started = time.monotonic()
services.estimate_session_tokens(session_id=outcome.session)
results["estimate_s"] = time.monotonic() - started
results["methods"] = sorted(set(models.Message.objects.filter(session_id=outcome.session).values_list(
    "tokens_method", flat=True)))
# This process's own peak: VmHWM is its memory's high-water mark. ru_maxrss is not: it starts at the RSS the parent
# (the test run, hundreds of MB after a thousand tests) had when it started this process.
results["peak_mb"] = next(
    int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")
) / 1024
print(json.dumps(results))
"""


@pytest.mark.slow
def test_zip_bomb_and_giant_lines_stay_within_a_memory_budget(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'measure.sqlite3'}",
        "SESSION_INSPECTOR_VAR": str(tmp_path / "var"),
    }
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(work), str(small_session(tmp_path))],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["bomb_zip_bytes"] < 8 * MIB
    assert results["bomb"] == [
        {
            "path": "bomb.zip:proj/s.jsonl",
            "message": f"Unpacks to {1025 * MIB:,} bytes, more than {1024 * MIB:,} per file (UPLOAD_MAX_MEMBER_BYTES); "
            "not unpacked. Import such a file from disk with `manage.py import_sessions`.",
        }
    ]
    assert len(results["one_line"]) == 1
    assert results["one_line"][0]["path"] == "upload:line.zip/proj/one-line.jsonl"
    assert "no line short enough to recognise the format" in results["one_line"][0]["message"]
    assert [e["line"] for e in results["session_errors"]] == [5]
    assert "longer than the limit of 33,554,432 bytes" in results["session_errors"][0]["message"]
    assert results["methods"] == ["chars/4", "tiktoken"]
    assert results["estimate_s"] < 10
    assert results["peak_mb"] < 400, results
    print(f"peak {results['peak_mb']:.0f} MB, estimate {results['estimate_s']:.1f} s")


def test_the_json_twin_says_how_each_estimate_was_made(client_in, tmp_path, settings):
    settings.TOKEN_ESTIMATE_MAX_CHARS = 1000
    lines = small_session(tmp_path).read_text().splitlines(keepends=True)
    big = json.loads(lines[2])
    big["message"]["content"] = "z" * 4001
    path = tmp_path / "big.jsonl"
    path.write_text("".join([*lines, json.dumps(big) + "\n"]))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    services.estimate_session_tokens(session_id=outcome.session)
    messages = client_in.get(f"/sessions/{outcome.session}.json").json()["messages"]
    by_line = {m["line"]: m for m in messages}
    assert by_line[5]["tokens_estimate_method"] == "chars/4" and by_line[5]["tokens_estimate"] == 1001
    assert by_line[1]["tokens_estimate_method"] == "tiktoken"


def test_a_name_longer_than_the_column_is_cut_not_refused(tmp_path):
    outcome = services.import_file(path=small_session(tmp_path), name="upload:" + "d/" * 1500 + "s.jsonl")
    assert isinstance(outcome, services.FileImport) and len(outcome.path) == services.PATH_MAX
    assert models.SourceFile.objects.get().path == outcome.path


def test_a_page_never_sends_a_giant_record_whole(client_in, tmp_path):
    lines = small_session(tmp_path).read_text().splitlines(keepends=True)
    big = json.loads(lines[2])
    big["message"]["content"] = 'start "quoted" \\ é ' + "q" * 3_000_000 + " THE-END"
    path = tmp_path / "big.jsonl"
    path.write_text("".join([*lines, json.dumps(big) + "\n"]))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport)
    page = client_in.get(f"/sessions/{outcome.session}/")
    assert page.status_code == 200 and len(page.content) < 200_000
    html = page.content.decode()
    assert "THE-END" not in html and 'start "quoted" \\ é qqq' in html  # a prompt is markdown: text, not an attribute
    messages = client_in.get(f"/sessions/{outcome.session}.json").json()["messages"]
    (giant,) = [m for m in messages if m["line"] == 5]
    (block,) = giant["blocks"]
    assert block["truncated"] and block["chars"] == 3_000_000 + len('start "quoted" \\ é  THE-END')
    assert block["text"].startswith('start "quoted" \\ é qqq') and len(block["text"]) <= 2000
    small = [m for m in messages if m["line"] == 1][0]["blocks"][0]
    assert small["text"] == "hello" and not small["truncated"]
    # "show all" still gives the whole text, on request
    whole = client_in.get(f"/sessions/{outcome.session}/m/{giant['seq']}/blocks/0/?format=json").json()
    assert whole["text"].endswith("THE-END")
