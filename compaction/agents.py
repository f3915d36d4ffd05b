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
    ask: frozenset[str] = frozenset()  # ask the user a question (its input holds ``question`` texts) and wait
    path_keys: tuple[str, ...] = ()  # the input keys that name a file or folder, most specific first
    command_keys: tuple[str, ...] = ()  # the input keys that hold a command line (a string or an argv list)
    patch_keys: tuple[str, ...] = ()  # the input keys that hold a patch text, when the input is not the text
    # An edit tool's input, to draw it as a diff: the replaced and the replacing text of one replacement, the text of
    # a whole file (or cell) written, and the list of several replacements (each with the old and new keys).
    old_keys: tuple[str, ...] = ()
    new_keys: tuple[str, ...] = ()
    content_keys: tuple[str, ...] = ()
    edits_keys: tuple[str, ...] = ()

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
            ask=self.ask | other.ask,
            path_keys=tuple(dict.fromkeys(self.path_keys + other.path_keys)),
            command_keys=tuple(dict.fromkeys(self.command_keys + other.command_keys)),
            patch_keys=tuple(dict.fromkeys(self.patch_keys + other.patch_keys)),
            old_keys=tuple(dict.fromkeys(self.old_keys + other.old_keys)),
            new_keys=tuple(dict.fromkeys(self.new_keys + other.new_keys)),
            content_keys=tuple(dict.fromkeys(self.content_keys + other.content_keys)),
            edits_keys=tuple(dict.fromkeys(self.edits_keys + other.edits_keys)),
        )


# What an instruction in force is (compaction/rules.py): a project instruction file, a skill the agent loaded, a
# reminder the agent injected, a constraint the user typed.
RuleKind = Literal["instruction_file", "skill", "reminder", "constraint"]


@dataclass(frozen=True, slots=True)
class InstructionSources:
    """How an agent records the instructions it works under, and which of them it sends again after a compaction.

    Read by ``compaction/rules.py`` only through the registry. Patterns are searched in the text of records the
    agent injected (``Message.kind`` "injected" or "system"), never in the user's or the model's own text.
    """

    # Regular expressions whose group "path" names an instruction file (AGENTS.md, CLAUDE.md) a record carries.
    file_patterns: tuple[str, ...] = ()
    # Regular expressions whose group "name" names a skill whose body a record carries.
    skill_patterns: tuple[str, ...] = ()
    # Tags around reminder text ("system-reminder"): each distinct reminder is one rule.
    reminder_tags: tuple[str, ...] = ()
    # Structured markers in the raw record: (path of keys into ``Message.data`` to a list of items, the item key
    # holding its type, {item type: rule kind}), with the item keys that name its file or skill.
    item_list_path: tuple[str, ...] = ()
    item_kinds: tuple[tuple[str, RuleKind], ...] = ()
    item_name_keys: tuple[str, ...] = ()
    # Record types (``Message.raw_type``) that carry text the user typed outside a prompt (steering while it works):
    # read for constraints as prompts are.
    user_record_types: tuple[str, ...] = ()
    # Rule kinds the agent itself puts back into the context after a compaction (its own code says so): a summary
    # that leaves them out loses nothing.
    reinjected: frozenset[str] = frozenset()
    # What the agent follows but never writes to its transcript, in words (shown beside the rules).
    unrecorded: str = ""


# What a finding's fix answers (``Fix.topic``): the findings (compaction.diagnose) ask the profile for these.
FixTopic = Literal["read_output", "command_output", "repeated_reads", "warning_line"]


@dataclass(frozen=True, slots=True)
class Fix:
    """A change a person can paste to avoid a finding, as the agent itself reads it."""

    topic: FixTopic
    where: str  # where it goes: "CLAUDE.md", "AGENTS.md", "~/.claude/settings.json", "~/.codex/config.toml"
    text: str  # what to paste there, verbatim
    source: str  # where the agent documents that it reads it (a section of the project's docs/formats)


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """An agent's facts that are not its format's parsing nor its strategy's rules."""

    colour: str  # its colour on a light page (badges, the overview, the timeline's main line): #rrggbb
    dark_colour: str  # the same on a dark page
    replay_colour: str  # its strategy's what-if replay line on the timeline, apart from every agent's own colour
    tools: ToolRoles = field(default_factory=ToolRoles)
    instructions: InstructionSources = field(default_factory=InstructionSources)
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
    # How the agent resumes one of its sessions, ``{session_id}`` its own session id, run in the session's working
    # directory (the restored archive's page shows it); "" for an agent without one.
    resume_command: str = ""
    # Changes a person can paste to avoid a finding (``Fix``), each citing the agent's own documentation.
    fixes: tuple[Fix, ...] = ()

    def fixes_for(self, topic: FixTopic) -> list[Fix]:
        return [fix for fix in self.fixes if fix.topic == topic]


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
