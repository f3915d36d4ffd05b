"""Every session format we read, one line each; the importer and the database ask this table, never a format by name.

A format module provides:

* ``FORMAT`` (its stored name) and ``LABEL`` (the agent's name as users read it: the format choices);
* ``SESSION_FOLDERS``: where the agent keeps its sessions under the home folder (the default import roots);
* ``make_parser(*, agent, path)``: a parser for one file (``path`` lets it read a sidecar such as klaude's
  ``meta.json``);
* ``parent_link(head, path)``: a ``ParentLink`` when the file is a subagent transcript or a fork of another
  session, from its first lines;
* ``vote(obj)``: whether one parsed line is a record of this format (format detection, ``detect.py``);
* ``COMPACTION_RECORD_TYPES``, ``PRUNE_RECORD_TYPES``, ``CONVERSATION_KEEPS_BOOKKEEPING`` (``context_records``);
* ``PROFILE``: its ``compaction.agents.AgentProfile`` (colours, tool roles, raw payload keys, title rule).

A new agent adds its format module to ``FORMATS`` (and its strategy to ``strategies/registry.py``), or, outside
this package (a plug-in, a test), calls ``strategies.registry.register_agent``. The tables below are changed in
place by a registration, so a module that imported one sees the agent too.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from types import ModuleType

from compaction.agents import UNKNOWN_PROFILE, AgentProfile, ToolRoles
from compaction.formats import claude_code, codex, khaelor, klaude_code
from compaction.transcript import NotASession, ParentLink, Parser

FORMATS: list[ModuleType] = [claude_code, klaude_code, khaelor, codex]
# The order in which detection asks each module's ``vote`` about a line: the first that claims it wins. Codex
# first (its envelope is told apart by "payload" without "seq"), then KHAELOR's seq events, klaude's typed events,
# and Claude Code, whose envelope test is the loosest.
DETECTION_ORDER: list[ModuleType] = [codex, khaelor, klaude_code, claude_code]
_BY_NAME = {f.FORMAT: f for f in FORMATS}

# (stored value, label) per format: the database column's choices and the list's agent filter.
FORMAT_CHOICES: list[tuple[str, str]] = [(f.FORMAT, f.LABEL) for f in FORMATS]
FORMAT_LABELS: dict[str, str] = dict(FORMAT_CHOICES)
# Where the agents keep their sessions under the home folder, in table order.
SESSION_FOLDERS: list[str] = [folder for f in FORMATS for folder in f.SESSION_FOLDERS]
# The records by which an agent says it changed its own history, over every registered format (context_records).
COMPACTION_RECORD_TYPES: set[str] = set()
PRUNE_RECORD_TYPES: set[str] = set()
CONTEXT_RECORD_TYPES: set[str] = set()


def register_format(module: ModuleType) -> None:
    """Add a format module to every table; its ``vote`` is asked first (a registered format is the more specific).

    ``strategies.registry.register_agent`` calls this with the agent's strategy; a name already taken is refused.
    """
    if module.FORMAT in _BY_NAME:
        raise ValueError(f"format {module.FORMAT!r} is already registered")
    FORMATS.append(module)
    DETECTION_ORDER.insert(0, module)
    _BY_NAME[module.FORMAT] = module
    FORMAT_CHOICES.append((module.FORMAT, module.LABEL))
    FORMAT_LABELS[module.FORMAT] = module.LABEL
    SESSION_FOLDERS.extend(module.SESSION_FOLDERS)
    _tables_changed()


def unregister_format(name: str) -> None:
    """Remove a registered format from every table (a test's agent, once the test is over)."""
    module = _BY_NAME.pop(name)
    FORMATS.remove(module)
    DETECTION_ORDER.remove(module)
    FORMAT_CHOICES.remove((module.FORMAT, module.LABEL))
    del FORMAT_LABELS[name]
    for folder in module.SESSION_FOLDERS:
        SESSION_FOLDERS.remove(folder)
    _tables_changed()


def _tables_changed() -> None:
    """Fill the record-type sets from the registered formats (in place: importers hold the same objects)."""
    COMPACTION_RECORD_TYPES.clear()
    COMPACTION_RECORD_TYPES.update(*(f.COMPACTION_RECORD_TYPES for f in FORMATS))
    PRUNE_RECORD_TYPES.clear()
    PRUNE_RECORD_TYPES.update(*(f.PRUNE_RECORD_TYPES for f in FORMATS))
    CONTEXT_RECORD_TYPES.clear()
    CONTEXT_RECORD_TYPES.update(COMPACTION_RECORD_TYPES | PRUNE_RECORD_TYPES)
    _all_tools.clear()


def agent_profile(name: str) -> AgentProfile:
    """The profile of a stored format name (a grey one without tool roles for a name no module claims)."""
    module = _BY_NAME.get(name)
    profile: AgentProfile = module.PROFILE if module is not None else UNKNOWN_PROFILE
    return profile


def session_folders(name: str) -> tuple[str, ...]:
    """Where the agent of a stored format name keeps its sessions under the home folder (none for an unknown one)."""
    module = _BY_NAME.get(name)
    return tuple(module.SESSION_FOLDERS) if module is not None else ()


def sidecar_names() -> frozenset[str]:
    """Files an agent reads beside a session, never imported alone (any registered agent's)."""
    return frozenset(name for f in FORMATS for name in f.PROFILE.sidecar_names)


def is_transcript_path(path: PurePath) -> bool:
    """Whether a ``.jsonl`` file in an agent's folders is a transcript (not a journal or a persisted result)."""
    return (
        path.suffix == ".jsonl"
        and not any(path.name in f.PROFILE.not_transcript_names for f in FORMATS)
        and not any(folder in path.parts for f in FORMATS for folder in f.PROFILE.not_transcript_folders)
    )


def is_subagent_path(path: PurePath) -> bool:
    """Whether a file is where an agent keeps its subagents' transcripts (imported after the main ones)."""
    return any(
        path.name.startswith(f.PROFILE.subagent_name_prefixes)
        or any(d in path.parts for d in f.PROFILE.subagent_folders)
        for f in FORMATS
        if f.PROFILE.subagent_name_prefixes or f.PROFILE.subagent_folders
    )


def profiles() -> list[tuple[str, str, AgentProfile]]:
    """(stored name, label, profile) of every format, in table order: the agents' stylesheet, the upload page."""
    return [(f.FORMAT, f.LABEL, f.PROFILE) for f in FORMATS]


_all_tools: list[ToolRoles] = []  # the union below, made once per set of registered formats
_tables_changed()


def all_tool_roles() -> ToolRoles:
    """Every agent's tool roles together: for code that reads records without their agent (a rendered block, a
    checklist called on its own). Agents' names do not collide in a way that matters: a name is one role."""
    if not _all_tools:
        roles = ToolRoles()
        for module in FORMATS:
            roles = roles.union(module.PROFILE.tools)
        _all_tools.append(roles)
    return _all_tools[0]


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
