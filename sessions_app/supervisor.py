"""Runs the web server, the task worker(s) and the watcher as child processes, and keeps them running.

A child that exits is started again (after a pause that grows while it keeps failing at once). SIGINT or
SIGTERM stops every child: SIGTERM first, SIGKILL for any still running after ``stop_timeout``. Children run
in their own session, so a Ctrl-C reaches only the supervisor, which stops them in order; and each asks the
kernel for SIGTERM if the supervisor itself dies (even by SIGKILL), so none outlives it.

Children's output goes through the supervisor, one line at a time, so lines from different processes never
interleave mid-line. With ``log_dir`` (what ``manage.py serve`` passes), each child's lines go to its own file there
(``web.log``, ``worker.log``, ``watch.log``, timestamped; a file past ``LOG_ROTATE_BYTES`` is renamed ``.1``), and
the terminal gets only what a person must see: the child's stderr (warnings, errors, tracebacks: see
``LOG_STREAMS`` in config/settings.py), prefixed with its name (``worker |``), and a child's exit. Without
``log_dir`` every line goes to ``out``, prefixed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# A log file past this size is renamed NAME.log.1 (replacing the one before) and started again: a server left running
# for months keeps at most twice this per child. A busy day's task worker writes about 1 MB.
LOG_ROTATE_BYTES = 10 * 1024 * 1024


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGTERM when the supervisor exits for any reason.
    # Not Linux (no prctl): Ctrl-C and a kill of the supervisor still stop the children, a SIGKILL does not.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass(slots=True)
class ChildSpec:
    name: str  # the prefix of its output lines, e.g. "web" or "worker-2"
    argv: Sequence[str]
    pass_fds: tuple[int, ...] = ()  # descriptors the child inherits (the web server's listening socket)


class LogFile:
    """One child's log file, shared by its restarts and its two streams: whole lines, timestamped, rotated by size."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, line: str) -> None:
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        with self._lock:
            if self._file.closed:
                return
            if self._file.tell() > LOG_ROTATE_BYTES:
                self._file.close()
                self.path.replace(self.path.with_name(self.path.name + ".1"))
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(f"{stamp} {line}\n")
            self._file.flush()  # read while the server runs (`tail -f`), and kept when it is killed

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass(slots=True)
class Child:
    spec: ChildSpec
    process: subprocess.Popen[bytes]
    started: float
    restarts: int = 0
    failures_in_a_row: int = 0
    readers: list[threading.Thread] = field(default_factory=list)


