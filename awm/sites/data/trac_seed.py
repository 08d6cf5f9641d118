"""Seed a fresh Trac environment with the Larkspur project (`trac_seed.toml`), through Trac's own API.

Runs inside the Trac site's virtualenv (it imports `trac` and `acct_mgr`, which our venv lacks):

    <venv>/bin/python trac_seed.py ENV_DIR trac_seed.toml

Why the API and not SQL: tickets, wiki pages and attachments have history rows, comment numbers and
files on disk that Trac's models write consistently; SQL is used only where Trac stamps the current
time and offers no way to pass one (sessions, the pages `initenv` ships), so two builds are the same.
"""

from __future__ import annotations

import io
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from acct_mgr.api import AccountManager
from trac.attachment import Attachment
from trac.env import Environment
from trac.perm import PermissionSystem
from trac.ticket.model import Component, Milestone, Ticket, Version
from trac.util.datefmt import to_utimestamp
from trac.wiki.model import WikiPage

# trac.ini: the AccountManager login form with passwords in Trac's own database (session store, so a
# reset of the database file also resets passwords), no first-login "setup" takeover, no self
# registration or password-reset mails, the log on stderr (the server's log file) instead of a file.
CONFIG: dict[str, dict[str, str]] = {
    "components": {
        "acct_mgr.admin.*": "enabled",
        "acct_mgr.api.accountmanager": "enabled",
        "acct_mgr.db.sessionstore": "enabled",
        "acct_mgr.pwhash.htdigesthashmethod": "enabled",
        "acct_mgr.web_ui.loginmodule": "enabled",
        "acct_mgr.web_ui.accountmodule": "enabled",
        "acct_mgr.register.*": "disabled",
        "trac.web.auth.loginmodule": "disabled",
    },
    "account-manager": {
        "password_store": "SessionStore",
        "hash_method": "HtDigestHashMethod",
        "db_htdigest_realm": "larkspur",
        "auth_init": "false",
        "reset_password": "false",
        "force_passwd_change": "false",
    },
    "logging": {"log_type": "stderr", "log_level": "WARNING"},
    "header_logo": {"src": "", "alt": "", "link": ""},
    "trac": {"default_timezone": "UTC"},
}


SESSION_SQL = "INSERT INTO session (sid, authenticated, last_visit) VALUES (%s, 1, %s)"
SESSION_ATTRIBUTE_SQL = (
    "INSERT INTO session_attribute (sid, authenticated, name, value) VALUES (%s, 1, %s, %s)"
)


def when(text: str) -> datetime:
    """A seed time ("2026-04-02 09:12", UTC)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def configure(path: str, seed: dict) -> None:
    env = Environment(path)
    for section, options in CONFIG.items():
        for key, value in options.items():
            env.config.set(section, key, value)
    env.config.set("project", "name", seed["project"]["name"])
    env.config.set("project", "descr", seed["project"]["description"])
    env.config.save()
    env.shutdown()


def seed_users(env: Environment, seed: dict) -> None:
    accounts, perms = AccountManager(env), PermissionSystem(env)
    for subject, action in perms.get_all_permissions():  # Trac's defaults for them are wider
        if subject in seed["permissions"]:
            perms.revoke_permission(subject, action)
    for group, actions in seed["permissions"].items():
        for action in actions:
            perms.grant_permission(group, action)
    created = to_utimestamp(when(seed["project"]["created"]))
    for user in seed["users"]:
        accounts.set_password(user["username"], user["password"])
        with env.db_transaction as db:
            db(SESSION_SQL, (user["username"], created // 1_000_000))
            for name in ("name", "email"):
                db(SESSION_ATTRIBUTE_SQL, (user["username"], name, user[name]))
        for group in user["groups"]:
            perms.grant_permission(user["username"], group)


def seed_structure(env: Environment, seed: dict) -> None:
    """Components, milestones and versions, in place of the samples `initenv` makes."""
    for model in (Component, Milestone, Version):
        for item in list(model.select(env)):
            item.delete()
    for spec in seed["components"]:
        component = Component(env)
        component.name = spec["name"]
        component.owner = spec["owner"]
        component.description = spec["description"]
        component.insert()
    for spec in seed["milestones"]:
        milestone = Milestone(env)
        milestone.name, milestone.description = spec["name"], spec["description"]
        milestone.due = when(spec["due"])
        milestone.completed = when(spec["completed"]) if spec.get("completed") else None
        milestone.insert()
    for spec in seed["versions"]:
        version = Version(env)
        version.name = spec["name"]
        version.description = spec["description"]
        version.time = when(spec["released"])
        version.insert()


TICKET_FIELDS = (
    "summary type component priority milestone version reporter owner keywords description".split()
)


def seed_tickets(env: Environment, seed: dict) -> None:
    for number, spec in enumerate(seed["tickets"], start=1):
        ticket = Ticket(env)
        for field in TICKET_FIELDS:
            ticket[field] = spec.get(field, "")
        ticket["status"] = "new"
        ticket["cc"] = spec.get("cc", "")
        ticket_id = ticket.insert(when=when(spec["created"]))
        assert ticket_id == number, f"ticket {spec['summary']!r} got id {ticket_id}, expected {number}"
        for change in spec.get("changes", []):
            for field, value in change.items():
                if field not in ("at", "author", "comment"):
                    ticket[field] = value
            ticket.save_changes(change["author"], change.get("comment", ""), when=when(change["at"]))


def seed_attachments(env: Environment, seed: dict) -> None:
    for spec in seed.get("attachments", []):
        attachment = Attachment(env, "ticket", spec["ticket"])
        attachment.author, attachment.description = spec["author"], spec["description"]
        data = spec["content"].encode("utf-8")
        attachment.insert(spec["filename"], io.BytesIO(data), len(data), t=when(spec["at"]))


def seed_wiki(env: Environment, seed: dict) -> None:
    created = to_utimestamp(when(seed["project"]["created"]))
    with env.db_transaction as db:  # the pages initenv ships (TracGuide...) carry the build's time
        db("UPDATE wiki SET time=%s", (created,))
    for spec in seed["wiki"]:
        for version in spec["versions"]:
            page = WikiPage(env, spec["name"])
            page.text = version["text"]
            page.save(version["author"], version["comment"], t=when(version["at"]))


def main(path: str, seed_file: str) -> None:
    seed = tomllib.loads(Path(seed_file).read_text(encoding="utf-8"))
    configure(path, seed)
    env = Environment(path)  # reopened: the components enabled above are loaded now
    seed_users(env, seed)
    seed_structure(env, seed)
    seed_tickets(env, seed)
    seed_attachments(env, seed)
    seed_wiki(env, seed)
    env.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
