"""One arm of an experiment: the `[pipeline]` table of a TOML file, validated, plus the shared settings.

Why a model of its own: an arm is fully described by this object and `Settings`, both are stored in
the run database, and `awm pipeline resume RUN_DIR` rebuilds the run from them alone. Unknown keys are
errors (a misspelt `induce_evry` must not silently fall back to the default).

`benchmark = "mind2web"` is the offline Mind2Web consumer (`awm.pipeline.mind2web_run`), which `awm
ablate` drives: its tasks are a split's annotated tasks (`data`, `split`, `websites`, `limit`), its
fields (`MIND2WEB_FIELDS`) belong to no other benchmark, and the browser-episode fields
(`NOT_MIND2WEB_FIELDS`) do not apply to it; setting either on the wrong benchmark is an error naming
the field, so nothing is silently ignored.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from awm.config import Settings, load_settings
from awm.errors import ConfigError

MemoryKind = Literal["off", "online", "offline", "fixed"]
PIPELINE_TABLE = "pipeline"
MIND2WEB = "mind2web"
MIND2WEB_DATA_HELP = (
    "download Mind2Web from https://huggingface.co/datasets/osunlp/Mind2Web (train/ and the test "
    "splits, unzipped: test_task/, test_website/, test_domain/) into a local folder and set data to it"
)
# Fields of the Mind2Web benchmark only (what `awm.pipeline.mind2web_run.RunOptions` takes).
MIND2WEB_FIELDS = (
    "data", "split", "websites", "limit", "ranker", "scores", "top_k", "page_format", "exemplars",
    "exemplar_seed", "max_tokens",
)  # fmt: skip
# Fields of browser episodes that mean nothing to Mind2Web (teacher forcing, one prediction per annotated
# step, memory per website induced by the run itself), each with why.
NOT_MIND2WEB_FIELDS = {
    "tasks": "its tasks are the split's annotated tasks: choose them with split, websites and limit",
    "goal": "every task carries its own annotated goal",
    "seeds": "its tasks are fixed annotations, not seeded pages",
    "max_steps": "each task has its annotated steps, one prediction per step (teacher forcing)",
    "policy": "it is always solved by the model",
    "memory_scope": "each website reads its own scope, mind2web/<website>",
    "admission": "offline memory admits the gold train tasks, online memory every answer (no verdict)",
    "judge": "there is no judge: the metrics compare with the annotation",
    "induce_every": "online memory is induced after every task",
    "memory_mode": "a task sees its website's whole memory, as in AWM",
    "k": "a task sees its website's whole memory, as in AWM",
    "workflows": "workflows are shown as text",
    "scope": "each website reads its own scope, mind2web/<website>",
    "verify": "there is no page to replay on",
    "retire_window": "there is no workflow to call: workflows are shown as text",
    "parts": "a Mind2Web task is one page per step: there are no pages to split a procedure at",
    "offline_from": "offline memory is induced from the train split of data",
    "workers": "its tasks run one after another",
    "parallel_backend": "its tasks run one after another",
    "ray_address": "its tasks run one after another",
    "episode_timeout_s": "there are no browser episodes",
    "task_files": "task files hold arena templates (benchmark 'sites')",
}


class PipelineConfig(BaseModel):
    """One arm: which tasks, which policy, how memory is built and read, how episodes are judged.

    `memory`: ``off`` (solve + evaluate only), ``online`` (induce while solving: after every
    `induce_every` tasks of a scope, admit, induce and commit; the next task of the scope sees the new
    version; with `offline_from`, induced from it first: offline then online), ``offline`` (induce once
    from `offline_from`, freeze, then solve read-only), ``fixed`` (read an existing memory database,
    `Settings.memory_db`, without writing it); `offline_from` is unused with ``off`` and ``fixed``, so
    an ablation's base may hold it for its memory arms. `memory_scope` makes
    every task read that one scope instead of its own (``fixed`` only: `awm run --memory SCOPE`).
    `workflows`: ``text`` shows workflows in the prompt; ``executable`` also offers each runnable one
    as a `run_workflow` action. `scope`: ``task`` reads the task's own scope; ``site`` (the arena) reads
    the other templates of the task's site (top-k by goal: what the site taught elsewhere); ``benchmark``
    reads every scope of the benchmark (top-k by goal); commits always go to the task's own scope. `verify`:
    ``replay`` commits a new workflow only after it re-ran on its source task and succeeded.
    `parts`: rule induction also keeps each workflow's reusable parts, split where the pages say one
    procedure ended (a form submitted, the goal's item opened: `awm.induction.parts`), so a site-scope
    arm can serve a template from other templates' log-in and open-the-item parts.
    `retire_window`: an online arm keeps every `run_workflow` call in the memory and retires (a new
    version without it) a workflow whose breaks outnumber its completions over its last
    `retire_window` calls (`awm.memory.health`); 0 never retires.

    `workers` episodes run at once (local processes or Ray, one browser each): memory-off, fixed and
    offline arms fan out fully; online arms run scopes in parallel and each scope's stream in order.

    Mind2Web (`benchmark = "mind2web"`, offline, teacher-forced): `data` is the folder of the native
    JSON splits, `split` the test split, `websites` (default: all) and `limit` (the first N tasks of
    each website, else of the split) choose the tasks; `ranker` (``minilm`` or ``mindact`` with
    `scores`, default DATA/scores_all_data.pkl) and `top_k` choose the candidates shown per step,
    `page_format` how the page is shown (default: `awm mind2web run`'s),
    `exemplars` solved train steps (sampled with `exemplar_seed`) are shown as examples, and
    `max_tokens` caps each answer (default: `[llm] max_tokens`). `memory` is ``off``, ``offline``
    (each website's scope induced from the train split first) or ``online``; `induction` as above.
    """

    model_config = ConfigDict(extra="forbid")

    # The arm's name: its run folder is RUNS_DIR/<time>-<name> and its reports carry it (an ablation's arm
    # is <name>-<arm>). Not hashed.
    name: str = "pipeline"
    # Where tasks come from: `miniwob` (MiniWoB++ task names), `webarena` (task numbers; `[webarena]`
    # names the sites), `browsergym` (full ids such as browsergym/miniwob.click-test), `live` (page URLs,
    # with `goal`), `sites` (awm's arena templates), `mind2web` (offline, teacher-forced; see above).
    benchmark: Literal["miniwob", "webarena", "browsergym", "live", "sites", "mind2web"] = "miniwob"
    tasks: list[str] = Field(default_factory=list)  # task names; for `live`, the URLs; none for mind2web
    task_files: list[Path] = Field(default_factory=list)  # `sites` only: task files besides awm's own
    goal: str = ""  # `live` only: what the agent should do on each page
    seeds: list[int] | None = None  # None: the benchmark's default (0 for MiniWoB, none for WebArena)
    # The most actions one episode may take (a live run's `[browser.rails] max_steps` lowers it).
    max_steps: int = Field(default=10, ge=1)
    # Who acts: `llm` (the LLM agent of `[llm]` and `[agent]`) or `scripted` (replays known solutions: some
    # MiniWoB tasks, an arena template's demonstration; no model).
    policy: Literal["llm", "scripted"] = "llm"
    # How memory is built and read: `off`, `online`, `offline` or `fixed` (see above).
    memory: MemoryKind = "online"
    # One existing scope every task reads instead of its own (`memory = "fixed"` only; what `awm run
    # --memory SCOPE` sets). Unset: each task's own scope.
    memory_scope: str | None = None
    # How workflows are induced from admitted episodes: `rule` (from their steps, no model) or `neural`
    # (the induction model writes them).
    induction: Literal["rule", "neural"] = "rule"
    # Which episodes may teach memory: `gt` (full ground-truth reward), `judge` (the LLM judge says
    # success), `both` (the two) or `any` (either); `judge` and `both` need judge = true.
    admission: Literal["gt", "judge", "both", "any"] = "gt"
    # Ask the LLM judge for a verdict on every episode (recorded in the run); admission `judge`, `both` and
    # `any` read it.
    judge: bool = False
    # Online memory: admit, induce and commit after every N tasks of a scope.
    induce_every: int = Field(default=1, ge=1)
    # How a task's own scope is shown: `all` its workflows, or `topk` the k most similar to the goal
    # (scope `site` and `benchmark` are always top-k).
    memory_mode: Literal["all", "topk"] = "all"
    # Workflows shown when memory is read top-k.
    k: int = Field(default=3, ge=1)
    # `text`: workflows shown in the prompt; `executable`: also a `run_workflow` action for each runnable one.
    workflows: Literal["text", "executable"] = "text"
    # Which memory a task reads: `task` its own scope, `site` the other templates of its arena site,
    # `benchmark` every scope of its benchmark (see above); commits go to its own scope.
    scope: Literal["task", "site", "benchmark"] = "task"
    # `replay`: a new workflow is committed only after it re-ran on its source task and succeeded; `off`:
    # committed as induced.
    verify: Literal["replay", "off"] = "replay"
    # Online arms: retire a workflow whose breaks outnumber its completions over its last N
    # `run_workflow` calls; 0 never retires.
    retire_window: int = Field(default=4, ge=0)
    # Rule induction also keeps each workflow's reusable parts (a log-in, opening the goal's item), split
    # where the pages say a procedure ended.
    parts: bool = False
    # Run folders or trajectory files that `offline` memory is induced from (and `online` memory first);
    # relative paths are taken from the working directory.
    offline_from: list[Path] = Field(default_factory=list)
    # Episodes run at once, one browser each (the arena, benchmark `sites`, takes 1). Not hashed.
    workers: int = Field(default=1, ge=1)
    # Where workers run: `local` (processes on this machine) or `ray`. Not hashed.
    parallel_backend: Literal["local", "ray"] = "local"
    # The Ray cluster to join with parallel_backend = "ray"; unset: a small local Ray for the run. Not hashed.
    ray_address: str | None = None
    # Wall-clock limit of one episode in seconds; an episode past it ends as a timeout (a failure).
    episode_timeout_s: float = Field(default=300, gt=0)
    # Mind2Web only (MIND2WEB_FIELDS)
    data: Path | None = None  # the folder of the native JSON splits (train/, test_task/, ...)
    # The Mind2Web test split the tasks come from.
    split: Literal["test_task", "test_website", "test_domain"] = "test_task"
    websites: list[str] | None = None  # None: every website of the split
    limit: int | None = Field(default=None, ge=1)  # the first N tasks (of each website, if named)
    # How each step's candidate elements are ranked: `minilm` (MiniLM embeddings of the task against each
    # candidate; offline, untrained) or `mindact` (MindAct's published scores, `scores`).
    ranker: Literal["minilm", "mindact"] = "minilm"
    scores: Path | None = None  # MindAct score pickle (default DATA/scores_all_data.pkl)
    # Candidate elements shown per step: the ranker's top k.
    top_k: int = Field(default=10, ge=1)
    page_format: str | None = None  # `awm.mind2web.prompt.PAGE_FORMATS`; None: the run's default
    # Solved train steps shown in each prompt as examples; 0: none.
    exemplars: int = Field(default=0, ge=0)
    # Seed of the exemplar sample.
    exemplar_seed: int = 0
    max_tokens: int | None = Field(default=None, ge=1)  # answer tokens per step; None: [llm] max_tokens

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        if self.benchmark != MIND2WEB and not self.tasks:
            raise ValueError("tasks is empty: give at least one task name (for live, a page URL)")
        if self.benchmark == MIND2WEB:
            if self.memory == "fixed":
                raise ValueError(
                    "memory 'fixed' is not offered for mind2web: use off, offline (induced from the train "
                    "split) or online"
                )
            if self.websites is not None and not self.websites:
                raise ValueError("websites is empty; leave it out for every website, or name some")
            return self
        if self.admission in ("judge", "both") and not self.judge:
            raise ValueError(f"admission '{self.admission}' needs judge = true (the judge's label is read)")
        if self.memory == "offline" and not self.offline_from:
            raise ValueError("memory 'offline' needs offline_from = [run folders or trajectory files]")
        if self.seeds is not None and not self.seeds:
            raise ValueError("seeds is empty; give e.g. [0, 1]")
        if self.task_files and self.benchmark != "sites":
            raise ValueError("task_files hold arena templates: they need benchmark = 'sites'")
        if self.benchmark == "sites" and self.workers > 1:
            raise ValueError(
                "the arena runs one server per site and resets it before each episode: run its tasks with "
                "workers = 1"
            )
        if (self.benchmark == "live") != bool(self.goal.strip()):
            raise ValueError("benchmark 'live' (pages named by URL) needs a goal, and only it takes one")
        if self.memory_scope is not None and self.memory != "fixed":
            raise ValueError("memory_scope reads one existing scope: it needs memory = 'fixed'")
        if self.scope == "site" and self.benchmark != "sites":
            raise ValueError(
                "scope 'site' reads the other templates of an arena site: it needs benchmark = 'sites' "
                "(use 'task' or 'benchmark' elsewhere)"
            )
        return self

    def result_fields(self) -> dict[str, Any]:
        """What changes each episode's result (the run's config hash): not the name, the worker count or
        the backend, and not the task list, so a run folder may be resumed with more tasks or seeds.
        (The Mind2Web fields only for Mind2Web, so no other run's hash changed when they were added;
        likewise `parts` only when on: off is what every run did before it existed.)"""
        exclude = {"name", "tasks", "seeds", "workers", "parallel_backend", "ray_address"}
        if self.benchmark != MIND2WEB:
            exclude |= set(MIND2WEB_FIELDS)
        if not self.parts:
            exclude.add("parts")
        return self.model_dump(mode="json", exclude=exclude)


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

    Relative `offline_from` and `task_files` paths are taken from `base_dir` (default: the working directory), and
    stored absolute, so a resumed run finds them from anywhere.
    """
    _check_benchmark_fields(table, source)
    try:
        config = PipelineConfig.model_validate(table)
    except ValidationError as exc:
        raise _field_error(exc, source) from None
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    config.offline_from = [p if p.is_absolute() else (base / p).resolve() for p in config.offline_from]
    config.task_files = [p if p.is_absolute() else (base / p).resolve() for p in config.task_files]
    if config.benchmark == MIND2WEB:
        _check_mind2web_paths(config, base, source)
    return config


def _check_benchmark_fields(table: dict[str, Any], source: str) -> None:
    """A field of another benchmark is an error naming it (it would otherwise be silently ignored); a
    key whose value is None counts as not set."""
    benchmark = table.get("benchmark") or "miniwob"
    if benchmark not in get_args(PipelineConfig.model_fields["benchmark"].annotation):
        return  # the model names the bad benchmark and its choices
    given = [name for name, value in table.items() if value is not None]
    if benchmark == MIND2WEB:
        for name in given:
            if name in NOT_MIND2WEB_FIELDS:
                raise ConfigError(
                    f"{source}: field '{name}' does not apply to benchmark 'mind2web': "
                    f"{NOT_MIND2WEB_FIELDS[name]}"
                )
        return
    if table.get("tasks") in (None, []):
        raise ConfigError(
            f"{source}: field 'tasks' is missing or empty: give at least one task name (for live, a page URL)"
        )
    for name in given:
        if name in MIND2WEB_FIELDS:
            raise ConfigError(
                f"{source}: field '{name}' is a Mind2Web field: it needs benchmark = 'mind2web' "
                f"(this config's benchmark is {benchmark!r})"
            )


def _check_mind2web_paths(config: PipelineConfig, base: Path, source: str) -> None:
    """`data` (and `scores`, if given) made absolute and checked: a missing folder fails here, before
    any run folder is written, naming the field and where to get the data."""
    if config.data is None:
        raise ConfigError(
            f"{source}: field 'data' is missing: benchmark 'mind2web' needs the folder of the Mind2Web "
            f"JSON splits; {MIND2WEB_DATA_HELP}"
        )
    config.data = config.data if config.data.is_absolute() else (base / config.data).resolve()
    if not config.data.is_dir():
        raise ConfigError(
            f"{source}: field 'data': the Mind2Web folder {str(config.data)!r} does not exist; "
            f"{MIND2WEB_DATA_HELP}"
        )
    needs = {config.split: f"split = {config.split!r}"}
    if config.memory == "offline" or config.exemplars:
        needs["train"] = "memory 'offline'" if config.memory == "offline" else "exemplars"
    for split, why in needs.items():
        if not ((config.data / split).is_dir() or (config.data / "data" / split).is_dir()):
            raise ConfigError(
                f"{source}: field 'data': {str(config.data)!r} has no {split}/ folder (needed by {why}); "
                f"{MIND2WEB_DATA_HELP}"
            )
    if config.scores is not None:
        config.scores = config.scores if config.scores.is_absolute() else (base / config.scores).resolve()
        if not config.scores.is_file():
            raise ConfigError(
                f"{source}: field 'scores': no file {str(config.scores)!r} (a MindAct score pickle)"
            )
    if config.page_format is not None:
        from awm.mind2web.prompt import PAGE_FORMATS

        if config.page_format not in PAGE_FORMATS:
            raise ConfigError(
                f"{source}: field 'page_format': must be one of {', '.join(PAGE_FORMATS)} "
                f"(got {config.page_format!r})"
            )
    for website in config.websites or []:
        if not website or "/" in website or website.startswith("."):
            raise ConfigError(
                f"{source}: field 'websites': {website!r} is not a website name (it names a folder)"
            )


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
