"""A line-by-line port of seed 002's ``compaction.ts``: the oracle KHAELOR is checked against.

The ``seed_*`` functions follow the seed statement by statement over raw durable events (dicts with
``seq``, ``type``, ``payload``), the shape the seed works on. Three helpers the seed imports but does not show
are reconstructed and say so: ``estimateTokens`` (ceil(chars / 4), as the project assumes),
``isPairingSafeCut`` (from the seed's own comment, docs/formats/khaelor.md §2) and ``buildConversation`` (the
LlmHistory projection: prunes applied by id, a checkpoint standing for its cut).
"""

from __future__ import annotations

import json
import math
from typing import Any

from compaction.strategies.khaelor import SUMMARY_SYSTEM_PROMPT, KhaelorParams

Event = dict[str, Any]
SeqRange = dict[str, int]

# ───────────────────────────── the oracle: compaction.ts, statement by statement ─────────────────────────────

PRUNE_PLACEHOLDER = "[Tool result pruned to reclaim context — re-run the tool if this output is needed again.]"


def estimate_tokens(text: str) -> int:
    """budget.ts estimateTokens is not in the seed: ceil(chars / 4), the project's labelled assumption."""
    return math.ceil(len(text) / 4)


def js_stringify(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def compacted_ranges(events: list[Event]) -> list[SeqRange]:
    return [e["payload"]["cut"] for e in events if e["type"] == "context.compacted"]


def in_any_range(seq: int, ranges: list[SeqRange]) -> bool:
    return any(seq >= r["fromSeq"] and seq <= r["toSeq"] for r in ranges)


def already_pruned_ids(events: list[Event]) -> set[str]:
    ids: set[str] = set()
    for event in events:
        if event["type"] == "context.pruned":
            ids.update(event["payload"]["toolUseIds"])
    return ids


def seed_select_prune_candidates(events: list[Event], options: KhaelorParams) -> dict[str, Any]:
    ranges = compacted_ranges(events)
    pruned = already_pruned_ids(events)
    placeholder_tokens = estimate_tokens(PRUNE_PLACEHOLDER)
    results: list[tuple[str, int]] = []
    for event in events:
        if event["type"] not in ("tool.completed", "tool.failed", "tool.cancelled"):
            continue
        if event["payload"]["toolUseId"] in pruned:
            continue
        if in_any_range(event["seq"], ranges):
            continue
        results.append((event["payload"]["toolUseId"], estimate_tokens(event["payload"]["modelText"])))
    protected_tokens = 0
    protect_from_index = len(results)
    for i in range(len(results) - 1, -1, -1):
        protected_tokens += results[i][1]
        if protected_tokens > options.protect_recent_tool_tokens:
            break
        protect_from_index = i
    tool_use_ids: list[str] = []
    reclaimed = 0
    for i in range(protect_from_index):
        tool_use_id, tokens = results[i]
        if tokens <= placeholder_tokens:
            continue
        tool_use_ids.append(tool_use_id)
        reclaimed += tokens - placeholder_tokens
    return {"toolUseIds": tool_use_ids, "placeholder": PRUNE_PLACEHOLDER, "tokensReclaimedEstimate": reclaimed}


CONVERSATION_EVENT_TYPES = {
    "user.message-created",
    "user.steering-injected",
    "model.text-block-completed",
    "model.thinking-block-completed",
    "tool.requested",
    "tool.completed",
    "tool.failed",
    "tool.cancelled",
    "context.compacted",
}
RESULT_TYPES = ("tool.completed", "tool.failed", "tool.cancelled")


def conversation_text_estimate(event: Event) -> int:
    kind, payload = event["type"], event["payload"]
    if kind in ("user.message-created", "model.text-block-completed"):
        return estimate_tokens(payload["text"])
    if kind == "model.thinking-block-completed":
        return estimate_tokens(payload["thinking"])
    if kind == "tool.requested":
        return estimate_tokens(js_stringify(payload["input"]))
    if kind in RESULT_TYPES:
        return estimate_tokens(payload["modelText"])
    if kind == "context.compacted":
        return estimate_tokens(payload["checkpointYaml"])
    return 0


def is_pairing_safe_cut(events: list[Event], cut: SeqRange) -> bool:
    """session/ isPairingSafeCut is not in the seed; reconstructed from its comment (docs/formats/khaelor.md §2):
    every tool_use inside the cut has its tool_result inside, and no tool_result inside lost its tool_use."""

    def inside(e: Event) -> bool:
        return cut["fromSeq"] <= e["seq"] <= cut["toSeq"]

    requested = {e["payload"]["toolUseId"]: e for e in reversed(events) if e["type"] == "tool.requested"}
    answered = {e["payload"]["toolUseId"]: e for e in reversed(events) if e["type"] in RESULT_TYPES}
    for event in events:
        if not inside(event):
            continue
        if event["type"] == "tool.requested":
            result = answered.get(event["payload"]["toolUseId"])
            if result is None or not inside(result):
                return False
        elif event["type"] in RESULT_TYPES:
            request = requested.get(event["payload"]["toolUseId"])
            if request is not None and not inside(request):
                return False
    return True


def seed_select_compaction_cut(events: list[Event], options: KhaelorParams) -> SeqRange | None:
    conversation = [e for e in events if e["type"] in CONVERSATION_EVENT_TYPES]
    if not conversation:
        return None
    first_user = next((e for e in conversation if e["type"] == "user.message-created"), None)
    if first_user is None:
        return None
    last_user_seq = -1
    for event in conversation:
        if event["type"] == "user.message-created":
            last_user_seq = event["seq"]
    tail_tokens = 0
    tail_start_seq: float = math.inf
    for i in range(len(conversation) - 1, -1, -1):
        event = conversation[i]
        if event["seq"] <= first_user["seq"]:
            break
        tail_start_seq = event["seq"]
        tail_tokens += conversation_text_estimate(event)
        if tail_tokens >= options.protect_tail_tokens:
            break
    protected_from_seq = min(tail_start_seq, tail_start_seq if last_user_seq == first_user["seq"] else last_user_seq)
    candidates = [e["seq"] for e in conversation if first_user["seq"] < e["seq"] < protected_from_seq]
    if not candidates:
        return None
    from_seq = candidates[0]
    for i in range(len(candidates) - 1, -1, -1):
        to_seq = candidates[i]
        if to_seq < from_seq:
            break
        if is_pairing_safe_cut(events, {"fromSeq": from_seq, "toSeq": to_seq}):
            return {"fromSeq": from_seq, "toSeq": to_seq}
    return None


def seed_extract_cut_events(events: list[Event], cut: SeqRange) -> list[Event]:
    middle: list[Event] = []
    prunes: list[Event] = []
    for event in events:
        if event["type"] == "user.steering-queued":
            middle.append(event)
        elif event["type"] == "context.pruned":
            prunes.append(event)
        elif event["type"] in CONVERSATION_EVENT_TYPES and cut["fromSeq"] <= event["seq"] <= cut["toSeq"]:
            middle.append(event)
    return middle + prunes


def build_conversation(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """session/ buildConversation is not in the seed; reconstructed as the LlmHistory projection: (role, block)
    per content event, prunes applied by id, events inside a checkpoint's cut replaced by the checkpoint."""
    placeholders = {
        tool_id: e["payload"]["placeholder"]
        for e in events
        if e["type"] == "context.pruned"
        for tool_id in e["payload"]["toolUseIds"]
    }
    queued = {e["payload"]["steeringId"]: e["payload"]["text"] for e in events if e["type"] == "user.steering-queued"}
    ranges = compacted_ranges(events)
    blocks: list[tuple[str, dict[str, Any]]] = []
    for event in events:
        kind, payload = event["type"], event["payload"]
        if kind not in CONVERSATION_EVENT_TYPES or in_any_range(event["seq"], ranges):
            continue
        if kind == "user.message-created":
            blocks.append(("user", {"type": "text", "text": payload["text"]}))
        elif kind == "user.steering-injected":
            text = payload.get("text") or queued.get(payload.get("steeringId"), "")
            if text:
                blocks.append(("user", {"type": "text", "text": text}))
        elif kind == "model.text-block-completed":
            blocks.append(("assistant", {"type": "text", "text": payload["text"]}))
        elif kind == "model.thinking-block-completed":
            blocks.append(("assistant", {"type": "thinking", "thinking": payload["thinking"]}))
        elif kind == "tool.requested":
            block = {"type": "tool_use", "id": payload["toolUseId"], "name": payload["name"], "input": payload["input"]}
            blocks.append(("assistant", block))
        elif kind in RESULT_TYPES:
            tool_id = payload["toolUseId"]
            content = placeholders.get(tool_id, payload["modelText"])
            block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
            if kind == "tool.failed":
                block["is_error"] = True
            blocks.append(("user", block))
        elif kind == "context.compacted":
            blocks.append(("user", {"type": "text", "text": payload["checkpointYaml"]}))
    return blocks


def cap_text(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n… [truncated]"


def seed_render_transcript(messages: list[tuple[str, dict[str, Any]]], options: KhaelorParams) -> str:
    parts: list[str] = []
    for role, block in messages:
        if block["type"] == "text":
            parts.append(f"[{role}]\n{cap_text(block['text'], options.max_block_chars)}")
        elif block["type"] == "tool_use":
            parts.append(
                f"[tool_use {block['name']} {block['id']}]\n"
                f"{cap_text(js_stringify(block['input']), options.max_block_chars)}"
            )
        elif block["type"] == "tool_result":
            marker = " (error)" if block.get("is_error") is True else ""
            parts.append(
                f"[tool_result {block['tool_use_id']}{marker}]\n{cap_text(block['content'], options.max_block_chars)}"
            )
    transcript = "\n\n".join(parts)
    if len(transcript) <= options.max_transcript_chars:
        return transcript
    head_chars = math.floor(options.max_transcript_chars * 0.4)
    tail_chars = math.floor(options.max_transcript_chars * 0.5)
    return (
        transcript[:head_chars]
        + "\n\n[… transcript truncated for summarization …]\n\n"
        + transcript[len(transcript) - tail_chars :]
    )


def seed_user_text(transcript: str) -> str:
    return f"Transcript of the conversation segment to checkpoint:\n\n{transcript}\n\nProduce the checkpoint now."


def seed_model_request(*, model: str, transcript: str, max_output_tokens: int) -> dict[str, Any]:
    """summarizeToCheckpointText's ModelRequest (``compressEvents`` passes summaryMaxOutputTokens); the system
    prompt's text is the project's (the seed page collapsed its indentation, test_khaelor checks the words)."""
    return {
        "model": model,
        "system": [{"name": "compaction", "text": SUMMARY_SYSTEM_PROMPT}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": seed_user_text(transcript)}]}],
        "tools": [],
        "maxOutputTokens": max_output_tokens,
    }


def messages_api_body(request: dict[str, Any]) -> dict[str, Any]:
    """Reconstructed, not in the seed: the ModelClient (src/anthropic) sending a ModelRequest as a streamed
    Messages API body, field for field (a system entry's name has no API field)."""
    return {
        "model": request["model"],
        "max_tokens": request["maxOutputTokens"],
        "system": [{"type": "text", "text": entry["text"]} for entry in request["system"]],
        "messages": request["messages"],
        "tools": request["tools"],
        "stream": True,
    }
