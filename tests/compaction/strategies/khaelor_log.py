"""Hand-made KHAELOR event logs read through the real parser."""

from __future__ import annotations

from typing import Any

import orjson

from compaction.formats.khaelor import KhaelorParser
from compaction.transcript import Message


class Log:
    """A hand-made KHAELOR event log; ``messages()`` runs it through the real parser."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, type_: str, **payload: Any) -> int:
        seq = len(self.events) + 1
        self.events.append({"seq": seq, "type": type_, "payload": payload})
        return seq

    def user(self, text: str = "do the thing") -> int:
        return self.add("user.message-created", text=text)

    def text(self, chars: int = 10) -> int:
        return self.add("model.text-block-completed", text="t" * chars)

    def request(self, tool_id: str, name: str = "bash") -> int:
        return self.add("tool.requested", toolUseId=tool_id, name=name, input={"command": tool_id})

    def result(self, tool_id: str, chars: int = 10, status: str = "completed") -> int:
        return self.add(f"tool.{status}", toolUseId=tool_id, modelText="r" * chars)

    def call(self, tool_id: str, chars: int = 10, status: str = "completed") -> int:
        self.request(tool_id)
        return self.result(tool_id, chars, status)

    def messages(self) -> list[Message]:
        lines = [orjson.dumps(e) + b"\n" for e in self.events]
        records = KhaelorParser().parse(lines)
        return [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
