"""Claude Code's context management, simulated on the neutral model.

What Claude Code really does (docs/compaction/claude-code.md; v2.1.88 source unless a version note says
otherwise):

* before every API request it counts ``tokenCountWithEstimation`` (§4.1): the recorded usage of the last
  response plus a chars/4 estimate of what was appended since;
* autocompact (§2.6) fires when that count reaches the threshold of ``compaction.windows`` and summarises
  everything since the last compact boundary with the nine-section prompt (§3); nothing of the
  conversation is kept verbatim, only files/todos/plan are re-attached (not written to the JSONL, format doc §8.3
  of the format doc);
* microcompact clears old tool results (§2.4): the time-based one after a 60-minute idle gap (keeps the 5
  most recent compactable results, off by default), and the legacy one (keeps 3, needs 20K savings above
  the warning line) on the versions where it was observed to run, 2.1.12–2.1.22;
* a request over the window ends the turn ("Prompt is too long") up to 2.1.88; reactive compaction is
  modelled from 2.1.142; with autocompact off the blocking limit stops the turn (§2.7, §2.8);
* the tool-result budget (§2.2) persists the largest results of one oversized user message;
* a compact request that is itself too long drops the oldest API rounds and retries (§2.6 step 4).

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from compaction.agents import ParameterSpec, SummaryStructure
from compaction.prompt_cache import ANTHROPIC_CACHE, CachePolicy
from compaction.strategies.base import (
    Cut,
    CutRefused,
    Decision,
    ExportInput,
    Layer,
    PlannedRequest,
    ReplayRules,
    SummarizerPlan,
    Thresholds,
    point_timestamp,
)
from compaction.transcript import Block, Message, SessionInfo, parse_timestamp
from compaction.windows import (
    MAX_OUTPUT_TOKENS_FOR_SUMMARY,
    claude_code_thresholds,
    max_output_tokens,
    parse_version,
)

# ----------------------------------------------------------------------------- constants (all §1.2)

# microCompact.ts COMPACTABLE_TOOLS: FILE_READ, SHELL_TOOL_NAMES (Bash, PowerShell), GREP, GLOB, WEB_SEARCH,
# WEB_FETCH, FILE_EDIT, FILE_WRITE (docs §2.4a; seeds/003 quotes the set).
COMPACTABLE_TOOLS = frozenset({"Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"})
# microCompact.ts TIME_BASED_MC_CLEARED_MESSAGE = toolResultStorage.ts TOOL_RESULT_CLEARED_MESSAGE.
CLEARED_TOOL_RESULT_MESSAGE = "[Old tool result content cleared]"
# timeBasedMCConfig.ts TIME_BASED_MC_CONFIG_DEFAULTS (GrowthBook tengu_slate_heron, off by default).
TIME_BASED_MC_ENABLED_DEFAULT = False
TIME_BASED_MC_GAP_MINUTES = 60
TIME_BASED_MC_KEEP_RECENT = 5
# The placeholder cut-off by version (§2.4a, §2.4d; seeds/003 quotes TimeBasedMCConfig): up to 2.1.87 the client's
# microcompact is the legacy one, which keeps the newest compactable results worth 40,000 tokens (at least 3) and
# clears every older one; 2.1.88 removed that path ("tengu_cache_plum_violet is always true") and its one client
# microcompact is the time-based one, which keeps the newest 5 compactable results by count, whatever their size,
# and clears the rest after a 60-minute idle gap. 2.1.88 is the first source that shows the time-based one: earlier
# builds are not assumed to have it.
TIME_BASED_MC_SINCE = (2, 1, 88)
# Legacy client microcompact, v2.0.x deobfuscations [BIN] (§2.4d, medium confidence): keep at least 3, clear
# only above the warning line and when at least 20,000 tokens would be saved. The doc leaves the role of its
# 40,000 constant open ("trigger vs. protected tail"); we take the protected-tail reading (the newest
# compactable results are kept up to 40,000 tokens, chars/4, and every older one is cleared). It is an
# assumption, kept as the parameter ``legacy_protected_tokens`` (ClaudeCodeParams) rather than a fixed rule.
LEGACY_MC_KEEP_RECENT = 3
LEGACY_MC_PROTECTED_TOKENS = 40_000
LEGACY_MC_MIN_SAVINGS = 20_000
# §2.4d: "Legacy microcompact path removed" by v2.1.88, so the code existed below 2.1.88; but it ran only where
# a remote flag let it: microcompact_boundary records appear in transcripts of 2.1.12–2.1.22 only (format doc §9,
# "Observed 27× in CC 2.1.12–2.1.22 only"; compaction doc §2.4d "Where it really ran"), while real 2.1.7, 2.1.39
# and 2.1.49 sessions sat above the warning line with no microcompact. By default a replay applies it only there;
# elsewhere it is a what-if the user asks for (ClaudeCodeParams.legacy_microcompact).
LEGACY_MC_BEFORE = (2, 1, 88)
LEGACY_MC_OBSERVED_FROM = (2, 1, 12)
LEGACY_MC_OBSERVED_TO = (2, 1, 22)
# Reactive compaction (compact after a 413) is ant-only in v2.1.88 (§2.0, §2.8: "In an external v2.1.88 build
# there is no collapse and no reactive compact, so the error surfaces"); [CL] 2.1.142 "Improved reactive
# compaction" is the first public build known to have it. Between 2.1.89 and 2.1.141 it is not known: we assume
# it off there (inferred, and the replay says so).
REACTIVE_COMPACT_SINCE = (2, 1, 142)
EXTERNAL_NO_REACTIVE_UNTIL = (2, 1, 88)
# Format doc §6.1: a response's early lines carry the message_start placeholder (1–10 output tokens), and even the
# last line can keep it ("1 output token … for a 6,340-char tool call" right before a real auto-compaction).
STREAMING_PLACEHOLDER_MAX_OUTPUT = 10
# "Far below the content": a final output of at most 10 tokens cannot carry content estimated above 20 tokens
# (chars/4); that would take more than 8 characters per token. Below that, a short reply's real final usage
# and a placeholder cannot be told apart, and the recorded number stands.
PLACEHOLDER_CONTENT_FACTOR = 2
# autoCompact.ts:70 MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES; [CL] 2.1.76 added the breaker.
MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES = 3
CIRCUIT_BREAKER_SINCE = (2, 1, 76)
# [CL] 2.1.89 "autocompact thrash loop" detection: the context refills to the limit right after compacting, 3 times
# in a row, and Claude Code stops with an error; [V156] RAPID_REFILL_TRIP = 3 within a 3-turn window (compaction
# doc §1.8, §6 step 5). Before 2.1.89 it compacts again and again.
THRASH_STOP_SINCE = (2, 1, 89)
RAPID_REFILL_TRIP = 3
RAPID_REFILL_TURNS = 3
# tokenEstimation.ts / microCompact.ts IMAGE_MAX_TOKEN_SIZE: images and documents count 2,000 tokens.
IMAGE_TOKEN_ESTIMATE = 2_000
# microCompact.ts estimateMessageTokens: ceil(sum · 4/3), used only by microcompact and SM compaction.
MICROCOMPACT_PADDING = 4 / 3
# Session-memory compaction (§2.6 step 1, [S88] sessionMemoryCompact.ts; GrowthBook tengu_session_memory and
# tengu_sm_compact, off by default; ENABLE_CLAUDE_CODE_SM_COMPACT forces it): autocompact first tries it, which
# keeps the newest messages verbatim as the boundary's preserved segment (at least 10,000 tokens and 5 messages with
# text, at most 40,000, by estimateMessageTokens with its 4/3 padding) and puts the session-memory notes in place of
# the rest. 2.1.88 is the first source that shows it (earlier builds are not assumed to have it); [V156] says 2.1.156
# removed it (2.1.89-2.1.155 assumed as 2.1.88).
SM_COMPACT_SINCE = (2, 1, 88)
SM_COMPACT_REMOVED = (2, 1, 156)
SM_COMPACT_MIN_TOKENS = 10_000
SM_COMPACT_MIN_TEXT_MESSAGES = 5
SM_COMPACT_MAX_TOKENS = 40_000
# toolLimits.ts MAX_TOOL_RESULTS_PER_MESSAGE_CHARS (GrowthBook tengu_hawthorn_window can override it).
MAX_TOOL_RESULTS_PER_MESSAGE_CHARS = 200_000
# §2.2: applyToolResultBudget is gated by GrowthBook tengu_hawthorn_steeple, default false.
TOOL_RESULT_BUDGET_ENABLED_DEFAULT = False
# §2.5: context collapse starts committing at 90% of the effective window (autoCompact.ts comment); ant-only.
# toolResultStorage.ts PREVIEW_SIZE_BYTES: the persisted-output preview that replaces a large result.
PERSISTED_PREVIEW_CHARS = 2_000
# §2.1: Read has maxResultSizeChars = Infinity, so the budget skips it.
BUDGET_EXEMPT_TOOLS = frozenset({"Read"})
# The prompt-too-long retry of the compact request (compact.ts truncateHeadForPTLRetry) runs in
# compaction.summarize, on the API-round groups and their estimates that ``summarizer_plan`` gives it.
# compact.ts:293 ERROR_MESSAGE_PROMPT_TOO_LONG (the compact request failed after its retries).
ERROR_MESSAGE_PROMPT_TOO_LONG = "Conversation too long. Press esc twice to go up a few messages and try again."
# api/errors.ts:62 PROMPT_TOO_LONG_ERROR_MESSAGE.
PROMPT_TOO_LONG_ERROR_MESSAGE = "Prompt is too long"
# api/errors.ts parsePromptTooLongTokenCounts: "prompt is too long: 137500 tokens > 135000 maximum" (§2.8).
# compact.ts streaming fallback system prompt (§2.6 step 3).
SUMMARIZER_SYSTEM_PROMPT = "You are a helpful AI assistant tasked with summarizing conversations."
SYNTHETIC_MODEL = "<synthetic>"
# The tools of the streaming fallback's request: compact.ts streamCompactSummary sends ``[FileReadTool]`` (tool
# search off) with no tool_choice. It must send one: the API refuses messages holding tool_use or tool_result
# blocks when a request defines no tools ("Requests which include tool_use or tool_result blocks must define
# tools"). Name and input fields from tools/FileReadTool (FileReadTool.ts inputSchema, prompt.ts
# FILE_READ_TOOL_NAME, DESCRIPTION; PDF_MAX_PAGES_PER_READ 20). Claude Code renders the description and the JSON
# schema at run time (prompt.ts renderPromptTemplate, feature flags, zod): ours is the short DESCRIPTION and a
# plain JSON schema of the same fields, not byte for byte.
SUMMARIZER_TOOLS: list[dict[str, Any]] = [
    {
        "name": "Read",
        "description": "Read a file from the local filesystem.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file to read"},
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The line number to start reading from. "
                    "Only provide if the file is too large to read at once",
                },
                "limit": {
                    "type": "integer",
                    "exclusiveMinimum": 0,
                    "description": "The number of lines to read. "
                    "Only provide if the file is too large to read at once.",
                },
                "pages": {
                    "type": "string",
                    "description": 'Page range for PDF files (e.g., "1-5", "3", "10-20"). '
                    "Only applicable to PDF files. Maximum 20 pages per request.",
                },
            },
            "required": ["file_path"],
            "additionalProperties": False,
        },
    }
]

# ----------------------------------------------------------------------------- the compact prompt (§3)
# Verbatim from v2.1.88 src/services/compact/prompt.ts (mirror clevervi/claude-code-2.1.88). The source's
# NO_TOOLS_PREAMBLE ends with a blank line; the doc's code block drops it.

NO_TOOLS_PREAMBLE = """CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.

