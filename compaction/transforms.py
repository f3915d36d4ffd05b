"""Changes simulated on a recorded transcript, for a what-if replay of something no strategy parameter sets.

A cap on tool results: every result of one tool longer than the cap keeps only its first characters (what
an agent's own output limit on a tool's result does), and every later recorded usage shrinks by the strategy's
estimate of what the cut removed, so the replay's recorded numbers describe the capped session. Differences
between successive recorded calls stay exact except where a capped result arrived, which is the change being simulated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compaction.strategies.registry import raw_payload_keys
from compaction.transcript import Block, Message, Usage


@dataclass(frozen=True, slots=True)
class ToolCap:
    tool: str  # the tool whose results are capped, as the records name it
    max_chars: int

    @property
    def label(self) -> str:
        return f"{self.tool} results capped at {self.max_chars:,} characters"


def _shrunk(usage: Usage, by: int) -> Usage:
    """``usage`` with ``by`` fewer prompt tokens, from cache reads first (the capped result sits in the prefix)."""
    read = min(usage.cache_read_input_tokens, by)
    created = min(usage.cache_creation_input_tokens, by - read)
    uncached = min(usage.input_tokens, by - read - created)
    return dataclasses.replace(
        usage,
        cache_read_input_tokens=usage.cache_read_input_tokens - read,
        cache_creation_input_tokens=usage.cache_creation_input_tokens - created,
        input_tokens=usage.input_tokens - uncached,
        cache_creation_1h_input_tokens=min(
            usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens - created
        ),
    )


def cap_tool_results(
    messages: Sequence[Message], *, cap: ToolCap, estimate: Callable[[Message], int]
) -> tuple[list[Message], int]:
    """The transcript with ``cap`` applied, and how many results it cut.

    ``estimate`` is the replaying strategy's own estimate of a message (the saving is in its units).
    """
    out: list[Message] = []
    saved = 0
    cut = 0
    for message in messages:
        blocks = message.blocks
        if any(b.kind == "tool_result" and b.tool_name == cap.tool and len(b.text) > cap.max_chars for b in blocks):
            new_blocks: list[Block] = []
            for block in blocks:
                if block.kind == "tool_result" and block.tool_name == cap.tool and len(block.text) > cap.max_chars:
                    new_blocks.append(dataclasses.replace(block, text=block.text[: cap.max_chars]))
                    cut += 1
                else:
                    new_blocks.append(block)
            # The raw record a parser kept beside the blocks (and anything memoised from it) still holds the
            # uncut text; without it a strategy reads the capped blocks. The agents' profiles name those keys.
            dropped = raw_payload_keys()
            data = {key: value for key, value in message.data.items() if key not in dropped}
            capped = dataclasses.replace(message, blocks=new_blocks, data=data)
            saved += max(0, estimate(message) - estimate(capped))
            message = capped
        if saved and message.usage is not None:
            message = dataclasses.replace(message, usage=_shrunk(message.usage, saved))
        out.append(message)
    return out, cut
