"""Reads: every query the views and commands need, with a fixed number of queries each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import orjson
from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, Min, Q, QuerySet

from compaction.transcript import MAIN, Block, Message, SessionInfo, Usage
from sessions_app import models

SORTS = {
    "date": "-started_at",
    "-date": "started_at",
    "size": "-size_bytes",
    "-size": "size_bytes",
    "peak": "-peak_context",
    "-peak": "peak_context",
    "calls": "-api_calls_main",
}
PER_PAGE = 50
TRANSCRIPT_PAGE = 100  # records per transcript page: bounded work per request, whatever the session's length
TRUNCATE_CHARS = 2000  # longer block text is cut, with a "show all" link


class SessionNotFound(LookupError):
    pass


@dataclass(slots=True)
class SessionFilters:
    q: str = ""
    format: str = ""
    project: str = ""
    model: str = ""
    since: date | None = None
    until: date | None = None
    has_compaction: bool = False
    overflowed: bool = False
    compaction_failed: bool = False
    sort: str = "date"


def session_list(*, filters: SessionFilters) -> QuerySet[models.Session]:
    qs = models.Session.objects.all()
    if filters.q:
        qs = qs.filter(
            Q(title__icontains=filters.q)
            | Q(external_id__icontains=filters.q)
            | Q(project__icontains=filters.q)
            | Q(files__path__icontains=filters.q)
        ).distinct()
    if filters.format:
        qs = qs.filter(format=filters.format)
    if filters.project:
        qs = qs.filter(project=filters.project)
    if filters.model:
        qs = qs.filter(model=filters.model)
    if filters.since:
        qs = qs.filter(started_at__date__gte=filters.since)
    if filters.until:
        qs = qs.filter(started_at__date__lte=filters.until)
    if filters.has_compaction:
        qs = qs.filter(has_compaction=True)
    if filters.overflowed:
        qs = qs.filter(overflowed=True)
    if filters.compaction_failed:
        qs = qs.filter(compaction_failed=True)
    order = SORTS.get(filters.sort, SORTS["date"])
    return qs.order_by(order, "-id")


def session_page(*, filters: SessionFilters, page: int | str | None) -> Page:
    return Paginator(session_list(filters=filters), PER_PAGE).get_page(page)


def filter_choices() -> dict[str, list[str]]:
    """Distinct projects and models for the filter dropdowns (two queries)."""
    return {
        "projects": list(
            models.Session.objects.exclude(project="").order_by("project").values_list("project", flat=True).distinct()
        ),
        "models": list(
            models.Session.objects.exclude(model="").order_by("model").values_list("model", flat=True).distinct()
        ),
    }


def get_session(*, session_id: int) -> models.Session:
    try:
        return models.Session.objects.get(pk=session_id)
    except models.Session.DoesNotExist:
        raise SessionNotFound(f"No session with id {session_id}.") from None


def resolve_session(*, ref: str) -> models.Session:
    """A session by its id, its agent's session id, or the path of a file it was imported from."""
    if ref.isdigit():
        found = models.Session.objects.filter(pk=int(ref)).first()
        if found:
            return found
    candidates = [ref]
    path = Path(ref)
    if path.exists():
        candidates.append(str(path.resolve()))
    source = models.SourceFile.objects.filter(path__in=candidates).select_related("session").first()
    if source is not None:
        return source.session
    found = models.Session.objects.filter(external_id=ref).order_by("id").first()
    if found is None:
        raise SessionNotFound(f"No session matches {ref!r} (give its id, its file path or its session id).")
    return found


def session_stats(*, session: models.Session) -> dict[str, Any]:
    calls = models.ApiCall.objects.filter(session=session).aggregate(
        main=Count("id", filter=Q(agent=MAIN)),
        side=Count("id", filter=~Q(agent=MAIN)),
        main_max=Max("context", filter=Q(agent=MAIN)),
        side_max=Max("context", filter=~Q(agent=MAIN)),
    )
    events = models.ContextEvent.objects.filter(
        session=session, kind__in=["compaction", "microcompact", "prune", "api_error", "overflow"]
    )
    return {
        "id": session.pk,
        "format": session.format,
        "api_calls": {"main": calls["main"], "side": calls["side"]},
        "max_context": {"main": calls["main_max"] or 0, "side": calls["side_max"] or 0},
        "events": [
            {
                "kind": e.kind,
                "agent": e.agent,
                "trigger": e.trigger or None,
                "pre_tokens": e.pre_tokens,
                "tokens_saved": e.tokens_saved,
                "after_call": e.after_call,
            }
            for e in events.order_by("seq", "id")
        ],
    }


