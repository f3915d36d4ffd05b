"""The web server (sessions_app/web_server.py) under slow clients (issue 34, item 6): more clients than it has threads
trickle their requests a byte at a time, and everyone else is still answered at once; and what it believes of a proxy.
One real `manage.py serve` (what `bin/run` execs, with bin/run's default threads) for the module."""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.helpers.served import Served

pytestmark = pytest.mark.slow

ANSWER_WITHIN_S = 2.0
# The server's idle timeout here (60 s by default): long enough that the tricklers (a byte every 0.2 s) and the slow
# upload (a pause of 0.1 s) are never cut, short enough to see a silent connection closed.
IDLE_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(
        tmp_path_factory.mktemp("slow-clients"), threads=None, settings={"WEB_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S)}
    )
    try:
        s.wait_for_line(r"password: ")  # the login is the last thing printed at start-up
        yield s
    finally:
        s.kill_all()


class Tricklers:
    """``count`` connections that each send ``head`` at once, then ``rest`` one byte every ``every`` seconds, until
    stopped: a slowloris client when ``rest`` is more header lines, a slow POST when ``head`` announces a body."""

    def __init__(self, *, port: int, count: int, head: bytes, rest: bytes, every: float = 0.2) -> None:
        self.socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
        self.rest, self.every = rest, every
        self.stopped = threading.Event()
        for s in self.socks:
            s.sendall(head)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for i in range(len(self.rest)):
            if self.stopped.wait(self.every):
                return
            for s in self.socks:
                with contextlib.suppress(OSError):  # the server closed it: this client no longer holds anything
                    s.send(self.rest[i : i + 1])

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for s in self.socks:
            s.close()


def _timed_get(port: int, path: str) -> tuple[int, float]:
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - began
    except TimeoutError:
        return 0, time.monotonic() - began
    finally:
        conn.close()


def _assert_answered_at_once(port: int) -> None:
    for _ in range(3):
        status, seconds = _timed_get(port, "/login/")
        assert status == 200 and seconds < ANSWER_WITHIN_S, (status, seconds)


def test_clients_trickling_their_headers_do_not_hold_the_server(served):
    slow = Tricklers(
        port=served.port,
        count=2 * settings.WEB_THREADS,
        head=b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        rest=b"X-Slow: " + b"a" * 200 + b"\r\n\r\n",
    )
    try:
        time.sleep(1.0)  # every slow connection accepted and sending
        _assert_answered_at_once(served.port)
    finally:
        slow.close()


def test_clients_trickling_a_request_body_do_not_hold_the_server(served):
    body = b"username=x&password=" + b"y" * 200
    slow = Tricklers(
        port=served.port,
        count=2 * settings.WEB_THREADS,
        head=b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode(),
        rest=body,
    )
    try:
        time.sleep(1.0)
        _assert_answered_at_once(served.port)
    finally:
        slow.close()


def test_a_connection_that_stops_sending_mid_request_is_closed(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=3 * IDLE_TIMEOUT_S + 2) as s:
        s.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
        began = time.monotonic()
        # Closed without an answer once idle for the timeout (checked every IDLE_TIMEOUT_S seconds).
        assert s.recv(1024) == b""
        assert IDLE_TIMEOUT_S <= time.monotonic() - began <= 2 * IDLE_TIMEOUT_S + 1.5


def test_a_slow_upload_that_keeps_sending_is_received_whole_and_answered(served):
    """A big body over a slow link, with pauses, is not cut: the server answers it once the last byte is in. The
    body is a login form whose password comes last, so only a request read to its end logs in."""
    password = served.wait_for_line(r"password: (\S+)").group(1)
    cookie, token = _login_form(served.port)
    body = f"csrfmiddlewaretoken={token}&username=reviewer&padding={'z' * 196_000}&password={password}".encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=15) as s:
        head = f"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        head += f"Content-Type: application/x-www-form-urlencoded\r\nCookie: csrftoken={cookie}\r\n\r\n"
        s.sendall(head.encode())
        step = 16_384
        for at in range(0, len(body), step):
            s.sendall(body[at : at + step])
            time.sleep(0.1)  # 160 KiB/s, a pause after every piece: 1.2 s in all
        answer = b""
        while part := s.recv(65536):
            answer += part
    assert answer.startswith(b"HTTP/1.1 302"), answer[:300]
    assert b"sessionid=" in answer


def _login_form(port: int) -> tuple[str, str]:
    """The CSRF cookie and form token of a fresh login page."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/login/")
    page = conn.getresponse()
    html = page.read().decode()
    conn.close()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    cookie = re.search(r"csrftoken=([^;]+)", page.getheader("Set-Cookie") or "")
    assert token and cookie
    return cookie.group(1), token.group(1)


def _post_login(port: int, *, headers: dict[str, str]) -> int:
    cookie, token = _login_form(port)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    # No password: the form is refused before any password is hashed (a hash costs a second on a busy machine).
    body = f"csrfmiddlewaretoken={token}&username=nobody&password="
    conn.request(
        "POST",
        "/login/",
        body=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={cookie}", **headers},
    )
    status = conn.getresponse().status
    conn.close()
    return status


def test_a_proxy_on_this_machine_is_believed_about_https_and_nothing_else_is(served):
    """X-Forwarded-Proto from the loopback (WEB_TRUSTED_PROXY) makes the request secure for Django, as gunicorn's
    default did: CSRF then wants a Referer from the same origin, so a post without one is refused."""
    assert _post_login(served.port, headers={}) == 200  # the form again, asking for the password
    assert _post_login(served.port, headers={"X-Forwarded-Proto": "https"}) == 403
    same_origin = {"X-Forwarded-Proto": "https", "Referer": f"https://127.0.0.1:{served.port}/login/"}
    assert _post_login(served.port, headers=same_origin) == 200
