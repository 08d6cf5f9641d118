"""Writing a results file so that a reader never sees half of it: a temp file beside it, then a rename.

Why one function: run folders, summaries, trajectories, reports and provenance are all read while a run
is still going (the dashboard, `awm traces`, a resumed run), and a kill mid-write must leave the old
file or the new one, never a torn one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from awm.errors import AwmError


def write_text_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` (parents created) through `<path>.tmp` and a rename; returns `path`."""
    return write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write `data` to `path` (parents created) through `<path>.tmp` and a rename; returns `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def require_writable_folder(folder: Path, what: str) -> None:
    """Raise `AwmError` unless files can be made in `folder`, or, when it does not exist yet, in its
    nearest existing parent, where it would be created. `what` names the destination for the message
    (``--html out/run.html``).

    Why before the work and by trying: an export checked up front fails in one line and leaves nothing
    behind, instead of a traceback after minutes of work; and permission bits cannot tell (root passes
    every check, `/proc` refuses any new file), so a temporary file is made there and removed at once.
    """
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise AwmError(f"{what}: cannot be written, {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".awm-write-check-"):
            pass
    except OSError as exc:
        raise AwmError(
            f"{what}: cannot be written, no file can be made in {existing} ({exc.strerror}); "
            "choose a folder you can write to"
        ) from None


def default_run_dir(name: str, runs_dir: Path) -> Path:
    """`runs/<time>-<name>`: readable, sorted by time."""
    from datetime import datetime

    return Path(runs_dir) / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{name}"