@dataclass(slots=True)
class Supervisor:
    specs: Sequence[ChildSpec]
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    stop_timeout: float = 10.0
    restart_delay: float = 1.0  # doubled after each exit within ``stable_after`` seconds of starting, up to 30 s
    stable_after: float = 10.0
    env: dict[str, str] | None = None
    cwd: str | None = None
    on_line: Callable[[str, str], None] | None = None  # (child name, line): lets the caller wait for a child's line
    log_dir: Path | None = None  # each child's lines go to NAME.log here; only its stderr and its exits to ``out``
    children: dict[str, Child] = field(default_factory=dict)
    logs: dict[str, LogFile] = field(default_factory=dict)
    _stopping: threading.Event = field(default_factory=threading.Event)
    # Reentrant: the signal handler writes too, and may interrupt the main thread while it holds the lock.
    _write_lock: threading.RLock = field(default_factory=threading.RLock)
    _pending: dict[str, float] = field(default_factory=dict)  # name -> when to restart it
    _progress_open: bool = False  # a progress line is on the terminal without its newline

    # -- output -----------------------------------------------------------------------------

    def say(self, text: str) -> None:
        with self._write_lock:
            if self._progress_open:
                self.out.write("\n")
                self._progress_open = False
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()

    def progress(self, text: str) -> None:
        """One line that the next progress line replaces, on a terminal (elsewhere only the final ``say`` shows)."""
        if not self.out.isatty():
            return
        with self._write_lock:
            self.out.write(f"\r\x1b[K{text}")  # back to the line's start, erase it: the line is rewritten in place
            self.out.flush()
            self._progress_open = True

    def end_progress(self, text: str) -> None:
        """The progress line's last state, kept on the terminal."""
        with self._write_lock:
            if self._progress_open:
                self.out.write("\r\x1b[K")
                self._progress_open = False
            self.say(text)

    def log_path(self, name: str) -> Path | None:
        return self.logs[name].path if name in self.logs else None

    def _event(self, name: str, text: str, *, loud: bool) -> None:
        """What the supervisor did with a child: in its log; on the terminal too when ``loud`` (or without logs)."""
        if name in self.logs:
            self.logs[name].write(f"[serve] {text}")
        if loud or name not in self.logs:
            self.say(f"{name} {text}")

    def _pump(self, name: str, stream: IO[bytes], *, to_terminal: bool) -> None:
        width = max(len(s.name) for s in self.specs)
        log = self.logs.get(name)
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if log is not None:
                log.write(line)
            # Once stopping, a child's goodbye ("shutting down gracefully") is in its log, not news on the terminal.
            if log is None or (to_terminal and not self._stopping.is_set()):
                self.say(f"{name:>{width}} | {line}")
            if self.on_line is not None:
                self.on_line(name, line)
        stream.close()

    # -- children ---------------------------------------------------------------------------

    def _spawn(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        if self.log_dir is not None and spec.name not in self.logs:
            self.logs[spec.name] = LogFile(self.log_dir / f"{spec.name}.log")
        process = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # Apart only when they go different ways: into one pipe, a line never splits another.
            stderr=subprocess.PIPE if self.log_dir is not None else subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=self.env,
            cwd=self.cwd,
            pass_fds=spec.pass_fds,
        )
        assert process.stdout is not None
        readers = [threading.Thread(target=self._pump, args=(spec.name, process.stdout), kwargs={"to_terminal": False})]
        if process.stderr is not None:
            readers.append(
                threading.Thread(target=self._pump, args=(spec.name, process.stderr), kwargs={"to_terminal": True})
            )
        for reader in readers:
            reader.daemon = True
            reader.start()
        previous = self.children.get(spec.name)
        child = Child(spec=spec, process=process, started=time.monotonic(), readers=readers)
        if previous is not None:
            child.restarts = previous.restarts + 1
            child.failures_in_a_row = previous.failures_in_a_row
        self.children[spec.name] = child
        self._event(spec.name, f"started, pid {process.pid}", loud=False)
        return process

    def start(self) -> None:
        for spec in self.specs:
            self._spawn(spec)

    def pids(self) -> dict[str, int]:
        return {name: child.process.pid for name, child in self.children.items()}

    def check(self) -> None:
        """Restart children that exited, once their pause is over."""
        now = time.monotonic()
        for name, child in list(self.children.items()):
            code = child.process.poll()
            if code is None or self._stopping.is_set():
                continue
            if name not in self._pending:
                # What it left behind (its own children) goes with it before a new one starts.
                _signal_group(child.process, signal.SIGKILL)
                quick = now - child.started < self.stable_after
                child.failures_in_a_row = child.failures_in_a_row + 1 if quick else 0
                delay = min(self.restart_delay * 2 ** max(child.failures_in_a_row - 1, 0), 30.0)
                where = self.log_path(name)
                more = f" (its log: {where})" if where is not None else ""
                self._event(name, f"exited with code {code}; starting it again in {delay:.0f} s{more}", loud=True)
                self._pending[name] = now + delay
            elif now >= self._pending[name]:
                del self._pending[name]
                self._spawn(child.spec)

    def run(self, *, poll_interval: float = 0.2) -> None:
        """Until stopped (``request_stop`` or SIGINT/SIGTERM when installed): watch and restart children."""
        while not self._stopping.wait(poll_interval):
            self.check()
        self.stop_all()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def request_stop(self) -> None:
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            if self._stopping.is_set():
                return
            self.say(f"{signal.Signals(signum).name}: stopping")
            self._stopping.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGHUP, handler)

    def stop_all(self) -> None:
        self._stopping.set()
        running = [c for c in self.children.values() if c.process.poll() is None]
        for child in running:
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for child in running:
            try:
                child.process.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                self._event(child.spec.name, f"did not stop in {self.stop_timeout:.0f} s; killed", loud=True)
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait()
        for child in self.children.values():
            # A child's own children are in its process group: none may outlive it.
            _signal_group(child.process, signal.SIGKILL)
            for reader in child.readers:
                reader.join(timeout=2)
        for name, child in self.children.items():
            if name in self.logs:
                self.logs[name].write(f"[serve] stopped (exit code {child.process.returncode})")
        for log in self.logs.values():
            log.close()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def wait_for_port(*, host: str, port: int, timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
    """True once something accepts connections at host:port; False after ``timeout`` or when ``alive()`` fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False
