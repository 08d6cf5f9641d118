"""Writing a results file so that a reader never sees half of it: a temp file beside it, then a rename.

Why one function: run folders, summaries, trajectories, reports and provenance are all read while a run
is still going (the dashboard, `awm traces`, a resumed run), and a kill mid-write must leave the old
file or the new one, never a torn one.
"""

from __future__ import annotations

from pathlib import Path


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
