#!/usr/bin/env python3
"""Load benchmark: 50 concurrent clients for 30 s against the server `bin/run` starts, while a watched session grows.

Into a fresh database (SQLite in a temporary var/, or the PostgreSQL database ``bench_live``), imports the real
source session and the ~53 MB session built from it (``common.ensure_big_file``), runs the estimate
tasks, and creates a login. Then starts ``manage.py serve`` (the supervisor ``bin/run`` execs: the web server, a
db_worker and the watcher) the way ``bin/run`` does (DEBUG=0, static files collected), following a temporary
folder in which a writer appends one prompt and one answer to a live session every ``--grow-every`` seconds.

Each client logs in, then requests in turn, as fast as answers come back:
  list            /
  session page    /sessions/<big>/
  timeline JSON   /sessions/<big>/timeline.json
  diagnosis JSON  /sessions/<big>/diagnosis.json
It reports per URL and overall: requests, errors (anything but 200, or no answer), p50/p95/max latency; the
peak memory (RSS) of the web server (every web process) and of everything ``serve`` runs; how
many lines the watched session grew by and how many of them the server shows at the end.

With ``--slow-clients N`` (issue 34), N more clients at the same time send their requests slowly, the way a
slowloris attack does: half trickle a request's header lines, half a POST body, one byte every ``--slow-every``
seconds, each opening a new connection when the server closes its last. The normal clients run twice on the same
server, first alone (the baseline, at the same machine load) and then beside the slow ones; what the slow ones held
(connections, how many the server closed) is reported too.

Targets (issue 19, issue 34 with slow clients): 0 errors, p95 under 2 s, server memory under 500 MB.

Writes its rows into bench/results.md (``common.record_results``) unless ``--no-record``; ``--project PATH`` serves
another checkout of the project (e.g. the code before a change, for comparison) and never writes there.

usage: .venv/bin/python bench/load_bench.py [--backend sqlite|postgres] [--clients 50] [--seconds 30]
                                            [--slow-clients 0] [--slow-every 1] [--web-workers N] [--threads N]
                                            [--project PATH] [--no-record]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import common  # noqa: E402

POSTGRES_DB = "bench_live"
POSTGRES_URL = common.postgres_url(POSTGRES_DB)
TARGET_P95_S = 2.0
TARGET_RSS_MB = 500
# What a web server process's command line holds: the project's own (sessions_app/web_server.py), or gunicorn's in
# a checkout from before it (--project).
WEB_WORDS = ("sessions_app.web_server", "gunicorn")


# ---------------------------------------------------------------------------------------------
# The growing session


def _line(record: dict[str, object]) -> str:
    return json.dumps(record) + "\n"


class Grower:
    """Appends a prompt and an answer with recorded usage to a Claude Code session file, like an agent does."""

    def __init__(self, path: Path, every: float) -> None:
        self.path, self.every = path, every
        self.turns = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._write(0)

    def _write(self, turn: int) -> None:
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        fields: dict[str, object] = {"sessionId": "bench-live", "version": "2.1.20", "cwd": "/bench", "timestamp": now}
        parent = f"a{turn - 1}" if turn else None
        user: dict[str, object] = {**fields, "type": "user", "uuid": f"u{turn}", "parentUuid": parent}
        user["message"] = {"role": "user", "content": f"prompt {turn}"}
        answer: dict[str, object] = {
            **fields,
            "type": "assistant",
            "uuid": f"a{turn}",
            "parentUuid": f"u{turn}",
            "requestId": f"r{turn}",
        }
        answer["message"] = {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": f"answer {turn} " + "lorem ipsum " * 40}],
            "usage": {
                "input_tokens": 3,
                "cache_creation_input_tokens": 1500,
                "cache_read_input_tokens": 20_000 + 1500 * turn,
                "output_tokens": 200,
            },
        }
        with self.path.open("a", encoding="utf-8") as f:
            f.write(_line(user) + _line(answer))
        self.turns = turn + 1

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self._write(self.turns)


# ---------------------------------------------------------------------------------------------
# Clients


@dataclass(slots=True)
class Sample:
    url: str
    seconds: float
    status: int  # 0: no answer


@dataclass(slots=True)
class Client:
    port: int
    cookie: str
    urls: list[str]
    start: int
    samples: list[Sample] = field(default_factory=list)

    def run(self, until: float) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = self.start
        while time.monotonic() < until:
            url = self.urls[i % len(self.urls)]
            i += 1
            began = time.monotonic()
            try:
                conn.request("GET", url, headers={"Cookie": self.cookie, "Accept-Encoding": "identity"})
                response = conn.getresponse()
                response.read()
                status = response.status
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self.samples.append(Sample(url=url, seconds=time.monotonic() - began, status=status))
        conn.close()


@dataclass(slots=True)
class SlowClient:
    """Sends one request slowly, a byte every ``every`` seconds, for ever; opens another when the server closes it."""

    port: int
    body: bool  # trickle a POST body; else header lines
    every: float
    connections: int = 0
    closed_by_server: int = 0

    def _head(self) -> bytes:
        if self.body:
            return (
                b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: 1000000\r\n\r\nusername="
            )
        return b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def run(self, until: float) -> None:
        while time.monotonic() < until:
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            except OSError:
                time.sleep(self.every)
                continue
            self.connections += 1
            try:
                sock.sendall(self._head())
                while time.monotonic() < until:
                    time.sleep(self.every)
                    sock.sendall(b"a")
            except OSError:
                self.closed_by_server += 1
            finally:
                sock.close()


def _get_json(port: int, cookie: str, url: str) -> dict[str, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", url, headers={"Cookie": cookie})
    data: dict[str, object] = json.loads(conn.getresponse().read())
    conn.close()
    return data


# ---------------------------------------------------------------------------------------------
# Server memory


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _pss_mb(pid: int) -> float:
    """Proportional set size: shared pages (Python, libraries) divided among the processes sharing them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_seconds(root: int, *, words: tuple[str, ...]) -> float:
    """User + system CPU time of the processes under ``root`` whose command line holds one of ``words``."""
    total = 0
    for pid, (_, cmd) in common.process_tree(root).items():
        if any(word in cmd for word in words):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class Memory:
    web_peak: float = 0.0
    all_peak: float = 0.0
    web_worker_peak: float = 0.0
    all_pss_peak: float = 0.0

    def sample(self, root: int) -> None:
        tree = common.process_tree(root)
        rss = {pid: _rss_mb(pid) for pid in tree}
        self.all_pss_peak = max(self.all_pss_peak, sum(_pss_mb(pid) for pid in tree))
        web = [pid for pid, (_, cmd) in tree.items() if any(word in cmd for word in WEB_WORDS)]
        self.web_peak = max(self.web_peak, sum(rss[p] for p in web))
        self.all_peak = max(self.all_peak, sum(rss.values()))
        masters = {pid for pid in web if tree[pid][0] not in web}
        # A server without a master (every web process a child of `serve`): each process is a worker.
        workers = [p for p in web if p not in masters] or web
        self.web_worker_peak = max([self.web_worker_peak] + [rss[p] for p in workers])


