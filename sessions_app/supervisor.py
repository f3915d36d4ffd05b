"""Runs the web server, the task worker(s) and the watcher as child processes, and keeps them running.

A child that exits is started again (after a pause that grows while it keeps failing at once). SIGINT or
SIGTERM stops every child: SIGTERM first, SIGKILL for any still running after ``stop_timeout``. Children run
in their own session, so a Ctrl-C reaches only the supervisor, which stops them in order; and each asks the
kernel for SIGTERM if the supervisor itself dies (even by SIGKILL), so none outlives it.

Children's output goes through the supervisor, one prefixed line at a time (``web |``, ``worker |``, ``watch |``),
so lines from different processes never interleave mid-line.
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
from typing import IO

PR_SET_PDEATHSIG = 1  # linux/prctl.h


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


@dataclass(slots=True)
class Child:
    spec: ChildSpec
    process: subprocess.Popen[bytes]
    started: float
    restarts: int = 0
    failures_in_a_row: int = 0
    reader: threading.Thread | None = None


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
    children: dict[str, Child] = field(default_factory=dict)
    _stopping: threading.Event = field(default_factory=threading.Event)
    # Reentrant: the signal handler writes too, and may interrupt the main thread while it holds the lock.
    _write_lock: threading.RLock = field(default_factory=threading.RLock)
    _pending: dict[str, float] = field(default_factory=dict)  # name -> when to restart it

    # -- output -----------------------------------------------------------------------------

    def say(self, text: str) -> None:
        with self._write_lock:
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        width = max(len(s.name) for s in self.specs)
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.say(f"{name:>{width}} | {line}")
            if self.on_line is not None:
                self.on_line(name, line)
        stream.close()

    # -- children ---------------------------------------------------------------------------

    def _spawn(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=self.env,
            cwd=self.cwd,
            pass_fds=spec.pass_fds,
        )
        assert process.stdout is not None
        reader = threading.Thread(target=self._pump, args=(spec.name, process.stdout), daemon=True)
        reader.start()
        previous = self.children.get(spec.name)
        child = Child(spec=spec, process=process, started=time.monotonic(), reader=reader)
        if previous is not None:
            child.restarts = previous.restarts + 1
            child.failures_in_a_row = previous.failures_in_a_row
        self.children[spec.name] = child
        self.say(f"{spec.name} started, pid {process.pid}")
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
                self.say(f"{name} exited with code {code}; starting it again in {delay:.0f} s")
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
                self.say(f"{child.spec.name} did not stop in {self.stop_timeout:.0f} s; killed")
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait()
        for child in self.children.values():
            # A child's own children are in its process group: none may outlive it.
            _signal_group(child.process, signal.SIGKILL)
            if child.reader is not None:
                child.reader.join(timeout=2)


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
