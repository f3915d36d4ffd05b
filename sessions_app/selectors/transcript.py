"""Reads of a transcript page: an agent's records as shown (tool results under their calls, giant records
from the head of their JSON), one block whole, a record's page, the summaries, line issues and unknown records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.core.paginator import Page, Paginator
from django.db.models import Case, F, Q, QuerySet, Value, When
from django.db.models.functions import Substr

from sessions_app import models, tool_calls
from sessions_app.selectors.search import matching_messages
from sessions_app.selectors.subagents import SubagentRow, subagents

TRANSCRIPT_PAGE = 100  # records per transcript page: bounded work per request, whatever the session's length
TRUNCATE_CHARS = 2000  # longer block text is cut, with a "show all" link
# A record with more text than this is never loaded whole for a transcript page: only the head of its stored
# JSON is read (in the database), so a page of giant records costs what a page of small ones does.
LOAD_WHOLE_CHARS = 200_000
_HEAD_BYTES = 4 * TRUNCATE_CHARS + 500


@dataclass(slots=True)
class RenderedBlock:
    index: int
    kind: str
    text: str
    truncated: bool
    full_chars: int
    tool_id: str
    tool_name: str
    is_error: bool
    media_type: str
    subagent: str = ""  # a Task/Agent call: the subagent it started
    subagent_row: SubagentRow | None = None  # ... with its kind, calls, tokens and cost (opens in place)
    markdown: bool = False  # text a model wrote (a reply, a summary): rendered as markdown

    # A tool call: its result's size and whether it failed, when the result is paired under it (same page)
    result_chars: int | None = None
    result_error: bool = False
    # A tool call, from its whole input (tool_calls): what it works on; its diff when it is an edit or a patch, cut
    # at DIFF_ROWS lines on a page (``diff_cut``; diff_lines its whole length); else its input as read (``view``:
    # a command line, a subagent's prompt under its ``description``, indented JSON), cut at TRUNCATE_CHARS.
    target: str = ""
    diff: tool_calls.DiffRows | None = None
    diff_lines: int = 0
    diff_cut: bool = False
    view: str = ""
    view_kind: str = ""
    view_chars: int = 0
    view_cut: bool = False
    description: str = ""
    view_extra: str = ""

    @property
    def cut(self) -> bool:
        """Whether the page shows less than the block holds (a "show all" link loads the rest)."""
        if self.kind != "tool_use":
            return self.truncated
        return self.diff_cut if self.diff is not None else self.view_cut


def _markdown_block(*, role: str, kind: str, block: RenderedBlock) -> bool:
    """Models write markdown in their replies and summaries, people in their prompts; tool text and thinking stay
    as typed."""
    return block.kind == "text" and (role == "assistant" or kind in ("compact_summary", "prompt"))


# The transcript's filter chips (``?show=prompts,tools``): what each shows, as a test on the stored record. None
# chosen shows every record. Blocks are stored as compact JSON (orjson), so a block kind is a fixed substring.
SHOW_CHOICES: tuple[tuple[str, str], ...] = (
    ("prompts", "Prompts"),
    ("replies", "Replies"),
    ("thinking", "Thinking"),
    ("tools", "Tools"),
    ("errors", "Errors"),
    ("subagents", "Subagents"),
)


def parse_show(value: str) -> tuple[str, ...]:
    """The chosen chips of a ``show`` query value, in the chips' order; unknown names are ignored."""
    chosen = {part.strip() for part in value.split(",")}
    return tuple(name for name, _ in SHOW_CHOICES if name in chosen)


def _show_filter(*, session: models.Session, agent: str, show: tuple[str, ...]) -> Q:
    tests = {
        "prompts": Q(kind="prompt"),
        "replies": Q(role="assistant", blocks_json__contains='"kind":"text"'),
        "thinking": Q(blocks_json__contains='"kind":"thinking"')
        | Q(blocks_json__contains='"kind":"redacted_thinking"'),
        "tools": Q(kind="tool_result") | Q(blocks_json__contains='"kind":"tool_use"'),
        "errors": Q(blocks_json__contains='"is_error":true') | Q(kind="unknown"),
        "subagents": Q(
            seq__in=models.ContextEvent.objects.filter(session=session, agent=agent, kind="subagent_spawn").values(
                "seq"
            )
        ),
    }
    chosen = Q()
    for name in show:
        chosen |= tests[name]
    return chosen


