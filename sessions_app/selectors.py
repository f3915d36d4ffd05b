"""Reads: every query the views and commands need, with a fixed number of queries each."""

from __future__ import annotations

import bisect
import gc
import io
import logging
import pickle
import re
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson
import zstandard
from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Case, Count, F, Max, Min, Q, QuerySet, Value, When, Window
from django.db.models.expressions import OrderBy, RawSQL
from django.db.models.functions import RowNumber, Substr
from django.utils import timezone

from compaction.calls import Peak, peak_of
from compaction.composition import (
    PART_KINDS,
    Inferred,
    PlacedEvent,
    composition,
    compositions,
    infer_unlogged,
    part_kind,
)
from compaction.costs import call_cost
from compaction.formats.context_records import conversation_keeps_bookkeeping
from compaction.prompt_cache import CachePolicy, read_cache
from compaction.stats import (
    LISTED_EVENT_KINDS,
    ListedEvent,
    SessionStats,
    embedded_response,
    tally_session,
)
from compaction.transcript import (
    MAIN,
    ApiCall,
    Block,
    ContextEvent,
    EventKind,
    Kind,
    Message,
    RecordPickler,
    Role,
    SessionInfo,
    Usage,
)
from sessions_app import models
from sessions_app.search_text import FTS_TABLE, TSV_TABLE
from sessions_app.templatetags.search import terms

if TYPE_CHECKING:
    from compaction.replay import AfterCall
    from compaction.transforms import ToolCap

logger = logging.getLogger(__name__)

SORTS: dict[str, str | OrderBy] = {
    "date": "-started_at",
    "-date": "started_at",
    "size": "-size_bytes",
    "-size": "size_bytes",
    "peak": "-peak_context",
    "-peak": "peak_context",
    "calls": "-api_calls_main",
    # Sessions without a price sort last either way (PostgreSQL puts NULL first in descending order).
    "cost": F("cost_usd").desc(nulls_last=True),
    "-cost": F("cost_usd").asc(nulls_last=True),
}
PER_PAGE = 50
TRANSCRIPT_PAGE = 100  # records per transcript page: bounded work per request, whatever the session's length
TRUNCATE_CHARS = 2000  # longer block text is cut, with a "show all" link
# A record with more text than this is never loaded whole for a transcript page: only the head of its stored
# JSON is read (in the database), so a page of giant records costs what a page of small ones does.
LOAD_WHOLE_CHARS = 200_000
_HEAD_BYTES = 4 * TRUNCATE_CHARS + 500


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


@dataclass(frozen=True, slots=True)
class Snippet:
    """A stretch of a record's text around a match, in three parts so a template escapes each and marks the match."""

    before: str
    match: str
    after: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: int
    agent: str
    seq: int
    kind: str
    snippet: Snippet


@dataclass(slots=True)
class SessionHits:
    session: models.Session
    matches: int  # records of the session that match
    hits: list[SearchHit]  # the first few, with snippets


SNIPPET_CHARS = 80  # on each side of the match
MATERIALIZED_IDS = 100_000  # matching record ids handed to the other queries as one parameter (about 1 MB)


def matching_messages(*, q: str, session: models.Session | None = None) -> QuerySet[models.Message]:
    """Records whose readable text (search_text.py: never JSON keys) matches ``q`` (of one session if given).

    Both databases read web-search syntax (words, "quoted phrase", -word, or) over an index of words:
    PostgreSQL a GIN-indexed table of the words of ``search_text`` per record (migration 0016;
    a large import's records join it when the task worker has indexed them: ``search_pending``), SQLite an
    FTS5 index of the same column (migration 0015). A query that is one quoted phrase means the same on both:
    the index finds the records holding its words, and the phrase is then matched as text over those few
    candidates (on PostgreSQL a regular expression, about 10 times cheaper than re-parsing each record
    into a tsvector to check word positions).
    """
    qs = models.Message.objects.all()
    stripped = q.strip()
    phrase = stripped[1:-1] if len(stripped) > 2 and stripped[0] == stripped[-1] == '"' else ""
    if connection.vendor == "postgresql":
        query = tsquery(phrase or q)
        if query is None:
            return qs.none()
        where, params = f"t.tsv @@ ({query[0]})", list(query[1])
        table = models.Message._meta.db_table
        found = f"SELECT t.id FROM {TSV_TABLE} t WHERE {where}"  # noqa: S608  (our table names; q is a parameter)
        if phrase:
            found = (
                f"SELECT t.id FROM {TSV_TABLE} t JOIN {table} m ON m.id = t.id "  # noqa: S608
                f"WHERE {where} AND m.search_text ~* %s"
            )
            params.append(re.escape(phrase))  # escapes only punctuation, which PostgreSQL's regex reads as literal
        with connection.cursor() as cursor:
            cursor.execute(f"{found} LIMIT {MATERIALIZED_IDS + 1}", params)
            ids = [row[0] for row in cursor.fetchall()]
        # OFFSET 0 keeps the subquery planned on its own (see below).
        direct = qs.filter(pk__in=RawSQL(f"{found} OFFSET 0", params))
    else:
        expression = fts5_query(phrase or q)
        if expression is None:
            return qs.none()
        direct = qs.filter(pk__in=RawSQL(f"SELECT rowid FROM {FTS} WHERE {FTS} MATCH %s", [expression]))
        if phrase:
            direct = direct.filter(search_text__icontains=phrase)
        if session is not None:
            direct = direct.filter(session=session)
        ids = list(direct.values_list("id", flat=True)[: MATERIALIZED_IDS + 1])
    # The text is matched once, here, and its ids handed to the page's other queries (counts, snippets, the
    # list): each used to match the text again (four scans of the column on SQLite). On PostgreSQL it also
    # keeps the GIN index first: flattened into a query that filters by session, PostgreSQL (its row
    # estimates stale after a large import) walked the session's records and re-parsed the text of each
    # (2.5 s for the 53 MB session). Past MATERIALIZED_IDS matches the match stays in SQL.
    if len(ids) > MATERIALIZED_IDS:
        return direct
    if connection.vendor == "postgresql":
        return qs.filter(pk__in=RawSQL("SELECT unnest(%s::bigint[])", [ids]))
    # One JSON parameter, not one per id (SQLite allows 32,766 parameters per statement).
    return qs.filter(pk__in=RawSQL("SELECT value FROM json_each(%s)", [orjson.dumps(ids).decode()]))


FTS = FTS_TABLE  # SQLite's FTS5 index of Message.search_text (migration 0015)
_FTS_ITEM = re.compile(r'(-?)"([^"]*)"?|(\S+)')


SEARCH_PENDING_SHOWN = 20  # sessions named as still being indexed


def search_pending(*, filters: SessionFilters | None = None) -> list[models.Session]:
    """Sessions (within the list's filters, if given) whose records are not all in the search index yet: the task
    worker indexes a large import after it (services ``index_search``). Their records that are not indexed yet
    cannot be found."""
    scope = session_list(filters=replace(filters, q="")) if filters is not None else models.Session.objects.all()
    return list(scope.filter(search_ready=False).order_by("-id")[:SEARCH_PENDING_SHOWN])


def search_items(q: str) -> tuple[list[list[str]], list[str]]:
    """Web-search syntax read once for both databases: words and "phrases" all required, ``or`` between two of
    them for either, ``-word`` or ``-"phrase"`` excluded. Returns the ANDed groups of ORed items, and the
    excluded items; an item without a letter or digit is dropped (no index finds a word in it)."""
    groups: list[list[str]] = []  # ANDed groups of ORed items
    excluded: list[str] = []
    either = False
    for minus, quoted, bare in _FTS_ITEM.findall(q):
        text = bare or quoted
        if bare and bare.lower() == "or":
            either = bool(groups)
            continue
        negated = bool(minus) or (bare.startswith("-") and len(bare) > 1)
        if bare.startswith("-"):
            text = bare[1:]
        if not any(ch.isalnum() for ch in text):
            continue  # punctuation alone: FTS5 finds no word in it
        if negated:
            excluded.append(text)
        elif either:
            groups[-1].append(text)
        else:
            groups.append([text])
        either = False
    return groups, excluded


def fts5_query(q: str) -> str | None:
    """``q`` (``search_items``) as an FTS5 query. Every item goes in quotes, so nothing the user types is FTS5
    syntax. None when there is no word to look for."""
    groups, excluded = search_items(q)
    if not groups:
        return None

    def quoted(item: str) -> str:
        return '"' + item.replace('"', '""') + '"'

    expression = " AND ".join(f"({' OR '.join(map(quoted, g))})" if len(g) > 1 else quoted(g[0]) for g in groups)
    return f"({expression}) NOT ({' OR '.join(map(quoted, excluded))})" if excluded else expression


