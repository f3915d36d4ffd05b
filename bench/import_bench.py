#!/usr/bin/env python3
"""Import benchmark: wall time and peak memory of importing one ~53 MB Claude Code session.

The input is built once with ``../shared/bench/make_big_session.py`` from a real session and kept
in ``bench/out/`` (git-ignored). Every run imports it in a fresh Python process into a fresh
database, migrated beforehand (migration is not timed), so caches and earlier imports cannot help.

Each run is the command itself, ``manage.py import_sessions FILE --json``, in a fresh process, and reports:
  process  its wall time, from the shell's point of view (interpreter, django.setup(), the import, the exit)
  peak RSS its peak resident set: wait4's, or what its processes held together (sampled), whichever is larger

The baseline, claude-code-log (``claude-code-log FILE -o out.html``), runs in the same rounds, interleaved with
ours, so machine load hits both alike; its executable is ``$CLAUDE_CODE_LOG``, else ``../ccl-venv/bin/claude-code-log``
(``python -m venv ../ccl-venv && ../ccl-venv/bin/pip install claude-code-log``); without it the ratio is skipped.
A folder of 1,000 small sessions (copies of a small sample with fresh ids) is imported once for throughput.

usage: .venv/bin/python bench/import_bench.py [--runs 3] [--backends sqlite,postgres] [--debug 0] [--markdown]
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
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402
from bench.common import OUT_DIR, PROJECT, SHARED  # noqa: E402

# The bar (issue 12): the whole process at most 1/5 of claude-code-log's time on the same file in the same run,
# and at most 1/4 of its peak memory.
TARGET_TIME_RATIO = 5.0
TARGET_MEMORY_RATIO = 4.0
SMALL_SESSIONS = 1000  # the folder of small sessions whose import throughput is reported
SMALL_SOURCE = SHARED / "samples" / "claude-code" / "entirecli_4c02af2759b6-0_full.jsonl"

POSTGRES_DB = "bench_import"
POSTGRES_URL = common.postgres_url(POSTGRES_DB)


@dataclass(slots=True)
class Run:
    process_seconds: float
    peak_rss_mb: float
    lines: int = 0


def _sample_tree_rss(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.wait(0.01):
        peak[0] = max(peak[0], common.tree_rss(pid))


def _timed(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[Run, str]:
    """Run ``cmd``; its wall time, its peak memory and its stdout.

    The peak is wait4's (the process's own, or of a child it waited for, whichever was larger), or, when larger, the
    most its processes held together, sampled every 10 ms."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        peak, done = [0], threading.Event()
        sampler = threading.Thread(target=_sample_tree_rss, args=(proc.pid, peak, done), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}):\n{stderr[-4000:]}")
    return Run(process_seconds=seconds, peak_rss_mb=max(usage.ru_maxrss * 1024, peak[0]) / 1024 / 1024), stdout


PRICE_CACHE = OUT_DIR / "cache" / "prices.json"


def claude_code_log() -> str | None:
    """claude-code-log's executable: $CLAUDE_CODE_LOG, else ../ccl-venv beside the checkout, else on PATH."""
    for candidate in (os.environ.get("CLAUDE_CODE_LOG"), str(PROJECT.parent / "ccl-venv" / "bin" / "claude-code-log")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("claude-code-log")


def run_baseline(*, exe: str, file: Path) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-ccl-") as tmp:
        run, _ = _timed([exe, str(file), "-o", str(Path(tmp) / "out.html")], cwd=Path(tmp))
    return run


def _child_env(*, var_dir: Path, backend: str, debug: str) -> dict[str, str]:
    return common.child_env(var_dir=var_dir, database_url=POSTGRES_URL if backend == "postgres" else None, debug=debug)


def run_once(*, path: Path, backend: str, debug: str) -> Run:
    """``manage.py import_sessions PATH --json`` in a fresh process, into a fresh migrated database."""
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        var_dir = Path(tmp)
        env = _child_env(var_dir=var_dir, backend=backend, debug=debug)
        if backend == "postgres":
            common.recreate_postgres_db(POSTGRES_DB)
        try:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=PROJECT, env=env, check=True
            )
            # A fresh database, not a fresh install: var/cache (package price lookups) is kept between runs, as
            # bin/run keeps var/.
            prices = var_dir / "cache" / "prices.json"
            if PRICE_CACHE.is_file():
                prices.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(PRICE_CACHE, prices)
            run, stdout = _timed(
                [sys.executable, "manage.py", "import_sessions", str(path), "--json"], cwd=PROJECT, env=env
            )
            if prices.is_file():
                PRICE_CACHE.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(prices, PRICE_CACHE)
        finally:
            if backend == "postgres":
                common.psql(f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)")
    report = json.loads(stdout)
    if report["rejected"] or not report["imported"]:
        raise RuntimeError(f"unexpected import report: {str(report)[:2000]}")
    run.lines = sum(item["lines"] for item in report["imported"])
    return run


def make_small_folder() -> tuple[Path, int]:
    """SMALL_SESSIONS copies of a small real session, each under its own session id (so none is a duplicate)."""
    folder = OUT_DIR / f"small_sessions_{SMALL_SESSIONS}"
    source = SMALL_SOURCE.read_bytes()
    first = json.loads(source.splitlines()[0])
    old_id = next(
        (json.loads(line).get("sessionId") for line in source.splitlines() if b'"sessionId"' in line), None
    ) or first.get("sessionId")
    if not old_id:
        raise RuntimeError(f"{SMALL_SOURCE} has no sessionId")
    if not (folder.is_dir() and len(list(folder.glob("*.jsonl"))) == SMALL_SESSIONS):
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(SMALL_SESSIONS):
            new_id = f"00000000-0000-4000-8000-{i:012d}"
            (folder / f"{new_id}.jsonl").write_bytes(source.replace(old_id.encode(), new_id.encode()))
    return folder, SMALL_SESSIONS * len(source)


