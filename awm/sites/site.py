"""What a site of the arena is: a real web application, its pinned packages, its seeded accounts, how
to build its pristine state and how to serve it. One subclass per application (`awm.sites.trac`, ...).

Why a class per site and not a config file: building and seeding a real application is code (Trac's
`trac-admin`, Django's `migrate` and ORM), and each application has its own way to be served. What a
site module holds is only that; installing, starting, resetting and stopping are the same for every
site (`awm.sites.lifecycle`), and the tasks on a site are data (`awm.sites.templates`).

Layout under the assets folder (`$AWM_HOME/sites/<name>/`):

    venv/          the application's own virtualenv (its dependencies never meet ours)
    pristine/      the seeded state, built once by `build`; never served, only copied
    live/          the state the server runs on; reset copies `state_files` back from pristine/
    server.json    pid and port of the running server (absent: not running)
    server.log     the server's output
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from awm.config import awm_home

REQUIREMENTS_DIR = Path(__file__).parent / "requirements"
SCHEMA_DIR = Path(__file__).parent / "schema"


# A worker's own copy of every site (`Site.instance`): set by the worker pool in each worker process, so
# the BrowserGym task that a worker's browser resets (`awm.sites.task`) uses that worker's copy.
INSTANCE_ENV = "AWM_SITE_INSTANCE"


def sites_home() -> Path:
    """Where the arena's sites live: `$AWM_HOME/sites` (default `./.awm/sites`)."""
    return awm_home() / "sites"


@dataclass(frozen=True)
class Account:
    """A seeded user. The password is a sandbox's, but it is handled as a secret all the same: tasks
    name it by a placeholder, the executor types it, and no record of a run holds it."""

    username: str
    password: str
    role: str
    full_name: str = ""
    email: str = ""


def seeded_accounts(seed_file: Path, login_key: str) -> tuple[Account, ...]:
    """The accounts a Django site's seed creates, read from its seed file (the one place their passwords
    live); `login_key` is the seed field the site's login form takes (`username`, or `email` where the
    form asks for an email)."""
    users = json.loads(seed_file.read_text(encoding="utf-8"))["users"]
    return tuple(
        Account(
            username=u[login_key],
            password=u["password"],
            role=u["role"],
            full_name=f"{u['first_name']} {u['last_name']}",
            email=u["email"],
        )
        for u in users
    )


class Site(ABC):
    """One real application of the arena (see the module docstring for its folders)."""

    name: ClassVar[str]  # short id: task ids and memory scopes use it (`sites/<name>/<template>`)
    title: ClassVar[str]  # what a person calls it
    kind: ClassVar[str]  # the kind of site ("issue tracker", "shop", "forum")
    package: ClassVar[str]  # the application's distribution and version, as installed ("Trac 1.6")
    accounts: ClassVar[tuple[Account, ...]]
    # Relative to live/: what reset copies back from pristine/ (the SQLite database, uploaded files).
    state_files: ClassVar[tuple[str, ...]]
    database_file: ClassVar[str]  # relative to live/: the SQLite file the success checks read
    # Whether reset must restart the server: an application that keeps database connections open or
    # caches rows in memory (Trac) would serve the old state from a restored file.
    restart_on_reset: ClassVar[bool] = True
    ready_path: ClassVar[str] = "/"  # polled after start until it answers
    # HTTP authentication instead of a login form: the browser context is given the credentials.
    http_auth: ClassVar[bool] = False
    # Bump when `build` makes different data, so set-up rebuilds the pristine state.
    seed_version: ClassVar[str] = "1"

    def __init__(self, root: Path | None = None, instance: str = "") -> None:
        self.root = (root or sites_home()) / self.name
        # One running copy of the site: its live state, server and log. The default ("") is the site's
        # own; a named instance (a worker's, `INSTANCE_ENV`) has its own folder and port, so episodes on
        # two instances never see each other's changes or resets. The venv and pristine state are shared.
        if instance and not instance.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"site instance {instance!r}: letters, digits, '-' or '_' only (it names a folder)")
        self.instance = instance
        self.home = self.root / "instances" / instance if instance else self.root

    # --- where things are ------------------------------------------------------------------------
    @property
    def venv(self) -> Path:
        return self.root / "venv"

    def venv_bin(self, program: str) -> Path:
        return self.venv / "bin" / program

    @property
    def pristine(self) -> Path:
        return self.root / "pristine"

    @property
    def live(self) -> Path:
        return self.home / "live"

    @property
    def state_file(self) -> Path:
        return self.home / "server.json"

    @property
    def log_file(self) -> Path:
        return self.home / "server.log"

    @property
    def bookkeeping(self) -> dict[str, tuple[str, ...]]:
        """What the application writes on its own whenever anyone logs in or looks (`awm.sites.bookkeeping`):
        left out of an episode's changes."""
        from awm.sites.bookkeeping import BOOKKEEPING

        return BOOKKEEPING.get(self.name, {})

    @property
    def database(self) -> Path:
        """The live SQLite database (what success checks read)."""
        return self.live / self.database_file

    @property
    def schema_file(self) -> Path:
        """The CREATE statements of its seeded database (`lifecycle.schema_sql`): what task files' SQL
        checks are validated against without the site installed."""
        return SCHEMA_DIR / f"{self.name}.sql"

    @property
    def requirements_file(self) -> Path:
        """The site's lock file: every package of its virtualenv, pinned."""
        return REQUIREMENTS_DIR / f"{self.name}.txt"

    def install_stamp(self) -> str:
        """Changes when the pinned packages change (set-up reinstalls the virtualenv)."""
        return hashlib.sha256(self.requirements_file.read_bytes()).hexdigest()[:16]

    def seed_stamp(self) -> str:
        """Changes when the packages or the seed change (set-up rebuilds the pristine state)."""
        source = Path(__file__).parent / f"{self.name}.py"
        data = self.requirements_file.read_bytes() + self.seed_version.encode()
        if source.is_file():
            data += source.read_bytes()
        for extra in self.seed_sources():
            data += extra.read_bytes()
        return hashlib.sha256(data).hexdigest()[:16]

    def seed_sources(self) -> tuple[Path, ...]:
        """Files besides the site module whose content decides the seed (a data file, a script)."""
        return ()

    def account(self, username: str) -> Account:
        for account in self.accounts:
            if account.username == username:
                return account
        raise KeyError(username)

    # --- what each site does its own way ---------------------------------------------------------
    @abstractmethod
    def build(self, into: Path) -> None:
        """Create the application's state in the empty folder `into` and seed it (deterministic: the
        same packages and seed give the same rows). Runs the site's own tools from its virtualenv."""

    @abstractmethod
    def server_command(self, data: Path, port: int) -> list[str]:
        """The command that serves the state in `data` on 127.0.0.1:`port` in the foreground."""

    def server_env(self, data: Path) -> dict[str, str]:
        """Extra environment variables for the server process."""
        return {}
