"""klaude-code 2.8.1 itself, in a virtualenv of its own, for tests that let klaude's code read our files.

klaude-code declares ``Requires-Python >=3.13`` (docs/formats/klaude-code.md, "Sources") and is no dependency of
this project, so it lives outside the checkout: ``KLAUDE_VENV`` (default ``~/.cache/session-inspector/klaude-code-
2.8.1``), built on first use from pyenv's Python 3.13 (``KLAUDE_BASE_PYTHON``, default
``~/.pyenv/versions/3.13.0/bin/python``) with ``pip install klaude-code==2.8.1 httpx`` (its Anthropic provider
imports httpx, unlisted), as README.md's "klaude-code goldens" does by hand. The scripts it runs are the ones the
goldens were made with (``tests/compaction/goldens/klaude_2_8_1_loader.py``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

KLAUDE_VERSION = "2.8.1"
VENV = Path(
    os.environ.get("KLAUDE_VENV") or Path.home() / ".cache" / "session-inspector" / f"klaude-code-{KLAUDE_VERSION}"
)
BASE_PYTHON = Path(
    os.environ.get("KLAUDE_BASE_PYTHON") or Path.home() / ".pyenv" / "versions" / "3.13.0" / "bin" / "python"
)
BUILD_TIMEOUT_S = 900
_READY = "ready"  # written last: a virtualenv without it is a build that did not finish


class KlaudeUnavailable(RuntimeError):
    """The virtualenv cannot be built here; the message says why (a test skips with it)."""


def klaude_python() -> Path:
    """The Python of a virtualenv where ``import klaude_code`` is version 2.8.1; built once, under a lock, so two
    test processes never build it at the same time."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (VENV / _READY).exists() and python.exists():
            return python
        if not BASE_PYTHON.exists():
            raise KlaudeUnavailable(f"no Python 3.13 at {BASE_PYTHON} (set KLAUDE_BASE_PYTHON)")
        shutil.rmtree(VENV, ignore_errors=True)
        steps = [
            [str(BASE_PYTHON), "-m", "venv", str(VENV)],
            [str(python), "-m", "pip", "install", "-q", f"klaude-code=={KLAUDE_VERSION}", "httpx"],
            [str(python), "-c", "import importlib.metadata as m, klaude_code; print(m.version('klaude-code'))"],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise KlaudeUnavailable(f"{' '.join(step[:4])} failed: {exc}") from None
            if done.returncode != 0:
                shutil.rmtree(VENV, ignore_errors=True)
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise KlaudeUnavailable(f"building the klaude-code {KLAUDE_VERSION} virtualenv failed: {last}")
        if done.stdout.strip() != KLAUDE_VERSION:
            raise KlaudeUnavailable(f"pip installed klaude-code {done.stdout.strip()}, not {KLAUDE_VERSION}")
        (VENV / _READY).write_text(KLAUDE_VERSION + "\n")
        return python
