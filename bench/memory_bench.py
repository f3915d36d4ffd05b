#!/usr/bin/env python3
"""Memory benchmark: the worker's and the web process's resident memory on a ~300 MB session (issue 34, item 5).

Builds a ~300 MB Claude Code session once into ``bench/out/`` (``../shared/bench/make_big_session.py``, as
``bench/common.py`` builds the 53 MB one; with ``--shape tiny``, a session of one-word prompts and replies, each reply
its own call, from the same sample's records: ``common.ensure_tiny_file``), then, into a fresh database:

  import     ``manage.py import_sessions FILE --json`` in a fresh process: its peak RSS (wait4's), the importer every
             path runs (the watcher, an upload in the worker, the command)
  worker     ``manage.py serve`` (bin/run's supervisor: the web server with bin/run's defaults and one task worker; the
             watcher off) picks up what the import queued (token estimates, the search index, the analysis it
             stores): the task worker's peak RSS while it does (sampled every 20 ms, and its VmHWM)
  pages      every page and JSON twin of that session, one after the other in the same web process, as a reviewer
             walks them: the web process's VmHWM after each, and the most it
             held while answering (sampled); the status and size of each answer
  run        a compaction run of the session (the offline summarizer), accepted, then its page, comparison and export:
             the task worker's peak while it runs, the web worker's after each page
  commands   ``manage.py diagnose / timeline / replay / preview / layers / session_stats`` of the session, each a
             fresh process: its peak RSS

The budget (issue 34): the web process under 600 MB and the worker under 800 MB on every path; a page may instead
refuse with a clear message (413 and a sentence), never a 500. Numbers go into ``bench/results.md``.

usage: .venv/bin/python bench/memory_bench.py [--size-mb 300] [--shape large|tiny] [--backend sqlite|postgres]
       [--markdown]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

PROJECT = common.PROJECT
POSTGRES_DB = "bench_memory"
WEB_BUDGET_MB = 600.0  # issue 34: the web process on every page of a 300 MB session
WORKER_BUDGET_MB = 800.0  # issue 34: the worker (import, and the analysis it stores after one)
SEARCH_WORD = "function"  # a word the sample's records hold many times
TIMEOUT_S = 900.0  # one answer or one task on the unbounded code may take minutes


# ----------------------------------------------------------------------------- processes and their memory


def _status_mb(pid: int, field_name: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def server_processes(root: int) -> tuple[int | None, int | None]:
    """(the web process, the task worker) under ``manage.py serve``'s process ``root``: the web process is
    ``sessions_app.web_server`` (Waitress), or in a checkout from before it gunicorn's worker (the child, not the
    arbiter)."""
    tree = common.process_tree(root)
    web = [pid for pid, (_, cmd) in tree.items() if "sessions_app.web_server" in cmd] or [
        pid for pid, (ppid, cmd) in tree.items() if "gunicorn" in cmd and "gunicorn" in tree.get(ppid, (0, ""))[1]
    ]
    worker = [pid for pid, (_, cmd) in tree.items() if "db_worker" in cmd]
    return (web[0] if web else None), (worker[0] if worker else None)


@dataclass(slots=True)
class Sampler:
    """The most each watched process held (VmRSS, every 20 ms) within the current phase."""

    pids: dict[str, int]
    peaks: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self._lock:
                for name, pid in self.pids.items():
                    self.peaks[name] = max(self.peaks.get(name, 0.0), _status_mb(pid, "VmRSS"))

    def phase(self) -> dict[str, float]:
        """The peaks since the last call, and a new phase."""
        with self._lock:
            for name, pid in self.pids.items():
                self.peaks[name] = max(self.peaks.get(name, 0.0), _status_mb(pid, "VmRSS"))
            peaks, self.peaks = self.peaks, {}
        return peaks

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def peak_of_command(cmd: list[str], *, env: dict[str, str]) -> tuple[float, float, int, str]:
    """Run ``cmd``: (its peak RSS in MB, seconds, exit code, the end of its output).

    The peak is the child's own VmHWM, sampled every 10 ms until it exits: wait4's ru_maxrss would start from this
    process's resident size when it forked (Linux keeps the old high-water mark across exec), hundreds of MB here."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, _status_mb(proc.pid, "VmHWM"))
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode(errors="replace")
    return peak, seconds, proc.returncode, text[-600:]


# ----------------------------------------------------------------------------- HTTP


