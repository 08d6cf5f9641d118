"""What every page module shares: the application's settings and context, the templates, and `page()`.

A route gets the `AppContext` through `context(request)` (set on `app.state` by `create_app`), never
from a module global, so two applications (two tests) never share a catalog or a live-run table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from .catalog import Catalog

PACKAGE_DIR = Path(__file__).parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"
STATIC_DIR = PACKAGE_DIR / "static"
LIVE_MAX_CONCURRENT = 2
STREAM_IDLE_S = 180.0


class AppSettings(BaseModel):
    """What `awm serve` was started with."""

    runs: list[Path]
    memory_db: Path | None = None
    live_dir: Path  # where live runs write their run folders (inside the first served folder)
    allow_hosts: list[str] = Field(default_factory=list)
    config: Path | None = None  # the settings file live runs are started with (`awm run --config`)
    max_live: int = LIVE_MAX_CONCURRENT
    stream_idle_s: float = STREAM_IDLE_S
    confirm_timeout_s: float | None = None  # the gate's wait for a person; None: `[browser.rails]`'s
    # Host headers answered: on loopback only the loopback names, so a page elsewhere that rebinds its
    # own name to 127.0.0.1 (DNS rebinding) cannot read runs or start live runs; ["*"] when bound wider.
    allowed_hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1", "localhost"])


@dataclass
class AppContext:
    settings: AppSettings
    catalog: Catalog
    live: Any = None  # awm.app.live.LiveRuns (typed loosely: live imports this module)
    extra: dict[str, Any] = field(default_factory=dict)


def context(request: Request) -> AppContext:
    return request.app.state.ctx


def _q(value: object) -> str:
    """One URL path segment (episode ids hold `#`)."""
    return quote(str(value), safe="")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _tojson_pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    templates.env.filters.update(q=_q, pct=_pct, pretty=_tojson_pretty)
    return templates


TEMPLATES = make_templates()


def page(request: Request, name: str, *, status_code: int = 200, **data: Any) -> HTMLResponse:
    """Render a template with the request and the page's data."""
    return TEMPLATES.TemplateResponse(request, name, {"nav": name.split(".")[0], **data}, status_code=status_code)
