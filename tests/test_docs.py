"""The docs site: generated references that miss nothing, commands in the docs that exist, no network.

Why these checks: a settings table or option list written by hand falls behind the code, and a command
line in a page is copied by readers as it stands; `mkdocs build --strict` (in make test) catches broken
links and anchors, these catch what a link checker cannot. The reference functions are called directly,
without MkDocs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from awm.config import Settings
from awm.docs_reference import (
    CLI_MARKER,
    SETTINGS_MARKER,
    cli_root,
    render_cli_reference,
    render_settings_reference,
    settings_rows,
    settings_tables,
    walk_commands,
)
from awm.pipeline.ablation_plan import AblationConfig, ArmSpec
from awm.pipeline.config import PipelineConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GENERATED = {DOCS / "reference" / "configuration.md", DOCS / "reference" / "cli.md"}
README_MAX_LINES = 250
CLI = cli_root()


# --- the settings reference ------------------------------------------------------------------------------


def expected_tables(model: type[BaseModel], title: str, name: str = "") -> Iterator[tuple[str, set[str]]]:
    """(section title, keys) for `model` and each model nested in it, walked independently of the generator."""
    keys = set()
    for key, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            table = f"{name}.{key}" if name else key
            yield from expected_tables(field.annotation, f"[{table}]", table)
        else:
            keys.add(key)
    yield title, keys


def sections(markdown: str) -> dict[str, str]:
    """`## title` -> the text under it."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_the_settings_reference_names_every_key_of_every_table() -> None:
    rendered = sections(render_settings_reference())
    expected = dict(expected_tables(Settings, "Top-level keys"))
    expected["[pipeline]"] = set(PipelineConfig.model_fields)
    expected["Ablation keys (top level of an `awm ablate` file)"] = set(AblationConfig.model_fields) - {"arm"}
    expected["[[arm]]"] = set(ArmSpec.model_fields)
    assert {"[llm]", "[agent]", "[browser]", "[browser.rails]"} <= set(expected)
    assert set(rendered) == set(expected)
    for title, keys in expected.items():
        missing = sorted(key for key in keys if f"| `{key}` |" not in rendered[title])
        assert not missing, f"the configuration reference's {title} table lacks {missing}"


def test_every_settings_row_has_a_type_and_a_default() -> None:
    for table in settings_tables():
        for row in table.rows:
            assert row.type and row.default, (table.title, row)


def test_every_setting_has_a_description() -> None:
    """A new setting needs a `Field(description=...)` or a comment above or beside it: what it does, its
    values, its unit."""
    tables = settings_tables()
    assert sum(len(table.rows) for table in tables) > 80  # every table was walked
    missing = [f"{table.title}: {row.key}" for table in tables for row in table.rows if not row.description]
    assert not missing, "settings without a description in the reference:\n" + "\n".join(missing)


class _Example(BaseModel):
    """A table for the test."""

    described: int = Field(default=1, description="From the field itself.")
    # Two lines of comment
    # above the field.
    commented: bool = True  # And one beside it.
    plain: str | None = None
    listed: list[str] = Field(default_factory=lambda: ["a", "b"])


def test_descriptions_come_from_the_field_or_the_comments_around_it() -> None:
    rows = {key: row for key, _, row in settings_rows(_Example)}
    assert rows["described"].description == "From the field itself."
    assert rows["commented"].description == "Two lines of comment above the field. And one beside it."
    assert rows["plain"].description == ""
    assert (rows["plain"].type, rows["plain"].default) == ("str or none", "`unset`")
    assert (rows["commented"].default, rows["listed"].default) == ("`true`", '`["a", "b"]`')


def test_a_path_default_inside_the_project_is_shown_relative_to_it() -> None:
    rows = {key: row for key, _, row in settings_rows(Settings)}
    assert rows["memory_db"].default == '`"workflows/memory.sqlite"`'
    assert rows["home"].default == "`awm_home()`" and "AWM_HOME" in rows["home"].description


# --- the command reference -------------------------------------------------------------------------------


def test_the_cli_reference_has_a_section_for_every_command_with_its_options() -> None:
    rendered = sections(render_cli_reference(CLI))
    commands = list(walk_commands(CLI))
    assert len(commands) > 30 and ("sites", "check") in [path for path, _ in commands]
    for path, command in commands:
        title = " ".join(["awm", *path])
        assert title in rendered, f"the command reference has no section for {title}"
        for param in command.params:
            for flag in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
                if flag.startswith("-") and not getattr(param, "hidden", False):
                    assert flag in rendered[title], f"{title}: option {flag} is not in the reference"


def test_the_generated_pages_hold_their_markers() -> None:
    assert SETTINGS_MARKER in (DOCS / "reference" / "configuration.md").read_text()
    assert CLI_MARKER in (DOCS / "reference" / "cli.md").read_text()


# --- the README and the command lines of the docs -------------------------------------------------------


def test_the_readme_is_a_front_door() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}: the manual is docs/)"


FENCE = re.compile(r"^\s*(```|~~~)")
PLACEHOLDER = re.compile(r"<[^<>]*>")
OPTIONAL = re.compile(r"\[(-[^\[\]]*)\]")  # usage notation: `[--site S]`
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {"<", ">", ">>", "2>", "&>"}


def fenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) inside fenced code blocks: `\\` continuations and a `<placeholder>`
    that runs over lines are joined; the number is the logical line's first."""
    inside, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        if not pending:
            start = number
        pending = f"{pending} {line.strip()}" if pending else line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1]
        elif pending.count("<") <= pending.count(">"):
            yield start, pending
            pending = ""


