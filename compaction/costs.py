"""What API calls cost: prices per model and the cache-aware cost of recorded usage.

The one place prices come from. Rates are read from ``genai-prices`` (maintained, dated price data with
cache-read and cache-write prices, 5-minute and 1-hour writes apart, and long-context tiers); an override
table (Django's ``MODEL_PRICES`` setting, passed in by the caller) wins for the models it names, so a
model the package does not know, or a negotiated price, can still be costed. Nothing here imports Django.

Usage is Anthropic-style (``compaction.transcript.Usage``): ``input_tokens`` is the uncached input,
cache creation and cache reads come on top, and the 1-hour part of the cache creation is
``cache_creation_1h_input_tokens`` (Claude Code's ``usage.cache_creation.ephemeral_1h_input_tokens``).
A write whose lifetime the record does not give is priced as a 5-minute write, the API's default.

Long-context tiers (Anthropic: a request above 200k input tokens is priced at the higher rate for all of
its tokens) are applied per request on the request's whole input (uncached + cache writes + cache reads).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from compaction.transcript import ApiCall, Usage

PER_MILLION = 1_000_000
PRICE_FIELDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
# genai-prices field for each of ours.
_PACKAGE_FIELDS = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write_5m": "cache_write_mtok",
    "cache_write_1h": "cache_write_1h_mtok",
}
# Providers asked, in order, for a model: the agents we read talk to Anthropic first.
_PROVIDERS: tuple[str | None, ...] = ("anthropic", None)

PriceOverrides = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float


@dataclass(frozen=True, slots=True)
class Price:
    """A model's rates, the higher rates above ``tier_start`` input tokens, and where they came from."""

    model: str
    rates: Rates
    source: str  # "genai-prices <version>: <provider>/<model id>" or "MODEL_PRICES setting"
    tier_start: int | None = None  # requests with more input tokens than this use ``tier_rates``
    tier_rates: Rates | None = None

    def rates_for(self, input_total: int) -> Rates:
        if self.tier_start is not None and self.tier_rates is not None and input_total > self.tier_start:
            return self.tier_rates
        return self.rates


@dataclass(frozen=True, slots=True)
class Cost:
    """The cost of some usage, in USD, by kind of token."""

    input: float = 0.0
    cache_write_5m: float = 0.0
    cache_write_1h: float = 0.0
    cache_read: float = 0.0
    output: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read + self.output

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            input=self.input + other.input,
            cache_write_5m=self.cache_write_5m + other.cache_write_5m,
            cache_write_1h=self.cache_write_1h + other.cache_write_1h,
            cache_read=self.cache_read + other.cache_read,
            output=self.output + other.output,
        )

    def as_json(self) -> dict[str, float]:
        return {
            "input": round(self.input, 6),
            "cache_write_5m": round(self.cache_write_5m, 6),
            "cache_write_1h": round(self.cache_write_1h, 6),
            "cache_read": round(self.cache_read, 6),
            "output": round(self.output, 6),
            "total": round(self.total, 6),
        }


# ----------------------------------------------------------------------------- prices


def _package_version() -> str:
    from importlib.metadata import version

    return version("genai-prices")


def _rate(value: Any) -> tuple[float, list[tuple[int, float]]]:
    """A genai-prices price as (base rate, [(tier start, rate)]); 0 for a price it does not give."""
    if value is None:
        return 0.0, []
    if isinstance(value, Decimal | int | float):
        return float(value), []
    return float(value.base), [(int(t.start), float(t.price)) for t in value.tiers]


# Reading genai-prices' tables costs 0.3-0.8 s per process (its import and the first lookup build thousands of
# objects), paid by every command and import that shows a cost. What a lookup found is kept in a small file
# (``use_price_cache``), valid while the package's files are the ones it was read from.
_price_cache_path: Path | None = None


def use_price_cache(path: Path | None) -> None:
    """Keep package price lookups in ``path`` (a JSON file) across processes; None: look up every time."""
    global _price_cache_path
    _price_cache_path = path
    _package_price.cache_clear()
    _cached_prices.cache_clear()


@functools.lru_cache(maxsize=1)
def _package_stamp() -> str:
    """Which genai-prices is installed, without importing it: its data file's path, size and time."""
    spec = importlib.util.find_spec("genai_prices")
    if spec is None or spec.origin is None:
        return ""
    data = Path(spec.origin).with_name("data.py")
    stat = (data if data.exists() else Path(spec.origin)).stat()
    return f"{spec.origin}:{stat.st_size}:{stat.st_mtime_ns}"


@functools.lru_cache(maxsize=1)
def _cached_prices() -> dict[str, Any]:
    if _price_cache_path is None:
        return {}
    try:
        stored = json.loads(_price_cache_path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict) or stored.get("stamp") != _package_stamp():
        return {}
    prices = stored.get("prices")
    return prices if isinstance(prices, dict) else {}


