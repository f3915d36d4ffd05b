"""An independent reading of a Claude Code log's usage (json only) and its price from genai-prices,
for checking the project's own cost arithmetic."""

from __future__ import annotations

import json
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

from genai_prices import Usage as PackageUsage
from genai_prices import calc_price


def independent_responses(path: Path) -> dict[str, dict[str, Any]]:
    """message.id -> model and usage numbers, read with json only."""
    seen: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as handle:
        for raw in handle:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            payloads = []
            if record.get("type") == "assistant":
                payloads.append(record.get("message"))
            data = record.get("data")
            if record.get("type") == "progress" and isinstance(data, dict) and isinstance(data.get("message"), dict):
                payloads.append(data["message"].get("message"))
            for payload in payloads:
                if not isinstance(payload, dict) or not isinstance(payload.get("usage"), dict) or not payload.get("id"):
                    continue
                usage = payload["usage"]
                if payload["id"] in seen:
                    row = seen[payload["id"]]
                    row["output"] = max(row["output"], usage.get("output_tokens") or 0)
                    continue
                split = usage.get("cache_creation") or {}
                seen[payload["id"]] = {
                    "model": payload.get("model"),
                    "input": usage.get("input_tokens") or 0,
                    "created": usage.get("cache_creation_input_tokens") or 0,
                    "read": usage.get("cache_read_input_tokens") or 0,
                    "output": usage.get("output_tokens") or 0,
                    "one_hour": split.get("ephemeral_1h_input_tokens") or 0,
                }
    return seen


def package_cost(row: dict[str, Any]) -> Decimal:
    """genai-prices' own price of one response (input_tokens there is the whole prompt)."""
    if not (row["input"] or row["created"] or row["read"] or row["output"]):
        return Decimal(0)
    usage = PackageUsage(
        input_tokens=row["input"] + row["created"] + row["read"],
        cache_write_tokens=row["created"],
        cache_write_1h_tokens=row["one_hour"],
        cache_read_tokens=row["read"],
        output_tokens=row["output"],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calc_price(usage, model_ref=row["model"], provider_id="anthropic").total_price