- Do NOT use Read, Bash, Grep, Glob, Edit, Write, or ANY other tool.
- You already have all the context you need in the conversation above.
- Tool calls will be REJECTED and will waste your only turn — you will fail the task.
- Your entire response must be plain text: an <analysis> block followed by a <summary> block.

"""

DETAILED_ANALYSIS_INSTRUCTION_BASE = """Before providing your final summary, wrap your analysis in <analysis> tags to organize your thoughts and ensure you've covered all necessary points. In your analysis process:

1. Chronologically analyze each message and section of the conversation. For each section thoroughly identify:
   - The user's explicit requests and intents
   - Your approach to addressing the user's requests
   - Key decisions, technical concepts and code patterns
   - Specific details like:
     - file names
     - full code snippets
     - function signatures
     - file edits
   - Errors that you ran into and how you fixed them
   - Pay special attention to specific user feedback that you received, especially if the user told you to do something differently.
2. Double-check for technical accuracy and completeness, addressing each required element thoroughly."""  # noqa: E501

BASE_COMPACT_PROMPT = (
    """Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions.
This summary should be thorough in capturing technical details, code patterns, and architectural decisions that would be essential for continuing development work without losing context.

"""  # noqa: E501
    + DETAILED_ANALYSIS_INSTRUCTION_BASE
    + """

Your summary should include the following sections:

1. Primary Request and Intent: Capture all of the user's explicit requests and intents in detail
2. Key Technical Concepts: List all important technical concepts, technologies, and frameworks discussed.
3. Files and Code Sections: Enumerate specific files and code sections examined, modified, or created. Pay special attention to the most recent messages and include full code snippets where applicable and include a summary of why this file read or edit is important.
4. Errors and fixes: List all errors that you ran into, and how you fixed them. Pay special attention to specific user feedback that you received, especially if the user told you to do something differently.
5. Problem Solving: Document problems solved and any ongoing troubleshooting efforts.
6. All user messages: List ALL user messages that are not tool results. These are critical for understanding the users' feedback and changing intent.
7. Pending Tasks: Outline any pending tasks that you have explicitly been asked to work on.
8. Current Work: Describe in detail precisely what was being worked on immediately before this summary request, paying special attention to the most recent messages from both user and assistant. Include file names and code snippets where applicable.
9. Optional Next Step: List the next step that you will take that is related to the most recent work you were doing. IMPORTANT: ensure that this step is DIRECTLY in line with the user's most recent explicit requests, and the task you were working on immediately before this summary request. If your last task was concluded, then only list next steps if they are explicitly in line with the users request. Do not start on tangential requests or really old requests that were already completed without confirming with the user first.
                       If there is a next step, include direct quotes from the most recent conversation showing exactly what task you were working on and where you left off. This should be verbatim to ensure there's no drift in task interpretation.

Here's an example of how your output should be structured:

<example>
<analysis>
[Your thought process, ensuring all points are covered thoroughly and accurately]
</analysis>

<summary>
1. Primary Request and Intent:
   [Detailed description]

2. Key Technical Concepts:
   - [Concept 1]
   - [Concept 2]
   - [...]

3. Files and Code Sections:
   - [File Name 1]
      - [Summary of why this file is important]
      - [Summary of the changes made to this file, if any]
      - [Important Code Snippet]
   - [File Name 2]
      - [Important Code Snippet]
   - [...]

4. Errors and fixes:
    - [Detailed description of error 1]:
      - [How you fixed the error]
      - [User feedback on the error if any]
    - [...]

5. Problem Solving:
   [Description of solved problems and ongoing troubleshooting]

6. All user messages: \n    - [Detailed non tool use user message]
    - [...]

7. Pending Tasks:
   - [Task 1]
   - [Task 2]
   - [...]

8. Current Work:
   [Precise description of current work]

9. Optional Next Step:
   [Optional Next step to take]

</summary>
</example>

Please provide your summary based on the conversation so far, following this structure and ensuring precision and thoroughness in your response. \n
There may be additional summarization instructions provided in the included context. If so, remember to follow these instructions when creating the above summary. Examples of instructions include:
<example>
## Compact Instructions
When summarizing the conversation focus on typescript code changes and also remember the mistakes you made and how you fixed them.
</example>

