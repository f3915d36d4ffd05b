"""Every session format we read, one line each; the importer and the database ask this table, never a format by name.

A format module provides:

* ``FORMAT`` (its stored name) and ``LABEL`` (the agent's name as users read it: the format choices);
* ``SESSION_FOLDERS``: where the agent keeps its sessions under the home folder (the default import roots);
* ``make_parser(*, agent, path)``: a parser for one file (``path`` lets it read a sidecar such as klaude's
  ``meta.json``);
* ``parent_link(head, path)``: a ``ParentLink`` when the file is a subagent transcript or a fork of another
  session, from its first lines;
* ``vote(obj)``: whether one parsed line is a record of this format (format detection, ``detect.py``);
* ``COMPACTION_RECORD_TYPES``, ``PRUNE_RECORD_TYPES``, ``CONVERSATION_KEEPS_BOOKKEEPING`` (``context_records``).

A new agent adds its format module to ``FORMATS`` (and its strategy to ``strategies/registry.py``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from compaction.formats import claude_code, codex, khaelor, klaude_code
from compaction.transcript import NotASession, ParentLink, Parser

FORMATS: tuple[ModuleType, ...] = (claude_code, klaude_code, khaelor, codex)
# The order in which detection asks each module's ``vote`` about a line: the first that claims it wins. Codex
# first (its envelope is told apart by "payload" without "seq"), then KHAELOR's seq events, klaude's typed events,
# and Claude Code, whose envelope test is the loosest.
DETECTION_ORDER: tuple[ModuleType, ...] = (codex, khaelor, klaude_code, claude_code)
_BY_NAME = {f.FORMAT: f for f in FORMATS}

# (stored value, label) per format: the database column's choices and the list's agent filter.
FORMAT_CHOICES: list[tuple[str, str]] = [(f.FORMAT, f.LABEL) for f in FORMATS]
FORMAT_LABELS: dict[str, str] = dict(FORMAT_CHOICES)
# Where the agents keep their sessions under the home folder, in table order.
SESSION_FOLDERS: tuple[str, ...] = tuple(folder for f in FORMATS for folder in f.SESSION_FOLDERS)


def format_module(name: str) -> ModuleType:
    """The module of a stored format name; ``NotASession`` for a name no module claims."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise NotASession(f"unsupported format {name!r}") from None


def make_parser(name: str, *, agent: str, path: Path) -> Parser:
    """A parser of this format for one file."""
    parser: Parser = format_module(name).make_parser(agent=agent, path=path)
    return parser


def parent_link(name: str, *, head: list[bytes], path: Path) -> ParentLink | None:
    """Whether a file of this format belongs to another session (a subagent transcript, a fork), and which."""
    link: ParentLink | None = format_module(name).parent_link(head, path)
    return link
