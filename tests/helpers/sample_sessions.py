"""The shared samples as the Django tests import them: the spotter session and its subagent, every sample
grouped with its subagent folder, and a KHAELOR log given usage numbers."""

from __future__ import annotations

import json
from pathlib import Path

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

SPOTTER = CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"


SUBAGENT = "aac57f5"


# Words of that subagent's reply which the main chain never repeats (whole words: PostgreSQL matches tokens).
SUBAGENT_PHRASE = '"I also found references to version"'


# Each Claude Code log with its subagent folder when it has one; the klaude and KHAELOR folders whole.
SAMPLE_GROUPS = [
    [path, *([path.with_suffix("")] if path.with_suffix("").is_dir() else [])]
    for path in sorted(CLAUDE_SAMPLES.glob("*.jsonl"))
] + [[KLAUDE_SAMPLES / "dot-klaude"], [KHAELOR_SAMPLES]]


def import_group(paths: list[Path]) -> list[models.Session]:
    report = services.import_paths(paths=paths)
    assert report.rejected == []
    sessions = list(models.Session.objects.order_by("id"))
    for session in sessions:
        services.estimate_session_tokens(session_id=session.pk)
    return [models.Session.objects.get(pk=s.pk) for s in sessions]


def khaelor_with_usage(path: Path) -> Path:
    """The sample with a ``model.usage`` event after each model response (docs/formats/khaelor.md: optional).

    The sample records no usage, so it has no API call and its only point is its end; with one usage event per
    response the points lie inside it. Seqs are renumbered and the recorded cut follows its events.
    """
    events = [json.loads(line) for line in (KHAELOR_SAMPLES / "ledger-migration.events.jsonl").read_text().splitlines()]
    renumbered: dict[int, int] = {}
    out: list[dict] = []
    previous = ""
    for event in events:
        # A response opens with its thinking (or its text when it has none): the usage event goes first, so each
        # call's tool results follow it, as "after call N" expects.
        opens = event["type"] == "model.thinking-block-completed" or (
            event["type"] == "model.text-block-completed" and previous != "model.thinking-block-completed"
        )
        if opens:
            usage = {"input_tokens": 1000 * len(out), "output_tokens": 50, "requestId": f"req_{len(out)}"}
            out.append({"seq": len(out) + 1, "type": "model.usage", "ts": event["ts"], "payload": usage})
        renumbered[event["seq"]] = len(out) + 1
        out.append({**event, "seq": len(out) + 1})
        previous = event["type"]
    for event in out:
        cut = event["payload"].get("cut") if event["type"] == "context.compacted" else None
        if cut:
            cut["fromSeq"], cut["toSeq"] = renumbered[cut["fromSeq"]], renumbered[cut["toSeq"]]
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in out))
    return path


# How each agent writes a compaction in its file (docs/formats/): a sample holding one of these has a real compaction.
COMPACTION_MARKERS = (b'"compact_boundary"', b'"CompactionEntry"', b'"type":"compacted"', b'"context.compacted"')


def compacted_samples() -> list[Path]:
    """Every shared sample file in which the agent really compacted (main files; a subagent's transcript aside)."""
    files = sorted(CLAUDE_SAMPLES.glob("*.jsonl")) + sorted(CODEX_SAMPLES.glob("*.jsonl"))
    files += sorted(KLAUDE_SAMPLES.glob("dot-klaude/projects/*/sessions/*/events.jsonl"))
    files += sorted(KHAELOR_SAMPLES.glob("*.jsonl"))
    return [path for path in files if any(marker in path.read_bytes() for marker in COMPACTION_MARKERS)]