def _price_from_json(row: dict[str, Any]) -> Price:
    tier = row.get("tier_rates")
    return Price(
        model=row["model"],
        rates=Rates(**row["rates"]),
        source=row["source"],
        tier_start=row.get("tier_start"),
        tier_rates=Rates(**tier) if tier else None,
    )


def _price_to_json(price: Price) -> dict[str, Any]:
    def rates(r: Rates) -> dict[str, float]:
        return {name: getattr(r, name) for name in PRICE_FIELDS}

    return {
        "model": price.model,
        "rates": rates(price.rates),
        "source": price.source,
        "tier_start": price.tier_start,
        "tier_rates": rates(price.tier_rates) if price.tier_rates else None,
    }


def _remember(model: str, price: Price | None) -> None:
    if _price_cache_path is None:
        return
    prices = dict(_cached_prices())
    prices[model] = _price_to_json(price) if price is not None else None
    try:
        _price_cache_path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole and renamed: a concurrent reader sees the old file or the new one, never half of one.
        with tempfile.NamedTemporaryFile("w", dir=_price_cache_path.parent, delete=False, suffix=".tmp") as out:
            json.dump({"stamp": _package_stamp(), "prices": prices}, out)
        os.replace(out.name, _price_cache_path)
    except OSError:
        return  # no cache this time; the next lookup asks the package again
    _cached_prices.cache_clear()


@functools.lru_cache(maxsize=256)
def _package_price(model: str) -> Price | None:
    cached = _cached_prices()
    if model in cached:
        row = cached[model]
        try:
            return _price_from_json(row) if row is not None else None
        except (KeyError, TypeError):
            pass  # a cache written by another version of this code: look up again
    price = _lookup_package_price(model)
    _remember(model, price)
    return price


def _lookup_package_price(model: str) -> Price | None:
    from genai_prices import Usage as PackageUsage
    from genai_prices import calc_price

    for provider in _PROVIDERS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = calc_price(PackageUsage(input_tokens=1), model_ref=model, provider_id=provider)
        except (LookupError, ValueError):
            continue
        table = found.model_price
        base: dict[str, float] = {}
        tiers: dict[str, list[tuple[int, float]]] = {}
        for ours, theirs in _PACKAGE_FIELDS.items():
            base[ours], tiers[ours] = _rate(getattr(table, theirs, None))
        # A 1-hour write the package prices at nothing is a price it does not know: the 5-minute one stands in.
        if not base["cache_write_1h"]:
            base["cache_write_1h"], tiers["cache_write_1h"] = base["cache_write_5m"], tiers["cache_write_5m"]
        starts = {start for rows in tiers.values() for start, _ in rows}
        tier_start = min(starts) if starts else None
        tier_rates = None
        if tier_start is not None:
            tier_rates = Rates(
                **{
                    name: next((rate for start, rate in tiers[name] if start == tier_start), base[name])
                    for name in PRICE_FIELDS
                }
            )
        return Price(
            model=model,
            rates=Rates(**base),
            source=f"genai-prices {_package_version()}: {found.provider.id}/{found.model.id}",
            tier_start=tier_start,
            tier_rates=tier_rates,
        )
    return None


def _override_price(model: str, row: Mapping[str, Any]) -> Price:
    missing = [name for name in ("input", "output") if name not in row]
    if missing:
        raise ValueError(f"MODEL_PRICES[{model!r}] needs {' and '.join(missing)} (USD per million tokens).")
    values = {name: float(row[name]) for name in ("input", "output")}
    values["cache_read"] = float(row.get("cache_read", 0))
    values["cache_write_5m"] = float(row.get("cache_write_5m", values["input"]))
    values["cache_write_1h"] = float(row.get("cache_write_1h", values["cache_write_5m"]))
    note = row.get("note")
    source = "MODEL_PRICES setting" + (f": {note}" if note else "")
    return Price(model=model, rates=Rates(**values), source=source)


def price_for(model: str | None, *, overrides: PriceOverrides | None = None) -> Price | None:
    """The price of ``model``: the override when it names the model, else genai-prices; None when neither does."""
    if not model:
        return None
    if overrides and model in overrides:
        return _override_price(model, overrides[model])
    return _package_price(model)


# ----------------------------------------------------------------------------- costs


def usage_cost(usage: Usage, *, price: Price) -> Cost:
    """The cost of one request's recorded usage."""
    return Cost(*_cost_parts(usage, price))