def request(
    port: int, method: str, url: str, *, cookie: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    conn.request(method, url, body=body, headers={"Cookie": cookie, **(headers or {})})
    response = conn.getresponse()
    # The body's first 256 KB and its size: an export of the big session is its size again, which this process
    # must not hold (its own memory is not measured, but the commands it starts would inherit it).
    data, size = b"", 0
    while chunk := response.read(1 << 20):
        size += len(chunk)
        if len(data) < 256 * 1024:
            data += chunk[: 256 * 1024 - len(data)]
    conn.close()
    headers_got = {k.lower(): v for k, v in response.getheaders()}
    headers_got["x-size"] = str(size)  # the whole body's, for the report
    return response.status, data, headers_got


def post_form(port: int, url: str, *, cookie: str, fields: list[tuple[str, str]]) -> tuple[int, bytes, dict[str, str]]:
    csrf = re.search(r"csrftoken=([^;]+)", cookie)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-CSRFToken": csrf.group(1) if csrf else ""}
    headers["Referer"] = f"http://127.0.0.1:{port}/"
    return request(port, "POST", url, cookie=cookie, body=urlencode(fields).encode(), headers=headers)


def wait_for_server(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            request(port, "GET", "/login/", cookie="")
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not answer")


# ----------------------------------------------------------------------------- the database, read by the bench


class Db:
    """Read-only looks at the server's database (the task queue, the analysis), without starting Django."""

    def __init__(self, *, var_dir: Path, postgres: bool) -> None:
        self.var_dir, self.postgres = var_dir, postgres

    def value(self, sql: str) -> str:
        if self.postgres:
            done = subprocess.run(
                ["psql", common.postgres_url(POSTGRES_DB), "-At", "-c", sql], capture_output=True, text=True, check=True
            )
            return done.stdout.strip()
        with sqlite3.connect(f"file:{self.var_dir / 'db.sqlite3'}?mode=ro", uri=True, timeout=30) as db:
            row = db.execute(sql).fetchone()
        return "" if row is None or row[0] is None else str(row[0])

    def tasks_pending(self) -> int:
        return int(
            self.value("SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status IN ('READY', 'RUNNING')")
            or 0
        )

    def wait_tasks(self, *, process: subprocess.Popen[bytes]) -> float:
        started = time.monotonic()
        time.sleep(1.0)  # the worker's first poll
        while self.tasks_pending():
            if process.poll() is not None:
                raise SystemExit("the server exited")
            if time.monotonic() - started > TIMEOUT_S * 2:
                raise SystemExit("the worker did not finish its tasks")
            time.sleep(0.5)
        return time.monotonic() - started


# ----------------------------------------------------------------------------- the walk


@dataclass(slots=True)
class Row:
    what: str
    process: str  # web | worker | command | import
    status: str
    peak_mb: float  # the most the process held while it did this (sampled, or wait4's for a command)
    hwm_mb: float  # the process's high-water mark after it (VmHWM), all it did before included
    seconds: float
    size: str = ""

    @property
    def budget(self) -> float:
        return WEB_BUDGET_MB if self.process == "web" else WORKER_BUDGET_MB


def session_pages(sid: int, *, first_seq: int, strategies: list[str]) -> list[tuple[str, str]]:
    """Every page and JSON twin of one session (sessions_app/urls.py, runs_urls.py), as a reviewer opens them."""
    q = urlencode({"q": SEARCH_WORD})
    pages = [
        ("session page", f"/sessions/{sid}/"),
        ("session JSON", f"/sessions/{sid}.json"),
        ("session page, last transcript page", f"/sessions/{sid}/?page=99999"),
        ("session page searched", f"/sessions/{sid}/?{q}"),
        ("record permalink", f"/sessions/{sid}/m/{first_seq}/"),
        ("record block", f"/sessions/{sid}/m/{first_seq}/blocks/0/"),
        ("timeline page", f"/sessions/{sid}/timeline/"),
        ("timeline JSON", f"/sessions/{sid}/timeline.json"),
        ("timeline turn", f"/sessions/{sid}/timeline/turn/?call=1"),
        ("timeline turn JSON", f"/sessions/{sid}/timeline/turn/?call=1&format=json"),
        ("live status", f"/sessions/{sid}/live/"),
        ("live JSON", f"/sessions/{sid}/live.json"),
        ("live overview", f"/sessions/{sid}/live/overview/"),
        ("live timeline", f"/sessions/{sid}/live/timeline/"),
        ("diagnosis page", f"/sessions/{sid}/diagnosis/"),
        ("diagnosis JSON", f"/sessions/{sid}/diagnosis.json"),
        ("preview page", f"/sessions/{sid}/preview/"),
        ("preview JSON", f"/sessions/{sid}/preview.json"),
        ("preview at call 100", f"/sessions/{sid}/preview/?at=100"),
    ]
    for name in strategies:
        pages.append((f"timeline replay {name}", f"/sessions/{sid}/timeline.json?replay={name}"))
    pages += [
        ("search page", f"/search/?{q}"),
        ("search JSON", f"/search.json?{q}"),
        ("session list searched", f"/?{q}"),
        ("session list JSON searched", f"/sessions.json?{q}"),
    ]
    return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=300.0, help="the session's size (make_big_session's SIZE_MB)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--shape",
        choices=["large", "tiny"],
        default="large",
        help="the sample's records repeated (large), or one-word prompts and replies, each reply a call (tiny)",
    )
    parser.add_argument(
        "--via",
        choices=["command", "upload"],
        default="command",
        help="import with import_sessions, or as a zip upload",
    )
    parser.add_argument("--no-commands", action="store_true", help="skip the manage.py commands")
    parser.add_argument("--markdown", action="store_true", help="also print the rows it writes into bench/results.md")
    parser.add_argument("--label", default="", help="added to the section's name in results.md (e.g. 'before')")
    args = parser.parse_args()

    load_start = common.load_average()
    tiny = args.shape == "tiny"
    big = common.ensure_tiny_file(size_mb=args.size_mb) if tiny else common.ensure_big_file(size_mb=args.size_mb)
    common.compile_project()
    size_mb = big.stat().st_size / 1e6
    postgres = args.backend == "postgres"
    if postgres:
        if not common.postgres_reachable():
            print("PostgreSQL does not answer at 127.0.0.1:5432: skipped")
            return 0
        common.recreate_postgres_db(POSTGRES_DB)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="si-memory-") as tmp:
        root = Path(tmp)
        var_dir, home = root / "var", root / "home"
        var_dir.mkdir()
        home.mkdir()
        env = common.server_env(
            database_url=common.postgres_url(POSTGRES_DB) if postgres else None, var_dir=var_dir, home=home
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        common.manage(env, "migrate", "--noinput", "-v0")
        common.manage(env, "collectstatic", "--noinput", "-v0")
        create = "from django.contrib.auth import get_user_model as g; "
        create += f"g().objects.create_user({common.SERVER_USER!r}, password={common.SERVER_PASSWORD!r})"
        common.manage(env, "shell", "-c", create)
        manage = [sys.executable, str(PROJECT / "manage.py")]
        print(f"input: {big} ({size_mb:.0f} MB), backend {args.backend}", flush=True)

        db = Db(var_dir=var_dir, postgres=postgres)
        if args.via == "command":
            peak, seconds, code, out = peak_of_command([*manage, "import_sessions", str(big), "--json"], env=env)
            if code != 0:
                raise SystemExit(f"import failed ({code}): {out}")
            what = f"import {size_mb:.0f} MB (manage.py import_sessions)"
            rows.append(Row(what, "import", "ok", peak, peak, seconds))
            print(f"  import: {peak:.0f} MB peak, {seconds:.1f} s", flush=True)

        port = common.free_port()
        log = root / "serve.log"
        with log.open("ab") as out_file:
            server = subprocess.Popen(
                [*manage, "serve", "--no-watch", "--bind", f"127.0.0.1:{port}"],
                env=env,
                cwd=PROJECT,
                stdout=out_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        sampler: Sampler | None = None
        try:
            wait_for_server(port, server)
            web, worker = server_processes(server.pid)
            deadline = time.monotonic() + 60
            while (web is None or worker is None) and time.monotonic() < deadline:
                time.sleep(0.2)
                web, worker = server_processes(server.pid)
            if web is None or worker is None:
                raise SystemExit("no web process or task worker under manage.py serve")
            sampler = Sampler(pids={"web": web, "worker": worker})
            sampler.start()
            cookie = common.login(port)
            sampler.phase()
            if args.via == "upload":
                rows.append(upload(port=port, cookie=cookie, big=big, db=db, sampler=sampler, worker=worker))
            sid = int(db.value("SELECT max(id) FROM sessions_app_session"))
            first_seq = int(
                db.value(f"SELECT min(seq) FROM sessions_app_message WHERE session_id = {sid} AND kind = 'assistant'")
                or 0
            )
            seconds = db.wait_tasks(process=server)
            peaks = sampler.phase()
            analysed = db.value(f"SELECT count(*) FROM sessions_app_sessionanalysis WHERE session_id = {sid}")
            failed = db.value("SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status = 'FAILED'")
            what = "worker: token estimates, search index, stored analysis"
            state = f"analysis stored: {'yes' if analysed == '1' else 'no'}; failed tasks: {failed}"
            rows.append(Row(what, "worker", state, peaks["worker"], _status_mb(worker, "VmHWM"), seconds))
            print(f"  {what}: {peaks['worker']:.0f} MB peak, {seconds:.0f} s ({state})", flush=True)

            sampler.phase()
            strategies = _strategies()
            for what, url in session_pages(sid, first_seq=first_seq, strategies=strategies):
                started = time.perf_counter()
                status, body, got = request(port, "GET", url, cookie=cookie)
                seconds = time.perf_counter() - started
                peaks = sampler.phase()
                note = _refusal(status, body)
                rows.append(
                    Row(what, "web", f"{status}{note}", peaks["web"], _status_mb(web, "VmHWM"), seconds, _kb(got))
                )
                print(
                    f"  {what:40} {status} {_kb(got):>9} {seconds:6.2f} s  web {peaks['web']:5.0f} MB "
                    f"(high-water {_status_mb(web, 'VmHWM'):5.0f} MB){note}",
                    flush=True,
                )
            rows += walk_run(
                port=port, cookie=cookie, sid=sid, sampler=sampler, web=web, worker=worker, db=db, server=server
            )
        finally:
            if sampler is not None:
                sampler.stop()
            common.stop_server(server)
        if not args.no_commands:
            for what, extra in (
                ("diagnose", []),
                ("timeline", []),
                ("replay", ["--strategy", "claude-code"]),
                ("preview", ["--strategy", "claude-code"]),
                ("layers", ["--at", "100"]),
                ("session_stats", []),
            ):
                peak, seconds, code, out = peak_of_command([*manage, what, str(sid), "--json", *extra], env=env)
                state = (
                    "ok" if code == 0 else f"exit {code}: {out.strip().splitlines()[-1][:160] if out.strip() else ''}"
                )
                rows.append(Row(f"manage.py {what}", "command", state, peak, peak, seconds))
                print(f"  manage.py {what:14} {peak:5.0f} MB, {seconds:5.1f} s, {state}", flush=True)
    if postgres:
        common.psql(f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)")

    md = []
    for row in rows:
        over = row.peak_mb > row.budget
        verdict = "NOT met" if over or row.status.startswith("5") else "met"
        md.append(
            f"| {row.what}, {size_mb:.0f} MB {args.shape}-record session ({args.backend}) | {row.peak_mb:.0f} MB peak "
            f"(high-water {row.hwm_mb:.0f} MB), {row.seconds:.1f} s, {row.status}{', ' + row.size if row.size else ''} "
            f"| | {row.process} ≤ {row.budget:.0f} MB | {verdict} |"
        )
    load_end = common.load_average()
    print(f"load average at start / end: {load_start} / {load_end}")
    label = f" ({args.label})" if args.label else ""
    via = " --via upload" if args.via == "upload" else ""
    shape = " --shape tiny" if tiny else ""
    common.record_results(
        f"memory_bench.py --backend {args.backend}{shape}{via}{label}", md, load=f"{load_start} → {load_end}"
    )
    if args.markdown:
        print("\n".join(md))
    return 0


def upload(*, port: int, cookie: str, big: Path, db: Db, sampler: Sampler, worker: int) -> Row:
    """The session zipped and uploaded through the import page, as a reviewer uploads one: the task worker imports
    it (``uploads``, ``services.import_staged``); its peak while it does."""
    import zipfile

    with tempfile.TemporaryDirectory(prefix="si-memory-zip-") as tmp:
        archive = Path(tmp) / "session.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
            z.write(big, arcname=f"project/{big.name}")
        data = archive.read_bytes()
    boundary = "memorybenchboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="session.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    csrf = re.search(r"csrftoken=([^;]+)", cookie)
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "X-CSRFToken": csrf.group(1) if csrf else "",
        "Referer": f"http://127.0.0.1:{port}/",
    }
    started = time.perf_counter()
    status, answer, _ = request(port, "POST", "/import/?format=json", cookie=cookie, body=body, headers=headers)
    if status != 202:
        raise SystemExit(f"the upload answered {status}: {answer[:400]!r}")
    upload_id = int(json.loads(answer)["id"])
    while (state := db.value(f"SELECT status FROM sessions_app_uploadimport WHERE id = {upload_id}")) not in (
        "done",
        "failed",
    ):
        if time.perf_counter() - started > TIMEOUT_S:
            raise SystemExit("the upload's import did not finish")
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    peaks = sampler.phase()
    what = f"worker: import of a {len(data) / 1e6:.2f} MB zip holding the session (upload)"
    print(f"  {what}: {peaks['worker']:.0f} MB peak, {seconds:.1f} s ({state})", flush=True)
    return Row(what, "worker", state, peaks["worker"], _status_mb(worker, "VmHWM"), seconds)


def walk_run(
    *,
    port: int,
    cookie: str,
    sid: int,
    sampler: Sampler,
    web: int,
    worker: int,
    db: Db,
    server: subprocess.Popen[bytes],
) -> list[Row]:
    """A compaction run of the session (offline summarizer), accepted; its page, comparison and export."""
    rows: list[Row] = []
    started = time.perf_counter()
    status, body, headers = post_form(port, f"/sessions/{sid}/runs/?format=json", cookie=cookie, fields=[])
    peaks = sampler.phase()
    note = _refusal(status, body)
    rows.append(
        Row(
            "start a run (POST)",
            "web",
            f"{status}{note}",
            peaks["web"],
            _status_mb(web, "VmHWM"),
            time.perf_counter() - started,
        )
    )
    print(f"  start a run: {status}{note}, web {peaks['web']:.0f} MB", flush=True)
    if status != 201:
        return rows
    run_id = int(json.loads(body)["id"])
    seconds = db.wait_tasks(process=server)
    peaks = sampler.phase()
    run_status = db.value(f"SELECT status FROM sessions_app_compactionrun WHERE id = {run_id}")
    rows.append(
        Row(
            "worker: the run (offline summary)",
            "worker",
            run_status,
            peaks["worker"],
            _status_mb(worker, "VmHWM"),
            seconds,
        )
    )
    print(f"  worker: the run {run_status}, {peaks['worker']:.0f} MB peak, {seconds:.0f} s", flush=True)
    if run_status != "succeeded":
        return rows
    status, body, _ = post_form(
        port, f"/runs/{run_id}/review/?format=json", cookie=cookie, fields=[("decision", "accepted")]
    )
    sampler.phase()
    for what, url in (
        ("run page", f"/runs/{run_id}/"),
        ("run JSON", f"/runs/{run_id}.json"),
        ("compare page", f"/runs/{run_id}/compare/"),
        ("compare JSON", f"/runs/{run_id}/compare.json"),
        ("export", f"/runs/{run_id}/export/"),
    ):
        started = time.perf_counter()
        status, body, got = request(port, "GET", url, cookie=cookie)
        seconds = time.perf_counter() - started
        peaks = sampler.phase()
        note = _refusal(status, body)
        rows.append(Row(what, "web", f"{status}{note}", peaks["web"], _status_mb(web, "VmHWM"), seconds, _kb(got)))
        print(f"  {what:40} {status} {_kb(got):>9} {seconds:6.2f} s  web {peaks['web']:5.0f} MB{note}", flush=True)
    return rows


def _strategies() -> list[str]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from compaction.strategies.registry import STRATEGY_NAMES

    return list(STRATEGY_NAMES)


def _kb(headers: dict[str, str]) -> str:
    return f"{int(headers['x-size']) / 1024:,.0f} KB"


def _refusal(status: int, body: bytes) -> str:
    """A refusal's sentence, short (what a 4xx/5xx answer said)."""
    if status < 400:
        return ""
    text = body.decode(errors="replace")
    try:
        text = str(json.loads(text).get("error", text))
    except (ValueError, AttributeError):
        found = re.search(r'<p class="[^"]*refusal[^"]*"[^>]*>(.*?)</p>', text, re.DOTALL)
        text = re.sub(r"<[^>]+>", "", found.group(1) if found else text[:200])
    return f" ({' '.join(text.split())[:120]})"


if __name__ == "__main__":
    sys.exit(main())
