"""One arm of an experiment: the `[pipeline]` table of a TOML file, validated, plus the shared settings.

Why a model of its own: an arm is fully described by this object and `Settings`, both are stored in
the run database, and `awm pipeline resume RUN_DIR` rebuilds the run from them alone. Unknown keys are
errors (a misspelt `induce_evry` must not silently fall back to the default).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from awm.config import Settings, load_settings
from awm.errors import ConfigError

MemoryKind = Literal["off", "online", "offline", "fixed"]
PIPELINE_TABLE = "pipeline"


class PipelineConfig(BaseModel):
    """One arm: which tasks, which policy, how memory is built and read, how episodes are judged.

    `memory`: ``off`` (solve + evaluate only), ``online`` (induce while solving: after every
    `induce_every` tasks of a scope, admit, induce and commit; the next task of the scope sees the new
    version), ``offline`` (induce once from `offline_from`, freeze, then solve read-only), ``fixed``
    (read an existing memory database, `Settings.memory_db`, without writing it). `memory_scope` makes
    every task read that one scope instead of its own (``fixed`` only: `awm run --memory SCOPE`).
    `workflows`: ``text`` shows workflows in the prompt; ``executable`` also offers each runnable one
    as a `run_workflow` action. `scope`: ``task`` reads the task's own scope; ``benchmark`` reads every
    scope of the benchmark (top-k by goal), while commits still go to the task's own scope. `verify`:
    ``replay`` commits a new workflow only after it re-ran on its source task and succeeded.

    `workers` episodes run at once (local processes or Ray, one browser each): memory-off, fixed and
    offline arms fan out fully; online arms run scopes in parallel and each scope's stream in order.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "pipeline"
    benchmark: Literal["miniwob", "webarena", "browsergym", "live"] = "miniwob"
    tasks: list[str] = Field(min_length=1)  # task names; for `live`, the URLs of the pages
    goal: str = ""  # `live` only: what the agent should do on each page
    seeds: list[int] | None = None  # None: the benchmark's default (0 for MiniWoB, none for WebArena)
    max_steps: int = Field(default=10, ge=1)
    policy: Literal["llm", "scripted"] = "llm"
    memory: MemoryKind = "online"
    memory_scope: str | None = None
    induction: Literal["rule", "neural"] = "rule"
    admission: Literal["gt", "judge", "both", "any"] = "gt"
    judge: bool = False
    induce_every: int = Field(default=1, ge=1)
    memory_mode: Literal["all", "topk"] = "all"
    k: int = Field(default=3, ge=1)
    workflows: Literal["text", "executable"] = "text"
    scope: Literal["task", "benchmark"] = "task"
    verify: Literal["replay", "off"] = "replay"
    offline_from: list[Path] = Field(default_factory=list)
    workers: int = Field(default=1, ge=1)
    parallel_backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    episode_timeout_s: float = Field(default=300, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        if self.admission in ("judge", "both") and not self.judge:
            raise ValueError(f"admission '{self.admission}' needs judge = true (the judge's label is read)")
        if self.memory == "offline" and not self.offline_from:
            raise ValueError("memory 'offline' needs offline_from = [run folders or trajectory files]")
        if self.seeds is not None and not self.seeds:
            raise ValueError("seeds is empty; give e.g. [0, 1]")
        if (self.benchmark == "live") != bool(self.goal.strip()):
            raise ValueError("benchmark 'live' (pages named by URL) needs a goal, and only it takes one")
        if self.memory_scope is not None and self.memory != "fixed":
            raise ValueError("memory_scope reads one existing scope: it needs memory = 'fixed'")
        return self

    def result_fields(self) -> dict[str, Any]:
        """What changes each episode's result (the run's config hash): not the name, the worker count or
        the backend, and not the task list, so a run folder may be resumed with more tasks or seeds."""
        return self.model_dump(
            mode="json", exclude={"name", "tasks", "seeds", "workers", "parallel_backend", "ray_address"}
        )


def _field_error(exc: ValidationError, source: str) -> ConfigError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(table)"
    if first["type"] == "extra_forbidden":
        return ConfigError(f"{source}: unknown key '{where}' (known keys: {', '.join(PipelineConfig.model_fields)})")
    message = str(first["msg"]).removeprefix("Value error, ")
    got = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], dict) else ""
    return ConfigError(f"{source}: field '{where}': {message}{got}")


def parse_pipeline_table(
    table: dict[str, Any], *, source: str = "[pipeline]", base_dir: Path | None = None
) -> PipelineConfig:
    """Validate a `[pipeline]` table (pure apart from making `offline_from` paths absolute).

    Relative `offline_from` paths are taken from `base_dir` (default: the working directory), and
    stored absolute, so a resumed run finds them from anywhere.
    """
    try:
        config = PipelineConfig.model_validate(table)
    except ValidationError as exc:
        raise _field_error(exc, source) from None
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    config.offline_from = [p if p.is_absolute() else (base / p).resolve() for p in config.offline_from]
    return config


def load_pipeline_config(
    path: Path | None, overrides: dict[str, Any] | None = None
) -> tuple[PipelineConfig, Settings]:
    """Read an arm from a TOML file: `[pipeline]` for the arm, the rest (`[llm]`...) for `Settings`.

    `overrides` holds `[pipeline]` fields to replace (e.g. ``{"memory": "off"}``) and, under the key
    ``"settings"``, a dict merged into the settings (e.g. ``{"llm": {"model": "x"}}``). Errors name
    the file and the field.
    """
    overrides = dict(overrides or {})
    settings_overrides = overrides.pop("settings", None)
    table: dict[str, Any] = {}
    source = "[pipeline]"
    if path is not None:
        source = f"{path} [{PIPELINE_TABLE}]"
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        raw = data.get(PIPELINE_TABLE, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {path}: [{PIPELINE_TABLE}] must be a table")
        table = dict(raw)
    settings = load_settings(path, overrides=settings_overrides)  # first: it names unknown tables
    table.update({k: v for k, v in overrides.items() if v is not None})
    config = parse_pipeline_table(table, source=source)
    return config, settings
