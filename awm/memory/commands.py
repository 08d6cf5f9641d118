"""`awm memory`: inspect, diff, roll back, export and import versioned workflow memory.

A thin shell over `WorkflowStore` and the text formats. Writes go through `WorkflowStore.update`
(bounded re-base and retry), so a CLI import racing an online induction never loses either change.
Only `import` may create a memory database: the reading commands (scopes, log, show, diff, export) open
it read-only and `rollback` needs it to exist, so a mistyped --db is an error naming it, never a new
empty file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from awm.errors import AwmError
from awm.files import require_writable_folder, write_text_atomic
from awm.memory.store import StoreMode, WorkflowStore
from awm.memory.text_format import import_workflows, render_workflows
from awm.memory.workflow import Provenance, Workflow

app = typer.Typer(
    help="Versioned workflow memory: scopes, log, show, diff, rollback, export, import.\n\n"
    "Example: awm memory log miniwob/login-user",
    no_args_is_help=True,
    add_completion=False,
)

# The option vocabulary of `awm memory`, defined once so every subcommand spells and explains it alike.
DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Memory database (default: AWM_MEMORY_DB, else settings.memory_db = workflows/memory.sqlite).",
        dir_okay=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
StyleOption = Annotated[
    str,
    typer.Option(
        "--style",
        help="Workflow text style: mind2web, webarena, or auto (by scope name when writing, by content when reading).",
    ),
]
ScopeArgument = Annotated[str, typer.Argument(help="Memory scope, e.g. miniwob/login-user.")]

STYLES = ("auto", "mind2web", "webarena")


def _open(db: Path | None, mode: StoreMode) -> WorkflowStore:
    """Open the store that --db names, or the one the settings name (AWM_MEMORY_DB wins there)."""
    if db is None:
        from awm.config import load_settings

        db = load_settings().memory_db
    return WorkflowStore(db, mode=mode)


def style_for_scope(scope: str) -> Literal["mind2web", "webarena"]:
    """Mind2Web scopes render in AWM's Mind2Web format; every browser scope in the WebArena format."""
    return "mind2web" if scope.lower().startswith("mind2web") else "webarena"


def _check_style(style: str) -> None:
    """Checked here, not by Typer, so a wrong --style is one clear line and exit 2 like every AwmError."""
    if style not in STYLES:
        raise AwmError(f"--style must be auto, mind2web or webarena, got {style!r}")


def _writing_style(style: str, scope: str) -> Literal["mind2web", "webarena"]:
    """The style to render a scope in: the one asked for, or with auto the scope's own."""
    _check_style(style)
    return style_for_scope(scope) if style == "auto" else style  # type: ignore[return-value]


def _echo_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


@app.command("scopes")
def scopes_command(json_out: JsonOption = False, db: DbOption = None):
    """List the scopes that have memory, with their head version and size.

    Example: awm memory scopes --json
    """
    with _open(db, "ro") as store:
        rows = []
        for scope in store.scopes():
            info = store.log(scope)
            head = store.head_version(scope)
            current = next(v for v in info if v.version == head)
            rows.append(
                {"scope": scope, "head": head, "n_workflows": current.n_workflows, "versions": len(info)}
            )
    if json_out:
        _echo_json(rows)
        return
    if not rows:
        typer.echo("no memory scopes yet")
    for row in rows:
        typer.echo(
            f"{row['scope']}\tversion {row['head']}\t{row['n_workflows']} workflows\t{row['versions']} versions"
        )


@app.command("log")
def log_command(scope: ScopeArgument, json_out: JsonOption = False, db: DbOption = None):
    """Show every version of a scope, oldest first; the head is marked with *.

    Example: awm memory log miniwob/login-user --json
    """
    with _open(db, "ro") as store:
        head = store.require_head(scope)
        versions = store.log(scope)
    if json_out:
        _echo_json(
            [
                {
                    "version": v.version,
                    "parent": v.parent,
                    "author": v.author,
                    "created_at": v.created_at,
                    "n_workflows": v.n_workflows,
                    "message": v.message,
                }
                for v in versions
            ]
        )
        return
    for v in versions:
        mark = "*" if v.version == head else " "
        parent = "-" if v.parent is None else v.parent
        message = f"\t{v.message}" if v.message else ""
        typer.echo(
            f"{mark} {v.version}\tparent {parent}\t{v.author}\t{v.created_at}\t{v.n_workflows} workflows{message}"
        )


@app.command("show")
def show_command(
    scope: ScopeArgument,
    version: Annotated[
        int | None, typer.Option("--version", help="Version to show (default: the head).")
    ] = None,
    json_out: JsonOption = False,
    style: StyleOption = "auto",
    db: DbOption = None,
):
    """Print a version's workflows as AWM text or, with --json, as JSON.

    Example: awm memory show mind2web/aa --version 3 --json
    """
    from awm.memory.composition import call_graph
    from awm.memory.health import health

    chosen = _writing_style(style, scope)
    with _open(db, "ro") as store:
        number = version if version is not None else store.require_head(scope)
        snapshot = store.get(scope, number)
        records = health(store.uses(scope))
    if json_out:
        _echo_json(
            {
                "scope": scope,
                "version": snapshot.version,
                "workflows": [w.model_dump(mode="json", exclude={"provenance"}) for w in snapshot.workflows],
                "calls": {name: r.model_dump(exclude={"recent"}) for name, r in records.items()},
                "call_graph": call_graph(snapshot.workflows),
            }
        )
        return
    typer.echo(f"# {scope} version {snapshot.version} ({snapshot.author}, {snapshot.created_at})")
    typer.echo("")
    typer.echo(render_workflows(snapshot.workflows, chosen), nl=False)
    graph = call_graph(snapshot.workflows)
    if graph:
        typer.echo("")
        typer.echo("# workflows built on workflows (caller -> the workflows it calls)")
        for caller, names in graph.items():
            typer.echo(f"{caller!r} -> {', '.join(repr(n) for n in names)}")  # names hold commas
    if records:
        typer.echo("")
        typer.echo("# calls (every version of the scope, as run_workflow)")
        for name, r in records.items():
            last = f"; last break: {r.last_break}" if r.last_break else ""
            typer.echo(f"{name}: {r.calls} call(s), {r.completions} ran to the end, {r.breaks} broke{last}")


