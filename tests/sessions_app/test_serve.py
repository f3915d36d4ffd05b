"""`manage.py serve`, the supervisor `bin/run` execs: real gunicorn, db_worker and watcher processes."""

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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren: gunicorn's workers), read from /proc."""
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


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


class Served:
    """A running `manage.py serve` whose output is collected line by line."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        var, home, watched = tmp_path / "var", tmp_path / "home", tmp_path / "watched"
        for folder in (var, home, watched):
            folder.mkdir()
        env = {
            **os.environ,
            "SESSION_INSPECTOR_VAR": str(var),
            "HOME": str(home),
            "DEBUG": "0",
            "SECRET_KEY": "serve-test",
            "INSECURE_COOKIES": "1",
        }
        env.pop("DATABASE_URL", None)
        manage = [sys.executable, str(REPO / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True, cwd=REPO)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], env=env, check=True, cwd=REPO)
        self.process = subprocess.Popen(
            [*manage, "serve", "--bind", f"127.0.0.1:{self.port}", "--web-workers", "1", "--threads", "2"]
            + ["--watch", str(watched)],
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

    def wait_for_line(self, pattern: str, *, after: int = 0, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if found := re.search(pattern, line):
                    return found
            assert self.process.poll() is None, "serve exited:\n" + "\n".join(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines))

    def stop(self, signum: int) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout=30)


def test_ctrl_c_during_start_up_stops_everything_and_still_shows_the_new_login(tmp_path):
    s = Served(tmp_path)
    try:
        s.wait_for_line(r"^watch started, pid")
        family = _descendants(s.process.pid)
        assert s.stop(signal.SIGINT) == 0
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in family if _alive(pid)]
        s._reader.join(timeout=5)
        assert sum("password:" in line for line in s.lines) == 1
    finally:
        if s.process.poll() is None:
            s.process.kill()
            s.process.wait()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    s.wait_for_line(r"password: ")  # the login is the last thing printed at start-up
    try:
        yield s
    finally:
        for pid in _descendants(s.process.pid) | {s.process.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # only on a failed test: never leave a server running
        s.process.wait(timeout=10)


def test_login_is_printed_last_once_with_how_to_change_it(served):
    banner_at = next(i for i, line in enumerate(served.lines) if "Session Inspector is running at" in line)
    start_up = served.lines[: banner_at + 9]
    assert sum("password:" in line for line in served.lines) == 1
    assert any("changepassword reviewer" in line for line in start_up[banner_at:])
    # Every child had started and spoken before the banner; nothing printed twice.
    before = served.lines[:banner_at]
    assert any(line.startswith("worker started") for line in before)
    assert any("caught up" in line for line in before)
    assert any(line.strip().startswith("worker |") and "Starting worker" in line for line in before)
    assert len(set(before)) == len(before)


def test_pages_and_static_files_are_served_with_debug_off(served):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", "/login/")
    login = conn.getresponse()
    assert login.status == 200 and b"/static/app.css" in login.read()
    conn.request("GET", "/static/app.css", headers={"Accept-Encoding": "gzip"})
    css = conn.getresponse()
    body = css.read()
    # WhiteNoise serves the file collected by collectstatic, compressed, without Django's debug static view.
    assert css.status == 200 and css.getheader("Content-Encoding") == "gzip" and len(body) > 0
    conn.close()


def test_a_killed_worker_is_started_again_and_stopping_leaves_no_process(served):
    old_pid = int(served.wait_for_line(r"^worker started, pid (\d+)").group(1))
    mark = len(served.lines)
    os.kill(old_pid, signal.SIGKILL)
    served.wait_for_line(r"^worker exited with code -9", after=mark)
    new_pid = int(served.wait_for_line(r"^worker started, pid (\d+)", after=mark).group(1))
    assert new_pid != old_pid and _alive(new_pid)
    # The web server still answers while the worker is replaced.
    with socket.create_connection(("127.0.0.1", served.port), timeout=5):
        pass

    family = _descendants(served.process.pid)
    assert new_pid in family and len(family) >= 4  # gunicorn master + its worker, db_worker, watcher
    assert served.stop(signal.SIGTERM) == 0
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in family if _alive(pid)]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=1).close()


def test_a_killed_supervisor_takes_its_children_with_it(served):
    family = _descendants(served.process.pid)
    assert len(family) >= 4
    served.stop(signal.SIGKILL)  # no handler runs: the kernel's parent-death signal stops the children
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in family if _alive(pid)]
