"""Reads for exporting an accepted run in the agent's own format: whether it can be exported, what the export
keeps after the point and why, and the file itself."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from compaction.preview import PreviewPlan
from compaction.strategies.base import Cut, ExportInput, Strategy
from compaction.strategies.registry import STRATEGIES, agent_name, build_strategy
from compaction.transcript import MAIN, Message
from sessions_app import models
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors.previews import Preview, preview_for_run


class ExportRefused(ValueError):
    pass


@dataclass(slots=True)
class ExportFile:
    filename: str
    content_type: str
    chunks: Iterator[bytes]


def _raw_lines(file: models.SourceFile) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes with its newline) of a stored file, streamed from its raw chunks."""
    number = 0
    pending = b""
    for chunk in session_selectors.read_raw(file=file):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            number += 1
            yield number, line + b"\n"
    if pending:
        yield number + 1, pending + b"\n"


def _exporting_agents() -> str:
    """The agents whose own format an export writes, from the registry, as pages name them ("A, B or C"): a new
    agent with an export is named without this text changing."""
    names = [agent_name(cls.name) for cls in STRATEGIES if cls.export_suffix is not None]
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


FOREIGN_EXPORT = (
    f"Export writes the agent's own format: it needs a run of the session's own agent ({_exporting_agents()})."
)


@dataclass(frozen=True, slots=True)
class ExportShape:
    """What an export of a run writes after the point, said before the download."""

    ends_at_point: bool  # nothing recorded after the point is written
    why: str  # one sentence a reviewer reads next to the Export link
    later_compactions: int  # the agent's own compactions recorded after the point

    def as_json(self) -> dict[str, Any]:
        return {"ends_at_point": self.ends_at_point, "why": self.why, "later_compactions": self.later_compactions}


def _export_shape(*, strategy: Strategy, source: models.SourceFile, following_line: int | None) -> ExportShape:
    """Whether the export ends at the point: always for an agent whose export does (Codex); otherwise when the
    agent recorded a real compaction after the point, since its loader would resume from that one."""
    label = strategy.short_label
    later = (
        models.ContextEvent.objects.filter(
            session=source.session_id, file=source, agent=MAIN, kind="compaction", line__gte=following_line
        ).count()
        if following_line is not None
        else 0
    )
    if not strategy.export_keeps_after_point:
        return ExportShape(
            True,
            f"The {label} export ends at the point: its compacted record holds the whole context {label} resumes "
            "from, so nothing recorded after the point is written.",
            later,
        )
    if following_line is None:
        return ExportShape(False, "The point is the end of the session: nothing was recorded after it.", 0)
    if later:
        rule = strategy.resumes_from_last_compaction or f"{label} resumes from its last compaction"
        return ExportShape(
            True,
            f"The export ends at the point: {label} compacted again later ({later} time{'s' * (later > 1)}), and "
            f"{rule}, so keeping what follows would resume from that compaction, not from this summary.",
            later,
        )
    return ExportShape(
        False,
        f"The export keeps every line recorded after the point: {label} did not compact again after it.",
        0,
    )


def _main_source(*, run: models.CompactionRun, plan: PreviewPlan) -> models.SourceFile:
    seqs = [int(m.data["row_seq"]) for m in plan.messages if "row_seq" in m.data]
    file_ids = set(
        models.Message.objects.filter(session=run.session, agent=MAIN, seq__in=seqs).values_list("file_id", flat=True)
    )
    if len(file_ids) != 1:
        raise ExportRefused("The main chain spans several source files; export needs one.")
    return models.SourceFile.objects.get(pk=file_ids.pop())


def _checked_preview(
    *, run: models.CompactionRun, messages: list[Message] | None = None
) -> tuple[Preview, PreviewPlan, Cut]:
    """The run's own preview, refused when its cut no longer applies or the session changed since the run."""
    preview = preview_for_run(run=run, messages=messages)
    plan, cut = preview.plan, preview.applied_cut
    if preview.error or plan is None or cut is None:
        raise ExportRefused(preview.error or preview.refused or "The run's cut no longer applies to the session.")
    if preview.transcript_sha256 != run.transcript_sha256:
        raise ExportRefused("The session changed since this run: its transcript no longer matches.")
    return preview, plan, cut


def export_info(*, run: models.CompactionRun, messages: list[Message] | None = None) -> dict[str, Any]:
    """What the run page and its JSON twin say about the export before the download: whether it can be taken
    now (``url``), whether it ends at the point and why, or why there is none (``refused``).

    The shape is said for a finished run of the session's own agent even before it is accepted: a reviewer
    decides knowing what the export will hold.
    """
    refused: str | None = None
    if run.status != models.CompactionRun.Status.SUCCEEDED or not run.summary:
        refused = "Only a finished run with a summary can be exported."
    elif not _own_format(run):
        refused = FOREIGN_EXPORT
    if refused is None:
        try:
            _, plan, _ = _checked_preview(run=run, messages=messages)
            shape = _export_shape(
                strategy=plan.strategy, source=_main_source(run=run, plan=plan), following_line=plan.following_line
            )
        except ExportRefused as exc:
            refused = str(exc)
    if refused is not None:
        none = {"available": False, "url": None, "ends_at_point": None, "why": None, "later_compactions": None}
        return none | {"refused": refused}
    accepted = run.review == models.CompactionRun.Review.ACCEPTED
    return {
        "available": accepted,
        "url": reverse("sessions:run_export", args=[run.pk]) if accepted else None,
        **shape.as_json(),
        "refused": None if accepted else "Only an accepted summary can be exported.",
    }


def _own_format(run: models.CompactionRun) -> bool:
    """A run of the session's own agent, when that agent has a compacted format of its own to write."""
    if run.strategy != run.session.format:
        return False
    try:
        return build_strategy(run.strategy, info=None, overrides={}).export_suffix is not None
    except ValueError:
        return False


def can_export(run: models.CompactionRun) -> bool:
    """An accepted run of the session's own agent, when that agent has a compacted format of its own to write."""
    return run.review == models.CompactionRun.Review.ACCEPTED and _own_format(run)


def export_compacted(*, run: models.CompactionRun) -> ExportFile:
    """An accepted run's summary applied to its session, in the agent's own format."""
    if run.review != models.CompactionRun.Review.ACCEPTED or not run.summary:
        raise ExportRefused("Only an accepted summary can be exported.")
    if not can_export(run):
        raise ExportRefused(FOREIGN_EXPORT)
    _, plan, cut = _checked_preview(run=run)
    source = _main_source(run=run, plan=plan)
    shape = _export_shape(strategy=plan.strategy, source=source, following_line=plan.following_line)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", run.session.external_id) or f"session-{run.session_id}"
    data = ExportInput(
        lines=_raw_lines(source),
        messages=plan.messages,
        cut=cut,
        plan=plan.summarizer,
        summary=run.summary,
        tokens_before=plan.tokens_before,
        stop_line=plan.following_line,
        session_id=run.session.external_id,
        project=run.session.project,
        version=run.session.agent_version,
        summary_model=run.model,
        end_at_point=shape.ends_at_point,
    )
    chunks = plan.strategy.export_compacted(data)
    try:
        # A writer says what it cannot write before its first line; refuse then, not halfway through a download.
        first = next(chunks, b"")
    except ValueError as exc:
        raise ExportRefused(f"The {run.strategy} export cannot be written: {exc}") from None
    return ExportFile(
        filename=f"{stem}.compacted-run{run.pk}{plan.strategy.export_suffix}",
        content_type="application/x-ndjson",
        chunks=itertools.chain([first], chunks),
    )
