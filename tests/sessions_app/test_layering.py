"""Reads never reach writes: the selectors import no service, directly or through another module.

Every import statement counts, deferred ones inside functions too, since a deferred import still
ties the modules together (it once made services → tasks → run_services → run_selectors → services).
"""

from __future__ import annotations

import ast

from tests.conftest import REPO

READS = ("sessions_app.selectors", "sessions_app.run_selectors")
WRITES = {"sessions_app.services", "sessions_app.run_services", "sessions_app.uploads", "sessions_app.sweeps"}


def app_imports(module: str) -> set[str]:
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "sessions_app":
            found |= {f"sessions_app.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sessions_app."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("sessions_app.")}
    return found


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
    assert app_imports("sessions_app.services") >= {"sessions_app.selectors"}  # the walk sees real imports
    assert {read: reachable(read) & WRITES for read in READS} == {read: set() for read in READS}
