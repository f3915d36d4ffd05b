"""One parse of the search syntax: the query looks for what it says, and a page marks only what the query looked for."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from sessions_app.search_syntax import SearchQuery, parse_query
from sessions_app.selectors.search import snippet
from sessions_app.templatetags.search import highlight

_MARK = re.compile(r'<mark class="hit">(.*?)</mark>', re.DOTALL)


def marks(text: str, q: str) -> list[str]:
    """What the highlighter marks in ``text`` for ``q``, as the text had it."""
    return [html.unescape(found) for found in _MARK.findall(highlight(text, q))]


@pytest.mark.parametrize(
    ("q", "parsed"),
    [
        ("git status", SearchQuery(groups=(("git",), ("status",)), excluded=())),
        ('"shadow branch"', SearchQuery(groups=(("shadow branch",),), excluded=(), phrase="shadow branch")),
        ("a or b c", SearchQuery(groups=(("a", "b"), ("c",)), excluded=())),
        ("a OR b", SearchQuery(groups=(("a", "b"),), excluded=())),
        ('x -y -"z w"', SearchQuery(groups=(("x",),), excluded=("y", "z w"))),
        ("or x or", SearchQuery(groups=(("x",),), excluded=())),  # an "or" with nothing on one side is dropped
        ('"or"', SearchQuery(groups=(("or",),), excluded=(), phrase="or")),  # quoted, it is a word to find
        ('"a" "b"', SearchQuery(groups=(("a",), ("b",)), excluded=())),  # two phrases are not one phrase
        ("*** -", SearchQuery(groups=(), excluded=())),
    ],
)
def test_the_syntax_is_read_into_groups_exclusions_and_the_phrase(q: str, parsed: SearchQuery) -> None:
    assert parse_query(q) == parsed


def test_the_highlighter_does_not_mark_the_or_operator() -> None:
    assert marks("either this or that", "this or that") == ["this", "that"]
    assert marks("this OR that", "this OR that") == ["this", "that"]


def test_the_highlighter_does_not_mark_the_words_of_an_excluded_phrase_or_word() -> None:
    text = "keep the red herring and the decoy out"
    assert marks(text, 'keep -"red herring"') == ["keep"]
    assert marks(text, "keep -decoy") == ["keep"]
    assert marks(text, '-"red herring" -decoy') == []


def test_a_quoted_phrase_is_marked_whole_and_a_quoted_or_is_a_word() -> None:
    assert marks("Then I also found references to version 2.", '"I also found references to version"') == [
        "I also found references to version"
    ]
    assert marks("this or that", '"or"') == ["or"]


def test_a_snippet_centres_on_a_searched_word_not_on_an_excluded_one() -> None:
    text = "the red herring comes first, " + "filler " * 30 + "then the word to keep"
    assert snippet(text, parse_query('keep -"red herring"')).match == "keep"
    assert snippet(text, parse_query("first or keep")).match == "first"


_WORD = st.text(alphabet="abcxyzOR", min_size=1, max_size=6)
_PIECE = st.one_of(
    _WORD,
    st.sampled_from(["or", "OR", "Or", "-", '"', "-or", '"or"', "***", "a-b", "x.y"]),
    _WORD.map(lambda w: f"-{w}"),
    st.lists(_WORD, min_size=1, max_size=3).map(lambda ws: '"' + " ".join(ws) + '"'),
    st.lists(_WORD, min_size=1, max_size=3).map(lambda ws: '-"' + " ".join(ws) + '"'),
    st.lists(_WORD, min_size=1, max_size=3).map(lambda ws: '"' + " ".join(ws)),  # a phrase never closed
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECE, max_size=6), noise=st.text(alphabet='abOR "-', max_size=12))
def test_every_marked_term_is_a_positive_term_of_the_parsed_query(pieces: list[str], noise: str) -> None:
    q = " ".join(pieces) + noise
    # A text holding every word the query names, the excluded and the operators too, and the query itself.
    text = " ".join(re.findall(r"\w+", q)) + " | " + q
    positive = {item.lower() for item in parse_query(q).positive}
    assert {found.lower() for found in marks(text, q)} <= positive