# ---------------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--grow-every", type=float, default=1.0, help="seconds between two turns of the live session")
    parser.add_argument("--web-workers", type=int, default=None, help="default: the WEB_WORKERS setting")
    parser.add_argument("--threads", type=int, default=None, help="default: the WEB_THREADS setting")
    parser.add_argument("--slow-clients", type=int, default=0, help="clients sending their requests slowly, besides")
    parser.add_argument("--slow-every", type=float, default=1.0, help="seconds between two bytes of a slow client")
    parser.add_argument("--project", type=Path, default=None, help="serve this checkout instead (never recorded)")
    parser.add_argument("--no-record", action="store_true", help="do not write bench/results.md")
    args = parser.parse_args()
    if args.project is not None:
        common.PROJECT = args.project.resolve()  # its manage.py prepares the database and serves
        args.no_record = True

    big = common.ensure_big_file()
    if args.backend == "postgres":
        if not common.postgres_reachable():
            print("PostgreSQL does not answer at 127.0.0.1:5432")
            return 1
        for sql in (f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)", f"CREATE DATABASE {POSTGRES_DB}"):
            subprocess.run(["psql", common.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=True)

    with tempfile.TemporaryDirectory(prefix="si-load-") as tmp:
        root = Path(tmp)
        var_dir, home, watched = root / "var", root / "home", root / "watched" / "-bench"
        for folder in (var_dir, home, watched):
            folder.mkdir(parents=True)
        env = common.server_env(
            database_url=POSTGRES_URL if args.backend == "postgres" else None, var_dir=var_dir, home=home
        )
        started = time.monotonic()
        big_id = common.prepare_server_database(env=env, big=big)
        print(f"prepared the database in {time.monotonic() - started:.1f} s (big session {big_id})", flush=True)

        grower = Grower(watched / "bench-live.jsonl", args.grow_every)
        port = common.free_port()
        serve = [sys.executable, str(common.PROJECT / "manage.py"), "serve", "--bind", f"127.0.0.1:{port}"]
        serve += ["--watch", str(watched.parent)]
        if args.web_workers:
            serve += ["--web-workers", str(args.web_workers)]
        if args.threads:
            serve += ["--threads", str(args.threads)]
        log = (root / "serve.log").open("w+")
        server = subprocess.Popen(serve, env=env, cwd=common.PROJECT, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            return _run(args=args, server=server, log=log, port=port, big_id=big_id, grower=grower)
        finally:
            grower.stop.set()
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
            if args.backend == "postgres":
                sql = f"DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)"
                subprocess.run(["psql", common.POSTGRES_ADMIN_URL, "-q", "-c", sql], check=False)


def _drive(
    *,
    args: argparse.Namespace,
    server: subprocess.Popen[str],
    port: int,
    cookie: str,
    urls: list[str],
    slow_clients: int,
    memory: Memory,
) -> tuple[list[Sample], list[SlowClient]]:
    """``args.clients`` clients (and ``slow_clients`` slow ones) for ``args.seconds``: the clients' samples."""
    clients = [Client(port=port, cookie=cookie, urls=urls, start=i) for i in range(args.clients)]
    until = time.monotonic() + args.seconds
    slow = [SlowClient(port=port, body=i % 2 == 1, every=args.slow_every) for i in range(slow_clients)]
    # The slow clients first: they are at work by the time the normal clients ask.
    slow_threads = [threading.Thread(target=c.run, args=(until,), daemon=True) for c in slow]
    for t in slow_threads:
        t.start()
    threads = [threading.Thread(target=c.run, args=(until,)) for c in clients]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        memory.sample(server.pid)
        time.sleep(0.5)
    for t in slow_threads:
        t.join(timeout=2 * args.slow_every + 1)
    return [s for c in clients for s in c.samples], slow


def _run(
    *, args: argparse.Namespace, server: subprocess.Popen[str], log, port: int, big_id: int, grower: Grower
) -> int:
    deadline = time.monotonic() + 120
    while "password" not in Path(log.name).read_text() and "Log in with" not in Path(log.name).read_text():
        if server.poll() is not None or time.monotonic() > deadline:
            print(Path(log.name).read_text())
            return 1
        time.sleep(0.2)
    banner = next(line for line in Path(log.name).read_text().splitlines() if "process(es)" in line)
    print("server:", banner.strip(), flush=True)
    cookie = common.login(port)
    listed = _get_json(port, cookie, "/sessions.json")["sessions"]
    live_id = int(next(s["id"] for s in listed if s["external_id"] == "bench-live"))  # type: ignore[attr-defined]
    before = int(_get_json(port, cookie, f"/sessions/{live_id}/live.json")["messages"])  # type: ignore[call-overload]
    turns_before = grower.turns
    urls = ["/", f"/sessions/{big_id}/", f"/sessions/{big_id}/timeline.json", f"/sessions/{big_id}/diagnosis.json"]
    memory = Memory()
    load_before = os.getloadavg()
    grower.thread.start()
    alone: list[Sample] = []
    if args.slow_clients:
        # The same clients without the slow ones first, on the same server at the same load: the baseline.
        alone, _ = _drive(args=args, server=server, port=port, cookie=cookie, urls=urls, slow_clients=0, memory=memory)
        alone_errors = sum(1 for s in alone if s.status != 200)
        print(
            f"without slow clients: p95 {_pct([s.seconds for s in alone], 95):.2f} s, {len(alone)} requests, "
            f"{alone_errors} errors",
            flush=True,
        )
    web_cpu_before = _cpu_seconds(server.pid, words=WEB_WORDS)
    client_cpu_before = time.process_time()
    samples, slow = _drive(
        args=args, server=server, port=port, cookie=cookie, urls=urls, slow_clients=args.slow_clients, memory=memory
    )
    grower.stop.set()
    load_after = os.getloadavg()
    web_cpu = _cpu_seconds(server.pid, words=WEB_WORDS) - web_cpu_before
    client_cpu = time.process_time() - client_cpu_before
    written = 2 * (grower.turns - turns_before)
    time.sleep(2)  # the watcher imports the last turn
    after = int(_get_json(port, cookie, f"/sessions/{live_id}/live.json")["messages"])  # type: ignore[call-overload]
    memory.sample(server.pid)

    names = {urls[0]: "list", urls[1]: "session page", urls[2]: "timeline JSON", urls[3]: "diagnosis JSON"}
    with_slow = f" and {args.slow_clients} slow clients" if args.slow_clients else ""
    print(f"\n{args.backend}: {args.clients} clients{with_slow}, {args.seconds:.0f} s, {len(samples)} requests")
    print("| URL | requests | errors | p50 (s) | p95 (s) | max (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for url in [*urls, None]:
        chosen = [s for s in samples if url is None or s.url == url]
        times = [s.seconds for s in chosen]
        errors = sum(1 for s in chosen if s.status != 200)
        label = "**all**" if url is None else names[url]
        print(
            f"| {label} | {len(chosen)} | {errors} | {statistics.median(times):.2f} | {_pct(times, 95):.2f} "
            f"| {max(times):.2f} |"
        )
    all_times = [s.seconds for s in samples]
    errors = sum(1 for s in samples if s.status != 200)
    p95 = _pct(all_times, 95)
    print(
        f"\nserver memory peak: web (every web server process) {memory.web_peak:.0f} MB "
        f"(largest worker {memory.web_worker_peak:.0f} MB); everything serve runs {memory.all_peak:.0f} MB "
        f"(PSS, shared pages counted once: {memory.all_pss_peak:.0f} MB)"
    )
    print(f"watched session: {written} lines written during the run, the server shows {after - before} more records")
    print(
        f"CPU: web server {web_cpu:.1f} s ({1000 * web_cpu / max(len(samples), 1):.1f} ms per request), "
        f"these clients {client_cpu:.1f} s, over {args.seconds:.0f} s on {os.cpu_count()} cores"
    )
    opened, closed = sum(c.connections for c in slow), sum(c.closed_by_server for c in slow)
    if slow:
        print(
            f"slow clients: {len(slow)} (a byte every {args.slow_every:g} s), {opened} connections opened, "
            f"{closed} closed by the server"
        )
    print(f"load average before / after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    fast_enough = errors == 0 and p95 < TARGET_P95_S
    met = fast_enough and memory.web_peak < TARGET_RSS_MB and after - before >= written
    print("target (0 errors, p95 < 2 s, web server < 500 MB, every written line shown):", "met" if met else "MISSED")
    if not args.no_record:
        script = f"load_bench.py --backend {args.backend}" + (f" --slow-clients {args.slow_clients}" if slow else "")
        who = f"{args.clients} clients" + (
            f" + {len(slow)} slow clients (a byte every {args.slow_every:g} s)" if slow else ""
        )
        verdict = "met" if fast_enough else "NOT met"
        baseline = ""
        if alone:
            times = [s.seconds for s in alone]
            baseline = (
                f"without the slow clients: p95 {_pct(times, 95):.2f} s, p50 {statistics.median(times):.2f} s; "
                f"{len(alone):,} requests, {sum(1 for s in alone if s.status != 200)} errors"
            )
        rows = [
            f"| {who}, {args.seconds:.0f} s ({args.backend}): the normal clients' requests | p95 {p95:.2f} s, "
            f"p50 {statistics.median(all_times):.2f} s, max {max(all_times):.2f} s; {len(samples):,} requests, "
            f"{errors} errors | {baseline} | p95 < 2 s, 0 errors | {verdict} |",
            f"| web server memory peak ({args.backend}) | {memory.web_peak:.0f} MB |  | < {TARGET_RSS_MB} MB "
            f"| {'met' if memory.web_peak < TARGET_RSS_MB else 'NOT met'} |",
            f"| live session lines shown ({args.backend}) | {after - before} of {written} written |  | all "
            f"| {'met' if after - before >= written else 'NOT met'} |",
        ]
        if slow:
            rows.append(
                f"| what the slow clients held ({args.backend}) | {opened} connections, {closed} closed by the "
                "server |  | reported |  |"
            )
        load = f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} → "
        load += f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
        common.record_results(script, rows, load=load)
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