_NOT_WORD = re.compile(r"[\W_]+")


def tsquery(q: str) -> tuple[str, list[str]] | None:
    """``q`` (``search_items``) as a PostgreSQL tsquery expression and its parameters, over the index's words
    (migration 0016: punctuation separates words, as in FTS5): each item is the phrase of its words."""
    groups, excluded = search_items(q)
    if not groups:
        return None
    params: list[str] = []

    def phrase(item: str) -> str:
        params.append(_NOT_WORD.sub(" ", item))
        return "phraseto_tsquery('simple'::regconfig, %s)"

    expression = " && ".join("(" + " || ".join(phrase(i) for i in g) + ")" for g in groups)
    if excluded:
        expression = f"({expression}) && !!(" + " || ".join(phrase(i) for i in excluded) + ")"
    return expression, params


def snippet(text: str, q: str) -> Snippet:
    """The text around the first occurrence of the phrase, else of its longest word found, else its start."""
    lowered = text.lower()
    for needle in terms(q):
        at = lowered.find(needle.lower()) if needle else -1
        if at >= 0:
            end = at + len(needle)
            start = max(0, at - SNIPPET_CHARS)
            return Snippet(
                ("…" if start else "") + text[start:at],
                text[at:end],
                text[end : end + SNIPPET_CHARS] + ("…" if end + SNIPPET_CHARS < len(text) else ""),
            )
    return Snippet("", "", text[: 2 * SNIPPET_CHARS])


def _hits(qs: QuerySet[models.Message], q: str, limit: int) -> list[SearchHit]:
    rows = qs.order_by("seq").values_list("session_id", "agent", "seq", "kind", "search_text")[:limit]
    return [SearchHit(sid, agent, seq, kind, snippet(text, q)) for sid, agent, seq, kind, text in rows]


def search_sessions(
    *,
    filters: SessionFilters,
    sessions: int = 20,
    hits_per_session: int = 3,
    matching: QuerySet[models.Message] | None = None,
) -> list[SessionHits]:
    """Full-text search over every session's records, grouped by session, within the list's other filters."""
    if not filters.q.strip():
        return []
    scope = session_list(filters=replace(filters, q=""))
    if matching is None:
        matching = matching_messages(q=filters.q)
    matching = matching.filter(session__in=scope.values("pk"))
    counts = list(matching.values("session_id").annotate(n=Count("id")).order_by("-n", "session_id")[:sessions])
    by_id = models.Session.objects.in_bulk([c["session_id"] for c in counts])
    # The first few records of every listed session in one query (not one per session).
    first = (
        matching.filter(session_id__in=list(by_id))
        .annotate(rank=Window(RowNumber(), partition_by=F("session_id"), order_by=F("seq").asc()))
        .filter(rank__lte=hits_per_session)
    )
    hits: dict[int, list[SearchHit]] = {}
    for hit in _hits(first, filters.q, len(by_id) * hits_per_session):
        hits.setdefault(hit.session_id, []).append(hit)
    return [
        SessionHits(session=by_id[c["session_id"]], matches=c["n"], hits=hits.get(c["session_id"], [])) for c in counts
    ]


def search_session(*, session: models.Session, q: str, limit: int = 200) -> list[SearchHit]:
    """Every agent's matching records of one session (main chain and subagents), in session order."""
    if not q.strip():
        return []
    return _hits(matching_messages(q=q, session=session).filter(session=session), q, limit)


def session_list(
    *, filters: SessionFilters, matching: QuerySet[models.Message] | None = None
) -> QuerySet[models.Session]:
    """The sessions the filters select; ``matching``: matching_messages(q=filters.q) when the caller has it."""
    # A title-only file whose title went to the conversation it names is not a session of its own.
    qs = models.Session.objects.exclude(info__has_key="title_attached_to")
    if filters.q:
        # Metadata or the text of any record (full-text, see matching_messages).
        qs = qs.filter(
            Q(title__icontains=filters.q)
            | Q(external_id__icontains=filters.q)
            | Q(project__icontains=filters.q)
            | Q(files__path__icontains=filters.q)
            | Q(pk__in=(matching if matching is not None else matching_messages(q=filters.q)).values("session_id"))
        ).distinct()
    if filters.format:
        qs = qs.filter(format=filters.format)
    if filters.project:
        qs = qs.filter(project=filters.project)
    if filters.model:
        qs = qs.filter(model=filters.model)
    # Dates as a range of the indexed column (days in the current time zone): ``started_at__date`` cast every row's
    # value (on SQLite a Python function per row: 0.4 s over 10,000 sessions, bench/list_bench.py).
    if filters.since:
        qs = qs.filter(started_at__gte=_day_start(filters.since))
    if filters.until:
        qs = qs.filter(started_at__lt=_day_start(filters.until + timedelta(days=1)))
    if filters.has_compaction:
        qs = qs.filter(has_compaction=True)
    if filters.overflowed:
        qs = qs.filter(overflowed=True)
    if filters.compaction_failed:
        qs = qs.filter(compaction_failed=True)
    order = SORTS.get(filters.sort, SORTS["date"])
    return qs.order_by(order, "-id")


def _day_start(day: date) -> datetime:
    """Midnight starting ``day`` in the current time zone (what ``__date`` compares in)."""
    return timezone.make_aware(datetime.combine(day, dt_time.min), timezone.get_current_timezone())


def session_page(
    *, filters: SessionFilters, page: int | str | None, matching: QuerySet[models.Message] | None = None
) -> Page:
    return Paginator(session_list(filters=filters, matching=matching), PER_PAGE).get_page(page)


def peak_bands(*, sessions: list[models.Session]) -> dict[int, dict[str, int | None]]:
    """Each session's warning and compaction thresholds, by its own strategy: the bands its peak bar is coloured by
    (no query: the strategy reads the session's stored info)."""
    bands: dict[int, dict[str, int | None]] = {}
    for session in sessions:
        t = thresholds_for(session=session)
        bands[session.pk] = {"warning": t["warning"], "autocompact": t["autocompact"]}
    return bands


# Without an agent line to compare with, a peak bar warns from these fractions of the window: a display choice
# of this dashboard (no agent defines them), kept near where the agents that do have lines put them.
PEAK_WARN_FRACTION = 0.8
PEAK_DANGER_FRACTION = 0.92


def peak_level(*, session: models.Session, bands: dict[str, int | None] | None = None) -> str:
    """ "ok", "warn" or "danger": how full the session's peak got, against its own agent's warning and compaction
    lines when it has them (else fractions of the window). The class every peak bar and gauge is coloured by."""
    peak, window = session.peak_context or 0, session.window or 0
    if bands is None:
        t = thresholds_for(session=session)
        bands = {"warning": t["warning"], "autocompact": t["autocompact"]}
    danger = bands.get("autocompact") or (window * PEAK_DANGER_FRACTION if window else None)
    warn = bands.get("warning") or (window * PEAK_WARN_FRACTION if window else None)
    if (danger and peak >= danger) or (window and peak >= window):
        return "danger"
    if warn and peak >= warn:
        return "warn"
    return "ok"


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


# The columns of a stored call (``models.ApiCall``) that ``neutral_call`` reads, in the order it takes them.
CALL_FIELDS = (
    "agent",
    "number",
    "key",
    "line",
    "model",
    "input_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "output_tokens",
    "cache_creation_1h_tokens",
)


def neutral_call(
    agent: str,
    number: int,
    key: str,
    line: int,
    model: str,
    input_tokens: int,
    cache_creation_tokens: int,
    cache_read_tokens: int,
    output_tokens: int,
    cache_creation_1h_tokens: int,
    timestamp: datetime | None = None,
) -> ApiCall:
    """A stored call (the ``CALL_FIELDS`` of a ``models.ApiCall`` row, and its timestamp where the reader needs
    it) as the core's one call type, ``compaction.transcript.ApiCall``: the one place storage becomes a call.

    The stored ``context`` column is not read: it is ``usage.context``, as the importer wrote it.
    """
    return ApiCall(
        agent=agent,
        number=number,
        key=key,
        line=line,
        usage=Usage(input_tokens, cache_creation_tokens, cache_read_tokens, output_tokens, cache_creation_1h_tokens),
        model=model or None,
        timestamp=timestamp.isoformat() if timestamp else None,
    )


