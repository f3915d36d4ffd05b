"""`manage.py serve`, the supervisor `bin/run` execs: real web server, db_worker and watcher processes."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.served import Served, alive, descendants


def test_ctrl_c_during_start_up_stops_everything_and_still_shows_the_new_login(tmp_path):
    s = Served(tmp_path)
    try:
        s.wait_for_line(r"^watch started, pid")
        family = descendants(s.process.pid)
        assert s.stop(signal.SIGINT) == 0
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in family if alive(pid)]
        s.join_output(timeout=5)
        assert sum("password:" in line for line in s.lines) == 1
    finally:
        if s.process.poll() is None:
            s.process.kill()
            s.process.wait()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    try:
        s.wait_for_line(r"password: ")  # the login is the last thing printed at start-up
        yield s
    finally:
        s.kill_all()


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the tests that only look at it (a start costs seconds of CI)."""
    s = Served(tmp_path_factory.mktemp("started"))
    try:
        s.wait_for_line(r"password: ")
        yield s
    finally:
        s.kill_all()


def test_login_is_printed_last_once_with_how_to_change_it(started):
    banner_at = next(i for i, line in enumerate(started.lines) if "Session Inspector is running at" in line)
    start_up = started.lines[: banner_at + 9]
    assert sum("password:" in line for line in started.lines) == 1
    assert any("changepassword reviewer" in line for line in start_up[banner_at:])
    # Every child had started and spoken before the banner; nothing printed twice.
    before = started.lines[:banner_at]
    assert any(line.startswith("worker started") for line in before)
    assert any("caught up" in line for line in before)
    assert any(line.strip().startswith("worker |") and "Starting worker" in line for line in before)
    assert len(set(before)) == len(before)


def test_pages_and_static_files_are_served_with_debug_off(started):
    conn = http.client.HTTPConnection("127.0.0.1", started.port, timeout=10)
    conn.request("GET", "/login/")
    login = conn.getresponse()
    assert login.status == 200 and b"/static/app.css" in login.read()
    conn.request("GET", "/static/app.css", headers={"Accept-Encoding": "gzip"})
    css = conn.getresponse()
    body = css.read()
    # WhiteNoise serves the file collected by collectstatic, compressed, without Django's debug static view.
    assert css.status == 200 and css.getheader("Content-Encoding") == "gzip" and len(body) > 0
    conn.close()


def _get_status(port: int, path: str, *, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_a_killed_worker_is_started_again_and_stopping_leaves_no_process(served):
    old_pid = int(served.wait_for_line(r"^worker started, pid (\d+)").group(1))
    mark = len(served.lines)
    os.kill(old_pid, signal.SIGKILL)
    served.wait_for_line(r"^worker exited with code -9", after=mark)
    new_pid = int(served.wait_for_line(r"^worker started, pid (\d+)", after=mark).group(1))
    assert new_pid != old_pid and alive(new_pid)
    # The web server still answers while the worker is replaced.
    assert _get_status(served.port, "/login/", timeout=5) == 200

    # A killed web process is started again; the port stays open meanwhile (`serve` holds the listening socket), so
    # a request made in between waits in the backlog and is answered, not refused.
    web_pid = int(served.wait_for_line(r"^web started, pid (\d+)").group(1))
    mark = len(served.lines)
    os.kill(web_pid, signal.SIGKILL)
    served.wait_for_line(r"^web exited with code -9", after=mark)
    assert _get_status(served.port, "/login/", timeout=30) == 200
    assert int(served.wait_for_line(r"^web started, pid (\d+)", after=mark).group(1)) != web_pid

    family = descendants(served.process.pid)
    assert new_pid in family and len(family) >= 3  # the web server, db_worker, watcher
    assert served.stop(signal.SIGTERM) == 0
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in family if alive(pid)]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=1).close()


def test_a_killed_supervisor_takes_its_children_with_it(served):
    family = descendants(served.process.pid)
    assert len(family) >= 3
    served.stop(signal.SIGKILL)  # no handler runs: the kernel's parent-death signal stops the children
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in family if alive(pid)]
