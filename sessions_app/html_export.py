"""A session as one self-contained HTML file: its overview, its token timeline, its diagnosis and every agent's
transcript, with secrets masked (``secret_mask``) before a byte is written, and the list of what was masked.

The file opens offline: the stylesheets are inlined, the timeline is an SVG drawn here, there is no script, and its
own Content-Security-Policy forbids every fetch (an image or font a record named would not load either). It is made
a transcript page at a time (the pages' own partial, ``sessions/detail.html#message``), each page masked and written
before the next is read, so memory stays that of a page whatever the session's size; a session over the memory
budget is refused (``memory_budget``) because the diagnosis is read whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.utils.html import escape

from sessions_app import memory_budget, models
from sessions_app.secret_mask import Masked, mask
from sessions_app.selectors import agents as agent_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import overview as overview_selectors
from sessions_app.selectors import subagents as subagent_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.selectors import transcript as transcript_selectors

STYLESHEETS = ("app.css", "pygments.css")
SVG_WIDTH, SVG_HEIGHT = 960, 220


@dataclass(slots=True)
class Found:
    kind: str
    where: str  # "record #12 (main chain)", "the head of the file"


@dataclass(slots=True)
class Export:
    """Collects what was masked while the chunks are made: the list closes the file."""

    findings: list[Found] = field(default_factory=list)

    def masked(self, chunk: str, *, where: str) -> str:
        text, found = mask(chunk, escaped=True)
        self.findings.extend(Found(kind=f.kind, where=_where(text, f, default=where)) for f in found)
        return text


def _where(text: str, finding: Masked, *, default: str) -> str:
    """The record the masked line belongs to: the last record anchor (``id="mSEQ"``) at or before that line."""
    head = "\n".join(text.split("\n")[: finding.line])
    at = head.rfind('class="msg ')
    if at < 0:
        return default
    anchor = head.find('id="m', at)
    seq = head[anchor + 5 : head.find('"', anchor + 5)] if anchor >= 0 else ""
    return f"record #{seq} ({default})" if seq.isdigit() else default


def filename(*, session: models.Session) -> str:
    return f"session-{session.pk}.html"


def export_html(*, session: models.Session) -> Iterator[str]:
    """The file, chunk by chunk; raises ``SessionTooLarge`` before the first chunk for a session over the budget."""
    if memory_budget.too_large(session=session):
        raise memory_budget.SessionTooLarge(session=session, most=memory_budget.most_bytes())
    export = Export()
    overview = overview_selectors.overview(session=session)
    diagnosis = diagnosis_selectors.stored_diagnosis(session=session)
    head = render_to_string(
        "sessions/export.html#head",
        {
            "session": session,
            "overview": overview,
            "diagnosis": diagnosis,
            "styles": "\n".join(_stylesheet(name) for name in STYLESHEETS),
            "timeline_svg": timeline_svg(session=session, overview=overview),
            "subagents": subagent_selectors.subagents(session=session),
        },
    )
    yield export.masked(head, where="the head of the file")
    yield from _transcripts(session=session, export=export)
    yield render_to_string("sessions/export.html#tail", {"findings": export.findings})


def _transcripts(*, session: models.Session, export: Export) -> Iterator[str]:
    for row in agent_selectors.agents(session=session):
        label = "main chain" if row.agent == "main" else f"subagent {row.agent}"
        title = "Main chain" if row.agent == "main" else (row.spawn.description if row.spawn else "") or row.agent
        yield export.masked(
            f'<section class="export-agent" id="agent-{escape(row.agent)}"><h2>{escape(title)} '
            f'<span class="muted small">{escape(label)}, {row.messages:,} records</span></h2><ol class="messages">\n',
            where=label,
        )
        page_number, pages = 1, 1
        while page_number <= pages:
            page = transcript_selectors.transcript_page(session=session, agent=row.agent, page=page_number)
            pages = page.paginator.num_pages
            for message in page.object_list:
                _whole_blocks(session=session, message=message)
            chunk = "".join(
                render_to_string(
                    "sessions/detail.html#message", {"session": session, "m": m, "mark": "", "export": True}
                )
                for m in page.object_list
            )
            yield export.masked(chunk, where=label)
            page_number += 1
        yield "</ol></section>\n"


def _whole_blocks(*, session: models.Session, message: transcript_selectors.RenderedMessage) -> None:
    """A page cuts long blocks at ``TRUNCATE_CHARS`` (a diff at ``DIFF_ROWS`` lines) with a "show all" link to the
    server; a file has no server to ask, so each cut block is read whole (one record at a time: memory stays a
    record's)."""
    for shown in (message, *message.results):
        for i, block in enumerate(shown.blocks):
            if block.truncated or block.cut:
                shown.blocks[i] = transcript_selectors.message_block(session=session, seq=shown.seq, index=block.index)


def _stylesheet(name: str) -> str:
    found = finders.find(name)
    path = Path(found if isinstance(found, str) else settings.STATIC_ROOT / name)
    # A stylesheet's own imports or fonts would be fetches: the app's CSS has none (tests/browser checks the file).
    return path.read_text(encoding="utf-8").replace("</style", "<\\/style")


DASHED = ' stroke-dasharray="6 3"'  # an estimated series, as the timeline page draws its estimates


def timeline_svg(*, session: models.Session, overview: dict[str, Any]) -> str:
    """The main chain's context at each call, its compactions and the agent's lines, as an inline SVG."""
    calls = list(
        models.ApiCall.objects.filter(session=session, agent="main").order_by("number").values_list("number", "context")
    )
    estimated = False
    if not calls and session.api_calls_main:
        # A log that records no usage: its calls' estimated contexts, the one series its pages draw (labelled so).
        found = timeline_selectors.main_call_estimates(session=session)
        calls = [(p["call"], p["estimate"]) for p in found or []]
        estimated = bool(calls)
        if not calls:
            return '<p class="muted">This log records no usage and its context is not estimated yet: no timeline.</p>'
    if not calls:
        return '<p class="muted">No recorded API calls: no timeline.</p>'
    lines: dict[str, Any] = overview.get("lines") or {}
    window = overview.get("window")
    tops = [c for _, c in calls] + [v for v in (window, *lines.values()) if isinstance(v, int)]
    top = max(tops) or 1
    last = calls[-1][0] or 1
    pad = 40

    def x(call: int) -> float:
        return pad + (SVG_WIDTH - 2 * pad) * (call - 1) / max(last - 1, 1)

    def y(tokens: int) -> float:
        return SVG_HEIGHT - pad - (SVG_HEIGHT - 2 * pad) * tokens / top

    points = " ".join(f"{x(n):.1f},{y(c):.1f}" for n, c in calls)
    parts = [
        f'<svg class="export-timeline" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" width="100%" role="img" '
        f'aria-label="Context per call of the main chain{" (estimated)" if estimated else ""}, {len(calls):,} calls, '
        f'peak {"≈" if estimated else ""}{max(c for _, c in calls):,} tokens" xmlns="http://www.w3.org/2000/svg">',
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5"{DASHED if estimated else ""} '
        f'points="{points}"/>',
    ]
    if estimated:
        parts.append(
            f'<text x="{pad}" y="{pad - 8}" font-size="11" fill="currentColor">estimated: this log records no usage'
            "</text>"
        )
    for name, value in [("window", window), *lines.items()]:
        if isinstance(value, int) and value:
            parts.append(
                f'<line x1="{pad}" x2="{SVG_WIDTH - pad}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                f'stroke="currentColor" stroke-dasharray="4 4" opacity="0.5"/>'
                f'<text x="{SVG_WIDTH - pad}" y="{y(value) - 3:.1f}" text-anchor="end" font-size="11" '
                f'fill="currentColor">{escape(name)} {value:,}</text>'
            )
    for event in models.ContextEvent.objects.filter(session=session, agent="main", kind="compaction"):
        at = x(min(max(event.after_call, 1), last))
        parts.append(
            f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{pad}" y2="{SVG_HEIGHT - pad}" stroke="currentColor" '
            f'stroke-width="2" opacity="0.7"><title>compaction after call {event.after_call:,}</title></line>'
        )
    parts.append(
        f'<text x="{pad}" y="{SVG_HEIGHT - 10}" font-size="11" fill="currentColor">call 1</text>'
        f'<text x="{SVG_WIDTH - pad}" y="{SVG_HEIGHT - 10}" font-size="11" text-anchor="end" '
        f'fill="currentColor">call {last:,}</text></svg>'
    )
    return "".join(parts)
