"""One statistics definition: the session page, its JSON twin and ``manage.py session_stats`` agree."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import assistant, cc_line, user

pytestmark = pytest.mark.django_db


def cli_stats(session: models.Session) -> dict:
    out = io.StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_page_json_and_cli_json_agree_on_every_shared_sample(client_in):
    report = services.import_paths(
        paths=[CLAUDE_SAMPLES, KLAUDE_SAMPLES / "dot-klaude", KHAELOR_SAMPLES, CODEX_SAMPLES]
    )
    assert report.rejected == []
    sessions = list(models.Session.objects.order_by("id"))
    assert {s.format for s in sessions} == {value for value, _ in models.Session.FORMAT_CHOICES}
    disagreements = []
    for session in sessions:
        cli = cli_stats(session)
        page = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()["session"]
        shared = ("id", "format", "api_calls", "max_context")
        if {k: cli[k] for k in shared} != {k: page[k] for k in shared}:
            disagreements.append((session.pk, {k: cli[k] for k in shared}, {k: page[k] for k in shared}))
        main_events = [e["kind"] for e in cli["events"] if e["agent"] == "main"]
        if page["has_compaction"] != ("compaction" in main_events):
            disagreements.append((session.pk, "has_compaction", page["has_compaction"]))
        html = client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
        # The overview's "API calls" tile, formatted as the page formats numbers.
        if f'<dt>API calls</dt><dd class="num">{cli["api_calls"]["main"]:,}' not in html:
            disagreements.append((session.pk, "page shows other call count", cli["api_calls"]))
    assert disagreements == []
    # The samples exercise both sides: calls and subagent calls were counted somewhere.
    assert any(s.api_calls_side for s in sessions) and any(s.api_calls_main for s in sessions)


def compare_an_imports_own_summary(monkeypatch) -> list[tuple[int, str]]:
    """Every summary an import tallies from what it stored, next to the one read back from the rows at that moment
    (in the import's transaction, after its last row): the ``(session, what differs)`` pairs, and the count checked."""
    compared: list[tuple[int, str]] = []
    real = services.refresh_session_summary

    def both(*, session: models.Session, stored: services.StoredTotals | None = None) -> None:
        if stored is not None:
            from_rows = services._stored_totals(session)
            mine, theirs = as_compared(stored), as_compared(from_rows)
            differs = sorted(k for k in mine if mine[k] != theirs[k])
            compared.append((session.pk, ", ".join(f"{k}: {mine[k]!r} != {theirs[k]!r}" for k in differs)))
        real(session=session, stored=stored)

    monkeypatch.setattr(services, "refresh_session_summary", both)
    return compared


def as_compared(totals: services.StoredTotals) -> dict[str, object]:
    stats = totals.stats
    return {
        **stats.as_json(),
        "has_compaction": stats.has_compaction,
        "overflowed": [stats.overflowed(window=w) for w in (1, 100_000, 200_000, 1_000_000)],
        "compaction_failed": [stats.compaction_failed(agent_compacts=c) for c in (False, True)],
        "total_usd": stats.cost.total_usd,
        "records": totals.records,
        "unknown_records": totals.unknown_records,
        "size_bytes": totals.size_bytes,
        "line_errors": totals.line_errors,
    }


def test_an_imports_own_summary_is_the_one_read_from_its_rows_on_every_shared_sample(monkeypatch):
    compared = compare_an_imports_own_summary(monkeypatch)
    report = services.import_paths(
        paths=[CLAUDE_SAMPLES, KLAUDE_SAMPLES / "dot-klaude", KHAELOR_SAMPLES, CODEX_SAMPLES]
    )
    assert report.rejected == []
    assert [c for c in compared if c[1]] == []
    # Every session was created by one import, which tallied its summary itself.
    assert len(compared) == models.Session.objects.count() > 20


# Generated Claude Code files: calls sharing a response id or having none, streamed responses whose output grows,
# subagent responses known only from progress lines (also repeated, also of a call the file has), compactions,
# overflows, unknown records and bad lines.
RESPONSE_IDS = st.sampled_from(["msg_a", "msg_b", "msg_c", None])
MODELS = st.sampled_from(["claude-opus-4-5-20251101", "claude-haiku-4-5", "a-model-nobody-prices", "<synthetic>"])


def generated_line(kind: str, n: int, response: str | None, model: str, size: int) -> str:
    uuid, parent = f"u{n}", f"u{n - 1}" if n else None
    if kind == "assistant":
        line = json.loads(assistant(uuid, parent or "u0", response or "", f"reply {n}", ctx=10 + size, out=size % 97))
        line["message"]["model"] = model
        if response is None:
            del line["message"]["id"], line["requestId"]
        return json.dumps(line) + "\n"
    if kind == "progress":
        usage = {"input_tokens": 3, "cache_creation_input_tokens": size, "cache_read_input_tokens": 1}
        payload = {"id": response or f"msg_sub{n}", "model": model, "usage": {**usage, "output_tokens": size % 13}}
        data = {"type": "agent_progress", "agentId": "sub1", "message": {"message": payload}}
        return cc_line(type="progress", uuid=uuid, parentUuid=parent, sessionId="s-1", data=data)
    if kind == "compaction":
        metadata = {"trigger": "auto", "preTokens": size}
        return cc_line(
            type="system", subtype="compact_boundary", uuid=uuid, parentUuid=parent, compactMetadata=metadata
        )
    if kind == "overflow":
        line = json.loads(assistant(uuid, parent or "u0", f"err{n}", "prompt is too long: 210000 tokens", ctx=0))
        line.update(isApiErrorMessage=True, error="invalid_request")
        line["message"]["model"] = "<synthetic>"
        return json.dumps(line) + "\n"
    if kind == "unknown":
        return cc_line(type="something-new", uuid=uuid, value=size)
    if kind == "bad":
        return '{"type": "user", "message": \n'
    return user(uuid, parent, f"prompt {n}")


generated_files = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "assistant", "progress", "compaction", "overflow", "unknown", "bad"]),
        RESPONSE_IDS,
        MODELS,
        st.integers(0, 300_000),
    ),
    min_size=1,
    max_size=30,
)


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=generated_files)
def test_an_imports_own_summary_is_the_one_read_from_its_rows_on_generated_files(monkeypatch, tmp_path, steps):
    compared = compare_an_imports_own_summary(monkeypatch)
    name = uuid.uuid4()  # examples share the database: each file is new content, so each import creates a session
    lines = [
        user("u0", None, f"start {name}"),
        *(generated_line(k, n, r, m, s) for n, (k, r, m, s) in enumerate(steps, 1)),
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(lines))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    assert compared == [(outcome.session, "")]


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=generated_files)
def test_calls_closed_early_are_stored_and_summarised_as_when_all_are_kept(monkeypatch, tmp_path, steps):
    """With one call kept open (``services.OPEN_CALLS``), a file whose responses interleave stores the same calls
    and the same summary as an import that keeps every call open."""
    name = uuid.uuid4()
    lines = [user("u0", None, f"start {name}")]
    lines += [generated_line(k, n, r, m, s) for n, (k, r, m, s) in enumerate(steps, 1)]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(lines))

    def imported(open_calls: int) -> tuple[list[Any], dict[str, Any]]:
        monkeypatch.setattr(services, "OPEN_CALLS", open_calls)
        outcome = services.import_file(path=path)
        assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
        session = models.Session.objects.get(pk=outcome.session)
        calls: list[Any] = list(
            models.ApiCall.objects.filter(session=session)
            .order_by("agent", "number")
            .values_list("agent", "number", "key", "seq", "line", "model", "input_tokens", "output_tokens", "context")
        )
        numbers = list(models.Message.objects.filter(session=session).order_by("seq").values_list("call_number"))
        summary = {f: getattr(session, f) for f in ("api_calls_main", "api_calls_side", "peak_context", "peak_call")}
        summary.update(cost_usd=session.cost_usd, message_count=session.message_count, numbers=numbers)
        session.delete()
        return calls, summary

    assert imported(1) == imported(1_000)


