"""What neutral code may ask about an agent: its profile, declared by the agent's own modules.

A format module (``compaction/formats/<agent>.py``) declares ``PROFILE``, an ``AgentProfile``: its colours, its
tool roles and the input keys that hold paths and commands, which raw payloads its parser keeps beside the blocks,
and whether it writes title-only files. Its ``FORMAT``, ``LABEL`` and ``SESSION_FOLDERS`` stay module constants.
A strategy class (``compaction/strategies/<agent>.py``) declares ``summary_structure`` (the sections its summary
prompt asks for and how they are headed) beside ``cache_policy`` and ``window_parameter``, and ``parameters``: a
``ParameterSpec`` (label, unit) for each of its ``editable`` parameters, which the what-if form shows.

Coverage, diagnosis, the summary diff, the pages, the CSS and the timeline read these through the registries
(``compaction/formats/registry.py``, ``compaction/strategies/registry.py``), never an agent's module by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class ToolRoles:
    """Which of an agent's tools do what, by the names its records give them."""

    read: frozenset[str] = frozenset()  # return the content of the file a path key names
    edit: frozenset[str] = frozenset()  # change the file a path key names
    patch: frozenset[str] = frozenset()  # change the files an apply_patch envelope names (its input or command)
    shell: frozenset[str] = frozenset()  # run a command line (a command key)
    search: frozenset[str] = frozenset()  # search under a folder: the path is where, not a file read
    web: frozenset[str] = frozenset()  # fetch or search the web
    spawn: frozenset[str] = frozenset()  # start a subagent, which works in its own context
    todo: frozenset[str] = frozenset()  # write the agent's task list (a ``todos`` list of {content, status})
    path_keys: tuple[str, ...] = ()  # the input keys that name a file or folder, most specific first
    command_keys: tuple[str, ...] = ()  # the input keys that hold a command line (a string or an argv list)
    patch_keys: tuple[str, ...] = ()  # the input keys that hold a patch text, when the input is not the text

    @property
    def exploration(self) -> frozenset[str]:
        """Tools that look around (read, search, run, browse): work a subagent could do in its own context."""
        return self.read | self.search | self.shell | self.web

    def union(self, other: ToolRoles) -> ToolRoles:
        """Both agents' roles: for code that reads records without knowing their agent (a rendered block)."""
        return ToolRoles(
            read=self.read | other.read,
            edit=self.edit | other.edit,
            patch=self.patch | other.patch,
            shell=self.shell | other.shell,
            search=self.search | other.search,
            web=self.web | other.web,
            spawn=self.spawn | other.spawn,
            todo=self.todo | other.todo,
            path_keys=tuple(dict.fromkeys(self.path_keys + other.path_keys)),
            command_keys=tuple(dict.fromkeys(self.command_keys + other.command_keys)),
            patch_keys=tuple(dict.fromkeys(self.patch_keys + other.patch_keys)),
        )


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """An agent's facts that are not its format's parsing nor its strategy's rules."""

    colour: str  # its colour on a light page (badges, the overview, the timeline's main line): #rrggbb
    dark_colour: str  # the same on a dark page
    replay_colour: str  # its strategy's what-if replay line on the timeline, apart from every agent's own colour
    tools: ToolRoles = field(default_factory=ToolRoles)
    # Keys of ``Message.data`` that keep the raw record beside the blocks (a strategy reads the record itself
    # when it is there): a transform that changes the blocks drops them so the change is read.
    raw_payload_keys: tuple[str, ...] = ()
    # The title rule: the agent writes files holding only a title record for another conversation, which the
    # importer moves to that conversation (``leafUuid``); False: a session's title is its own.
    title_records_elsewhere: bool = False
    upload_hint: str = ""  # what to upload, in words: "<code>events.jsonl</code> with its <code>meta.json</code>"
    # Files the agent keeps beside a session that are read with it, never imported alone (klaude's meta.json).
    sidecar_names: tuple[str, ...] = ()
    # JSONL in its folders that is not a transcript: file names, and folders whose files are never transcripts.
    not_transcript_names: tuple[str, ...] = ()
    not_transcript_folders: tuple[str, ...] = ()
    # Where its subagents' transcripts are: a file name prefix, or a folder on the path (imported after the mains).
    subagent_name_prefixes: tuple[str, ...] = ()
    subagent_folders: tuple[str, ...] = ()
    # Agent ids (their prefix) of the agent's own compaction requests: its summariser's transcript, not a subagent
    # the model started (drawn at the compaction, listed apart).
    compaction_agent_prefixes: tuple[str, ...] = ()


# How a summary's sections are headed:
#   numbered  "1. Primary Request and Intent:" (bold or a heading mark around it tolerated), body may start inline
#   markdown  a "## Goal" heading line (or a bold "**Goal**" line), an opening "<summary>" tag tolerated
#   yaml      "objective: ..." top-level keys; any other top-level key ends a field
HeadingRule = Literal["numbered", "markdown", "yaml"]


@dataclass(frozen=True, slots=True)
class SummaryStructure:
    """The sections an agent's summary prompt asks for, in order, and how the summary heads them."""

    sections: tuple[str, ...] = ()
    heading: HeadingRule = "markdown"


@dataclass(frozen=True, slots=True)
class ParameterSpec:
    """How a form names one of a strategy's editable parameters (its ``parameters``): a label in words, the unit
    of its number ("tokens"), and what an empty value means (``unset``: "from the session", "by version")."""

    label: str
    unit: str = ""
    unset: str = "not set"


NO_STRUCTURE = SummaryStructure()
# The profile of a format no module declares (a stored name from an older registry): grey, no tool roles.
UNKNOWN_PROFILE = AgentProfile(colour="#64748b", dark_colour="#94a3b8", replay_colour="#475569")
