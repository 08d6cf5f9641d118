"""`awm rails`: ask the live-page rails about a URL from the terminal, without starting a browser.

Why a command: when a live run refuses its URL, one can see the same verdict and reason here, and try
which `--allow-host` would let a local fixture through.
"""

from __future__ import annotations

from typing import Annotated

import typer

from awm.rails import check_url

app = typer.Typer(
    help="The rails for live pages: check a URL before a browser opens it.\n\n"
    "Example: awm rails check https://shop.example.com/",
    no_args_is_help=True,
    add_completion=False,
)


@app.command("check")
def check_command(
    url: Annotated[str, typer.Argument(help="The URL a live run would open.")],
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="HOST",
            help="A host name or IP literal let through although the rails would refuse it "
            "(how tests reach 127.0.0.1); repeat for more.",
        ),
    ] = None,
) -> None:
    """Check URL (scheme, userinfo, host name, resolved addresses); print the verdict; exit 2 if refused.

    A host name is resolved with the system resolver; no browser starts and no page is fetched.

    Example: awm rails check http://127.0.0.1:8000/ --allow-host 127.0.0.1
    """
    verdict = check_url(url, allow_hosts=allow_host or ())
    if verdict.allowed:
        typer.echo(f"allowed: {url} ({verdict.reason})")
        return
    typer.echo(f"refused: {url}: {verdict.reason}")
    raise typer.Exit(2)
