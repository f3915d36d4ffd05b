"""One naming scheme for agents: the registry's display name on the list, its filter, the session page, the
review queue and every JSON answer."""

from __future__ import annotations

import pytest
from django.test import Client

from compaction.strategies.registry import AGENT_NAMES, agent_name
from sessions_app import models, services
from tests.conftest import CODEX_SAMPLES
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
    from compaction.formats.registry import FORMAT_LABELS
    from compaction.strategies.registry import STRATEGIES

    # Sentences name the agent by the strategy's short label; badges and filters by the format's label: one name.
    assert {cls.name: cls.short_label for cls in STRATEGIES} == {
        name: label for name, label in FORMAT_LABELS.items() if name in {cls.name for cls in STRATEGIES}
    }


def test_the_import_page_lists_every_registered_agent_with_its_folders(client_in: Client) -> None:
    from compaction.formats.registry import FORMATS

    page = client_in.get("/import/").content.decode()
    listed = page.split('<ul class="agent-uploads">')[1].split("</ul>")[0]
    for module in FORMATS:
        assert f"<strong>{module.LABEL}</strong>" in listed
        assert all(f"<code>~/{folder}</code>" in listed for folder in module.SESSION_FOLDERS)


def test_the_list_explains_its_peak_bar_colours(client_in: Client, tmp_path) -> None:
    services.import_paths(paths=[small_session(tmp_path)])
    page = client_in.get("/").content.decode()
    assert 'class="bar-legend' in page and "past the auto-compact threshold" in page
