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
        s.wait_for_log_line("watch", r"^\[serve\] started, pid")
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
    s = Served(tmp_path_factory.mktemp("started"), with_session=True)
    try:
        s.wait_for_line(r"password: ")
        yield s
    finally:
        s.kill_all()


def test_the_terminal_ends_with_the_login_the_children_write_logs_and_errors_still_show(started):
    # The first scan imported the waiting session and the worker ran its tasks: what used to scroll the login away.
    started.wait_for_log_line("worker", r"analyse_session_task state=SUCCESSFUL")
    time.sleep(0.5)  # anything printed after the worker's last task would have arrived by now
    terminal = [line for line in started.lines if line.strip()]
    banner_at = next(i for i, line in enumerate(terminal) if "Session Inspector is running at" in line)
    assert sum("password:" in line for line in started.lines) == 1
    assert terminal[-1] == "Change a password with .venv/bin/python manage.py changepassword reviewer"
    assert "password: " in "\n".join(terminal[banner_at:])
    assert f"Logs: {started.log_dir}/ (web.log, worker.log, watch.log)" in "\n".join(terminal[banner_at:])
    # Before the banner: where the logs go, and the first scan's one line; no child's own line on the terminal.
    before = terminal[:banner_at]
    assert before == [
        f"Starting the web server, 1 task worker and the session watcher; their logs go to {started.log_dir}/",
        "First scan done: 1 file(s), 1 new session(s), 0 grew, 0 not a session.",
    ]
    assert not [line for line in started.lines if " | " in line or "Task id=" in line]
    worker, watch, web = started.log("worker"), started.log("watch"), started.log("web")
    assert worker[0].startswith("[serve] started, pid ") and any("Starting worker" in line for line in worker)
    assert any("INFO django.tasks: Task id=" in line and "state=SUCCESSFUL" in line for line in worker)
    assert any(line.startswith("following ") for line in watch)
    assert "first scan: 1/1 file(s), 1 new session(s), 0 grew, 0 not a session" in watch
    assert any(line.startswith("caught up: 1 file(s)") for line in watch)
    assert any("web server listening on" in line for line in web)

    # An error still reaches the terminal. A request for another host name: Django refuses it (400) and logs an
    # ERROR, which must not hide in web.log.
    conn = http.client.HTTPConnection("127.0.0.1", started.port, timeout=10)
    conn.request("GET", "/login/", headers={"Host": "evil.example"})
    assert conn.getresponse().status == 400
    conn.close()
    shown = started.wait_for_line(r"^\s*web \| ERROR django\.security\.DisallowedHost: Invalid HTTP_HOST header")
    assert "evil.example" in shown.string
    started.wait_for_log_line(
        "web", r"^ERROR django\.security\.DisallowedHost: Invalid HTTP_HOST header: .evil\.example"
    )


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
    old_pid = int(served.wait_for_log_line("worker", r"^\[serve\] started, pid (\d+)").group(1))
    mark, log_mark = len(served.lines), len(served.log("worker"))
    os.kill(old_pid, signal.SIGKILL)
    # The exit is news on the terminal, with where to look; the new pid is in the log.
    exited = served.wait_for_line(
        r"^worker exited with code -9; starting it again in \d+ s \(its log: (.+)\)$", after=mark
    )
    assert exited.group(1) == str(served.log_dir / "worker.log")
    new_pid = int(served.wait_for_log_line("worker", r"^\[serve\] started, pid (\d+)", after=log_mark).group(1))
    assert new_pid != old_pid and alive(new_pid)
    # The web server still answers while the worker is replaced.
    assert _get_status(served.port, "/login/", timeout=5) == 200

    # A killed web process is started again; the port stays open meanwhile (`serve` holds the listening socket), so
    # a request made in between waits in the backlog and is answered, not refused.
    web_pid = int(served.wait_for_log_line("web", r"^\[serve\] started, pid (\d+)").group(1))
    mark, log_mark = len(served.lines), len(served.log("web"))
    os.kill(web_pid, signal.SIGKILL)
    served.wait_for_line(r"^web exited with code -9", after=mark)
    assert _get_status(served.port, "/login/", timeout=30) == 200
    restarted = served.wait_for_log_line("web", r"^\[serve\] started, pid (\d+)", after=log_mark)
    assert int(restarted.group(1)) != web_pid

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
