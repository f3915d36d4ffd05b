#!/usr/bin/env python3
"""Import benchmark: wall time and peak memory of importing one ~53 MB Claude Code session.

The input is built once with ``../shared/bench/make_big_session.py`` from a real session and kept
in ``bench/out/`` (git-ignored). Every run imports it in a fresh Python process into a fresh
database, migrated beforehand (migration is not timed), so caches and earlier imports cannot help.

Each run reports:
  process  wall time of the whole child process (interpreter + django.setup() + the import), i.e. what
           ``manage.py import_sessions FILE --json`` costs from the shell
  import   wall time of the import alone (``call_command("import_sessions", FILE, "--json")``)
  peak RSS the child's peak resident set (getrusage(RUSAGE_SELF).ru_maxrss at exit)

usage: .venv/bin/python bench/import_bench.py [--runs 3] [--backends sqlite,postgres] [--debug 0,1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
SHARED = PROJECT.parent / "shared"
SOURCE = SHARED / "samples" / "claude-code" / "entirecli_a5d8ec9bae67-0_full.jsonl"
MAKE_BIG = SHARED / "bench" / "make_big_session.py"
SIZE_MB = 53  # the "50 MB session": make_big_session.py's SIZE_MB argument, in MiB
OUT_DIR = BENCH_DIR / "out"
BIG_FILE = OUT_DIR / f"big_session_{SIZE_MB}mb.jsonl"

# The bar, from the issue: claude-code-log takes about 12 s and 0.9 GB RSS on this file here;
# we must be >= 5x faster and use < 1/4 of its memory.
TARGET_SECONDS = 2.4
TARGET_RSS_MB = 225

POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
POSTGRES_DB = "bench_import"
POSTGRES_URL = f"postgres://postgres@127.0.0.1:5432/{POSTGRES_DB}"

# Runs inside the fresh child process; prints one JSON line with its own measurements.
CHILD = r"""
import io, json, os, resource, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import call_command
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = io.StringIO()
started = time.perf_counter()
call_command("import_sessions", sys.argv[1], "--json", stdout=out)
seconds = time.perf_counter() - started
report = json.loads(out.getvalue())
print(json.dumps({
    "import_seconds": seconds,
    "rss_before_kb": rss_before,
    "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "report": report,
}))
"""


@dataclass(slots=True)
class Run:
    process_seconds: float
    import_seconds: float
    peak_rss_mb: float
    setup_rss_mb: float
    lines: int


def ensure_big_file() -> Path:
    if BIG_FILE.is_file() and BIG_FILE.stat().st_size > 0:
        return BIG_FILE
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    partial = BIG_FILE.with_suffix(".partial")
    subprocess.run([sys.executable, str(MAKE_BIG), str(SOURCE), str(partial), str(SIZE_MB)], check=True)
    partial.rename(BIG_FILE)
    return BIG_FILE


def _psql(sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", POSTGRES_ADMIN_URL, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )


def postgres_reachable() -> bool:
    if shutil.which("psql") is None:
        return False
    try:
        return _psql("SELECT 1").returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _recreate_postgres_db() -> None:
    for sql in (f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)", f"CREATE DATABASE {POSTGRES_DB}"):
        done = _psql(sql)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {sql}: {done.stderr.strip()}")


def _child_env(*, var_dir: Path, backend: str, debug: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["SESSION_INSPECTOR_VAR"] = str(var_dir)
    env["DEBUG"] = debug
    env["SECRET_KEY"] = env.get("SECRET_KEY") or "bench-only-secret-key-not-for-production"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if backend == "postgres":
        env["DATABASE_URL"] = POSTGRES_URL
    return env


def run_once(*, file: Path, backend: str, debug: str) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        var_dir = Path(tmp)
        env = _child_env(var_dir=var_dir, backend=backend, debug=debug)
        if backend == "postgres":
            _recreate_postgres_db()
        try:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=PROJECT, env=env, check=True
            )
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(file)],
                cwd=PROJECT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            process_seconds = time.perf_counter() - started
        finally:
            if backend == "postgres":
                _psql(f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)")
    if done.returncode != 0:
        raise RuntimeError(f"import failed ({backend}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    report = result["report"]
    if report["rejected"] or len(report["imported"]) != 1:
        raise RuntimeError(f"unexpected import report: {report}")
    # ru_maxrss is in KiB on Linux
    return Run(
        process_seconds=process_seconds,
        import_seconds=result["import_seconds"],
        peak_rss_mb=result["peak_rss_kb"] / 1024,
        setup_rss_mb=result["rss_before_kb"] / 1024,
        lines=report["imported"][0]["lines"],
    )


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _fmt(values: list[float], unit: str) -> str:
    return f"{min(values):7.2f} / {statistics.median(values):7.2f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument(
        "--debug", default="1,0", help="DEBUG values to run with, comma-separated (1 is the dev default)"
    )
    args = parser.parse_args()

    load_start = _load_average()
    file = ensure_big_file()
    size_mb = file.stat().st_size / 1e6
    print(f"input: {file} ({size_mb:.1f} MB), {args.runs} runs each, fresh process and database per run")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "postgres" in backends and not postgres_reachable():
        print(f"postgres: {POSTGRES_ADMIN_URL} not reachable, skipped")
        backends.remove("postgres")

    rows: list[tuple[str, list[Run]]] = []
    for backend in backends:
        for debug in [d.strip() for d in args.debug.split(",") if d.strip()]:
            label = f"{backend} DEBUG={debug}"
            runs = []
            for i in range(args.runs):
                run = run_once(file=file, backend=backend, debug=debug)
                print(
                    f"  {label} run {i + 1}: process {run.process_seconds:.2f} s, import {run.import_seconds:.2f} s, "
                    f"peak RSS {run.peak_rss_mb:.0f} MB (after setup {run.setup_rss_mb:.0f} MB), {run.lines} lines",
                    flush=True,
                )
                runs.append(run)
            rows.append((label, runs))

    print()
    print(f"{'config':20} {'process s min/med':>20} {'import s min/med':>20} {'peak RSS MB min/med':>22}  target")
    for label, runs in rows:
        process = [r.process_seconds for r in runs]
        imported = [r.import_seconds for r in runs]
        rss = [r.peak_rss_mb for r in runs]
        ok = statistics.median(process) <= TARGET_SECONDS and statistics.median(rss) <= TARGET_RSS_MB
        print(
            f"{label:20} {_fmt(process, 's'):>20} {_fmt(imported, 's'):>20} {_fmt(rss, 'MB'):>22}  "
            f"{'met' if ok else 'NOT met'}"
        )
    print(f"target (issue): <= {TARGET_SECONDS} s and <= {TARGET_RSS_MB} MB peak RSS (process)")
    print(f"load average at start / end: {load_start} / {_load_average()} (other work on the machine skews timings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