@dataclass(slots=True)
class RenderedMessage:
    seq: int
    line: int
    role: str
    kind: str
    raw_type: str
    agent: str
    timestamp: Any
    model: str
    call_number: int | None
    context: int | None
    blocks: list[RenderedBlock]
    results: list[RenderedMessage]  # tool results paired under this message's tool calls
    raw: str
    tokens: int | None
    events: list[models.ContextEvent]
    tokens_method: str = ""  # "tiktoken", or "chars/4" for a record too long for tiktoken
    blank: bool = False  # every block was whitespace: not shown unless it carries an event
    # Subagents started by no tool call that ran just before this record (the agent's compaction request before its
    # compaction): they open in place here.
    placed: list[SubagentRow] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"m{self.seq}"


def render_block(index: int, block: dict[str, Any], *, full: bool = False) -> RenderedBlock:
    """A stored block as shown: its text cut at TRUNCATE_CHARS (``full``: whole); a tool call's target and diff read
    from its whole input first, the diff cut at DIFF_ROWS lines."""
    text = block.get("text", "")
    kind = block.get("kind", "text")
    tool_name = block.get("tool_name", "")
    diff = tool_calls.tool_diff(text, tool_name) if kind == "tool_use" else None
    diff_lines = len(diff) if diff is not None else 0
    diff_cut = not full and diff_lines > tool_calls.DIFF_ROWS
    cut = not full and len(text) > TRUNCATE_CHARS
    view = tool_calls.input_view(text, tool_name) if kind == "tool_use" and diff is None else None
    view_cut = view is not None and not full and len(view.text) > TRUNCATE_CHARS
    return RenderedBlock(
        index=index,
        kind=kind,
        text=text[:TRUNCATE_CHARS] if cut else text,
        truncated=cut,
        full_chars=len(text),
        tool_id=block.get("tool_id", ""),
        tool_name=tool_name,
        is_error=bool(block.get("is_error")),
        media_type=block.get("media_type", ""),
        target=tool_calls.tool_target(text, tool_name) if kind == "tool_use" else "",
        diff=diff[: tool_calls.DIFF_ROWS] if diff is not None and diff_cut else diff,
        diff_lines=diff_lines,
        diff_cut=diff_cut,
        view=(view.text[:TRUNCATE_CHARS] if view_cut else view.text) if view is not None else "",
        view_kind=view.kind if view is not None else "",
        view_chars=len(view.text) if view is not None else 0,
        view_cut=view_cut,
        description=view.description if view is not None else "",
        view_extra=view.extra if view is not None else "",
    )


def transcript_page(
    *, session: models.Session, agent: str, page: int | str | None, q: str = "", show: tuple[str, ...] = ()
) -> Page:
    """One page of an agent's records (those the ``show`` chips choose), tool results paired under their calls; a
    fixed number of queries."""
    # matching_messages matched the text once and hands over ids: nothing here matches text row by row.
    base = matching_messages(q=q, session=session) if q else models.Message.objects.all()
    qs = base.filter(session=session, agent=agent).exclude(kind="bookkeeping")
    if show:
        qs = qs.filter(_show_filter(session=session, agent=agent, show=show))
    qs = (
        qs.order_by("seq")
        .defer("data_json", "blocks_json")
        .annotate(
            blocks_whole=Case(When(chars__lte=LOAD_WHOLE_CHARS, then=F("blocks_json")), default=Value(None)),
            blocks_head=Case(
                When(chars__gt=LOAD_WHOLE_CHARS, then=Substr("blocks_json", 1, _HEAD_BYTES)), default=Value(None)
            ),
        )
    )
    paginator = Paginator(qs, TRANSCRIPT_PAGE)
    page_obj = paginator.get_page(page)
    rows = list(page_obj.object_list)
    contexts = dict(
        models.ApiCall.objects.filter(
            session=session, agent=agent, number__in={r.call_number for r in rows if r.call_number is not None}
        ).values_list("number", "context")
    )
    rendered = [_render_message(r, contexts) for r in rows]
    if rows:
        by_seq = {m.seq: m for m in rendered}
        for event in models.ContextEvent.objects.filter(
            session=session, agent=agent, seq__gte=rows[0].seq, seq__lte=rows[-1].seq
        ):
            if event.seq in by_seq:
                by_seq[event.seq].events.append(event)
    if any(e.kind in ("subagent_spawn", "compaction") for m in rendered for e in m.events):
        _link_subagents(session=session, agent=agent, rendered=rendered)
    # Pair tool results with the call on the same page; results whose call is elsewhere stay in place.
    by_tool: dict[str, RenderedMessage] = {}
    for m in rendered:
        for b in m.blocks:
            if b.kind == "tool_use" and b.tool_id:
                by_tool[b.tool_id] = m
    shown: list[RenderedMessage] = []
    for m in rendered:
        if m.blank and not m.events:
            continue  # an empty card says nothing
        owner = None
        if m.kind == "tool_result" and not q:
            ids = [b.tool_id for b in m.blocks if b.kind == "tool_result"]
            owners = {id(by_tool[i]) for i in ids if i in by_tool}
            if ids and len(owners) == 1 and all(i in by_tool for i in ids):
                owner = by_tool[ids[0]]
        if owner is not None:
            owner.results.append(m)
        else:
            shown.append(m)
    for m in shown:
        _note_results(m)
    page_obj.object_list = shown  # type: ignore[assignment]  # rendered rows replace the model rows
    return page_obj


