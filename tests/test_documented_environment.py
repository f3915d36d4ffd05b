"""Every environment variable the code reads is in the README's "Configuration (environment)" table."""

from __future__ import annotations

import re

from tests.conftest import REPO

# Django's own, set by manage.py and the WSGI module, not a setting of this project.
NOT_OURS = {"DJANGO_SETTINGS_MODULE"}
PYTHON_READS = re.compile(
    r"""(?:os\.environ(?:\.get|\.setdefault)?\(\s*|os\.environ\[\s*|getenv\(\s*|_int_env\(\s*|_env_int\(\s*)"""
    r"""["']([A-Z][A-Z0-9_]+)["']"""
)
SHELL_READS = re.compile(r"\$\{([A-Z][A-Z0-9_]+)[:-]")  # ${NAME:-default}: read from the environment


def read_variables() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    files = [
        REPO / "manage.py",
        *(p for top in ("config", "sessions_app", "compaction") for p in (REPO / top).rglob("*.py")),
    ]
    for path in [*files, *(REPO / "bin").iterdir()]:
        text = path.read_text()
        pattern = PYTHON_READS if path.suffix == ".py" or text.startswith("#!/usr/bin/env python") else SHELL_READS
        for name in pattern.findall(text):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return {name: files for name, files in found.items() if name not in NOT_OURS}


def documented() -> set[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Configuration (environment)", 1)[1].split("\n## ", 1)[0]
    return {
        name
        for row in section.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])
    }


def test_every_variable_read_is_documented():
    read = read_variables()
    assert {"SECRET_KEY", "WATCH_STEP_MS", "SESSION_INSPECTOR_VAR", "REQUIRE_POSTGRES"} <= read.keys()  # the scan works
    assert {name: sorted(files) for name, files in read.items() if name not in documented()} == {}


def test_every_documented_variable_is_read():
    assert documented() - read_variables().keys() - {"DATABASE_URL"} == set()
