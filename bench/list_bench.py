#!/usr/bin/env python3
"""Session list at scale: 10,000 sessions, a page of the list with filters and sorting.

Generates the sessions directly in a fresh bench database (no import: the list reads only the sessions' own
columns, which an import fills), spread over 4 agents, 40 projects, 8 models, two years of start dates, sizes,
peaks, costs (some unpriced) and the compaction / overflow / failure flags. Then requests list pages in-process
with Django's test client (logged in, DEBUG=0: middleware, view, template and database), first and
``--runs`` more, and reports the median and the number of queries.

Target (issue 12): <= 150 ms for a page, with filters and sorting.

usage: .venv/bin/python bench/list_bench.py [--backend sqlite|postgres] [--sessions 10000] [--runs 7] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

BENCH_DIR = common.BENCH_DIR
PROJECT = common.PROJECT


TARGET_MS = 150.0
POSTGRES_DB = "bench_list"
FORMATS = ("claude-code", "klaude-code", "khaelor", "codex")
MODELS = (
    "claude-opus-4-5-20251101",
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-1-20250805",
    "gpt-5-codex",
    "gpt-5.1-codex",
    "claude-sonnet-4-20250514",
    "claude-3-7-sonnet-20250219",
)
QUERIES = (
    ("newest first", ""),
    ("oldest first", "?sort=-date"),
    ("largest", "?sort=size"),
    ("peak context", "?sort=peak"),
    ("cost", "?sort=cost"),
    ("page 100", "?page=100"),
    ("agent + cost", "?agent=codex&sort=cost"),
    ("project", "?project=/home/dev/project-07"),
    ("model + largest", "?model=claude-opus-4-5-20251101&sort=size"),
    ("dates", "?since=2025-06-01&until=2025-09-30"),
    ("compacted + overflowed", "?has_compaction=1&overflowed=1"),
    ("failed compaction, peak", "?compaction_failed=1&sort=peak"),
    ("all filters", "?agent=claude-code&model=claude-opus-4-5-20251101&since=2025-01-01&has_compaction=1&sort=cost"),
)


def _configure(*, backend: str, var_dir: Path, database: str = POSTGRES_DB) -> None:
    os.environ["SESSION_INSPECTOR_VAR"] = str(var_dir)
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.pop("DATABASE_URL", None)
    if backend == "postgres":
        for sql in (f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", f"CREATE DATABASE {database}"):
            subprocess.run(["psql", common.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{database}"


def generate(count: int, *, seed: int = 12) -> None:
    """``count`` sessions with one source file each, in bulk."""
    from sessions_app import models

    rng = random.Random(seed)
    start = datetime(2024, 12, 1, tzinfo=UTC)
    sessions = []
    for i in range(count):
        fmt = FORMATS[i % len(FORMATS)]
        began = start + timedelta(minutes=rng.randrange(0, 60 * 24 * 365 * 2))
        calls = rng.randrange(0, 900)
        compacted = rng.random() < 0.3
        sessions.append(
            models.Session(
                format=fmt,
                external_id=f"bench-{i:05d}",
                title=f"Bench session {i}: refactor module {rng.randrange(1000)}",
                project=f"/home/dev/project-{rng.randrange(40):02d}",
                model=MODELS[rng.randrange(len(MODELS))],
                agent_version="2.1.30",
                context_window=200_000,
                started_at=began,
                ended_at=began + timedelta(minutes=rng.randrange(1, 600)),
                message_count=calls * 3,
                api_calls_main=calls,
                api_calls_side=rng.randrange(0, 50),
                peak_context=rng.randrange(0, 200_000),
                peak_context_side=rng.randrange(0, 100_000),
                size_bytes=rng.randrange(1_000, 60_000_000),
                has_compaction=compacted,
                overflowed=rng.random() < 0.1,
                compaction_failed=compacted and rng.random() < 0.1,
                cost_usd=None if rng.random() < 0.05 else round(rng.random() * 40, 4),
                estimates_ready=True,
                info={"models": {}},
            )
        )
    models.Session.objects.bulk_create(sessions, batch_size=1000)
    ids = list(models.Session.objects.order_by("id").values_list("id", "external_id"))
    models.SourceFile.objects.bulk_create(
        [
            models.SourceFile(session_id=pk, agent="main", path=f"/home/dev/.claude/projects/x/{ext}.jsonl", sha256=ext)
            for pk, ext in ids
        ],
        batch_size=1000,
    )


def run_pages(
    *,
    backend: str,
    database: str,
    generate: Callable[[], None],
    what: str,
    pages: list[tuple[str, str]],
    runs: int,
) -> list[tuple[str, str, float, float, int]]:
    """In a fresh database (SQLite in a temporary folder, or ``database`` on PostgreSQL): migrate, ``generate`` the
    rows, then time each page as a logged-in reviewer (``common.time_pages``)."""
    with tempfile.TemporaryDirectory(prefix="si-bench-") as tmp:
        _configure(backend=backend, var_dir=Path(tmp), database=database)
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client

        try:
            call_command("migrate", verbosity=0)
            started = time.perf_counter()
            generate()
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE")
            print(f"{what} generated in {time.perf_counter() - started:.1f} s ({backend})")
            client = Client()
            client.force_login(get_user_model().objects.create_user("bench", password="bench-pages-password"))
            return common.time_pages(client, pages, runs=runs)
        finally:
            connection.close()
            if backend == "postgres":
                sql = f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"
                subprocess.run(["psql", common.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--markdown", action="store_true", help="also print the rows it writes into bench/results.md")
    args = parser.parse_args()
    if args.backend == "postgres" and not common.postgres_reachable():
        print("PostgreSQL does not answer at 127.0.0.1:5432: skipped")
        return 0
    load_start = common.load_average()
    rows = run_pages(
        backend=args.backend,
        database=POSTGRES_DB,
        generate=lambda: generate(args.sessions),
        what=f"{args.sessions:,} sessions",
        pages=[(label, "/" + query) for label, query in QUERIES],
        runs=args.runs,
    )
    worst = max(rows, key=lambda r: r[3])
    ok = worst[3] <= TARGET_MS
    print(f"worst median: {worst[0]} {worst[3]:.0f} ms; target <= {TARGET_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    print(f"load average at start / end: {load_start} / {common.load_average()}")
    md = [
        f"| session list, {args.sessions:,} sessions, a page ({args.backend}; {len(rows)} filter and sort "
        f"combinations) | worst median {worst[3]:.0f} ms ({worst[0]}), {max(r[4] for r in rows)} queries at most |"
        f" | ≤ {TARGET_MS:.0f} ms | {'met' if ok else 'NOT met'} |"
    ]
    common.record_results(f"list_bench.py --backend {args.backend}", md, load=f"{load_start} → {common.load_average()}")
    if args.markdown:
        print("\n".join(["<!-- rows -->", *md]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