def test_a_log_without_usage_gives_session_stats_the_peak_its_pages_give(client_in):
    # KHAELOR without model.usage: the page, its timeline and its diagnosis give its estimated peak, labelled;
    # session_stats said {"call": null, "tokens": 0} and nothing of an estimate.
    services.import_paths(paths=[KHAELOR_SAMPLES])
    session = models.Session.objects.get()
    services.estimate_session_tokens(session_id=session.pk)
    services.analyse_session(session_id=session.pk)  # the worker's: the estimated peak is its composition's
    page = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()
    cli = cli_stats(session)
    assert page["overview"]["peak"]["tokens"] > 0 and page["overview"]["peak_is_estimate"]
    assert cli["peak"] == page["overview"]["peak"] and cli["peak_is_estimate"] is True
    out = io.StringIO()
    call_command("session_stats", str(session.pk), stdout=out)
    peak = page["overview"]["peak"]
    assert f"peak: ≈{peak['tokens']:,} at call {peak['call']} (estimate)" in out.getvalue()
    # Its text said "max context: 0 main" of a log that records none, and "pre=None saved=8123" of its prune.
    text = out.getvalue()
    assert "max context: none recorded" in text and "max context: 0" not in text
    (prune,) = [e for e in cli["events"] if e["kind"] == "prune"]
    assert prune["pre_tokens"] is None and "None" not in text
    assert f"prune: saved {prune['tokens_saved']:,} tokens" in text


def test_bad_lines_by_file_and_line_on_the_page_its_json_twin_and_session_stats(client_in, tmp_path):
    # 203 lines no parser reads, between a prompt and a reply: more than the page names one by one.
    bad = "".join(f"{{broken {n}\n" for n in range(203))
    path = tmp_path / "s-1.jsonl"
    path.write_text(user("u1", None, "hi") + bad + assistant("a1", "u1", "msg_1", "x", ctx=99))
    assert services.import_paths(paths=[path]).rejected == []
    session = models.Session.objects.get()
    page = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()["line_issues"]
    cli = cli_stats(session)["line_issues"]
    assert page == cli
    assert (page["total"], len(page["listed"]), page["not_listed"]) == (203, 200, 3)
    first = page["listed"][0]
    assert (first["path"], first["line"]) == (str(path), 2) and first["message"]
    html = client_in.get(reverse("sessions:detail", args=[session.pk])).content.decode()
    assert f"<code>{path}:2</code>" in html and "3 more not listed" in html and "203 lines could not be read" in html
    out = io.StringIO()
    call_command("session_stats", str(session.pk), stdout=out)
    text = out.getvalue()
    assert "lines that could not be read: 203" in text and f"  {path}:2 " in text
    assert f"{path}:21 " in text and f"{path}:22 " not in text and "183 more not listed" in text
