"""De-duplicate API calls from a stream of records.

Claude Code writes one line per content block of a streamed response; every line of one
response shares ``message.id`` and carries the same input/cache numbers, while
``output_tokens`` grows and the last line holds the maximum (docs/formats/claude-code.md
§6.1-6.2; entireio/cli ``CalculateTokenUsage`` does the same). So: one call per key,
input/cache from the first line, output = max over the group.

Sections (§) refer to docs/formats/claude-code.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from compaction.transcript import ApiCall, Message, Usage


def is_response_without_usage(message: Message) -> bool:
    """A reply the model wrote whose usage the log does not record (KHAELOR without ``model.usage``): in a log with
    no recorded usage at all, each such reply is one call (``compaction.replay.api_steps`` numbers them so)."""
    return message.usage is None and message.kind == "assistant" and not message.synthetic


class CallTracker:
    """Feed messages in file order; get one ``ApiCall`` per distinct call key and agent.

    An agent whose log records no usage still has calls: its model replies, counted by ``count`` and ``responses``
    (numbered as ``api_steps`` numbers them), so its events sit "after call N" on the same numbers as its timeline.
    """

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], ApiCall] = {}  # the open calls, oldest first
        # Calls handed out by ``close_oldest``: agent -> key -> number, so a later line of one is still recognised
        # (its number, no new call) without keeping the call; the output such a line raises is in ``raised``.
        self._closed: dict[str, dict[str, int]] = {}
        self.raised: dict[tuple[str, str], int] = {}
        self._count: dict[str, int] = {}
        self._responses: dict[str, int] = {}

    def add(self, message: Message) -> ApiCall | None:
        """Return the new call when ``message`` starts one, else None (it may still raise output)."""
        if message.usage is None or message.call_key is None:
            if is_response_without_usage(message):
                self._responses[message.agent] = self._responses.get(message.agent, 0) + 1
            return None
        key = (message.agent, message.call_key)
        call = self._by_key.get(key)
        if call is not None:
            if call.usage is not None:  # always: the tracker's calls carry the usage they were made from
                call.usage.output_tokens = max(call.usage.output_tokens, message.usage.output_tokens)
            return None
        closed = self._closed.get(message.agent)
        if closed is not None and message.call_key in closed:
            self.raised[key] = max(self.raised.get(key, 0), message.usage.output_tokens)
            return None
        number = self._count.get(message.agent, 0) + 1
        self._count[message.agent] = number
        u = message.usage
        call = ApiCall(
            agent=message.agent,
            number=number,
            key=message.call_key,
            line=message.line,
            usage=Usage(
                u.input_tokens,
                u.cache_creation_input_tokens,
                u.cache_read_input_tokens,
                u.output_tokens,
                u.cache_creation_1h_input_tokens,
            ),
            model=message.model,
            timestamp=message.timestamp,
        )
        self._by_key[key] = call
        return call

    def call_for(self, message: Message) -> ApiCall | None:
        """The call ``message`` belongs to, once ``add`` has seen it (None for a closed one: ``number_of``)."""
        if message.call_key is None:
            return None
        return self._by_key.get((message.agent, message.call_key))

    def number_of(self, message: Message) -> int | None:
        """The number of the call ``message`` belongs to, open or closed, once ``add`` has seen it."""
        if message.call_key is None:
            return None
        call = self._by_key.get((message.agent, message.call_key))
        if call is not None:
            return call.number
        return self._closed.get(message.agent, {}).get(message.call_key)

    def close_oldest(self, *, keep: int) -> list[ApiCall]:
        """Close the calls that started first until ``keep`` remain open; the closed ones, oldest first.

        A closed call is final unless a later line of it raises its output (``raised``, kept by key): a response's
        lines follow each other, so a reader that keeps enough calls open (the importer keeps
        ``services.OPEN_CALLS``) sees that only where a log interleaves many responses."""
        out = list(islice(self._by_key.values(), max(len(self._by_key) - keep, 0)))
        for call in out:
            del self._by_key[(call.agent, call.key)]
            self._closed.setdefault(call.agent, {})[call.key] = call.number
        return out

    @property
    def open_calls(self) -> int:
        return len(self._by_key)

    def count(self, agent: str) -> int:
        """Calls of ``agent`` seen so far: the number of its last call, so an event now is "after call count".

        Its recorded calls; for an agent with none, its replies without usage."""
        return self._count.get(agent, 0) or self._responses.get(agent, 0)

    def responses(self) -> dict[str, int]:
        """Per agent, the model replies without recorded usage seen so far (the calls of a log without usage)."""
        return dict(self._responses)

    def calls(self) -> list[ApiCall]:
        """The open calls with recorded usage (every one, unless ``close_oldest`` closed some), in the order they
        started (each has its ``usage``)."""
        return list(self._by_key.values())


@dataclass(frozen=True, slots=True)
class Peak:
    """The headline peak of a series of calls: the largest context sent and the call that sent it.

    One definition for every page, twin and command: the largest recorded context (input + cache creation + cache
    read) of a main-chain call, the first of equals; a count the agent made between calls (a compaction's
    ``preTokens``) is evidence, not the peak. ``call`` is None when there is no call at all.
    """

    call: int | None
    tokens: int

    def as_json(self) -> dict[str, int | None]:
        return {"call": self.call, "tokens": self.tokens}


def peak_of(points: Iterable[tuple[int, int | None]]) -> Peak:
    """The ``Peak`` of (call, context) points; points without a context are skipped."""
    best: Peak = Peak(call=None, tokens=0)
    for call, tokens in points:
        if tokens is not None and (best.call is None or tokens > best.tokens):
            best = Peak(call=call, tokens=tokens)
    return best