def session_stats(*, session: models.Session) -> SessionStats:
    """The statistics of a stored session, by the one definition in ``compaction.stats`` (two queries)."""
    calls = (
        neutral_call(*row)
        for row in models.ApiCall.objects.filter(session=session).order_by().values_list(*CALL_FIELDS).iterator()
    )
    # Subagent responses known only from agent_progress lines (compaction.stats.embedded_response).
    embedded = (
        response
        for data_json in models.Message.objects.filter(
            session=session, raw_type="progress", data_json__contains='"response"'
        ).values_list("data_json", flat=True)
        if (
            response := embedded_response(
                Message(line=0, role="meta", kind="bookkeeping", data=orjson.loads(data_json))
            )
        )
        is not None
    )
    events = listed_events(
        models.ContextEvent.objects.filter(session=session, kind__in=LISTED_EVENT_KINDS).order_by("seq", "id")
    )
    # The calls of agents that recorded no usage: their model replies (compaction.calls.CallTracker).
    with_usage = set(models.ApiCall.objects.filter(session=session).values_list("agent", flat=True).distinct())
    responses = {agent: len(points) for agent, points in _calls_without_usage(session, skip=with_usage).items()}
    return tally_session(
        calls=calls, events=events, prices=settings.MODEL_PRICES, embedded=embedded, responses=responses
    )


def listed_events(rows: Iterable[models.ContextEvent]) -> Iterator[ListedEvent]:
    """Event rows (stored, or an import's about to be) as the statistics list them, in the order given."""
    return (
        ListedEvent(
            kind=e.kind,
            agent=e.agent,
            trigger=e.trigger or None,
            pre_tokens=e.pre_tokens,
            tokens_saved=e.tokens_saved,
            after_call=e.after_call,
            line=e.line,
        )
        for e in rows
    )


def read_raw(*, file: models.SourceFile) -> Iterator[bytes]:
    """The original bytes of a stored file, in order."""
    zstd = zstandard.ZstdDecompressor()
    for chunk in models.RawChunk.objects.filter(file=file).order_by("index").iterator():
        data = bytes(chunk.data)
        # zstd frames since 2026-11-30, zlib streams before: a zstd frame starts with its magic number, which no
        # zlib stream does (its first byte is 0x78 for the window size every zlib writer here used).
        yield zstd.decompress(data) if data.startswith(zstandard.FRAME_HEADER) else zlib.decompress(data)


# ---------------------------------------------------------------------------------------------
# Session page


@dataclass(slots=True)
class AgentSummary:
    agent: str
    messages: int
    calls: int
    peak: int
    depth: int = 0  # spawn depth: 0 for the main chain, 1 for what it started, ...
    spawn: SubagentSpawn | None = None


def agents(*, session: models.Session) -> list[AgentSummary]:
    """Main chain first, then the subagents as a tree by spawn (each under the agent that started it, in spawn
    order; subagents whose spawn is unknown last), each with its size (four queries)."""
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
    spawns = subagent_spawns(session=session)
    children: dict[str, list[str]] = {}
    for spawn in sorted(spawns.values(), key=lambda sp: sp.seq):
        if spawn.agent in counts and spawn.parent != spawn.agent:
            children.setdefault(spawn.parent, []).append(spawn.agent)
    ordered: list[tuple[str, int]] = []
    seen: set[str] = set()

    def visit(agent: str, depth: int) -> None:
        if agent in seen:
            return  # a malformed file naming its own ancestor as its child: listed once
        seen.add(agent)
        ordered.append((agent, depth))
        for child in children.get(agent, []):
            visit(child, depth + 1)

    if MAIN in counts:
        visit(MAIN, 0)
    for agent, _ in sorted(counts.items(), key=lambda kv: (kv[0] != MAIN, kv[1]["first"])):
        visit(agent, 0 if agent == MAIN else 1)
    result = []
    for agent, depth in ordered:
        c = calls.get(agent, {"n": 0, "peak": 0})
        result.append(
            AgentSummary(
                agent=agent,
                messages=counts[agent]["n"],
                calls=c["n"],
                peak=c["peak"] or 0,
                depth=depth,
                spawn=spawns.get(agent),
            )
        )
    return result


@dataclass(frozen=True, slots=True)
class SubagentSpawn:
    """Where a subagent was started: the Task/Agent call of its parent agent that its result names."""

    agent: str
    parent: str  # the agent whose call started it ("main" or another subagent)
    tool_id: str
    seq: int  # the record holding the call
    after_call: int  # calls of the parent up to the record holding the call (its own response's call included)

    # The Task/Agent call sits in the response of the parent's call ``after_call``: that call's number.
    description: str
    subagent_type: str

    @property
    def call(self) -> int:
        """The parent's call whose response holds the Task/Agent call."""
        return self.after_call


def subagent_spawns(*, session: models.Session) -> dict[str, SubagentSpawn]:
    """Each subagent's spawn point, by agent id (two queries).

    A Task/Agent call carries a tool id; its tool result names the subagent (``toolUseResult.agentId``, stored
    as ``agentId`` in the record's data), so the two meet on the tool id.
    """
    agent_of_tool: dict[str, str] = {}
    for blocks_json, data_json in models.Message.objects.filter(
        session=session, kind="tool_result", data_json__contains='"agentId"'
    ).values_list("blocks_json", "data_json"):
        agent_id = orjson.loads(data_json).get("agentId")
        if isinstance(agent_id, str):
            for block in orjson.loads(blocks_json):
                if block.get("kind") == "tool_result" and block.get("tool_id"):
                    agent_of_tool[block["tool_id"]] = agent_id
    spawns: dict[str, SubagentSpawn] = {}
    for event in models.ContextEvent.objects.filter(session=session, kind="subagent_spawn"):
        agent_id = agent_of_tool.get(event.data.get("tool_id") or "")
        if agent_id is not None:
            spawns[agent_id] = SubagentSpawn(
                agent=agent_id,
                parent=event.agent,
                tool_id=event.data["tool_id"],
                seq=event.seq,
                after_call=event.after_call,
                description=event.data.get("description") or "",
                subagent_type=event.data.get("subagent_type") or "",
            )
    return spawns


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
    subagent: str = ""  # a Task/Agent call: the subagent it started
    markdown: bool = False  # text a model wrote (a reply, a summary): rendered as markdown


def _markdown_block(*, role: str, kind: str, block: RenderedBlock) -> bool:
    """Models write markdown in their replies and summaries; prompts, tool text and thinking stay as typed."""
    return block.kind == "text" and (role == "assistant" or kind == "compact_summary")


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
    call_number: int | None
    context: int | None
    blocks: list[RenderedBlock]
    results: list[RenderedMessage]  # tool results paired under this message's tool calls
    raw: str
    tokens: int | None
    events: list[models.ContextEvent]
    tokens_method: str = ""  # "tiktoken", or "chars/4" for a record too long for tiktoken
    blank: bool = False  # every block was whitespace: not shown unless it carries an event

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
    # matching_messages matched the text once and hands over ids: nothing here matches text row by row.
    base = matching_messages(q=q, session=session) if q else models.Message.objects.all()
    qs = base.filter(session=session, agent=agent).exclude(kind="bookkeeping")
    qs = (
        qs.order_by("seq")
        .defer("data_json", "blocks_json")
        .annotate(
            blocks_whole=Case(When(chars__lte=LOAD_WHOLE_CHARS, then=F("blocks_json")), default=Value(None)),
            blocks_head=Case(
                When(chars__gt=LOAD_WHOLE_CHARS, then=Substr("blocks_json", 1, _HEAD_BYTES)), default=Value(None)
            ),
        )
    )
    paginator = Paginator(qs, TRANSCRIPT_PAGE)
    page_obj = paginator.get_page(page)
    rows = list(page_obj.object_list)
    contexts = dict(
        models.ApiCall.objects.filter(
            session=session, agent=agent, number__in={r.call_number for r in rows if r.call_number is not None}
        ).values_list("number", "context")
    )
    rendered = [_render_message(r, contexts) for r in rows]
    if rows:
        by_seq = {m.seq: m for m in rendered}
        for event in models.ContextEvent.objects.filter(
            session=session, agent=agent, seq__gte=rows[0].seq, seq__lte=rows[-1].seq
        ):
            if event.seq in by_seq:
                by_seq[event.seq].events.append(event)
    if any(e.kind == "subagent_spawn" for m in rendered for e in m.events):
        # The page starts subagents: its spawning calls link to their transcripts.
        agent_of_tool = {sp.tool_id: sp.agent for sp in subagent_spawns(session=session).values()}
        for m in rendered:
            for block in m.blocks:
                if block.kind == "tool_use":
                    block.subagent = agent_of_tool.get(block.tool_id, "")
    # Pair tool results with the call on the same page; results whose call is elsewhere stay in place.
    by_tool: dict[str, RenderedMessage] = {}
    for m in rendered:
        for b in m.blocks:
            if b.kind == "tool_use" and b.tool_id:
                by_tool[b.tool_id] = m
    shown: list[RenderedMessage] = []
    for m in rendered:
        if m.blank and not m.events:
            continue  # an empty card says nothing
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
    page_obj.object_list = shown  # type: ignore[assignment]  # rendered rows replace the model rows
    return page_obj


