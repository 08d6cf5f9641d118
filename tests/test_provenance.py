"""Provenance: the commit of this checkout, every installed package, the exact command, written atomically."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

from awm.provenance import PROVENANCE_JSON, collect_provenance, git_state, write_provenance


def test_provenance_of_this_checkout() -> None:
    command = ["awm", "ablate", "configs/my file.toml", "--out", "runs/x;y"]
    got = collect_provenance(command)
    assert got["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", got["commit"])
    assert got["dirty"] is None if got["commit"] is None else isinstance(got["dirty"], bool)
    assert got["command"] == command
    assert shlex.split(got["command_line"]) == command  # quoted so a shell gets the same argv back
    assert "pydantic" in {name.lower() for name in got["packages"]}
    names = list(got["packages"])
    assert names == sorted(names, key=str.lower)
    assert got["python"] == ".".join(map(str, sys.version_info[:3]))
    assert got["created_at"].endswith("+00:00")
    json.dumps(got)  # goes into results.json as is


def test_command_defaults_to_argv() -> None:
    assert collect_provenance()["command"] == sys.argv


def test_outside_a_checkout_the_commit_is_none(tmp_path: Path) -> None:
    assert git_state(tmp_path) == (None, None)


def test_written_atomically_and_readable(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    path = write_provenance(folder, ["awm", "run"])
    assert path == folder / PROVENANCE_JSON
    assert json.loads(path.read_text())["command"] == ["awm", "run"]
    write_provenance(folder, ["awm", "again"])  # replaces, never appends
    assert json.loads(path.read_text())["command"] == ["awm", "again"]
    assert [p.name for p in folder.iterdir()] == [PROVENANCE_JSON]  # no temp file left behind
