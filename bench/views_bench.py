#!/usr/bin/env python3
"""Page benchmark: server time and query count of the session views on the big session.

Imports two sessions into a fresh database: the real source session and the ~53 MB session
built from it by ``import_bench.py`` (built here too if missing). Then, with Django's test client
(the whole request/response cycle in-process, no network), requests for each session:

  page         /sessions/<id>/
  page (last)  /sessions/<id>/?page=<last>   (deep pagination must not cost more)
  json         /sessions/<id>.json
  timeline     whatever timeline URL resolves (named route or a usual path); skipped if none does

and reports min/median server time over --runs requests (after one warm-up) and the number of
queries of one request. A query count that is the same for the small and the big session is
bounded (it does not grow with the session's length).

Target (issue 3): each under 300 ms server time on the big session, with a bounded query count.

usage: .venv/bin/python bench/views_bench.py [--backend sqlite|postgres] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(BENCH_DIR))

import import_bench  # noqa: E402  (sibling script: input file, Postgres helpers)

TARGET_MS = 300.0  # issue 3: timeline JSON and session page each under 300 ms server time
POSTGRES_DB = "bench_views"
POSTGRES_URL = f"postgres://postgres@127.0.0.1:5432/{POSTGRES_DB}"

# Timeline views do not all exist yet: try these route names, then these paths, and skip what does not resolve.
TIMELINE_NAMES = ("sessions:timeline_json", "sessions:timeline", "sessions:detail_timeline")
TIMELINE_PATHS = ("/sessions/{id}/timeline.json", "/sessions/{id}/timeline/", "/sessions/{id}/timeline")


@dataclass(slots=True)
class Measured:
    session: str
    view: str
    url: str
    status: int
    size_kb: float
    ms_min: float
    ms_median: float
    queries: int
    ms_first: float  # the first request: cold per-process caches (a session read back for previews)


def _configure(*, backend: str, var_dir: Path, postgres_db: str = POSTGRES_DB) -> None:
    os.environ["SESSION_INSPECTOR_VAR"] = str(var_dir)
    os.environ.setdefault("DEBUG", "0")  # production-like timing; query counts are captured explicitly
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.pop("DATABASE_URL", None)
    if backend == "postgres":
        for sql in (f"DROP DATABASE IF EXISTS {postgres_db} WITH (FORCE)", f"CREATE DATABASE {postgres_db}"):
            subprocess.run(["psql", import_bench.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{postgres_db}"


def _timeline_urls(session_id: int) -> list[str]:
    from django.urls import NoReverseMatch, Resolver404, resolve, reverse

    found: list[str] = []
    for name in TIMELINE_NAMES:
        try:
            found.append(reverse(name, args=[session_id]))
        except NoReverseMatch:
            continue
    for template in TIMELINE_PATHS:
        path = template.format(id=session_id)
        try:
            resolve(path)
        except Resolver404:
            continue
        found.append(path)
    return list(dict.fromkeys(found))


def _measure(client: Any, *, session: str, view: str, url: str, runs: int) -> Measured:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    started = time.perf_counter()
    response = client.get(url)  # warm-up: templates compiled, caches filled; reported as "first"
    first_ms = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return Measured(
        session=session,
        view=view,
        url=url,
        status=response.status_code,
        size_kb=len(response.content) / 1024,
        ms_min=min(times),
        ms_median=statistics.median(times),
        queries=len(queries.captured_queries),
        ms_first=first_ms,
    )


def _views_for(client: Any, session_id: int) -> list[tuple[str, str]]:
    from django.urls import reverse

    detail = reverse("sessions:detail", args=[session_id])
    detail_json = reverse("sessions:detail_json", args=[session_id])
    pages = client.get(detail_json).json().get("pages", 1)
    views = [("page", detail), ("page (last)", f"{detail}?page={pages}"), ("json", detail_json)]
    views += [("timeline", url) for url in _timeline_urls(session_id)]
    diagnosis = reverse("sessions:diagnosis_json", args=[session_id])
    views += [("diagnosis", diagnosis)]
    preview = reverse("sessions:preview", args=[session_id])
    views += [(f"preview {name}", f"{preview}?strategy={name}") for name in ("claude-code", "klaude-code", "khaelor")]
    return views


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    big_file = import_bench.ensure_big_file()
    if args.backend == "postgres" and not import_bench.postgres_reachable():
        print(f"postgres: {import_bench.POSTGRES_ADMIN_URL} not reachable")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-views-") as tmp:
        _configure(backend=args.backend, var_dir=Path(tmp))
        try:
            return _run(big_file=big_file, runs=args.runs, backend=args.backend)
        finally:
            from django.db import connections

            connections.close_all()
            if args.backend == "postgres":
                subprocess.run(
                    ["psql", import_bench.POSTGRES_ADMIN_URL, "-q", "-c", f"DROP DATABASE IF EXISTS {POSTGRES_DB}"],
                    check=False,
                )


def _run(*, big_file: Path, runs: int, backend: str) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host ("testserver") is allowed, as in the tests

    from sessions_app import services

    call_command("migrate", verbosity=0)
    sessions: dict[str, int] = {}
    for label, path in (("source", import_bench.SOURCE), ("big", big_file)):
        started = time.perf_counter()
        outcome = services.import_file(path=path)
        if isinstance(outcome, services.Rejected) or outcome.session is None:
            raise RuntimeError(f"import of {path} failed: {outcome}")
        sessions[label] = outcome.session
        print(
            f"imported {label}: session {outcome.session}, {outcome.lines} lines, {time.perf_counter() - started:.1f} s"
        )
        # What the background worker does after an import: tiktoken estimates, stored once.
        started = time.perf_counter()
        estimated = services.estimate_session_tokens(session_id=outcome.session)
        print(f"estimated {label}: {estimated} messages in {time.perf_counter() - started:.1f} s")

    user = get_user_model().objects.create_user(username="bench", password="bench-password")
    client = Client()
    client.force_login(user)

    results = [
        _measure(client, session=label, view=view, url=url, runs=runs)
        for label, session_id in sessions.items()
        for view, url in _views_for(client, session_id)
    ]
    counts = {(r.session, r.view): r.queries for r in results}

    print(f"\nbackend {backend}, DEBUG={os.environ['DEBUG']}, {runs} runs after one warm-up")
    print(
        f"{'session':7} {'view':20} {'status':>6} {'KB':>8} {'first':>8} {'ms min':>8} {'ms med':>8} {'queries':>8}"
        "  verdict  url"
    )
    failed = False
    for r in results:
        verdict = ""
        if r.session == "big":
            bounded = r.queries <= counts.get(("source", r.view), r.queries)
            fast = r.ms_median <= TARGET_MS
            verdict = "ok" if fast and bounded and r.status == 200 else "FAIL"
            failed |= verdict == "FAIL"
        print(
            f"{r.session:7} {r.view:20} {r.status:>6} {r.size_kb:8.1f} "
            f"{r.ms_first:8.1f} {r.ms_min:8.1f} {r.ms_median:8.1f} "
            f"{r.queries:>8}  {verdict:7}  {r.url}"
        )
    if not any(r.view == "timeline" for r in results):
        print("timeline: no timeline URL resolves yet; skipped")
    print(f"target: median <= {TARGET_MS:.0f} ms on the big session, queries no more than on the small one")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