def _render_message(row: models.Message, contexts: dict[int, int]) -> RenderedMessage:
    """The record as shown, whitespace-only text and thinking blocks left out."""
    blocks = _blocks_of(row)
    shown = [b for b in blocks if b.kind not in ("text", "thinking") or b.text.strip()]
    for b in shown:
        b.markdown = _markdown_block(role=row.role, kind=row.kind, block=b)
    return RenderedMessage(
        blank=bool(blocks) and not shown,
        seq=row.seq,
        line=row.line,
        role=row.role,
        kind=row.kind,
        raw_type=row.raw_type,
        agent=row.agent,
        timestamp=row.timestamp,
        model=row.model,
        call_number=row.call_number,
        context=contexts.get(row.call_number) if row.call_number is not None else None,
        blocks=shown,
        results=[],
        raw=row.raw[:TRUNCATE_CHARS],
        tokens=row.tokens,
        tokens_method=row.tokens_method,
        events=[],
    )


def _blocks_of(row: models.Message) -> list[RenderedBlock]:
    whole = getattr(row, "blocks_whole", None)
    head = getattr(row, "blocks_head", None)
    if whole is None and head is not None:
        return [_head_block(head, chars=row.chars)]
    return [render_block(i, b) for i, b in enumerate(orjson.loads(whole if whole is not None else row.blocks_json))]


_HEAD_FIELD = re.compile(r'"(kind|tool_id|tool_name)":"((?:[^"\\]|\\.)*)"')
_HEAD_TEXT = re.compile(r'"text":"')


def _head_block(head: str, *, chars: int) -> RenderedBlock:
    """The first block of a giant record, from the head of its stored JSON: its kind and the start of its text
    ("show all" loads the whole block on request)."""
    fields = {name: value for name, value in _HEAD_FIELD.findall(head.split('"text":"', 1)[0])}
    text = ""
    found = _HEAD_TEXT.search(head)
    if found:
        rest = head[found.end() :]
        end = re.search(r'(?<!\\)(?:\\\\)*"', rest)
        rest = rest[: end.start() + len(end.group()) - 1] if end else rest
        for cut in range(8):  # the head may end inside an escape sequence: drop its last characters
            try:
                text = orjson.loads(f'"{rest[: len(rest) - cut]}"')
                break
            except orjson.JSONDecodeError:
                continue
    return RenderedBlock(
        index=0,
        kind=fields.get("kind", "text"),
        text=text[:TRUNCATE_CHARS],
        truncated=True,
        full_chars=chars,
        tool_id=fields.get("tool_id", ""),
        tool_name=fields.get("tool_name", ""),
        is_error=False,
        media_type="",
    )


def page_of_message(*, session: models.Session, agent: str, seq: int) -> int:
    """The transcript page that holds record ``seq`` (for permalinks)."""
    before = (
        models.Message.objects.filter(session=session, agent=agent, seq__lt=seq).exclude(kind="bookkeeping").count()
    )
    return before // TRANSCRIPT_PAGE + 1


def message_block(*, session: models.Session, seq: int, index: int) -> RenderedBlock:
    row = models.Message.objects.only("blocks_json", "role", "kind").get(session=session, seq=seq)
    blocks = orjson.loads(row.blocks_json)
    if not 0 <= index < len(blocks):
        raise models.Message.DoesNotExist(f"message {seq} has no block {index}")
    block = render_block(index, blocks[index], full=True)
    block.markdown = _markdown_block(role=row.role, kind=row.kind, block=block)
    return block


def compaction_summaries(*, session: models.Session) -> QuerySet[models.Message]:
    return models.Message.objects.filter(session=session, kind="compact_summary").order_by("seq")


def line_issues(*, session: models.Session, limit: int = 200) -> list[models.LineIssue]:
    return list(models.LineIssue.objects.filter(session=session)[:limit])


def unknown_records(*, session: models.Session, limit: int = 200) -> list[models.Message]:
    if not session.unknown_records:
        return []  # the stored count says there are none: no scan of the session's records (every page view)
    return list(
        models.Message.objects.filter(session=session, kind="unknown").only("seq", "line", "raw_type", "raw", "agent")[
            :limit
        ]
    )


# ---------------------------------------------------------------------------------------------
# The neutral model, read back for strategies, replay and diagnosis


def session_info(*, session: models.Session) -> SessionInfo:
    return session.agent_info()


def _block(b: dict[str, Any]) -> Block:
    """A stored block (services ``_encode``: keys of empty values left out) as a ``Block``. Positional and
    inline: this runs for every block of every record of a conversation read back."""
    kind = b.get("kind", "text")
    text = b.get("text", "")
    tool_input = None
    if kind == "tool_use" and text:
        try:
            tool_input = orjson.loads(text)
        except orjson.JSONDecodeError:
            tool_input = text
    return Block(
        kind, text, b.get("tool_id"), b.get("tool_name"), tool_input, bool(b.get("is_error")), b.get("media_type")
    )


# The last few sessions read back as neutral messages, per process: a reviewer tweaking preview
# parameters re-reads the same session many times. Keyed by the session's last change, so an
# import that adds lines is never served stale.
_CONVERSATIONS: dict[tuple[int, str, Any, int], list[Message]] = {}
_CONVERSATIONS_KEPT = 2
_CONVERSATIONS_LOCK = threading.Lock()  # request threads share the cache


