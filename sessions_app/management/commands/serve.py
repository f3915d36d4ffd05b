from __future__ import annotations

import os
import socket
import sys
import threading
import time
from io import StringIO
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import services, watcher, web_server
from sessions_app.supervisor import ChildSpec, Supervisor


def child_specs(
    *, listen_fd: int, web_workers: int, threads: int, task_workers: int, watch: bool, watch_paths: list[Path]
) -> list[ChildSpec]:
    python, manage = sys.executable, str(Path(settings.BASE_DIR) / "manage.py")
    # Every web process serves the one listening socket `serve` holds (sessions_app/web_server.py says why Waitress).
    web = [python, "-m", "sessions_app.web_server", "--fd", str(listen_fd), "--threads", str(threads)]
    specs = [
        ChildSpec(name="web" if web_workers == 1 else f"web-{i + 1}", argv=web, pass_fds=(listen_fd,))
        for i in range(web_workers)
    ]
    for i in range(task_workers):
        # --no-reload: the autoreloader would run the worker in a grandchild and print every line twice.
        name = "worker" if task_workers == 1 else f"worker-{i + 1}"
        specs.append(ChildSpec(name=name, argv=[python, manage, "db_worker", "--no-reload"]))
    if watch:
        specs.append(ChildSpec(name="watch", argv=[python, manage, "watch_sessions", *map(str, watch_paths)]))
    return specs


