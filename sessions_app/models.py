"""Stored sessions. The neutral model lives in ``compaction.transcript``; these rows are its storage."""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from django.db import models
from django.db.models import F
from django.utils import timezone

from compaction.formats.registry import FORMAT_CHOICES, FORMAT_LABELS
from compaction.transcript import SessionInfo


class Session(models.Model):
    # The formats are compaction.formats.registry's, one per format module: the column holds no choices of its own,
    # so a new agent changes neither this model nor the schema.
    FORMAT_CHOICES = FORMAT_CHOICES
    format = models.CharField(max_length=20)
    external_id = models.CharField(max_length=200, blank=True, db_index=True)  # the agent's own session id
    title = models.CharField(max_length=500, blank=True)
    project = models.CharField(max_length=1000, blank=True, db_index=True)  # the agent's cwd / work dir
    model = models.CharField(max_length=200, blank=True, db_index=True)
    agent_version = models.CharField(max_length=50, blank=True)
    context_window = models.PositiveIntegerField(null=True)
    started_at = models.DateTimeField(null=True, db_index=True)
    ended_at = models.DateTimeField(null=True)
    imported_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Denormalised at import so the list sorts and filters without joins.
    message_count = models.PositiveIntegerField(default=0)
    api_calls_main = models.PositiveIntegerField(default=0)
    api_calls_side = models.PositiveIntegerField(default=0)
    peak_context = models.PositiveIntegerField(default=0, db_index=True)
    peak_call = models.PositiveIntegerField(null=True)  # the main-chain call with peak_context (compaction.calls.Peak)
    peak_is_estimate = models.BooleanField(default=False)  # no recorded usage: the peak is a tiktoken estimate
    peak_context_side = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveBigIntegerField(default=0, db_index=True)
    has_compaction = models.BooleanField(default=False, db_index=True)
    overflowed = models.BooleanField(default=False, db_index=True)
    compaction_failed = models.BooleanField(default=False, db_index=True)
    cost_usd = models.FloatField(null=True, db_index=True)  # every call priced (compaction.costs); None: unknown
    line_errors = models.PositiveIntegerField(default=0)
    unknown_records = models.PositiveIntegerField(default=0)
    estimates_ready = models.BooleanField(default=False)
    # Every record is in the search index. A small import indexes itself; the task worker indexes a large one
    # after it (services.index_search), and the search names sessions not yet done.
    search_ready = models.BooleanField(default=True)
    info = models.JSONField(default=dict)  # what the parser learned (SessionInfo.data): models, file tracker...
    # When its main file was found gone from where it was imported from (the agent's clean-up deleted it): the
    # session is kept, archived, and can be restored from its stored bytes (``archive``). None: the file is there,
    # or the session came from an upload (no place of its own).
    archived_at = models.DateTimeField(null=True, db_index=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # The list filtered by agent, newest first, reads a page from the index instead of sorting every
            # session of that agent (bench/list_bench.py, 10,000 sessions).
            models.Index(fields=["format", "-started_at"], name="session_format_started"),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id or f"session {self.pk}"

    def agent_info(self) -> SessionInfo:
        """What the session's parser learned about it, as the strategies read it."""
        return SessionInfo(
            format=self.format,
            session_id=self.external_id or None,
            agent_version=self.agent_version or None,
            model=self.model or None,
            cwd=self.project or None,
            title=self.title or None,
            started_at=self.started_at.isoformat() if self.started_at else None,
            ended_at=self.ended_at.isoformat() if self.ended_at else None,
            context_window=self.context_window,
            data=dict(self.info),
        )

    @property
    def window(self) -> int:
        """The context window by the session's own agent's rule (its strategy's thresholds): the one window every
        page, twin and command shows. A Codex rollout reports 95 % of it (docs/formats/codex.md)."""
        from compaction.strategies.registry import build_strategy
        from compaction.windows import context_window

        # Kept on the instance for the fields it depends on: a list page reads it several times per row, and a
        # Codex strategy takes about 0.2 ms to build.
        key = (self.format, self.model, self.agent_version, self.context_window, self.peak_context)
        known = self.__dict__.get("_window")
        if known is not None and known[0] == key:
            return int(known[1])
        try:
            strategy = build_strategy(self.format, info=self.agent_info(), overrides={})
        except ValueError:
            window = self.context_window or context_window(model=self.model or None, observed_max=self.peak_context)
        else:
            window = strategy.thresholds(
                model=self.model or None, version=self.agent_version or None, observed_max=self.peak_context
            ).window
        self.__dict__["_window"] = (key, window)
        return window

    @property
    def peak_ratio(self) -> float:
        return min(self.peak_context / self.window, 1.0) if self.window else 0.0

    def get_format_display(self) -> str:
        """The agent's name as users read it (the format module's ``LABEL``)."""
        return FORMAT_LABELS.get(self.format, self.format)


class SessionAnalysis(models.Model):
    """What the worker computes once per session version after its token estimates: too slow for a request.

    ``message_count`` is the session's when computed: a session that grew since has a stale analysis (the
    estimate task that the growth queued computes it again). An import that stores records deletes it, so a file
    rewritten with as many records as before is not taken for the version analysed.
    """

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="analysis")
    message_count = models.PositiveIntegerField()
    composition = models.JSONField(default=dict)  # selectors.composition.composition_series: the main chain, every call
    peak = models.JSONField(null=True)  # selectors.composition.peak_composition of it: the overview reads only this
    verdict = models.TextField(blank=True)  # the diagnosis verdict (compaction.diagnose.verdict)
    # The whole diagnosis report as served (orjson): a web process's first diagnosis reads it instead of reading
    # the session back and computing it (0.3-0.5 s on a 53 MB session, bench/analysis_bench.py).
    diagnosis = models.BinaryField(null=True)
    # The main chain as selectors.conversation.conversation reads it back, as JSON (compaction.transcript's
    # conversation_to_json), compressed (selectors.conversation.stored_conversation): a web process's first page of
    # the session loads it in about two thirds of the time the rows take to read (docs/performance.md).
    conversation = models.BinaryField(null=True)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"analysis of session {self.session_id}"


