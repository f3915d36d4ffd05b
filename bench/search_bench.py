#!/usr/bin/env python3
"""Search benchmark: full-text search over the ~53 MB session plus every shared sample.

Imports the big session built by ``bench/common.py`` (built here too if missing) and every sample of
../shared/samples into a fresh database, then times, over --runs requests after one warm-up:

  list      selectors.sessions.search_sessions + the first page of selectors.sessions.session_list (the list page's
            search)
  session   selectors.search.search_session on the big session (the in-session search, every agent)
  page      the list page itself through the test client (GET /?q=...)
  panel     the Ctrl+K panel's results (GET /search/?q=... as htmx asks for them)

for a phrase found in many records, a rare phrase and a word found nowhere.

Target (issue 11): each under 200 ms.

usage: .venv/bin/python bench/search_bench.py [--backend sqlite|postgres] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

BENCH_DIR = common.BENCH_DIR
PROJECT = common.PROJECT


TARGET_MS = 200.0
POSTGRES_DB = "bench_search"  # its own database: the other benchmarks may run at the same time
QUERIES = (
    ("common phrase", "git status"),
    ("rare phrase", '"shadow branch"'),
    ("nowhere", "zzqxjvunfindable"),
)


def _configure(*, backend: str, var_dir: Path, postgres_db: str) -> None:
    """Settings for a bench process: its own var folder and, on PostgreSQL, a database created afresh."""
    os.environ["SESSION_INSPECTOR_VAR"] = str(var_dir)
    os.environ.setdefault("DEBUG", "0")  # production-like timing; query counts are captured explicitly
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.pop("DATABASE_URL", None)
    if backend == "postgres":
        common.recreate_postgres_db(postgres_db)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{postgres_db}"


def _time(fn: Any, runs: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return min(times), statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help=f"keep the PostgreSQL database {POSTGRES_DB} (to EXPLAIN)")
    parser.add_argument("--reuse", action="store_true", help=f"time the kept PostgreSQL database {POSTGRES_DB} again")
    args = parser.parse_args()
    big_file = common.ensure_big_file()
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        if args.reuse:
            os.environ.update(DEBUG="0", SECRET_KEY="bench-only", DJANGO_SETTINGS_MODULE="config.settings")
            os.environ.update(
                SESSION_INSPECTOR_VAR=tmp,
                DATABASE_URL=f"{common.POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{POSTGRES_DB}",
            )
        else:
            _configure(backend=args.backend, var_dir=Path(tmp), postgres_db=POSTGRES_DB)
        try:
            return _run(big_file=big_file, runs=args.runs, reuse=args.reuse)
        finally:
            if args.backend == "postgres" and not (args.keep or args.reuse):
                from django.db import connections

                connections.close_all()
                common.psql(f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)")


def _run(*, big_file: Path, runs: int, reuse: bool = False) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    from sessions_app import models, services
    from sessions_app.selectors import search as search_selectors
    from sessions_app.selectors import sessions as session_selectors

    if reuse:
        largest = models.Session.objects.order_by("-message_count").first()
        if largest is None:
            raise RuntimeError("--reuse needs a database with sessions in it")
        session = largest
        get_user_model().objects.filter(username="bench").delete()
    else:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        big = services.import_file(path=big_file)
        if isinstance(big, services.Rejected) or big.session is None:
            raise RuntimeError(f"import of {big_file} failed: {big}")
        print(f"imported the big session in {time.perf_counter() - started:.1f} s")
        services.import_paths(paths=[common.SHARED / "samples"])
        session = models.Session.objects.get(pk=big.session)
        for pending in models.Session.objects.filter(search_ready=False):  # the worker's part after a large import
            started = time.perf_counter()
            done = services.index_search(session_id=pending.pk)
            print(
                f"search index of session {pending.pk} by the worker's task: {done} records in "
                f"{time.perf_counter() - started:.1f} s"
            )
    text_mb = sum(len(t) for t in models.Message.objects.values_list("search_text", flat=True)) / 1e6
    print(f"{models.Session.objects.count()} sessions, {models.Message.objects.count()} records, {text_mb:.1f} M chars")
    client = Client()
    client.force_login(get_user_model().objects.create_user(username="bench", password="bench-password"))

    worst = 0.0
    load_start = common.load_average()
    rows: list[str] = []
    print(f"{connection.vendor}, load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'query':<16} {'view':<8} {'hits':>6} {'min ms':>8} {'median ms':>10}")
    for label, q in QUERIES:
        filters = session_selectors.SessionFilters(q=q)

        def listing(filters: session_selectors.SessionFilters = filters) -> int:
            matching = search_selectors.matching_messages(q=filters.q)
            found = session_selectors.search_sessions(filters=filters, matching=matching)
            list(session_selectors.session_page(filters=filters, page=1, matching=matching).object_list)
            return sum(f.matches for f in found)

        def in_session(q: str = q) -> int:
            return len(search_selectors.search_session(session=session, q=q))

        def page(q: str = q) -> int:
            return client.get("/", {"q": q}).status_code

        def panel(q: str = q) -> int:
            return client.get("/search/", {"q": q}, HTTP_HX_REQUEST="true").status_code

        for view, fn in (("list", listing), ("session", in_session), ("page", page), ("panel", panel)):
            fastest, median = _time(fn, runs)
            worst = max(worst, median)
            print(f"{label:<16} {view:<8} {fn():>6} {fastest:>8.1f} {median:>10.1f}")
            rows.append(f"| search {label!r}, {view} ({connection.vendor}) | {median:.1f} ms median |  |  |  |")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    verdict = "met" if worst <= TARGET_MS else "NOT met"
    print(f"worst median {worst:.1f} ms: {'within' if worst <= TARGET_MS else 'OVER'} the {TARGET_MS:.0f} ms target")
    rows.append(f"| worst median of the above | {worst:.1f} ms |  | ≤ {TARGET_MS:.0f} ms | {verdict} |")
    common.record_results(
        f"search_bench.py ({connection.vendor})", rows, load=f"{load_start} → {common.load_average()}"
    )
    return 0 if worst <= TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
