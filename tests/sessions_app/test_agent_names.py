"""One naming scheme for agents: the registry's display name on the list, its filter, the session page, the
review queue and every JSON answer."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from compaction.formats.registry import FORMAT_LABELS, FORMATS
from compaction.strategies.registry import AGENT_NAMES, STRATEGIES, agent_name
from sessions_app import models, run_services, services
from sessions_app.selectors import previews as preview_selectors
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.claude_code_lines import small_session

pytestmark = pytest.mark.django_db


def test_every_format_is_named_by_the_registry() -> None:
    assert {value: label for value, label in models.Session.FORMAT_CHOICES} == {
        value: AGENT_NAMES[value] for value, _ in models.Session.FORMAT_CHOICES
    }
    assert models.Session(format="codex").get_format_display() == "Codex"
    assert agent_name("codex") == "Codex" and agent_name("no-such-agent") == "no-such-agent"


def test_list_filter_session_page_and_json_use_the_display_name(client_in: Client, tmp_path) -> None:
    imports = [
        services.import_file(path=p) for p in (sorted(CODEX_SAMPLES.glob("*.jsonl"))[0], small_session(tmp_path))
    ]
    assert all(isinstance(i, services.FileImport) for i in imports)
    codex, claude = (i.session for i in imports if isinstance(i, services.FileImport))
    listing = client_in.get("/").content.decode()
    assert '<option value="codex">Codex</option>' in listing
    assert '<option value="claude-code">Claude Code</option>' in listing
    assert '<span class="agent agent-codex">Codex</span>' in listing
    assert '<span class="agent agent-claude-code">Claude Code</span>' in listing
    assert "Codex CLI" not in listing
    names = {s["id"]: s["agent_name"] for s in client_in.get("/sessions.json").json()["sessions"]}
    assert names == {codex: "Codex", claude: "Claude Code"}
    page = client_in.get(f"/sessions/{codex}/").content.decode()
    assert '<dt>Agent</dt><dd><span class="agent agent-codex">Codex</span> ' in page
    assert client_in.get(f"/sessions/{codex}.json").json()["session"]["agent_name"] == "Codex"


def test_each_strategy_names_its_agent_as_its_format_does():
    # Sentences name the agent by the strategy's short label; badges and filters by the format's label: one name.
    assert {cls.name: cls.short_label for cls in STRATEGIES} == {
        name: label for name, label in FORMAT_LABELS.items() if name in {cls.name for cls in STRATEGIES}
    }


def test_the_import_page_lists_every_registered_agent_with_its_folders(client_in: Client) -> None:
    page = client_in.get("/import/").content.decode()
    listed = page.split('<ul class="agent-uploads">')[1].split("</ul>")[0]
    for module in FORMATS:
        assert f"<strong>{module.LABEL}</strong>" in listed
        assert all(f"<code>~/{folder}</code>" in listed for folder in module.SESSION_FOLDERS)


def test_the_list_explains_its_peak_bar_colours(client_in: Client, tmp_path) -> None:
    services.import_paths(paths=[small_session(tmp_path)])
    page = client_in.get("/").content.decode()
    assert 'class="bar-legend' in page and "past the auto-compact threshold" in page


def test_run_lab_timeline_and_layers_name_strategies_by_their_agent(client_in: Client, offline, tmp_path) -> None:
    # The run page, the lab, the what-if table, the thresholds heading and the layers said "khaelor", "codex",
    # "claude-code": the registry's slugs, where the review queue beside them says KHAELOR, Codex, Claude Code.

    outcome = services.import_file(path=KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    session = models.Session.objects.get(pk=outcome.session)
    preview = preview_selectors.build_preview(
        session=session, strategy="khaelor", overrides={"protect_tail_tokens": 500}
    )
    run = run_services.execute_run(run_id=run_services.create_run(preview=preview, user=None).pk)
    assert "<div><dt>Strategy</dt><dd>KHAELOR</dd></div>" in client_in.get(f"/runs/{run.pk}/").content.decode()

    out = StringIO()
    call_command(
        "compaction_lab", str(session.pk), "--at", "10", "--variant", "Keep paths.", "--now", "--json", stdout=out
    )
    lab = client_in.get(f"/labs/{json.loads(out.getvalue())['lab']}/").content.decode()
    assert '<p class="muted">KHAELOR · 1 variant at 1 point.' in lab

    timeline = client_in.get(f"/sessions/{session.pk}/timeline/?strategy=codex&replay=codex").content.decode()
    assert "<h2>Thresholds (Codex)</h2>" in timeline and "<td>Codex</td>" in timeline

    claude = services.import_file(path=CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl")
    assert isinstance(claude, services.FileImport)
    turn = client_in.get(f"/sessions/{claude.session}/timeline/turn/?call=3").content.decode()
    assert "the layers of Claude Code" in turn