class SessionFinding(models.Model):
    """One finding of a session's analysis (``compaction.diagnose.Finding``, as the diagnosis report serves it), kept
    in rows so the Findings page adds them up across the archive with aggregate queries, never reading a file or a
    report again. Written with the analysis (``services.analyse_session``) and deleted with it."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="findings")
    kind = models.CharField(max_length=40)  # tool_outputs, repeated_reads, cache_misses, warning_line, ...
    subject = models.CharField(max_length=200, blank=True)  # the tool, the cause of the misses, the line
    rank = models.PositiveIntegerField(default=0)  # in the session's diagnosis
    tokens = models.BigIntegerField(default=0)  # tokens at stake
    cost_usd = models.FloatField(null=True)  # dollars at stake (compaction.costs); None: not priced
    # The Finding as the diagnosis serves it (title, finding, change, effect, calls, details, fixes, proof).
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["session", "rank"]
        # The Findings page ranks each kind and subject's findings by money (selectors.findings): read in this order.
        # With the session it covers every column the page's grouping and ranking read, so neither reads the rows and
        # their JSON (70-100 ms to under 10 ms for the grouping over 20,000 findings on SQLite, docs/performance.md).
        indexes = [
            models.Index(fields=["kind", "subject", "-cost_usd", "-tokens", "session"], name="finding_rank_session")
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.subject} of session {self.session_id}"


class SourceFile(models.Model):
    """One file a session was imported from, with its original bytes (compressed) for re-parsing."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="files")
    agent = models.CharField(max_length=100)  # "main" or the subagent id
    path = models.CharField(max_length=2000, db_index=True)
    size = models.PositiveBigIntegerField(default=0)  # bytes imported so far
    lines = models.PositiveIntegerField(default=0)  # lines consumed so far
    sha256 = models.CharField(max_length=64, db_index=True)  # hash of the first `size` bytes
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # The same bytes are stored once: two imports of one file racing each other (PostgreSQL does not
            # serialise them) cannot both commit. An empty hash marks a file still being imported.
            models.UniqueConstraint(
                fields=["sha256", "size"], condition=~models.Q(sha256=""), name="sourcefile_unique_content"
            )
        ]

    def __str__(self) -> str:
        return self.path


class RawChunk(models.Model):
    """Compressed original bytes of a source file, in order (zstd frames; zlib streams before 2026-11-30, which
    ``selectors.sessions.read_raw`` still reads); appended to by incremental imports."""

    file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["file", "index"]
        constraints = [models.UniqueConstraint(fields=["file", "index"], name="rawchunk_unique_index")]

    def __str__(self) -> str:
        return f"{self.file_id}#{self.index}"


