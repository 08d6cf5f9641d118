"""The process tree below a pid, and killing it (Linux /proc; empty elsewhere).

Why one module: the browser watchdog (kill a hung Chromium) and the worker pool (kill a hung worker
with its browser) both walk the same tree; Chromium starts in its own process group (Playwright
detaches it), so killing a group alone would leave it running.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids, read once from /proc."""
    proc = Path("/proc")
    children: dict[int, list[int]] = {}
    if not proc.is_dir():
        return children
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(root: int) -> set[int]:
    """Every process below `root`."""
    children = children_map()
    found: set[int] = set()
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def kill_pids(pids: set[int]) -> None:
    """SIGKILL each pid; one that is already gone is no error."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def kill_process_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant (a worker and its browser)."""
    tree = descendants(pid)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    kill_pids({pid, *tree})
