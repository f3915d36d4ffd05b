"""The display filters: thousands separators inside a sentence the product wrote, a peak bar's level, a title cut at
a word."""

from __future__ import annotations

import pytest

from sessions_app import models
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.templatetags.display import cut_words, separators


def test_separators_group_bare_counts_and_leave_versions_dates_and_ids_alone():
    assert (
        separators("autoCompact.ts formula: window=200000 - 32000") == "autoCompact.ts formula: window=200,000 - 32,000"
    )
    assert separators("Claude Code 2.0.76 on 2026-02-23, id 019c8a4c, #12345, 12:30:45") == (
        "Claude Code 2.0.76 on 2026-02-23, id 019c8a4c, #12345, 12:30:45"
    )
    assert separators("999 and 1000.") == "999 and 1,000."


@pytest.mark.django_db
def test_a_peak_near_the_window_is_danger_even_without_agent_lines():
    session = models.Session(format="khaelor", peak_context=195_326, context_window=200_000)
    assert threshold_selectors.peak_level(session=session, bands={}) == "danger"
    assert threshold_selectors.peak_level(session=session, bands={"warning": 150_000, "autocompact": 196_000}) == "warn"
    session.peak_context = 20_000
    assert threshold_selectors.peak_level(session=session, bands={}) == "ok"


def test_a_title_is_shortened_at_a_word():
    title = "Migrate the ledger service from SQLAlchemy to the new async engine"
    assert cut_words(title, 40) == "Migrate the ledger service from\u2026"
    assert cut_words(title, 200) == title
