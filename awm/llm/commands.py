"""`awm llm`: talk to the configured model from the shell, and serve the embedded model to other tools.

Mounted by `awm.cli` as the `llm` sub-app. Configuration problems raise `AwmError` subclasses, which
`awm.cli.main` prints as one sentence with exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from awm.config import load_settings
from awm.errors import ConfigError
from awm.llm.base import ChatRequest, ChatResult

app = typer.Typer(
    help='Call the configured LLM, or serve the embedded local model.\n\nExample: awm llm chat "Say hello"',
    no_args_is_help=True,
    add_completion=False,
)

BACKEND_CHOICES = ("auto", "local", "openai", "anthropic")

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False)
]


def usage_line(result: ChatResult) -> str:
    """One line for the terminal: tokens, cost, seconds, cache hit, attempts."""
    usage = result.usage
    return (
        f"[{result.backend}:{result.model}] tokens {usage.prompt_tokens} prompt + {usage.completion_tokens} completion"
        f" | cost ${usage.cost_usd:.6f} | {result.seconds:.2f} s | cached {'yes' if result.cached else 'no'}"
        f" | attempts {result.attempts}"
        + (f" | stripped {' '.join(result.stripped_tokens)}" if result.stripped_tokens else "")
    )


@app.command("chat")
def chat_command(
    text: Annotated[str, typer.Argument(help="The user message.")],
    backend: Annotated[
        str | None, typer.Option(help="local | openai | anthropic (default: from settings).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name (default: from settings or AWM_MODEL).")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Reply length limit in tokens.")] = None,
    system: Annotated[str | None, typer.Option(help="An optional system message.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Skip the on-disk response cache.")] = False,
    config: ConfigOption = None,
) -> None:
    """Send one message and print the reply, then a usage line (tokens, cost, seconds, cached).

    Example: awm llm chat --backend local --max-tokens 32 "Name three HTML form elements."
    """
    if backend is not None and backend not in BACKEND_CHOICES:
        raise ConfigError(f"unknown LLM backend '{backend}'; expected one of: {', '.join(BACKEND_CHOICES)}")
    llm: dict[str, Any] = {"backend": backend, "model": model, "max_tokens": max_tokens}
    if no_cache:
        llm["cache"] = False
    settings = load_settings(config, overrides={"llm": llm})
    from awm.llm.factory import make_client

    client = make_client(settings)
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": text}
    ]
    result = client.chat(
        ChatRequest(
            messages=messages,
            temperature=settings.llm.temperature,
            max_tokens=settings.llm.max_tokens,
            purpose="other",
        )
    )
    typer.echo(result.text)
    typer.echo(usage_line(result))


@app.command("serve")
def serve_command(
    port: Annotated[int | None, typer.Option(help="Port on 127.0.0.1 (default: any free port).")] = None,
    config: ConfigOption = None,
) -> None:
    """Run the embedded llama.cpp server in the foreground and print its OpenAI-compatible URL; Ctrl-C stops it.

    Example: awm llm serve --port 8080   # then: OPENAI_BASE_URL=http://127.0.0.1:8080/v1
    """
    from awm.assets import verify_model_file
    from awm.llm.local_server import ensure_local_server, wait_for_server

    settings = load_settings(config)
    verify_model_file(settings.model_file)
    base_url = ensure_local_server(
        settings.model_file,
        n_ctx=settings.llm.context_window,
        threads=settings.llm.local_threads,
        log_dir=settings.home / "logs",
        port=port,
    )
    typer.echo(f"serving {settings.model_file.stem} at {base_url} (Ctrl-C to stop)")
    code = wait_for_server(base_url)
    if code:
        raise typer.Exit(code)