def strip_comment(line: str) -> str:
    """The line without a shell comment (`#` at a word's start, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def awm_invocations(line: str) -> Iterator[list[str]]:
    """The argument lists of each `awm` command on a shell line (`$ ` prompts, `A=b` prefixes, pipes)."""
    line = OPTIONAL.sub(r"\1", PLACEHOLDER.sub("PLACEHOLDER", strip_comment(line.removeprefix("$ "))))
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|;&<>")
    lexer.whitespace_split = True
    tokens = list(lexer)
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(token)
    for segment in segments:
        while segment and ENV_ASSIGNMENT.match(segment[0]):
            segment = segment[1:]
        if segment and (segment[0] == "awm" or segment[0].endswith("/awm")):
            yield segment[1:]


def _takes_value(param) -> bool:
    return param.param_type_name == "option" and not param.is_flag and not getattr(param, "count", False)


def command_problems(args: list[str]) -> list[str]:
    """What is wrong with `awm ARGS`: an unknown command, an option the command lacks, too many arguments."""
    command, path, i = CLI, ["awm"], 0
    # The command path: words naming sub-commands (options of a group come before its sub-command).
    while i < len(args) and getattr(command, "commands", None):
        word = args[i]
        if word.startswith("-"):
            break
        if word not in command.commands:
            if word.isupper() or word == "PLACEHOLDER":  # `awm COMMAND --help`: stands for any command
                return []
            known = ", ".join(command.commands)
            return [f"'{' '.join(path)}' has no command '{word}' (it has: {known})"]
        command, i = command.commands[word], i + 1
        path.append(word)
    options = {}
    for param in command.params:
        for flag in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if flag.startswith("-"):
                options[flag] = param
    problems, positionals, unknown = [], 0, False
    while i < len(args):
        token = args[i]
        i += 1
        if token in REDIRECTS:
            i += 1  # the file a redirect names
        elif token.startswith("-") and token != "-":
            flag, has_value, _ = token.partition("=")
            if flag == "--help":
                continue
            if flag not in options:
                problems.append(f"'{' '.join(path)}' has no option {flag}")
                unknown = True  # whether it would take the next word is unknown: count no arguments
            elif _takes_value(options[flag]) and not has_value:
                i += 1
        else:
            positionals += 1
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    room = float("inf") if any(p.nargs == -1 for p in arguments) else sum(p.nargs for p in arguments)
    if not getattr(command, "commands", None) and not unknown and positionals > room:
        problems.append(f"'{' '.join(path)}' takes {room} argument(s), the line gives {positionals}")
    return problems


def doc_files() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if p not in GENERATED)
    return [ROOT / "README.md", *pages]


def test_the_command_line_checker_finds_what_is_wrong() -> None:
    lines = [
        "awm sites check --site trac --all   # validate",
        "AWM_MODEL=x awm run --tasks click-test --seeds 0-4 | tee out.txt",
        "$ awm memory show <a scope> --json > out.json",
        "awm sites check [--site S] [--all]",
        "awm COMMAND --help",
    ]
    assert [command_problems(a) for line in lines for a in awm_invocations(line)] == [[], [], [], [], []]
    assert command_problems(["sites", "chek"])[0].startswith("'awm sites' has no command 'chek'")
    assert command_problems(["run", "--taks", "x"]) == ["'awm run' has no option --taks"]
    assert command_problems(["doctor", "extra"]) == ["'awm doctor' takes 0 argument(s), the line gives 1"]
    text = "```bash\nawm ablate <a file,\nover two lines> --out runs/x\nawm run \\\n  --tasks a\n```\n"
    assert list(fenced_lines(text)) == [(2, "awm ablate <a file, over two lines> --out runs/x"), (4, "awm run  --tasks a")]


def test_every_awm_command_line_in_the_docs_exists() -> None:
    problems, checked = [], 0
    for path in doc_files():
        for number, line in fenced_lines(path.read_text()):
            try:
                invocations = list(awm_invocations(line))
            except ValueError as exc:  # unbalanced quotes: not a shell line
                if re.match(r"^\$?\s*awm\s", line):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: cannot split '{line}': {exc}")
                continue
            for args in invocations:
                checked += 1
                problems += [f"{path.relative_to(ROOT)}:{number}: {p}" for p in command_problems(args)]
    assert checked > 0
    assert not problems, "command lines in the docs that awm would refuse:\n" + "\n".join(problems)


# --- the built site --------------------------------------------------------------------------------------

EXTERNAL_ASSET = re.compile(r"<(?:link|script|img|iframe|source|video|audio)\b[^>]*\b(?:href|src)=[\"']?(?:https?:)?//", re.I)
EXTERNAL_CSS = re.compile(r"(?:@import\s+|url\()\s*[\"']?(?:https?:)?//", re.I)


def test_the_built_site_loads_nothing_from_the_network(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (site / "index.html").is_file() and (site / "reference" / "cli.html").is_file()
    found = []
    for page in site.rglob("*.html"):
        found += [f"{page.relative_to(site)}: {m.group(0)}" for m in EXTERNAL_ASSET.finditer(page.read_text())]
    for sheet in site.rglob("*.css"):
        found += [f"{sheet.relative_to(site)}: {m.group(0)}" for m in EXTERNAL_CSS.finditer(sheet.read_text())]
    assert not found, "the site fetches from the network:\n" + "\n".join(found)
    cli = (site / "reference" / "cli.html").read_text()
    assert CLI_MARKER not in cli and 'id="awm-sites-check"' in cli  # the marker was expanded
