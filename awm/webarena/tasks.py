"""Turn `--benchmark/--tasks/--seeds` into `Task` objects, and check WebArena's site URLs before a run.

Why here and not in the CLI: the runner, the pipeline and the tests resolve tasks the same way, and a
user asking for WebArena without the sites should get one clear sentence before any browser starts.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import tomllib
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from awm.errors import ConfigError
from awm.trajectory import Task

if TYPE_CHECKING:
    from awm.sites.templates import Split

Benchmark = Literal["miniwob", "webarena", "browsergym", "live", "sites"]
BENCHMARKS: tuple[str, ...] = ("miniwob", "webarena", "browsergym", "live", "sites")

# BrowserGym (>= 0.6) reads the WebArena sites from these variables (note the WA_ prefix).
WEBARENA_SITES: dict[str, str] = {
    "shopping": "WA_SHOPPING",
    "shopping_admin": "WA_SHOPPING_ADMIN",
    "reddit": "WA_REDDIT",
    "gitlab": "WA_GITLAB",
    "wikipedia": "WA_WIKIPEDIA",
    "map": "WA_MAP",
    "homepage": "WA_HOMEPAGE",
}


def parse_seeds(text: str) -> list[int]:
    """`"0-4"` -> [0..4], `"0,3,7"` -> [0, 3, 7], `"2"` -> [2]; ranges and lists mix (`"0-2,9"`)."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                start, stop = int(lo), int(hi)
                if stop < start:
                    raise ValueError
                seeds.extend(range(start, stop + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ConfigError(
                f"--seeds: '{part}' is not a seed, a range like 0-4, or a comma list like 0,3,7"
            ) from None
    if not seeds:
        raise ConfigError("--seeds is empty; give e.g. 0-4 or 0,1")
    return list(dict.fromkeys(seeds))


def split_names(text: str) -> list[str]:
    """A comma list of task names, blanks dropped, order kept, duplicates removed."""
    return list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def miniwob_task_names() -> list[str]:
    """The MiniWoB++ task names BrowserGym registers (e.g. ``click-test``)."""
    from browsergym.miniwob import ALL_MINIWOB_TASKS

    return sorted(cls.get_task_id().split(".", 1)[1] for cls in ALL_MINIWOB_TASKS)


def webarena_task_sites(task_number: int) -> list[str] | None:
    """The sites a WebArena task uses, from libwebarena's task configs when installed, else None."""
    try:
        raw = importlib.resources.files("webarena").joinpath("test.raw.json").read_text()
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None
    try:
        configs = json.loads(raw)
    except ValueError:
        return None
    for config in configs if isinstance(configs, list) else []:
        if isinstance(config, dict) and config.get("task_id") == task_number:
            sites = config.get("sites")
            return [str(s) for s in sites] if isinstance(sites, list) else None
    return None


def webarena_scope(task_number: int) -> str:
    """`webarena/<site>` (sites joined by `+` for cross-site tasks), or `webarena` if unknown."""
    sites = webarena_task_sites(task_number)
    return "webarena/" + "+".join(sorted(sites)) if sites else "webarena"


def scope_for_task_id(task_id: str) -> tuple[str, str]:
    """(benchmark, scope) for a BrowserGym id like ``browsergym/miniwob.click-test``."""
    name = task_id.removeprefix("browsergym/")
    family, _, rest = name.partition(".")
    if not rest:
        return family, family
    if family == "webarena" and rest.isdigit():
        return "webarena", webarena_scope(int(rest))
    if family == "sites":  # sites.<site>.<template> -> sites/<site>/<template>
        return "sites", "sites/" + rest.replace(".", "/", 1)
    return family, f"{family}/{rest}"


def live_task(url: str, goal: str) -> Task:
    """A user-named page and goal as a task (BrowserGym's open-ended task), held to the rails.

    The id is a digest of the URL and the goal, so a run folder resumes the same request and a different
    page or goal is a different task; the scope is the page's site (`live/example.com`), so memory
    learned on one page of a site serves its other pages.
    """
    from awm.rails import RailsError, registrable_domain

    if not goal.strip():
        raise ConfigError("a live page needs a goal: give --goal 'what the agent should do there'")
    host = urlsplit(url.strip()).hostname or ""
    try:
        site = registrable_domain(host) if host else "unknown"
    except RailsError:
        site = "unknown"
    digest = hashlib.sha256(f"{url.strip()}\n{goal.strip()}".encode()).hexdigest()[:10]
    return Task(
        task_id=f"live.{digest}",
        goal=goal.strip(),
        scope=f"live/{site}",
        benchmark="live",
        meta={"task_kwargs": {"start_url": url.strip(), "goal": goal.strip()}},
    )


def site_tasks(
    names: list[str], seeds: list[int] | None, task_files: list[str], *, split: Split = "test"
) -> list[Task]:
    """Arena tasks: `site.template#n` is instance n; `site.template` its test instances (or the
    instances `seeds` names, or with `split="train"` its train instances); `site` every template of the
    site so. Checked against the templates (awm's and `task_files`), so a typo fails before any site or
    browser starts."""
    from pathlib import Path

    from awm.sites.templates import load_templates

    templates = load_templates([Path(f) for f in task_files])
    meta = {"task_kwargs": {"task_files": list(task_files)}} if task_files else {}
    tasks: list[Task] = []
    for name in names:
        key, _, number = name.removeprefix("browsergym/").removeprefix("sites.").partition("#")
        chosen = [t for t in templates.values() if t.key == key or t.site == key]
        if not chosen:
            close = sorted(k for k in templates if key.split(".")[-1] in k)[:5]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"--tasks: '{name}' is no arena site or template (site.template[#n]){hint}")
        for template in chosen:
            if number:
                if not number.isdigit() or int(number) >= len(template.instance):
                    raise ConfigError(
                        f"--tasks: {template.key} has instances 0-{len(template.instance) - 1} (got '#{number}')"
                    )
                wanted = [int(number)]
            elif seeds is not None:
                wanted = [s for s in seeds if 0 <= s < len(template.instance)]
            else:
                wanted = template.numbers(split)
            for n in wanted:
                tasks.append(
                    Task(
                        task_id=f"browsergym/sites.{template.key}", scope=template.scope, benchmark="sites",
                        seed=n, meta=meta,
                    )  # fmt: skip
                )
    return tasks


def resolve_tasks(
    benchmark: str,
    names: str | list[str],
    seeds: list[int] | None = None,
    *,
    goal: str = "",
    task_files: list[str] | None = None,
) -> list[Task]:
    """Tasks in a stable order: each name, then each seed.

    MiniWoB names are checked against BrowserGym's registry (so a typo fails before any browser
    starts); WebArena takes task numbers; `browsergym` takes full ids verbatim; `live` takes URLs, each
    with `goal`. `seeds=None` means seed 0 for MiniWoB (its pages are random per seed) and no seed for
    WebArena (tasks are fixed).
    """
    wanted = split_names(names) if isinstance(names, str) else list(dict.fromkeys(names))
    if not wanted:
        raise ConfigError("--tasks is empty; give a comma list such as click-test,login-user")
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"--benchmark must be one of {', '.join(BENCHMARKS)} (got '{benchmark}')")
    if benchmark == "live":
        return [live_task(url, goal) for url in wanted]
    if benchmark == "sites":
        return site_tasks(wanted, seeds, task_files or [])
    if task_files:
        raise ConfigError("--task-file holds arena templates: it goes with --benchmark sites")
    tasks: list[Task] = []
    if benchmark == "miniwob":
        known = set(miniwob_task_names())
        for name in wanted:
            short = name.removeprefix("browsergym/").removeprefix("miniwob.")
            if short not in known:
                close = sorted(k for k in known if short.split("-")[0] in k)[:5]
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"--tasks: '{name}' is not a MiniWoB++ task registered in BrowserGym{hint}")
            for seed in seeds if seeds is not None else [0]:
                tasks.append(
                    Task(
                        task_id=f"browsergym/miniwob.{short}",
                        scope=f"miniwob/{short}",
                        benchmark="miniwob",
                        seed=seed,
                    )
                )
        return tasks
    if benchmark == "webarena":
        for name in wanted:
            number = name.removeprefix("browsergym/").removeprefix("webarena.")
            if not number.isdigit():
                raise ConfigError(f"--tasks: WebArena tasks are numbers such as 0,1,2 (got '{name}')")
            for seed in seeds if seeds is not None else [None]:
                tasks.append(
                    Task(
                        task_id=f"browsergym/webarena.{int(number)}",
                        scope=webarena_scope(int(number)),
                        benchmark="webarena",
                        seed=seed,
                    )
                )
        return tasks
    for name in wanted:
        if not name.startswith("browsergym/") or "." not in name:
            raise ConfigError(
                f"--tasks: with --benchmark browsergym give full ids like browsergym/miniwob.click-test (got '{name}')"
            )
        family, scope = scope_for_task_id(name)
        default: list[int | None] = [0] if family == "miniwob" else [None]
        for seed in seeds if seeds is not None else default:
            tasks.append(Task(task_id=name, scope=scope, benchmark=family, seed=seed))
    return tasks


