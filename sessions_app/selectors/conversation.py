"""Reads of the neutral model: an agent's records read back as ``compaction.transcript.Message``s.

The per-process cache of recent conversations (and what is derived from them once) and the main chain the worker
stored (as JSON): kept together, since a change to one is a change to how the others behave."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import orjson
import zstandard
from django.db import connection

from compaction.formats.context_records import conversation_keeps_bookkeeping
from compaction.transcript import (
    MAIN,
    Block,
    Kind,
    Message,
    Role,
    SessionInfo,
    Usage,
    conversation_from_json,
    conversation_to_json,
)
from sessions_app import memory_budget, models
from sessions_app.process_cache import ProcessCache

if TYPE_CHECKING:
    from compaction.replay import AfterCall


logger = logging.getLogger(__name__)


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


class CachedConversation(list[Message]):
    """A conversation as ``conversation`` keeps it, with what is computed from it once, not per request: its "after
    call N" points, which every preview asks for (``after_calls``: 40 ms of a 120 ms warm preview of the 53 MB
    session, docs/performance.md). What is derived goes with the conversation when the cache drops it."""

    __slots__ = ("_after_calls", "size")

    def __init__(self, messages: list[Message], *, size: int) -> None:
        super().__init__(messages)
        self._after_calls: list[AfterCall] | None = None
        self.size = size  # the session's weight (memory_budget.weight): what the cache weighs it by


# The last few sessions read back as neutral messages, per process: a reviewer tweaking preview parameters re-reads
# the same session many times. Keyed by the session's last change, so an import that adds lines is never served
# stale. Weighed as the budget weighs sessions (``memory_budget.weight``), at most the budget in force (set on each
# read): the records of a session at the budget are never kept beside another's (a process holds about 1.5 times a
# session's size for them, bench/memory_bench.py).
_CONVERSATIONS: ProcessCache[tuple[int, str, Any, int], CachedConversation] = ProcessCache(
    max_entries=2, max_weight=memory_budget.most_bytes(), weigh=lambda found: found.size
)


def conversation(*, session: models.Session, agent: str = MAIN) -> list[Message]:
    """The records of one agent as neutral ``Message``s, in order, with each call's recorded usage.

    Unknown records are left out (they never reach a model); for klaude-code every history item
    stays, so list positions equal klaude's own indices. ``Message.data["row_seq"]`` holds the stored seq
    (``data["seq"]`` stays the agent's own, e.g. a KHAELOR event seq). Callers must not mutate the result.

    A session larger than the memory budget in force is refused (``memory_budget.SessionTooLarge``), before
    anything is read: every whole-chain read of a page, a command or a run comes through here.
    """
    memory_budget.check(session=session)
    _CONVERSATIONS.max_weight = memory_budget.most_bytes()

    def read() -> CachedConversation:
        # Room first: the records read next are not held beside as many kept ones.
        weighs = memory_budget.weight(session=session)
        _CONVERSATIONS.make_room(weighs)
        stored = stored_conversation(session=session) if agent == MAIN else None
        messages = stored if stored is not None else _read_conversation(session=session, agent=agent)
        return CachedConversation(messages, size=weighs)

    return _CONVERSATIONS.get_or_compute((session.pk, agent, session.updated_at, session.message_count), read)


def forget_conversations() -> None:
    """Drop the conversations this process keeps (the worker, after an analysis: it serves no page)."""
    _CONVERSATIONS.clear()


def after_calls_of(messages: list[Message]) -> list[AfterCall]:
    """``compaction.replay.after_calls(messages)``, computed once per conversation ``conversation`` returned (any
    other list is computed each time). Callers must not mutate the result."""
    from compaction.replay import after_calls

    if not isinstance(messages, CachedConversation):
        return after_calls(messages)
    if messages._after_calls is None:
        # Two requests may both compute it; the points are the same, and the second keeps its own.
        messages._after_calls = after_calls(messages)
    return messages._after_calls


def dump_conversation(messages: list[Message]) -> bytes:
    """The main chain as ``SessionAnalysis.conversation`` keeps it (``stored_conversation`` loads it back): JSON
    (``compaction.transcript.conversation_to_json``), compressed."""
    return zstandard.ZstdCompressor(level=1).compress(orjson.dumps(conversation_to_json(messages)))


def stored_conversation(*, session: models.Session) -> list[Message] | None:
    """The main chain the worker stored with this version's analysis (``conversation(agent=MAIN)`` as it was read
    then), or None: no analysis of this version yet, or a blob that does not load (then the rows are read)."""
    blob = (
        models.SessionAnalysis.objects.filter(session=session, message_count=session.message_count)
        .values_list("conversation", flat=True)
        .first()
    )
    if blob is None:
        return None
    try:
        # A blob stored before JSON (a pickle, migration 0024 clears them) or of another layout is refused here:
        # it is read as JSON or not at all.
        return conversation_from_json(orjson.loads(zstandard.ZstdDecompressor().decompress(bytes(blob))))
    except (zstandard.ZstdError, ValueError, TypeError, MemoryError) as exc:  # orjson's and the layout's: ValueErrors
        logger.warning("session %s: its stored conversation does not load (%s); reading its records", session.pk, exc)
        return None


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