@app.command("diff")
def diff_command(
    scope: ScopeArgument,
    a: Annotated[int, typer.Argument(help="The older version.")],
    b: Annotated[int, typer.Argument(help="The newer version.")],
    db: DbOption = None,
):
    """Show workflows added (+), removed (-) and changed (~) from version A to version B.

    Example: awm memory diff miniwob/login-user 2 5
    """
    with _open(db, "ro") as store:
        typer.echo(store.diff(scope, a, b).render(), nl=False)


@app.command("rollback")
def rollback_command(
    scope: ScopeArgument,
    version: Annotated[int, typer.Argument(help="The version whose workflows become the head.")],
    db: DbOption = None,
):
    """Make version N's workflows the head again (recorded as a new version; nothing is deleted).

    Example: awm memory rollback miniwob/login-user 3
    """
    with _open(db, "rw") as store:
        store.require_head(scope)
        new = store.rollback(scope, version)
    typer.echo(f"{scope}: version {new.version} (content of version {version}, parent {new.parent})")


def _scope_file(folder: Path, scope: str) -> Path:
    parts = [p for p in scope.split("/") if p]
    if not parts or any(p in (".", "..") or "\\" in p for p in parts):
        raise AwmError(f"scope {scope!r} cannot be used as a file name under {folder}")
    return folder.joinpath(*parts[:-1], parts[-1] + ".txt")


@app.command("export")
def export_command(
    scope: ScopeArgument,
    folder: Annotated[
        Path | None, typer.Argument(help="Output folder (default: the database's folder).", file_okay=False)
    ] = None,
    style: StyleOption = "auto",
    db: DbOption = None,
):
    """Write the head of a scope as a reviewable AWM text file (one file per scope, written atomically).

    The file re-imports with `awm memory import`. Scope a/b goes to FOLDER/a/b.txt.

    Example: awm memory export mind2web/aa workflows/
    """
    chosen = _writing_style(style, scope)
    with _open(db, "ro") as store:
        head = store.head(scope)
        if head is None:
            store.require_head(scope)
            return
        target_dir = folder if folder is not None else store.path.parent
    path = _scope_file(target_dir, scope)
    require_writable_folder(path.parent, f"FOLDER {target_dir}")
    write_text_atomic(path, render_workflows(head.workflows, chosen))
    typer.echo(f"{path}\t{scope} version {head.version}, {len(head.workflows)} workflows")


def merge_by_name(existing: list[Workflow], incoming: list[Workflow]) -> list[Workflow]:
    """Incoming workflows replace same-named ones in place; new names are appended in their order."""
    by_name = {w.name: w for w in incoming}
    merged = [by_name.pop(w.name, w) for w in existing]
    return merged + [w for w in incoming if w.name in by_name]


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="AWM workflow text file ('## name' headers).", dir_okay=False)],
    scope: Annotated[str, typer.Option("--scope", help="Memory scope to write to, e.g. mind2web/aa.")],
    style: StyleOption = "auto",
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace the scope's workflows instead of merging.")
    ] = False,
    db: DbOption = None,
):
    """Import an AWM workflow text file as a new version (author "import"), and say what was taken.

    Same-named workflows are replaced, new ones appended (or, with --replace, the file becomes the
    scope's whole content). AWM's own files are read as AWM meant them: a heading that only opens a
    section ('## Summary Workflows') is not a workflow, '## Concrete Examples' (recorded episodes) is
    skipped and counted, usage notes such as "click('id') # ..." are skipped, and an element id of the
    source page (click('227')) becomes a target read from the step's reasoning ('"My Account" link' ->
    [link] My Account), never an id. Unparseable text is rejected with its line number; memory is unchanged.

    Example: awm memory import my_workflows.txt --scope mind2web/aa --style mind2web
    """
    _check_style(style)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AwmError(f"{file}: no such workflow file") from None
    except UnicodeDecodeError:
        raise AwmError(f"{file}: not UTF-8 text") from None
    report = import_workflows(text, style, source=str(file))  # type: ignore[arg-type]
    if not report.workflows:
        skipped = "; ".join(report.lines()[1:])
        raise AwmError(f"{file}: holds no workflows (expected '## name' headers followed by actions){'; ' + skipped if skipped else ''}")
    incoming = [w.model_copy(update={"provenance": Provenance(mode="import")}) for w in report.workflows]
    with _open(db, "rwc") as store:
        new = store.update(
            scope,
            (lambda _old: list(incoming)) if replace else (lambda old: merge_by_name(old, incoming)),
            author="import",
            message=f"import {file.name} ({len(incoming)} workflows{', replace' if replace else ''})",
            provenance={"source": str(file)},
        )
    for line in report.lines():
        typer.echo(line)
    typer.echo(f"{scope}: version {new.version} ({len(new.workflows)} workflows, {len(incoming)} imported)")


if __name__ == "__main__":
    app()
