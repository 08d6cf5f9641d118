"""Each instance of an arena template as a BrowserGym task, registered as `browsergym/sites.<site>.<template>`
with the instance number as the seed: the one driver, `awm serve` and any BrowserGym agent (AgentLab's
included) run them alike::

    import gymnasium as gym, awm.sites.task
    env = gym.make("browsergym/sites.trac.ticket-priority")
    obs, info = env.reset(seed=3)          # instance 3 of the template

`setup` resets the site to its pristine state (starting its server if it is down), keeps the page on the
site (a route on the browser context aborts any request to another host or port: the episode is a
sandbox and nothing leaves it) and opens the template's start page. `validate` reads the template's
check (`awm.sites.checks`): the reward is 1.0 or 0.0 and `info["check"]` says what held or failed.
A check of the site's state alone ends the episode as soon as it holds (the site closes the task, as a
MiniWoB++ page does); a check of the agent's answer or of an infeasible report is decided when the
agent ends. When the task is done (or the agent ended it), the site's database is compared with the
state it was reset to (`awm.sites.changes`): `info["changes"]` lists what changed, and a change to a
table the template may not change (`Template.may_change`) fails a check that passed, naming the rows.

The confirmation gate is not consulted on these tasks (the sites are sandboxes reset between
episodes); `info["gate"]` records that.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from browsergym.core.registration import register_task
from browsergym.core.task import AbstractBrowserTask

from awm.sites import lifecycle
from awm.sites.changes import database_changes, undeclared
from awm.sites.checks import Evidence, evaluate
from awm.sites.registry import get_site
from awm.sites.templates import PASSWORD, Template, load_templates

FAMILY = "sites"
GATE_NOTE = "not consulted: an arena site is a sandbox reset between episodes"
_REGISTERED: set[str] = set()


def gym_id(template: Template) -> str:
    return f"{FAMILY}.{template.site}.{template.id}"


class SiteTask(AbstractBrowserTask):
    """One instance (the seed) of one template; `task_files` are extra task files to find it in."""

    template_key = ""  # set on the subclass each registration makes
    validate_at_end = True  # the check is read once more on the page the episode ended on

    @classmethod
    def get_task_id(cls) -> str:
        return f"{FAMILY}.{cls.template_key}"

    def __init__(self, seed: int, template_key: str = "", task_files: tuple[str, ...] = ()) -> None:
        super().__init__(seed)
        key = template_key or self.template_key
        templates = load_templates([Path(f) for f in task_files])
        if key not in templates:
            raise ValueError(f"no arena template '{key}'")
        self.template = templates[key]
        if not 0 <= seed < len(self.template.instance):
            raise ValueError(
                f"template {key} has instances 0-{len(self.template.instance) - 1}; seed {seed} is none of them"
            )
        self.number = seed
        self.site = get_site(self.template.site)  # this process's copy: a worker's own, else the site's
        self.viewport = {"width": 1280, "height": 900}
        self.slow_mo = 0
        self.timeout = 10000
        self.base_url = ""

    # --- what the executor may type but nobody may read ----------------------------------------
    def secrets(self) -> dict[str, str]:
        """{"password": ...} when the template logs in: the value the executor types for `{password}`."""
        if self.template.login is None:
            return {}
        return {PASSWORD: self.site.account(self.template.login).password}

    # --- BrowserGym ------------------------------------------------------------------------------
    def setup(self, page: Any) -> tuple[str, dict]:
        state = lifecycle.reset(self.site)
        self.base_url = state.url
        _stay_on(page.context, state.url)
        if self.site.http_auth and self.template.login is not None:
            account = self.site.account(self.template.login)
            token = base64.b64encode(f"{account.username}:{account.password}".encode()).decode()
            page.context.set_extra_http_headers({"Authorization": f"Basic {token}"})
        page.goto(state.url + self.template.start, timeout=self.timeout)
        return self.template.goal_for(self.number), self.facts()

    def facts(self) -> dict[str, Any]:
        return {
            "template": self.template.key,
            "instance": self.number,
            "split": self.template.split_of(self.number),
            "kind": self.template.kind,
            "site_url": self.base_url,
            "gate": GATE_NOTE,
        }

    def validate(self, page: Any, chat_messages: list[dict]) -> tuple[float, bool, str, dict]:
        # BrowserGym's chat opens with the assistant's greeting, then the goal as the user's message: the
        # agent's answers are the assistant's messages after that.
        first_user = next((i for i, m in enumerate(chat_messages) if m.get("role") == "user"), len(chat_messages))
        answers = [m["message"] for m in chat_messages[first_user:] if m.get("role") == "assistant"]
        infeasible = any(m.get("role") == "infeasible" for m in chat_messages)
        ended = bool(answers) or infeasible
        check = self.template.check
        if check.waits_for_the_agent and not ended:
            return 0.0, False, "", self.facts()
        evidence = Evidence(
            url=page.url,
            page_text=_page_text(page) if check.text is not None else "",
            answer=answers[-1] if answers else None,
            infeasible=infeasible,
            ended=ended,
        )
        outcome = evaluate(check, self.template.values(self.number), self.site.database, evidence)
        facts = {**self.facts(), "check": outcome.detail}
        if not (outcome.passed or ended):
            return 0.0, False, "", facts
        # The task is done, or the agent ended it: what else did the episode change?
        changes = database_changes(self.site.pristine / self.site.database_file, self.site.database, bookkeeping=self.site.bookkeeping)
        facts["changes"] = [c.describe() for c in changes]
        extra = undeclared(changes, self.template.may_change)
        if outcome.passed and extra:
            allowed = ", ".join(self.template.may_change or []) or "nothing"
            facts["check"] = (
                f"{outcome.detail}; but the episode also changed what the task may not ({allowed} may change): "
                + "; ".join(c.describe() for c in extra)
            )
            return 0.0, True, "", facts
        if outcome.passed:
            return 1.0, True, "", facts
        return 0.0, ended, "", facts


def _page_text(page: Any) -> str:
    try:
        return str(page.inner_text("body", timeout=2000))
    except Exception:  # a page mid-navigation has no body yet: it shows nothing
        return ""


def _stay_on(context: Any, base_url: str) -> None:
    """Abort every request that does not go to the site's own host and port."""
    home = urlsplit(base_url)

    def route(route: Any, request: Any) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https") and (parts.hostname, parts.port) == (home.hostname, home.port):
            route.fallback()
        elif parts.scheme in ("data", "blob", "about"):
            route.fallback()
        else:
            route.abort("blockedbyclient")

    context.route("**/*", route)


def register_templates(templates: dict[str, Template]) -> list[str]:
    """Register each template as `browsergym/sites.<site>.<id>` (once per process); returns the ids."""
    ids = []
    for key, template in templates.items():
        task_id = gym_id(template)
        if task_id not in _REGISTERED:
            cls = type(f"SiteTask_{key.replace('.', '_').replace('-', '_')}", (SiteTask,), {"template_key": key})
            files = () if _builtin(template) else (template.source,)
            register_task(task_id, cls, task_kwargs={"template_key": key}, default_task_kwargs={"task_files": files})
            _REGISTERED.add(task_id)
        ids.append(f"browsergym/{task_id}")
    return ids


def register_task_files(task_files: list[str]) -> list[str]:
    """Register the templates of a researcher's own task files too (awm's are registered on import)."""
    return register_templates(load_templates([Path(f) for f in task_files]))


def _builtin(template: Template) -> bool:
    from awm.sites.templates import TASKS_DIR

    return template.source.startswith(str(TASKS_DIR))


register_templates(load_templates())