def _cost_parts(usage: Usage, price: Price) -> tuple[float, float, float, float, float]:
    """``usage_cost``'s amounts, in ``Cost``'s field order (a session sums thousands without making a Cost each)."""
    input_total = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    rates = price.rates_for(input_total)
    one_hour = min(max(usage.cache_creation_1h_input_tokens, 0), usage.cache_creation_input_tokens)
    five_minutes = usage.cache_creation_input_tokens - one_hour
    return (
        usage.input_tokens * rates.input / PER_MILLION,
        five_minutes * rates.cache_write_5m / PER_MILLION,
        one_hour * rates.cache_write_1h / PER_MILLION,
        usage.cache_read_input_tokens * rates.cache_read / PER_MILLION,
        usage.output_tokens * rates.output / PER_MILLION,
    )


def exact_cost(usage: Usage, *, rates: Rates) -> Decimal:
    """``usage_cost``'s total at ``rates``, in exact decimal arithmetic (each rate as the decimal it is written as).

    Sums of exact costs do not depend on their order: a session's total and the totals of its calls grouped any other
    way (by day, model, subagent: sessions_app/selectors/usage.py) round to the same cents, where float sums taken in
    two orders can round a half-way amount apart."""
    one_hour = min(max(usage.cache_creation_1h_input_tokens, 0), usage.cache_creation_input_tokens)
    micro = (
        usage.input_tokens * _decimal(rates.input)
        + (usage.cache_creation_input_tokens - one_hour) * _decimal(rates.cache_write_5m)
        + one_hour * _decimal(rates.cache_write_1h)
        + usage.cache_read_input_tokens * _decimal(rates.cache_read)
        + usage.output_tokens * _decimal(rates.output)
    )
    return micro / PER_MILLION


@functools.lru_cache(maxsize=1024)
def _decimal(rate: float) -> Decimal:
    return Decimal(repr(rate))


def round_usd(amount: Decimal) -> float:
    """An exact amount as the USD figure every page shows: 6 decimals, half to even."""
    return float(amount.quantize(USD_QUANTUM, rounding=ROUND_HALF_EVEN))


USD_QUANTUM = Decimal("0.000001")


def call_cost(usage: Usage, *, model: str | None, overrides: PriceOverrides | None = None) -> Cost | None:
    """The cost of one API call, or None when no price is known for its model."""
    price = price_for(model, overrides=overrides)
    return usage_cost(usage, price=price) if price is not None else None


def exact_call_cost(usage: Usage, *, model: str | None, overrides: PriceOverrides | None = None) -> Decimal | None:
    """``call_cost``'s total in exact arithmetic (``exact_cost`` at the call's tier), or None without a price: running
    sums of these round as the session's own total (``CostTally``) does."""
    price = price_for(model, overrides=overrides)
    if price is None:
        return None
    return exact_cost(usage, rates=price.rates_for(usage.context))


def tokens_cost(tokens: int, *, kind: str, model: str | None, overrides: PriceOverrides | None = None) -> float | None:
    """What ``tokens`` of one kind (a field of ``Rates``) cost at the model's base rate; None without a price."""
    price = price_for(model, overrides=overrides)
    if price is None:
        return None
    return tokens * float(getattr(price.rates, kind)) / PER_MILLION


@dataclass(slots=True)
class ModelCost:
    model: str
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: Cost | None = None  # None: no price known for the model
    source: str = ""
    exact: Decimal | None = None  # the model's total in exact arithmetic, as ``SessionCost.exact``

    @property
    def total_usd(self) -> float | None:
        """The model's cost as the session's total is rounded (exact, once), or None without a price."""
        if self.cost is None:
            return None
        return round_usd(self.exact) if self.exact is not None else round(self.cost.total, 6)


@dataclass(slots=True)
class SessionCost:
    """Usage and cost of a set of calls, in total and per model; ``unpriced`` lists models without a price."""

    usage: Usage
    cost: Cost
    by_model: list[ModelCost]
    unpriced: list[str]
    exact: Decimal | None = None  # the total in exact arithmetic (``exact_cost``), which total_usd rounds

    @property
    def total_usd(self) -> float | None:
        """The total, or None when some calls could not be priced (a partial sum would mislead)."""
        if self.unpriced:
            return None
        return round_usd(self.exact) if self.exact is not None else round(self.cost.total, 6)

    @property
    def priced_usd(self) -> float:
        """What the priced calls cost (all of them when none is unpriced: then ``total_usd``)."""
        return round_usd(self.exact) if self.exact is not None else round(self.cost.total, 6)

    def as_json(self) -> dict[str, Any]:
        return {
            "usage": usage_json(self.usage),
            "cost_usd": self.total_usd,
            # The parts are float sums; their total is the session's own (exact), so the two never differ.
            "cost": {**self.cost.as_json(), "total": self.priced_usd},
            "by_model": [
                {
                    "model": row.model,
                    "calls": row.calls,
                    "usage": usage_json(row.usage),
                    "cost_usd": row.total_usd,
                    "price_source": row.source,
                }
                for row in self.by_model
            ],
            "unpriced_models": list(self.unpriced),
        }


