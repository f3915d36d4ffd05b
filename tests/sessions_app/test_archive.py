"""The archive (issue 36): a session whose file the agent deleted stays, marked archived, and its files come back
byte for byte from the bytes the import stored, from the command, the page (a POST) and its JSON twin; a different
file where one would go is never overwritten."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from sessions_app import archive, models, services, watcher
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.django_db

SPOTTER = "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04"
KLAUDE_SESSION = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"
# Each agent's sample laid out under a home folder as the agent lays it out: (source, where under the home).
LAYOUTS = {
    "claude-code": (CLAUDE_SAMPLES / f"{SPOTTER}.jsonl", Path(".claude/projects/-home-dev-spotter")),
    "klaude-code": (
        KLAUDE_SESSION / "5ccec58f0e704378a1297842bc337b8d" / "events.jsonl",
        Path(".klaude/projects/home-dev-projects-webapp/sessions/5ccec58f0e704378a1297842bc337b8d"),
    ),
    "codex": (
        CODEX_SAMPLES / "localpush__0.104.0-alpha.1__rollout-2026-02-23T12-40-23-019c8a4c.jsonl",
        Path(".codex/sessions/2026/02/23"),
    ),
    "khaelor": (KHAELOR_SAMPLES / "ledger-migration.events.jsonl", Path("khaelor")),
}


def _lay_out(home: Path, agent: str) -> tuple[Path, dict[Path, bytes]]:
    """The agent's sample under ``home``, its main file imported in two pieces (the first half of its lines, then
    the whole), its other files (a subagent's, a sidecar) whole; the main file and every file's original bytes."""
    source, folder = LAYOUTS[agent]
    where = home / folder
    where.mkdir(parents=True)
    main = where / source.name.rpartition("__")[2]  # a shared sample's name, less what names its origin
    originals = {main: source.read_bytes()}
    for extra in source.parent.iterdir() if agent == "klaude-code" else ():
        if extra.name != source.name:  # klaude's meta.json, read with its events
            shutil.copy(extra, where / extra.name)
    lines = originals[main].splitlines(keepends=True)
    main.write_bytes(b"".join(lines[: len(lines) // 2]))
    assert isinstance(services.import_file(path=main), services.FileImport)
    main.write_bytes(originals[main])
    grown = services.import_file(path=main)
    assert isinstance(grown, services.FileImport) and grown.lines > 0 and not grown.created
    subagents = source.with_suffix("") / "subagents"
    if subagents.is_dir():
        for path in sorted(subagents.iterdir()):
            target = main.with_suffix("") / "subagents" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
            originals[target] = path.read_bytes()
            assert isinstance(services.import_file(path=target), services.FileImport)
    return main, originals


@pytest.mark.parametrize("agent", sorted(LAYOUTS))
def test_a_deleted_session_is_archived_and_restored_byte_for_byte(tmp_path, agent):
    main, originals = _lay_out(tmp_path, agent)
    session = models.Session.objects.get(files__path=str(main.resolve()))
    assert archive.check_sources() == 0 and session.archived_at is None
    for path in originals:
        path.unlink()
    # The watcher's check of what it saw deleted marks it; the session and its numbers stay.
    watcher._check_archive([main])
    session.refresh_from_db()
    assert session.archived_at is not None and session.message_count > 0
    out = StringIO()
    call_command("restore_session", str(session.pk), "--json", stdout=out)
    restored = orjson.loads(out.getvalue())
    assert sorted(f["path"] for f in restored["files"]) == sorted(str(p.resolve()) for p in originals)
    for path, content in originals.items():
        assert path.read_bytes() == content, path
    session.refresh_from_db()
    assert session.archived_at is None
    if agent != "khaelor":  # an agent without a resume command shows none
        assert session.external_id in restored["resume_command"]


def test_restore_refuses_to_overwrite_a_different_file_and_says_so(tmp_path):
    main, originals = _lay_out(tmp_path, "codex")
    session = models.Session.objects.get()
    main.write_bytes(b"something else\n")
    with pytest.raises(CommandError, match="exists and differs"):
        call_command("restore_session", str(session.pk), stdout=StringIO())
    assert main.read_bytes() == b"something else\n"
    # The same bytes already there: nothing to write, and said so.
    main.write_bytes(originals[main])
    out = StringIO()
    call_command("restore_session", str(session.pk), stdout=out)
    assert "already there" in out.getvalue() and "codex resume" in out.getvalue()


def test_restore_to_another_folder_lays_the_files_out_as_the_agent_does(tmp_path):
    main, originals = _lay_out(tmp_path / "home", "claude-code")
    session = models.Session.objects.get(files__path=str(main.resolve()))
    elsewhere = tmp_path / "elsewhere"
    call_command("restore_session", session.external_id, "--to", str(elsewhere), stdout=StringIO())
    for path, content in originals.items():
        relative = path.relative_to(tmp_path / "home" / ".claude" / "projects")
        assert (elsewhere / relative).read_bytes() == content


def test_the_page_marks_an_archived_session_and_restores_it(client_in, tmp_path):
    main, originals = _lay_out(tmp_path, "codex")
    session = models.Session.objects.get(files__path=str(main.resolve()))
    for path in originals:
        path.unlink()
    # The session page finds the file gone; its JSON twin says so with the restore URL and the resume command.
    page = client_in.get(f"/sessions/{session.pk}/")
    assert b"Restore the file" in page.content and b"codex resume" in page.content
    twin = orjson.loads(client_in.get(f"/sessions/{session.pk}.json").content)
    assert twin["archive"]["archived"] and twin["archive"]["source"] == str(main.resolve())
    assert twin["session"]["archived"]
    # The list's archived filter.
    listed = orjson.loads(client_in.get("/sessions.json?archived=1").content)["sessions"]
    assert [s["id"] for s in listed] == [session.pk]
    assert client_in.get(f"/sessions/{session.pk}/restore/").status_code == 405  # a POST only
    done = client_in.post(twin["archive"]["restore_url"])
    assert done.status_code == 302
    assert main.read_bytes() == originals[main]
    # A second restore over a different file is refused with the reason, in JSON too.
    main.write_bytes(b"changed\n")
    refused = client_in.post(f"/sessions/{session.pk}/restore.json")
    assert refused.status_code == 409 and "exists and differs" in orjson.loads(refused.content)["error"]
    assert orjson.loads(client_in.get("/sessions.json?archived=1").content)["sessions"] == []


def test_an_uploaded_session_has_no_place_of_its_own_and_is_restored_where_asked(tmp_path):
    source = LAYOUTS["khaelor"][0]
    services.import_file(path=source, name="uploads/ledger-migration.events.jsonl")
    session = models.Session.objects.get()
    assert archive.check_sources() == 0  # never archived: it was not imported from a folder
    with pytest.raises(CommandError, match="was uploaded"):
        call_command("restore_session", str(session.pk), stdout=StringIO())
    call_command("restore_session", str(session.pk), "--to", str(tmp_path), stdout=StringIO())
    assert (tmp_path / "ledger-migration.events.jsonl").read_bytes() == source.read_bytes()
