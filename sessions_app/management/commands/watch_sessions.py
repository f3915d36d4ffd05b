from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser

from sessions_app import services, watcher
from sessions_app.management.commands._base import SessionCommand

PROGRESS_EVERY_S = 1.0


class Command(SessionCommand):
    @property
    def help(self) -> str:  # type: ignore[override]  # read when asked: every registered agent's folders
        folders = ", ".join(f"~/{folder}" for folder in services.SESSION_FOLDERS)
        return (
            "Import sessions as the agents write them: a first pass over every file, then each file that grows. "
            f"With no path: the agents' own folders ({folders})."
        )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", type=Path)

    def handle(self, *args: Any, paths: list[Path], **options: Any) -> None:
        stop = threading.Event()
        # SIGTERM (the supervisor stopping) finishes the import in progress instead of cutting it off.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        roots = paths or None
        shown = ", ".join(str(p) for p in (paths or services.default_roots())) or "no agent folder yet"
        self.stdout.write(f"following {shown}")

        passes = 0
        last_progress = 0.0

        def progress(done: int, total: int, outcomes: list[services.FileImport | services.Rejected]) -> None:
            # A line a second at most (and the last file's): a first pass over thousands of files stays readable.
            nonlocal last_progress
            now = time.monotonic()
            if done == total or now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                self.stdout.write(watcher.progress(done, total, outcomes))
                self.stdout.flush()

        def tell(outcomes: list[services.FileImport | services.Rejected]) -> None:
            nonlocal passes
            passes += 1
            if passes == 1:
                # The first pass goes over every file already there: one summary line, not one per file.
                self.stdout.write(watcher.summary(outcomes))
                return
            for outcome in outcomes:
                line = watcher.describe(outcome)
                if line:
                    self.stdout.write(line)

        watcher.watch_sessions(
            roots=roots, stop_event=stop, on_pass=tell, on_progress=progress, step_ms=settings.WATCH_STEP_MS
        )
