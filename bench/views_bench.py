#!/usr/bin/env python3
"""Page benchmark through HTTP, as ``bin/run`` serves them, on the ~53 MB session, against ContextViz.

Imports the big session (``bench/common.py`` builds it) into a fresh database, runs the token estimates,
creates a login, then starts ``manage.py serve`` (bin/run's supervisor: the web server with bin/run's defaults,
``DEBUG=0``, a task worker; the watcher off) and asks over HTTP, logged in:

  session page   /sessions/<id>/
  timeline JSON  /sessions/<id>/timeline.json
  timeline page  /sessions/<id>/timeline/
  preview        /sessions/<id>/preview/
  diagnosis      /sessions/<id>/diagnosis/   (and its JSON twin)

For each URL, a **fresh server** is started, logged into, and the URL's first request timed ("first after
start": the process's caches are empty), then ``--runs`` more ("warm"); this is done ``--starts`` times, and the
median of the first requests and of all warm ones is reported (one first request is one sample, and this
machine's times drift by a fifth within minutes). Times are whole HTTP exchanges from this client (connect,
request, full body).

The baseline: ContextViz (``contextviz`` from PyPI, in its own virtualenv: ``$CONTEXTVIZ``, else
``../cv-venv/bin/contextviz``), serving the same file from a throw-away ``CLAUDE_HOME``; its per-turn session
JSON is ``GET /api/projects/<project id>/sessions/<session id>`` (FastAPI route ``session_detail``: one stop
per API turn with its token counts), measured the same way in the same run. Without it, no ratio.

Targets (issue 12): timeline JSON warm no slower than ContextViz's per-turn JSON; session page, preview and
diagnosis warm <= 150 ms each; every first request after a start <= 400 ms.

usage: .venv/bin/python bench/views_bench.py [--backend sqlite|postgres] [--runs 7] [--starts 3] [--markdown]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

BENCH_DIR = common.BENCH_DIR
PROJECT = common.PROJECT


POSTGRES_DB = "bench_views"
POSTGRES_URL = f"postgres://postgres@127.0.0.1:5432/{POSTGRES_DB}"
TARGET_WARM_MS = 150.0
TARGET_FIRST_MS = 400.0
PAGES = (
    ("session page", "/sessions/{id}/"),
    ("timeline JSON", "/sessions/{id}/timeline.json"),
    ("timeline page", "/sessions/{id}/timeline/"),
    ("preview", "/sessions/{id}/preview/"),
    ("diagnosis", "/sessions/{id}/diagnosis/"),
    ("diagnosis JSON", "/sessions/{id}/diagnosis.json"),
)
WARM_TARGETS = {"session page", "preview", "diagnosis"}


@dataclass(slots=True)
class Timing:
    firsts_ms: list[float]  # the first request after each start
    warm_ms: list[float]
    size_kb: float
    status: int

    @property
    def first_ms(self) -> float:
        return statistics.median(self.firsts_ms)

    @property
    def median(self) -> float:
        return statistics.median(self.warm_ms)

    def firsts(self) -> str:
        return " / ".join(f"{ms:.0f}" for ms in self.firsts_ms)

    def merged(self, other: Timing) -> Timing:
        """This start's timings and another's, as one measure."""
        return Timing(
            firsts_ms=self.firsts_ms + other.firsts_ms,
            warm_ms=self.warm_ms + other.warm_ms,
            size_kb=other.size_kb,
            status=other.status,
        )


def _get(port: int, url: str, cookie: str = "") -> tuple[float, int, int]:
    """One whole HTTP exchange on a new connection: (ms, status, body bytes)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", url, headers={"Cookie": cookie} if cookie else {})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return (time.perf_counter() - started) * 1000, response.status, len(body)


def _time(port: int, url: str, *, runs: int, cookie: str = "") -> Timing:
    first, status, size = _get(port, url, cookie)
    warm = [_get(port, url, cookie)[0] for _ in range(runs)]
    if status != 200:
        raise RuntimeError(f"{url} answered {status}")
    return Timing(firsts_ms=[first], warm_ms=warm, size_kb=size / 1024, status=status)


def _wait(port: int, process: subprocess.Popen[bytes], *, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            _get(port, "/login/")
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not answer")


def _with_server(cmd: list[str], env: dict[str, str], log: Path, use: Callable[[int], Timing]) -> Timing:
    port = common.free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*cmd, str(port)] if cmd[-1] == "--port" else [*cmd, f"127.0.0.1:{port}"],
            env=env,
            cwd=PROJECT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait(port, process)
            return use(port)
        finally:
            common.stop_server(process)


