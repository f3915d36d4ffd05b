"""The pagers work as a person uses them: follow the rendered "Next" and "Previous" links."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from sessions_app import models
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import transcript as transcript_selectors
from tests.helpers.claude_code_lines import long_tool_session
from tests.helpers.htmx import HTMX

pytestmark = pytest.mark.django_db

PAGER_LINK = re.compile(r'<nav class="pager">.*?</nav>', re.S)


def pager_href(page_html: str, label: str) -> str:
    """The href of the pager link with this label, as a browser would read it (entities decoded)."""
    pager = PAGER_LINK.search(page_html)
    assert pager is not None, "no pager on the page"
    found = re.search(rf'<a href="([^"]*)">{label}</a>', pager.group(0))
    assert found is not None, f"no {label!r} link in {pager.group(0)}"
    return html.unescape(found.group(1))


def follow(client, base: str, href: str) -> str:
    # A relative "?query" reference keeps the page's path (RFC 3986 §5.2.2).
    assert href.startswith("?") and not href.startswith("??"), href
    return client.get(base + href).content.decode()


def listed_ids(page_html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<td><a class="quoted" href="/sessions/(\d+)/">', page_html)]


def test_the_session_list_pager_reaches_page_two_and_keeps_the_filters(client_in):
    started = datetime(2026, 1, 1, tzinfo=UTC)
    kept = [
        models.Session.objects.create(format="klaude-code", external_id=f"kept-{i}", started_at=started).pk
        for i in range(session_selectors.PER_PAGE + 7)
    ]
    for i in range(5):
        models.Session.objects.create(format="claude-code", external_id=f"other-{i}", started_at=started)

    first = client_in.get("/", {"agent": "klaude-code"}).content.decode()
    assert "Page 1 of 2" in first
    next_href = pager_href(first, "Next")
    assert parse_qs(urlsplit(next_href).query) == {"agent": ["klaude-code"], "page": ["2"]}
    second = follow(client_in, "/", next_href)
    assert "Page 2 of 2" in second
    on_first, on_second = listed_ids(first), listed_ids(second)
    assert len(on_first) == session_selectors.PER_PAGE and len(on_second) == 7
    assert sorted(on_first + on_second) == sorted(kept)  # the filter held: no claude-code session slipped in

    back = follow(client_in, "/", pager_href(second, "Previous"))
    assert listed_ids(back) == on_first


def record_seqs(page_html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'class="permalink" href="/sessions/\d+/m/(\d+)/"', page_html)]


def test_the_transcript_pager_reaches_page_two_and_keeps_agent_and_search(client_in, tmp_path):
    session_id = long_tool_session(
        tmp_path, result_text="needle in the result", n=transcript_selectors.TRANSCRIPT_PAGE + 20
    )
    base = reverse("sessions:detail", args=[session_id])

    first = client_in.get(base, {"agent": "main"}).content.decode()
    second = follow(client_in, base, pager_href(first, "Next"))
    assert "Page 2 of 3" in second
    assert min(record_seqs(second)) > max(record_seqs(first))
    last = follow(client_in, base, pager_href(second, "Last"))
    assert "Page 3 of 3" in last and min(record_seqs(last)) == 2 * transcript_selectors.TRANSCRIPT_PAGE

    # The search box answers with an htmx fragment; its pager must keep the search too.
    found = client_in.get(base, {"agent": "main", "q": "needle"}, **HTMX).content.decode()
    assert f"{transcript_selectors.TRANSCRIPT_PAGE + 20} records match" in found
    next_href = pager_href(found, "Next")
    assert parse_qs(urlsplit(next_href).query) == {"agent": ["main"], "q": ["needle"], "page": ["2"]}
    matches_two = follow(client_in, base, next_href)
    assert "Page 2 of 2" in matches_two and f"{transcript_selectors.TRANSCRIPT_PAGE + 20} records match" in matches_two
    assert len(record_seqs(matches_two)) == 20