def needs_webarena(tasks: list[Task]) -> bool:
    return any(t.benchmark == "webarena" for t in tasks)


def webarena_section(config_path: Path | None) -> dict[str, Any]:
    """The `[webarena]` table of a config file (site name -> URL), empty when absent."""
    if config_path is None:
        return {}
    try:
        data = tomllib.loads(Path(config_path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {config_path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {config_path} is not valid TOML: {exc}") from None
    section = data.get("webarena", {})
    if not isinstance(section, dict):
        raise ConfigError(f"config file {config_path}: [webarena] must be a table of site = URL")
    return section


def webarena_urls(
    section: Mapping[str, Any], environ: Mapping[str, str], *, source: str = "the config's [webarena] section"
) -> dict[str, str]:
    """The WA_* variables BrowserGym needs: the environment wins, then the config; error names the gaps."""
    unknown = sorted(set(section) - set(WEBARENA_SITES))
    if unknown:
        raise ConfigError(
            f"{source}: unknown site(s) {', '.join(unknown)}; expected keys: {', '.join(WEBARENA_SITES)}"
        )
    urls: dict[str, str] = {}
    missing: list[str] = []
    for site, var in WEBARENA_SITES.items():
        value = environ.get(var) or section.get(site)
        if not value or not isinstance(value, str):
            missing.append(var)
        else:
            urls[var] = value
    if missing:
        raise ConfigError(
            "WebArena needs the URL of each site: set the environment variable(s) "
            + ", ".join(missing)
            + f" (or the matching keys in {source}; template: configs/webarena.toml); "
            "e.g. export WA_SHOPPING=http://<host>:7770/"
        )
    return urls


def prepare_webarena_env(
    config_path: Path | None, environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Validate the sites and export them so BrowserGym (in this and child processes) finds them."""
    env = os.environ if environ is None else environ
    source = (
        f"the [webarena] section of {config_path}"
        if config_path
        else "the [webarena] section of a --config file"
    )
    urls = webarena_urls(webarena_section(config_path), env, source=source)
    for var, url in urls.items():
        env.setdefault(var, url)
    return urls