def _fmt(values: list[float], unit: str) -> str:
    return f"{min(values):7.2f} / {statistics.median(values):7.2f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--debug", default="0", help="DEBUG values, comma-separated (0 is bin/run's default)")
    parser.add_argument("--no-folder", action="store_true", help="skip the folder of 1,000 small sessions")
    parser.add_argument("--markdown", action="store_true", help="also print the rows it writes into bench/results.md")
    args = parser.parse_args()

    load_start = common.load_average()
    file = common.ensure_big_file()
    common.compile_project()
    size_mb = file.stat().st_size / 1e6
    print(f"input: {file} ({size_mb:.1f} MB), {args.runs} rounds, fresh process and database per run")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "postgres" in backends and not common.postgres_reachable():
        print(f"postgres: {common.POSTGRES_ADMIN_URL} not reachable, skipped")
        backends.remove("postgres")
    exe = claude_code_log()
    if exe is None:
        print("claude-code-log not found ($CLAUDE_CODE_LOG, ../ccl-venv): no baseline, no ratio")

    configs = [(b, d.strip()) for b in backends for d in args.debug.split(",") if d.strip()]
    runs: dict[str, list[Run]] = {f"{b} DEBUG={d}": [] for b, d in configs}
    baseline: list[Run] = []
    for i in range(args.runs):  # interleaved rounds: a burst of load hits ours and the baseline alike
        if exe is not None:
            run = run_baseline(exe=exe, file=file)
            baseline.append(run)
            print(f"  round {i + 1} claude-code-log: {run.process_seconds:.2f} s, peak RSS {run.peak_rss_mb:.0f} MB")
        for backend, debug in configs:
            label = f"{backend} DEBUG={debug}"
            run = run_once(path=file, backend=backend, debug=debug)
            runs[label].append(run)
            print(
                f"  round {i + 1} {label}: process {run.process_seconds:.2f} s, "
                f"peak RSS {run.peak_rss_mb:.0f} MB, {run.lines} lines",
                flush=True,
            )

    folder_rows: list[tuple[str, Run, int]] = []
    if not args.no_folder:
        folder, folder_bytes = make_small_folder()
        for backend in backends:
            run = run_once(path=folder, backend=backend, debug=configs[0][1] if configs else "0")
            folder_rows.append((backend, run, folder_bytes))
            print(
                f"  folder of {SMALL_SESSIONS:,} sessions, {backend}: process {run.process_seconds:.2f} s "
                f"({SMALL_SESSIONS / run.process_seconds:,.0f} sessions/s, "
                f"{folder_bytes / 1e6 / run.process_seconds:.1f} MB/s), peak RSS {run.peak_rss_mb:.0f} MB",
                flush=True,
            )

    base_s = statistics.median(r.process_seconds for r in baseline) if baseline else None
    base_mb = statistics.median(r.peak_rss_mb for r in baseline) if baseline else None
    print()
    print(f"{'config':20} {'process s min/med':>20} {'peak RSS MB min/med':>22}  vs baseline")
    if base_s is not None and base_mb is not None:
        b_s, b_mb = [r.process_seconds for r in baseline], [r.peak_rss_mb for r in baseline]
        print(f"{'claude-code-log':20} {_fmt(b_s, 's'):>20} {_fmt(b_mb, 'MB'):>22}")
    md: list[str] = []
    for label, label_runs in runs.items():
        process = [r.process_seconds for r in label_runs]
        rss = [r.peak_rss_mb for r in label_runs]
        verdict = "no baseline"
        cell_base = "n/a"
        if base_s is not None and base_mb is not None:
            t_ratio, m_ratio = base_s / statistics.median(process), base_mb / statistics.median(rss)
            met = t_ratio >= TARGET_TIME_RATIO and m_ratio >= TARGET_MEMORY_RATIO
            verdict = f"{t_ratio:.1f}x faster, {m_ratio:.1f}x less memory: {'met' if met else 'NOT met'}"
            cell_base = f"{base_s:.2f} s, {base_mb:.0f} MB"
        print(f"{label:20} {_fmt(process, 's'):>20} {_fmt(rss, 'MB'):>22}  {verdict}")
        backend = label.split()[0]
        md.append(
            f"| import 53 MB, whole process ({backend}, {label.split()[1]}) | {statistics.median(process):.2f} s, "
            f"{statistics.median(rss):.0f} MB | claude-code-log: {cell_base} | ≥ 5x faster, ≥ 4x less memory | "
            f"{verdict} |"
        )
    for backend, run, folder_bytes in folder_rows:
        md.append(
            f"| import a folder of {SMALL_SESSIONS:,} small sessions ({backend}) | {run.process_seconds:.1f} s "
            f"({SMALL_SESSIONS / run.process_seconds:,.0f} sessions/s, {folder_bytes / 1e6 / run.process_seconds:.1f}"
            f" MB/s), {run.peak_rss_mb:.0f} MB | | reported | |"
        )
    print(f"target (issue 12): >= {TARGET_TIME_RATIO:g}x faster, >= {TARGET_MEMORY_RATIO:g}x less memory than it")
    print(
        f"load average at start / end: {load_start} / {common.load_average()} (other work on the machine skews timings)"
    )
    common.record_results(
        f"import_bench.py --backends {args.backends}", md, load=f"{load_start} → {common.load_average()}"
    )
    if args.markdown:
        print("\n".join(["<!-- rows -->", *md]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
