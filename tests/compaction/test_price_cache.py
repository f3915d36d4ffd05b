"""The price cache: a package lookup is kept in a file and read back by the next process, while the
installed genai-prices is the one it came from; a cache written for another installation is ignored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction import costs

MODEL = "claude-opus-4-5-20251101"


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "prices.json"
    costs.use_price_cache(path)
    yield path
    costs.use_price_cache(None)


def test_a_lookup_is_written_and_matches_the_package(cache: Path) -> None:
    found = costs.price_for(MODEL)
    assert found is not None and found.source.startswith("genai-prices")
    stored = json.loads(cache.read_text())
    assert stored["stamp"] and stored["prices"][MODEL]["rates"]["input"] == found.rates.input
    costs.use_price_cache(cache)  # as a new process: only the file is known
    assert costs.price_for(MODEL) == found


def test_the_file_is_what_is_read_while_its_stamp_matches(cache: Path) -> None:
    row = {
        "model": MODEL,
        "rates": {"input": 1.0, "output": 2.0, "cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2.0},
        "source": "written by this test",
        "tier_start": None,
        "tier_rates": None,
    }
    cache.write_text(json.dumps({"stamp": costs._package_stamp(), "prices": {MODEL: row}}))
    costs.use_price_cache(cache)
    price = costs.price_for(MODEL)
    assert price is not None and price.source == "written by this test" and price.rates.output == 2.0
    # Another installation's cache (a different stamp) is not believed.
    cache.write_text(json.dumps({"stamp": "another install", "prices": {MODEL: row}}))
    costs.use_price_cache(cache)
    price = costs.price_for(MODEL)
    assert price is not None and price.source.startswith("genai-prices")