class Message(models.Model):
    # Indexed by message_unique_seq and message_agent_seq, which start with it: an index of its own cost every
    # imported record one more insert for no query.
    # The database checks neither key (migrations 0019 and 0021): only an import writes records, and it writes them
    # for the session and file it created or read in its own transaction; they are deleted with their file or
    # session by the ORM's cascade, and nothing here deletes a session. On PostgreSQL the checks (16,000 lookups in
    # the 53 MB import) and this file index were about a third of the server's CPU for it (docs/performance.md).
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="messages", db_index=False, db_constraint=False
    )
    # Not indexed either: records are read by session; the rare deletes by file (a file rewritten in place) name
    # the session too, and the ORM's cascade from a deleted file is an administrator's act.
    file = models.ForeignKey(
        SourceFile, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    seq = models.PositiveIntegerField()  # position in the session, across files
    agent = models.CharField(max_length=100, default="main")
    line = models.PositiveIntegerField()
    role = models.CharField(max_length=12)
    kind = models.CharField(max_length=20)
    raw_type = models.CharField(max_length=100, blank=True)
    uuid = models.CharField(max_length=100, blank=True)  # indexed by message_uuid
    parent_uuid = models.CharField(max_length=100, blank=True)
    timestamp = models.DateTimeField(null=True)
    model = models.CharField(max_length=200, blank=True)
    call_number = models.IntegerField(null=True)  # the number of the agent's API call this record belongs to
    blocks_json = models.TextField(default="[]")  # orjson of the blocks; text lives here only once
    data_json = models.TextField(default="{}")
    raw = models.TextField(blank=True)  # verbatim line, for unknown records only
    search_text = models.TextField(blank=True, default="")  # what a reader reads (search_text.py), for search
    chars = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(null=True)  # token estimate, filled after import

    class TokensMethod(models.TextChoices):
        TIKTOKEN = "tiktoken", "tiktoken cl100k estimate"
        CHARS_DIV_4 = "chars/4", "chars/4 (record too long for tiktoken)"

    # db_default: the import inserts messages with raw SQL, naming only the columns it fills.
    tokens_method = models.CharField(max_length=10, choices=TokensMethod.choices, blank=True, db_default="")

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="message_unique_seq")]
        indexes = [
            models.Index(fields=["session", "agent", "seq"], name="message_agent_seq"),
            # For equality only (a title record's leafUuid): db_index=True made PostgreSQL a second, LIKE-capable
            # index that nothing here queries.
            models.Index(fields=["uuid"], name="message_uuid"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.seq} {self.kind}"

    @property
    def blocks(self) -> list[dict[str, Any]]:
        return orjson.loads(self.blocks_json)

    @property
    def data(self) -> dict[str, Any]:
        return orjson.loads(self.data_json)


class ApiCall(models.Model):
    # Indexed by apicall_unique_index, which starts with it; not checked by the database, as Message.session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="calls", db_index=False, db_constraint=False
    )
    # Not checked by the database, as Message.file; indexed, as every import reads a file's calls.
    file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    agent = models.CharField(max_length=100, default="main")
    number = models.PositiveIntegerField()  # "call N": numbered from 1 per agent in record order
    key = models.CharField(max_length=200)
    seq = models.PositiveIntegerField()  # seq of the first record of the response
    line = models.PositiveIntegerField()
    model = models.CharField(max_length=200, blank=True)
    timestamp = models.DateTimeField(null=True)
    input_tokens = models.PositiveIntegerField(default=0)
    cache_creation_tokens = models.PositiveIntegerField(default=0)
    # Of cache_creation_tokens, those written with the 1-hour lifetime (priced apart from 5-minute writes).
    cache_creation_1h_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    context = models.PositiveIntegerField(default=0)  # input + cache creation + cache read
    # A subagent's call known only from a copy its parent's file carries (compaction.transcript.CARRIED; Claude
    # Code's inline agent_progress records): an inline subagent's. Usage gives these apart (ccusage skips them).
    carried = models.BooleanField(db_default=False)  # db_default: the import inserts calls naming CALL_COLUMNS

    class Meta:
        ordering = ["session", "agent", "number"]
        constraints = [models.UniqueConstraint(fields=["session", "agent", "number"], name="apicall_unique_index")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.agent}:{self.number}"


