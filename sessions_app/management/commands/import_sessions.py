from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import CommandParser

from sessions_app import services
from sessions_app.management.commands._base import SessionCommand


class Command(SessionCommand):
    @property
    def help(self) -> str:  # type: ignore[override]  # read when asked: every registered agent's folders
        folders = ", ".join(f"~/{folder}" for folder in services.SESSION_FOLDERS)
        return f"Import agent sessions from files or folders (scanned recursively). With no path: {folders}."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", type=Path)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, paths: list[Path], json: bool, **options: Any) -> None:
        roots = paths or services.default_roots()
        report = services.import_paths(paths=roots)
        if json:
            self.stdout.write(orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        if not roots:
            self.stdout.write("Nothing to import: no path given and none of the default session folders exists.")
        for item in report.imported:
            state = "new" if item.created else ("updated" if item.lines else "unchanged")
            self.stdout.write(f"{state:9} session {item.session}  {item.format:11} {item.lines:6} lines  {item.path}")
            for error in item.errors:
                self.stdout.write(f"          {item.path}:{error['line']}: {error['message']}")
            for warning in item.warnings:
                self.stdout.write(f"          {item.path}: warning: {warning}")
        for rejected in report.rejected:
            self.stderr.write(f"rejected  {rejected.path}: {rejected.message}")
