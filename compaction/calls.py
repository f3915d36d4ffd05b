"""De-duplicate API calls from a stream of records.

Claude Code writes one line per content block of a streamed response; every line of one
response shares ``message.id`` and carries the same input/cache numbers, while
``output_tokens`` grows and the last line holds the maximum (docs/formats/claude-code.md
§6.1-6.2; entireio/cli ``CalculateTokenUsage`` does the same). So: one call per key,
input/cache from the first line, output = max over the group.
"""

from __future__ import annotations

from compaction.transcript import ApiCall, Message, Usage


class CallTracker:
    """Feed messages in file order; get one ``ApiCall`` per distinct call key and agent."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], ApiCall] = {}
        self._count: dict[str, int] = {}

    def add(self, message: Message) -> ApiCall | None:
        """Return the new call when ``message`` starts one, else None (it may still raise output)."""
        if message.usage is None or message.call_key is None:
            return None
        key = (message.agent, message.call_key)
        call = self._by_key.get(key)
        if call is not None:
            call.usage.output_tokens = max(call.usage.output_tokens, message.usage.output_tokens)
            return None
        index = self._count.get(message.agent, 0)
        self._count[message.agent] = index + 1
        u = message.usage
        call = ApiCall(
            agent=message.agent,
            index=index,
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
        """The call ``message`` belongs to, once ``add`` has seen it."""
        if message.call_key is None:
            return None
        return self._by_key.get((message.agent, message.call_key))

    def count(self, agent: str) -> int:
        return self._count.get(agent, 0)

    def calls(self) -> list[ApiCall]:
        return list(self._by_key.values())
