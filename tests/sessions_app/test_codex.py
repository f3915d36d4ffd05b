"""Codex CLI rollouts import with the numbers of samples/codex/SOURCES.md, read through ``session_stats --json``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import previews as preview_selectors
from sessions_app.selectors import timeline as timeline_selectors
from tests.conftest import CODEX_SAMPLES

pytestmark = pytest.mark.django_db

# samples/codex/SOURCES.md: API calls, max context, compactions (after call), estimate rows, window.
EXPECTED = {
    "coda__0.44.0": (161, 111_012, [], 0, 272_000),
    "localpush__0.104.0-alpha.1__remote-compaction": (286, 209_950, [184], 2, 258_400),
    "localpush__0.104.0-alpha.1__rollout": (81, 164_606, [], 0, 258_400),
    "moonmind__0.57.0": (102, 82_511, [], 0, 258_400),
    "openprintkit__0.34.0": (456, 270_992, [], 0, 272_000),
    "test-framework__0.92.0": (169, 112_529, [], 0, 258_400),
}


def cli_stats(session: models.Session) -> dict:
    out = io.StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    return json.loads(out.getvalue())


def sample(prefix: str):
    return next(p for p in sorted(CODEX_SAMPLES.glob("*.jsonl")) if p.name.startswith(prefix))


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_every_codex_sample_imports_with_its_sources_numbers(prefix):
    path = sample(prefix)
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    assert outcome.format == "codex" and outcome.errors == []
    session = models.Session.objects.get(pk=outcome.session)
    stats = cli_stats(session)
    calls, peak, compactions, estimate_rows, window = EXPECTED[prefix]
    assert stats["format"] == "codex"
    assert stats["api_calls"] == {"main": calls, "side": 0}
    assert stats["max_context"]["main"] == peak
    assert [e["after_call"] for e in stats["events"] if e["kind"] == "compaction"] == compactions
    assert stats["info"]["estimate_rows"] == estimate_rows
    assert session.context_window == window


def test_a_reimport_is_idempotent_and_a_grown_file_adds_only_new_lines(tmp_path):
    source = sample("moonmind__0.57.0").read_bytes().splitlines(keepends=True)
    path = tmp_path / "rollout-2025-11-12T17-48-11-x.jsonl"
    path.write_bytes(b"".join(source[:200]))
    first = services.import_file(path=path)
    assert isinstance(first, services.FileImport) and first.created
    again = services.import_file(path=path)
    assert isinstance(again, services.FileImport) and again.lines == 0
    path.write_bytes(b"".join(source))
    grown = services.import_file(path=path)
    assert isinstance(grown, services.FileImport) and grown.session == first.session
    assert grown.lines > 0
    assert cli_stats(models.Session.objects.get(pk=first.session))["api_calls"]["main"] == 102


def test_the_flat_layout_imports_and_says_it_has_no_token_counts(tmp_path):
    path = tmp_path / "rollout-2025-05-20T10-00-00-abc.jsonl"
    lines = [
        {"id": "abc", "timestamp": "2025-05-20T10:00:00Z", "instructions": "be brief", "git": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]},
        {"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "a_future_item", "x": 1},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.format == "codex"
    session = models.Session.objects.get(pk=outcome.session)
    # No token counts, but its two model replies (the shell call, then "done") are its calls.
    assert session.external_id == "abc" and session.api_calls_main == 2
    assert "no token counts" in session.info["no_token_counts"]
    kinds = [m.kind for m in conversation_selectors.conversation(session=session)]
    assert kinds == ["system", "prompt", "assistant", "tool_result", "assistant"]
    assert session.unknown_records == 1


def test_default_roots_include_codex_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".codex" / "sessions").mkdir(parents=True)
    (tmp_path / ".codex" / "archived_sessions").mkdir()
    assert services.default_roots() == [tmp_path / ".codex" / "sessions", tmp_path / ".codex" / "archived_sessions"]


def test_a_fork_joins_its_parent_without_the_parent_history_it_copied(tmp_path):
    parent_path = sample("moonmind__0.57.0")
    parent = services.import_file(path=parent_path)
    assert isinstance(parent, services.FileImport)
    parent_lines = parent_path.read_bytes().splitlines(keepends=True)
    parent_meta = json.loads(parent_lines[0])
    child_meta = {
        "timestamp": "2025-11-13T03:00:00.000Z",
        "type": "session_meta",
        "payload": {
            "id": "child-thread",
            "timestamp": "2025-11-13T03:00:00.000Z",
            "cwd": "/mnt/d/ai/MoonMind",
            "cli_version": "0.57.0",
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": parent_meta["payload"]["id"], "depth": 1}}},
        },
    }
    usage = {"input_tokens": 5000, "cached_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": 0}
    own = [
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "check the queue config"}],
            },
        },
        {
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "total_token_usage": {**usage, "total_tokens": 5040},
                    "last_token_usage": {**usage, "total_tokens": 5040},
                    "model_context_window": 258400,
                },
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "it routes to codex-0"}],
            },
        },
    ]
    child = tmp_path / "rollout-2025-11-13T03-00-00-child-thread.jsonl"
    child.write_bytes(
        (json.dumps(child_meta) + "\n").encode()
        + b"".join(parent_lines[:120])
        + "".join(json.dumps({"timestamp": "2025-11-13T03:00:01.000Z", **line}) + "\n" for line in own).encode()
    )
    outcome = services.import_file(path=child)
    assert isinstance(outcome, services.FileImport) and outcome.session == parent.session
    assert outcome.agent == "child-thread"
    stats = cli_stats(models.Session.objects.get(pk=parent.session))
    assert stats["api_calls"] == {"main": 102, "side": 1}
    assert stats["max_context"]["side"] == 5000
    texts = [
        m.text
        for m in conversation_selectors.conversation(
            session=models.Session.objects.get(pk=parent.session), agent="child-thread"
        )
    ]
    assert texts == ["check the queue config", "", "it routes to codex-0"]


def test_an_offline_codex_run_is_reviewed_and_exported_as_a_rollout_with_the_compaction(client_in, settings, tmp_path):
    from compaction.formats.codex import SUMMARY_PREFIX
    from sessions_app import run_services

    settings.ANTHROPIC_API_KEY = ""
    session = models.Session.objects.get(pk=services.import_file(path=sample("test-framework__0.92.0")).session)
    # After the 21st call.
    preview = preview_selectors.build_preview(session=session, strategy="codex", overrides={}, after_call=21)
    assert preview.runnable, preview.error or preview.refused
    run = run_services.execute_run(run_id=run_services.create_run(preview=preview, user=None).pk)
    assert run.status == run.Status.SUCCEEDED, run.error
    # 0.92 stores a local compaction's summary after the prefix (#6692); 0.57 stored it bare.
    assert run.summary.startswith(SUMMARY_PREFIX + "\n")
    client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "ok"})
    response = client_in.get(f"/runs/{run.pk}/export/")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    exported = tmp_path / "rollout-2026-01-30T10-40-15-exported.jsonl"
    exported.write_bytes(body)
    again = services.import_file(path=exported)
    assert isinstance(again, services.FileImport) and again.session != session.pk
    stats = cli_stats(models.Session.objects.get(pk=again.session))
    assert [(e["kind"], e["after_call"], e["trigger"]) for e in stats["events"]] == [("compaction", 21, "local")]
    assert stats["api_calls"]["main"] == 21


def test_the_importer_and_the_database_ask_the_format_registry_not_a_format_by_name(client_in):
    from compaction.formats import registry
    from compaction.strategies.registry import STRATEGY_NAMES

    # The stored choices, the default import roots, parsers and parent links all come from the format modules.
    # The column has no choices of its own (a new format needs no migration); its label is the module's LABEL.
    assert models.Session._meta.get_field("format").choices is None
    assert models.Session(format="codex").get_format_display() == "Codex"
    assert ("codex", "Codex") in registry.FORMAT_CHOICES and "codex" in STRATEGY_NAMES
    assert [folder for f in registry.FORMATS for folder in f.SESSION_FOLDERS] == services.SESSION_FOLDERS
    for module in registry.FORMATS:
        assert callable(module.make_parser) and callable(module.parent_link), module.FORMAT
    assert "codex" not in Path(services.__file__).read_text().lower(), "services.py names no format of its own"
    services.import_file(path=sample("moonmind__0.57.0"))
    assert '<span class="agent agent-codex">Codex</span> 0.57.0</td>' in client_in.get("/").content.decode()


def independent_calls(path: Path) -> list[dict]:
    """The API calls of a rollout read with json only (SOURCES.md's rule), each with the model of the turn_context
    before it: input (cached included), cached input, output."""
    calls: list[dict] = []
    model, last_total = None, None
    for raw in path.read_bytes().splitlines():
        line = json.loads(raw)
        payload = line.get("payload") or {}
        if line.get("type") == "turn_context":
            model = payload.get("model") or model
        info = payload.get("info") if payload.get("type") == "token_count" else None
        if not info:
            continue
        total, last = info["total_token_usage"]["total_tokens"], info["last_token_usage"]
        changed, last_total = total != last_total, total
        if changed and last["input_tokens"] > 0:
            calls.append({"model": model, **{k: last.get(k, 0) for k in ("input_tokens", "cached_input_tokens")}})
            calls[-1]["output_tokens"] = last["output_tokens"]
    return calls


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_codex_costs_price_cached_input_as_cached(prefix):
    from genai_prices import Usage as PackageUsage
    from genai_prices import calc_price

    path = sample(prefix)
    outcome = services.import_file(path=path)
    stats = cli_stats(models.Session.objects.get(pk=outcome.session))
    calls = independent_calls(path)
    # Codex's cached_input_tokens are part of input_tokens (docs/formats/codex.md §4): stored apart, never twice.
    assert stats["usage"]["cache_read_tokens"] == sum(c["cached_input_tokens"] for c in calls)
    assert stats["usage"]["input_tokens"] == sum(c["input_tokens"] - c["cached_input_tokens"] for c in calls)
    assert stats["usage"]["cache_creation_tokens"] == 0  # OpenAI records no cache writes
    if any(c["model"] is None for c in calls):
        assert stats["cost_usd"] is None  # 0.34 names no model: no price is claimed
        return
    expected = sum(
        float(
            calc_price(
                PackageUsage(
                    input_tokens=c["input_tokens"],
                    cache_read_tokens=c["cached_input_tokens"],
                    output_tokens=c["output_tokens"],
                ),
                model_ref=c["model"],
                provider_id="openai",
            ).total_price
        )
        for c in calls
    )
    assert stats["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert stats["usage"]["cache_read_tokens"] > 0  # each sample reads from the cache: the cheaper rate is exercised


def test_the_codex_timeline_marks_cache_misses_without_an_anthropic_ttl():
    outcome = services.import_file(path=sample("moonmind__0.57.0"))
    markers = timeline_selectors.timeline(session=models.Session.objects.get(pk=outcome.session))["events"]
    misses = [m for m in markers if m["kind"] == "cache_miss"]
    # Idle gaps are drawn against a known cache lifetime only: OpenAI's is not documented in our sources.
    assert misses and not [m for m in markers if m["kind"] == "idle_gap"]
    assert all("tokens sent uncached" in m["message"] and "written to the cache" not in m["message"] for m in misses)


def test_a_034_shell_apply_patch_call_is_shown_as_a_diff(client_in):
    # 0.34 sends a patch as a shell call ["apply_patch", "<patch>"], not through the freeform apply_patch tool.
    outcome = services.import_file(path=sample("openprintkit__0.34.0"))
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.index_search(session_id=outcome.session)  # what the task worker runs after a large import (PostgreSQL)
    page = client_in.get(f"/sessions/{outcome.session}/", {"q": "Begin Patch"}).content.decode()
    assert (
        '<strong class="tool-name">shell</strong>' in page
        and '<strong class="tool-name">apply_patch</strong>' not in page
    )
    # The envelope's own lines left out: the diff opens on the file it changes.
    assert '<pre class="diff"><span class="file">' in page and '<span class="add">+' in page
    assert '<span class="hunk">*** Begin Patch' not in page


def test_a_subagent_rollout_imported_before_its_parent_joins_it_at_its_next_import(tmp_path):
    """Until its parent is imported a subagent rollout is a session of its own (``alone_without_parent``); once the
    parent is there it joins it, as an import in the agents' order would have stored it. It stayed apart for good."""
    parent_path = sample("moonmind__0.57.0")
    parent_id = json.loads(parent_path.read_bytes().splitlines()[0])["payload"]["id"]
    meta = {
        "timestamp": "2025-11-13T03:00:00.000Z",
        "type": "session_meta",
        "payload": {
            "id": "child-thread",
            "cwd": "/mnt/d/ai/MoonMind",
            "cli_version": "0.57.0",
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": parent_id, "depth": 1}}},
        },
    }
    said = [
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"check queue {n}"}],
            },
            "timestamp": f"2025-11-13T03:00:0{n}.000Z",
        }  # fmt: skip
        for n in range(3)
    ]
    child = tmp_path / "rollout-2025-11-13T03-00-00-child-thread.jsonl"
    child.write_text("".join(json.dumps(line) + "\n" for line in [meta, *said[:2]]))
    alone = services.import_file(path=child)
    assert isinstance(alone, services.FileImport) and alone.agent == "main"
    parent = services.import_file(path=parent_path)
    assert isinstance(parent, services.FileImport) and parent.created
    with child.open("a") as f:  # the subagent writes on
        f.write(json.dumps(said[2]) + "\n")
    joined = services.import_file(path=child)
    assert isinstance(joined, services.FileImport), joined
    assert (joined.session, joined.agent) == (parent.session, "child-thread")
    assert models.Session.objects.count() == 1
    grown = cli_stats(models.Session.objects.get())
    models.Session.objects.all().delete()
    services.import_paths(paths=[parent_path, child])
    assert cli_stats(models.Session.objects.get()) | {"id": None} == grown | {"id": None}
