from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app import archive
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import sessions as session_selectors


class Command(SessionCommand):
    help = (
        "Write a session's files back, byte for byte, from the copy stored at import: where they were imported from "
        "(the agent's folder), or under --to DIR as they lay under the agent's folder. A different file already "
        "there is never overwritten. Prints the agent's command that resumes the session."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="the session's id, its agent's session id, or a file it was imported from")
        parser.add_argument("--to", type=Path, default=None, help="a folder to restore under (as the agent's own)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, session: str, to: Path | None, json: bool, **options: Any) -> None:
        try:
            found = session_selectors.resolve_session(ref=session)
            restored = archive.restore_session(session=found, to=to.expanduser() if to else None)
        except (session_selectors.SessionNotFound, archive.RestoreRefused) as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"Cannot write the file: {exc.strerror or exc} ({exc.filename or ''})") from None
        if json:
            self.stdout.write(orjson.dumps(restored.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        for file in restored.files:
            state = "restored" if file.written else "already there, the same bytes"
            self.stdout.write(f"{state}: {file.path} ({file.bytes:,} bytes)")
        if restored.resume_command:
            self.stdout.write(f"resume it with: {restored.resume_command}")
