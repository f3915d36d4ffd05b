"""What the benchmarks share: their input files, PostgreSQL databases, child environments, and the results table.

Each benchmark is a script (``.venv/bin/python bench/NAME.py``); this module is their library. ``record_results``
is how a benchmark writes its rows into ``bench/results.md`` (one section per script, replaced on each run; the
history stays in git).
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
SHARED = PROJECT.parent / "shared"
SOURCE = SHARED / "samples" / "claude-code" / "entirecli_a5d8ec9bae67-0_full.jsonl"
MAKE_BIG = SHARED / "bench" / "make_big_session.py"
SIZE_MB = 53  # the "50 MB session": make_big_session.py's SIZE_MB argument, in MiB
OUT_DIR = BENCH_DIR / "out"
BIG_FILE = OUT_DIR / f"big_session_{SIZE_MB}mb.jsonl"
RESULTS = BENCH_DIR / "results.md"

POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
SERVER_USER, SERVER_PASSWORD = "bench", "bench-load-password"


def compile_project() -> None:
    """Write the project's compiled modules, as any run without PYTHONDONTWRITEBYTECODE does once: an installed
    package (claude-code-log's included) has them, and compiling ours in every timed process cost 0.3-0.5 s."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "compaction", "sessions_app", "config", "manage.py"],
        cwd=PROJECT,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def ensure_big_file(*, size_mb: float = SIZE_MB) -> Path:
    """The ~53 MB session every benchmark reads (or one of ``size_mb`` MiB: memory_bench's 300), built once into
    ``bench/out/`` from a real sample."""
    big = BIG_FILE if size_mb == SIZE_MB else OUT_DIR / f"big_session_{size_mb:g}mb.jsonl"
    if big.is_file() and big.stat().st_size > 0:
        return big
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    partial = big.with_suffix(".partial")
    subprocess.run([sys.executable, str(MAKE_BIG), str(SOURCE), str(partial), f"{size_mb:g}"], check=True)
    partial.rename(big)
    return big


# The tiny-record shape (issue 34): a session of one-word prompts and one-word replies, each reply its own call. Its
# records are the source sample's first typed prompt and first text reply, as Claude Code wrote them, with the
# fields the parser never reads left out (the smallest a real record gets, so the most records per byte) and fresh
# ids for each: uuid and parentUuid chained, each reply's message.id and requestId its own.
TINY_LEFT_OUT = ("userType", "gitBranch", "slug", "thinkingMetadata", "todos")
TINY_WORDS = ("yes", "no", "ok", "go", "next", "stop", "why", "done")


def tiny_templates() -> tuple[dict[str, object], dict[str, object]]:
    """(prompt, reply): the source sample's first typed prompt and first reply holding only text, trimmed."""
    prompt = reply = None
    with SOURCE.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line) if line.strip() else {}
            message = record.get("message")
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            typed = isinstance(content, str) and not record.get("isMeta")
            if prompt is None and record.get("type") == "user" and typed:
                prompt = record
            kinds = [b.get("type") for b in content] if isinstance(content, list) else []
            if reply is None and record.get("type") == "assistant" and kinds == ["text"]:
                reply = record
            if prompt is not None and reply is not None:
                break
    if prompt is None or reply is None:
        raise SystemExit(f"{SOURCE} holds no typed prompt or text reply to copy")
    return tuple({k: v for k, v in r.items() if k not in TINY_LEFT_OUT} for r in (prompt, reply))  # type: ignore[return-value]


def ensure_tiny_file(*, size_mb: float) -> Path:
    """A session of ``size_mb`` MiB of tiny records (``tiny_templates``), built once into ``bench/out/``."""
    tiny = OUT_DIR / f"tiny_session_{size_mb:g}mb.jsonl"
    if tiny.is_file() and tiny.stat().st_size > 0:
        return tiny
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    prompt, reply = tiny_templates()
    target = int(size_mb * 1024 * 1024)
    session_id = str(uuid.uuid4())
    written, parent, n = 0, None, 0
    partial = tiny.with_suffix(".partial")
    started = datetime(2026, 1, 15, 20, 0, tzinfo=UTC)
    with partial.open("w", encoding="utf-8") as out:
        while written < target:
            for template in (prompt, reply):
                record = json.loads(json.dumps(template))
                record["uuid"], record["parentUuid"], record["sessionId"] = str(uuid.uuid4()), parent, session_id
                record["timestamp"] = (started + timedelta(milliseconds=250 * n)).isoformat(timespec="milliseconds")
                record["timestamp"] = record["timestamp"].replace("+00:00", "Z")
                word = TINY_WORDS[n % len(TINY_WORDS)]
                if record.get("type") == "user":
                    record["message"]["content"] = word
                else:
                    record["message"]["id"] = f"msg_tiny{n:012d}"
                    record["requestId"] = f"req_tiny{n:012d}"
                    record["message"]["content"] = [{"type": "text", "text": word}]
                parent = record["uuid"]
                line = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
                out.write(line)
                written += len(line.encode("utf-8"))
                n += 1
    partial.rename(tiny)
    print(f"{tiny}: {written / 1e6:.1f} MB, {n:,} records, {n // 2:,} calls")
    return tiny


def psql(sql: str) -> subprocess.CompletedProcess[str]:
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
        return psql("SELECT 1").returncode == 0
    except subprocess.TimeoutExpired:
        return False


