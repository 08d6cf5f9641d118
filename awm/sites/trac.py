"""The arena's issue tracker: Trac 1.6 with the AccountManager plugin (TracAccountManager 0.6.0), made
into the tracker of "Larkspur", a fictional open-source calendar server. Tickets with Trac's default
workflow (new, assigned, accepted, closed with a resolution, reopened), components with owners,
milestones on a roadmap, versions, the stock reports and custom queries, a wiki with page history,
attachments and a timeline: WebArena's GitLab issues and wiki in Trac's shape.

The seed (`data/trac_seed.toml`, written by `data/trac_seed.py` through Trac's models inside Trac's
venv) holds seven accounts (an administrator, a release manager, four developers, a support person
who files tickets), five components, four milestones (1.1 completed), three versions, 40 tickets with
their comment and status history, two attachments and 14 project wiki pages beside Trac's own help.

Login is a form at /login (AccountManager's, replacing Trac's HTTP-auth login); the passwords live in
Trac's database (AccountManager's session store), so a reset restores them too. Trac without the
plugin only knows HTTP authentication.

Why restart on reset: Trac keeps pooled SQLite connections and caches (permissions, milestones, wiki
page names, ticket fields) in the server process. The log goes to stderr, so nothing but the state
files changes under live/.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import ClassVar

from awm.sites.lifecycle import run_tool
from awm.sites.site import Account, Site

DATA_DIR = Path(__file__).parent / "data"
SEED_FILE = DATA_DIR / "trac_seed.toml"
SEED_SCRIPT = DATA_DIR / "trac_seed.py"


def _seeded_accounts() -> tuple[Account, ...]:
    """The accounts the seed creates, read from the seed file (the one place their passwords live)."""
    users = tomllib.loads(SEED_FILE.read_text(encoding="utf-8"))["users"]
    return tuple(
        Account(username=u["username"], password=u["password"], role=u["role"], full_name=u["name"],
                email=u["email"])
        for u in users
    )  # fmt: skip


class TracSite(Site):
    """Trac served by its own standalone server (`tracd`, which also serves Trac's static files)."""

    name = "trac"
    title = "Larkspur (Trac issue tracker)"
    kind = "issue tracker"
    package = "Trac 1.6"
    accounts: ClassVar[tuple[Account, ...]] = _seeded_accounts()
    # conf/trac.ini: the web admin's settings and plugin pages write it.
    state_files = ("db/trac.db", "files", "conf/trac.ini")
    database_file = "db/trac.db"
    restart_on_reset = True
    ready_path = "/"

    def seed_sources(self) -> tuple[Path, ...]:
        return (SEED_FILE, SEED_SCRIPT)

    def build(self, into: Path) -> None:
        project = tomllib.loads(SEED_FILE.read_text(encoding="utf-8"))["project"]["name"]
        run_tool(
            [str(self.venv_bin("trac-admin")), str(into), "initenv", project, "sqlite:db/trac.db"],
            "creating the Trac environment",
        )
        run_tool([str(self.venv_bin("python")), str(SEED_SCRIPT), str(into), str(SEED_FILE)], "seeding Trac")
        # initenv logged to a file before the seed moved the log to stderr; its times differ per build
        (into / "log" / "trac.log").unlink(missing_ok=True)
        (into / "files").mkdir(exist_ok=True)

    def server_command(self, data: Path, port: int) -> list[str]:
        return [
            str(self.venv_bin("tracd")), "--single-env", "--hostname", "127.0.0.1", "--port", str(port),
            str(data),
        ]  # fmt: skip

    def server_env(self, data: Path) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}