def _link_subagents(*, session: models.Session, agent: str, rendered: list[RenderedMessage]) -> None:
    """The page starts subagents: its spawning calls open their transcripts in place (and link to them), and a
    subagent started by no tool call (a compaction request) opens at the first record after where it started."""
    rows = subagents(session=session).rows
    by_tool = {r.spawn.tool_id: r for r in rows if r.spawn is not None and r.spawn.tool_id}
    for m in rendered:
        for block in m.blocks:
            if block.kind == "tool_use" and block.tool_id in by_tool:
                block.subagent_row = by_tool[block.tool_id]
                block.subagent = block.subagent_row.agent
    for row in rows:
        spawn = row.spawn
        if spawn is None or spawn.tool_id or spawn.parent != agent:
            continue
        after = next((m for m in rendered if m.seq > spawn.seq), None)
        if after is not None and (rendered[0].seq <= spawn.seq or after is not rendered[0]):
            after.placed.append(row)


def _note_results(message: RenderedMessage) -> None:
    """Each tool call's result size and outcome, for its folded line: from the results paired under it."""
    results = {rb.tool_id: rb for r in message.results for rb in r.blocks if rb.kind == "tool_result" and rb.tool_id}
    for block in message.blocks:
        result = results.get(block.tool_id) if block.kind == "tool_use" else None
        if result is not None:
            block.result_chars = result.full_chars
            block.result_error = result.is_error


def _render_message(row: models.Message, contexts: dict[int, int]) -> RenderedMessage:
    """The record as shown, whitespace-only text and thinking blocks left out."""
    blocks = _blocks_of(row)
    shown = [b for b in blocks if b.kind not in ("text", "thinking") or b.text.strip()]
    for b in shown:
        b.markdown = _markdown_block(role=row.role, kind=row.kind, block=b)
    return RenderedMessage(
        blank=bool(blocks) and not shown,
        seq=row.seq,
        line=row.line,
        role=row.role,
        kind=row.kind,
        raw_type=row.raw_type,
        agent=row.agent,
        timestamp=row.timestamp,
        model=row.model,
        call_number=row.call_number,
        context=contexts.get(row.call_number) if row.call_number is not None else None,
        blocks=shown,
        results=[],
        raw=row.raw[:TRUNCATE_CHARS],
        tokens=row.tokens,
        tokens_method=row.tokens_method,
        events=[],
    )


def _blocks_of(row: models.Message) -> list[RenderedBlock]:
    whole = getattr(row, "blocks_whole", None)
    head = getattr(row, "blocks_head", None)
    if whole is None and head is not None:
        return [_head_block(head, chars=row.chars)]
    return [render_block(i, b) for i, b in enumerate(orjson.loads(whole if whole is not None else row.blocks_json))]


_HEAD_FIELD = re.compile(r'"(kind|tool_id|tool_name)":"((?:[^"\\]|\\.)*)"')
_HEAD_TEXT = re.compile(r'"text":"')


