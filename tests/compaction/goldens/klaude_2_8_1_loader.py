"""Writes what klaude-code 2.8.1's own loader reads from an exported events.jsonl (the golden beside this file).

Run with klaude-code 2.8.1 importable under Python 3.13 (it is not a dependency of this project):

    python -m tests.compaction.test_export_klaude_golden /tmp/export/events.jsonl    # our export (main venv)
    PYTHONPATH=<klaude-code 2.8.1 wheel, unpacked> python3.13 tests/compaction/goldens/klaude_2_8_1_loader.py \
        /tmp/export/events.jsonl tests/compaction/goldens/klaude_export_compacted_at_call_12.json

It loads the file as ``klaude --resume`` does (``JsonlSessionStore.load_history``, the codec's
``decode_jsonl_line``) and records, with ``Session.get_llm_history``, the history klaude would send to its model
right after the exported compaction entry and at the end of the session.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def main(export: Path, golden: Path) -> None:
    home = Path(tempfile.mkdtemp())
    work = home / "work"
    work.mkdir()
    os.environ["HOME"] = str(home)
    os.chdir(work)
    from klaude_code.const import project_key_from_cwd  # type: ignore[import-not-found]
    from klaude_code.protocol import message  # type: ignore[import-not-found]
    from klaude_code.session.session import Session  # type: ignore[import-not-found]

    session_id = "exported"
    folder = home / ".klaude" / "projects" / project_key_from_cwd() / "sessions" / session_id
    folder.mkdir(parents=True)
    shutil.copy(export, folder / "events.jsonl")
    session = Session.load(session_id)
    history = list(session.conversation_history)
    lines = [line for line in export.read_text(encoding="utf-8").splitlines() if line.strip()]
    entries = [i for i, item in enumerate(history) if isinstance(item, message.CompactionEntry)]

    def view(end: int) -> list[int | None]:
        session.conversation_history = history[:end]
        found: list[int | None] = []
        for item in session.get_llm_history():
            index = next((i for i, h in enumerate(history) if h is item), None)
            found.append(index)
        return found

    result = {
        "generated_with": "klaude-code 2.8.1 (JsonlSessionStore.load_history, Session.get_llm_history)",
        "lines": len(lines),
        "items": [type(item).__name__ for item in history],
        "compaction_entries": [
            {
                "index": i,
                "first_kept_index": history[i].first_kept_index,
                "tokens_before": history[i].tokens_before,
                "summary_sha256": hashlib.sha256(history[i].summary.encode()).hexdigest(),
            }
            for i in entries
        ],
        # None is the summary klaude injects as a user message; numbers are history indices.
        "llm_history_after_each_entry": [view(i + 1) for i in entries],
        "llm_history_at_end": view(len(history)),
    }
    golden.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
