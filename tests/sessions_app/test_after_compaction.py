"""After the compaction, in the shell: the diagnosis page's section, its JSON twin, the command and the archive's list
give the same numbers (one function: ``compaction.after_compaction``, stored with the diagnosis)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import services
from sessions_app.selectors import after_compaction as after_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.claude_code_lines import SESSION_ID, assistant, cc_line, compact_boundary, tool_result, user, write

pytestmark = pytest.mark.django_db


def _analysed(path) -> int:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    services.estimate_session_tokens(session_id=outcome.session)
    services.analyse_session(session_id=outcome.session)  # what db_worker runs after an import
    return outcome.session


def _command(*args: str) -> str:
    out = StringIO()
    call_command("after_compaction", *args, stdout=out)
    return out.getvalue()


def test_page_json_command_and_archive_agree(client_in):
    # 7662: the auto compaction after call 30, three files read again in the 19 calls after it (hand counts in
    # tests/compaction/test_after_compaction.py).
    sid = _analysed(CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl")
    other = _analysed(KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    twin = client_in.get(f"/sessions/{sid}/diagnosis.json").json()["after_compaction"]
    assert twin["calls"] == 20 and twin["rules_checked"] is True
    assert twin["totals"] == {
        "compactions": 1,
        "files_read_again": 3,
        "errors_repeated": 0,
        "questions_asked_again": 0,
        "rules_broken": 0,
    }
    (row,) = twin["compactions"]
    assert (row["after_call"], row["calls"]) == (30, 19)

    page = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    assert 'id="after-compaction"' in page and "Rules broken: not checked." not in page
    assert page.count("read again at") == 3 and "manual_commit_hooks.go" in page

    assert json.loads(_command(str(sid), "--json")) == {"session": sid, **twin}
    text = _command(str(sid))
    assert "auto after call 30, next 19 calls: 3 files read again, 0 errors repeated" in text
    assert "rules broken: 0" in text
    # Another window is measured now, by the same function: one call after it reads none of those files yet.
    one = json.loads(_command(str(sid), "--calls", "1", "--json"))
    assert one["calls"] == 1 and one["compactions"][0]["calls"] == 1
    assert one["totals"]["files_read_again"] < 3

    archive = client_in.get("/after-compaction.json").json()
    assert archive["calls"] == 20
    assert [(r["session"], r["totals"]) for r in archive["sessions"]] == [
        (sid, twin["totals"]),
        (other, {**twin["totals"], "files_read_again": 1}),
    ]
    assert json.loads(_command("--all", "--json")) == archive
    assert f"session {other}: 1 files read again" in _command("--all")

    # The Usage findings: "files read again after compactions", one finding per session, its files those read again
    # and its tokens at stake those of the reads again (the same measure), on the page, its twin and the command.
    other_twin = client_in.get(f"/sessions/{other}/diagnosis.json").json()
    (group,) = client_in.get("/findings.json?kind=reads_after_compaction").json()["groups"]
    assert group["label"] == "Files read again after compactions" and group["sessions"] == 2
    files: list[str] = []
    for session_id, report in ((sid, twin), (other, other_twin["after_compaction"])):
        reads = [r for c in report["compactions"] for r in c["reads_again"]]
        (share,) = [s for s in group["top"] if s["session"] == session_id]
        assert share["tokens"] == sum(r["tokens"] for r in reads) > 0
        files += [r["subject"] for r in reads]
    assert sorted(c["subject"] for c in group["commands"]) == sorted(files) and len(files) == 4
    assert group["tokens"] == sum(share["tokens"] for share in group["top"])
    finding = next(f for f in other_twin["recommendations"] if f["kind"] == "reads_after_compaction")
    assert finding["tokens"] == next(s["tokens"] for s in group["top"] if s["session"] == other)
    assert (
        "Files read again after compactions" in client_in.get("/findings/?kind=reads_after_compaction").content.decode()
    )
    out = StringIO()
    call_command("findings", "--kind", "reads_after_compaction", "--json", stdout=out)
    assert json.loads(out.getvalue())["groups"] == [group]


def _edit(uuid: str, parent: str, msg_id: str, path: str) -> str:
    content = [{"type": "tool_use", "id": f"t-{uuid}", "name": "Edit", "input": {"file_path": path}}]
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 990, "output_tokens": 7}
    message = {"id": msg_id, "role": "assistant", "model": "claude-opus-4-5-20251101", "content": content}
    return cc_line(
        type="assistant", uuid=uuid, parentUuid=parent, sessionId=SESSION_ID, message=message | {"usage": usage}
    )


def test_a_rule_broken_after_a_compaction_on_every_path(client_in, tmp_path):
    # The user's "Don't touch migrations/." before the compaction; after it, call 2 edits /src/migrations/0002.py
    # (broken) and call 3 edits /src/app.py (not): one rule broken, the same on the page, the twin, the command and
    # the archive.
    path = write(
        tmp_path,
        "rules.jsonl",
        user("u0", None, "Fix the ledger. Don't touch migrations/."),
        assistant("a0", "u0", "msg_0", "working", ctx=900),
        compact_boundary("b1", trigger="manual"),
        user("u1", "b1", "go on"),
        _edit("a1", "u1", "msg_1", "/src/migrations/0002.py"),
        tool_result("r1", "a1", "t-a1", "ok"),
        _edit("a2", "r1", "msg_2", "/src/app.py"),
        tool_result("r2", "a2", "t-a2", "ok"),
    )
    sid = _analysed(path)
    twin = client_in.get(f"/sessions/{sid}/diagnosis.json").json()["after_compaction"]
    assert twin["rules_checked"] is True and twin["totals"]["rules_broken"] == 1
    (row,) = twin["compactions"]
    assert row["rules"] == [
        {
            "rule": "Don't touch migrations/.",
            "what": "Edit /src/migrations/0002.py",
            "call": 2,
            "line": row["rules"][0]["line"],
        }
    ]
    page = client_in.get(f"/sessions/{sid}/diagnosis/").content.decode()
    assert page.count("rule broken at") == 1 and "Edit /src/migrations/0002.py" in page
    assert json.loads(_command(str(sid), "--json"))["compactions"][0]["rules"] == row["rules"]
    assert "rule broken at call 2: Don't touch migrations/. by Edit /src/migrations/0002.py" in _command(str(sid))
    (archived,) = client_in.get("/after-compaction.json").json()["sessions"]
    assert archived["totals"] == twin["totals"]


def test_the_archive_reads_stored_analyses_in_a_fixed_number_of_queries():
    _analysed(CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    with CaptureQueriesContext(connection) as one:
        assert len(after_selectors.archive_after_compaction()) == 1
    _analysed(CLAUDE_SAMPLES / "entirecli_4b7d5121b42a-0_full.jsonl")
    diagnosis_selectors._DIAGNOSES.clear()
    with CaptureQueriesContext(connection) as two:
        assert len(after_selectors.archive_after_compaction()) == 2
    assert len(two.captured_queries) == len(one.captured_queries) == 2


def test_the_command_names_what_is_missing():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Name a session, or --all"):
        _command()
    with pytest.raises(CommandError, match="at least 1"):
        _command("1", "--calls", "0")
