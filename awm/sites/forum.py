"""The arena's forum: Spirit (`django-spirit` 0.14.3), a Django discussion forum with categories and
subcategories, topics and comments, likes, pinned and closed topics, private topics between users,
notifications, user profiles, moderation and a Whoosh full-text search. WebArena's Reddit (Postmill)
is the same kind of site.

The Django project around it (`data/forum_project`: settings, URLs, manage.py) is Spirit's own project
template cut down to SQLite; the seed (`data/forum_seed.json`, written by `data/forum_seed.py` through
Spirit's models) is a home-server community: eight users, eight categories, 42 public and 3 private
topics. Login is Spirit's own form at /user/login/ (username or email and password).

Why no restart on reset: the settings keep no database connection across requests (`CONN_MAX_AGE=0`),
every cache is Django's dummy cache, Spirit's site settings (djconfig) are re-read when their stamp in
the database changes, and the Whoosh index is reopened by path for each search and each write; so
swapping the SQLite file and the index folder under the running server is a complete reset.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

from awm.sites.lifecycle import run_tool
from awm.sites.site import Account, Site, seeded_accounts

DATA_DIR = Path(__file__).parent / "data"
PROJECT_DIR = DATA_DIR / "forum_project"
SEED_FILE = DATA_DIR / "forum_seed.json"
SEED_SCRIPT = DATA_DIR / "forum_seed.py"


class ForumSite(Site):
    """Spirit, served by Django's own server (`runserver --insecure` also serves the static files of the
    installed apps, so no collectstatic and no extra package), on the seeded SQLite state."""

    name = "forum"
    title = "Homelab Commons (Spirit forum)"
    kind = "forum"
    package = "django-spirit 0.14.3"
    accounts: ClassVar[tuple[Account, ...]] = seeded_accounts(SEED_FILE, "username")
    state_files = ("forum.sqlite3", "st_search", "media")
    database_file = "forum.sqlite3"
    restart_on_reset = False
    ready_path = "/user/login/"

    def seed_sources(self) -> tuple[Path, ...]:
        return (SEED_FILE, SEED_SCRIPT, *sorted(p for p in PROJECT_DIR.rglob("*.py")))

    def build(self, into: Path) -> None:
        shutil.copytree(PROJECT_DIR, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        (into / "media").mkdir()
        python, manage, env = str(self.venv_bin("python")), str(into / "manage.py"), self.server_env(into)
        run_tool(
            [python, manage, "migrate", "--no-input", "-v", "0"], "creating the database", env=env, cwd=into
        )
        run_tool([python, str(SEED_SCRIPT), str(SEED_FILE)], "seeding the forum", env=env, cwd=into)
        run_tool(
            [python, manage, "rebuild_index", "--noinput"], "building the search index", env=env, cwd=into
        )

    def server_command(self, data: Path, port: int) -> list[str]:
        return [
            str(self.venv_bin("python")), str(data / "manage.py"), "runserver",
            "--insecure", "--noreload", "--skip-checks", f"127.0.0.1:{port}",
        ]  # fmt: skip

    def server_env(self, data: Path) -> dict[str, str]:
        """The project's settings whatever the caller's environment says (the seed script imports them
        from `data` too)."""
        return {
            "DJANGO_SETTINGS_MODULE": "forum_site.settings",
            "PYTHONPATH": str(data),
            "PYTHONUNBUFFERED": "1",
        }

