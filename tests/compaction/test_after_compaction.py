"""What the agent did after each real compaction (compaction/after_compaction.py), on every shared sample with one,
against counts made by hand, and on a small fixture that has every kind of repeat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compaction.after_compaction import DEFAULT_CALLS, RuleBreak, after_compaction
from compaction.chain import own_strategy, session_chain
from compaction.diagnose import reads_after_compactions
from compaction.formats.detect import detect_format
from compaction.formats.registry import agent_profile, make_parser
from compaction.rules import Rule, command_segments, measure_after, path_breaks, rule_checks, rules_in_force
from compaction.transcript import Block, ContextEvent, Message, SessionInfo, Usage
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

KLAUDE = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"


def _parsed(path: Path) -> tuple[list[Message], list[ContextEvent], SessionInfo]:
    with open(path, "rb") as handle:
        head = handle.read(65536).splitlines()[:20]
    parser = make_parser(detect_format(head, name=path.name), agent="main", path=path)
    with open(path, "rb") as handle:
        records = list(parser.parse(handle))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    return messages, [r for r in records if isinstance(r, ContextEvent)], parser.info


# Counted by hand, with DEFAULT_CALLS (20) calls after each compaction. For the Claude Code files, a throwaway script
# over the raw JSON (not the parser): calls numbered by distinct message.id of non-sidechain assistant lines with
# usage (no <synthetic>), the compact_boundary's "after call" the count at its line, then every Read tool_use whose
# tool_result is not is_error, and every is_error result, listed before the boundary and in calls K+1..K+20; the
# paths read on both sides counted once each. Every error after a boundary was checked by eye against the errors
# before it (a5d8 first compaction: `mise run fmt && mise run lint` and `mise run lint` failed after, neither
# before; 4b7d: Grep and Glob ENOENT after, nothing before; the others have no error after). Questions: the
# AskUserQuestion calls (cipherbox, all in
# calls 2-26, before its compaction after call 45) and the replies ending a turn with "?" (a5d8: calls 30, 31, 32
# before the first compaction, 63 past its 20 calls, 136 before the second; 4b7d: call 40, past its window) give no
# question asked again. klaude-code: its events.jsonl items listed with their tool_name, file_path and status: no
# Read after any CompactionEntry of multi_compaction (Edit, Bash, Write only), compacted reads queue_1.py and
# audit_1.py after it (new paths), overflow makes no tool call after it; every status "success". KHAELOR: read_file
# of ledger/models_4.py at seq 17 comes again at seq 45, after context.compacted at seq 43; its one tool.failed (seq
# 25, pytest) is before. Codex: no read tool (its reads are shell commands) and its outputs are redacted (no error).
# Rules: not checked (no rules module): None.
# (file, [(after_call, calls in the window, files read again, errors repeated, questions asked again)], tails of the
# paths read again)
HAND_COUNTS: list[tuple[Path, list[tuple[int, int, int, int, int]], list[str]]] = [
    (CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl", [(6, 6, 1, 0, 0)], ["hooks_claudecode_handlers.go"]),
    (CLAUDE_SAMPLES / "entirecli_4b7d5121b42a-0_full.jsonl", [(9, 20, 0, 0, 0)], []),
    (
        CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl",
        [(30, 19, 3, 0, 0)],
        ["manual_commit_condensation.go", "manual_commit_hooks.go", "checkpoint/committed.go"],
    ),
    (CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl", [(67, 4, 0, 0, 0)], []),
    (
        CLAUDE_SAMPLES / "entirecli_a5d8ec9bae67-0_full.jsonl",
        [(40, 20, 1, 0, 0), (149, 20, 1, 0, 0)],
        ["list/view.go", "list/view.go"],
    ),
    (CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", [(138, 20, 1, 0, 0)], ["mix.exs"]),
    (CLAUDE_SAMPLES / "cipherbox_c644f3afc869-1_full.jsonl", [(45, 20, 1, 0, 0)], ["designs/DESIGN.md"]),
    (
        CODEX_SAMPLES / "localpush__0.104.0-alpha.1__remote-compaction__rollout-2026-02-23T12-54-34-019c8a59.jsonl",
        [(184, 20, 0, 0, 0)],
        [],
    ),
    (KLAUDE / "bd8ec9a1f80345edbd7c9ec7081ab44d" / "events.jsonl", [(20, 9, 0, 0, 0)], []),
    (KLAUDE / "e403978267e543c9ae7335a01662e2ce" / "events.jsonl", [(15, 1, 0, 0, 0)], []),
    (
        KLAUDE / "4ca67353d824444b81c156cf264ca243" / "events.jsonl",
        [(12, 12, 0, 0, 0), (19, 5, 0, 0, 0), (22, 2, 0, 0, 0)],
        [],
    ),
    (KHAELOR_SAMPLES / "ledger-migration.events.jsonl", [(23, 5, 1, 0, 0)], ["ledger/models_4.py"]),
]


def _name(value: object) -> str:
    return value.name if isinstance(value, Path) else ""


@pytest.mark.parametrize(("path", "expected", "tails"), HAND_COUNTS, ids=_name)
def test_every_shared_sample_with_a_compaction_against_hand_counts(path, expected, tails):
    messages, events, info = _parsed(path)
    result = after_compaction(messages, events, info=info)
    assert result.calls == DEFAULT_CALLS
    got = [
        (a.after_call, a.calls, len(a.reads_again), len(a.errors_again), len(a.questions_again))
        for a in result.compactions
    ]
    assert got == expected
    again = [r.subject for a in result.compactions for r in a.reads_again]
    assert len(again) == len(tails)
    assert all(path.endswith(tail) for path, tail in zip(again, tails, strict=True))
    assert all(r.before_call <= a.after_call < r.call for a in result.compactions for r in a.reads_again)
    assert result.rules_checked is False
    assert result.totals()["rules_broken"] is None
    assert result.totals()["files_read_again"] == sum(row[2] for row in expected)


# A small session with every kind of repeat: calls are assistant records with usage, tools Claude Code's.
def _call(line: int, key: str, *blocks: Block, text: str = "") -> Message:
    content = [Block(kind="text", text=text)] if text else []
    return Message(
        line=line, role="assistant", kind="assistant", blocks=[*content, *blocks], call_key=key, usage=Usage(100)
    )


def _use(tool_id: str, name: str, **tool_input: Any) -> Block:
    return Block(kind="tool_use", tool_id=tool_id, tool_name=name, tool_input=tool_input)


def _result(line: int, tool_id: str, text: str = "ok", *, error: bool = False) -> Message:
    block = Block(kind="tool_result", tool_id=tool_id, text=text, is_error=error)
    return Message(line=line, role="user", kind="tool_result", blocks=[block])


def _prompt(line: int, text: str) -> Message:
    return Message(line=line, role="user", kind="prompt", blocks=[Block(kind="text", text=text)])


FIXTURE = [
    _prompt(1, "Fix the ledger. Don't touch migrations/."),
    _call(2, "c1", _use("r1", "Read", file_path="/p/a.py"), _use("r2", "Read", file_path="/p/gone.py")),
    _result(3, "r1"),
    _result(4, "r2", "File does not exist.", error=True),  # a failed read is no read
    _call(5, "c2", _use("b1", "Bash", command="pytest -q")),
    _result(6, "b1", "Exit code 1\n3 failed", error=True),
    _call(7, "c3", _use("e1", "Edit", file_path="/p/a.py")),
    _result(8, "e1", "String to replace not found in file 12", error=True),
    _call(9, "c4", text="Done. Should I also update the docs?"),
    _prompt(10, "yes"),
    # the compaction after call 4 (line 11), then calls 5..8
    _call(12, "c5", _use("r3", "Read", file_path="/p/a.py"), _use("r4", "Read", file_path="/p/gone.py")),
    _result(13, "r3"),
    _result(14, "r4"),
    _call(15, "c6", _use("b2", "Bash", command="pytest -q"), _use("e2", "Edit", file_path="/p/b.py")),
    _result(16, "b2", "Exit code 2\nother failure", error=True),  # the same command failing: repeated
    _result(17, "e2", "String to replace not found in file 40", error=True),  # the same Edit error: repeated
    _call(18, "c7", _use("q1", "AskUserQuestion", questions=[{"question": "Should I update the docs too?"}])),
    _result(19, "q1", "yes"),
    _call(20, "c8", _use("r5", "Read", file_path="/p/a.py"), _use("r6", "Read", file_path="/p/c.py")),
    _result(21, "r5"),
    _result(22, "r6"),
]
COMPACTION = ContextEvent(kind="compaction", line=11, trigger="auto")
INFO = SessionInfo(format="claude-code")
PROFILE_SOURCES = agent_profile("claude-code").instructions


def test_a_fixture_with_every_kind_of_repeat():
    result = after_compaction(FIXTURE, [COMPACTION], info=INFO)
    (only,) = result.compactions
    assert (only.after_call, only.calls, only.line, only.trigger) == (4, 4, 11, "auto")
    # /p/a.py read before (call 1) and twice after (calls 5 and 8); /p/gone.py failed before, so it is new; c.py new
    assert [(r.subject, r.call, r.times, r.before_call) for r in only.reads_again] == [("/p/a.py", 5, 2, 1)]
    assert [(r.subject, r.call, r.before_call) for r in only.errors_again] == [
        ("pytest -q", 6, 2),
        ("Edit: string to replace not found in file #", 6, 3),
    ]
    # "Should I also update the docs?" (the reply that ended the turn) and the ask tool's question are close enough
    assert [(r.subject, r.call, r.before_call) for r in only.questions_again] == [
        ("Should I update the docs too?", 7, 4)
    ]
    assert only.counts() == {
        "files_read_again": 1,
        "errors_repeated": 2,
        "questions_asked_again": 1,
        "rules_broken": None,
    }
    data = result.as_json()
    assert data["totals"] == {"compactions": 1, **only.counts()}
    assert data["compactions"][0]["reads_again"][0]["line"] == 12  # the first read again


def test_the_window_is_the_next_n_calls():
    # With one call after it, only call 5 counts: its read of a.py; the errors and the question come later.
    (only,) = after_compaction(FIXTURE, [COMPACTION], info=INFO, calls=1).compactions
    assert (only.calls, only.counts()["files_read_again"], only.counts()["errors_repeated"]) == (1, 1, 0)
    assert only.reads_again[0].times == 1
    with pytest.raises(ValueError, match="at least 1"):
        after_compaction(FIXTURE, [COMPACTION], info=INFO, calls=0)


def test_rules_come_from_a_hook():
    def edits_of_b(messages, position, end, call_of):
        return [
            RuleBreak(rule="don't touch b.py", what="edited /p/b.py", call=call_of(i), line=m.line)
            for i, m in enumerate(messages[position:end], start=position)
            if any(b.tool_input == {"file_path": "/p/b.py"} for b in m.blocks)
        ]

    result = after_compaction(FIXTURE, [COMPACTION], info=INFO, rules=edits_of_b)
    assert result.rules_checked is True
    assert result.totals()["rules_broken"] == 1
    assert result.as_json()["compactions"][0]["rules"] == [
        {"rule": "don't touch b.py", "what": "edited /p/b.py", "call": 6, "line": 15}
    ]


# The rules broken after a compaction (compaction.rules.rule_hook), counted by hand: four constraints typed before the
# compaction can be checked (migrations/, settings.py, pnpm, git push), one cannot ("write tests first"); after it,
# call 4 edits migrations/0003_ledger.py (broken: migrations/), call 5 runs `cd web && npm install` (broken: use
# pnpm), call 6 runs `pnpm test` and `git status` (neither), call 7 edits settings_local.py (not settings.py) and
# README.md (a rule typed after the compaction: not in force before it), call 8 runs `git push origin main` (broken).
# The edit of migrations/ at call 2 comes before the compaction. 3 rules broken.
RULES_FIXTURE = [
    _prompt(1, "Fix the ledger. Don't touch migrations/. Use pnpm, not npm. Never edit config/settings.py!"),
    _call(2, "c1", _use("e1", "Edit", file_path="/p/migrations/0002.py")),
    _result(3, "e1"),
    _prompt(4, "Always write tests first; and don't run git push until I say so."),
    _call(5, "c2", _use("b1", "Bash", command="pnpm install")),
    _result(6, "b1"),
    _call(7, "c3", text="Done."),
    # the compaction after call 3 (line 8), then calls 4..8
    _prompt(9, "Go on. Do not modify README.md."),
    _call(10, "c4", _use("e2", "Edit", file_path="/p/migrations/0003_ledger.py")),
    _result(11, "e2"),
    _call(12, "c5", _use("b2", "Bash", command="cd web && npm install")),
    _result(13, "b2"),
    _call(14, "c6", _use("b3", "Bash", command="pnpm test; git status")),
    _result(15, "b3"),
    _call(
        16,
        "c7",
        _use("e3", "Edit", file_path="/p/config/settings_local.py"),
        _use("e4", "Write", file_path="/p/README.md"),
    ),
    _result(17, "e3"),
    _result(18, "e4"),
    _call(19, "c8", _use("b4", "Bash", command="GIT_TRACE=1 git push origin main")),
    _result(20, "b4"),
]


def test_rules_broken_after_a_compaction_against_a_hand_count():
    result = measure_after(RULES_FIXTURE, [ContextEvent(kind="compaction", line=8, trigger="manual")], info=INFO)
    (only,) = result.compactions
    assert result.rules_checked is True and only.after_call == 3
    assert only.rules_broken is not None
    assert [(b.rule, b.what, b.call, b.line) for b in only.rules_broken] == [
        ("Don't touch migrations/.", "Edit /p/migrations/0003_ledger.py", 4, 10),
        ("Use pnpm, not npm.", "$ cd web && npm install", 5, 12),
        ("and don't run git push until I say so.", "$ GIT_TRACE=1 git push origin main", 8, 19),
    ]
    assert result.totals()["rules_broken"] == 3
    assert result.as_json()["compactions"][0]["rules"][2]["call"] == 8


def test_what_each_constraint_forbids():
    checks = rule_checks(rules_in_force(RULES_FIXTURE, 7, sources=PROFILE_SOURCES))
    assert [(c.rule.text, c.paths, c.commands) for c in checks] == [
        ("Don't touch migrations/.", ("migrations/",), ()),
        ("Use pnpm, not npm.", (), (("bun",), ("npm",), ("npx",), ("yarn",))),
        ("Never edit config/settings.py!", ("config/settings.py",), ()),
        ("and don't run git push until I say so.", (), (("git", "push"),)),
    ]
    # "don't use npm" is a list's head here (a comma after it); the "use pnpm" after it forbids npm and the others
    (check,) = rule_checks([Rule("constraint", "Don't use npm, use pnpm.", "Don't use npm, use pnpm.", 0, 1, 0)])
    assert check.commands == (("bun",), ("npm",), ("npx",), ("yarn",))
    (check,) = rule_checks([Rule("constraint", "Never run npm.", "Never run npm.", 0, 1, 0)])
    assert check.commands == (("npm",),)
    assert path_breaks("/p/app/migrations/0001.py", "migrations/") and not path_breaks("/p/migrations", "migrations/")
    assert path_breaks("/p/db/migrations/x.py", "migrations") and path_breaks("/p/x/Makefile", "makefile")
    assert not path_breaks("/p/config/settings_local.py", "config/settings.py")
    assert command_segments("A=1 sudo npm i && (pnpm test) | tee x") == [["npm", "i"], ["pnpm", "test"], ["tee", "x"]]
    assert command_segments("bash -lc 'npm ci'") == [["npm", "ci"]]


def test_files_read_again_after_compactions_as_a_finding():
    # The fixture's /p/a.py, read before the compaction and twice after it: one finding, its tokens at stake those of
    # the two reads again (the after-compaction measure's own), no finding for a session without a repeat.
    chain = session_chain(FIXTURE, [COMPACTION], info=INFO)
    strategy = own_strategy(info=INFO)
    (finding,) = reads_after_compactions(chain, strategy=strategy)
    (again,) = after_compaction(FIXTURE, [COMPACTION], info=INFO).compactions[0].reads_again
    assert (finding.kind, finding.subject, finding.calls) == ("reads_after_compaction", "files", [5])
    assert [(d.subject, d.count, d.tokens) for d in finding.details] == [("/p/a.py", 2, again.tokens)]
    assert finding.tokens == again.tokens == sum(t for _, t in again.results) > 0
    assert len(again.results) == 2
    assert reads_after_compactions(session_chain(FIXTURE, [], info=INFO), strategy=strategy) == []
