"""Reads of the records' text: which records match a query (the full-text index of either database), and
the snippets around the matches."""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson
from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from sessions_app import models
from sessions_app.search_syntax import SearchQuery, parse_query
from sessions_app.search_text import FTS_TABLE, TSV_TABLE


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


SNIPPET_CHARS = 80  # on each side of the match
MATERIALIZED_IDS = 100_000  # matching record ids handed to the other queries as one parameter (about 1 MB)


def matching_messages(*, q: str, session: models.Session | None = None) -> QuerySet[models.Message]:
    """Records whose readable text (search_text.py: never JSON keys) matches ``q`` (of one session if given).

    Both databases read web-search syntax (words, "quoted phrase", -word, or; ``search_syntax``, which the
    highlighter reads too) over an index of words: PostgreSQL a GIN-indexed table of the words of ``search_text``
    per record (migration 0016; a large import's records join it when the task worker has indexed them:
    ``search_pending``), SQLite an FTS5 index of the same column (migration 0015). A query that is one quoted
    phrase means the same on both: the index finds the records holding its words, and the phrase is then matched
    as text over those few candidates (on PostgreSQL a regular expression, about 10 times cheaper than
    re-parsing each record into a tsvector to check word positions).
    """
    qs = models.Message.objects.all()
    parsed = parse_query(q)
    phrase = parsed.phrase
    # A phrase is looked for by its words in the index, then matched as written over the records holding them.
    words = parse_query(phrase) if phrase else parsed
    if connection.vendor == "postgresql":
        query = tsquery(words)
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
        expression = fts5_query(words)
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


def fts5_query(query: SearchQuery) -> str | None:
    """``query`` as an FTS5 query. Every item goes in quotes, so nothing the user types is FTS5 syntax. None when
    there is no word to look for."""
    groups, excluded = query.groups, query.excluded
    if not groups:
        return None

    def quoted(item: str) -> str:
        return '"' + item.replace('"', '""') + '"'

    expression = " AND ".join(f"({' OR '.join(map(quoted, g))})" if len(g) > 1 else quoted(g[0]) for g in groups)
    return f"({expression}) NOT ({' OR '.join(map(quoted, excluded))})" if excluded else expression


_NOT_WORD = re.compile(r"[\W_]+")


def tsquery(query: SearchQuery) -> tuple[str, list[str]] | None:
    """``query`` as a PostgreSQL tsquery expression and its parameters, over the index's words (migration 0016:
    punctuation separates words, as in FTS5): each item is the phrase of its words."""
    groups, excluded = query.groups, query.excluded
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


def snippet(text: str, query: SearchQuery) -> Snippet:
    """The text around the first occurrence of the query's items as one phrase, else of the longest item a page
    marks (``SearchQuery.marked``), else its start: never around an ``or`` or an excluded word."""
    lowered = text.lower()
    together = [" ".join(query.positive)] if len(query.positive) > 1 else []
    for needle in [*together, *query.marked]:
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


def search_hits(qs: QuerySet[models.Message], q: str, limit: int) -> list[SearchHit]:
    rows = qs.order_by("seq").values_list("session_id", "agent", "seq", "kind", "search_text")[:limit]
    query = parse_query(q)
    return [SearchHit(sid, agent, seq, kind, snippet(text, query)) for sid, agent, seq, kind, text in rows]


def search_session(*, session: models.Session, q: str, limit: int = 200) -> list[SearchHit]:
    """Every agent's matching records of one session (main chain and subagents), in session order."""
    if not q.strip():
        return []
    return search_hits(matching_messages(q=q, session=session).filter(session=session), q, limit)