<example>
# Summary instructions
When you are using compact - please focus on test output and code changes. Include file reads verbatim.
</example>
"""  # noqa: E501
)

NO_TOOLS_TRAILER = (
    "\n\nREMINDER: Do NOT call any tools. Respond with plain text only — "
    "an <analysis> block followed by a <summary> block. "
    "Tool calls will be rejected and you will fail the task."
)

COMPACT_SUMMARY_SECTIONS = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)

# ------------------------------------------------------------------ the continuation message (format doc §8.2)
# Header/trailer by version, as seen in real summary lines (format doc §8.2) and prompt.ts (compaction doc §3).
SUMMARY_HEADER_2_0 = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\n"
)
SUMMARY_HEADER_2_1 = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
TRANSCRIPT_PATH_NOTE = (
    "\n\nIf you need specific details from before compaction (like exact code snippets, error messages, "
    "or content you generated), read the full transcript at: "
)
RECENT_MESSAGES_PRESERVED_NOTE = "\n\nRecent messages are preserved verbatim."
AUTO_CONTINUE_LEGACY = (
    "\nPlease continue the conversation from where we left it off without asking the user any further "
    "questions. Continue with the last task that you were asked to work on."
)
AUTO_CONTINUE_CURRENT = (
    "\nContinue the conversation from where it left off without asking the user any further questions. "
    "Resume directly — do not acknowledge the summary, do not recap what was happening, do not preface with "
    '"I\'ll continue" or similar. Pick up the last task as if the break never happened.'
)
# 2.0.76 uses the "summarized below" header and no transcript path; 2.1.7 already has both changes.
SUMMARY_HEADER_2_1_SINCE = (2, 1, 0)
# [CL] 2.1.69 "Changed resuming after compaction to no longer produce a preamble recap": the new trailer. We
# also date the stripping of <analysis> (v2.1.88 formatCompactSummary) to it; real 2.1.49 summaries still
# carry "Analysis:" — the exact version in between is not known.
CURRENT_SUMMARY_FORMAT_SINCE = (2, 1, 69)

_ANALYSIS_BLOCK = re.compile(r"<analysis>([\s\S]*?)</analysis>")
_SUMMARY_BLOCK = re.compile(r"<summary>([\s\S]*?)</summary>")
_BLANK_RUNS = re.compile(r"\n\n+")


def format_compact_summary(raw: str, *, version: str | None = None) -> str:
    """Claude Code's ``formatCompactSummary``: what the model sees of the summarizer's reply.

    v2.1.88 strips ``<analysis>…</analysis>``; older builds (deobfuscated ~v1.0.x, and every real summary up
    to 2.1.49 in our samples) turned it into ``Analysis:\\n…`` instead. ``<summary>`` becomes ``Summary:\\n…``
    and runs of blank lines collapse.
    """
    parsed = parse_version(version)
    text = raw
    analysis = _ANALYSIS_BLOCK.search(text)
    if analysis is not None:
        keep_analysis = parsed is not None and parsed < CURRENT_SUMMARY_FORMAT_SINCE
        replacement = f"Analysis:\n{analysis.group(1).strip()}" if keep_analysis else ""
        text = text[: analysis.start()] + replacement + text[analysis.end() :]
    summary = _SUMMARY_BLOCK.search(text)
    if summary is not None:
        text = text[: summary.start()] + f"Summary:\n{summary.group(1).strip()}" + text[summary.end() :]
    return _BLANK_RUNS.sub("\n\n", text).strip()


def continuation_message(
    raw_summary: str,
    *,
    version: str | None,
    auto: bool,
    transcript_path: str | None = None,
    recent_messages_preserved: bool = False,
) -> str:
    """The user message that replaces the history after a compaction (``getCompactUserSummaryMessage``).

    ``auto`` = suppressFollowUpQuestions (autocompact true, manual ``/compact`` false).
    """
    parsed = parse_version(version)
    body = format_compact_summary(raw_summary, version=version)
    if parsed is not None and parsed < SUMMARY_HEADER_2_1_SINCE:
        message = SUMMARY_HEADER_2_0 + body
        return message + AUTO_CONTINUE_LEGACY if auto else message
    message = SUMMARY_HEADER_2_1 + body
    if transcript_path:
        message += TRANSCRIPT_PATH_NOTE + transcript_path
    if recent_messages_preserved:
        message += RECENT_MESSAGES_PRESERVED_NOTE
    if auto:
        legacy = parsed is not None and parsed < CURRENT_SUMMARY_FORMAT_SINCE
        message += AUTO_CONTINUE_LEGACY if legacy else AUTO_CONTINUE_CURRENT
    return message


def claude_timestamp(written: str | None) -> str:
    """A record's ``timestamp`` as Claude Code writes it: ISO-8601 UTC with milliseconds and ``Z``
    (docs/formats/claude-code.md §2, ``timestamp``: "ISO-8601 UTC with ms"; §8.1-8.2: the boundary and the summary
    share one).

    ``written`` is the time of the record the new one follows; only a session that records no time at all
    before it gets the export's own.
    """
    moment = parse_timestamp(written) or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def is_compact_summary_text(text: str) -> bool:
    """Both header generations (§3 "A classifier for 'is compact summary' should accept both prefixes")."""
    return text.startswith((SUMMARY_HEADER_2_0, SUMMARY_HEADER_2_1.rstrip("\n")))


def compact_prompt(custom_instructions: str | None = None) -> str:
    """``getCompactPrompt``: preamble + nine-section prompt [+ additional instructions] + trailer."""
    prompt = NO_TOOLS_PREAMBLE + BASE_COMPACT_PROMPT
    if custom_instructions and custom_instructions.strip():
        prompt += f"\n\nAdditional Instructions:\n{custom_instructions}"
    return prompt + NO_TOOLS_TRAILER


# ----------------------------------------------------------------------------- token estimation (§4.1)


def _js_round(value: float) -> int:
    """JavaScript ``Math.round`` (half up), which ``roughTokenCountEstimation`` uses; Python rounds half-even."""
    return math.floor(value + 0.5)


def rough_tokens(text: str) -> int:
    """tokenEstimation.ts ``roughTokenCountEstimation``: round(chars / 4)."""
    return _js_round(len(text) / 4)


def _tool_use_chars(block: Block) -> int:
    # tokenEstimation.ts counts a tool_use as name + JSON.stringify(input) (compact JSON, like orjson).
    payload = orjson.dumps(block.tool_input).decode() if block.tool_input is not None else block.text
    return len(block.tool_name or "") + len(payload)


def estimate_block(block: Block) -> int:
    if block.kind == "image":
        return IMAGE_TOKEN_ESTIMATE
    if block.kind == "tool_use":
        return _js_round(_tool_use_chars(block) / 4)
    return rough_tokens(block.text)


def reaches_model(message: Message) -> bool:
    """System notices, bookkeeping and unknown records are never sent; the estimator counts them as 0."""
    return message.role != "meta" and message.kind not in ("system", "bookkeeping", "unknown")


def estimate_message(message: Message) -> int:
    """roughTokenCountEstimationForMessages for one message (no 4/3 padding, §4.1)."""
    if not reaches_model(message):
        return 0
    return sum(estimate_block(block) for block in message.blocks)


def padded_estimate(messages: Sequence[Message]) -> int:
    """microCompact.ts ``estimateMessageTokens``: the rough sum padded by 4/3, rounded up."""
    return math.ceil(sum(estimate_message(m) for m in messages) * MICROCOMPACT_PADDING)


# compact.ts:122-130 (v2.1.88, compaction doc §1.2 and §2.6 step 5): after a compaction Claude Code re-attaches the
# most recently read files, the todo list, the plan and the invoked skills; none of them is a transcript line before
# the versions that write attachment records, so the replay models them from what the session read and wrote.
POST_COMPACT_MAX_FILES_TO_RESTORE = 5
POST_COMPACT_TOKEN_BUDGET = 50_000
POST_COMPACT_MAX_TOKENS_PER_FILE = 5_000
POST_COMPACT_MAX_TOKENS_PER_SKILL = 5_000
POST_COMPACT_SKILLS_TOKEN_BUDGET = 25_000
FILE_READ_TOOLS = frozenset({"Read"})  # FILE_READ_TOOL_NAME
FILE_WRITE_TOOLS = frozenset({"Write"})
FILE_TOUCH_TOOLS = FILE_READ_TOOLS | FILE_WRITE_TOOLS | frozenset({"Edit", "MultiEdit"})  # they update readFileState
TODO_TOOLS = frozenset({"TodoWrite"})
SKILL_TOOLS = frozenset({"Skill"})
# The invoked-skills attachment is read in the 2.1.88 source ([S88] compact.ts); builds before it are not assumed to
# re-attach skills.
SKILLS_REATTACHED_SINCE = (2, 1, 88)


@dataclass(frozen=True, slots=True)
class Reattached:
    """What Claude Code puts back after a compaction, by its estimate (§2.6 step 5)."""

    files: int  # the most recently read files, each capped, within the budget
    todos: int
    skills: int

    @property
    def total(self) -> int:
        return self.files + self.todos + self.skills


def post_compact_attachments(messages: Sequence[Message], *, version: str | None) -> Reattached:
    """The attachments Claude Code builds after compacting ``messages`` (compact.ts createPostCompactFileAttachments,
    the todo and invoked-skills attachments): the 5 files it touched last (its read-file state: reads, edits and
    writes), not the plan or a CLAUDE.md, each read again whole up to 5,000 tokens and 50,000 in all; the last todo
    list; the invoked skills (5,000 each, 25,000 in all).

    A file's size is what the session shows of it whole (a full Read's result, a Write's content); where it shows only
    part of it (a Read with an offset or a limit, an Edit) the file is taken at the 5,000-token cap: it is read again
    whole, and a file read in parts is a long one (an estimate).
    """
    touched: dict[str, int | None] = {}  # path -> its size when a whole read or write shows it, in touch order
    pending: dict[str, str] = {}  # tool id of a whole Read -> its path
    todos = 0
    skills: dict[str, int] = {}
    skill_ids: dict[str, str] = {}
    for message in messages:
        for block in message.blocks:
            data = block.tool_input if isinstance(block.tool_input, dict) else {}
            path = data.get("file_path")
            if block.kind == "tool_use" and isinstance(path, str) and block.tool_name in FILE_TOUCH_TOOLS:
                known = touched.pop(path, None)
                if block.tool_name in FILE_READ_TOOLS and "offset" not in data and "limit" not in data:
                    if block.tool_id:
                        pending[block.tool_id] = path
                elif block.tool_name in FILE_WRITE_TOOLS and isinstance(data.get("content"), str):
                    known = rough_tokens(data["content"])
                elif block.tool_name not in FILE_WRITE_TOOLS:
                    known = None  # only part of the file is shown
                touched[path] = known  # moved to the end: the most recent touch
            elif block.kind == "tool_use" and block.tool_name in TODO_TOOLS:
                todos = rough_tokens(block.text)  # the attachment lists the todos the last TodoWrite set
            elif block.kind == "tool_use" and block.tool_name in SKILL_TOOLS and block.tool_id:
                skill_ids[block.tool_id] = str(data.get("skill") or block.tool_id)
            elif block.kind == "tool_result" and block.tool_id:
                if block.tool_id in pending:
                    touched[pending.pop(block.tool_id)] = estimate_block(block)
                elif block.tool_id in skill_ids:
                    skills[skill_ids[block.tool_id]] = estimate_block(block)
    files = 0
    restored = 0
    for path in reversed(touched):
        if path.endswith("CLAUDE.md") or "/plans/" in path:
            continue
        shown = touched[path]
        size = POST_COMPACT_MAX_TOKENS_PER_FILE if shown is None else min(shown, POST_COMPACT_MAX_TOKENS_PER_FILE)
        if files + size > POST_COMPACT_TOKEN_BUDGET:
            break
        files += size
        restored += 1
        if restored == POST_COMPACT_MAX_FILES_TO_RESTORE:
            break
    parsed = parse_version(version)
    skill_total = 0
    if parsed is None or parsed >= SKILLS_REATTACHED_SINCE:
        for size in skills.values():
            capped = min(size, POST_COMPACT_MAX_TOKENS_PER_SKILL)
            skill_total = min(POST_COMPACT_SKILLS_TOKEN_BUDGET, skill_total + capped)
    return Reattached(files=files, todos=todos, skills=skill_total)


def is_compact_boundary(message: Message) -> bool:
    return message.raw_type == "system/compact_boundary"


def context_start(messages: Sequence[Message], *, at: int | None = None) -> int:
    """Index of the first message Claude Code still sends (``getMessagesAfterCompactBoundary``).

    Old transcripts without boundary records are split at the compact-summary message itself (§2.6).
    """
    end = len(messages) if at is None else at
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if is_compact_boundary(message):
            return index + 1
        if message.kind == "compact_summary":
            return index
    return 0


def _has_recorded_usage(message: Message) -> bool:
    return (
        message.role == "assistant"
        and message.usage is not None
        and message.model != SYNTHETIC_MODEL
        and (message.usage.context > 0 or message.usage.output_tokens > 0)
    )


def token_count_with_estimation(messages: Sequence[Message], *, at: int | None = None) -> int:
    """``tokenCountWithEstimation`` (utils/tokens.ts:226) over the messages sent before request ``at``.

    Last recorded usage (input + cache creation + cache read + output, output = max over the lines of the
    response, or ``final_output_tokens``' estimate where every line kept the streaming placeholder) plus
    round(chars/4) of every message after that response's last line. v2.1.88 walks back to the response's
    first line and re-counts its siblings; the real preTokens of 2.1.7, 2.1.14 and 2.1.20 boundaries are
    within 0.5% of the last-line variant, so that is what we use.
    """
    end = len(messages) if at is None else at
    start = context_start(messages, at=end)
    anchor = -1
    for index in range(end - 1, start - 1, -1):
        if _has_recorded_usage(messages[index]):
            anchor = index
            break
    if anchor < 0:
        return sum(estimate_message(m) for m in messages[start:end])
    last = messages[anchor]
    assert last.usage is not None
    output = last.usage.output_tokens
    for index in range(anchor - 1, start - 1, -1):
        sibling = messages[index]
        if sibling.role != "assistant":
            continue
        if sibling.call_key != last.call_key or sibling.usage is None:
            break
        output = max(output, sibling.usage.output_tokens)
    siblings = [m for m in messages[start : anchor + 1] if m.role == "assistant" and m.call_key == last.call_key]
    output, _ = final_output_tokens(siblings, recorded=output)
    recorded = last.usage.context + output
    return recorded + sum(estimate_message(m) for m in messages[anchor + 1 : end])


def final_output_tokens(response: Sequence[Message], *, recorded: int) -> tuple[int, bool]:
    """The output tokens Claude Code had in memory for one response, and whether it is our estimate.

    ``recorded`` is the largest output the response's lines carry. When it is still the streaming placeholder
    (≤ 10, format doc §6.1) but the content is far larger, the transcript never got the final usage: the
    content's chars/4 estimate stands in for it.
    """
    if recorded > STREAMING_PLACEHOLDER_MAX_OUTPUT:
        return recorded, False
    content = sum(estimate_block(b) for m in response for b in m.blocks if b.kind in ("text", "thinking", "tool_use"))
    if content > PLACEHOLDER_CONTENT_FACTOR * STREAMING_PLACEHOLDER_MAX_OUTPUT:
        return content, True
    return recorded, False


def legacy_microcompact_runs(version: str | None, *, requested: bool | None) -> bool:
    """Whether the legacy microcompact runs for this version: where it was observed, unless the user says; never
    from 2.1.88, which removed its code path (§2.4d), whatever the user asks."""
    parsed = parse_version(version)
    if parsed is not None and parsed >= LEGACY_MC_BEFORE:
        return False
    if requested is not None:
        return requested
    return parsed is not None and LEGACY_MC_OBSERVED_FROM <= parsed <= LEGACY_MC_OBSERVED_TO


def time_based_microcompact_runs(version: str | None, *, enabled: bool) -> bool:
    """Whether the time-based microcompact can run: its flag set, in a build that has it (from 2.1.88; None: the
    newest behaviour)."""
    parsed = parse_version(version)
    return enabled and (parsed is None or parsed >= TIME_BASED_MC_SINCE)


def session_memory_compaction_runs(version: str | None, *, enabled: bool) -> bool:
    """Whether autocompact tries session-memory compaction first: its flags set, in a build that has it."""
    parsed = parse_version(version)
    return enabled and parsed is not None and SM_COMPACT_SINCE <= parsed < SM_COMPACT_REMOVED


def session_memory_kept_from(messages: Sequence[Message], start: int, end: int) -> int | None:
    """Where session-memory compaction's preserved segment starts in ``messages[start:end]``: walking back from the
    newest message until it holds 10,000 padded tokens and 5 messages with text, never past 40,000; a tool result
    stays with the call it answers. None: nothing would be summarised."""
    kept_from = end
    tokens = 0
    texts = 0
    for index in range(end - 1, start - 1, -1):
        size = padded_estimate([messages[index]])
        if tokens + size > SM_COMPACT_MAX_TOKENS:
            break
        tokens += size
        texts += any(b.kind == "text" and b.text for b in messages[index].blocks)
        kept_from = index
        if tokens >= SM_COMPACT_MIN_TOKENS and texts >= SM_COMPACT_MIN_TEXT_MESSAGES:
            break
    while start < kept_from < end and messages[kept_from].kind == "tool_result":
        kept_from -= 1
    return kept_from if kept_from > start else None


def preserved_positions(messages: Sequence[Message], position: int) -> list[int]:
    """The records before the compaction boundary at ``position`` that it kept verbatim (format doc §8.1): those its
    ``preservedMessages.uuids`` list, else the chain from ``preservedSegment``'s tail back to its head (parent links;
    a tail written after the boundary: from the head on, in file order). Claude Code's loaders re-link them after
    the summary; the file keeps them where they were. Empty: the boundary preserves nothing."""
    data = messages[position].data
    uuids = data.get("preserved_uuids")
    if isinstance(uuids, list):
        wanted = set(uuids)
        return [p for p in range(position) if messages[p].uuid in wanted]
    segment = data.get("preserved_segment")
    if not isinstance(segment, list) or len(segment) != 2:
        return []
    head, tail = segment
    at = {messages[p].uuid: p for p in range(position) if messages[p].uuid}
    if head not in at:
        return []
    if tail not in at:
        agent = messages[at[head]].agent
        return [
            p
            for p in range(at[head], position)
            if messages[p].agent == agent and messages[p].role != "meta" and messages[p].kind != "compact_summary"
        ]
    chain: list[int] = []
    current: str | None = tail
    while current in at and len(chain) <= position:
        chain.append(at[current])
        if current == head:
            return sorted(chain)
        current = messages[at[current]].parent_uuid
    return []


def reactive_compaction_runs(version: str | None) -> bool:
    """Whether this build compacts after a prompt-too-long error (None: the newest behaviour)."""
    parsed = parse_version(version)
    return parsed is None or parsed >= REACTIVE_COMPACT_SINCE


# ----------------------------------------------------------------------------- microcompact (§2.4)


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_id and block.tool_name:
                names[block.tool_id] = block.tool_name
    return names


def _result_blocks(messages: Sequence[Message]) -> dict[str, list[Block]]:
    results: dict[str, list[Block]] = {}
    for message in messages:
        if not reaches_model(message):
            continue
        for block in message.blocks:
            if block.kind in ("tool_result", "image") and block.tool_id and message.role == "user":
                results.setdefault(block.tool_id, []).append(block)
    return results


def _already_cleared(blocks: list[Block]) -> bool:
    return all(b.kind == "tool_result" and b.text == CLEARED_TOOL_RESULT_MESSAGE for b in blocks)


def compactable_tool_ids(messages: Sequence[Message], *, tools: frozenset[str] = COMPACTABLE_TOOLS) -> list[str]:
    """``collectCompactableToolIds``: ids of tool_use blocks of a compactable tool, oldest first."""
    ids: list[str] = []
    for message in messages:
        if message.role != "assistant":
            continue
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_id and block.tool_name in tools:
                ids.append(block.tool_id)
    return ids


def microcompact_selection(
    messages: Sequence[Message],
    *,
    keep_recent: int = TIME_BASED_MC_KEEP_RECENT,
    tools: frozenset[str] = COMPACTABLE_TOOLS,
) -> list[str]:
    """Tool ids whose results microcompact would replace with ``CLEARED_TOOL_RESULT_MESSAGE``.

    All compactable tool uses except the ``max(1, keep_recent)`` most recent; results already cleared or
    never returned are skipped because clearing them would save nothing.
    """
    candidates = compactable_tool_ids(messages, tools=tools)
    keep = max(1, keep_recent)
    older = candidates[:-keep] if len(candidates) > keep else []
    results = _result_blocks(messages)
    return [tool_id for tool_id in older if tool_id in results and not _already_cleared(results[tool_id])]


def legacy_microcompact_selection(
    messages: Sequence[Message],
    *,
    protected_tokens: int = LEGACY_MC_PROTECTED_TOKENS,
    min_keep: int = LEGACY_MC_KEEP_RECENT,
    tools: frozenset[str] = COMPACTABLE_TOOLS,
) -> list[str]:
    """Legacy microcompact's choice: keep the newest compactable results worth ``protected_tokens`` (at least
    ``min_keep`` of them) and clear every older one that still has content."""
    results = _result_blocks(messages)
    candidates = [tool_id for tool_id in compactable_tool_ids(messages, tools=tools) if tool_id in results]
    protected = 0
    boundary = 0  # candidates[:boundary] are cleared
    for index in range(len(candidates) - 1, -1, -1):
        size = sum(estimate_block(block) for block in results[candidates[index]])
        already_kept = len(candidates) - 1 - index
        if already_kept >= min_keep and protected + size > protected_tokens:
            boundary = index + 1
            break
        protected += size
    return [tool_id for tool_id in candidates[:boundary] if not _already_cleared(results[tool_id])]


def apply_microcompact(messages: Sequence[Message], tool_ids: Sequence[str]) -> list[Message]:
    """Copies of ``messages`` with the results of ``tool_ids`` cleared, as the next request would send them."""
    cleared = set(tool_ids)
    out: list[Message] = []
    for message in messages:
        if not any(b.tool_id in cleared and b.kind in ("tool_result", "image") for b in message.blocks):
            out.append(message)
            continue
        blocks: list[Block] = []
        for block in message.blocks:
            if block.tool_id in cleared and block.kind == "tool_result":
                blocks.append(replace(block, text=CLEARED_TOOL_RESULT_MESSAGE))
            elif block.tool_id in cleared and block.kind == "image":
                continue  # the whole result content is replaced, images included
            else:
                blocks.append(block)
        out.append(replace(message, blocks=blocks))
    return out


def microcompact_savings(messages: Sequence[Message], tool_ids: Sequence[str]) -> int:
    """Padded (×4/3) tokens saved by clearing ``tool_ids``: the number microcompact compares to its floor."""
    return max(0, padded_estimate(messages) - padded_estimate(apply_microcompact(messages, tool_ids)))


def idle_gap_minutes(messages: Sequence[Message], *, now: str | None = None) -> float | None:
    """Minutes between the last assistant message and ``now`` (default: the last message's timestamp)."""
    if not messages:
        return None
    current = parse_timestamp(now if now is not None else messages[-1].timestamp)
    if current is None:
        return None
    for message in reversed(messages):
        if message.role == "assistant" and message.model != SYNTHETIC_MODEL:
            last = parse_timestamp(message.timestamp)
            if last is None:
                return None
            return (current - last).total_seconds() / 60
    return None


# ----------------------------------------------------------------------------- tool-result budget (§2.2)


@dataclass(slots=True)
class BudgetOverflow:
    """One API-level user message whose tool results exceed the per-message budget."""

    first: int  # index of the first record of the group
    last: int  # index of the last record of the group
    total_chars: int
    persisted: list[str]  # tool ids whose results Claude Code would persist to disk, largest first
    chars_after: int


def tool_result_budget(
    messages: Sequence[Message],
    *,
    limit_chars: int = MAX_TOOL_RESULTS_PER_MESSAGE_CHARS,
    exempt_tools: frozenset[str] = BUDGET_EXEMPT_TOOLS,
) -> list[BudgetOverflow]:
    """``applyToolResultBudget``: user messages whose tool_result chars exceed ``limit_chars``.

    Consecutive user records form one API message (parallel tool results are one line each in the JSONL but
    one message on the wire). The largest non-exempt results are persisted (replaced by a ~2 KB preview)
    until the message fits.
    """
    names = _tool_names(messages)
    overflows: list[BudgetOverflow] = []
    group: list[int] = []

    def close() -> None:
        sizes: dict[str, int] = {}
        for index in group:
            for block in messages[index].blocks:
                if block.kind == "tool_result" and block.tool_id:
                    sizes[block.tool_id] = sizes.get(block.tool_id, 0) + len(block.text)
        total = sum(sizes.values())
        if total <= limit_chars:
            return
        remaining = total
        persisted: list[str] = []
        for tool_id, size in sorted(sizes.items(), key=lambda item: item[1], reverse=True):
            if remaining <= limit_chars:
                break
            if names.get(tool_id) in exempt_tools or size <= PERSISTED_PREVIEW_CHARS:
                continue
            persisted.append(tool_id)
            remaining -= size - PERSISTED_PREVIEW_CHARS
        overflows.append(BudgetOverflow(group[0], group[-1], total, persisted, remaining))

    for index, message in enumerate(messages):
        if message.role == "user" and reaches_model(message):
            group.append(index)
        elif message.role == "assistant":
            if group:
                close()
            group = []
    if group:
        close()
    return overflows


# ----------------------------------------------------------------------------- prompt-too-long retry (§2.6 step 4)


def group_by_api_round(messages: Sequence[Message]) -> list[list[Message]]:
    """``groupMessagesByApiRound``: group 0 is the preamble; each new response (new message.id) opens a group."""
    groups: list[list[Message]] = []
    current: list[Message] = []
    last_key: str | None = None
    for message in messages:
        if message.role == "assistant":
            key = message.call_key or message.uuid
            if key != last_key and current:
                groups.append(current)
                current = []
            last_key = key
        current.append(message)
    if current:
        groups.append(current)
    return groups


# ----------------------------------------------------------------------------- the summarizer request (§2.6)

# What a tool call the records never answered gets in the request: the API refuses a tool_use without its
# tool_result (our wording; Claude Code repairs the pairing in normalizeMessagesForAPI before sending).
MISSING_TOOL_RESULT = "[no tool result was recorded for this call]"


def _api_block(block: Block) -> dict[str, Any] | None:
    """One content block as the Messages API takes it; None for what the summarizer request leaves out.

    The streaming fallback (§2.6 step 3) runs with thinking disabled and replaces images and documents by text
    markers, so earlier thinking is not sent and an image is ``[image]``.
    """
    if block.kind == "text":
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if block.kind == "tool_use":
        tool_input = block.tool_input if isinstance(block.tool_input, dict) else {}
        return {"type": "tool_use", "id": block.tool_id or "", "name": block.tool_name or "tool", "input": tool_input}
    if block.kind == "tool_result":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_id or "", "content": block.text}
        if block.is_error:
            result["is_error"] = True
        return result
    if block.kind == "image":
        return {"type": "text", "text": "[image]"}
    if block.kind == "other" and block.text.strip():
        return {"type": "text", "text": block.text}
    return None


