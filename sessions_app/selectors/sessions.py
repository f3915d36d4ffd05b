"""Reads of sessions as rows: the filtered, sorted and paged list (and the search over it, grouped by
session), the filter choices, one session by id or reference, and the original bytes of its files."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path

import zstandard
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.expressions import OrderBy
from django.db.models.functions import RowNumber
from django.utils import timezone

from sessions_app import models
from sessions_app.selectors.search import SearchHit, matching_messages, search_hits

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
    archived: bool = False  # only sessions whose file is gone (archive.check_sources)
    sort: str = "date"


@dataclass(slots=True)
class SessionHits:
    session: models.Session
    matches: int  # records of the session that match
    hits: list[SearchHit]  # the first few, with snippets


SEARCH_PENDING_SHOWN = 20  # sessions named as still being indexed


def search_pending(*, filters: SessionFilters | None = None) -> list[models.Session]:
    """Sessions (within the list's filters, if given) whose records are not all in the search index yet: the task
    worker indexes a large import after it (services ``index_search``). Their records that are not indexed yet
    cannot be found."""
    scope = session_list(filters=replace(filters, q="")) if filters is not None else models.Session.objects.all()
    return list(scope.filter(search_ready=False).order_by("-id")[:SEARCH_PENDING_SHOWN])


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
    for hit in search_hits(first, filters.q, len(by_id) * hits_per_session):
        hits.setdefault(hit.session_id, []).append(hit)
    return [
        SessionHits(session=by_id[c["session_id"]], matches=c["n"], hits=hits.get(c["session_id"], [])) for c in counts
    ]


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
    if filters.archived:
        qs = qs.filter(archived_at__isnull=False)
    order = SORTS.get(filters.sort, SORTS["date"])
    return qs.order_by(order, "-id")


def _day_start(day: date) -> datetime:
    """Midnight starting ``day`` in the current time zone (what ``__date`` compares in)."""
    return timezone.make_aware(datetime.combine(day, dt_time.min), timezone.get_current_timezone())


def session_page(
    *, filters: SessionFilters, page: int | str | None, matching: QuerySet[models.Message] | None = None
) -> Page:
    return Paginator(session_list(filters=filters, matching=matching), PER_PAGE).get_page(page)


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


def read_raw(*, file: models.SourceFile) -> Iterator[bytes]:
    """The original bytes of a stored file, in order."""
    zstd = zstandard.ZstdDecompressor()
    for chunk in models.RawChunk.objects.filter(file=file).order_by("index").iterator():
        data = bytes(chunk.data)
        # zstd frames since 2026-11-30, zlib streams before: a zstd frame starts with its magic number, which no
        # zlib stream does (its first byte is 0x78 for the window size every zlib writer here used).
        yield zstd.decompress(data) if data.startswith(zstandard.FRAME_HEADER) else zlib.decompress(data)