def usage_json(usage: Usage) -> dict[str, int]:
    """The usage totals ``session_stats --json`` reports (cache creation split by lifetime where recorded)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_tokens": usage.cache_creation_input_tokens,
        "cache_creation_1h_tokens": usage.cache_creation_1h_input_tokens,
        "cache_read_tokens": usage.cache_read_input_tokens,
    }


def add_usage(total: Usage, usage: Usage) -> None:
    total.input_tokens += usage.input_tokens
    total.cache_creation_input_tokens += usage.cache_creation_input_tokens
    total.cache_read_input_tokens += usage.cache_read_input_tokens
    total.output_tokens += usage.output_tokens
    total.cache_creation_1h_input_tokens += usage.cache_creation_1h_input_tokens


def session_cost(calls: Iterable[ApiCall], *, overrides: PriceOverrides | None = None) -> SessionCost:
    """Total usage and cost of ``calls`` (each API response once), and the same per model.

    Only a call's ``model`` and ``usage`` count; a call without usage has nothing to price and is left out.
    """
    tally = CostTally(overrides=overrides)
    for call in calls:
        tally.add(call)
    return tally.result()


class CostTally:
    """``session_cost`` a call at a time: what it sums, without the calls (an import tallies the calls it stores
    as it stores them, and keeps none)."""

    def __init__(self, *, overrides: PriceOverrides | None = None) -> None:
        self._overrides = overrides
        self._usage = Usage()
        # Cost's fields, summed call by call (the same additions, in the same order, as Cost + Cost).
        self._total = [0.0] * 5
        self._rows: dict[str, ModelCost] = {}
        self._sums: dict[str, list[float]] = {}  # per priced model, as ``_total``
        self._prices: dict[str, Price | None] = {}
        # Token sums per priced model and rate tier, costed exactly once at the end (``exact_cost``).
        self._tiers: dict[tuple[str, Price, bool], Usage] = {}

    def add(self, call: ApiCall) -> None:
        usage = call.usage
        if usage is None:
            return
        name = call.model or "unknown model"
        row = self._rows.get(name)
        if row is None:
            price = self._prices[name] = price_for(call.model, overrides=self._overrides)
            row = self._rows[name] = ModelCost(model=name, source=price.source if price else "")
            if price is not None:
                self._sums[name] = [0.0] * 5
        row.calls += 1
        add_usage(row.usage, usage)
        add_usage(self._usage, usage)
        price = self._prices[name]
        if price is not None:
            long_context = price.tier_start is not None and usage.context > price.tier_start
            tier = self._tiers.get((name, price, long_context))
            if tier is None:
                tier = self._tiers[(name, price, long_context)] = Usage()
            add_usage(tier, usage)
            parts = _cost_parts(usage, price)
            row_sum = self._sums[name]
            total = self._total
            for i, amount in enumerate(parts):
                row_sum[i] += amount
                total[i] += amount

    def result(self) -> SessionCost:
        rows = self._rows
        for name, row_sum in self._sums.items():
            rows[name].cost = Cost(*row_sum)
        # Calls with no tokens at all (Claude Code's <synthetic> replies) cost nothing whatever their model.
        unpriced = sorted(r.model for r in rows.values() if r.cost is None and r.usage.context + r.usage.output_tokens)
        # Exact per model, and the total their sum (a result may be asked for again as calls keep coming).
        per_model: dict[str, Decimal] = {}
        for (name, price, long), usage in self._tiers.items():
            amount = exact_cost(usage, rates=tier_rates(price, long_context=long))
            per_model[name] = per_model.get(name, Decimal(0)) + amount
        for name, row in rows.items():
            row.exact = per_model.get(name)
        exact = sum(per_model.values(), Decimal(0))
        return SessionCost(
            usage=self._usage,
            cost=Cost(*self._total),
            exact=exact,
            by_model=sorted(rows.values(), key=lambda r: r.cost.total if r.cost else 0.0, reverse=True),
            unpriced=unpriced,
        )


def tier_rates(price: Price, *, long_context: bool) -> Rates:
    """The rates of ``price`` for a request above its tier (``long_context``) or not, as ``Price.rates_for``."""
    if long_context and price.tier_rates is not None:
        return price.tier_rates
    return price.rates


def format_usd(amount: float | None) -> str:
    """ "$12.34", "$0.0042" for small amounts, "no price" for None."""
    if amount is None:
        return "no price"
    if amount and abs(amount) < 0.01:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"
