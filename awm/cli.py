"""The `awm` command. Each area owns a Typer sub-app in its own module; this file only mounts them.

User errors (`AwmError`) print one sentence and exit 2, without a traceback. Help is printed literally
(no Rich markup), so `[pipeline]` or `[[arm]]` in a help string reaches the reader as written.
"""

from __future__ import annotations

import sys

import typer

from awm.errors import AwmError

app = typer.Typer(
    name="awm",
    help="Agent Workflow Memory for web agents.\n\nExample: awm doctor",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # Plain help wraps at 80 columns by default, which breaks long "Example:" lines; a wide terminal may use 120.
    context_settings={"max_content_width": 120},
)


def _mount() -> None:
    """Mount every area's commands. Imports stay inside so `awm --help` does not load torch or Playwright."""
    from awm import demo, doctor
    from awm.actions.commands import app as actions_app
    from awm.app.export_cli import register as register_traces_export
    from awm.app.serve_cli import register as register_serve
    from awm.induction.commands import register as register_induce
    from awm.llm.commands import app as llm_app
    from awm.memory.commands import app as memory_app
    from awm.mind2web.commands import app as mind2web_app
    from awm.pipeline.ablate_cli import register as register_ablate
    from awm.pipeline.commands import app as pipeline_app
    from awm.pipeline.mind2web_run import register_run as register_mind2web_run
    from awm.pipeline.replay_cli import register as register_replay
    from awm.pipeline.run_cli import register as register_run
    from awm.pipeline.sites_check_cli import register as register_sites_check
    from awm.rails_cli import app as rails_app
    from awm.sites.commands import app as sites_app
    from awm.suite.commands import app as suite_app
    from awm.traces.commands import app as traces_app

    app.command("doctor")(doctor.doctor_command)
    app.command("demo")(demo.demo_command)
    register_run(app)
    register_induce(app)
    register_ablate(app)
    register_replay(app)
    register_serve(app)
    register_mind2web_run(mind2web_app)
    register_sites_check(sites_app)  # it drives the browser consumer: awm.sites may not import awm.webarena
    register_traces_export(traces_app)  # its --html renders the app's pages: traces may not import awm.app
    app.add_typer(mind2web_app, name="mind2web")
    app.add_typer(pipeline_app, name="pipeline")
    app.add_typer(memory_app, name="memory")
    app.add_typer(traces_app, name="traces")
    app.add_typer(suite_app, name="suite")
    app.add_typer(llm_app, name="llm")
    app.add_typer(actions_app, name="actions")
    app.add_typer(rails_app, name="rails")
    app.add_typer(sites_app, name="sites")
    show_help_literally(app)


def show_help_literally(typer_app: typer.Typer) -> None:
    """Turn off Rich markup for an app and every app mounted under it, so help text is shown as written.

    With Typer's default ("rich"), `a [pipeline] table` prints as `a  table`: Rich reads `[pipeline]` as a
    style tag. "markdown" keeps brackets but drops `<time>` in `runs/<time>-<name>` as HTML. Plain click
    help keeps both, and its paragraphs and "Example:" lines. `awm` passes its own mode down to every
    command it builds; the sub-apps get it too, for when one is run on its own (tests, `python -m`).
    """
    typer_app.rich_markup_mode = None
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            show_help_literally(group.typer_instance)


_mount()


def _is_usage_error(exc: Exception) -> bool:
    """Typer may bundle its own copy of click, so match click's exception class by either origin."""
    classes = []
    try:
        from typer._click.exceptions import ClickException as bundled

        classes.append(bundled)
    except ImportError:
        pass
    import click

    classes.append(click.ClickException)
    return isinstance(exc, tuple(classes))


def main() -> None:
    """Entry point: run the app, turning user errors into one line and exit code 2."""
    try:
        code = app(standalone_mode=False)  # click returns an Exit's code instead of raising it here
    except AwmError as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # usage errors (bad option, missing argument) arrive here in non-standalone mode
        if _is_usage_error(exc):
            exc.show()
            sys.exit(2)
        raise
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