# ---------------------------------------------------------------------------------------------
# Session page


@dataclass(slots=True)
class AgentSummary:
    agent: str
    messages: int
    calls: int
    peak: int
    spawn_description: str = ""


def agents(*, session: models.Session) -> list[AgentSummary]:
    """Main chain first, then each subagent with its size (two queries)."""
    counts = {
        row["agent"]: row
        for row in models.Message.objects.filter(session=session)
        .values("agent")
        .annotate(n=Count("id"), first=Min("seq"))
        .order_by()
    }
    calls = {
        row["agent"]: row
        for row in models.ApiCall.objects.filter(session=session)
        .values("agent")
        .annotate(n=Count("id"), peak=Max("context"))
        .order_by()
    }
    result = []
    for agent, row in sorted(counts.items(), key=lambda kv: (kv[0] != MAIN, kv[1]["first"])):
        c = calls.get(agent, {"n": 0, "peak": 0})
        result.append(AgentSummary(agent=agent, messages=row["n"], calls=c["n"], peak=c["peak"] or 0))
    return result


@dataclass(slots=True)
class RenderedBlock:
    index: int
    kind: str
    text: str
    truncated: bool
    full_chars: int
    tool_id: str
    tool_name: str
    is_error: bool
    media_type: str


@dataclass(slots=True)
class RenderedMessage:
    seq: int
    line: int
    role: str
    kind: str
    raw_type: str
    agent: str
    timestamp: Any
    model: str
    call_index: int | None
    context: int | None
    blocks: list[RenderedBlock]
    results: list[RenderedMessage]  # tool results paired under this message's tool calls
    raw: str
    tokens: int | None
    events: list[models.ContextEvent]

    @property
    def anchor(self) -> str:
        return f"m{self.seq}"


def render_block(index: int, block: dict[str, Any], *, full: bool = False) -> RenderedBlock:
    text = block.get("text", "")
    cut = not full and len(text) > TRUNCATE_CHARS
    return RenderedBlock(
        index=index,
        kind=block.get("kind", "text"),
        text=text[:TRUNCATE_CHARS] if cut else text,
        truncated=cut,
        full_chars=len(text),
        tool_id=block.get("tool_id", ""),
        tool_name=block.get("tool_name", ""),
        is_error=bool(block.get("is_error")),
        media_type=block.get("media_type", ""),
    )


def transcript_page(
    *, session: models.Session, agent: str, page: int | str | None, q: str = "", kinds: str = ""
) -> Page:
    """One page of an agent's records, tool results paired under their calls; a fixed number of queries."""
    qs = models.Message.objects.filter(session=session, agent=agent).exclude(kind="bookkeeping")
    if q:
        qs = qs.filter(blocks_json__icontains=q)
    qs = qs.order_by("seq").defer("data_json")
    paginator = Paginator(qs, TRANSCRIPT_PAGE)
    page_obj = paginator.get_page(page)
    rows = list(page_obj.object_list)
    contexts = dict(
        models.ApiCall.objects.filter(
            session=session, agent=agent, index__in={r.call_index for r in rows if r.call_index is not None}
        ).values_list("index", "context")
    )
    rendered = [_render_message(r, contexts) for r in rows]
    if rows:
        by_seq = {m.seq: m for m in rendered}
        for event in models.ContextEvent.objects.filter(
            session=session, agent=agent, seq__gte=rows[0].seq, seq__lte=rows[-1].seq
        ):
            if event.seq in by_seq:
                by_seq[event.seq].events.append(event)
    # Pair tool results with the call on the same page; results whose call is elsewhere stay in place.
    by_tool: dict[str, RenderedMessage] = {}
    for m in rendered:
        for b in m.blocks:
            if b.kind == "tool_use" and b.tool_id:
                by_tool[b.tool_id] = m
    shown: list[RenderedMessage] = []
    for m in rendered:
        owner = None
        if m.kind == "tool_result" and not q:
            ids = [b.tool_id for b in m.blocks if b.kind == "tool_result"]
            owners = {id(by_tool[i]) for i in ids if i in by_tool}
            if ids and len(owners) == 1 and all(i in by_tool for i in ids):
                owner = by_tool[ids[0]]
        if owner is not None:
            owner.results.append(m)
        else:
            shown.append(m)
    page_obj.object_list = shown
    return page_obj


