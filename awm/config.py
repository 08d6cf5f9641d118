"""Typed settings: defaults < configs/*.toml < environment < CLI flags; a hash goes with every result.

Why one object: limits, endpoints and paths are read in one place, so a run's behaviour is fully
described by `Settings` and its `config_hash`. One TOML schema: `[llm]`, `[agent]`, `[browser]` and the
top-level `memory_db`/`runs_dir`/`home` are `Settings`; `[pipeline]` is the arm (`awm.pipeline.config`),
`[[arm]]` and the ablation keys are `awm ablate`'s, `[webarena]` names WebArena's sites, `[mind2web]` is
accepted and read by no command (Mind2Web ablations take their fields in `[pipeline]`, see
configs/mind2web-ablation.toml). Every other table refuses a key it does not know, naming the key and the
file: a misspelt `temprature` must not silently run at the default.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from awm.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent

Backend = Literal["auto", "local", "openai", "anthropic"]


def awm_home() -> Path:
    """Where set-up puts assets (model file, tiktoken cache, Playwright bridge): `$AWM_HOME` or `./.awm`."""
    env = os.environ.get("AWM_HOME")
    return Path(env).expanduser().resolve() if env else PROJECT_ROOT / ".awm"


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")

    prompt: float = 0.0
    completion: float = 0.0


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(prompt=2.5, completion=10.0),
    "gpt-4o-mini": Price(prompt=0.15, completion=0.6),
    "gpt-4.1": Price(prompt=2.0, completion=8.0),
    "gpt-4.1-mini": Price(prompt=0.4, completion=1.6),
    "claude-sonnet-4-5": Price(prompt=3.0, completion=15.0),
    "claude-haiku-4-5": Price(prompt=1.0, completion=5.0),
    "deepseek-chat": Price(prompt=0.27, completion=1.1),
}


class LLMSettings(BaseModel):
    """Which model to call and how hard to try. `local_slots` is how many requests the embedded llama.cpp
    server serves at once (the driver sets it to its worker count; each slot keeps the full context)."""

    model_config = ConfigDict(extra="forbid")

    # Which client answers: `local` (the embedded llama.cpp model), `openai` (any OpenAI-compatible
    # endpoint), `anthropic`; `auto`: `openai` when a base_url, OPENAI_BASE_URL or OPENAI_API_KEY is set,
    # else `anthropic` when ANTHROPIC_API_KEY is, else `local`. AWM_BACKEND overrides it.
    backend: Backend = "auto"
    # The model name sent to the endpoint. Unset: AWM_MODEL, else gpt-4o-mini (openai) or claude-haiku-4-5
    # (anthropic); an openai endpoint named by base_url needs one. The local backend ignores it (the
    # model is its file, local_model_path).
    model: str | None = None
    # The endpoint's URL (OpenAI-style, ending in /v1). Unset: OPENAI_BASE_URL or ANTHROPIC_BASE_URL,
    # else the provider's own API.
    base_url: str | None = None
    # The endpoint's key. Unset: OPENAI_API_KEY or ANTHROPIC_API_KEY; an endpoint on this machine needs
    # none. Left out of the run record and the config hash.
    api_key: str | None = Field(default=None, repr=False)
    # Sampling temperature of the agent's calls (the judge, induction and checks always ask at 0). Above
    # 0 an answer is never served from the response cache.
    temperature: float = 0.0
    # The most tokens an agent step may answer (and `awm llm chat`); the prompt is fitted into
    # `context_window` minus this. Mind2Web's default for `[pipeline] max_tokens`.
    max_tokens: int = 256
    # Seconds one request may take before it counts as failed and is retried. The local backend waits
    # 600 s unless this is set explicitly (a busy CPU can take minutes on a long cold prompt).
    timeout_s: float = 120.0
    # Attempts per model call, the first included: rate limits, 5xx answers, timeouts and dropped
    # connections are retried with jittered exponential backoff (`awm.llm.retry`); other errors are not.
    max_attempts: int = 6
    # Wall-clock bound, in seconds, on one model call with all its retries and waits; the backoff
    # shrinks with it.
    max_retry_seconds: float = 240.0
    # The model's context in tokens: each prompt is fitted into it (oldest history dropped first, then the
    # page cut, then workflows), and the embedded llama.cpp server gets this much context per slot.
    context_window: int = 8192
    # Serve repeated deterministic requests (temperature 0 or a seed) from the response cache,
    # HOME/cache/llm.sqlite, keyed by backend, server URL, model and request.
    cache: bool = True
    # US dollars per million prompt and completion tokens, by model name, for the cost in reports
    # (matched exactly, without a provider prefix, or as a dated snapshot's prefix; unknown models cost
    # 0). A table given here replaces this whole default.
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    # The GGUF file of the local backend. Unset: HOME/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    # (what `make setup` downloads and verifies).
    local_model_path: Path | None = None
    # CPU threads of the embedded llama.cpp server.
    local_threads: int = 2
    # Requests the embedded llama.cpp server answers at once, each slot with the whole context_window
    # (a run raises it to its worker count). How a run is scheduled, not its results: not hashed.
    local_slots: int = Field(default=1, ge=1)

    def resolved_backend(self) -> Literal["local", "openai", "anthropic"]:
        """`auto` means: a configured endpoint or key wins, else the embedded local model."""
        if self.backend != "auto":
            return self.backend
        if self.base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
            return "openai"
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "anthropic"
        return "local"


GuidanceMode = Literal["on", "off"]
# The agent's guidance filters, in the order they apply; each is defined, with the failure it came from,
# in `awm.webarena.guidance_filters` (a test holds its `FILTERS` to these names).
GUIDANCE_FILTERS = (
    "spent_choices",
    "undoing_clicks",
    "disabled_targets",
    "filled_not_clicked",
    "goal_waiting",
    "goal_note",
    "first_step_infeasible",
    "infeasible_after_reaction",
    "ending_before_composed_text",
    "sending_composed_text",
    "sending_typed_value",
    "no_page_to_go_back_to",
    "repeated_plain_actions",
    "completed_workflows",
    "refused_workflows",
    "broken_workflows",
    "unstartable_workflows",
    "parts_in_order",
)


class AgentSettings(BaseModel):
    """How the LLM web agent asks: constrained decoding (None: on for the local backend), the order of
    the prompt's parts (stable prefix first, for the prefix cache), role-aware id sets, and its guidance
    (the named filters of `awm.webarena.guidance_filters`: `guidance = "off"` switches them all off,
    `guidance_off` single ones)."""

    model_config = ConfigDict(extra="forbid")

    # Constrained decoding: a GBNF grammar admits only well-formed actions on ids the page has. Unset: on
    # for the local backend (llama.cpp reads GBNF), off for the others.
    use_grammar: bool | None = None
    # The order of the prompt's parts: `prefix` puts what changes least (instructions, memory, goal,
    # history) before the page, so llama.cpp's prefix cache reuses it; `page_first` puts the page first
    # (to measure what the order saves, scripts/bench_harness.py).
    prompt_order: Literal["prefix", "page_first"] = "prefix"
    # Each action takes only ids whose role fits it (fill: text fields, check: checkboxes...), in the
    # grammar and the guidance filters; off: any id of the page.
    role_aware: bool = True
    # Under a grammar, the answer names the element as the page lists it, then an action that fits it
    # (`awm.actions.target_first_grammar`). Off: measured on the first 22 episodes of the development
    # split it solved 4 where the default solved 9, at 25 s per episode instead of 9 (the model named the
    # element it had just acted on again and went through its actions: choose-list 3/3 -> 0/3).
    target_first: bool = False
    # A thought line before the action. Off: asked for one, the 1.5B model writes its whole plan there
    # (`fill[19], press[20]`) and then copies the plan's first step, already done, as its action; under
    # the grammar that comes out as noise (login-user and enter-password 0/6, focus and scroll until the
    # step limit). Asked for the action alone, it clicks Login (see the README's development split).
    # With workflows to call in memory the agent asks for the thought format all the same: asked for the
    # action alone, the model typed the workflow's steps itself instead of calling it.
    thought: bool = False
    # Guidance off: the grammar holds back nothing the action set (and `role_aware`) admits, and the prompt
    # carries no note on the goal's state. Both change results, so both are in the config hash.
    guidance: GuidanceMode = "on"
    # Single guidance filters to switch off, by name (GUIDANCE_FILTERS; an unknown name is an error).
    guidance_off: list[str] = Field(default_factory=list)
    # Where the agent ends the task itself and the goal is a question, a short separate question on each
    # new page that names its subject: the answer on this page (`awm.webarena.answer_check`, which says
    # what it was measured on). Off: the agent prompt alone decides when to answer.
    answer_check: bool = True

    @field_validator("guidance_off")
    @classmethod
    def _known_filters(cls, names: list[str]) -> list[str]:
        unknown = [name for name in names if name not in GUIDANCE_FILTERS]
        if unknown:
            raise ValueError(f"unknown filter '{unknown[0]}' (known filters: {', '.join(GUIDANCE_FILTERS)})")
        return names


# Hard ceilings of a live run (`awm run --url`, the live page): the `[browser.rails]` settings may lower
# them, nothing a user types raises them.
LIVE_MAX_STEPS = 50
LIVE_MAX_SECONDS = 1800.0
# Identity numbers; an email, phone or address field is ordinary form work (add its term to ask about it).
DEFAULT_SENSITIVE_FIELDS = ("ssn", "passport", "iban")
# What a control does when its own text says it: paying, buying, ordering, deleting, sending or publishing
# to others, moving money, closing an account.
DEFAULT_SENSITIVE_CLICKS = (
    "buy", "pay", "order", "purchase", "checkout", "delete", "remove", "send", "post", "publish", "transfer",
    "confirm", "deactivate",
)  # fmt: skip
ConfirmMode = Literal["deny", "terminal", "app"]


class RailsSettings(BaseModel):
    """The rails of live runs on user-named pages (DESIGN.md section 9); benchmark tasks do not use them.

    `allow_hosts` names hosts let through the address rules (how tests reach 127.0.0.1); nothing else
    relaxes the rails. `confirm` says who answers the confirmation gate: `deny` (no person: every
    sensitive action is refused and the model told so), `terminal` (y/n on the terminal, default no,
    `confirm_timeout_s` without an answer denies) or `app` (asked through files in `confirm_dir`, which
    `awm serve`'s live page shows as approve/deny buttons; the same timeout denies). `max_steps`/`max_seconds` are the live run's budgets,
    at most LIVE_MAX_STEPS / LIVE_MAX_SECONDS; `--max-steps` may lower the step budget, never raise it.
    A password field is refused unless `secrets` names the value to type (a placeholder the model writes).
    """

    model_config = ConfigDict(extra="forbid")

    # Hosts (names or IP literals) let through although the address rules would refuse them (a local
    # name, a private address: how tests reach 127.0.0.1); the scheme and userinfo rules still hold.
    # `awm run --allow-host` adds to them.
    allow_hosts: list[str] = Field(default_factory=list)
    # Who answers the confirmation gate before a sensitive action: `deny` (nobody: refused, the model is
    # told), `terminal` (y/n on the terminal, default no) or `app` (`awm serve`'s live page, through
    # files in confirm_dir).
    confirm: ConfirmMode = "deny"
    # Seconds the gate waits for a person's answer; no answer denies the action.
    confirm_timeout_s: float = Field(default=60.0, gt=0, le=600)
    # Terms that make a field sensitive: filling a field whose label, name, placeholder, aria-label or id
    # holds one asks the gate first.
    sensitive_fields: list[str] = Field(default_factory=lambda: list(DEFAULT_SENSITIVE_FIELDS))
    # Words that make a click sensitive: clicking a control whose text or label says one, or submitting a
    # form that does (Enter included), asks the gate first; checkboxes and radio buttons never do.
    sensitive_clicks: list[str] = Field(default_factory=lambda: list(DEFAULT_SENSITIVE_CLICKS))
    # A live episode's step budget, at most LIVE_MAX_STEPS; `--max-steps` may lower it, never raise it.
    max_steps: int = Field(default=15, ge=1, le=LIVE_MAX_STEPS)
    # A live episode's wall-clock budget in seconds, at most LIVE_MAX_SECONDS; the episode ends at the
    # lower of it and `[pipeline] episode_timeout_s`.
    max_seconds: float = Field(default=600.0, gt=0, le=LIVE_MAX_SECONDS)
    confirm_dir: Path | None = None  # where a gate saves what it shows, and the app gate's questions (RUN/confirm)
    # Secrets the agent may type into a password field: name -> the environment variable holding its value
    # (`awm run --url ... --secret password=SHOP_PASSWORD`). The model writes `{password}`; the value is
    # read from the environment when the episode starts and never recorded (`awm.secrets`).
    secrets: dict[str, str] = Field(default_factory=dict)


class BrowserSettings(BaseModel):
    """Browser settings of a worker. `pre_observation_delay` trades speed for settled pages (0.35 s still
    solves book-flight; 0.1 s breaks autocomplete tasks). `viewport=None` keeps each task's own size;
    `slow_mo_ms=None` keeps the task's own Playwright slow-down (MiniWoB 100 ms, open-ended pages 1 s).
    The episode's time limit is the harness's (`[pipeline] episode_timeout_s`), not a browser setting."""

    model_config = ConfigDict(extra="forbid")

    # Chromium without a window (`--headed` shows it). Not hashed.
    headless: bool = True
    # Seconds waited after an action before the page is observed.
    pre_observation_delay: float = 0.5
    # Playwright's timeout for one browser action (a click, a fill), in milliseconds.
    action_timeout_ms: int = 3000
    # The page's size in pixels, [width, height]; unset: each task's own.
    viewport: tuple[int, int] | None = (1280, 720)
    # Save each step's screenshot, RUN/screenshots/<episode>/<step>.png (what `awm serve` shows). Not hashed.
    screenshots: bool = True
    pages: bool = True  # each step's page as HTML, RUN/pages/ (what `awm traces export --mind2web` reads)
    # Tokens the page observation may take (estimated from its characters); past it, off-screen text,
    # then off-screen elements, then on-screen text are left out. 0: no limit.
    obs_token_budget: int = 2000
    obs_prune: bool = True  # leave a page footer's words out of the observation (`observation.BOILERPLATE_ROLES`)
    # Playwright's slow-down after each browser operation, in milliseconds; unset: the task's own. Not hashed.
    slow_mo_ms: int | None = None
    call_timeout_s: float = 60.0  # watchdog: a reset/step/observe that takes longer kills the browser
    rails: RailsSettings = Field(default_factory=RailsSettings)


# Settings fields that change how a run is watched or scheduled, never its results.
NOT_RESULTS: dict[str, Any] = {
    "home": True,
    "runs_dir": True,
    "llm": {"api_key", "local_slots"},
    "browser": {
        "headless": True,
        "slow_mo_ms": True,
        "screenshots": True,
        "pages": True,
        "rails": {"confirm_dir"},
    },
}

# Top-level keys of a config file that belong to other readers (see the module docstring).
OTHER_TABLES = frozenset(
    {
        "pipeline",
        "arm",
        "repeats",
        "budget_matched",
        "budget_max_scale",
        "budget_memory_arm",
        "budget_off_arm",
        "webarena",
        "mind2web",
    }
)


class Settings(BaseModel):
    """Everything a run depends on."""

    model_config = ConfigDict(extra="forbid")

    llm: LLMSettings = Field(default_factory=LLMSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    home: Path = Field(default_factory=awm_home)
    # The workflow memory database (SQLite) that `memory = "fixed"` arms, `awm run --memory`, `awm memory`
    # and `awm serve` read; online and offline arms keep their own in the run folder. AWM_MEMORY_DB
    # overrides it.
    memory_db: Path = PROJECT_ROOT / "workflows" / "memory.sqlite"
    # Where a command puts a new run or ablation folder when no `--out` is given (RUNS_DIR/<time>-<name>),
    # and what `awm serve` lists by default.
    runs_dir: Path = Path("runs")

    @property
    def cache_db(self) -> Path:
        return self.home / "cache" / "llm.sqlite"

    @property
    def model_file(self) -> Path:
        return self.llm.local_model_path or (self.home / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        elif value is not None:
            out[key] = value
    return out


def _env_overrides() -> dict[str, Any]:
    llm: dict[str, Any] = {}
    if os.environ.get("AWM_BACKEND"):
        llm["backend"] = os.environ["AWM_BACKEND"]
    if os.environ.get("AWM_MODEL"):
        llm["model"] = os.environ["AWM_MODEL"]
    if os.environ.get("AWM_MEMORY_DB"):
        return {"llm": llm, "memory_db": os.environ["AWM_MEMORY_DB"]}
    return {"llm": llm}


def load_settings(config_path: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Build settings from a TOML file, the environment and explicit overrides (highest wins)."""
    data: dict[str, Any] = {}
    if config_path is not None:
        try:
            data = tomllib.loads(Path(config_path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {config_path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {config_path} is not valid TOML: {exc}") from None
    source = f" in {config_path}" if config_path else ""
    unknown = sorted(set(data) - set(Settings.model_fields) - OTHER_TABLES)
    if unknown:
        known = ", ".join(sorted({*Settings.model_fields, *OTHER_TABLES}))
        raise ConfigError(f"unknown key '{unknown[0]}'{source} (known top-level keys and tables: {known})")
    data = {k: v for k, v in data.items() if k not in OTHER_TABLES}
    data = _deep_merge(data, _env_overrides())
    data = _deep_merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"unknown key '{where}'{source}: no such setting") from None
        message = first["msg"].removeprefix("Value error, ")  # a validator's own words
        raise ConfigError(f"setting '{where}'{source}: {message} (got {first.get('input')!r})") from None


def config_hash(settings: Settings) -> str:
    """A short, stable hash of everything that changes results (secrets, paths, how a run is watched
    and how many requests the local server takes at once excluded)."""
    payload = settings.model_dump(mode="json", exclude=NOT_RESULTS)
    # Settings added after runs were made are left out at their default (what those runs did), so a
    # run folder made before them still resumes: the guidance filters on, none switched off.
    agent = payload.get("agent", {})
    if agent.get("guidance") == "on":
        agent.pop("guidance")
    if not agent.get("guidance_off", True):
        agent.pop("guidance_off")
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