_PAUSES = 0
_PAUSES_LOCK = threading.Lock()


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while a pure analysis of a session runs.

    The sessions kept above are large, long-lived object graphs: a full collection walks all of them (about
    0.1 s for a 50 MB session). An analysis allocates enough temporaries to trigger one on every other
    request, though its temporaries hold no reference cycles and are freed by reference counting anyway.
    """
    global _PAUSES
    with _PAUSES_LOCK:
        if _PAUSES == 0 and not gc.isenabled():
            owner = False  # someone else turned collection off: leave it as found
        else:
            owner = True
            _PAUSES += 1
            gc.disable()
    try:
        yield
    finally:
        if owner:
            with _PAUSES_LOCK:
                _PAUSES -= 1
                if _PAUSES == 0:
                    gc.enable()


def conversation(*, session: models.Session, agent: str = MAIN) -> list[Message]:
    """The records of one agent as neutral ``Message``s, in order, with each call's recorded usage.

    Unknown records are left out (they never reach a model); for klaude-code every history item
    stays, so list positions equal klaude's own indices. ``Message.data["row_seq"]`` holds the stored seq
    (``data["seq"]`` stays the agent's own, e.g. a KHAELOR event seq). Callers must not mutate the result.
    """
    key = (session.pk, agent, session.updated_at, session.message_count)
    with _CONVERSATIONS_LOCK:
        cached = _CONVERSATIONS.get(key)
    if cached is not None:
        return cached
    # Tens of thousands of objects that hold no cycles: a full collection in the middle cost a first read 0.09 s.
    with cycle_collection_paused():
        stored = stored_conversation(session=session) if agent == MAIN else None
        messages = stored if stored is not None else _read_conversation(session=session, agent=agent)
    with _CONVERSATIONS_LOCK:
        while len(_CONVERSATIONS) >= _CONVERSATIONS_KEPT:
            _CONVERSATIONS.pop(next(iter(_CONVERSATIONS)))
        _CONVERSATIONS[key] = messages
    return messages


# What is computed from a cached conversation once, not per request: its "after call N" points, which every preview
# asks for (``after_calls``: 40 ms of a 120 ms warm preview of the 53 MB session, bench/README.md pages item 11).
# Keyed by the list's identity; the entry holds the list, so the key cannot be reused while it lives, and the entries
# of a list no longer cached are dropped.
_DERIVED: dict[tuple[int, str], tuple[list[Message], Any]] = {}


def after_calls_of(messages: list[Message]) -> list[AfterCall]:
    """``compaction.replay.after_calls(messages)``, computed once per conversation ``conversation`` keeps cached
    (any other list is computed each time). Callers must not mutate the result."""
    from compaction.replay import after_calls

    key = (id(messages), "after_calls")
    with _CONVERSATIONS_LOCK:
        found = _DERIVED.get(key)
        cached = any(kept is messages for kept in _CONVERSATIONS.values())
    if found is not None and found[0] is messages and cached:
        return cast("list[AfterCall]", found[1])
    points = after_calls(messages)
    if cached:
        with _CONVERSATIONS_LOCK:
            live = {id(kept) for kept in _CONVERSATIONS.values()}
            for stale in [k for k, (kept, _) in _DERIVED.items() if id(kept) not in live]:
                del _DERIVED[stale]
            _DERIVED[key] = (messages, points)
    return points


class _ConversationUnpickler(pickle.Unpickler):
    """Loads a stored main chain and nothing else: the only classes such a pickle names are the record types
    (the Python documentation's "Restricting Globals"), so a tampered row cannot make it run code."""

    _ALLOWED: dict[tuple[str, str], Any] = {
        ("compaction.transcript", "Message"): Message,
        ("compaction.transcript", "Block"): Block,
        ("compaction.transcript", "Usage"): Usage,
    }

    def find_class(self, module: str, name: str) -> Any:
        found = self._ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"a stored conversation names {module}.{name}, which it never holds")
        return found


def dump_conversation(messages: list[Message]) -> bytes:
    """The main chain as ``SessionAnalysis.conversation`` keeps it (``stored_conversation`` loads it back)."""
    return zstandard.ZstdCompressor(level=1).compress(RecordPickler.dumps(messages))


# What a stored main chain that is not the worker's (cut short, tampered, of an older layout) raises as it loads.
_UNLOADABLE = (
    pickle.UnpicklingError,
    zstandard.ZstdError,
    EOFError,
    AttributeError,
    TypeError,
    ValueError,
    MemoryError,
    RecursionError,
)


def stored_conversation(*, session: models.Session) -> list[Message] | None:
    """The main chain the worker stored with this version's analysis (``conversation(agent=MAIN)`` as it was read
    then), or None: no analysis of this version yet, or a row that does not load (then the rows are read)."""
    blob = (
        models.SessionAnalysis.objects.filter(session=session, message_count=session.message_count)
        .values_list("conversation", flat=True)
        .first()
    )
    if blob is None:
        return None
    try:
        loaded = _ConversationUnpickler(io.BytesIO(zstandard.ZstdDecompressor().decompress(bytes(blob)))).load()
    except _UNLOADABLE as exc:
        logger.warning("session %s: its stored conversation does not load (%s); reading its records", session.pk, exc)
        return None
    if not isinstance(loaded, list) or not all(isinstance(m, Message) for m in loaded):
        logger.warning("session %s: its stored conversation is not a list of records; reading its records", session.pk)
        return None
    return loaded


def _iso(value: Any) -> str | None:
    """A timestamp column as ISO-8601: SQLite returns naive UTC text, PostgreSQL an aware datetime."""
    if not value:
        return None
    if isinstance(value, str):
        return value.replace(" ", "T") + "+00:00"
    return value.isoformat()


def _read_conversation(*, session: models.Session, agent: str) -> list[Message]:
    usage_by_call = {
        number: Usage(inp, created, read, out, one_hour)
        for number, inp, created, read, out, one_hour in models.ApiCall.objects.filter(
            session=session, agent=agent
        ).values_list(
            "number",
            "input_tokens",
            "cache_creation_tokens",
            "cache_read_tokens",
            "output_tokens",
            "cache_creation_1h_tokens",
        )
    }
    # A plain cursor: the ORM's per-value converters cost more than the rest of the read here.
    table = connection.ops.quote_name(models.Message._meta.db_table)
    columns = (
        "seq, line, role, kind, raw_type, uuid, parent_uuid, timestamp, model, call_number, blocks_json, data_json"
    )
    skip_bookkeeping = not conversation_keeps_bookkeeping(session.format)
    messages: list[Message] = []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {table} WHERE session_id = %s AND agent = %s AND kind <> 'unknown' ORDER BY seq",
            [session.pk, agent],
        )
        while rows := cursor.fetchmany(2000):
            for seq, line, role, kind, raw_type, uuid, parent, ts, model, call_number, blocks_json, data_json in rows:
                if skip_bookkeeping and kind == "bookkeeping":
                    continue
                data = orjson.loads(data_json)
                data["row_seq"] = seq
                messages.append(
                    Message(
                        line=line,
                        role=cast(Role, role),
                        kind=cast(Kind, kind),
                        agent=agent,
                        blocks=[_block(b) for b in orjson.loads(blocks_json)],
                        uuid=uuid or None,
                        parent_uuid=parent or None,
                        timestamp=_iso(ts),
                        model=model or None,
                        call_key=str(call_number) if call_number is not None else None,
                        usage=usage_by_call.get(call_number) if call_number is not None else None,
                        raw_type=raw_type,
                        data=data,
                    )
                )
    return messages


# ---------------------------------------------------------------------------------------------
# Token timeline


def thresholds_for(*, session: models.Session, strategy: str | None = None) -> dict[str, Any]:
    """Threshold lines for the session's own agent, or for another strategy the user picked."""
    from compaction.strategies.registry import build_strategy

    name = strategy or session.format
    built = build_strategy(name, info=session_info(session=session), overrides={})
    t = built.thresholds(
        model=session.model or None, version=session.agent_version or None, observed_max=session.peak_context
    )
    return {
        "strategy": name,
        "window": t.window,
        "effective_window": t.effective_window,
        "autocompact": t.autocompact,
        "warning": t.warning,
        "blocking": t.blocking,
        "source": t.source,
        "assumption": t.assumption,
    }


def timeline(*, session: models.Session, strategy: str | None = None) -> dict[str, Any]:
    """Series (one per agent), markers and thresholds; a fixed number of queries whatever the session's size."""
    rows = list(
        models.ApiCall.objects.filter(session=session)
        .order_by("agent", "number")
        .values_list(*CALL_FIELDS, "timestamp", "seq", "context")
    )
    series: dict[str, list[dict[str, Any]]] = {}
    calls: dict[str, list[ApiCall]] = {}  # per agent, for the cache reading
    for row in rows:
        call = neutral_call(*row[:-2])  # CALL_FIELDS and the timestamp
        seq, context = row[-2:]
        usage = cast(Usage, call.usage)  # a stored call always has its usage
        model = row[4]  # as stored ("" when none): the point shows it so
        cost = call_cost(usage, model=model, overrides=settings.MODEL_PRICES)
        calls.setdefault(call.agent, []).append(call)
        series.setdefault(call.agent, []).append(
            {
                "call": call.number,
                "seq": seq,
                "context": context,
                "output": usage.output_tokens,
                "cache_read": usage.cache_read_input_tokens,
                "cache_creation": usage.cache_creation_input_tokens,
                "model": model,
                "timestamp": call.timestamp,
                "cost_usd": round(cost.total, 6) if cost is not None else None,
            }
        )
    estimates = estimated_series(session=session)
    events = list(models.ContextEvent.objects.filter(session=session).order_by("seq", "id"))
    markers = [_event_marker(e, series.get(e.agent, [])) for e in events]
    microcompacted: dict[str, list[int]] = {}
    for event in events:
        if event.kind == "microcompact":
            # The call whose prefix it changed: the first one after it (calls are numbered from 1).
            microcompacted.setdefault(event.agent, []).append(event.after_call + 1)
    from compaction.strategies.registry import cache_policy_for_format

    cache_policy = cache_policy_for_format(session.format)
    for agent, points in series.items():
        markers.extend(
            _derived_markers(
                agent, points, calls[agent], microcompacted=microcompacted.get(agent, []), policy=cache_policy
            )
        )
    markers.sort(key=lambda m: (m["seq"], m["kind"]))
    x_of = call_axis(
        series={**_calls_without_usage(session, skip=set(series)), **series}, spawns=subagent_spawns(session=session)
    )
    for agent, points in series.items():
        for point in points:
            point["x"] = x_of(agent, point["seq"])
    for marker in markers:
        marker["x"] = x_of(marker["agent"], marker["seq"])
    estimates = {agent: _one_per_x(points, agent=agent, x_of=x_of) for agent, points in estimates.items()}
    return {
        "session": session.pk,
        "format": session.format,
        "model": session.model,
        "x_axis": "call",  # main-chain API call number; a subagent's calls run on from its spawn call
        "series": series,
        "estimates": estimates,
        "estimates_ready": session.estimates_ready,
        # The one headline peak (the session's, ``compaction.calls.Peak``) and every event, in record order.
        "peak": session_peak(session=session).as_json(),
        "events": markers,
        "thresholds": thresholds_for(session=session, strategy=strategy),
        "cost": cumulative_cost(series),
    }


