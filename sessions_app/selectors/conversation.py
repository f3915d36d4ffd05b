"""Reads of the neutral model: an agent's records read back as ``compaction.transcript.Message``s.

The per-process cache of recent conversations (and what is derived from them once), the pause of the cyclic
collector around analyses, and the main chain the worker stored pickled: kept together, since a change to one
is a change to how the others behave."""

from __future__ import annotations

import gc
import io
import logging
import pickle
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import orjson
import zstandard
from django.db import connection

from compaction.formats.context_records import conversation_keeps_bookkeeping
from compaction.transcript import MAIN, Block, Kind, Message, RecordPickler, Role, SessionInfo, Usage
from sessions_app import models

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
