"""`awm serve`: start the live application on uvicorn (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from awm.errors import ConfigError


def is_loopback_bind(host: str) -> bool:
    """True for a bind address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_warning(host: str, port: int) -> str | None:
    """What `awm serve` prints before binding anything but loopback (None for loopback)."""
    if is_loopback_bind(host):
        return None
    return (
        f"warning: binding {host}: anyone who can reach port {port} can read every served run and start "
        "live runs from this machine"
    )


def served_folders(named: list[Path] | None, default: Path) -> list[Path]:
    """The folders to serve: each `--runs` folder, which must exist (a mistyped one would serve an empty
    dashboard without a word), or else the settings' runs folder, created on a first `awm serve` as a
    first `awm run` would. `ConfigError` (exit 2) names a folder that is missing or is a file."""
    for folder in named or []:
        if not folder.exists():
            raise ConfigError(f"--runs {folder}: no such folder (give a folder of run folders, e.g. --runs runs)")
        if not folder.is_dir():
            raise ConfigError(f"--runs {folder}: not a folder")
    if named:
        return list(named)
    if default.exists() and not default.is_dir():
        raise ConfigError(f"runs_dir {default}: not a folder")
    default.mkdir(parents=True, exist_ok=True)
    return [default]


def serve_command(
    runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--runs", metavar="DIR",
            help="A folder of run and ablation folders (it must exist); repeat for more. Default: settings.runs_dir "
            "(runs), created when missing.",
        ),
    ] = None,
    memory: Annotated[
        Path | None,
        typer.Option("--memory", metavar="DB", help="The memory database to browse (default: settings.memory_db).", dir_okay=False),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind; anything but loopback lets others start runs.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", metavar="HOST",
            help="A host live runs may reach past the address rules (a local fixture: 127.0.0.1), as in awm run.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML settings file live runs use (model, browser, rails).", dir_okay=False),
    ] = None,
) -> None:
    """Serve the runs dashboard, the episode viewer, the memory browser, ablation reports and live runs.

    Pages: / (runs, filter by status and text; an ablation's arms nested under it),
    /runs/RUN/episodes/EPISODE (each step with the page the agent saw, cropped, the element it acted on
    outlined; j/k step through), /compare?a=RUN&b=RUN (two runs per task and seed), /memory (scopes,
    version logs, /memory/scope/SCOPE/versions/N, diffs, rollback), /ablations/ABLATION, /live (a URL and a goal: the agent works on the page inside the rails while its
    steps stream in; sensitive actions wait for your approve/deny). Live runs are written under the
    first --runs folder, in live/, and are listed like any other run. At most 2 live runs execute at
    once. The JSON API the pages use is under /api; its lists also come as CSV (?format=csv).

    Example: awm serve --runs runs --port 8765

    Example: awm serve --runs /tmp/fixture-runs --allow-host 127.0.0.1
    """
    import uvicorn
    from rich.console import Console

    from awm.config import load_settings

    from .server import create_app
    from .web import AppSettings

    if config is not None and not config.is_file():
        raise ConfigError(f"--config {config}: no such file")
    settings = load_settings(config)
    folders = served_folders(runs, Path(settings.runs_dir))
    app_settings = AppSettings(
        runs=folders,
        memory_db=memory or settings.memory_db,
        live_dir=folders[0] / "live",
        allow_hosts=list(allow_host or []),
        config=config,
        allowed_hosts=["127.0.0.1", "localhost"] if is_loopback_bind(host) else ["*"],
    )
    console = Console(stderr=True)
    warning = bind_warning(host, port)
    if warning is not None:
        console.print(warning, style="bold yellow", markup=False)
    console.print(f"awm serve: http://{host}:{port}/  (runs: {', '.join(map(str, folders))})", markup=False)
    uvicorn.run(create_app(app_settings), host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