def _calls_without_usage(session: models.Session, *, skip: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The calls of agents that recorded no usage, numbered as ``compaction.replay.api_steps`` numbers them.

    One call per assistant record the model wrote (not the agent's own synthetic replies), so such a log's
    estimates and markers sit on the same call numbers as its composition and its call panel.
    """
    rows = (
        models.Message.objects.filter(session=session, kind="assistant")
        .exclude(agent__in=skip)
        .order_by("agent", "seq")
        .values_list("agent", "seq", "data_json")
    )
    calls: dict[str, list[dict[str, Any]]] = {}
    for agent, seq, data_json in rows.iterator(chunk_size=2000):
        if '"synthetic"' in data_json and orjson.loads(data_json).get("synthetic"):
            continue
        points = calls.setdefault(agent, [])
        points.append({"call": len(points) + 1, "seq": seq})
    return calls


def session_peak(*, session: models.Session) -> Peak:
    """The session's headline peak as stored by its import (``compaction.stats``) or, without usage, its estimates."""
    return Peak(call=session.peak_call, tokens=session.peak_context)


def estimated_peak(*, session: models.Session) -> Peak:
    """The main chain's peak by the estimates, on the call axis (a log without recorded usage has no other)."""
    points = estimated_series(session=session).get(MAIN, [])
    x_of = call_axis(series=_calls_without_usage(session, skip=set()), spawns={})
    return peak_of((x_of(MAIN, p["seq"]), p["estimate"]) for p in points)


def call_axis(
    *, series: dict[str, list[dict[str, Any]]], spawns: dict[str, SubagentSpawn]
) -> Callable[[str, int], int]:
    """Where a record of an agent sits on the timeline's x axis, in main-chain calls.

    A main-chain record sits at the call it belongs to or follows ("after call N"; 0 before the first call).
    A subagent runs while its spawning call waits for the Task result: its call j sits at the spawn call + j - 1,
    so its series starts at the spawn call, however deep (calls are numbered from 1, as everywhere). A subagent
    whose spawn is unknown starts after the main chain's last call.
    """
    seqs = {agent: [p["seq"] for p in points] for agent, points in series.items()}
    calls = {agent: [p["call"] for p in points] for agent, points in series.items()}
    start: dict[str, int] = {}

    def local_call(agent: str, seq: int) -> int:
        i = bisect.bisect_right(seqs.get(agent, []), seq) - 1
        return calls[agent][i] if i >= 0 else 0

    def origin(agent: str, visiting: frozenset[str]) -> int:
        if agent == MAIN:
            return 0
        if agent not in start:
            spawn = spawns.get(agent)
            if spawn is None or spawn.parent in visiting:
                start[agent] = calls.get(MAIN, [0])[-1] if calls.get(MAIN) else 0
            else:
                start[agent] = place(spawn.parent, spawn.seq, visiting | {agent})
        return start[agent]

    def place(agent: str, seq: int, visiting: frozenset[str] = frozenset()) -> int:
        call = local_call(agent, seq)
        if agent == MAIN:
            return call
        return origin(agent, visiting | {agent}) + max(call - 1, 0)

    return place


def _one_per_x(points: list[dict[str, Any]], *, agent: str, x_of: Callable[[str, int], int]) -> list[dict[str, Any]]:
    """Estimate points on the call axis: the first record at each call (its response), one point per x."""
    placed: list[dict[str, Any]] = []
    for point in points:
        x = x_of(agent, point["seq"])
        if not placed or placed[-1]["x"] != x:
            placed.append({**point, "x": x})
    return placed


def cumulative_cost(series: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The session's running cost over every agent's calls, in call-axis order (the timeline's cost line).

    Calls sharing a place on the axis (a subagent's beside the main chain's) fold into one point there.
    """
    calls = sorted((p for points in series.values() for p in points), key=lambda p: (p.get("x", 0), p["seq"]))
    total = 0.0
    points: list[dict[str, Any]] = []
    unpriced = 0
    for point in calls:
        if point["cost_usd"] is None:
            unpriced += 1
            continue
        total += point["cost_usd"]
        if points and "x" in point and points[-1]["x"] == point["x"]:
            points.pop()
        points.append({"seq": point["seq"], "x": point.get("x", point["seq"]), "cumulative_usd": round(total, 6)})
    return {"points": points, "total_usd": round(total, 6), "unpriced_calls": unpriced}


def estimated_series(*, session: models.Session) -> dict[str, list[dict[str, int]]]:
    """Per agent: the tiktoken estimate of the conversation so far at each record, reset at each compaction.

    Labelled an estimate everywhere: Claude's tokenizer is not public and the system prompt and tool
    schemas are invisible in the logs, so recorded usage always wins where it exists.
    """
    rows = (
        models.Message.objects.filter(session=session, tokens__isnull=False)
        .exclude(kind__in=["bookkeeping", "unknown"])
        .order_by("agent", "seq")
        .values_list("agent", "seq", "kind", "role", "tokens", "call_number")
    )
    result: dict[str, list[dict[str, int]]] = {}
    total: dict[str, int] = {}
    seen_calls: dict[str, set[int]] = {}
    for agent, seq, kind, role, tokens, call_number in rows.iterator(chunk_size=5000):
        if kind == "compact_summary":
            total[agent] = 0  # what the model sees restarts from the summary
        if role == "meta":
            continue
        total[agent] = total.get(agent, 0) + (tokens or 0)
        points = result.setdefault(agent, [])
        # One point per API call (its first record) and per record of logs without usage.
        if call_number is not None:
            if call_number in seen_calls.setdefault(agent, set()):
                continue
            seen_calls[agent].add(call_number)
            points.append({"seq": seq, "call": call_number, "estimate": total[agent]})
        elif kind == "assistant" or not points or points[-1]["seq"] != seq:
            points.append({"seq": seq, "call": -1, "estimate": total[agent]})
    return result


def _event_marker(event: models.ContextEvent, points: list[dict[str, Any]]) -> dict[str, Any]:
    marker: dict[str, Any] = {
        "kind": event.kind,
        "agent": event.agent,
        "seq": event.seq,
        "line": event.line,
        "after_call": event.after_call,
        "timestamp": event.timestamp.isoformat() if event.timestamp else None,
        "trigger": event.trigger or None,
        "pre_tokens": event.pre_tokens,
        "post_tokens": event.post_tokens,
        "tokens_saved": event.tokens_saved,
        "tool_ids": event.tool_ids,
        "message": event.message[:500],
    }
    before = points[event.after_call - 1] if 0 < event.after_call <= len(points) else None
    after = points[event.after_call] if event.after_call < len(points) else None
    marker["context_before"] = before["context"] if before else None
    marker["context_after"] = after["context"] if after else None
    if event.kind == "compaction":
        # Tokens after = the next call's context (the summary plus what Claude Code re-attached).
        marker["tokens_after"] = event.post_tokens or (after["context"] if after else None)
        if before and event.pre_tokens:
            # Tool output that arrived after the last request: often the real reason for the overflow.
            marker["gap_after_last_usage"] = event.pre_tokens - before["context"]
    return marker


def _derived_markers(
    agent: str, points: list[dict[str, Any]], calls: list[ApiCall], *, microcompacted: list[int], policy: CachePolicy
) -> list[dict[str, Any]]:
    """Cache misses and idle gaps, which the logs do not mark but the usage numbers show.

    ``calls`` are the agent's stored calls (``neutral_call``), ``points`` the timeline's points of the same calls.

    Read by ``compaction.prompt_cache``, the same reading the diagnosis reports, by the cache rules of the
    session's provider (``policy``); ``microcompacted`` are the calls a microcompact of this agent preceded
    (its events' ``after_call``).
    """
    reading = read_cache(
        calls,
        microcompacted=microcompacted,
        policy=policy,
    )
    by_call = {p["call"]: p for p in points}
    markers: list[dict[str, Any]] = []
    for miss in reading.misses:
        point = by_call[miss.call]
        markers.append(
            {
                "kind": "cache_miss",
                "agent": agent,
                "seq": point["seq"],
                "call": miss.call,  # the call whose request missed the cache
                "timestamp": point["timestamp"],
                "recreated_tokens": miss.recreated_tokens,
                "cause": miss.cause,
                "message": f"cache read fell from {miss.cache_read_before:,} to {miss.cache_read:,}; "
                f"{policy.missed_words(miss.recreated_tokens)}",
            }
        )
    for gap in reading.idle_gaps:
        point = by_call[gap.call]
        markers.append(
            {
                "kind": "idle_gap",
                "agent": agent,
                "seq": point["seq"],
                "after_call": gap.previous_call,  # the pause lay between this call and the next
                "timestamp": point["timestamp"],
                "seconds": int(gap.seconds),
                "message": f"{int(gap.seconds // 60)} min idle, "
                f"longer than the {policy.lifetime_minutes}-minute cache TTL ({policy.provider})",
            }
        )
    return markers


# Events that change what the model still sees, read back for "What filled the context".
_HISTORY_EVENT_KINDS = ("compaction", "microcompact", "prune")


@dataclass(slots=True)
class _CompositionInputs:
    messages: list[Message]
    tokens: list[int]
    events: list[PlacedEvent]
    steps: list[ApiCall]  # the agent's calls located in ``messages`` (``compaction.replay.api_steps``)
    inferred: Inferred


def _composition_inputs(*, session: models.Session, agent: str) -> _CompositionInputs:
    """The agent's records, their stored estimates, its history-changing events and what the log never shows.

    Three queries (two of them none when ``conversation`` is cached), whatever the session's size.
    """
    from compaction.replay import api_steps

    messages = conversation(session=session, agent=agent)
    stored = {
        seq: tokens if tokens is not None else -(-chars // 4)  # ceil(chars / 4) until tiktoken has run
        for seq, tokens, chars in models.Message.objects.filter(session=session, agent=agent).values_list(
            "seq", "tokens", "chars"
        )
    }
    row_seqs = [int(m.data["row_seq"]) for m in messages]
    tokens = [stored.get(seq, 0) for seq in row_seqs]
    events = [
        PlacedEvent(
            # The carrying record is the event's own (a klaude or KHAELOR summary), so it is not "before" it.
            before=bisect.bisect_left(row_seqs, row.seq),
            event=ContextEvent(
                kind=cast(EventKind, row.kind),
                line=row.line,
                agent=row.agent,
                trigger=row.trigger or None,
                pre_tokens=row.pre_tokens,
                post_tokens=row.post_tokens,
                tokens_saved=row.tokens_saved,
                tool_ids=list(row.tool_ids or []),
                data=dict(row.data or {}),
            ),
        )
        for row in models.ContextEvent.objects.filter(
            session=session, agent=agent, kind__in=_HISTORY_EVENT_KINDS
        ).order_by("seq", "id")
    ]
    steps = api_steps(messages)
    inferred = infer_unlogged(messages, tokens, events, [(step.first, step.context or None) for step in steps])
    return _CompositionInputs(messages=messages, tokens=tokens, events=events, steps=steps, inferred=inferred)


def turn_detail(*, session: models.Session, agent: str, call: int) -> dict[str, Any]:
    """One API call: its numbers, the records of its response, and what filled the context at that point.

    The same object is the call panel of the timeline page, its JSON twin and ``manage.py timeline --call``.
    A log without recorded usage numbers its calls like the replay (one per assistant record); their
    context is then the estimate. A fixed number of queries.
    """
    inputs = _composition_inputs(session=session, agent=agent)
    step = next((s for s in inputs.steps if s.number == call), None)
    if step is None:
        raise models.ApiCall.DoesNotExist(f"No call {call} for agent {agent}.")
    api_call = models.ApiCall.objects.filter(session=session, agent=agent, number=call).first()
    split = composition(
        inputs.messages,
        tokens=inputs.tokens,
        events=inputs.events,
        call=call,
        first=step.first,
        recorded=step.context or None,
        inferred=inputs.inferred,
    )
    records = inputs.messages[step.first : step.end]
    # Records of other calls can sit between a streamed response's records; a call key says whose they are.
    own = [m for m in records if m.call_key == str(call)] or records
    response = [int(m.data["row_seq"]) for m in own]
    first = inputs.messages[step.first]
    return {
        "agent": agent,
        **split.as_json(),
        "seq": response[0] if response else int(first.data["row_seq"]),
        "model": api_call.model if api_call else first.model or "",
        "timestamp": api_call.timestamp.isoformat() if api_call and api_call.timestamp else first.timestamp,
        "input": api_call.input_tokens if api_call else None,
        "cache_read": api_call.cache_read_tokens if api_call else None,
        "cache_creation": api_call.cache_creation_tokens if api_call else None,
        "output": api_call.output_tokens if api_call else None,
        "response_seqs": response,
        "layers": layers_before(session=session, call=call) if agent == MAIN else None,
    }


def composition_series(*, session: models.Session, agent: str = MAIN) -> dict[str, Any]:
    """What filled the context at every call of an agent, by the one definition the call panel uses.

    Columns, so the timeline stacks them as they are: ``calls`` (the call numbers, also the main chain's x),
    ``context`` and ``estimated`` per call, and one row of tokens per part, adding up to each call's context
    (``turn_detail`` gives the same numbers for one call). Parts are ordered by colour family, bottom first,
    then by their largest share. Too slow for a request on a long session: the worker stores it
    (``services.analyse_session``).
    """
    inputs = _composition_inputs(session=session, agent=agent)
    splits = list(
        compositions(
            inputs.messages,
            tokens=inputs.tokens,
            events=inputs.events,
            inferred=inputs.inferred,
            calls=[(step.number, step.first, step.context or None) for step in inputs.steps],
        )
    )
    labels: dict[str, list[int]] = {}
    for i, split in enumerate(splits):
        for part in split.parts:
            labels.setdefault(part.part, [0] * len(splits))[i] = part.tokens
    order = sorted(labels, key=lambda label: (PART_KINDS.index(part_kind(label)), -max(labels[label]), label))
    return {
        "agent": agent,
        "calls": [split.call for split in splits],
        "context": [split.context for split in splits],
        "estimated": [split.estimated for split in splits],
        "parts": [{"part": label, "kind": part_kind(label), "tokens": labels[label]} for label in order],
    }


def peak_composition(series: dict[str, Any], *, call: int | None) -> dict[str, Any] | None:
    """What filled the context at the session's peak call ``call`` (``session_peak``), from a ``composition_series``.

    Without a peak call (a log whose estimates are not done), the series' own largest context, the first of equals.
    """
    if not series.get("calls"):
        return None
    calls = series["calls"]
    largest = max(range(len(calls)), key=lambda i: (series["context"][i], -i))
    at = calls.index(call) if call in calls else largest
    return {
        "call": series["calls"][at],
        "context": series["context"][at],
        "estimated": series["estimated"][at],
        "parts": [
            {"part": p["part"], "kind": p["kind"], "tokens": p["tokens"][at]}
            for p in series["parts"]
            if p["tokens"][at]
        ],
    }


def stored_analysis(*, session: models.Session, series: bool = False) -> models.SessionAnalysis | None:
    """The worker's analysis of this version of the session, or None while it is (re)computed.

    ``series``: load the composition at every call too (the timeline), not only its peak (the overview).
    """
    rows = models.SessionAnalysis.objects.filter(session=session).defer("conversation")  # stored_conversation's
    analysis = (rows if series else rows.defer("composition")).first()
    if analysis is None or analysis.message_count != session.message_count:
        return None
    return analysis


def overview(*, session: models.Session) -> dict[str, Any]:
    """The at-a-glance head of a session page and its JSON twin; each number from its one source.

    Peak, window, calls and cost: the session's columns, which the import fills from ``compaction.stats``
    (``services.refresh_session_summary``); the lines: ``thresholds_for`` (the session's own strategy);
    compactions, microcompacts and prunes: the main chain's context events, the rows ``session_stats`` lists, counted
    in the database (the page must not read every call); the composition at the peak and the verdict: the
    worker's stored analysis (``composition_series``, ``compaction.diagnose``), or ``computing`` until it is there.
    """
    thresholds = thresholds_for(session=session)
    counts = dict(
        models.ContextEvent.objects.filter(
            session=session, agent=MAIN, kind__in=["compaction", "microcompact", "prune"]
        )
        .values_list("kind")
        .annotate(n=Count("id"))
        .order_by()
    )
    analysis = stored_analysis(session=session)
    duration = (
        (session.ended_at - session.started_at).total_seconds() if session.started_at and session.ended_at else None
    )
    return {
        "agent": session.format,
        "peak": session_peak(session=session).as_json(),
        "peak_context": session.peak_context,
        "peak_is_estimate": session.peak_is_estimate,
        "window": thresholds["window"],
        "lines": {"warning": thresholds["warning"], "autocompact": thresholds["autocompact"]},
        "thresholds_source": thresholds["source"],
        "api_calls": {"main": session.api_calls_main, "side": session.api_calls_side},
        "compactions": counts.get("compaction", 0),
        "microcompacts": counts.get("microcompact", 0),
        "prunes": counts.get("prune", 0),
        "duration_seconds": duration,
        "cost_usd": session.cost_usd,
        "computing": analysis is None,
        "peak_composition": analysis.peak if analysis is not None else None,
        "verdict": analysis.verdict if analysis is not None else None,
    }


# ---------------------------------------------------------------------------------------------
# Diagnosis and what-if replay


def context_events(*, session: models.Session, agent: str = MAIN) -> list[ContextEvent]:
    """The stored context events of one agent as neutral ``ContextEvent``s (one query)."""
    return [
        ContextEvent(
            kind=cast(EventKind, row.kind),
            line=row.line,
            agent=row.agent,
            timestamp=row.timestamp.isoformat() if row.timestamp else None,
            trigger=row.trigger or None,
            pre_tokens=row.pre_tokens,
            post_tokens=row.post_tokens,
            tokens_saved=row.tokens_saved,
            tool_ids=list(row.tool_ids or []),
            message=row.message,
            data=dict(row.data or {}),
        )
        for row in models.ContextEvent.objects.filter(session=session, agent=agent).order_by("seq", "id")
    ]


_DIAGNOSES: dict[tuple[int, Any, int], dict[str, Any]] = {}
_DIAGNOSES_KEPT = 8  # a report is tens of KB
_DIAGNOSES_LOCK = threading.Lock()


def stored_diagnosis(*, session: models.Session) -> dict[str, Any] | None:
    """The report the worker stored with this version of the session's analysis (``services.analyse_session``)."""
    data = (
        models.SessionAnalysis.objects.filter(session=session, message_count=session.message_count)
        .values_list("diagnosis", flat=True)
        .first()
    )
    return orjson.loads(bytes(data)) if data is not None else None


def diagnosis(*, session: models.Session) -> dict[str, Any]:
    """The diagnosis report of a session, computed once per version of the session.

    It is a pure function of the stored rows, and every write moves ``updated_at``: the page and its JSON twin
    (and a reload) read the same report instead of computing it again (0.14 s on the 53 MB session), and the first
    request of a process reads the report the worker stored after the import. Callers must not mutate it.
    """
    key = (session.pk, session.updated_at, session.message_count)
    with _DIAGNOSES_LOCK:
        cached = _DIAGNOSES.get(key)
    if cached is not None:
        return cached
    report = stored_diagnosis(session=session)
    if report is None:
        report = compute_diagnosis(session=session)
    with _DIAGNOSES_LOCK:
        while len(_DIAGNOSES) >= _DIAGNOSES_KEPT:
            _DIAGNOSES.pop(next(iter(_DIAGNOSES)))
        _DIAGNOSES[key] = report
    return report


def compute_diagnosis(*, session: models.Session) -> dict[str, Any]:
    from compaction.diagnose import diagnose

    messages = conversation(session=session, agent=MAIN)
    events = context_events(session=session, agent=MAIN)
    info = session_info(session=session)
    with cycle_collection_paused():
        report = diagnose(messages, events, info=info, prices=settings.MODEL_PRICES).as_json()
    if not report["has_usage"]:
        # A log without recorded usage: the headline peak is the session's estimated one, as on every other page.
        report["peak"] = session_peak(session=session).as_json()
    # The events as ``session_stats`` lists them (the one definition), with the context either side of each.
    report["events"] = [event.as_json() for event in session_stats(session=session).events]
    # The layers before the request that crossed the compaction line (else the window): what each would do there.
    crossings = report.get("crossings") or []
    crossing = next((c for c in crossings if c["line"] == "autocompact"), None) or next(
        (c for c in crossings if c["line"] == "window"), None
    )
    report["layers_at_crossing"] = (
        layers_before(session=session, call=crossing["call"]) if crossing is not None else None
    )
    return report


def layers_before(*, session: models.Session, call: int, strategy: str | None = None) -> dict[str, Any] | None:
    """What each of the agent's layers would do to main-chain call ``call``'s request (they run after the call
    before it); None for the first call, or a strategy without per-request layers."""
    from compaction.layers import NoLayers, layers_at
    from compaction.strategies.registry import build_strategy, strategy_for_format

    if call < 2:
        return None  # the first call has no call before it
    info = session_info(session=session)
    built = build_strategy(strategy or strategy_for_format(session.format), info=info, overrides={})
    try:
        with cycle_collection_paused():
            report = layers_at(conversation(session=session, agent=MAIN), strategy=built, call=call - 1, info=info)
    except (NoLayers, ValueError):
        return None
    from compaction.diagnose import readable_source

    data = report.as_json()
    # What a person reads names no file of ours they cannot open.
    for layer in data["layers"]:
        layer["why"] = readable_source(layer["why"])
        layer["detail"] = readable_source(layer["detail"])
    data["notes"] = [readable_source(note) for note in data.get("notes", [])]
    # The widest bar of the waterfall: bars are drawn against it.
    data["scale"] = max([report.tokens_before, *(layer.tokens_after for layer in report.layers)]) or 1
    return data


# A model of each agent's usual window, to show its lines on the help page (a session shows its own).
_EXAMPLE_MODEL = "claude-sonnet-4-5"


def threshold_explanation(*, agent: str) -> dict[str, Any]:
    """How one agent's lines, estimate and compaction rules are computed (the in-app help page)."""
    from compaction.diagnose import readable_source
    from compaction.strategies.registry import STRATEGY_NAMES, build_strategy, default_parameters

    if agent not in STRATEGY_NAMES:
        raise LookupError(agent)
    strategy = build_strategy(agent, info=None, overrides={})
    lines = strategy.thresholds(model=_EXAMPLE_MODEL, version=None)
    return {
        "name": agent,
        "label": strategy.short_label,
        "title": strategy.label,
        "example_model": _EXAMPLE_MODEL,
        "window": lines.window,
        "autocompact": lines.autocompact,
        "warning": lines.warning,
        "blocking": lines.blocking,
        "rule": readable_source(lines.source),
        "assumed": lines.assumption,
        "estimator": strategy.estimator_label,
        "circuit_breaker": strategy.circuit_breaker(version=None),
        "parameters": default_parameters(agent),
        "public_source": strategy.public_source,
    }


def replays(
    *, session: models.Session, requested: list[tuple[str, dict[str, Any]]], cap: ToolCap | None = None
) -> dict[str, dict[str, Any]]:
    """Each requested strategy replayed over the main chain, its series placed on the timeline's x axis (seq).

    ``cap`` replays the transcript with one tool's results capped (``compaction.transforms``).
    """
    from compaction.replay import replay
    from compaction.strategies.registry import build_strategy
    from compaction.transforms import cap_tool_results

    if not requested:
        return {}
    messages = conversation(session=session, agent=MAIN)
    info = session_info(session=session)
    seq_of_call = dict(models.ApiCall.objects.filter(session=session, agent=MAIN).values_list("number", "seq"))
    out: dict[str, dict[str, Any]] = {}
    for name, overrides in requested:
        try:
            strategy = build_strategy(name, info=info, overrides=overrides)
        except ValueError as exc:
            out[name] = {"strategy": name, "error": str(exc)}
            continue
        replayed = messages
        if cap is not None:
            replayed, _ = cap_tool_results(messages, cap=cap, estimate=strategy.estimate)
        with cycle_collection_paused():
            data = replay(replayed, strategy=strategy, info=info).as_json()
            # What the replay built and its strategy still holds (KHAELOR's and klaude-code's own copies of the
            # records: 60,000-74,000 objects on the 53 MB session) goes now, with the collector paused: the first
            # collection after the pause walked all of it, 45 ms of a 0.3-0.5 s KHAELOR replay (bench/README.md).
            del strategy, replayed
        if cap is not None:
            data["notes"].insert(0, f"Transcript changed: {cap.label}.")
            data["cap"] = {"tool": cap.tool, "max_chars": cap.max_chars}
        data["points"] = [
            {"seq": seq_of_call.get(call, call), "x": call, "call": call, "context": ctx}
            for call, ctx in data["series"]
        ]
        for event in data["events"]:
            event["seq"] = seq_of_call.get(event.get("after_call"), event.get("after_call"))
            event["x"] = event.get("after_call")
        out[name] = data
    return out
