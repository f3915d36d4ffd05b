"""A real `manage.py serve` (what `bin/run` execs: the web server, db_worker and watcher processes) for the tests
that are about the server itself, its terminal output collected line by line and its children's log files read."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import REPO
from tests.helpers.claude_code_lines import small_session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren), read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


class Served:
    """A running `manage.py serve` whose output is collected line by line.

    ``threads``: the web server's threads (``--threads``); None keeps bin/run's default (the WEB_THREADS setting).
    ``settings``: more environment variables for it.
    ``with_session``: a small session waits in the watched folder, so the first scan imports it and the task worker
    has its tasks to run.
    """

    def __init__(
        self,
        tmp_path: Path,
        *,
        threads: int | None = 2,
        settings: dict[str, str] | None = None,
        with_session: bool = False,
    ) -> None:
        self.port = free_port()
        var, home, watched = tmp_path / "var", tmp_path / "home", tmp_path / "watched"
        for folder in (var, home, watched):
            folder.mkdir()
        if with_session:
            small_session(watched)
        self.log_dir = var / "log"  # settings.LOG_DIR under this SESSION_INSPECTOR_VAR
        env = {
            **os.environ,
            "SESSION_INSPECTOR_VAR": str(var),
            "HOME": str(home),
            "DEBUG": "0",
            "SECRET_KEY": "serve-test",
            "INSECURE_COOKIES": "1",
            **(settings or {}),
        }
        env.pop("DATABASE_URL", None)
        manage = [sys.executable, str(REPO / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True, cwd=REPO)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], env=env, check=True, cwd=REPO)
        argv = [*manage, "serve", "--bind", f"127.0.0.1:{self.port}", "--web-workers", "1"]
        if threads is not None:
            argv += ["--threads", str(threads)]
        self.process = subprocess.Popen(
            argv + ["--watch", str(watched)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def join_output(self, timeout: float) -> None:
        self._reader.join(timeout=timeout)

    def wait_for_line(self, pattern: str, *, after: int = 0, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if found := re.search(pattern, line):
                    return found
            assert self.process.poll() is None, "serve exited:\n" + "\n".join(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines))

    def log(self, name: str) -> list[str]:
        """A child's log file (``web``, ``worker``, ``watch``), its lines without their timestamps."""
        path = self.log_dir / f"{name}.log"
        if not path.is_file():
            return []
        return [line[20:] for line in path.read_text().splitlines()]  # "YYYY-MM-DD HH:MM:SS " first

    def wait_for_log_line(self, name: str, pattern: str, *, after: int = 0, timeout: float = 60.0) -> re.Match[str]:
        """The first line of ``name``'s log from line ``after`` on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log(name)[after:]:
                if found := re.search(pattern, line):
                    return found
            assert self.process.poll() is None, "serve exited:\n" + "\n".join(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in {name}.log:\n" + "\n".join(self.log(name)))

    def stop(self, signum: int) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout=30)

    def kill_all(self) -> None:
        """Only after a failed test: never leave a server running."""
        for pid in descendants(self.process.pid) | {self.process.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)
