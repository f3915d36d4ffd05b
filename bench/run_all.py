#!/usr/bin/env python3
"""Every benchmark with a target, one after the other; each writes its own rows into bench/results.md.

Runs import_bench.py (SQLite and PostgreSQL, against claude-code-log, and the folder of 1,000 small sessions),
views_bench.py (HTTP through bin/run's server, against ContextViz), analysis_bench.py (replays and the cold
diagnosis), list_bench.py (10,000 sessions) and the start-up of ``manage.py`` commands (recorded here). Each
section of bench/results.md says when, on which machine and under which load average its numbers were taken (the
machine may be shared: the ratios against a baseline run in the same rounds, so they hold better than raw times).

usage: .venv/bin/python bench/run_all.py [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

BENCH_DIR = common.BENCH_DIR
PROJECT = common.PROJECT


TARGET_COMMAND_S = 0.8
SMALL_SESSION = common.SHARED / "samples" / "claude-code" / "entirecli_7662d755ef9f-2_full.jsonl"


def _rows(script: str, *args: str) -> tuple[list[str], str]:
    before = common.load_average()
    print(f"$ bench/{script} {' '.join(args)}   (load {before})", flush=True)
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args, "--markdown"], cwd=PROJECT, capture_output=True, text=True
    )
    print(done.stdout[-3000:], done.stderr[-2000:] if done.returncode else "", flush=True)
    if done.returncode != 0:
        return [f"| bench/{script} {' '.join(args)} | failed (exit {done.returncode}) | | | |"], before
    rows = done.stdout.split("<!-- rows -->", 1)[1].strip().splitlines() if "<!-- rows -->" in done.stdout else []
    return rows, f"{before} → {common.load_average()}"


def command_rows(runs: int) -> list[str]:
    """Wall time of ``manage.py`` commands on a small session (a fresh process each; the database prepared once)."""
    import tempfile

    common.compile_project()
    with tempfile.TemporaryDirectory(prefix="si-cmd-") as tmp:
        env = common.child_env(var_dir=Path(tmp), database_url=None, debug="0")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a first look, not numbers to keep)")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    runs = "2" if args.quick else "5"
    backends = ["sqlite"] if args.no_postgres else ["sqlite", "postgres"]
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
    before = common.load_average()

    common.record_results(
        "run_all.py: manage.py commands",
        command_rows(3 if args.quick else 5),
        load=f"{before} → {common.load_average()}",
    )
    for rows, load in sections:
        print("\n".join(rows), f"(load {load})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
