"""Writes ``klaude_2_8_1.jsonl.gz``: what the real klaude-code 2.8.1 decides on every generated session (and
``klaude_2_8_1_samples.jsonl.gz``: the same on the real samples in ../shared/samples/klaude-code, fingerprints only).

Not part of the test suite and not importable without klaude-code. Run it from the repository root with a
virtualenv that has the package (it needs Python >= 3.13; keep it outside the project):

    ~/.pyenv/versions/3.13.0/bin/python -m venv /work/klaude-venv
    /work/klaude-venv/bin/pip install klaude-code==2.8.1 httpx  # its Anthropic provider imports httpx, unlisted
    /work/klaude-venv/bin/python -m tests.compaction.goldens.klaude.regenerate

For each session of ``sessions.py`` it writes ``events.jsonl`` and ``meta.json`` where klaude keeps them, loads
them with ``Session.load`` (``JsonlSessionStore.load_history``: ``str.splitlines()``, ``decode_jsonl_line``), and at
every checkpoint of the history records:

- ``should_compact_threshold`` (core/compaction/compaction.py) and the tokens and limit it compared, and whether
  core/task.py acts on it (only when ``sub_agent_state`` is None);
- ``run_compaction`` with a stand-in LLM client whose reply is ``sessions.fake_reply`` of the request: the error,
  or the first kept index, tokens_before, the file details, kept_items_brief, each summarizer request's
  fingerprint (``sessions.request_sha256``: system prompt, the user message's text parts, max_tokens), the body
  klaude's Anthropic provider sends for it (``llm/anthropic/client.py build_payload`` after
  ``apply_config_defaults``, less ``betas``, which the SDK sends as the ``anthropic-beta`` header: its
  ``sessions.body_sha256``), the stored summary and ``Session.get_llm_history`` once the entry is appended.

The goldens keep 16-hex fingerprints, not texts, so the file stays small; the test recomputes the same
fingerprints from the project's own output.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from . import sessions

GOLDEN = Path(__file__).with_name("klaude_2_8_1.jsonl.gz")
SAMPLES_GOLDEN = Path(__file__).with_name("klaude_2_8_1_samples.jsonl.gz")
# The real klaude-code sessions every real-data test reads (../shared/samples from the checkout root).
SAMPLES = Path(__file__).resolve().parents[4].parent / "shared" / "samples" / "klaude-code"
TYPE_LETTERS = {
    "UserMessage": "U",
    "DeveloperMessage": "D",
    "SystemMessage": "S",
    "AssistantMessage": "A",
    "ToolResultMessage": "T",
    "StreamErrorItem": "E",
    "TaskMetadataItem": "M",
    "CompactionEntry": "C",
}
LETTER_TYPES = {letter: name for name, letter in TYPE_LETTERS.items()}


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="klaude-goldens-"))
    (home / "work").mkdir()
    os.environ["HOME"] = str(home)
    os.chdir(home / "work")

    from importlib.metadata import version

    import klaude_code.core.compaction.compaction as kc  # type: ignore[import-not-found]
    from klaude_code.const import project_key_from_cwd  # type: ignore[import-not-found]
    from klaude_code.core.compaction.prompts import TASK_PREFIX_SUMMARIZATION_PROMPT  # type: ignore[import-not-found]
    from klaude_code.llm import LLMClientABC  # type: ignore[import-not-found]
    from klaude_code.llm.anthropic.client import build_payload  # type: ignore[import-not-found]
    from klaude_code.llm.input_common import apply_config_defaults  # type: ignore[import-not-found]
    from klaude_code.protocol import llm_param, message  # type: ignore[import-not-found]
    from klaude_code.session.codec import decode_jsonl_line  # type: ignore[import-not-found]
    from klaude_code.session.session import Session  # type: ignore[import-not-found]

    assert version("klaude-code") == "2.8.1", version("klaude-code")

    class StandIn(LLMClientABC):  # type: ignore[misc]
        """Records each request and answers ``sessions.fake_reply`` of it."""

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.requests: dict[str, str] = {}
            self.bodies: dict[str, str] = {}
            self.betas: list[str] = []

        @classmethod
        def create(cls, config: Any) -> StandIn:
            return cls(config)

        async def call(self, param: Any) -> AsyncIterator[Any]:
            assert len(param.input) == 1 and isinstance(param.input[0], message.UserMessage)
            parts = [part.text for part in param.input[0].parts]
            sha = sessions.request_sha256(system=param.system, parts=parts, max_tokens=param.max_tokens)
            if parts[-1] == TASK_PREFIX_SUMMARIZATION_PROMPT:
                kind = "task_prefix"
            elif any(part.startswith("\n\n<previous-summary>") for part in parts):
                kind = "update_history"
            else:
                kind = "history"
            assert kind not in self.requests
            self.requests[kind] = sha
            # What AnthropicClient.call would send for this request (its own payload builder), as JSON.
            payload = dict(build_payload(apply_config_defaults(param.model_copy(deep=True), self.get_llm_config())))
            self.betas = list(payload.pop("betas"))
            self.bodies[kind] = sessions.body_sha256(json.loads(json.dumps(payload, default=str)))

            async def stream() -> AsyncIterator[Any]:
                yield message.AssistantMessage(parts=[message.TextPart(text=sessions.fake_reply(sha))])

            return stream()

    sessions_dir = home / ".klaude" / "projects" / project_key_from_cwd() / "sessions"

    def record(sid: str, events: bytes, meta: dict[str, Any] | None, config_limit: int | None) -> dict[str, Any]:
        """Everything klaude decides on one session (see the module docstring)."""
        folder = sessions_dir / sid
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_bytes(events)
        if meta is not None:
            (folder / "meta.json").write_text(json.dumps(meta))
        loaded = Session.load(sid)
        history = list(loaded.conversation_history)
        physical = events.split(b"\n")
        if physical and physical[-1] == b"":
            physical.pop()
        per_line = [
            sum(1 for piece in line.decode("utf-8").splitlines() if decode_jsonl_line(piece) is not None)
            for line in physical
        ]
        assert sum(per_line) == len(history), sid  # the line-by-line reading is the loader's
        config = llm_param.LLMConfigParameter(
            protocol=llm_param.LLMClientProtocol.ANTHROPIC, model_id=sessions.MODEL, context_limit=config_limit
        )
        checkpoints: list[list[Any]] = []
        for end in sessions.checkpoints([type(item).__name__ for item in history]):
            loaded.conversation_history = history[:end]
            over = kc.should_compact_threshold(session=loaded, config=None, llm_config=config)
            # the numbers should_compact_threshold compared (its own body, compaction.py)
            limit = config.context_limit or kc._get_last_context_limit(loaded)
            tokens = kc._get_last_context_tokens(loaded)
            if tokens is None or kc._has_compaction_after_last_successful_usage(loaded):
                tokens = kc._estimate_history_tokens(loaded.get_llm_history())
            client = StandIn(config)
            try:
                result = asyncio.run(
                    kc.run_compaction(
                        session=loaded,
                        reason=kc.CompactionReason.THRESHOLD,
                        focus=None,
                        llm_client=client,
                        llm_config=config,
                    )
                )
            except ValueError as exc:
                checkpoints.append([end, int(over), tokens, limit, str(exc)])
                continue
            entry = result.to_entry()
            loaded.conversation_history = [*history[:end], entry]
            view = [next((i for i, h in enumerate(loaded.conversation_history) if h is item), None)
                    for item in loaded.get_llm_history()]  # fmt: skip
            assert client.betas == sessions.ANTHROPIC_BETAS or not client.bodies, client.betas
            checkpoints.append(
                [
                    end,
                    int(over),
                    tokens,
                    limit,
                    {
                        "first_kept": result.first_kept_index,
                        "tokens_before": result.tokens_before,
                        "details": sessions.short(result.details.model_dump(mode="json")),
                        "brief": sessions.short([b.model_dump(mode="json") for b in result.kept_items_brief]),
                        "requests": {kind: sha[:16] for kind, sha in sorted(client.requests.items())},
                        "bodies": {kind: sha[:16] for kind, sha in sorted(client.bodies.items())},
                        "summary": sessions.short(result.summary),
                        "view": sessions.short(view),
                    },
                ]
            )
        meta_bytes = json.dumps(meta, sort_keys=True).encode() if meta is not None else b"-"
        return {
            "config_limit": config_limit,
            "sub_agent": loaded.sub_agent_state is not None,
            "items": "".join(TYPE_LETTERS[type(item).__name__] for item in history),
            "estimates": [kc._estimate_tokens(item) if isinstance(item, message.Message) else 0 for item in history],
            "items_per_line": per_line,
            "checkpoints": checkpoints,
            "input_sha256": hashlib.sha256(events + b"\0" + meta_bytes).hexdigest(),
        }

    out: list[str] = []
    for session in sessions.all_sessions():
        found = record(f"s{session.seed:04d}", session.events, session.meta, session.config_limit)
        # Our model of the loader (sessions.py) must be klaude's, line by line.
        assert found["items_per_line"] == session.items_per_line, session.seed
        assert [LETTER_TYPES[letter] for letter in found["items"]] == session.item_types, session.seed
        found["input_sha256"] = session.sha256
        out.append(json.dumps({"seed": session.seed, "scenario": session.scenario, **found}, separators=(",", ":")))
        print(session.seed, session.scenario, len(found["items"]), "items", file=sys.stderr)
    write(GOLDEN, out, generator_version=sessions.GENERATOR_VERSION)

    # The real samples (not copied here: only what klaude decides on them), with the limit their usage recorded,
    # which is the model config's (llm/usage.py copies it into every usage).
    samples: list[str] = []
    for folder in sorted(SAMPLES.glob("dot-klaude/projects/*/sessions/*")):
        events = (folder / "events.jsonl").read_bytes()
        meta_path = folder / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
        limits = [
            item["data"]["usage"]["context_limit"]
            for item in map(json.loads, filter(None, events.splitlines()))
            if item.get("type") == "AssistantMessage" and (item["data"].get("usage") or {}).get("context_limit")
        ]
        found = record(f"sample-{folder.name}", events, meta, limits[-1] if limits else None)
        samples.append(json.dumps({"sample": str(folder.relative_to(SAMPLES)), **found}, separators=(",", ":")))
        print(folder.name, len(found["items"]), "items", file=sys.stderr)
    write(SAMPLES_GOLDEN, samples, generator_version=None)


def write(path: Path, lines: list[str], *, generator_version: int | None) -> None:
    header = {
        "generated_with": "klaude-code 2.8.1 (Session.load, should_compact_threshold, run_compaction)",
        "generator_version": generator_version,
        "sessions": len(lines),
    }
    with gzip.GzipFile(path, "wb", mtime=0) as handle:
        handle.write(("\n".join([json.dumps(header), *lines]) + "\n").encode())


if __name__ == "__main__":
    main()
