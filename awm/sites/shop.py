"""The arena's shop: django-oscar 4.2.1, a Django e-commerce framework, made into "Harbor Lane Market"
(books, electronics, home & kitchen, outdoor gear). A customer side (catalogue, search, basket, checkout,
order history, addresses, wish lists, reviews) and a staff dashboard (orders, catalogue, stock, offers,
vouchers, reviews, customers, reports): WebArena's shopping and shopping_admin sites in one.

Oscar is a framework, so the site is the minimal project its "Building your own shop" describes
(`data/shop_project`: settings with `oscar.config.Shop` and Oscar's apps, sorl-thumbnail for images,
URLs from `apps.get_app_config('oscar').urls`), copied into the state folder. Its search backend is
Whoosh, not haystack's simple backend the docs start with: Oscar browses its catalogue pages through a
search query, which the simple backend answers with no products.
The seed (`data/shop_seed.json`, applied by `data/shop_seed.py` through Oscar's models and its own order
placement) holds 12 categories, 4 product classes with attributes, 50 products with stock (6 sold out),
17 reviews, 7 accounts with addresses, 9 orders across the status pipeline, offers and vouchers.
Product pictures are drawn by the seed (Pillow; no downloads) and their thumbnails made at build time.

Login is Oscar's own form at /accounts/login/ (email and password), so `Account.username` holds the
email; the dashboard (/dashboard/) takes the same login for staff accounts. Django's own admin
(/admin/) works too: the Django username is the email as well.

Why no restart on reset: the settings open the database per request (`CONN_MAX_AGE=0`), every cache is
Django's dummy cache (sorl's thumbnail store then reads its rows from the database), and the Whoosh
index is reopened by path in every request (haystack keeps backends per thread, and Django's server runs
each request in a new thread); so swapping the SQLite file and whoosh_index/ under the running server is
a complete reset (media/ is not restored; see `state_files`). Static files are served by
`runserver --insecure` from the installed apps (no collectstatic, no WhiteNoise: Oscar does not depend
on it).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

from awm.sites.lifecycle import run_tool
from awm.sites.site import Account, Site, seeded_accounts

DATA_DIR = Path(__file__).parent / "data"
PROJECT_DIR = DATA_DIR / "shop_project"
SEED_FILE = DATA_DIR / "shop_seed.json"
SEED_SCRIPT = DATA_DIR / "shop_seed.py"


class ShopSite(Site):
    """django-oscar served by Django's own server on the seeded SQLite state (see the module docstring)."""

    name = "shop"
    title = "Harbor Lane Market (django-oscar)"
    kind = "shop"
    package = "django-oscar 4.2.1"
    accounts: ClassVar[tuple[Account, ...]] = seeded_accounts(SEED_FILE, "email")
    # Not media/: copying its ~700 files (pictures, thumbnails, their folders) takes about a second, and
    # nothing an episode does removes a seeded file from it (the settings keep deleted images' files), so
    # restoring the database is enough; an upload leaves only an orphan file behind.
    state_files = ("shop.sqlite3", "whoosh_index")
    database_file = "shop.sqlite3"
    restart_on_reset = False
    ready_path = "/accounts/login/"

    def seed_sources(self) -> tuple[Path, ...]:
        return (SEED_FILE, SEED_SCRIPT, *sorted(p for p in PROJECT_DIR.rglob("*.py")))

    def build(self, into: Path) -> None:
        shutil.copytree(PROJECT_DIR, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        # A fixed hash seed: sorl-thumbnail stores Python sets as JSON lists, in hash order.
        python, env = str(self.venv_bin("python")), {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        run_tool(
            [python, str(into / "manage.py"), "migrate", "--no-input", "-v", "0"],
            "creating the shop's database", env=env, cwd=into,
        )  # fmt: skip
        run_tool([python, str(SEED_SCRIPT), str(into), str(SEED_FILE)], "seeding the shop", env=env, cwd=into)

    def server_command(self, data: Path, port: int) -> list[str]:
        return [
            str(self.venv_bin("python")), str(data / "manage.py"), "runserver",
            "--insecure", "--noreload", "--skip-checks", f"127.0.0.1:{port}",
        ]  # fmt: skip

    def server_env(self, data: Path) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}

