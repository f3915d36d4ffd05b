#!/usr/bin/env python3
"""The worker's analysis of the big session, and the pages that read it.

Imports the ~53 MB session (``bench.common.ensure_big_file``) into a fresh SQLite database, runs the token
estimates, then times:

  composition   selectors.composition.composition_series: what filled the context at every main-chain call
  analysis      services.analyse_session: the composition plus the diagnosis verdict, stored
  overview      selectors.overview.overview, read on every session page
  page / json / timeline.json   server time and queries of one request each, the analysis stored

min / median over --runs (after one warm-up). The analysis runs in the worker, not in a request; the pages only
read it.

usage: .venv/bin/python bench/overview_bench.py [--runs 5]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

BENCH_DIR = common.BENCH_DIR


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    fn()  # warm-up
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    big = common.ensure_big_file()
    load_start = common.load_average()
    with tempfile.TemporaryDirectory() as var_dir:
        os.environ["SESSION_INSPECTOR_VAR"] = var_dir
        os.environ.setdefault("DEBUG", "0")
        os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        os.environ.pop("DATABASE_URL", None)
        os.environ["ALLOWED_HOSTS"] = "testserver"  # Django's test client
        os.environ["ANALYSIS_CACHE_SECONDS"] = "0"  # time the computation, not the cache
        import django

        django.setup()
        from django.contrib.auth.models import User
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        from sessions_app import models, services
        from sessions_app.selectors import composition as composition_selectors
        from sessions_app.selectors import overview as overview_selectors

        call_command("migrate", verbosity=0)
        outcome = services.import_file(path=big)
        assert isinstance(outcome, services.FileImport) and outcome.session is not None
        sid = outcome.session
        services.estimate_session_tokens(session_id=sid)
        session = models.Session.objects.get(pk=sid)
        rows = []
        lo, med, series = timed(lambda: composition_selectors.composition_series(session=session), args.runs)
        rows.append(("composition (worker)", lo, med, f"{len(series['calls']):,} calls, {len(series['parts'])} parts"))
        lo, med, _ = timed(lambda: services.analyse_session(session_id=sid), args.runs)
        rows.append(("analysis stored (worker)", lo, med, ""))
        session = models.Session.objects.get(pk=sid)
        lo, med, _ = timed(lambda: overview_selectors.overview(session=session), args.runs)
        rows.append(("overview selector", lo, med, ""))
        client = Client()
        client.force_login(User.objects.create_user("bench"))
        for name, url in (
            ("session page", f"/sessions/{sid}/"),
            ("session json", f"/sessions/{sid}.json"),
            ("timeline json", f"/sessions/{sid}/timeline.json"),
        ):
            lo, med, response = timed(functools.partial(client.get, url), args.runs)
            assert response.status_code == 200, (url, response.status_code)
            with CaptureQueriesContext(connection) as queries:
                client.get(url)
            rows.append((name, lo, med, f"{len(response.content) / 1024:,.0f} KB, {len(queries)} queries"))
    print(f"{'what':28} {'min ms':>9} {'median ms':>10}  notes")
    for name, lo, med, note in rows:
        print(f"{name:28} {lo:9.0f} {med:10.0f}  {note}")
    common.record_results(
        "overview_bench.py",
        [
            f"| {name}, 53 MB session (sqlite) | {med:,.0f} ms median, {lo:,.0f} ms min; {note} |  | reported |  |"
            for name, lo, med, note in rows
        ],
        load=f"{load_start} → {common.load_average()}",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
