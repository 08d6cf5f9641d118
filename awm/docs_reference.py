"""The docs site's generated reference pages: every setting of the TOML tables and every `awm` command.

Why generated: a table of settings or options written by hand falls behind the code the day a field is
added. The MkDocs hook (docs/hooks/reference.py) replaces each marker of `MARKERS` in a page with what
the functions here render from the pydantic models and the click tree behind `awm.cli.app`; the tests
call the same functions without MkDocs. Descriptions come from `Field(description=...)` where a field has
one, else from the comments the source writes above or beside the field.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from awm.config import PROJECT_ROOT, Settings
from awm.pipeline.ablation_plan import AblationConfig, ArmSpec
from awm.pipeline.config import PIPELINE_TABLE, PipelineConfig

SETTINGS_MARKER = "<!-- awm:settings -->"
CLI_MARKER = "<!-- awm:cli -->"
# A default longer than this is shown as the expression the source writes (`dict(DEFAULT_PRICES)`).
MAX_DEFAULT_CHARS = 160


@dataclass(frozen=True)
class SettingRow:
    """One key of a TOML table."""

    key: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class SettingsTable:
    """One table of a config file, titled as the file writes it (`[llm]`, `[browser.rails]`, `[[arm]]`)."""

    title: str
    model: type[BaseModel]
    rows: tuple[SettingRow, ...]


# --- settings --------------------------------------------------------------------------------------------


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def type_text(annotation: Any) -> str:
    """A type as a reader of a TOML file needs it: `"on" or "off"`, `list[str]`, `int or none`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_text(a) for a in args)}]"
    if isinstance(annotation, type):
        return "path" if issubclass(annotation, Path) else annotation.__name__
    return str(annotation)


BOUNDS = (("ge", "≥ "), ("gt", "> "), ("le", "≤ "), ("lt", "< "))


def bounds_text(field: Any) -> str:
    """A field's bounds as its validation holds them (`≥ 1, ≤ 50`), or nothing."""
    found = [f"{sign}{getattr(item, name)}" for item in field.metadata for name, sign in BOUNDS if hasattr(item, name)]
    return ", ".join(found)


def toml_text(value: Any) -> str:
    """A default value written the way a TOML file writes it (TOML has no null: `None` is "unset")."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        if value.is_absolute() and value.is_relative_to(PROJECT_ROOT):
            value = value.relative_to(PROJECT_ROOT)
        return json.dumps(str(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_text(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    return str(value)


def _field_sources(model: type[BaseModel]) -> dict[str, tuple[str, str]]:
    """Per field of `model`'s own class body: (the comments above or beside it, its default expression)."""
    source = textwrap.dedent(inspect.getsource(model))
    comments: dict[int, str] = {}  # line number -> comment text, for comment tokens
    code_lines: set[int] = set()  # lines holding anything but a comment
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        beside = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        above_text, beside_text = " ".join(above), " ".join(c for c in beside if c != "fmt: skip")
        joint = " " if above_text.endswith((".", ":", ";")) else "; "  # a section comment above, a note beside
        text = joint.join(group for group in (above_text, beside_text) if group)
        expression = " ".join((ast.get_source_segment(source, node.value) or "").split()) if node.value else ""
        found[node.target.id] = (text, expression)
    return found


def _default_text(field: Any, expression: str) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    factory = field.default_factory
    if factory is not None and inspect.isfunction(factory) and factory.__name__ != "<lambda>":
        return f"`{factory.__name__}()`"  # computed where it runs (an environment variable, a folder)
    value = field.get_default(call_default_factory=True)
    text = toml_text(value)
    if len(text) > MAX_DEFAULT_CHARS and expression:
        inner = re.fullmatch(r"Field\(default_factory=lambda: (.*)\)", expression)
        return f"`{inner.group(1) if inner else expression}`"
    return f"`{text}`"


