"""The web server `manage.py serve` runs (``python -m sessions_app.web_server``): Waitress serving ``config.wsgi``.

Why Waitress and not gunicorn's gthread worker (issue 34, item 6): a gthread thread reads a request synchronously once
its first bytes arrive, with no header or body deadline (gunicorn 27 only hands back a connection that sends nothing
for 5 s), so eight clients trickling a byte at a time held the eight threads and nobody else was answered. Waitress
reads every request, head and body, in its event loop (a body past ``inbuf_overflow`` spools to a temporary file) and
gives a thread only a complete request; it writes answers from the loop too, so a slow reader holds a thread only past
``outbuf_high_watermark`` of pending output. A slow client costs a socket, not a thread: the limit is
``WEB_CONNECTIONS`` open connections, and one that sends nothing for ``WEB_IDLE_TIMEOUT_S`` is closed, while an upload
whose bytes keep coming, however slowly, is never cut. Django's views stay synchronous (WSGI), streamed answers stream.

``serve`` binds the listening socket itself and passes it down (``--fd``): every web process accepts from the same
socket, a restarted one finds the port still open (connections wait in the backlog), and a busy port is refused before
anything starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import signal
import socket
import sys

READY = "web server listening"  # the line `serve` waits for before it prints the login


def _allow_open_files(connections: int) -> None:
    # A connection can hold three descriptors (its socket, and temporary files for a large body in and answer out).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 3 * connections + 100
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessions_app.web_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="the listening socket `manage.py serve` passes down")
    parser.add_argument("--threads", type=int, default=None, help="threads for requests (default: WEB_THREADS)")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import waitress
    from django.conf import settings

    from config.wsgi import application

    # One line per refused or broken connection is enough; the queue's "depth is N" notice on every request that
    # waits for a thread is not news under load.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    connections = int(settings.WEB_CONNECTIONS)
    _allow_open_files(connections)
    listener = socket.socket(fileno=args.fd)
    threads = args.threads or int(settings.WEB_THREADS)
    proxy: dict[str, object] = {}
    if settings.WEB_TRUSTED_PROXY:
        # As gunicorn did by default: the scheme a proxy on this machine was asked in (X-Forwarded-Proto) is
        # believed; every other forwarding header is dropped (docs/deployment.md).
        proxy = {
            "trusted_proxy": settings.WEB_TRUSTED_PROXY,
            "trusted_proxy_headers": "x-forwarded-proto",
            "trusted_proxy_count": 1,
        }
    server = waitress.create_server(
        application,
        sockets=[listener],
        threads=threads,
        # The event loop and a few sockets of its own count against the limit too.
        connection_limit=connections + 10,
        channel_timeout=int(settings.WEB_IDLE_TIMEOUT_S),
        cleanup_interval=max(1, min(10, int(settings.WEB_IDLE_TIMEOUT_S))),
        # Refused at its head, before a byte of the body is stored: the upload view's own limit is the same number.
        max_request_body_size=int(settings.UPLOAD_MAX_REQUEST_BYTES),
        # What a connection may hold in memory while its request comes in (past it a body spools to a temporary
        # file, headers are refused): 64 KiB of each, 128 MB at 1,000 slow clients, where Waitress's defaults (256
        # KiB of headers, 512 KiB of body) came to 768 MB. gunicorn allowed 100 header fields of 8 KiB.
        max_request_header_size=64 * 1024,
        inbuf_overflow=64 * 1024,
        asyncore_use_poll=True,  # select() stops at descriptor 1024
        clear_untrusted_proxy_headers=True,
        **proxy,
        ident="",  # no Server header
    )
    # SIGTERM from `serve` (or the kernel, when it dies): leave the loop; Waitress then gives running requests 5 s.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    host, port = listener.getsockname()[:2]
    print(f"{READY} on http://{host}:{port}/, {threads} threads, pid {os.getpid()}", flush=True)
    server.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
