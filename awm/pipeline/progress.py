"""The one progress display of every long job: a Rich bar per arm with solved count, stage and ETA.

Why one: `awm run`, `awm pipeline` and `awm ablate` all drive episodes through the same driver, so they
show the same bar. Rich shows one live display at a time, so an ablation opens one `ProgressBoard` and
gives each arm its own `ArmBar` on it; a single run opens a board with one bar.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ArmBar:
    """One bar: episodes done of total, how many solved, the stage and task in progress."""

    def __init__(self, progress: Progress, bar: TaskID, label: str) -> None:
        self._progress = progress
        self._bar = bar
        self.label = label
        self.solved = 0

    def start(self, *, total: int, done: int = 0, solved: int = 0) -> None:
        self.solved = solved
        self._progress.update(self._bar, total=total, completed=done, solved=solved)
        self._progress.start_task(self._bar)

    def note(self, stage: str, key: str = "") -> None:
        """What the arm is doing now (`solve`, `evaluate`, `induce`) and on which task."""
        where = f"{self.label} {key.removeprefix('browsergym/')}".strip()
        self._progress.update(self._bar, description=where, stage=stage)

    def update(self, done: int, total: int | None, key: str = "") -> None:
        """Absolute progress, for jobs that count their own items (Mind2Web tasks)."""
        self._progress.start_task(self._bar)
        where = f"{self.label} {key}".strip()
        self._progress.update(self._bar, completed=done, total=total, description=where)

    def advance(self, solved: bool) -> None:
        self.solved += int(solved)
        self._progress.update(self._bar, advance=1, solved=self.solved, stage="")


class ProgressBoard:
    """A live display holding one bar per arm."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def bar(self, label: str, total: int = 0) -> ArmBar:
        task = self._progress.add_task(label, total=total or None, solved=0, stage="", start=False)
        return ArmBar(self._progress, task, label)


@contextmanager
def progress_board(console: Console | None, enabled: bool = True) -> Iterator[ProgressBoard]:
    """A board on `console` (disabled: the bars exist and record nothing on screen)."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[solved]} solved"),
        TextColumn("{task.fields[stage]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not enabled, transient=False) as progress:
        yield ProgressBoard(progress)
