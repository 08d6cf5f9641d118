"""The served folders: which run and ablation folders exist under the `--runs` directories (`Catalog`),
and the one function that turns a name from a request into a file (`file_in`, a module function).

Why a catalog and not paths in URLs: a request names a run by its key (its path under a served
directory, parts joined by `~`), and the key is looked up among the folders found by scanning; a file
inside a run (a screenshot, a plot) is resolved with symlinks followed and must still lie inside that
run's folder. So `..`, an absolute path, a symlink pointing out, or a screenshot path planted in a run
database all end as "not found", never as a read outside the served directories.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from awm.pipeline.results import RESULTS_JSON
from awm.traces.db import DB_NAME

FolderKind = Literal["run", "ablation"]
KEY_SEPARATOR = "~"


class NotServed(LookupError):
    """A run, episode, step or file a request named is not among the served ones (HTTP 404)."""


class Folder(BaseModel):
    """One served folder: its key in URLs, where it is, and whether it is a run or an ablation."""

    key: str
    path: Path
    root: Path
    kind: FolderKind


def _key(root: Path, folder: Path) -> str:
    rel = folder.relative_to(root)
    return KEY_SEPARATOR.join(rel.parts) if rel.parts else root.name


def inside(base: Path, candidate: Path) -> bool:
    """True when `candidate`, symlinks resolved, is `base` or below it (`base` already resolved)."""
    try:
        candidate.resolve().relative_to(base)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


class Catalog:
    """The run and ablation folders under the served roots, found again on every call (a run started a
    moment ago appears at once; scanning a few hundred folders takes milliseconds)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r).resolve() for r in roots]

    def folders(self) -> dict[str, Folder]:
        """Every served folder by key. A folder found under two roots keeps the first root's key."""
        found: dict[str, Folder] = {}
        for root in self.roots:
            if not root.is_dir():
                continue
            for kind, marker in (("run", DB_NAME), ("ablation", RESULTS_JSON)):
                # rglob does not descend into symlinked folders; `inside` also drops a symlinked marker.
                for path in sorted(root.rglob(marker)):
                    if not path.is_file() or not inside(root, path):
                        continue
                    folder = path.parent
                    if kind == "ablation" and not (folder / "arms").is_dir():
                        continue
                    key = _key(root, folder)
                    found.setdefault(key, Folder(key=key, path=folder, root=root, kind=kind))  # type: ignore[arg-type]
        return found

    def folder(self, key: str, kind: FolderKind) -> Folder:
        folder = self.folders().get(key)
        if folder is None or folder.kind != kind:
            raise NotServed(f"no {kind} '{key}' under the served folders")
        return folder

    def key_of(self, path: Path) -> str | None:
        """The key a folder has (or will have once it holds a run database); None outside the roots."""
        resolved = Path(path).resolve()
        for root in self.roots:
            if inside(root, resolved):
                return _key(root, resolved)
        return None


class ArmPlace(BaseModel):
    """Where a run folder sits in an ablation: `ABLATION/arms/<arm>/<repeat>`."""

    ablation: str  # the ablation's key
    arm: str
    repeat: str  # rep1, rep2...


def arm_place(folder: Folder, folders: dict[str, Folder]) -> ArmPlace | None:
    """The ablation among `folders` whose `arms/<arm>/<repeat>` `folder` is (None: a run of its own).
    The one reading of that layout: the runs page nests arms by it, an arm's page links back by it, and
    the ablation page finds its arms' run folders by it."""
    if folder.kind != "run":
        return None
    for ablation in folders.values():
        if ablation.kind != "ablation":
            continue
        try:
            parts = folder.path.relative_to(ablation.path / "arms").parts
        except ValueError:
            continue
        if len(parts) == 2:
            return ArmPlace(ablation=ablation.key, arm=parts[0], repeat=parts[1])
    return None


def file_in(folder: Folder, relative: str) -> Path:
    """A file inside `folder` named by a relative path (from a run database or a request); `NotServed`
    for anything else. A plain function, not a `Catalog` method: it needs only a `Folder` the catalog
    already found, and the HTML export (no server, no catalog) calls it too."""
    if not relative or Path(relative).is_absolute():
        raise NotServed(f"'{relative}' is not a file of {folder.key}")
    base = folder.path.resolve()
    path = base / relative
    if not inside(base, path) or not path.is_file():
        raise NotServed(f"'{relative}' is not a file of {folder.key}")
    return path.resolve()