def api_turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages of one API round as Messages API turns (user / assistant), tool calls paired with results.

    A tool result whose call is not in the round is left out and a call without its result gets
    ``MISSING_TOOL_RESULT``: the API refuses either. Consecutive turns of one role are merged when sent
    (``compaction.summarize.build_messages``).
    """
    turns: list[dict[str, Any]] = []
    called: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if not reaches_model(message):
            continue
        role = "assistant" if message.role == "assistant" else "user"
        content = []
        for block in message.blocks:
            converted = _api_block(block)
            if converted is None:
                continue
            if converted["type"] == "tool_use":
                called.add(converted["id"])
            elif converted["type"] == "tool_result":
                if converted["tool_use_id"] not in called or converted["tool_use_id"] in answered:
                    continue
                answered.add(converted["tool_use_id"])
            content.append(converted)
        if content:
            turns.append({"role": role, "content": content})
    missing = [tool_id for tool_id in called if tool_id not in answered]
    if missing:
        # Each unanswered call gets its result right after the assistant turn that made it.
        for index in range(len(turns) - 1, -1, -1):
            turn = turns[index]
            ids = [b["id"] for b in turn["content"] if b["type"] == "tool_use" and b["id"] in missing]
            if turn["role"] == "assistant" and ids:
                results = [{"type": "tool_result", "tool_use_id": i, "content": MISSING_TOOL_RESULT} for i in ids]
                turns.insert(index + 1, {"role": "user", "content": results})
    return turns


_EARLIER_HEADING = re.compile(
    r"^\s*\d\.\s*(" + "|".join(map(re.escape, COMPACT_SUMMARY_SECTIONS)) + r"):", re.MULTILINE
)


def earlier_summary_items(messages: Sequence[Message]) -> dict[str, list[str]]:
    """The lines of the last earlier compaction summary among ``messages``, by section (what a model would carry
    forward from it), each reduced to one reviewable line (``compaction.offline.clean``)."""
    from compaction.offline import clean  # here: an import of sessions (every CLI start) needs no summary writer

    summary = next((m.text for m in reversed(messages) if m.kind == "compact_summary"), "")
    found: dict[str, list[str]] = {}
    headings = list(_EARLIER_HEADING.finditer(summary))
    for index, heading in enumerate(headings):
        stop = headings[index + 1].start() if index + 1 < len(headings) else len(summary)
        body = summary[heading.end() : stop]
        lines = [clean(line.strip().lstrip("-*• ").strip()) for line in body.splitlines()]
        found[heading.group(1)] = [line for line in lines if line and not line.startswith(("```", "["))]
    return found


def offline_compact_reply(messages: Sequence[Message], start: int, end: int) -> str:
    """A reply in the compact prompt's own shape (§3: an <analysis> block, then the nine sections inside
    <summary>), each section filled with what the summarised messages hold (``compaction.offline``).

    An earlier summary at the start of the range stands for what came before it: its requests, user messages
    and pending tasks are carried forward, as a model summarising the range would.
    """
    from compaction.offline import MAX_USER_MESSAGES, bullets, read_facts  # as in earlier_summary_items

    facts = read_facts(messages, start, end)
    earlier = earlier_summary_items(messages[max(start, 0) : end])
    user_messages = [*earlier.get("All user messages", []), *facts.requests]
    if not facts.open_tasks:
        facts.open_tasks = [t for t in earlier.get("Pending Tasks", []) if t.lower() not in ("none", "none.")]
    sections = dict.fromkeys(COMPACT_SUMMARY_SECTIONS, "")
    earlier_intent = earlier.get("Primary Request and Intent", [])[:1]
    first, *later = [*earlier_intent, *facts.requests] or [""]
    intent = f"   {first}" if first else "   (none found)"
    if later:
        intent += "\n   Later requests:\n" + bullets(later, indent="   ")
    sections["Primary Request and Intent"] = intent
    concepts = [f"Tools used: {', '.join(f'{name} ×{n}' for name, n in facts.tools.most_common(10))}"]
    if facts.extensions:
        concepts.append(f"File types worked on: {', '.join(facts.extensions)}")
    sections["Key Technical Concepts"] = bullets(concepts if facts.tools else [], indent="   ")
    sections["Files and Code Sections"] = bullets([f"{path} ({verb})" for path, verb in facts.files], indent="   ")
    sections["Errors and fixes"] = bullets(facts.errors, indent="    ")
    solving = [*facts.decisions, *(f"Ran: {c}" for c in facts.commands[-5:])]
    sections["Problem Solving"] = bullets(solving, indent="   ")
    sections["All user messages"] = bullets(user_messages, indent="    ", limit=MAX_USER_MESSAGES)
    sections["Pending Tasks"] = bullets(facts.open_tasks, indent="   ")
    sections["Current Work"] = bullets(facts.last_steps, indent="   ")
    latest = facts.requests[-1] if facts.requests else ""
    next_step = f'Continue with the most recent request: "{latest}"' if latest else "(none found)"
    sections["Optional Next Step"] = f"   {next_step}"
    body = "\n\n".join(f"{n}. {name}:\n{text}" for n, (name, text) in enumerate(sections.items(), start=1))
    return (
        "<analysis>\nOffline extractive summary: no model was called; every line below was read off the "
        "summarised messages.\n</analysis>\n\n"
        f"<summary>\n{body}\n</summary>"
    )


# ----------------------------------------------------------------------------- the strategy


@dataclass(slots=True)
class ClaudeCodeParams:
    """Claude Code's defaults; the env knobs of §1.6 and remote flags of §7 can be set per session."""

    model: str | None = None  # None: taken from the messages
    version: str | None = None  # None: taken from the messages (data["version"])
    observed_max: int = 0  # largest recorded context; > 200K means a 1M window (§1.3)
    autocompact_enabled: bool = True  # DISABLE_AUTO_COMPACT / autoCompactEnabled
    max_output_override: int | None = None  # CLAUDE_CODE_MAX_OUTPUT_TOKENS
    pct_override: float | None = None  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE
    auto_compact_window: int | None = None  # CLAUDE_CODE_AUTO_COMPACT_WINDOW
    blocking_override: int | None = None  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE
    # Circuit breaker state (autoCompact.ts tracking.consecutiveFailures) and its limit.
    consecutive_failures: int = 0
    max_consecutive_failures: int = MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES
    compactable_tools: frozenset[str] = COMPACTABLE_TOOLS
    time_based_mc_enabled: bool = TIME_BASED_MC_ENABLED_DEFAULT
    gap_threshold_minutes: float = TIME_BASED_MC_GAP_MINUTES
    keep_recent: int = TIME_BASED_MC_KEEP_RECENT
    legacy_keep_recent: int = LEGACY_MC_KEEP_RECENT
    legacy_protected_tokens: int = LEGACY_MC_PROTECTED_TOKENS
    legacy_min_savings: int = LEGACY_MC_MIN_SAVINGS
    # None: run the legacy microcompact only on the versions where it was observed (2.1.12–2.1.22); True / False
    # force it on or off as a what-if.
    legacy_microcompact: bool | None = None
    tool_result_budget_chars: int = MAX_TOOL_RESULTS_PER_MESSAGE_CHARS
    tool_result_budget_enabled: bool = TOOL_RESULT_BUDGET_ENABLED_DEFAULT
    transcript_path: str | None = None  # shown in the 2.1.x continuation message
    # tengu_session_memory && tengu_sm_compact (remote flags, off by default) or ENABLE_CLAUDE_CODE_SM_COMPACT (§1.6).
    session_memory_compact: bool = False