def contextviz() -> str | None:
    for candidate in (os.environ.get("CONTEXTVIZ"), str(PROJECT.parent / "cv-venv" / "bin" / "contextviz")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("contextviz")


def measure_contextviz(*, exe: str, big: Path, root: Path, runs: int) -> Timing:
    """ContextViz's per-turn JSON of the big file: first request after its start, then warm."""
    project = "-bench-project"
    folder = root / "claude" / "projects" / project
    folder.mkdir(parents=True)
    session_id = "bench-big-session"
    (folder / f"{session_id}.jsonl").symlink_to(big)
    project_id = base64.urlsafe_b64encode(project.encode()).decode().rstrip("=")
    env = {**os.environ, "CLAUDE_HOME": str(root / "claude"), "HOME": str(root)}
    cmd = [exe, "--no-browser", "--host", "127.0.0.1", "--port"]
    url = f"/api/projects/{project_id}/sessions/{session_id}"

    def use(port: int) -> Timing:
        return _time(port, url, runs=runs)

    return _with_server(cmd, env, root / "contextviz.log", use)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--starts", type=int, default=3, help="fresh servers per URL (their medians are reported)")
    parser.add_argument("--markdown", action="store_true", help="also print the rows it writes into bench/results.md")
    args = parser.parse_args()

    load_start = common.load_average()
    big = common.ensure_big_file()
    common.compile_project()
    if args.backend == "postgres":
        if not common.postgres_reachable():
            print("PostgreSQL does not answer at 127.0.0.1:5432: skipped")
            return 0
        common.recreate_postgres_db(POSTGRES_DB)
    results: dict[str, Timing] = {}
    baseline: Timing | None = None
    with tempfile.TemporaryDirectory(prefix="si-views-") as tmp:
        root = Path(tmp)
        var_dir, home = root / "var", root / "home"
        var_dir.mkdir()
        home.mkdir()
        env = common.server_env(
            database_url=common.postgres_url(POSTGRES_DB) if args.backend == "postgres" else None,
            var_dir=var_dir,
            home=home,
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if args.backend == "postgres":
            env["DATABASE_URL"] = POSTGRES_URL
        big_id = common.prepare_server_database(env=env, big=big)
        print(f"big session {big_id}, {args.runs} warm runs per URL, backend {args.backend}", flush=True)
        serve = [sys.executable, str(PROJECT / "manage.py"), "serve", "--no-watch", "--bind"]
        exe = contextviz()
        try:
            for view, template in PAGES:
                url = template.format(id=big_id)

                def use(port: int, url: str = url) -> Timing:
                    cookie = common.login(port)
                    return _time(port, url, runs=args.runs, cookie=cookie)

                for start in range(args.starts):
                    t = _with_server(serve, env, root / "serve.log", use)
                    results[view] = results[view].merged(t) if view in results else t
                    if view == "timeline JSON" and exe is not None:
                        # Right after ours, start by start, so both see the same load.
                        b = measure_contextviz(exe=exe, big=big, root=root / f"cv{start}", runs=args.runs)
                        baseline = baseline.merged(b) if baseline is not None else b
                t = results[view]
                print(
                    f"  {view:15} first {t.first_ms:6.0f} ms ({t.firsts()}), warm median {t.median:6.0f} ms, "
                    f"{t.size_kb:,.0f} KB"
                )
                if view == "timeline JSON" and baseline is not None:
                    print(
                        f"  {'ContextViz':15} first {baseline.first_ms:6.0f} ms ({baseline.firsts()}), warm median "
                        f"{baseline.median:6.0f} ms, {baseline.size_kb:,.0f} KB (per-turn session JSON)"
                    )
        finally:
            if args.backend == "postgres":
                sql = f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)"
                subprocess.run(["psql", common.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=False)
    if exe is None:
        print("ContextViz not found ($CONTEXTVIZ, ../cv-venv): no baseline for the timeline JSON")

    md: list[str] = []
    print()
    for view, t in results.items():
        first_ok = t.first_ms <= TARGET_FIRST_MS
        if view == "timeline JSON":
            if baseline is not None:
                ok = t.median <= baseline.median
                base_cell = f"ContextViz: {baseline.median:.0f} ms warm, {baseline.first_ms:.0f} ms first"
                verdict = f"{baseline.median / t.median:.1f}x: {'met' if ok and first_ok else 'NOT met'}"
            else:
                base_cell, verdict = "ContextViz not installed", "no baseline"
            target = f"warm ≤ ContextViz, first ≤ {TARGET_FIRST_MS:.0f} ms"
        elif view in WARM_TARGETS:
            ok = t.median <= TARGET_WARM_MS
            base_cell, verdict = "", "met" if ok and first_ok else "NOT met"
            target = f"warm ≤ {TARGET_WARM_MS:.0f} ms, first ≤ {TARGET_FIRST_MS:.0f} ms"
        else:
            base_cell, verdict = "", "met" if first_ok else "NOT met"
            target = f"first ≤ {TARGET_FIRST_MS:.0f} ms"
        line = f"{t.median:.0f} ms warm, {t.first_ms:.0f} ms first"
        print(f"{view:15} {line:32} {base_cell:45} {verdict}")
        md.append(f"| {view}, 53 MB session, HTTP ({args.backend}) | {line} | {base_cell} | {target} | {verdict} |")
    print(f"load average at start / end: {load_start} / {common.load_average()}")
    common.record_results(
        f"views_bench.py --backend {args.backend}", md, load=f"{load_start} → {common.load_average()}"
    )
    if args.markdown:
        print("\n".join(["<!-- rows -->", *md]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
