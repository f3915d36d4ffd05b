"""Reads never reach writes: the selectors import no service, directly or through another module.

Every import statement counts, deferred ones inside functions too, since a deferred import still
ties the modules together (it once made services → tasks → run_services → run_selectors → services).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

SELECTORS = REPO / "sessions_app" / "selectors"
READS = tuple(
    f"sessions_app.selectors.{path.stem}" for path in sorted(SELECTORS.glob("*.py")) if path.stem != "__init__"
)
WRITES = {"sessions_app.services", "sessions_app.run_services", "sessions_app.uploads", "sessions_app.sweeps"}


def source(module: str) -> Path:
    path = REPO / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def app_imports(module: str) -> set[str]:
    """The project modules ``module`` imports; ``from package import name`` counts the submodule when it is one."""
    tree = ast.parse(source(module).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sessions_app":
            found.add(node.module)
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if source(submodule).exists():
                    found.add(submodule)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("sessions_app.")}
    return found - {"sessions_app"}


def reachable(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        for imported in app_imports(module) - seen:
            seen.add(imported)
            todo.append(imported)
    return seen


def test_the_reads_import_no_write_module():
    assert len(READS) > 10
    assert app_imports("sessions_app.services") >= {"sessions_app.selectors.calls"}  # the walk sees real imports
    assert {read: reachable(read) & WRITES for read in READS} == {read: set() for read in READS}


def test_the_reads_import_one_another_without_a_cycle():
    """Each reader can be read (and changed) on its own: no reader reaches itself through the others."""
    assert [read for read in READS if read in reachable(read)] == []
