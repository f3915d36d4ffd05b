"""Every third-party package the code imports is declared in pyproject.toml, not only present because another
package pulled it in (httpx2 once arrived through anthropic alone)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from tests.conftest import REPO

LOCAL = {"compaction", "sessions_app", "config", "tests", "bench"}
# Imported only by scripts that run in another interpreter: not this project's dependency.
ELSEWHERE = {"klaude_code"}  # the golden scripts run in a klaude-code 2.8.1 virtualenv (tests/klaude_venv.py)


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    return {_normalise(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]) for requirement in requirements}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_names() -> dict[str, set[str]]:
    """Top-level module name -> the files importing it (every import statement, deferred ones too)."""
    files = [*REPO.glob("manage.py"), *(path for top in LOCAL for path in (REPO / top).rglob("*.py"))]
    local = LOCAL | {path.stem for path in (REPO / "bench").glob("*.py")}
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_imported_package_is_declared():
    distributions = importlib.metadata.packages_distributions()
    imported = _imported_top_names()
    assert {"django", "httpx2", "orjson"} <= imported.keys()  # the walk sees real imports
    undeclared = {
        top: sorted(files)
        for top, files in imported.items()
        if top not in ELSEWHERE and not {_normalise(dist) for dist in distributions.get(top, [top])} & _declared()
    }
    assert undeclared == {}