class Command(BaseCommand):
    help = (
        "Serve the app (Waitress), its task worker(s) and the session watcher, and keep them running: one that "
        "exits is started again; Ctrl-C or SIGTERM stops them all. The login is printed last, once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default=settings.BIND, help="host:port (default: BIND, 127.0.0.1:8000)")
        parser.add_argument("--web-workers", type=int, default=settings.WEB_WORKERS)
        parser.add_argument("--threads", type=int, default=settings.WEB_THREADS, help="threads per web worker")
        parser.add_argument("--task-workers", type=int, default=settings.TASK_WORKERS)
        parser.add_argument("--no-watch", action="store_true", help="do not follow the agents' folders")
        parser.add_argument("--watch", action="append", type=Path, default=[], help="follow this folder instead")

    def handle(self, *args: Any, **options: Any) -> None:
        bind: str = options["bind"]
        host, _, port = bind.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--bind must be host:port, not {bind!r}.")
        try:
            # Held here for as long as `serve` runs: a web process that is restarted finds its port open.
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            listener = socket.create_server((host.strip("[]"), int(port)), family=family, backlog=2048)
        except OSError as e:
            raise CommandError(f"Cannot listen on {bind}: {e.strerror or e}") from e
        try:
            self._serve(bind=bind, listener=listener, options=options)
        finally:
            listener.close()

    def _serve(self, *, bind: str, listener: socket.socket, options: dict[str, Any]) -> None:
        login = StringIO()
        call_command("ensure_reviewer", stdout=login)
        watch = not options["no_watch"]
        watch_paths: list[Path] = options["watch"]
        specs = child_specs(
            listen_fd=listener.fileno(),
            web_workers=options["web_workers"],
            threads=options["threads"],
            task_workers=options["task_workers"],
            watch=watch,
            watch_paths=watch_paths,
        )
        # The login comes last: after each web process said it listens, each task worker said it started, and the
        # watcher's first pass over existing files is done.
        awaited = {s.name: threading.Event() for s in specs}
        web_names = {s.name for s in specs if s.name.startswith("web")}
        log_dir = Path(settings.LOG_DIR)
        banner_shown = threading.Event()
        scan = {"latest": ""}  # the first scan's latest progress line, for a banner shown before it ends

        def on_line(name: str, line: str) -> None:
            if name not in awaited:
                return
            if name in web_names:
                if web_server.READY in line:
                    awaited[name].set()
            elif name != "watch":
                awaited[name].set()
            elif line.startswith(watcher.FIRST_SCAN) and not banner_shown.is_set():
                scan["latest"] = line
                supervisor.progress(line[:1].upper() + line[1:])
            elif line.startswith(watcher.CAUGHT_UP) and not awaited[name].is_set():
                if not banner_shown.is_set():
                    done = line.removeprefix(watcher.CAUGHT_UP).lstrip(": ").split(";")[0]
                    supervisor.end_progress(f"First scan done: {done}.")
                awaited[name].set()

        env = dict(os.environ)
        # Long-lived processes keep their database connections: a new PostgreSQL connection per request costs
        # a server process fork (the load benchmark: p95 2.6 s without, 1.4 s with; docs/performance.md).
        env.setdefault("CONN_MAX_AGE", "300")
        # Their routine lines to their log files, warnings and errors to the terminal too (config/settings.py), each
        # line as it is written (a pipe would otherwise hold a quiet worker's lines for minutes).
        env["LOG_STREAMS"] = "split"
        env["PYTHONUNBUFFERED"] = "1"
        supervisor = Supervisor(
            specs=specs, out=sys.stdout, on_line=on_line, cwd=str(settings.BASE_DIR), env=env, log_dir=log_dir
        )
        supervisor.install_signal_handlers()
        supervisor.say(f"Starting {self._children(options=options)}; their logs go to {_shown(log_dir)}/")
        supervisor.start()
        deadline = time.monotonic() + 60
        while not all(e.is_set() for e in awaited.values()) and time.monotonic() < deadline:
            if supervisor.stopping:
                break
            time.sleep(0.1)
        ready = all(awaited[name].is_set() for name in web_names)
        still_scanning = watch and not awaited["watch"].is_set()
        banner_shown.set()
        if supervisor.stopping:
            # Stopped during start-up: a password made just now is shown only once, so it is not lost.
            if login.getvalue().strip():
                supervisor.say(login.getvalue())
        elif ready:
            banner = self._banner(
                bind=bind,
                options=options,
                watch_paths=watch_paths,
                login=login.getvalue(),
                log_dir=log_dir,
                scanning=(scan["latest"] or "starting") if still_scanning else None,
            )
            supervisor.say(banner)
        else:
            web_log = supervisor.log_path(next(iter(sorted(web_names))))
            supervisor.say(f"The web server did not start serving {bind}; see above and its log, {web_log}.")
        supervisor.run()

    @staticmethod
    def _children(*, options: dict[str, Any]) -> str:
        web = "the web server" if options["web_workers"] == 1 else f"{options['web_workers']} web processes"
        workers = f"{options['task_workers']} task worker" + ("" if options["task_workers"] == 1 else "s")
        return f"{web}, {workers}" + ("" if options["no_watch"] else " and the session watcher")

    def _banner(
        self,
        *,
        bind: str,
        options: dict[str, Any],
        watch_paths: list[Path],
        login: str,
        log_dir: Path,
        scanning: str | None,
    ) -> str:
        if options["no_watch"]:
            following = "not following any folder (--no-watch)"
        else:
            roots = watch_paths or services.default_roots()
            following = "following " + (", ".join(map(str, roots)) or "no agent folder yet")
        account = login.strip() if login.strip() else "Log in with an existing account."
        lines = [
            "",
            f"Session Inspector is running at http://{bind}/",
            f"  {options['web_workers']} web process(es) x {options['threads']} threads, "
            f"{options['task_workers']} task worker(s), {following}. Ctrl-C stops everything.",
            f"  Logs: {_shown(log_dir)}/ (web.log, worker.log, watch.log); warnings and errors show here too.",
        ]
        if scanning is not None:
            # The sessions already there are still being imported: they appear in the list as they come.
            lines.append(f"  The first scan goes on ({scanning}); watch.log has its progress.")
        return "\n".join(
            [
                *lines,
                "",
                account,
                "Change a password with .venv/bin/python manage.py changepassword reviewer",
                "",
            ]
        )


def _shown(path: Path) -> str:
    """The folder as the README names it (``var/log``) when it is in the checkout, else in full."""
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        return str(path)