class UsageCell(models.Model):
    """Token sums of a session's calls in one UTC quarter hour, of one model, on one side (the main chain, a
    subagent's own file, or an inline subagent's response a ``progress`` record carries), on one side of the
    model's long-context price tier: what the Usage report reads (``selectors.usage``), kept by every import of
    the session (``usage_cells.keep_usage_cells``) so a report never reads calls or records.

    Every zone's offset is a whole number of quarter hours, so any zone's days are unions of these cells. The cost
    is not stored: it is linear in the tokens, so a cell is priced when read, with the prices of that moment;
    ``tier_start`` is the tier the ``long_context`` split was made at, and cells split at a tier the prices no
    longer have are split again (``sweeps.rebuild_stale_usage_cells``)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage_cells", db_index=False)
    quarter = models.DateTimeField(null=True)  # the UTC quarter hour of the calls (None: no time known at all)
    model = models.CharField(max_length=200, blank=True)
    side = models.CharField(max_length=10)  # selectors.usage.MAIN_SIDE, SUBAGENT_SIDE or INLINE_SIDE
    long_context = models.BooleanField(default=False)
    tier_start = models.PositiveIntegerField(null=True)
    calls = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_1h_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["session", "quarter", "model", "side", "long_context"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "quarter", "model", "side", "long_context"], name="usagecell_unique_key"
            )
        ]
        indexes = [models.Index(fields=["quarter"], name="usagecell_quarter")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.quarter}:{self.model}:{self.side}"


class ContextEvent(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="+")
    agent = models.CharField(max_length=100, default="main")
    kind = models.CharField(max_length=20, db_index=True)
    seq = models.PositiveIntegerField()  # seq of the record that carries the event
    line = models.PositiveIntegerField()
    after_call = models.PositiveIntegerField(default=0)  # calls of its agent before it
    timestamp = models.DateTimeField(null=True)
    trigger = models.CharField(max_length=50, blank=True)
    pre_tokens = models.PositiveIntegerField(null=True)
    post_tokens = models.PositiveIntegerField(null=True)
    tokens_saved = models.PositiveIntegerField(null=True)
    tool_ids = models.JSONField(default=list)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["session", "seq", "id"]

    def __str__(self) -> str:
        return f"{self.kind} at {self.session_id}:{self.seq}"


class LineIssue(models.Model):
    """A line that did not parse; the rest of its file imported."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="line_issues")
    file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="issues")
    path = models.CharField(max_length=2000)
    line = models.PositiveIntegerField()
    message = models.TextField()

    class Meta:
        ordering = ["session", "path", "line"]

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ModelCallRecord(models.Model):
    """What is recorded of work a model does in the background (a compaction run, a judge run): who started it,
    when it ran and finished, the API's answer, its tokens, cost, duration and attempts, and why it failed."""

    Status = RunStatus

    raw_response = models.JSONField(default=dict)
    input_tokens = models.PositiveIntegerField(null=True)
    output_tokens = models.PositiveIntegerField(null=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, null=True)
    duration_s = models.FloatField(null=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        status = getattr(self, "status", "")
        return status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class CompactionRun(ModelCallRecord):
    Status = RunStatus

    class Review(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    class ModelSource(models.TextChoices):
        AGENT = "agent", "the agent's own"
        OVERRIDE = "override", "chosen for this run"
        FALLBACK = "fallback", "SUMMARY_MODEL"
        OFFLINE = "offline", "offline"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    strategy = models.CharField(max_length=20)
    parameters = models.JSONField(default=dict)
    # The preview's inputs, as a person gives them: "after main-chain call N" (None: the end) and the hand cut's
    # edges in calls (None: the strategy's own edge). The worker rebuilds the preview from these.
    after_call = models.PositiveIntegerField(null=True)
    cut_start_call = models.PositiveIntegerField(null=True)
    cut_end_call = models.PositiveIntegerField(null=True)
    # What they resolved to, as conversation positions (details shown with the run).
    at = models.PositiveIntegerField(null=True)
    cut_start = models.PositiveIntegerField()
    cut_end = models.PositiveIntegerField()
    first_kept = models.PositiveIntegerField()
    transcript_sha256 = models.CharField(max_length=64)
    transcript_chars = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200)
    # Why this model (compaction.strategies.base.ModelChoice): the agent's own, the reviewer's override,
    # SUMMARY_MODEL as the fallback, or the offline summarizer; and the sentence the pages show.
    model_source = models.CharField(max_length=10, choices=ModelSource.choices, blank=True)
    model_note = models.TextField(blank=True)
    offline = models.BooleanField(default=False)
    # A reviewer's summary instructions for this run (a lab variant: ``compaction.strategies.base.with_instructions``
    # adds them to the agent's own prompt); empty: the strategy's own prompt alone.
    instructions = models.TextField(blank=True)
    # The compaction-instructions lab the run belongs to (its key; empty: a run of its own).
    lab = models.CharField(max_length=32, blank=True, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_text = models.TextField(blank=True)
    summary = models.TextField(blank=True)
    summary_tokens = models.PositiveIntegerField(null=True)
    heartbeat_at = models.DateTimeField(null=True)
    review = models.CharField(max_length=10, choices=Review.choices, default=Review.PENDING, db_index=True)
    review_comment = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    reviewed_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.strategy}, {self.status})"


