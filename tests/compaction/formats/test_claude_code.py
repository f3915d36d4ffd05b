"""Claude Code parser: inline rule fixtures, then every real sample against SOURCES.md.

Sections (§) refer to docs/formats/claude-code.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from compaction.calls import CallTracker
from compaction.formats.claude_code import FORMAT, ClaudeCodeParser
from compaction.stats import session_stats
from compaction.transcript import CARRIED, MAIN, ContextEvent, LineError, Message, Record
from tests.compaction.formats.claude_code_expected import EXPECTED
from tests.conftest import SHARED

SAMPLES = SHARED / "samples" / "claude-code"

SESSION = "11111111-2222-3333-4444-555555555555"


# ---------------------------------------------------------------- fixture builders


def jsonl(*objects: Any) -> list[bytes]:
    return [orjson.dumps(obj) + b"\n" for obj in objects]


def parse(lines: list[bytes], **kwargs: Any) -> tuple[list[Record], ClaudeCodeParser]:
    parser = ClaudeCodeParser(**kwargs)
    return list(parser.parse(lines)), parser


def messages(records: list[Record]) -> list[Message]:
    return [r for r in records if isinstance(r, Message)]


def events(records: list[Record]) -> list[ContextEvent]:
    return [r for r in records if isinstance(r, ContextEvent)]


def errors(records: list[Record]) -> list[LineError]:
    return [r for r in records if isinstance(r, LineError)]


def usage(*, inp: int = 3, create: int = 1000, read: int = 20000, out: int = 5) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": create,
        "cache_read_input_tokens": read,
        "output_tokens": out,
        "service_tier": "standard",
    }


def assistant(
    uuid: str,
    *,
    msg_id: str | None = "msg_1",
    content: Any = None,
    model: str = "claude-opus-4-6",
    use: Any = None,
    parent: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "model": model,
        "type": "message",
        "role": "assistant",
        "content": content if content is not None else [{"type": "text", "text": "ok"}],
        "stop_reason": None,
        "usage": use if use is not None else usage(),
    }
    if msg_id is not None:
        message["id"] = msg_id
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": SESSION,
        "version": "2.1.39",
        "cwd": "/home/dev/project",
        "type": "assistant",
        "uuid": uuid,
        "timestamp": "2026-02-12T14:00:00.000Z",
        "message": message,
        **extra,
    }


def user(uuid: str, content: Any, *, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": SESSION,
        "version": "2.1.39",
        "cwd": "/home/dev/project",
        "type": "user",
        "uuid": uuid,
        "timestamp": "2026-02-12T14:00:00.000Z",
        "message": {"role": "user", "content": content},
        **extra,
    }


def system(uuid: str, subtype: str, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "sessionId": SESSION,
        "type": "system",
        "subtype": subtype,
        "uuid": uuid,
        "timestamp": "2026-02-12T14:48:36.922Z",
        "level": "info",
        **extra,
    }


# ---------------------------------------------------------------- usage and calls (§6)


def test_one_response_over_three_lines_is_one_call_with_max_output() -> None:
    # §6.1: thinking / text / tool_use lines share message.id; the last has the real output_tokens.
    lines = jsonl(
        assistant("a1", content=[{"type": "thinking", "thinking": "hmm", "signature": "x"}], use=usage(out=4)),
        assistant("a2", content=[{"type": "text", "text": "Let me look."}], use=usage(out=4), parent="a1"),
        assistant(
            "a3",
            content=[{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/x"}}],
            use=usage(out=612),
            parent="a2",
        ),
    )
    records, _ = parse(lines)
    found = messages(records)
    assert [m.call_key for m in found] == ["msg_1", "msg_1", "msg_1"]
    tracker = CallTracker()
    for message in found:
        tracker.add(message)
    (call,) = tracker.calls()
    assert call.usage is not None and call.usage.output_tokens == 612
    assert call.usage.context == 3 + 1000 + 20000
    assert session_stats(records).as_json()["api_calls"] == {"main": 1, "side": 0}


def test_call_key_falls_back_to_request_id_then_uuid() -> None:
    lines = jsonl(
        assistant("a1", msg_id=None, requestId="req_9"),
        assistant("a2", msg_id=None),
    )
    found = messages(parse(lines)[0])
    assert [m.call_key for m in found] == ["req_9", "a2"]


def test_synthetic_lines_have_no_usage_and_no_call() -> None:
    # §6.4: <synthetic> lines carry all-zero usage; counting them would draw a drop to 0.
    lines = jsonl(
        assistant("a1", use=usage(read=90000)),
        assistant(
            "a2",
            msg_id="msg_synth",
            model="<synthetic>",
            use=usage(inp=0, create=0, read=0, out=0),
            content=[{"type": "text", "text": "No response requested."}],
        ),
    )
    records, parser = parse(lines)
    synthetic = messages(records)[1]
    assert synthetic.usage is None
    assert synthetic.data["synthetic"] is True
    stats = session_stats(records).as_json()
    assert stats["api_calls"] == {"main": 1, "side": 0}
    assert stats["max_context"]["main"] == 3 + 1000 + 90000
    assert parser.info.model == "claude-opus-4-6"  # the synthetic model is never the session model


def test_usage_inside_progress_is_its_subagents_call_and_progress_data_stays_small() -> None:
    # §6.4: agent_progress embeds a subagent message with its own usage, on an isSidechain:false line: a call of
    # that (inline) subagent, carried by the progress line, never a main-chain one.
    huge_history = [{"type": "user", "message": {"content": "x" * 200_000}}] * 5
    progress = {
        "parentUuid": "a1",
        "isSidechain": False,
        "sessionId": SESSION,
        "type": "progress",
        "uuid": "p1",
        "timestamp": "2026-02-12T14:00:01.000Z",
        "toolUseID": "agent_msg_1",
        "parentToolUseID": "toolu_task",
        "data": {
            "type": "agent_progress",
            "agentId": "aac57f5",
            "prompt": "Search hex.pm " * 100,
            "message": assistant("sub1", msg_id="msg_sub", use=usage(read=150000)),
            "normalizedMessages": huge_history,
        },
    }
    records, _ = parse(jsonl(assistant("a1"), progress))
    found = messages(records)
    assert found[1].kind == "bookkeeping" and found[1].role == "meta"
    assert found[1].usage is None and found[1].call_key is None
    assert found[1].data["data"]["type"] == "agent_progress"
    assert found[1].data["data"]["agentId"] == "aac57f5"
    assert len(orjson.dumps(found[1].data)) < 2_000
    carried = found[2]
    assert (carried.agent, carried.kind, carried.line, carried.call_key) == ("aac57f5", "assistant", 2, "msg_sub")
    assert carried.data[CARRIED] == "toolu_task" and carried.usage is not None
    assert session_stats(records).as_json()["api_calls"] == {"main": 1, "side": 1}


# ---------------------------------------------------------------- blocks and kinds (§4)


def test_blocks_are_structured() -> None:
    lines = jsonl(
        assistant(
            "a1",
            content=[
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_r", "name": "Read", "input": {"file_path": "/a.py", "limit": 5}},
            ],
        ),
        user(
            "u1",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_r",
                    "content": [
                        {"type": "text", "text": "line one"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                        {"type": "text", "text": "line two"},
                    ],
                    "is_error": True,
                }
            ],
            parent="a1",
        ),
        user(
            "u2",
            [
                {"type": "text", "text": "look at this"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"}},
            ],
        ),
    )
    found = messages(parse(lines)[0])
    thinking, redacted, text, tool_use = found[0].blocks
    assert (thinking.kind, thinking.text) == ("thinking", "plan")
    assert redacted.kind == "redacted_thinking" and redacted.text == ""
    assert (text.kind, text.text) == ("text", "Reading.")
    assert tool_use.kind == "tool_use"
    assert (tool_use.tool_id, tool_use.tool_name) == ("toolu_r", "Read")
    assert tool_use.tool_input == {"file_path": "/a.py", "limit": 5}
    assert tool_use.text == '{"file_path":"/a.py","limit":5}'  # compact JSON

    result, image = found[1].blocks
    assert found[1].kind == "tool_result"
    assert (result.kind, result.tool_id, result.tool_name) == ("tool_result", "toolu_r", "Read")
    assert result.text == "line one\nline two"
    assert result.is_error is True
    assert (image.kind, image.media_type, image.text) == ("image", "image/png", "")

    assert found[2].kind == "prompt"
    assert [b.kind for b in found[2].blocks] == ["text", "image"]
    assert found[2].blocks[1].media_type == "image/jpeg"
    assert "BBBB" not in repr(found[2])  # image bytes are never kept


def test_string_tool_result_without_known_call_has_no_tool_name() -> None:
    lines = jsonl(user("u1", [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "done"}]))
    (result,) = messages(parse(lines)[0])[0].blocks
    assert (result.text, result.tool_name, result.is_error) == ("done", None, False)


def test_user_kinds() -> None:
    lines = jsonl(
        user("u1", "Fix the bug"),
        user("u2", "<local-command-caveat>Caveat: …</local-command-caveat>", isMeta=True),
        user("u3", "<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>"),
        user("u4", "This session is being continued…", isCompactSummary=True, isVisibleInTranscriptOnly=True),
    )
    found = messages(parse(lines)[0])
    assert [m.kind for m in found] == ["prompt", "injected", "injected", "compact_summary"]
    assert all(m.role == "user" for m in found)
    assert found[3].data["isCompactSummary"] is True


def test_bookkeeping_records_and_session_info() -> None:
    lines = jsonl(
        {"type": "summary", "summary": "Old title", "leafUuid": "x"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {"trackedFileBackups": {}}},
        {"type": "queue-operation", "operation": "enqueue", "content": "next", "timestamp": "2026-02-12T13:59:00.000Z"},
        {"type": "ai-title", "aiTitle": "AI title", "sessionId": SESSION},
        {"type": "summary", "summary": "Later summary title", "leafUuid": "y"},
        assistant("a1", model="claude-haiku-4-5"),
        {**assistant("a2", msg_id="msg_2"), "version": "2.1.40", "timestamp": "2026-02-12T15:00:00.000Z"},
        {"type": "permission-mode", "permissionMode": "default", "sessionId": SESSION},
    )
    records, parser = parse(lines)
    found = messages(records)
    assert [m.kind for m in found] == ["bookkeeping"] * 5 + ["assistant"] * 2 + ["bookkeeping"]
    assert found[2].data == {"operation": "enqueue", "content": "next"}
    assert found[2].raw_type == "queue-operation"
    info = parser.info
    assert info.format == FORMAT
    assert info.session_id == SESSION
    assert info.agent_version == "2.1.40"  # the latest version seen
    assert info.model == "claude-opus-4-6"  # the last real model
    assert info.data["models"] == {"claude-haiku-4-5": 1, "claude-opus-4-6": 1}
    assert info.cwd == "/home/dev/project"
    assert info.title == "AI title"  # an ai-title beats any summary title
    assert (info.started_at, info.ended_at) == ("2026-02-12T13:59:00.000Z", "2026-02-12T15:00:00.000Z")
    assert "partial_last_line" not in info.data
    # version is recorded where it changes, not on every line
    assert found[5].data["version"] == "2.1.39" and found[6].data["version"] == "2.1.40"


def test_custom_title_wins() -> None:
    lines = jsonl(
        {"type": "custom-title", "customTitle": "Mine", "sessionId": SESSION},
        {"type": "ai-title", "aiTitle": "Generated", "sessionId": SESSION},
    )
    assert parse(lines)[1].info.title == "Mine"


def test_unknown_type_is_kept_verbatim() -> None:
    raw = b'{"type":"atis-latch","sessionId":"s","weird":{"deep":[1,2,3]}}'
    no_type = b'{"hello":"world"}'
    records, _ = parse([raw + b"\n", no_type + b"\n"])
    assert not errors(records)
    first, second = messages(records)
    assert (first.kind, first.role, first.raw_type, first.raw) == ("unknown", "meta", "atis-latch", raw.decode())
    assert (second.kind, second.raw) == ("unknown", no_type.decode())


# ---------------------------------------------------------------- context events (§8, §9, §6.4, §11)


def test_compact_boundary_event() -> None:
    boundary = system(
        "b1",
        "compact_boundary",
        content="Conversation compacted",
        logicalParentUuid="last-before",
        compactMetadata={
            "trigger": "auto",
            "preTokens": 155250,
            "postTokens": 5706,
            "preservedSegment": {"headUuid": "h", "anchorUuid": "b1", "tailUuid": "t"},
        },
    )
    records, _ = parse(jsonl(assistant("a1"), boundary))
    (event,) = events(records)
    assert isinstance(records[1], Message) and records[2] is event  # the event follows its message
    assert records[1].raw_type == "system/compact_boundary"
    assert (event.kind, event.trigger, event.pre_tokens, event.post_tokens) == ("compaction", "auto", 155250, 5706)
    assert event.line == 2
    assert event.data["logicalParentUuid"] == "last-before"
    assert event.data["preservedSegment"]["anchorUuid"] == "b1"


def test_compact_boundary_without_metadata_is_not_an_error() -> None:
    # §8.1: Claude Code itself crashed on a boundary lacking compactMetadata; we read all fields as optional.
    records, _ = parse(jsonl(system("b1", "compact_boundary", compactMetadata="nonsense")))
    assert not errors(records)
    (event,) = events(records)
    assert (event.kind, event.trigger, event.pre_tokens, event.post_tokens) == ("compaction", None, None, None)


def test_microcompact_event() -> None:
    ids = [f"toolu_{i}" for i in range(42)]
    boundary = system(
        "m1",
        "microcompact_boundary",
        microcompactMetadata={
            "trigger": "auto",
            "preTokens": 60888,
            "tokensSaved": 21091,
            "compactedToolIds": ids,
            "clearedAttachmentUUIDs": [],
        },
    )
    (event,) = events(parse(jsonl(boundary))[0])
    assert (event.kind, event.trigger, event.pre_tokens, event.tokens_saved) == ("microcompact", "auto", 60888, 21091)
    assert event.tool_ids == ids


def test_microcompact_metadata_wins_over_compact_metadata() -> None:
    # §9: a reported variant carries both keys on one line.
    boundary = system(
        "m1",
        "microcompact_boundary",
        compactMetadata={"trigger": "manual", "preTokens": 1},
        microcompactMetadata={"trigger": "auto", "preTokens": 2, "tokensSaved": 3, "compactedToolIds": ["t"]},
    )
    (event,) = events(parse(jsonl(boundary))[0])
    assert (event.trigger, event.pre_tokens, event.tokens_saved, event.tool_ids) == ("auto", 2, 3, ["t"])


def test_system_api_error_event() -> None:
    notice = system("e1", "api_error", level="error", error={}, retryInMs=534.7, retryAttempt=1, maxRetries=10)
    records, _ = parse(jsonl(notice))
    (event,) = events(records)
    assert event.kind == "api_error"
    assert event.data == {"retryInMs": 534.7, "retryAttempt": 1, "maxRetries": 10}
    assert messages(records)[0].role == "meta" and messages(records)[0].kind == "system"


@pytest.mark.parametrize(
    ("error_text", "kind"),
    [
        ('API Error: 500 {"type":"error","error":{"type":"api_error"},"request_id":"req_01413abc"}', "api_error"),
        ("API Error: 400 prompt is too long: 229651 tokens > 200000 maximum", "overflow"),
        ("API Error: 413 request too large", "overflow"),
        ("Input exceeds the model's context length", "overflow"),
    ],
)
def test_synthetic_api_error_message(error_text: str, kind: str) -> None:
    line = assistant(
        "a1",
        model="<synthetic>",
        use=usage(inp=0, create=0, read=0, out=0),
        content=[{"type": "text", "text": error_text}],
        isApiErrorMessage=True,
        error="unknown",
    )
    (event,) = events(parse(jsonl(line))[0])
    assert event.kind == kind
    assert event.message == error_text
    assert event.data == {"error": "unknown"}


def test_task_and_agent_tool_use_spawn_subagents() -> None:
    task = {
        "type": "tool_use",
        "id": "toolu_task",
        "name": "Task",
        "input": {"description": "Check versions", "prompt": "…", "subagent_type": "general-purpose"},
    }
    agent = {"type": "tool_use", "id": "toolu_agent", "name": "Agent", "input": {"description": "Sweep"}}
    (first, second) = events(parse(jsonl(assistant("a1", content=[task, agent])))[0])
    assert first.kind == second.kind == "subagent_spawn"
    assert first.data == {"tool_id": "toolu_task", "description": "Check versions", "subagent_type": "general-purpose"}
    assert second.data == {"tool_id": "toolu_agent", "description": "Sweep", "subagent_type": None}
    assert session_stats(parse(jsonl(assistant("a1", content=[task])))[0]).events == ()


# ---------------------------------------------------------------- agents (§1)


def test_inline_sidechains_get_their_own_agents() -> None:
    # 1.0.x: two Task sidechains interleaved in the main file, each rooted at a user line with parentUuid null.
    def side(line: dict[str, Any]) -> dict[str, Any]:
        return {**line, "isSidechain": True}

    lines = jsonl(
        user("root-main", "build it"),
        assistant("m1", msg_id="msg_m1", parent="root-main", use=usage(read=10000)),
        side(user("aaaaaaaa-1", "task A")),
        side(user("bbbbbbbb-1", "task B")),
        side(assistant("aaaaaaaa-2", msg_id="msg_a", parent="aaaaaaaa-1", use=usage(read=30000))),
        side(assistant("bbbbbbbb-2", msg_id="msg_b", parent="bbbbbbbb-1", use=usage(read=40000))),
        side(user("aaaaaaaa-3", [{"type": "tool_result", "tool_use_id": "t", "content": "x"}], parent="aaaaaaaa-2")),
        assistant("m2", msg_id="msg_m2", parent="m1", use=usage(read=12000)),
    )
    records, parser = parse(lines)
    agents = [m.agent for m in messages(records)]
    assert agents == [
        MAIN,
        MAIN,
        "sidechain-aaaaaaaa",
        "sidechain-bbbbbbbb",
        "sidechain-aaaaaaaa",
        "sidechain-bbbbbbbb",
        "sidechain-aaaaaaaa",
        MAIN,
    ]
    stats = session_stats(records).as_json()
    assert stats["api_calls"] == {"main": 2, "side": 2}
    assert stats["max_context"] == {"main": 3 + 1000 + 12000, "side": 3 + 1000 + 40000}
    assert parser.info.data["models"] == {"claude-opus-4-6": 2}  # sidechain lines do not vote for the model


def test_subagent_file_keeps_the_given_agent() -> None:
    lines = jsonl(
        {**user("s1", "Warmup"), "isSidechain": True, "agentId": "aac57f5"},
        {**assistant("s2", parent="s1"), "isSidechain": True, "agentId": "aac57f5"},
    )
    records, _ = parse(lines, agent="aac57f5")
    assert [m.agent for m in messages(records)] == ["aac57f5", "aac57f5"]
    assert session_stats(records).as_json()["api_calls"] == {"main": 0, "side": 1}


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("bad_line", "says"),
    [
        (b"this is not json\n", "not valid JSON"),
        (b"[1, 2, 3]\n", "not a JSON object"),
        (b'"a string"\n', "not a JSON object"),
        (orjson.dumps({**assistant("x"), "message": "oops"}) + b"\n", "'message' is not an object"),
        (orjson.dumps({**user("x", "hi"), "message": None}) + b"\n", "'message' is not an object"),
        (orjson.dumps(user("x", 42)) + b"\n", "neither a string nor a list"),
        (orjson.dumps(assistant("x", use=[1, 2])) + b"\n", "'message.usage' is not an object"),
        (orjson.dumps(assistant("x", use={"input_tokens": "ten"})) + b"\n", "'message.usage.input_tokens'"),
        (orjson.dumps(user("x", ["just a string"])) + b"\n", "content block is not an object"),
        (orjson.dumps(user("x", [{"type": "tool_result", "tool_use_id": "t", "content": 7}])) + b"\n", "tool_result"),
    ],
)
def test_bad_line_becomes_a_line_error_and_parsing_continues(bad_line: bytes, says: str) -> None:
    lines = [*jsonl(user("u1", "first")), bad_line, *jsonl(assistant("a1"))]
    records, _ = parse(lines)
    (error,) = errors(records)
    assert error.line == 2
    assert says in error.message
    assert [m.line for m in messages(records)] == [1, 3]


def test_blank_lines_are_skipped_but_counted() -> None:
    lines = [b"\n", *jsonl(user("u1", "hi")), b"   \n", b"\r\n", *jsonl(assistant("a1"))]
    records, _ = parse(lines)
    assert not errors(records)
    assert [m.line for m in messages(records)] == [2, 5]


def test_partial_last_line_is_not_an_error() -> None:
    partial = orjson.dumps(assistant("a2"))[:57]  # Claude Code is still writing this line
    records, parser = parse([*jsonl(user("u1", "hi")), partial])
    assert not errors(records)
    assert len(messages(records)) == 1
    assert parser.info.data["partial_last_line"] == 2


def test_broken_last_line_with_newline_is_an_error() -> None:
    records, parser = parse([*jsonl(user("u1", "hi")), b'{"type": "us\n'])
    (error,) = errors(records)
    assert error.line == 2
    assert "partial_last_line" not in parser.info.data


def test_broken_middle_line_without_newline_is_an_error() -> None:
    # Only the LAST line may be partial; a caller that strips newlines must not hide errors.
    records, _ = parse([b'{"type": "us', orjson.dumps(user("u1", "hi"))])
    (error,) = errors(records)
    assert error.line == 1
    assert [m.line for m in messages(records)] == [2]


def test_complete_last_line_without_newline_is_parsed() -> None:
    records, parser = parse([orjson.dumps(user("u1", "hi"))])
    assert len(messages(records)) == 1
    assert "partial_last_line" not in parser.info.data


def test_first_line_continues_numbering() -> None:
    records, _ = parse(jsonl(user("u1", "hi"), assistant("a1")), first_line=101)
    assert [m.line for m in messages(records)] == [101, 102]


# ---------------------------------------------------------------- real data (SOURCES.md)

# Transcribed from shared/samples/claude-code/SOURCES.md, "API calls main/side", "max context main …,
# sidechain …", "compact_boundary metadata" and "microcompact metadata" of each file's section (the
# overview table gives the spotter session's side numbers with its subagents/ files: "4 sidechain
# calls, max 139,534"). Columns: main calls, side calls, max context main, max context side,
# compactions [(trigger, preTokens)], microcompacts [(trigger, preTokens, tokensSaved, len(compactedToolIds))].

# Event lines named in SOURCES.md's "Why it is here" notes (the api_error retry record of
# entirecli_1e868c83dbb7 is quoted at line 26 in docs/formats/claude-code.md §3.1).
EXPECTED_EVENT_LINES: dict[str, list[tuple[str, int]]] = {
    "entirecli_a6e4c2a0fbd1-0_full.jsonl": [("compaction", 31)],
    "entirecli_7662d755ef9f-2_full.jsonl": [("microcompact", 33), ("compaction", 155)],
    "entirecli_f9f6f611b469-0_full.jsonl": [("microcompact", 371), ("compaction", 372)],
    "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": [("compaction", 1481)],
    "entirecli_adac80fffbb8-0_full.jsonl": [("api_error", 274)],
    "entirecli_1e868c83dbb7-0_full.jsonl": [("api_error", 26)],
}

SAMPLE_FILES = sorted(path.name for path in SAMPLES.glob("*.jsonl"))


def test_expected_table_covers_every_sample() -> None:
    assert SAMPLE_FILES, f"no samples under {SAMPLES}"
    assert set(SAMPLE_FILES) == set(EXPECTED)


def _parse_sample(name: str) -> list[Record]:
    path = SAMPLES / name
    with path.open("rb") as handle:
        records = list(ClaudeCodeParser().parse(handle))
    for agent_file in sorted((SAMPLES / path.stem / "subagents").glob("agent-*.jsonl")):
        with agent_file.open("rb") as handle:
            records.extend(ClaudeCodeParser(agent=agent_file.stem.removeprefix("agent-")).parse(handle))
    return records


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_real_sample_matches_sources(name: str) -> None:
    main_calls, side_calls, max_main, max_side, compactions, microcompacts = EXPECTED[name]
    records = _parse_sample(name)
    assert errors(records) == []
    stats = session_stats(records).as_json()
    assert stats["api_calls"] == {"main": main_calls, "side": side_calls}
    assert stats["max_context"] == {"main": max_main, "side": max_side}
    found = events(records)
    assert [(e.trigger, e.pre_tokens) for e in found if e.kind == "compaction"] == compactions
    assert [
        (e.trigger, e.pre_tokens, e.tokens_saved, len(e.tool_ids)) for e in found if e.kind == "microcompact"
    ] == microcompacts
    if name in EXPECTED_EVENT_LINES:
        assert [(event["kind"], event["line"]) for event in stats["events"]] == EXPECTED_EVENT_LINES[name]


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_real_sample_yields_one_record_per_line(name: str) -> None:
    path = SAMPLES / name
    with path.open("rb") as handle:
        line_count = sum(1 for _ in handle)
    with path.open("rb") as handle:
        records = list(ClaudeCodeParser().parse(handle))
    # A progress line may also carry a subagent's record (CARRIED): one of its own per line besides.
    per_line = Counter(
        r.line for r in records if isinstance(r, LineError) or (isinstance(r, Message) and CARRIED not in r.data)
    )
    assert sorted(per_line) == list(range(1, line_count + 1))
    assert set(per_line.values()) == {1}


def test_spotter_subagent_files_keep_their_agent_ids() -> None:
    records = _parse_sample("spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    agents = Counter(m.agent for m in messages(records) if CARRIED not in m.data)
    # SOURCES.md: agent-aac57f5.jsonl has 40 lines, agent-acompact-946d2b.jsonl has 2, the main file 2385.
    assert agents == {MAIN: 2385, "aac57f5": 40, "acompact-946d2b": 2}
    # The main file's 25 agent_progress lines carry copies of aac57f5's records (the import keeps the file's).
    assert Counter(m.agent for m in messages(records) if CARRIED in m.data) == {"aac57f5": 25}


def test_inline_sidechain_sample_gets_one_agent_per_sidechain_root() -> None:
    # claude-code.md §1: in 1.0.x each inline sidechain starts with a user line whose parentUuid is null.
    name = "ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    with (SAMPLES / name).open("rb") as handle:
        raw = [orjson.loads(line) for line in handle]
    roots = {obj["uuid"] for obj in raw if obj.get("isSidechain") is True and obj.get("parentUuid") is None}
    records = _parse_sample(name)
    sidechains = {m.agent for m in messages(records) if m.agent != MAIN}
    assert sidechains == {f"sidechain-{uuid[:8]}" for uuid in roots}
    # SOURCES.md flags: isSidechain 405 — all of them land in sidechain agents.
    assert sum(1 for m in messages(records) if m.agent != MAIN) == 405