def postgres_url(name: str) -> str:
    return f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def recreate_postgres_db(name: str) -> None:
    """A fresh, empty PostgreSQL database ``name`` (each bench script has its own)."""
    for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}"):
        done = psql(sql)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {sql}: {done.stderr.strip()}")


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int:
    """The resident bytes of ``pid`` and every process it started that still runs."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * PAGE_BYTES
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, IndexError, ValueError):
            continue  # it ended between two reads
        pending.extend(int(child) for child in children)
    return total


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def child_env(*, var_dir: Path, database_url: str | None, debug: str) -> dict[str, str]:
    """The environment of a ``manage.py`` command timed by a benchmark: its own var folder and database."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["SESSION_INSPECTOR_VAR"] = str(var_dir)
    env["DEBUG"] = debug
    env["SECRET_KEY"] = env.get("SECRET_KEY") or "bench-only-secret-key-not-for-production"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled modules (compile_project() wrote them)
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


# ----------------------------------------------------------------------------- a server as bin/run starts it


def server_env(*, database_url: str | None, var_dir: Path, home: Path) -> dict[str, str]:
    """The environment of ``manage.py serve`` under a benchmark: DEBUG off, its own var folder, database and home."""
    env = {
        **os.environ,
        "SESSION_INSPECTOR_VAR": str(var_dir),
        "HOME": str(home),  # the watcher follows only --watch; the real ~/.claude is never read
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-secret-key-not-for-production",
        "INSECURE_COOKIES": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DATABASE_URL", None)
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """``manage.py ARGS`` in ``env``; its output, or the benchmark stops with the command's."""
    done = subprocess.run(
        [sys.executable, str(PROJECT / "manage.py"), *args], env=env, cwd=PROJECT, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def prepare_server_database(*, env: dict[str, str], big: Path) -> int:
    """Migrate, collect static files, import the source and big sessions, estimate their tokens, add the login;
    the big session's id."""
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "collectstatic", "--noinput", "-v0")
    report = json.loads(manage(env, "import_sessions", str(SOURCE), str(big), "--json"))
    big_id = next(item["session"] for item in report["imported"] if item["path"] == str(big.resolve()))
    manage(env, "db_worker", "--batch", "--no-reload", "--no-startup-delay")  # token estimates, as a live server has
    create = "from django.contrib.auth import get_user_model as g; "
    create += f"g().objects.create_user({SERVER_USER!r}, password={SERVER_PASSWORD!r})"
    manage(env, "shell", "-c", create)
    return int(big_id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def login(port: int) -> str:
    """Log in as the benchmark's user at the server on ``port``; the Cookie header of its session."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    csrf = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie", ""))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if csrf is None or token is None:
        raise SystemExit("login failed: no CSRF token")
    body = f"username={SERVER_USER}&password={SERVER_PASSWORD}&csrfmiddlewaretoken={token.group(1)}"
    conn.request(
        "POST",
        "/login/",
        body=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf.group(1)}"},
    )
    response = conn.getresponse()
    response.read()
    session = re.search(r"sessionid=([^;]+)", response.getheader("Set-Cookie", ""))
    if response.status != 302 or session is None:
        raise SystemExit(f"login failed: {response.status}")
    conn.close()
    return f"sessionid={session.group(1)}; csrftoken={csrf.group(1)}"


# ----------------------------------------------------------------------------- the results table


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def record_results(script: str, rows: list[str], *, load: str) -> None:
    """Replace ``script``'s section of bench/results.md with ``rows`` (markdown table rows), dated, with the
    machine and its load average; the other scripts' sections stay."""
    header = "| measure | ours | baseline (same run) | target | verdict |\n| --- | --- | --- | --- | --- |"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- {script} -->\n### `{script}`\n\n{when}; {machine()}; load average (1/5/15 min) {load}.\n\n"
        f"{header}\n" + "\n".join(rows) + f"\n<!-- /{script} -->"
    )
    text = RESULTS.read_text() if RESULTS.is_file() else "# Benchmark results\n\nWritten by the benchmarks.\n"
    pattern = re.compile(rf"<!-- {re.escape(script)} -->.*?<!-- /{re.escape(script)} -->", re.DOTALL)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text.rstrip("\n") + "\n")


def process_tree(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) for ``root`` and every process below it."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            table[int(entry.name)] = (ppid, cmd)
    keep, todo = {root}, [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in keep:
                keep.add(pid)
                todo.append(pid)
    return {pid: table[pid] for pid in keep if pid in table}


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """Stop a ``manage.py serve`` started by a benchmark as Ctrl-C would (SIGTERM), killed after 30 s."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def time_pages(client: Any, pages: list[tuple[str, str]], *, runs: int) -> list[tuple[str, str, float, float, int]]:
    """Each (label, url) requested in-process through ``client`` once (first) and ``runs`` times more: (label, url,
    first ms, median ms, queries of one request), printed as it goes. Needs Django set up."""
    import statistics

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = []
    for label, url in pages:
        t0, c0 = time.perf_counter(), time.process_time()
        response = client.get(url)
        first = (time.perf_counter() - t0) * 1000
        first_cpu = (time.process_time() - c0) * 1000
        assert response.status_code == 200, (url, response.status_code)
        times, cpu = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        median = statistics.median(times)
        rows.append((label, url, first, median, len(queries.captured_queries)))
        # The process's CPU time (SQLite's included: it runs in the process) is what a busy machine's load does not
        # stretch: printed beside the wall time.
        print(
            f"  {label:26} {url:75} first {first:6.1f} ms (CPU {first_cpu:6.1f}), median {median:6.1f} ms "
            f"(CPU {statistics.median(cpu):5.1f}), {len(queries)} queries"
        )
    return rows
