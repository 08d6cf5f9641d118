"""Every `awm` command's --help: it renders, shows bracketed words as written, and carries an example.

Why a walk of the whole tree: help strings are written in a dozen modules, and a rendering setting
(Rich markup ate `[pipeline]`) or a forgotten example shows up only in the command where it happens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import typer.main
from typer.testing import CliRunner

from awm.cli import app

# `[pipeline]`, `[llm]`, `[[arm]]`: TOML table names, the words Rich markup used to swallow
BRACKETED = re.compile(r"\[\[?[^\[\]\s]+\]\]?")
# The areas whose option vocabulary is held to one help text per flag (see test_one_meaning_per_flag).
CONSISTENT_AREAS = ("doctor", "demo", "memory", "traces", "llm", "actions")

runner = CliRunner()


def walk(command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Yield (path, click command) for the root, every group and every command under it."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from walk(sub, (*path, name))


ROOT = typer.main.get_command(app)
COMMANDS = list(walk(ROOT))


def help_strings(command) -> list[str]:
    """The strings a command's --help is made of: its docstring and each parameter's help."""
    return [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]


def render_help(path: tuple[str, ...]) -> str:
    # Wide enough that no help line wraps, so a bracketed word is always found whole.
    result = runner.invoke(app, [*path, "--help"], terminal_width=200, catch_exceptions=False)
    assert result.exit_code == 0, (path, result.output)
    return result.output


def test_the_walk_sees_the_whole_tree():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "memory", "memory import", "pipeline online", "llm chat", "actions parse"} <= names
    assert len(names) > 30


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "awm" for p, _ in COMMANDS])
def test_help_renders_literally_with_an_example(path: tuple[str, ...], command) -> None:
    output = render_help(path)
    words = sorted({w for text in help_strings(command) for w in BRACKETED.findall(text)})
    missing = [w for w in words if w not in output]
    assert not missing, f"awm {' '.join(path)} --help lost {missing}:\n{output}"
    assert "Example:" in output, f"awm {' '.join(path)} --help has no example"


def test_the_bracket_check_checks_something():
    """The help strings really hold bracketed words (Rich markup printed them as blanks)."""
    words = {w for _, c in COMMANDS for text in help_strings(c) for w in BRACKETED.findall(text)}
    assert {"[pipeline]", "[llm]"} <= words


def test_one_meaning_per_flag():
    """Within the areas listed, a flag has one help text wherever it appears (`--json`, `--config`, `--db`)."""
    helps: dict[str, set[str]] = {}
    for path, command in COMMANDS:
        if not path or path[0] not in CONSISTENT_AREAS:
            continue
        for param in command.params:
            for flag in getattr(param, "opts", []):
                if flag.startswith("--") and flag != "--help":
                    helps.setdefault(flag, set()).add(param.help or "")
    differing = {flag: texts for flag, texts in helps.items() if len(texts) > 1}
    assert not differing
    assert {"--json", "--config", "--db", "--style", "--set", "--ids"} <= set(helps)


def test_mounted_apps_print_help_literally_on_their_own_too():
    """`awm.memory.commands.app` run alone (tests, `python -m`) keeps `[x]` as well, not only under `awm`."""
    assert app.rich_markup_mode is None
    assert all(group.typer_instance.rich_markup_mode is None for group in app.registered_groups)


def test_every_memory_command_takes_the_same_db_option():
    memory = dict(COMMANDS)[("memory",)]
    for name, command in memory.commands.items():
        db = [p for p in command.params if "--db" in getattr(p, "opts", [])]
        assert len(db) == 1, name
        assert db[0].default is None, name  # None: the settings decide (AWM_MEMORY_DB, then memory_db)
        assert "AWM_MEMORY_DB" in db[0].help, name