def _head_block(head: str, *, chars: int) -> RenderedBlock:
    """The first block of a giant record, from the head of its stored JSON: its kind and the start of its text
    ("show all" loads the whole block on request)."""
    fields = {name: value for name, value in _HEAD_FIELD.findall(head.split('"text":"', 1)[0])}
    text = ""
    found = _HEAD_TEXT.search(head)
    if found:
        rest = head[found.end() :]
        end = re.search(r'(?<!\\)(?:\\\\)*"', rest)
        rest = rest[: end.start() + len(end.group()) - 1] if end else rest
        for cut in range(8):  # the head may end inside an escape sequence: drop its last characters
            try:
                text = orjson.loads(f'"{rest[: len(rest) - cut]}"')
                break
            except orjson.JSONDecodeError:
                continue
    kind, tool_name = fields.get("kind", "text"), fields.get("tool_name", "")
    return RenderedBlock(
        index=0,
        kind=kind,
        text=text[:TRUNCATE_CHARS],
        truncated=True,
        full_chars=chars,
        tool_id=fields.get("tool_id", ""),
        tool_name=tool_name,
        is_error=False,
        media_type="",
        # A giant edit's diff is not built from a head: folded with its size, read whole on "show all".
        diff=[] if kind == "tool_use" and tool_calls.can_diff(tool_name) else None,
        diff_cut=kind == "tool_use" and tool_calls.can_diff(tool_name),
        target=tool_calls.tool_target(text, tool_name) if kind == "tool_use" else "",
        # Any other giant call: the head of its input as stored, cut, until "show all" reads it whole.
        view=text[:TRUNCATE_CHARS],
        view_kind="json",
        view_chars=chars,
        view_cut=True,
    )


def page_of_message(*, session: models.Session, agent: str, seq: int) -> int:
    """The transcript page that holds record ``seq`` (for permalinks)."""
    before = (
        models.Message.objects.filter(session=session, agent=agent, seq__lt=seq).exclude(kind="bookkeeping").count()
    )
    return before // TRANSCRIPT_PAGE + 1


def message_block(*, session: models.Session, seq: int, index: int) -> RenderedBlock:
    row = models.Message.objects.only("blocks_json", "role", "kind").get(session=session, seq=seq)
    blocks = orjson.loads(row.blocks_json)
    if not 0 <= index < len(blocks):
        raise models.Message.DoesNotExist(f"message {seq} has no block {index}")
    block = render_block(index, blocks[index], full=True)
    block.markdown = _markdown_block(role=row.role, kind=row.kind, block=block)
    return block


def compaction_summaries(*, session: models.Session) -> QuerySet[models.Message]:
    return models.Message.objects.filter(session=session, kind="compact_summary").order_by("seq")


LINE_ISSUES_LISTED = 200  # bad lines named one by one; past it, how many more (bounded work whatever the file)


@dataclass(frozen=True, slots=True)
class LineIssues:
    """The lines the import could not read: the first ``LINE_ISSUES_LISTED`` by file and line, and the total. The
    session page, its JSON twin and ``session_stats`` all read this one value."""

    listed: list[models.LineIssue]
    total: int

    @property
    def not_listed(self) -> int:
        return self.total - len(self.listed)

    def __bool__(self) -> bool:
        return self.total > 0

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "listed": [{"path": i.path, "line": i.line, "message": i.message} for i in self.listed],
            "not_listed": self.not_listed,
        }


def line_issues(*, session: models.Session, limit: int = LINE_ISSUES_LISTED) -> LineIssues:
    if not session.line_errors:
        return LineIssues(listed=[], total=0)  # the stored count says there are none: no query (every page view)
    rows = models.LineIssue.objects.filter(session=session)
    listed = list(rows[:limit])
    return LineIssues(listed=listed, total=len(listed) if len(listed) < limit else rows.count())


def unknown_records(*, session: models.Session, limit: int = 200) -> list[models.Message]:
    if not session.unknown_records:
        return []  # the stored count says there are none: no scan of the session's records (every page view)
    return list(
        models.Message.objects.filter(session=session, kind="unknown").only("seq", "line", "raw_type", "raw", "agent")[
            :limit
        ]
    )
