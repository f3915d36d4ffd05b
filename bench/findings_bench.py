#!/usr/bin/env python3
"""The Findings page at archive scale: 5,000 analysed sessions, their stored findings and compactions.

Generates the sessions as list_bench.py does (no import: the page reads only the stored findings, the compaction
events and the calls either side of each), four findings per session (tool outputs, repeated reads, cache misses,
warning line, with their JSON as the analysis stores it) and 1-3 compactions in 30% of them, each with the calls
before and after it. Then requests the page and its JSON twin in-process with Django's test client (logged in,
DEBUG=0), first and ``--runs`` more, and reports the median and the number of queries, which must not grow with the
sessions.

Target (issue 36, as the Usage page's): <= 200 ms warm for the page and its JSON.

usage: .venv/bin/python bench/findings_bench.py [--backend sqlite|postgres] [--sessions 5000] [--runs 5] [--markdown]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project's packages

from bench import (
    common,  # noqa: E402
    list_bench,  # noqa: E402
)

TARGET_MS = 200.0
POSTGRES_DB = "bench_findings"
KINDS = (
    ("tool_outputs", ("Read", "Bash", "exec_command", "shell")),
    ("repeated_reads", ("files",)),
    ("cache_misses", ("expiry", "prefix_change", "model_switch")),
    ("warning_line", ("warning",)),
)
QUERIES = (
    ("page", "/findings/"),
    ("JSON", "/findings.json"),
    ("one agent", "/findings/?agent=claude-code"),
    ("one kind, by version", "/findings.json?kind=cache_misses&by=version"),
)


def generate(count: int, *, seed: int = 36) -> None:
    from sessions_app import models

    list_bench.generate(count)
    rng = random.Random(seed)
    files = dict(models.SourceFile.objects.values_list("session_id", "id"))
    findings, events, calls = [], [], []
    for session_id, file_id in files.items():
        for rank, (kind, subjects) in enumerate(KINDS, start=1):
            subject = subjects[rng.randrange(len(subjects))]
            cost = None if rng.random() < 0.05 else round(rng.random() * 3, 6)
            data: dict[str, Any] = {
                "kind": kind,
                "subject": subject,
                "title": f"{kind} {subject}",
                "finding": "x" * 300,
                "calls": [rng.randrange(1, 400) for _ in range(5)],
                "fixes": [{"topic": "read_output", "where": "CLAUDE.md", "text": "Read in ranges.", "source": "doc"}],
                "details": [
                    {"subject": f"cmd {i}", "tokens": 1000 * i, "count": i, "cost_usd": 0.01 * i} for i in range(8)
                ],
                "proof": None,
                "cost_usd": cost,
                "tokens": rng.randrange(1_000, 400_000),
                "rank": rank,
            }
            findings.append(
                models.SessionFinding(
                    session_id=session_id,
                    kind=kind,
                    subject=subject,
                    rank=rank,
                    tokens=data["tokens"],
                    cost_usd=cost,
                    data=data,
                )
            )
        if rng.random() < 0.3:
            after = 0
            for seq in range(rng.randrange(1, 4)):
                after += rng.randrange(5, 120)
                events.append(
                    models.ContextEvent(
                        session_id=session_id,
                        file_id=file_id,
                        kind="compaction",
                        seq=seq,
                        line=seq + 1,
                        after_call=after,
                        trigger="auto",
                    )
                )
                for number, context in ((after, 155_000), (after + 1, rng.randrange(30_000, 80_000))):
                    calls.append(
                        models.ApiCall(
                            session_id=session_id,
                            file_id=file_id,
                            number=number,
                            key=f"m{session_id}-{number}",
                            seq=number,
                            line=number,
                            model="claude-opus-4-5-20251101",
                            context=context,
                            cache_read_tokens=context,
                        )
                    )
    models.SessionFinding.objects.bulk_create(findings, batch_size=2000)
    models.ContextEvent.objects.bulk_create(events, batch_size=2000)
    models.ApiCall.objects.bulk_create(calls, batch_size=2000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sessions", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="also print the rows it writes into bench/results.md")
    args = parser.parse_args()
    if args.backend == "postgres" and not common.postgres_reachable():
        print("PostgreSQL does not answer at 127.0.0.1:5432: skipped")
        return 0
    load_start = common.load_average()
    rows = list_bench.run_pages(
        backend=args.backend,
        database=POSTGRES_DB,
        generate=lambda: generate(args.sessions),
        what=f"{args.sessions:,} sessions with findings",
        pages=list(QUERIES),
        runs=args.runs,
    )
    worst = max(rows, key=lambda r: r[3])
    ok = worst[3] <= TARGET_MS
    print(f"worst median: {worst[0]} {worst[3]:.0f} ms; target <= {TARGET_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    print(f"load average at start / end: {load_start} / {common.load_average()}")
    md = [
        f"| Findings page and JSON, {args.sessions:,} analysed sessions ({args.backend}; {len(rows)} requests) | "
        f"worst median {worst[3]:.0f} ms ({worst[0]}), first {max(r[2] for r in rows):.0f} ms, "
        f"{max(r[4] for r in rows)} queries at most | | ≤ {TARGET_MS:.0f} ms warm | {'met' if ok else 'NOT met'} |"
    ]
    common.record_results(
        f"findings_bench.py --backend {args.backend}", md, load=f"{load_start} → {common.load_average()}"
    )
    if args.markdown:
        print("\n".join(["<!-- rows -->", *md]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
