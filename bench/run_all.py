#!/usr/bin/env python3
"""Every benchmark of issue 12, one after the other, and bench/README.md's table of current numbers rewritten.

Runs import_bench.py (SQLite and PostgreSQL, against claude-code-log, and the folder of 1,000 small sessions),
views_bench.py (HTTP through bin/run's server, against ContextViz), analysis_bench.py (replays and the cold
diagnosis), list_bench.py (10,000 sessions) and the start-up of a ``manage.py`` command, each with
``--markdown``, collects the rows they print, and replaces the table between the ``<!-- current -->`` markers
of bench/README.md with them, the machine, the date and the load average before and after each script (the
machine may be shared: the ratios against a baseline run in the same rounds, so they hold better than the raw
times).

usage: .venv/bin/python bench/run_all.py [--quick] [--no-postgres] [--dry-run]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
README = BENCH_DIR / "README.md"
START, END = "<!-- current -->", "<!-- /current -->"
sys.path.insert(0, str(BENCH_DIR))

import import_bench  # noqa: E402

TARGET_COMMAND_S = 0.8
SMALL_SESSION = import_bench.SHARED / "samples" / "claude-code" / "entirecli_7662d755ef9f-2_full.jsonl"


def _rows(script: str, *args: str) -> tuple[list[str], str]:
    before = import_bench._load_average()
    print(f"$ bench/{script} {' '.join(args)}   (load {before})", flush=True)
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args, "--markdown"], cwd=PROJECT, capture_output=True, text=True
    )
    print(done.stdout[-3000:], done.stderr[-2000:] if done.returncode else "", flush=True)
    if done.returncode != 0:
        return [f"| bench/{script} {' '.join(args)} | failed (exit {done.returncode}) | | | |"], before
    rows = done.stdout.split("<!-- rows -->", 1)[1].strip().splitlines() if "<!-- rows -->" in done.stdout else []
    return rows, f"{before} → {import_bench._load_average()}"


def command_rows(runs: int) -> list[str]:
    """Wall time of ``manage.py`` commands on a small session (a fresh process each; the database prepared once)."""
    import tempfile

    import_bench.compile_project()
    with tempfile.TemporaryDirectory(prefix="si-cmd-") as tmp:
        env = import_bench._child_env(var_dir=Path(tmp), backend="sqlite", debug="0")
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=PROJECT, env=env, check=True)
        subprocess.run(
            [*manage, "import_sessions", str(SMALL_SESSION)],
            cwd=PROJECT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        commands = {
            "check": ["check"],
            "session_stats": ["session_stats", str(SMALL_SESSION), "--json"],
            "timeline": ["timeline", str(SMALL_SESSION), "--json"],
            "diagnose": ["diagnose", str(SMALL_SESSION), "--json"],
            "replay": ["replay", str(SMALL_SESSION), "--strategy", "claude-code", "--json"],
        }
        times: dict[str, float] = {}
        for name, args in commands.items():
            walls = []
            for _ in range(runs):
                started = time.perf_counter()
                subprocess.run([*manage, *args], cwd=PROJECT, env=env, check=True, stdout=subprocess.DEVNULL)
                walls.append(time.perf_counter() - started)
            times[name] = statistics.median(walls)
            print(f"  manage.py {name}: {times[name]:.2f} s (median of {runs})", flush=True)
    worst = max(times, key=lambda k: times[k])
    ok = times[worst] <= TARGET_COMMAND_S
    cells = ", ".join(f"{k} {v:.2f}" for k, v in times.items())
    return [
        f"| `manage.py` commands, small session (s) | {cells} | | < {TARGET_COMMAND_S} s each "
        f"| {'met' if ok else 'NOT met'} |"
    ]


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a first look, not for the README)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="print the table, leave README.md alone")
    args = parser.parse_args()
    runs = "2" if args.quick else "5"
    backends = ["sqlite"] if args.no_postgres else ["sqlite", "postgres"]
    started = datetime.now(UTC)
    sections: list[tuple[list[str], str]] = []
    # The import's target is a ratio to a baseline whose time drifts by 20 % within minutes: five interleaved rounds.
    import_runs = "2" if args.quick else "5"
    sections.append(_rows("import_bench.py", "--runs", import_runs, "--backends", ",".join(backends)))
    for backend in backends:
        # One first request after a start is one sample: three fresh servers per URL, their median reported.
        starts = "1" if args.quick else "3"
        sections.append(_rows("views_bench.py", "--backend", backend, "--runs", "5", "--starts", starts))
    for backend in backends:
        sections.append(_rows("analysis_bench.py", "--backend", backend, "--runs", runs))
    for backend in backends:
        sections.append(_rows("list_bench.py", "--backend", backend, "--runs", "5"))
    before = import_bench._load_average()
    sections.append((command_rows(3 if args.quick else 5), f"{before} → {import_bench._load_average()}"))

    lines = [
        START,
        f"**Run:** {started:%Y-%m-%d %H:%M} UTC by `bench/run_all.py`{' --quick' if args.quick else ''}; "
        f"**machine:** {machine()}.",
        "",
        "| measure | ours | baseline (same run) | target | verdict | load average (1/5/15 min, before → after) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rows, load in sections:
        lines += [f"{row} {load} |" for row in rows]
    lines.append(END)
    table = "\n".join(lines)
    print(table)
    if args.dry_run:
        return 0
    text = README.read_text()
    if START in text and END in text:
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: table, text, flags=re.S)
    else:
        text = text.replace("\n", "\n\n## Current numbers (bench/run_all.py)\n\n" + table + "\n", 1)
    README.write_text(text)
    print(f"{README} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
