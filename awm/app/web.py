"""What every page module shares: the application's settings and context, the templates, and `page()`.

A route gets the `AppContext` through `context(request)` (set on `app.state` by `create_app`), never
from a module global, so two applications (two tests) never share a catalog or a live-run table.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from .catalog import Catalog
from .pictures import PictureCache

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
    pictures: PictureCache = field(default_factory=PictureCache)  # step pictures already cropped
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


ListFormat = Literal["json", "csv"]
# `?format=csv` on a list endpoint; another value is a 400 naming the two (the app's validation handler).
FormatQuery = Annotated[ListFormat, Query(alias="format", description="json (the default) or csv")]


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A row as CSV cells: nested objects as dotted columns (`task.goal`, `counts.success`), lists as
    JSON text, None as an empty cell."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(value, ensure_ascii=False, default=str)
        else:
            out[name] = "" if value is None else value
    return out


# A text cell a spreadsheet would read as a formula: recorded text comes from pages, goals and model output,
# and `=HYPERLINK(...)` in a task's goal must stay text when a researcher opens the CSV (OWASP's advice).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: text that starts like a formula gets a leading apostrophe; numbers stay."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_text(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV (the stdlib writer): one line per row, the union of their columns in first-seen order,
    text that a spreadsheet would run as a formula guarded (`csv_cell`)."""
    flat = [{k: csv_cell(v) for k, v in _flat(r).items()} for r in rows]
    columns = list(dict.fromkeys(k for r in flat for k in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buffer.getvalue()


def list_response(rows: list[dict[str, Any]], fmt: ListFormat, name: str) -> Response:
    """A list endpoint's answer: the rows as JSON, or with `?format=csv` as a CSV file `name`.csv."""
    if fmt == "csv":
        disposition = f'attachment; filename="{quote(name, safe="")}.csv"'
        return Response(csv_text(rows), media_type="text/csv; charset=utf-8", headers={"Content-Disposition": disposition})
    return JSONResponse(rows)


def page(request: Request, name: str, *, status_code: int = 200, **data: Any) -> HTMLResponse:
    """Render a template with the request and the page's data."""
    return TEMPLATES.TemplateResponse(request, name, {"nav": name.split(".")[0], **data}, status_code=status_code)
