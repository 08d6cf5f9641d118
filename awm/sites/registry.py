"""The arena's sites by name. A site module is imported only when a site is used, so listing task
templates or validating a task file never imports an application's code (it lives in its own venv)."""

from __future__ import annotations

import importlib
import os
from functools import cache
from pathlib import Path

from awm.errors import ConfigError
from awm.sites.site import INSTANCE_ENV, Site

# name -> module under awm.sites holding exactly one `Site` subclass
SITES: dict[str, str] = {"trac": "awm.sites.trac", "shop": "awm.sites.shop", "forum": "awm.sites.forum"}


@cache
def site_class(name: str) -> type[Site]:
    if name not in SITES:
        raise ConfigError(f"unknown site '{name}'; the arena's sites are {', '.join(SITES)}")
    module = importlib.import_module(SITES[name])  # a module name from the table above, never from input
    found = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Site) and obj is not Site and obj.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise ConfigError(f"site module {SITES[name]} must define exactly one Site subclass, found {len(found)}")
    return found[0]


def get_site(name: str, root: Path | None = None, instance: str | None = None) -> Site:
    """The site `name` (its folders under `root`, default the assets folder's `sites/`), the running copy
    `instance` of it (`Site.instance`; default: this process's, `INSTANCE_ENV`, which a worker of the pool
    sets and a person may set to keep a run off the site's own copy, else the site's own)."""
    return site_class(name)(root, os.environ.get(INSTANCE_ENV, "") if instance is None else instance)


def site_names(selected: str | None = None) -> list[str]:
    """All site names, or the comma list `selected` checked against them."""
    if not selected:
        return list(SITES)
    names = [n.strip() for n in selected.split(",") if n.strip()]
    unknown = [n for n in names if n not in SITES]
    if unknown:
        raise ConfigError(f"unknown site(s) {', '.join(unknown)}; the arena's sites are {', '.join(SITES)}")
    return names


@cache
def site_accounts() -> dict[str, set[str]]:
    """Each site's account names (task files' `login` is checked against them)."""
    return {name: {a.username for a in site_class(name).accounts} for name in SITES}