def _render_message(row: models.Message, contexts: dict[int, int]) -> RenderedMessage:
    return RenderedMessage(
        seq=row.seq,
        line=row.line,
        role=row.role,
        kind=row.kind,
        raw_type=row.raw_type,
        agent=row.agent,
        timestamp=row.timestamp,
        model=row.model,
        call_index=row.call_index,
        context=contexts.get(row.call_index) if row.call_index is not None else None,
        blocks=[render_block(i, b) for i, b in enumerate(orjson.loads(row.blocks_json))],
        results=[],
        raw=row.raw[:TRUNCATE_CHARS],
        tokens=row.tokens,
        events=[],
    )


def page_of_message(*, session: models.Session, agent: str, seq: int) -> int:
    """The transcript page that holds record ``seq`` (for permalinks)."""
    before = (
        models.Message.objects.filter(session=session, agent=agent, seq__lt=seq).exclude(kind="bookkeeping").count()
    )
    return before // TRANSCRIPT_PAGE + 1


def message_block(*, session: models.Session, seq: int, index: int) -> RenderedBlock:
    row = models.Message.objects.only("blocks_json").get(session=session, seq=seq)
    blocks = orjson.loads(row.blocks_json)
    if not 0 <= index < len(blocks):
        raise models.Message.DoesNotExist(f"message {seq} has no block {index}")
    return render_block(index, blocks[index], full=True)


def compaction_summaries(*, session: models.Session) -> QuerySet[models.Message]:
    return models.Message.objects.filter(session=session, kind="compact_summary").order_by("seq")


def line_issues(*, session: models.Session, limit: int = 200) -> list[models.LineIssue]:
    return list(models.LineIssue.objects.filter(session=session)[:limit])


def unknown_records(*, session: models.Session, limit: int = 200) -> list[models.Message]:
    return list(
        models.Message.objects.filter(session=session, kind="unknown").only("seq", "line", "raw_type", "raw", "agent")[
            :limit
        ]
    )


# ---------------------------------------------------------------------------------------------
# The neutral model, read back for strategies, replay and diagnosis


def session_info(*, session: models.Session) -> SessionInfo:
    return SessionInfo(
        format=session.format,
        session_id=session.external_id or None,
        agent_version=session.agent_version or None,
        model=session.model or None,
        cwd=session.project or None,
        title=session.title or None,
        started_at=session.started_at.isoformat() if session.started_at else None,
        ended_at=session.ended_at.isoformat() if session.ended_at else None,
        context_window=session.context_window,
        data=dict(session.info),
    )


def conversation(*, session: models.Session, agent: str = MAIN) -> list[Message]:
    """The records of one agent as neutral ``Message``s, in order, with each call's recorded usage.

    Unknown records are left out (they never reach a model); for klaude-code every history item
    stays, so list positions equal klaude's own indices. ``Message.data["seq"]`` holds the stored seq.
    """
    usage_by_call = {
        c.index: Usage(c.input_tokens, c.cache_creation_tokens, c.cache_read_tokens, c.output_tokens)
        for c in models.ApiCall.objects.filter(session=session, agent=agent)
    }
    rows = (
        models.Message.objects.filter(session=session, agent=agent)
        .exclude(kind="unknown")
        .order_by("seq")
        .values_list(
            "seq",
            "line",
            "role",
            "kind",
            "raw_type",
            "uuid",
            "parent_uuid",
            "timestamp",
            "model",
            "call_index",
            "blocks_json",
            "data_json",
        )
    )
    messages: list[Message] = []
    for seq, line, role, kind, raw_type, uuid, parent, ts, model, call_index, blocks_json, data_json in rows.iterator(
        chunk_size=2000
    ):
        if session.format == "claude-code" and kind == "bookkeeping":
            continue
        data = orjson.loads(data_json)
        data["seq"] = seq
        messages.append(
            Message(
                line=line,
                role=role,
                kind=kind,
                agent=agent,
                blocks=[
                    Block(
                        kind=b.get("kind", "text"),
                        text=b.get("text", ""),
                        tool_id=b.get("tool_id"),
                        tool_name=b.get("tool_name"),
                        is_error=bool(b.get("is_error")),
                        media_type=b.get("media_type"),
                    )
                    for b in orjson.loads(blocks_json)
                ],
                uuid=uuid or None,
                parent_uuid=parent or None,
                timestamp=ts.isoformat() if ts else None,
                model=model or None,
                call_key=str(call_index) if call_index is not None else None,
                usage=usage_by_call.get(call_index) if call_index is not None else None,
                raw_type=raw_type,
                data=data,
            )
        )
    return messages
