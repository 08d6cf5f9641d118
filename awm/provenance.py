"""Where a result came from: the code's commit, whether it was edited, every installed package, the command.

Why: a number is only worth what it takes to reproduce it. A report that carries the exact commit (and
says when the tree had uncommitted edits), the full package list and the command line lets anyone
rebuild the run, or see why two runs differ, without asking whoever ran it. Collected once when a run
starts and written beside its results as `provenance.json`.
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from awm.files import write_text_atomic

PROVENANCE_JSON = "provenance.json"
GIT_TIMEOUT_S = 10.0
# The source tree holding the `awm` package (a git checkout in development, site-packages otherwise).
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str, cwd: Path = SOURCE_ROOT) -> str | None:
    """The output of one git command in `cwd`, or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(root: Path = SOURCE_ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout at `root`; (None, None) when it is not a git checkout.

    Dirty means `git status --porcelain` lists anything (edits or untracked files): the commit alone
    then does not describe the code that ran.
    """
    head = _git("rev-parse", "HEAD", cwd=root)
    commit = head.strip() if head else None
    if not commit:
        return None, None
    status = _git("status", "--porcelain", cwd=root)
    return commit, (None if status is None else bool(status.strip()))


def installed_packages() -> dict[str, str]:
    """Every installed distribution, name -> version, sorted by name (the first found wins, as import does)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(name, dist.version)
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def collect_provenance(command: list[str] | None = None) -> dict[str, Any]:
    """The provenance of this process: `command` (default `sys.argv`) as given and as one shell line.

    Keys: commit, dirty, source_root, command, command_line, python, python_executable, platform,
    packages, created_at (UTC, ISO 8601).
    """
    argv = list(sys.argv if command is None else command)
    commit, dirty = git_state()
    return {
        "commit": commit,
        "dirty": dirty,
        "source_root": str(SOURCE_ROOT),
        "command": argv,
        "command_line": shlex.join(argv),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "packages": installed_packages(),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def write_provenance(folder: Path, command: list[str] | None = None) -> Path:
    """Write `folder/provenance.json` atomically (a temp file in the same folder, then a rename), so a
    reader never sees half a file, even if the run is killed mid-write; returns its path."""
    text = json.dumps(collect_provenance(command), indent=2) + "\n"
    return write_text_atomic(Path(folder) / PROVENANCE_JSON, text)
