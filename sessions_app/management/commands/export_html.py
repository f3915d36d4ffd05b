from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from sessions_app import html_export
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import sessions as session_selectors


class Command(SessionCommand):
    help = (
        "One session (transcript, timeline, diagnosis) as one self-contained HTML file that opens offline, with "
        "secrets masked by detect-secrets and the list of what was masked. Default file: session-ID.html; - for stdout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session")
        parser.add_argument("-o", "--output", type=Path, default=None, help="the file to write (- : stdout)")

    def handle(self, *args: Any, session: str, output: Path | None, **options: Any) -> None:
        try:
            found = session_selectors.resolve_session(ref=session)
        except session_selectors.SessionNotFound as exc:
            raise CommandError(str(exc)) from None
        chunks = html_export.export_html(session=found)
        if str(output) == "-":
            for chunk in chunks:
                sys.stdout.write(chunk)
            return
        path = output or Path(html_export.filename(session=found))
        # Written beside its final name and renamed once whole: a refusal or a failure leaves no half file.
        partial = path.with_name(path.name + ".part")
        try:
            with partial.open("w", encoding="utf-8") as out:
                for chunk in chunks:
                    out.write(chunk)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        self.stdout.write(f"wrote {path}")
