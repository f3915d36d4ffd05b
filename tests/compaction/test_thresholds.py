"""Thresholds live in the core: the window tables load without any strategy, and old imports still work."""

from __future__ import annotations

import subprocess
import sys

from compaction.strategies.base import Thresholds as ThresholdsFromBase
from compaction.thresholds import Thresholds
from tests.conftest import REPO


def test_the_core_window_tables_load_no_strategy_module() -> None:
    # A fresh interpreter: in this one the strategies are already imported by other tests.
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, compaction.thresholds, compaction.windows;"
            "print(sorted(m for m in sys.modules if m.startswith('compaction.')))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "compaction.windows" in loaded
    assert "compaction.strategies" not in loaded


def test_strategies_base_reexports_the_core_class() -> None:
    assert ThresholdsFromBase is Thresholds


def test_no_core_module_imports_thresholds_from_the_strategies() -> None:
    core = sorted((REPO / "compaction").glob("*.py"))
    offenders = [
        path.name
        for path in core
        for line in path.read_text().splitlines()
        if line.startswith("from compaction.strategies") and "Thresholds" in line
    ]
    assert offenders == []