class ClaudeCodeStrategy:
    name = "claude-code"
    label = "Claude Code"
    short_label = "Claude Code"
    example_model = "claude-sonnet-4-5"  # a 200K-window model (docs/compaction/claude-code.md §1.3)
    params_type = ClaudeCodeParams
    # Parameters a user may change from the UI / CLI; the defaults are Claude Code's own.
    editable = (
        "model",
        "version",
        "autocompact_enabled",
        "pct_override",
        "auto_compact_window",
        "keep_recent",
        "legacy_microcompact",
        "session_memory_compact",
    )
    window_parameter = "auto_compact_window"  # CLAUDE_CODE_AUTO_COMPACT_WINDOW, what --context-limit sets
    parameters = {
        "model": ParameterSpec("Model", unset="from the session"),
        "version": ParameterSpec("Claude Code version", unset="from the session"),
        "autocompact_enabled": ParameterSpec("Auto-compact"),
        "pct_override": ParameterSpec("Auto-compact at", "% of the window", unset="Claude Code's threshold"),
        "auto_compact_window": ParameterSpec("Auto-compact window", "tokens", unset="the model's window"),
        "keep_recent": ParameterSpec("Time-based microcompact keeps the last", "tool results"),
        "legacy_microcompact": ParameterSpec("Legacy microcompact", unset="as the version did (2.1.12 to 2.1.22)"),
        "session_memory_compact": ParameterSpec("Session-memory compaction first (2.1.88 to 2.1.155)"),
    }
    estimator_label = "round(characters / 4), 2,000 per image (Claude Code's roughTokenCountEstimation)"
    # compact.ts "Not enough messages to compact." and ERROR_MESSAGE_PROMPT_TOO_LONG, and the notice of a compaction
    # that failed (compaction doc §2.6).
    compaction_refusals: tuple[str, ...] = (
        "Not enough messages to compact",
        "Conversation too long. Press esc twice",
        "Error during compaction",
    )
    cache_policy: CachePolicy = ANTHROPIC_CACHE  # Claude Code talks to Anthropic's API
    # prompt.ts's nine numbered sections ("1. Primary Request and Intent:").
    summary_structure = SummaryStructure(sections=COMPACT_SUMMARY_SECTIONS, heading="numbered")
    public_source: str | None = (
        "https://www.npmjs.com/package/@anthropic-ai/claude-code"  # the published package the rules were read from
    )

    def __init__(self, params: ClaudeCodeParams | None = None) -> None:
        self.params = params or ClaudeCodeParams()
        # compact.ts: max_tokens = min(COMPACT_MAX_OUTPUT_TOKENS (20K), the model's max output).
        self.max_summary_tokens = min(MAX_OUTPUT_TOKENS_FOR_SUMMARY, max_output_tokens(self.params.model))

    @classmethod
    def from_session(cls, info: SessionInfo, overrides: Mapping[str, Any]) -> ClaudeCodeStrategy:
        """The session's recorded model and version, then the user's overrides."""
        recorded: dict[str, Any] = {"model": info.model, "version": info.agent_version}
        return cls(ClaudeCodeParams(**{**recorded, **overrides}))

    # ------------------------------------------------------------------ session facts

    def _model(self, messages: Sequence[Message]) -> str | None:
        if self.params.model is not None:
            return self.params.model
        for message in reversed(messages):
            if message.role == "assistant" and message.model and message.model != SYNTHETIC_MODEL:
                return message.model
        return None

    def _version(self, messages: Sequence[Message]) -> str | None:
        if self.params.version is not None:
            return self.params.version
        for message in reversed(messages):
            version = message.data.get("version")
            if isinstance(version, str):
                return version
        return None

    def _observed_max(self, messages: Sequence[Message]) -> int:
        recorded = max((m.usage.context for m in messages if m.usage is not None), default=0)
        return max(self.params.observed_max, recorded)

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds:
        params = self.params
        return claude_code_thresholds(
            model=model,
            version=version,
            observed_max=max(observed_max, params.observed_max),
            autocompact_enabled=params.autocompact_enabled,
            max_output_override=params.max_output_override,
            pct_override=params.pct_override,
            auto_compact_window=params.auto_compact_window,
            blocking_override=params.blocking_override,
        )

    def session_thresholds(self, messages: Sequence[Message], *, info: SessionInfo | None = None) -> Thresholds:
        # ``info`` is not needed: the parameters already carry the session's model and version
        # (registry.build_strategy), and set ones win over the records.
        return self.thresholds(
            model=self._model(messages), version=self._version(messages), observed_max=self._observed_max(messages)
        )

    # ------------------------------------------------------------------ counting

    def reaches_model(self, message: Message) -> bool:
        return reaches_model(message)

    def estimate(self, message: Message) -> int:
        return estimate_message(message)

    def context_tokens(self, messages: Sequence[Message], *, at: int | None = None) -> int:
        return token_count_with_estimation(messages, at=at)

    # ------------------------------------------------------------------ circuit breaker (§2.6)

    def compacts(self, *, version: str | None) -> bool:
        # Every Claude Code version has /compact; autocompact can be off, manual compaction cannot.
        return True

    def circuit_breaker(self, *, version: str | None) -> int | None:
        return self.params.max_consecutive_failures if self._breaker_applies(version) else None

    def _breaker_applies(self, version: str | None) -> bool:
        parsed = parse_version(version)
        return parsed is None or parsed >= CIRCUIT_BREAKER_SINCE

    def breaker_open(self, *, version: str | None = None) -> bool:
        version = version if version is not None else self.params.version
        return (
            self._breaker_applies(version) and self.params.consecutive_failures >= self.params.max_consecutive_failures
        )

    def record_compact_failure(self) -> None:
        self.params.consecutive_failures += 1

    def record_compact_success(self) -> None:
        self.params.consecutive_failures = 0

    # ------------------------------------------------------------------ decisions

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool:
        """Autocompact rule: enabled, breaker closed, and the count at or above the threshold."""
        if not self.params.autocompact_enabled:
            return False
        version = self._version(messages)
        if self.breaker_open(version=version):
            return False
        line = self.session_thresholds(messages).autocompact
        return line is not None and context_tokens >= line

    def select_prune(self, messages: Sequence[Message]) -> list[str]:
        """Microcompact's choice over the live context: all compactable results but the 5 most recent."""
        live = messages[context_start(messages) :]
        return microcompact_selection(live, keep_recent=self.params.keep_recent, tools=self.params.compactable_tools)

    def time_based_prune(self, messages: Sequence[Message], *, now: str | None = None) -> list[str]:
        """Time-based microcompact: ``select_prune`` only once the idle gap reaches 60 minutes."""
        gap = idle_gap_minutes(messages, now=now)
        if gap is None or gap < self.params.gap_threshold_minutes:
            return []
        return self.select_prune(messages)

    def legacy_prune(self, messages: Sequence[Message], *, context_tokens: int) -> list[str]:
        """Legacy microcompact (< 2.1.88, §2.4d): above the warning line, clear all but the newest 40K tokens
        of compactable results, when that saves at least 20K tokens."""
        warning = self.session_thresholds(messages).warning
        if warning is None or context_tokens < warning:
            return []
        live = messages[context_start(messages) :]
        ids = legacy_microcompact_selection(
            live,
            protected_tokens=self.params.legacy_protected_tokens,
            min_keep=self.params.legacy_keep_recent,
            tools=self.params.compactable_tools,
        )
        # §2.4d: the saving it compares with its 20,000 floor is the 4/3-padded estimate (estimateMessageTokens).
        saved = microcompact_savings(live, ids)
        if not ids or saved < self.params.legacy_min_savings:
            return []
        return ids

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None:
        """Autocompact summarises everything since the last compact boundary and keeps none of it verbatim.

        (Claude Code re-attaches up to 5 recently read files, todos, plan and skills after the summary; those
        are not transcript lines, so they are not part of the cut.)
        """
        end = len(messages) if at is None else at
        start = context_start(messages, at=end)
        if not any(reaches_model(m) for m in messages[start:end]):
            return None  # compact.ts: "Not enough messages to compact."
        if session_memory_compaction_runs(self._version(messages[:end]), enabled=self.params.session_memory_compact):
            kept_from = session_memory_kept_from(messages, start, end)
            if kept_from is not None:
                return Cut(
                    start=start,
                    end=kept_from,
                    first_kept=kept_from,
                    reason="session-memory compaction: the newest messages (10,000-40,000 padded tokens, 5 with text) "
                    "are kept verbatim as its preserved segment, the session-memory notes replace the rest",
                )
        return Cut(
            start=start,
            end=end,
            first_kept=end,
            reason="autocompact summarises the whole context since the last compact boundary; nothing is kept",
        )

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        if not 0 <= cut.start <= cut.end <= len(messages):
            raise CutRefused(f"cut {cut.start}:{cut.end} is outside the {len(messages)} messages")
        if cut.start == cut.end:
            raise CutRefused("the cut summarises nothing")
        live_start = context_start(messages, at=cut.end)
        if cut.start < live_start:
            raise CutRefused(
                f"messages before index {live_start} were already replaced by an earlier compaction summary"
            )
        uses: dict[str, int] = {}
        results: dict[str, int] = {}
        for index, message in enumerate(messages):
            for block in message.blocks:
                if block.tool_id is None:
                    continue
                if block.kind == "tool_use":
                    uses.setdefault(block.tool_id, index)
                elif block.kind == "tool_result":
                    results.setdefault(block.tool_id, index)

        def inside(index: int) -> bool:
            return cut.start <= index < cut.end

        for tool_id, use_index in uses.items():
            result_index = results.get(tool_id)
            if result_index is None:
                continue
            if inside(use_index) != inside(result_index):
                raise CutRefused(
                    f"the cut separates tool_use {tool_id} (message {use_index}) "
                    f"from its tool_result (message {result_index})"
                )

    def render_transcript(self, messages: Sequence[Message]) -> str:
        """A faithful flattening of what the summarizer is sent.

        Claude Code sends the summarised messages themselves (forked agent, or the streaming fallback with
        images replaced by ``[image]``, §2.6 step 3), then the compact prompt as the last user message.
        Thinking of earlier turns is dropped by the API, so it is not rendered.
        """
        parts: list[str] = []
        for message in messages:
            if not reaches_model(message):
                continue
            lines: list[str] = []
            for block in message.blocks:
                if block.kind == "text" and block.text:
                    lines.append(block.text)
                elif block.kind == "tool_use":
                    payload = orjson.dumps(block.tool_input).decode() if block.tool_input is not None else block.text
                    # Another agent's call may carry no id (Codex's web_search_call): never print "None".
                    call = f" id={block.tool_id}" if block.tool_id else ""
                    lines.append(f"[tool_use {block.tool_name or '?'}{call}] {payload}")
                elif block.kind == "tool_result":
                    error = " error" if block.is_error else ""
                    result = f" id={block.tool_id}" if block.tool_id else ""
                    lines.append(f"[tool_result{error}{result}]\n{block.text}")
                elif block.kind == "image":
                    lines.append("[image]")
                elif block.kind == "other" and block.text:
                    lines.append(block.text)
            if lines:
                parts.append(f"{message.role.upper()}:\n" + "\n".join(lines))
        return "\n\n".join(parts)

    def prompt(self, custom_instructions: str | None = None) -> str:
        return compact_prompt(custom_instructions)

    def prompt_with_instructions(self, text: str) -> str:
        """The prompt ``/compact <text>`` sends (``base.with_instructions``)."""
        return compact_prompt(text)

    def parse_summary(self, raw: str) -> str:
        """v2.1.88 ``formatCompactSummary``: analysis stripped, ``Summary:`` header, blank runs collapsed."""
        return format_compact_summary(raw)

    # ------------------------------------------------------------------ the summarizer and the export

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        return end

    def carried_over(self, messages: Sequence[Message], cut: Cut) -> int:
        return 0  # nothing of the summarised range comes back after the summary

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        # Rounds as Claude Code groups them (grouping.ts), so a prompt-too-long retry drops the oldest (compact.ts).
        middle = messages[cut.start : cut.end]
        groups = [(text, group) for group in group_by_api_round(middle) if (text := self.render_transcript(group))]
        if not groups:
            return SummarizerPlan()
        rounds = [text for text, _ in groups]
        request = PlannedRequest(
            kind="compact",
            system=SUMMARIZER_SYSTEM_PROMPT,
            transcript="\n\n".join(rounds),
            rounds=rounds,
            instructions=self.prompt(),
            max_tokens=self.max_summary_tokens,
            # truncateHeadForPTLRetry prices each dropped group by roughTokenCountEstimationForMessages.
            round_tokens=[sum(estimate_message(m) for m in group) for _, group in groups],
            # The summarised messages themselves, as the forked agent sends them (§2.6 step 3).
            round_messages=[api_turns(group) for _, group in groups],
            offline_reply=offline_compact_reply(messages, cut.start, cut.end),
            # The streaming fallback's request (§2.6 step 3, compact.ts streamCompactSummary): its system prompt
            # as above, max_tokens min(COMPACT_MAX_OUTPUT_TOKENS, the model's max output) as above, and
            # ``thinkingConfig: {type: 'disabled'}``, which claude.ts queryModel sends as no ``thinking`` field
            # (from v2.1.198 the summarizer inherits the session's thinking configuration, whose request form
            # the docs do not give: not sent either; every sample predates it). Not reproduced: the CLI prefix
            # and attribution system blocks and cache markers claude.ts adds to every request, its metadata and
            # betas.
            extra_body={"tools": SUMMARIZER_TOOLS},
        )
        return SummarizerPlan(requests=[request])

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        return self.parse_summary(replies.get("compact", ""))

    summary_model_reason = "the session's main model: compaction runs as a forked agent of the main loop"

    def summary_model(self, messages: Sequence[Message]) -> str | None:
        """The session's main model: ``compactConversation`` runs a forked agent of the main loop, with its
        model (docs/compaction/claude-code.md §2.6 step 3); the streaming fallback keeps that model too."""
        return self._model(messages)

    export_suffix = ".jsonl"
    export_keeps_after_point = True
    # docs/formats/claude-code.md §8.5: the boundary's parentUuid is null and the file is never rewritten; Claude
    # Code ignores what precedes the last compact_boundary on reload.
    resumes_from_last_compaction: str | None = "Claude Code resumes from the last compact_boundary in the file"

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """Head lines, a manual compact_boundary, the isCompactSummary message, the kept tail, then every line
        recorded after the point (format doc §8.1-8.2): the whole session, less the summarised middle. With
        ``data.end_at_point`` nothing after the point is written: Claude Code resumes from the last
        compact_boundary, so a real one recorded later would hide this summary.

        Kept records are re-emitted byte for byte; only a parentUuid that pointed into the summarised part is
        re-linked to the summary message (as Claude Code's preservedMessages loaders do).
        """
        messages, cut = data.messages, data.cut
        middle_first = messages[cut.start].line if cut.start < len(messages) else None
        # The middle ends where the kept tail starts, or at the point when nothing of the view is kept.
        middle_stop = messages[cut.end].line if cut.end < len(messages) else data.stop_line
        boundary_uuid, summary_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        moment = claude_timestamp(point_timestamp(messages))
        envelope = {
            "isSidechain": False,
            "userType": "external",
            "cwd": data.project,
            "sessionId": data.session_id,
            "version": data.version,
        }
        dropped: set[str] = set()
        last_dropped: str | None = None

        def marker() -> bytes:
            boundary = {
                "parentUuid": None,
                "logicalParentUuid": last_dropped,
                **envelope,
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "timestamp": moment,
                "uuid": boundary_uuid,
                "level": "info",
                "compactMetadata": {"trigger": "manual", "preTokens": data.tokens_before},
            }
            content = self.continuation_message(data.summary, version=data.version or None, auto=False)
            summary: dict[str, Any] = {
                "parentUuid": boundary_uuid,
                **envelope,
                "type": "user",
                "message": {"role": "user", "content": content},
                "isVisibleInTranscriptOnly": True,
                "isCompactSummary": True,
                "uuid": summary_uuid,
                "timestamp": moment,
            }
            return orjson.dumps(boundary) + b"\n" + orjson.dumps(summary) + b"\n"

        emitted_marker = False
        for number, line in data.lines:
            if data.end_at_point and data.stop_line is not None and number >= data.stop_line:
                break
            if middle_first is not None and number >= middle_first and (middle_stop is None or number < middle_stop):
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict) and obj.get("isSidechain") is True:
                    yield line  # a subagent's record: never in the main context, so not summarised away
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("uuid"), str):
                    dropped.add(obj["uuid"])
                    last_dropped = obj["uuid"]
                continue
            if middle_first is not None and number >= middle_first and not emitted_marker:
                yield marker()
                emitted_marker = True
            if dropped and b"parentUuid" in line:
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    obj = None
                if isinstance(obj, dict) and obj.get("parentUuid") in dropped:
                    obj["parentUuid"] = summary_uuid
                    yield orjson.dumps(obj) + b"\n"
                    continue
            yield line
        if not emitted_marker:
            yield marker()

    def continuation_message(self, raw_summary: str, *, version: str | None = None, auto: bool = True) -> str:
        return continuation_message(
            raw_summary,
            version=version if version is not None else self.params.version,
            auto=auto,
            transcript_path=self.params.transcript_path,
        )

    # ------------------------------------------------------------------ the five layers (seed 003, §2.0)

    def context_layers(self, messages: Sequence[Message], *, at: int) -> tuple[int, list[Layer], list[str]]:
        """What each layer of query.ts would do to the request built from ``messages[:at]``, in order.

        ``sent`` is the request as Claude Code estimates it (the count before the layers); ``counted`` is the
        tokenCountWithEstimation the later layers compare with their lines: clearing results that precede the
        last response does not lower it, because that response's recorded usage still includes them (§4.1).
        """

        visible = list(messages[:at])
        params = self.params
        version = self._version(visible)
        thresholds = self.session_thresholds(visible)
        live = visible[context_start(visible) :]
        counted = token_count_with_estimation(visible)
        sent = counted
        layers: list[Layer] = []

        overflows = tool_result_budget(live, limit_chars=params.tool_result_budget_chars)
        persisted = [tool_id for overflow in overflows for tool_id in overflow.persisted]
        budget_tokens = _js_round(sum(o.total_chars - o.chars_after for o in overflows) / 4)
        budget_acts = params.tool_result_budget_enabled and bool(persisted)
        budget_what = (
            f"{len(persisted)} result(s) of a message over {params.tool_result_budget_chars:,} chars persisted to "
            f"disk behind a 2 KB preview, ~{budget_tokens:,} tokens"
            if persisted
            else f"no message's tool results exceed {params.tool_result_budget_chars:,} chars"
        )
        if budget_acts:
            sent -= budget_tokens
        layers.append(
            Layer(
                number=1,
                name="Tool-result budget",
                enabled=params.tool_result_budget_enabled,
                why=(
                    "on (set for this replay)"
                    if params.tool_result_budget_enabled
                    # GrowthBook tengu_hawthorn_steeple defaults to false (docs/compaction/claude-code.md §2.2).
                    else "off: a remote feature flag, off by default, that no transcript shows"
                ),
                acts=budget_acts,
                removes=budget_tokens if budget_acts else 0,
                tokens_after=sent,
                counted_after=counted,
                detail=budget_what if params.tool_result_budget_enabled else f"if it were on: {budget_what}",
                tool_ids=persisted,
                inferred=not params.tool_result_budget_enabled,
            )
        )
        layers.append(
            Layer(
                number=2,
                name="Snip (HISTORY_SNIP)",
                enabled=False,
                why="off: an Anthropic-internal feature compiled out of external builds",  # §2.3
                acts=False,
                removes=0,
                tokens_after=sent,
                counted_after=counted,
                detail="external transcripts carry no snip records",
            )
        )

        legacy = legacy_microcompact_runs(version, requested=params.legacy_microcompact)
        gap = idle_gap_minutes(visible)
        time_based = (
            self.time_based_prune(visible)
            if time_based_microcompact_runs(version, enabled=params.time_based_mc_enabled)
            else []
        )
        if time_based:
            cleared, how = time_based, f"time-based: idle {gap:.0f} min ≥ {params.gap_threshold_minutes:g}"
        elif legacy:
            cleared = self.legacy_prune(visible, context_tokens=counted)
            how = "legacy: above the warning line, keeps the newest 40,000 tokens of results, saves ≥ 20,000"
        else:
            cleared, how = [], ""
        why_parts = [
            "time-based on (set)"
            if params.time_based_mc_enabled
            # GrowthBook tengu_slate_heron defaults to false (§2.4a).
            else "time-based off: a remote feature flag, off by default",
        ]
        if params.legacy_microcompact is not None:
            why_parts.append(f"legacy forced {'on' if legacy else 'off'} (a what-if)")
        elif legacy:
            why_parts.append(f"legacy on: {version} is in 2.1.12–2.1.22, where real microcompact records appear")
        else:
            why_parts.append(
                f"legacy off: {version or 'unknown version'} is outside 2.1.12–2.1.22, the only builds seen running it"
            )
        why_parts.append("cached microcompact is Anthropic-internal")  # §2.4b
        saved = 0
        if cleared:
            saved = sum(estimate_message(m) for m in live) - sum(
                estimate_message(m) for m in apply_microcompact(live, cleared)
            )
            sent -= saved
            counted = token_count_with_estimation(apply_microcompact(visible, cleared))
        warning = thresholds.warning
        if cleared:
            mc_detail = f"{how}: clears {len(cleared)} tool results, ~{saved:,} tokens"
        elif legacy and warning is not None and counted < warning:
            mc_detail = f"count {counted:,} below the warning line {warning:,}: nothing to clear"
        elif legacy:
            mc_detail = "nothing old enough to clear saves 20,000 tokens"
        else:
            mc_detail = "no microcompact runs"
        layers.append(
            Layer(
                number=3,
                name="Microcompact",
                enabled=bool(time_based) or params.time_based_mc_enabled or legacy,
                why="; ".join(why_parts),
                acts=bool(cleared),
                removes=saved,
                tokens_after=sent,
                counted_after=counted,
                detail=mc_detail,
                tool_ids=list(cleared),
                inferred=not params.time_based_mc_enabled,
            )
        )
        layers.append(
            Layer(
                number=4,
                name="Context collapse (CONTEXT_COLLAPSE)",
                enabled=False,
                why="off: an Anthropic-internal feature compiled out of external builds",  # §2.5
                acts=False,
                removes=0,
                tokens_after=sent,
                counted_after=counted,
                detail="external transcripts carry no context-collapse records",
            )
        )

        line = thresholds.autocompact
        breaker = self.breaker_open(version=version)
        auto_on = params.autocompact_enabled and line is not None and not breaker
        compacts = auto_on and line is not None and counted >= line
        if not params.autocompact_enabled or line is None:
            auto_why = "off: autocompact disabled (DISABLE_AUTO_COMPACT or the autoCompactEnabled setting)"  # §1.1
        elif breaker:
            auto_why = f"off: circuit breaker open after {params.consecutive_failures} consecutive failures"  # §2.6
        else:
            auto_why = (
                f"on: threshold {line:,} ({thresholds.source}); session-memory compaction first is off "
                # GrowthBook tengu_sm_compact defaults to false (§2.6).
                "(a remote feature flag, off by default)"
            )
        summarised = sum(estimate_message(m) for m in apply_microcompact(live, cleared)) if compacts else 0
        summary = self.max_summary_tokens if compacts else 0
        if compacts:
            sent = max(0, sent - summarised) + summary
            auto_detail = (
                f"count {counted:,} ≥ threshold {line:,}: summarises everything since the last boundary "
                f"(~{summarised:,} tokens) into a summary of at most {summary:,} tokens (its budget; real ones are "
                "usually shorter)"
            )
        elif line is not None and auto_on:
            auto_detail = f"count {counted:,} below threshold {line:,} ({line - counted:,} to go)"
        else:
            auto_detail = "does not run"
        layers.append(
            Layer(
                number=5,
                name="Autocompact",
                enabled=auto_on,
                why=auto_why,
                acts=compacts,
                removes=summarised,
                adds=summary,
                tokens_after=sent,
                counted_after=sent if compacts else counted,
                detail=auto_detail,
            )
        )

        blocking = thresholds.blocking
        reactive = line is not None and params.autocompact_enabled and reactive_compaction_runs(version)
        checks = blocking is not None and not compacts and not reactive
        blocks = checks and blocking is not None and counted >= blocking
        if compacts:
            block_why = "skipped: autocompact just compacted (query.ts:637)"
        elif reactive:
            block_why = f"skipped: reactive compaction owns the overflow from 2.1.142 ({version})"
        else:
            block_why = f"on: blocking limit {blocking:,}" if blocking is not None else "no blocking limit"
        layers.append(
            Layer(
                number=6,
                name="Blocking check",
                enabled=checks,
                why=block_why,
                acts=blocks,
                removes=0,
                tokens_after=sent,
                counted_after=counted if not compacts else sent,
                detail=(
                    f"count {counted:,} ≥ {blocking:,}: nothing is sent, the turn ends with "
                    f'"{PROMPT_TOO_LONG_ERROR_MESSAGE}"'
                    if blocks and blocking is not None
                    else "the request is sent"
                ),
            )
        )
        notes = ["Token numbers are Claude Code's own estimates: recorded usage plus chars/4 of what came after it."]
        return token_count_with_estimation(visible), layers, notes

    def replay_rules(self, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> ReplayRules:
        return ClaudeCodeReplayRules(self, thresholds=thresholds, summary_tokens=summary_tokens, version=version)

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision:
        end = len(messages) if at is None else at
        visible = messages[:end]
        tokens = context_tokens if context_tokens is not None else token_count_with_estimation(visible)
        version = self._version(visible)
        thresholds = self.session_thresholds(visible)
        breaker = self.breaker_open(version=version)
        compact = self.should_compact(messages=visible, context_tokens=tokens)
        cut = self.select_cut(visible) if compact else None

        prune: list[str] = []
        prune_reason = ""
        gap = idle_gap_minutes(visible)
        time_based = self.time_based_prune(visible)
        if time_based and time_based_microcompact_runs(version, enabled=self.params.time_based_mc_enabled):
            prune, prune_reason = time_based, f"idle {gap:.0f} min ≥ {self.params.gap_threshold_minutes:g}"
        elif legacy_microcompact_runs(version, requested=self.params.legacy_microcompact):
            # It runs before autocompact and can precede it (f9f6f611b469 lines 371-372, format doc §9).
            prune = self.legacy_prune(visible, context_tokens=tokens)
            if prune:
                prune_reason = "legacy microcompact above the warning line"

        live = visible[context_start(visible) :]
        if compact and cut is not None:
            # What survives is the non-message part (system prompt, tools) implied by recorded usage; the
            # summary and the re-attached files come on top and are unknown until the summarizer runs.
            summarised = sum(estimate_message(m) for m in visible[cut.start : cut.end])
            after = max(0, tokens - summarised)
        elif prune:
            after = max(0, tokens - microcompact_savings(live, prune))
        else:
            after = tokens

        if compact:
            reason = f"context {tokens:,} ≥ autocompact threshold {thresholds.autocompact:,}"
            if cut is not None and cut.end < end:
                reason += f"; {cut.reason}"  # a preserved segment stays (session-memory compaction)
        elif breaker:
            reason = f"circuit breaker open after {self.params.consecutive_failures} consecutive failures"
        elif thresholds.autocompact is None:
            reason = "autocompact is off for this version or configuration"
        else:
            reason = f"context {tokens:,} below autocompact threshold {thresholds.autocompact:,}"
        if prune_reason:
            reason += f"; {prune_reason}"

        return Decision(
            strategy=self.name,
            should_compact=compact,
            tokens_before=tokens,
            cut=cut,
            prune=prune,
            tokens_after_estimate=after,
            reason=reason,
            details={
                "model": self._model(visible),
                "version": version,
                "thresholds": {
                    "window": thresholds.window,
                    "effective_window": thresholds.effective_window,
                    "autocompact": thresholds.autocompact,
                    "warning": thresholds.warning,
                    "blocking": thresholds.blocking,
                    "source": thresholds.source,
                    "assumption": thresholds.assumption,
                },
                "above_warning": thresholds.warning is not None and tokens >= thresholds.warning,
                "at_blocking_limit": thresholds.blocking is not None and tokens >= thresholds.blocking and not compact,
                "circuit_breaker_open": breaker,
                "idle_minutes": gap,
                "time_based_microcompact": time_based,
                "tool_result_budget": [
                    {"first": o.first, "last": o.last, "total_chars": o.total_chars, "persisted": o.persisted}
                    for o in tool_result_budget(live, limit_chars=self.params.tool_result_budget_chars)
                ],
            },
        )


class ClaudeCodeReplayRules(ReplayRules):
    """Claude Code in a replay: counts last usage + pending estimate, acts at ``>=``, microcompacts in place.

    Which mechanisms run depends on the version (constants above name their sources): the legacy microcompact
    only where it was observed, reactive compaction only from 2.1.142, the blocking check whenever autocompact
    cannot act.
    """

    counts = "pending"
    strict = False

    def __init__(
        self, strategy: ClaudeCodeStrategy, *, thresholds: Thresholds, summary_tokens: int, version: str | None
    ) -> None:
        super().__init__(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
        self.cc = strategy
        self.overflow_gap = 0
        params = strategy.params
        # The version the strategy was given (the recorded one by default, or the user's what-if), as its own
        # decisions use it (``_version``).
        version = params.version or version
        self.version = version
        self.legacy_prune = legacy_microcompact_runs(version, requested=params.legacy_microcompact)
        self.reactive = thresholds.autocompact is not None and reactive_compaction_runs(version)
        parsed = parse_version(version)
        if params.legacy_microcompact and not self.legacy_prune:
            self.notes.append(
                f"Legacy microcompact asked for, but {version} has no such code path (removed in 2.1.88): not applied."
            )
        elif params.legacy_microcompact is not None:
            state = "on" if params.legacy_microcompact else "off"
            self.notes.append(f"Legacy microcompact forced {state} (a what-if).")
        elif self.legacy_prune:
            self.notes.append(
                f"Legacy microcompact applied: {version} is in 2.1.12–2.1.22, where real microcompact records appear."
            )
        if parsed is not None and EXTERNAL_NO_REACTIVE_UNTIL < parsed < REACTIVE_COMPACT_SINCE:
            self.notes.append(
                f"Reactive compaction assumed off for {version}: ant-only in 2.1.88, first public in 2.1.142 "
                "(inferred for the builds in between)."
            )

    def estimate(self, message: Message) -> int:
        return estimate_message(message)

    def response_output(self, response: Sequence[Message], *, recorded: int) -> tuple[int, bool]:
        return final_output_tokens(response, recorded=recorded)

    def level(self, counted: int, *, idle_minutes: float | None) -> int:
        if self.over(counted, self.thresholds.autocompact):
            return 2
        if self.legacy_prune and self.over(counted, self.thresholds.warning):
            return 1
        params = self.cc.params
        time_based = time_based_microcompact_runs(self.version, enabled=params.time_based_mc_enabled)
        if time_based and idle_minutes is not None and idle_minutes >= params.gap_threshold_minutes:
            return 1
        return 0

    def blocks(self, counted: int) -> str | None:
        """query.ts:637 (§2.7): with autocompact unable to act (off, or its breaker open) and no reactive compaction
        owning the overflow, a count at the blocking limit sends nothing and ends the turn."""
        blocking = self.thresholds.blocking
        can_compact = self.thresholds.autocompact is not None and not self.cc.breaker_open(version=self.version)
        if blocking is None or can_compact or self.reactive or counted < blocking:
            return None
        why = "autocompact is off" if self.thresholds.autocompact is None else "the circuit breaker is open"
        return (
            f"tokenCountWithEstimation {counted:,} ≥ blocking limit {blocking:,} and {why}: Claude Code sends "
            f'nothing and ends the turn with "{PROMPT_TOO_LONG_ERROR_MESSAGE}"'
        )

    def overflow_reason(self, actual: int, window: int) -> str:
        self.overflow_gap = max(0, actual - window)  # what reactive compaction peels from the tail (§2.8)
        if self.reactive:
            return f"the request ({actual:,} tokens) does not fit the {window:,}-token window"
        return (
            f"the request ({actual:,} tokens) does not fit the {window:,}-token window: the API answers "
            f'"{PROMPT_TOO_LONG_ERROR_MESSAGE}" and this build ({self.version or "unknown version"}) does not '
            "compact reactively, so the turn ends"  # §2.8
        )

    def reactive_cut(self, view: list[Message]) -> Cut | None:
        """§2.8: reactive compaction peels API-round groups from the tail, guided by the token gap (the request's
        excess over the window), summarises the rest and keeps the peeled rounds verbatim (the boundary's
        ``preservedSegment``). A round starts at each new assistant response; the newest is always kept."""
        cut = self.cc.select_cut(view)
        if cut is None:
            return None
        starts = [
            i
            for i in range(cut.start, len(view))
            if view[i].role == "assistant" and (i == cut.start or view[i].call_key != view[i - 1].call_key)
        ]
        kept_from = len(view)
        peeled = 0
        for start in reversed(starts):
            if start <= cut.start:
                break
            peeled += sum(estimate_message(m) for m in view[start:kept_from])
            kept_from = start
            if peeled >= self.overflow_gap:
                break
        if kept_from >= len(view) or kept_from <= cut.start:
            return cut
        return Cut(
            start=cut.start,
            end=kept_from,
            first_kept=kept_from,
            reason=f"reactive compaction: the newest API rounds (~{peeled:,} tokens) are kept as its preserved segment",
        )

    reattaches = True

    def kept_by_real(self, messages: Sequence[Message], position: int) -> Sequence[int]:
        """The records before the real boundary at ``position`` that its compaction kept verbatim (``preserved``)."""
        return preserved_positions(messages, position)

    def user_cut(
        self, view: list[Message], origin: Sequence[int | None], messages: Sequence[Message], position: int
    ) -> Cut | None:
        """§2.9 partial compaction (/rewind "Summarize up to here" / "from here", ``partialCompactConversation``,
        [S88]): it summarises the messages on one side of the message the user picked and keeps the other side
        verbatim, which the boundary records as its preserved segment. A modelled one summarises and keeps the same
        parts: ``up_to`` (the kept part comes last) summarises everything before it; ``from`` (the kept part comes
        first) summarises everything after it. None: the boundary preserves nothing (a whole /compact)."""
        kept = set(preserved_positions(messages, position))
        indices = [i for i, o in enumerate(origin) if o is not None and o in kept]
        if not indices:
            return None
        try:
            own = self.cc.select_cut(view)
        except (CutRefused, ValueError):
            own = None
        start = own.start if own is not None else 0
        first, last = indices[0], indices[-1]
        if first > start:
            return Cut(
                start=start,
                end=first,
                first_kept=first,
                reason=f"partial compaction up to the preserved segment ({len(indices):,} records kept verbatim)",
            )
        if last + 1 < len(view):
            return Cut(
                start=last + 1,
                end=len(view),
                first_kept=len(view),
                reason=f"partial compaction from after the preserved segment ({len(indices):,} records kept verbatim)",
            )
        return None

    def thrash_stop(self) -> tuple[int, int, str] | None:
        parsed = parse_version(self.version)
        if parsed is not None and parsed < THRASH_STOP_SINCE:
            return None
        return (
            RAPID_REFILL_TRIP,
            RAPID_REFILL_TURNS,
            f"Claude Code {self.version or '(version unknown)'} stops autocompacting after {RAPID_REFILL_TRIP} "
            f"compactions in a row that the context refills within {RAPID_REFILL_TURNS} turns (thrash-loop detection, "
            "2.1.89)",
        )

    def reattached_note(self) -> str:
        if self.measured_reattached is not None:
            return (
                f"After a modelled compaction Claude Code re-attaches ~{self.measured_reattached:,} tokens (files, "
                "todos, skills it does not write to the transcript): measured from this session's real compactions."
            )
        return (
            "After a modelled compaction Claude Code re-attaches its 5 last-touched files (≤ 5,000 tokens each, "
            "50,000 in all), its todo list and invoked skills (compact.ts, §2.6): estimated from the session's records."
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        """The head, the summary, then the attachments Claude Code builds after it (§2.6 step 5: boundary, summary,
        messages kept, attachments), then what the cut kept."""
        view_after, origin_after = super().after_compaction(view, origin, cut, summary)
        measured = self.measured_reattached
        if measured is None:
            measured = post_compact_attachments(view[: cut.end], version=self.version).total
        total = measured
        if not total:
            return view_after, origin_after
        at = view_after.index(summary) + 1
        attachment = Message(
            line=0,
            role="user",
            kind="injected",
            blocks=[Block("text", "x" * (4 * total))],
            raw_type="replay/attachments",
            data={"replay_synthetic": True, "reattached": total},
        )
        return view_after[:at] + [attachment] + view_after[at:], origin_after[:at] + [None] + origin_after[at:]

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        self.apply_recorded_prune(view, tool_ids)

    def apply_recorded_prune(self, view: list[Message], tool_ids: list[str]) -> None:
        # Format doc §9: the listed results stay verbatim in the JSONL; the next request carries them cleared.
        cleared = set(tool_ids)
        for index, message in enumerate(view):
            if any(b.tool_id in cleared for b in message.blocks if b.kind in ("tool_result", "image")):
                view[index] = apply_microcompact([message], tool_ids)[0]