class JudgeRun(ModelCallRecord):
    """The optional judge asked about a run's claims the offline check left undecided (issue 38), recorded as a
    compaction run is: its model and why, what it was asked, its estimated and real tokens and cost, its status."""

    run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, related_name="judges")
    model = models.CharField(max_length=200)
    model_note = models.TextField(blank=True)
    claims = models.JSONField(default=list)  # [{"line", "text"}]: what it was asked, numbered from 1 in this order
    verdicts = models.JSONField(default=list)  # [{"line", "text", "status", "reason"}]: what it answered
    estimated_input_tokens = models.PositiveIntegerField(default=0)
    estimated_output_tokens = models.PositiveIntegerField(default=0)
    estimated_cost_usd = models.DecimalField(max_digits=10, decimal_places=6, null=True)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    answer = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"judge {self.pk} of run {self.run_id} ({self.status})"


class ReviewVerdict(models.Model):
    """One verdict on a run's summary. A run's current verdict is its latest; earlier ones stay, never overwritten."""

    run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, related_name="verdicts")
    decision = models.CharField(max_length=10, choices=CompactionRun.Review.choices)
    comment = models.TextField(blank=True)  # the reason, required for a reject
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["run", "at", "id"]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.decision}"


class SummaryComment(models.Model):
    """A reviewer's comment on one line of a run's summary (1-based, as the page numbers the lines)."""

    run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, related_name="line_comments")
    line = models.PositiveIntegerField()
    text = models.TextField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "line", "at", "id"]

    def __str__(self) -> str:
        return f"run {self.run_id} line {self.line}"


class BackgroundJob(models.Model):
    """What the worker does for a page that polls it (an upload's import, a settings simulation): its status, who
    asked, its tries and its times; a running job whose heartbeat stops is the sweep's (``sweeps``)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True)
    heartbeat_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @classmethod
    def claim(cls, pk: int) -> bool:
        """Take a queued job for this worker (running, one more try); False when another has it or it is done."""
        now = timezone.now()
        claimed = cls._default_manager.filter(pk=pk, status=cls.Status.QUEUED).update(
            status=cls.Status.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
        )
        return bool(claimed)


class UploadImport(BackgroundJob):
    """Files uploaded from the browser, imported by the worker; the progress page reads this row."""

    names = models.TextField(blank=True)  # the uploaded file names, for the page title
    staged = models.JSONField(default=list)  # [path inside the upload's folder, label] per uploaded file
    files_total = models.PositiveIntegerField(default=0)  # session files found (known once zips are unpacked)
    files_done = models.PositiveIntegerField(default=0)
    sessions_found = models.PositiveIntegerField(default=0)
    errors_so_far = models.PositiveIntegerField(default=0)  # line errors and rejected files
    report = models.JSONField(default=dict)  # ImportReport.as_json() once done

    def __str__(self) -> str:
        return f"upload {self.pk} ({self.status})"


class WorkerBeat(models.Model):
    """A live ``db_worker`` process; a row whose beat is stale belongs to a dead worker (see ``sweeps``)."""

    worker_id = models.CharField(max_length=64, unique=True)
    host = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    beat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"worker {self.worker_id} on {self.host}:{self.pid}"


class SimulationRun(BackgroundJob):
    """A settings simulation: one strategy's settings replayed over every session the filters select, by the worker
    (``sessions_app.simulations``); the progress page reads this row. Results are JSON, never pickles."""

    strategy = models.CharField(max_length=40)
    # {"params": {name: text}, "try": {"name": name, "values": [text, ...]} or None}: the settings tried
    parameters = models.JSONField(default=dict)
    filters = models.JSONField(default=dict)  # the session list's filters, by the list's own names
    sessions_total = models.PositiveIntegerField(default=0)
    sessions_done = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=list)  # one row per session, in the order replayed (simulations.session_row)

    def __str__(self) -> str:
        return f"simulation {self.pk} ({self.status})"

    @property
    def strategy_label(self) -> str:
        from compaction.strategies.registry import STRATEGY_LABELS

        return STRATEGY_LABELS.get(self.strategy, self.strategy)