def settings_rows(model: type[BaseModel]) -> Iterator[tuple[str, Any, SettingRow]]:
    """(key, annotation, row) for every field of `model`, nested models included (their row is a stub)."""
    sources: dict[str, tuple[str, str]] = {}
    for klass in reversed(model.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            sources.update(_field_sources(klass))
    for key, field in model.model_fields.items():
        comment, expression = sources.get(key, ("", ""))
        description = field.description or comment
        if not description and inspect.isfunction(field.default_factory):
            description = (inspect.getdoc(field.default_factory) or "").split("\n\n")[0]
        yield key, field.annotation, SettingRow(
            key=key,
            type=type_text(field.annotation) + (f" ({bounds})" if (bounds := bounds_text(field)) else ""),
            default=_default_text(field, expression),
            description=" ".join(description.split()),
        )


def _tables(model: type[BaseModel], name: str, title: str) -> Iterator[SettingsTable]:
    """The table of `model` (its plain keys) and, after it, one table per nested model (`[browser.rails]`)."""
    rows, nested = [], []
    for key, annotation, row in settings_rows(model):
        if _is_model(annotation):
            nested.append((f"{name}.{key}" if name else key, annotation))
        else:
            rows.append(row)
    yield SettingsTable(title=title, model=model, rows=tuple(rows))
    for table_name, sub in nested:
        yield from _tables(sub, table_name, f"[{table_name}]")


def settings_tables() -> list[SettingsTable]:
    """Every table of a config file: `Settings`' own (top level, `[llm]`, `[agent]`, `[browser]`,
    `[browser.rails]`), the arm's `[pipeline]`, and the ablation's top-level keys and `[[arm]]`."""
    tables = list(_tables(Settings, "", "Top-level keys"))
    tables += list(_tables(PipelineConfig, PIPELINE_TABLE, f"[{PIPELINE_TABLE}]"))
    ablation_rows = tuple(row for key, _, row in settings_rows(AblationConfig) if key != "arm")
    tables.append(SettingsTable("Ablation keys (top level of an `awm ablate` file)", AblationConfig, ablation_rows))
    tables.append(SettingsTable("[[arm]]", ArmSpec, tuple(row for _, _, row in settings_rows(ArmSpec))))
    return tables


def _markdown_text(text: str) -> str:
    """Text for a Markdown table cell or paragraph: `<` and `>` escaped outside code spans, pipes escaped."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
    return "`".join(parts).replace("|", r"\|")


def render_settings_reference() -> str:
    """Markdown: one section and one table per settings table, each key with type, default, description."""
    out: list[str] = []
    for table in settings_tables():
        out += [f"## {table.title}", "", f"`{table.model.__module__}.{table.model.__name__}`", ""]
        doc = _markdown_text(inspect.getdoc(table.model) or "")
        out += [" ".join(paragraph.split()) + "\n" for paragraph in doc.split("\n\n") if paragraph.strip()]
        if table.model is ArmSpec:
            out += ["Every other key of an `[[arm]]` entry is a `[pipeline]` key that the arm overrides.", ""]
        out += ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
        for row in table.rows:
            cells = [f"`{row.key}`", _markdown_text(row.type), _markdown_text(row.default)]
            cells.append(_markdown_text(row.description))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


# --- the command line ------------------------------------------------------------------------------------


def walk_commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, click command) for a click command and every visible command under it, in mount order."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from walk_commands(sub, (*path, name))


# What click appends to a parameter's help: `  [default: 3; x>=1]`, `  [required]`.
HELP_TAIL = re.compile(r"\s+\[([^\[\]]*)\]$")


def parameter_rows(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str, str, str]]:
    """(kind, name as `--help` shows it, help, default and bounds) for each visible parameter of a command."""
    ctx = command.context_class(command, info_name=" ".join(["awm", *path]))
    for param in command.params:
        record = param.get_help_record(ctx)
        if record is None:  # a hidden option
            continue
        name, help_text = record
        tail = HELP_TAIL.search(help_text)
        extra = tail.group(1).removeprefix("default: ") if tail else ""
        yield param.param_type_name, name, help_text[: tail.start()] if tail else help_text, extra


def _help_markdown(text: str) -> list[str]:
    """A command's help as Markdown: paragraphs as text, each `Example:` command as a code block."""
    out: list[str] = []
    for paragraph in inspect.cleandoc(text or "").split("\n\n"):
        paragraph = paragraph.replace("\b\n", "").strip()
        examples = [line for line in paragraph.splitlines() if line.strip().startswith("Example:")]
        prose = " ".join(line.strip() for line in paragraph.splitlines() if line not in examples)
        if prose:
            out += [_markdown_text(prose), ""]
        if examples:
            out += ["Example:" if len(examples) == 1 else "Examples:", "", "```bash"]
            for line in examples:
                command, _, note = line.strip().removeprefix("Example:").strip().partition("   ")
                out.append(f"{command}  # {note.strip()}" if note.strip() else command)
            out += ["```", ""]
    return out


def render_cli_reference(root: Any) -> str:
    """Markdown: a section per `awm` command (`## awm sites check`), its help, usage, arguments, options."""
    out: list[str] = []
    for path, command in walk_commands(root):
        ctx = command.context_class(command, info_name=" ".join(["awm", *path]))
        out += [f"## {' '.join(['awm', *path])}", ""]
        out += ["```text", command.get_usage(ctx).removeprefix("Usage: "), "```", ""]
        out += _help_markdown(command.help or "")
        subcommands = [(name, sub) for name, sub in getattr(command, "commands", {}).items() if not sub.hidden]
        if subcommands:
            out += ["| Command | Summary |", "| --- | --- |"]
            for name, sub in subcommands:
                full = " ".join(["awm", *path, name])
                summary = _markdown_text(sub.get_short_help_str(limit=120))
                out.append(f"| [`{full}`](#{full.replace(' ', '-')}) | {summary} |")
            out.append("")
        rows = list(parameter_rows(command, path))
        for kind, heading in (("argument", "Argument"), ("option", "Option")):
            chosen = [row for row in rows if row[0] == kind]
            if chosen:
                out += [f"| {heading} | Help | Default, bounds |", "| --- | --- | --- |"]
                for _, name, help_text, extra in chosen:
                    cells = [f"`{name}`", _markdown_text(help_text), f"`{extra}`" if extra else ""]
                    out.append("| " + " | ".join(cells) + " |")
                out.append("")
    return "\n".join(out)


def cli_root() -> Any:
    """The click command behind `awm` (importing the CLI mounts every area; nothing starts a browser)."""
    import typer.main

    from awm.cli import app

    return typer.main.get_command(app)


MARKERS: dict[str, Callable[[], str]] = {
    SETTINGS_MARKER: render_settings_reference,
    CLI_MARKER: lambda: render_cli_reference(cli_root()),
}


def expand_markers(markdown: str) -> str:
    """A page's Markdown with each marker of `MARKERS` it holds replaced by the generated reference."""
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
