"""The records as plain JSON data and back (``conversation_to_json`` / ``conversation_from_json``): the stored main
chain of an analysis is this, written by orjson; every field of every record, block and usage comes back."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import fields
from typing import Any, get_args

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcript import (
    CONVERSATION_LAYOUT,
    Block,
    BlockKind,
    Kind,
    Message,
    Role,
    UnknownLayout,
    Usage,
    conversation_from_json,
    conversation_to_json,
    prompt_title,
)

# What JSON holds: orjson writes 64-bit integers and finite floats; object keys are strings.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
optional_text = st.none() | st.text(max_size=20)
counts = st.integers(min_value=0, max_value=2**63 - 1)


def _every_field(cls: type, strategies: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """``cls`` built with a generated value for each of its fields: a field added to the record types and not here
    fails, and one the layout leaves out would not come back (then ``CONVERSATION_LAYOUT`` must move up too)."""
    assert set(strategies) == {f.name for f in fields(cls)}, cls
    return st.builds(cls, **strategies)


usages = _every_field(
    Usage,
    {
        "input_tokens": counts,
        "cache_creation_input_tokens": counts,
        "cache_read_input_tokens": counts,
        "output_tokens": counts,
        "cache_creation_1h_input_tokens": counts,
    },
)
blocks = _every_field(
    Block,
    {
        "kind": st.sampled_from(get_args(BlockKind)),
        "text": st.text(max_size=40),
        "tool_id": optional_text,
        "tool_name": optional_text,
        "tool_input": json_values,
        "is_error": st.booleans(),
        "media_type": optional_text,
    },
)
messages = _every_field(
    Message,
    {
        "line": st.integers(min_value=0, max_value=2**31),
        "role": st.sampled_from(get_args(Role)),
        "kind": st.sampled_from(get_args(Kind)),
        "agent": st.text(max_size=12),
        "blocks": st.lists(blocks, max_size=4),
        "uuid": optional_text,
        "parent_uuid": optional_text,
        "timestamp": optional_text,
        "model": optional_text,
        "call_key": optional_text,
        "usage": st.none() | usages,
        "raw_type": st.text(max_size=20),
        "data": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        "raw": optional_text,
    },
)


@settings(max_examples=150, deadline=None)
@given(conversation=st.lists(messages, max_size=6))
def test_records_come_back_from_their_json_as_they_were(conversation: list[Message]) -> None:
    written = orjson.dumps(conversation_to_json(conversation))  # plain data: orjson needs no default
    assert conversation_from_json(orjson.loads(written)) == conversation


def _three_records() -> list[Message]:
    with_usage = Message(
        line=7,
        role="assistant",
        kind="assistant",
        agent="sub",
        blocks=[
            Block("tool_use", "{}", "t1", "Read", {"path": "a"}, is_error=True, media_type="image/png"),
            Block("text", "x"),
        ],
        uuid="u",
        parent_uuid="p",
        timestamp="2025-01-01T00:00:00Z",
        model="claude",
        call_key="msg_1",
        usage=Usage(1, 2, 3, 4, 5),
        raw_type="assistant",
        data={"row_seq": 3},
        raw="{}",
    )
    return [
        with_usage,
        Message(line=8, role="meta", kind="bookkeeping"),
        Message(8, "user", "prompt", "main", [Block("text", "y")]),
    ]


STORED_LAYOUT_1 = {
    "layout": 1,
    "messages": {
        "line": [7, 8, 8],
        "role": ["assistant", "meta", "user"],
        "kind": ["assistant", "bookkeeping", "prompt"],
        "agent": ["sub", "main", "main"],
        "uuid": ["u", None, None],
        "parent_uuid": ["p", None, None],
        "timestamp": ["2025-01-01T00:00:00Z", None, None],
        "model": ["claude", None, None],
        "call_key": ["msg_1", None, None],
        "raw_type": ["assistant", "", ""],
        "data": [{"row_seq": 3}, {}, {}],
        "raw": ["{}", None, None],
    },
    "blocks_per_message": [2, 0, 1],
    "blocks": {
        "kind": ["tool_use", "text", "text"],
        "text": ["{}", "x", "y"],
        "tool_id": ["t1", None, None],
        "tool_name": ["Read", None, None],
        "tool_input": [{"path": "a"}, None, None],
        "is_error": [True, False, False],
        "media_type": ["image/png", None, None],
    },
    "usage": {
        "input_tokens": [1, None, None],
        "cache_creation_input_tokens": [2, None, None],
        "cache_read_input_tokens": [3, None, None],
        "output_tokens": [4, None, None],
        "cache_creation_1h_input_tokens": [5, None, None],
    },
}


def test_the_stored_layout_reads_back_the_same_records() -> None:
    """Data written with layout 1 reads as these records for as long as the layout is 1: a change to what the
    functions write or read must move ``CONVERSATION_LAYOUT`` up, and then this data is refused."""
    assert CONVERSATION_LAYOUT == 1
    assert conversation_from_json(STORED_LAYOUT_1) == _three_records()
    assert conversation_to_json(_three_records()) == STORED_LAYOUT_1


def _changed(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = copy.deepcopy(STORED_LAYOUT_1)
    change(data)
    return data


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({**STORED_LAYOUT_1, "layout": CONVERSATION_LAYOUT + 1}, id="a later layout"),
        pytest.param({**STORED_LAYOUT_1, "layout": 0}, id="an earlier layout"),
        pytest.param({k: v for k, v in STORED_LAYOUT_1.items() if k != "layout"}, id="no layout"),
        pytest.param([STORED_LAYOUT_1], id="not an object"),
        pytest.param(_changed(lambda d: d["messages"]["raw"].pop()), id="a column cut short"),
        pytest.param(_changed(lambda d: d["usage"].pop("output_tokens")), id="a column missing"),
        pytest.param(_changed(lambda d: d.update(messages=list(d["messages"].values()))), id="columns not by name"),
        pytest.param(_changed(lambda d: d.update(blocks_per_message=[1, 1, 1, 0])), id="one record too many"),
        pytest.param(_changed(lambda d: d.update(blocks_per_message=[2, 0, 2])), id="more blocks than stored"),
        pytest.param(_changed(lambda d: d.update(blocks_per_message=[3, -1, 1])), id="a negative count"),
        pytest.param(_changed(lambda d: d.update(blocks_per_message=None)), id="no counts"),
    ],
)
def test_data_of_another_layout_or_shape_is_refused(data: Any) -> None:
    with pytest.raises(UnknownLayout):
        conversation_from_json(data)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("\n\n  Fix the bug  \nin the parser", "Fix the bug"),
        ("word " * 30, ("word " * 24).strip() + "\u2026"),  # 119 characters: 24 whole words, and the ellipsis
        ("abcdef " * 30, ("abcdef " * 17).strip() + "\u2026"),  # the 18th word would be cut: it is left out
        ("x" * 200, "x" * 119 + "\u2026"),  # one long word (a URL) is cut in it: no word to cut at
        ("", ""),
    ],
)
def test_a_prompt_title_is_its_first_line_cut_at_a_word(text: str, title: str) -> None:
    assert prompt_title(text) == title
