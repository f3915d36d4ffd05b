"""The first `bin/run` on a fresh clone with an empty home: seconds until the login is printed, phase by phase.

    .venv/bin/python bench/first_start.py [--project PATH] [--keep] [--no-record]

Clones ``--project`` (default: this checkout's committed HEAD) into a temporary folder, so there is no ``.venv``,
no ``var/`` and no compiled module, and runs its ``bin/run`` with ``HOME`` an empty folder (no pip cache, no agent
folder to scan) until the banner's password line, then stops it. Each phase's time comes from bash's own trace
(``BASH_ENV`` turns on ``set -x`` with a timestamped ``PS4`` in bin/run and bin/setup): creating the virtualenv, pip,
migrate, collectstatic, and ``manage.py serve`` up to the banner; and the CPU seconds of all of them. Where pip finds
its packages (PyPI, a local wheel folder in ``PIP_FIND_LINKS``) decides most of the total: the row says which ran.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PROJECT, free_port, load_average, record_results  # noqa: E402

TARGET_S = 60.0  # issue 37: under 60 s on a 2-core machine

# (phase name, a regular expression matching the traced command that starts it), in the order bin/run runs them.
PHASES = [
    ("virtualenv", r" -m venv \.venv"),
    ("pip", r"pip .*install"),
    ("migrate", r"manage\.py migrate"),
    ("collectstatic", r"manage\.py collectstatic"),
    ("serve until the banner", r"manage\.py serve"),
]


def measure(*, project: Path, keep: bool) -> tuple[float, dict[str, float], str]:
    root = Path(tempfile.mkdtemp(prefix="first-start-"))
    clone, home = root / "clone", root / "home"
    home.mkdir()
    trace_rc = root / "trace.bash"
    trace_rc.write_text("PS4='+TRACE $EPOCHREALTIME '\nset -x\n")
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSION_INSPECTOR_", "VIRTUAL_ENV"))}
    env.pop("DATABASE_URL", None)
    env.update(
        HOME=str(home),
        BIND=f"127.0.0.1:{free_port()}",
        # bash takes PS4 from the environment only when not root; BASH_ENV is read by every script it starts.
        BASH_ENV=str(trace_rc),
    )
    # pyenv's shims find their versions under ~/.pyenv: an empty home keeps the interpreter where it is.
    if shutil.which("pyenv") or Path("~/.pyenv").expanduser().is_dir():
        env.setdefault("PYENV_ROOT", os.environ.get("PYENV_ROOT", str(Path("~/.pyenv").expanduser())))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a real first run compiles and keeps its modules
    marks: list[tuple[float, str]] = []
    out: list[str] = []
    errors: list[str] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = before.ru_utime + before.ru_stime  # the clone's git, already waited for
    start = time.time()
    process = subprocess.Popen(
        ["bin/run"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def read_trace() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if found := re.match(r"\++TRACE (\d+\.\d+) (.*)", line):
                marks.append((float(found.group(1)), found.group(2)))
            else:
                errors.append(line)

    tracer = threading.Thread(target=read_trace, daemon=True)
    tracer.start()
    banner_at = None
    assert process.stdout is not None
    for line in process.stdout:
        out.append(line)
        if "password:" in line or "Log in with an existing account" in line:
            banner_at = time.time()
            break
    process.terminate()
    process.wait(timeout=30)
    tracer.join(timeout=5)
    # CPU seconds of everything bin/run ran (each process is waited for by its parent, so all are counted): on a
    # shared machine the wall time says how busy the others were, this says what the start costs.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    if banner_at is None:
        raise SystemExit("bin/run ended without its banner:\n" + "".join(out + errors))
    total = banner_at - start
    starts: list[tuple[str, float]] = []
    for name, pattern in PHASES:
        at = next((t for t, command in marks if re.search(pattern, command)), None)
        if at is not None:
            starts.append((name, at))
    phases: dict[str, float] = {}
    for i, (name, at) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else banner_at
        phases[name] = end - at
    phases["the rest (clone's scripts, secret key)"] = total - sum(phases.values())
    phases["CPU seconds, all processes"] = cpu
    if keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return total, phases, "".join(out)


def pip_source(*, project: Path) -> str:
    """Where pip found the project's packages: a local wheel folder of ``PIP_FIND_LINKS`` that holds some of them,
    else the index (``PIP_INDEX_URL``, else PyPI). A folder of other wheels (this machine's holds only torch) is no
    source of ours: the row would say "local wheels" for a start that downloaded every package."""
    dependencies = tomllib.loads((project / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in dependencies}
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        wheels = Path(folder).glob("*.whl") if Path(folder).is_dir() else []
        if any(w.name.split("-")[0].lower().replace("_", "-") in names for w in wheels):
            return f"local wheels in {folder}"
    return os.environ.get("PIP_INDEX_URL") or "PyPI"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=PROJECT, help="the checkout to clone (its committed HEAD)")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its home")
    parser.add_argument("--no-record", action="store_true", help="do not write bench/results.md")
    args = parser.parse_args()
    load_before = load_average()
    total, phases, terminal = measure(project=args.project, keep=args.keep)
    load = f"{load_before} before, {load_average()} after"
    pip_from = pip_source(project=args.project)
    print(terminal)
    print(f"first start: {total:.1f} s (load {load}; pip from {pip_from})")
    for name, seconds in phases.items():
        print(f"  {name}: {seconds:.1f} s")
    if not args.no_record:
        detail = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
        verdict = "ok" if total < TARGET_S else "over"
        what = f"first `bin/run`, fresh clone, empty home ({detail}; pip from {pip_from})"
        rows = [f"| {what} | {total:.1f} s | | < {TARGET_S:.0f} s | {verdict} |"]
        record_results("first_start.py", rows, load=load)


if __name__ == "__main__":
    main()
