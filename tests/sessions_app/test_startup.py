"""Start-up cost: no command or page pays for a heavy module it does not use (issue 12)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.management import get_commands, load_command_class
from django.core.management.base import BaseCommand, CommandError

from tests.conftest import REPO

# The Anthropic SDK takes about 2 s to import; only a compaction run that calls the API needs it. The
# Markdown renderer (markdown-it, Pygments, nh3) serves pages only: the web process loads it at its start
# (config/wsgi.py), a command's URL check must not. detect-secrets (0.2 s, with requests) serves the HTML export only.
PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import call_command
from django.urls import get_resolver
call_command("check", verbosity=0)
resolver = get_resolver()
for pattern in resolver.url_patterns:
    getattr(pattern, "url_patterns", None)  # import every view module
from sessions_app import run_services, services, sweeps, uploads  # noqa: F401
import importlib, pkgutil, sessions_app.selectors
for module in pkgutil.iter_modules(sessions_app.selectors.__path__):  # every reader
    importlib.import_module(f"sessions_app.selectors.{module.name}")
from sessions_app.views import runs, sessions, timeline, diagnosis  # noqa: F401
heavy = sorted(
    name
    for name in sys.modules
    if name.split(".")[0] in ("anthropic", "httpx2", "markdown_it", "pygments", "nh3", "detect_secrets")
    and "." not in name
)
print("HEAVY:" + ",".join(heavy))
"""


def test_check_and_url_resolution_import_no_anthropic_module() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    heavy = result.stdout.rsplit("HEAVY:", 1)[1].strip()
    assert heavy == "", f"imported at start-up: {heavy}"


def test_the_web_application_loads_the_renderer_at_its_start() -> None:
    """And what its pages use that a command does not load (the strategies import it where they use it)."""
    modules = "('markdown_it', 'compaction.layers', 'compaction.offline')"
    probe = f"import sys; import config.wsgi; print('LOADED:' + str(all(m in sys.modules for m in {modules})))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rsplit("LOADED:", 1)[1].strip() == "True"


def _run_as_from_the_command_line(name: str, *argv: str) -> None:
    """What ``manage.py NAME ARGV`` does (``BaseCommand.run_from_argv``), without closing the test's connection."""
    command = load_command_class(get_commands()[name], name)
    options = vars(command.create_parser("manage.py", name).parse_args(argv))
    command.execute(*options.pop("args", ()), **options)


@pytest.mark.django_db
def test_session_commands_skip_the_web_applications_system_checks(monkeypatch, tmp_path, capsys) -> None:
    """The checks cost every command about 0.05 s; `check` and the server run them, an import or a read does not."""
    checked: list[str] = []
    monkeypatch.setattr(BaseCommand, "check", lambda self, **kwargs: checked.append(type(self).__module__))
    _run_as_from_the_command_line("check")
    assert checked == ["django.core.management.commands.check"]  # the probe sees a command that checks
    checked.clear()
    for name in ("session_stats", "timeline", "diagnose"):
        with pytest.raises(CommandError, match="999999"):  # no such session: the command ran, unchecked
            _run_as_from_the_command_line(name, "999999")
    _run_as_from_the_command_line("import_sessions", str(tmp_path), "--json")
    assert '"imported": []' in capsys.readouterr().out
    assert checked == []


def test_a_command_runs_with_the_cyclic_collector_on() -> None:
    """manage.py starts Django with the collector off (start-up only allocates); the command itself, a server or
    a worker running for days included, must have it back on, with start-up's objects frozen out of its way."""
    probe = "import gc; print('GC:', gc.isenabled(), gc.get_freeze_count() > 0)"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rsplit("GC:", 1)[1].split() == ["True", "True"]


def test_an_import_loads_no_strategy_code_it_does_not_run() -> None:
    """An import asks the session's agent strategy whether it compacts (the session's summary); the layers' replay
    and the offline summary writer behind the strategies are for analyses, and cost every import's start 0.01 s."""
    probe = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core.management import load_command_class
load_command_class("sessions_app", "import_sessions")
from compaction.strategies.registry import STRATEGY_NAMES, build_strategy
for name in STRATEGY_NAMES:
    build_strategy(name, info=None, overrides={}).compacts(version=None)
unused = ("compaction.layers", "compaction.replay", "compaction.offline", "compaction.coverage")
print("LOADED:" + ",".join(name for name in unused if name in sys.modules))
"""
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rsplit("LOADED:", 1)[1].strip() == ""
