"""Task templates of the arena: data files (TOML), parsed safely, validated before any browser starts.

A file holds one site's templates (`awm/sites/tasks/<site>.toml` ship with awm; `--task-file PATH`
adds a researcher's own)::

    site = "trac"

    [[template]]
    id = "ticket-priority"            # unique on the site: [a-z0-9-]
    kind = "information"              # information | navigation | create | update | multi-step | infeasible
    start = "/report/1"               # where the episode starts (a path on the site; default "/")
    login = "alice"                   # optional: the episode starts logged out and the goal may name
                                      # {user} (the account's name) and {password} (a secret placeholder)
    goal = 'What priority does the ticket "{summary}" have?'
    demo = ["click('[link] View Tickets')", "click('[link] {summary}')", "send_msg_to_user('{priority}')"]
    check = { answer = "{priority}" } # see awm.sites.checks

    [[template.instance]]
    split = "train"                   # train instances carry a demonstration (the template's or their own)
    values = { summary = "Crash when saving a report", priority = "major" }

Demonstrations are steps of a workflow in our own action language, targets as ``[role] label``
(`awm.memory.text_format.parse_step`), so the scripted replay can run them and offline induction can
learn from them. A control repeated in every row (an Edit link per post) is told apart by its row:
``click('[link] edit', row='{author}')``. Every error names the file, the template and the key, and
says what was expected.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from awm.errors import DataError
from awm.memory.text_format import parse_step
from awm.memory.workflow import PLACEHOLDER, Workflow, WorkflowStep, fill_placeholders
from awm.sites.checks import Check, validate_sql

TASKS_DIR = Path(__file__).parent / "tasks"
Kind = Literal["information", "navigation", "create", "update", "multi-step", "infeasible"]
Split = Literal["train", "test"]
USER, PASSWORD = "user", "password"  # what a template with `login` may name in its goal and demo
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class Instance(BaseModel):
    """One task of a template: the values of its placeholders and whether it teaches or tests."""

    model_config = ConfigDict(extra="forbid")

    split: Split
    values: dict[str, str] = Field(default_factory=dict)
    demo: list[str] | None = None  # this instance's own demonstration (else the template's)

    @field_validator("values", mode="before")
    @classmethod
    def _values_are_text(cls, values: Any) -> Any:
        if isinstance(values, dict):
            return {k: v if isinstance(v, str) else str(v) for k, v in values.items()}
        return values


class Template(BaseModel):
    """A task template (see the module docstring); `source` is the file it came from."""

    model_config = ConfigDict(extra="forbid")

    id: str
    site: str
    kind: Kind
    goal: str
    check: Check
    start: str = "/"
    login: str | None = None
    demo: list[str] = Field(default_factory=list)
    instance: list[Instance] = Field(default_factory=list)
    # The tables the task may change (`awm.sites.changes`): a change to any other fails the check, with
    # the rows named. Left out: an information, navigation or infeasible template changes nothing, and
    # what any other kind changes is not held (`may_change`).
    changes: list[str] | None = None
    source: str = ""

    @property
    def may_change(self) -> list[str] | None:
        """The tables an episode of this template may change; None: any."""
        if self.changes is not None:
            return self.changes
        return [] if self.kind in ("information", "navigation", "infeasible") else None

    @property
    def key(self) -> str:
        return f"{self.site}.{self.id}"

    @property
    def scope(self) -> str:
        """The memory scope of its tasks: `sites/<site>/<template>` (under the site's `sites/<site>`)."""
        return f"sites/{self.site}/{self.id}"

    def split_of(self, number: int) -> Split:
        return self.instance[number].split

    def numbers(self, split: Split | None = None) -> list[int]:
        """Instance numbers (0-based, as in `trac.create-ticket#3`) of one split, or all."""
        return [i for i, inst in enumerate(self.instance) if split is None or inst.split == split]

    def values(self, number: int, user: str | None = None) -> dict[str, str]:
        """The instance's values, plus {user} when the template logs in ({password} stays a secret)."""
        values = dict(self.instance[number].values)
        if self.login is not None:
            values[USER] = user or self.login
        return values

    def goal_for(self, number: int) -> str:
        """The goal as the agent reads it: values filled in, {password} left as the placeholder."""
        return fill_placeholders(self.goal, self.values(number), transforms=False)

    def demonstration(self, number: int) -> Workflow | None:
        """The instance's demonstration as a workflow with its placeholders unfilled (None: it has none)."""
        lines = self.instance[number].demo or self.demo
        if not lines:
            return None
        steps = [parse_step(line) for line in lines]
        return Workflow(
            name=f"demo_{self.id.replace('-', '_')}",
            description=self.goal,
            parameters=_placeholders_of(steps),
            steps=steps,
        )


def _placeholders_of(steps: list[WorkflowStep]) -> list[str]:
    return list(dict.fromkeys(name for step in steps for name in step.placeholders()))


class TaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    site: str
    template: list[dict[str, Any]] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Loading and validating
# --------------------------------------------------------------------------------------------------


def _where(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "(top level)"


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "required key is missing"
        parts.append(f"{_where(error)}: {message}")
    return "; ".join(parts)


@dataclass(frozen=True)
class SiteFacts:
    """What a task file is checked against for one site: its account names and its database schema
    (CREATE statements; None when the site has no schema file)."""

    accounts: frozenset[str]
    schema: str | None


@cache
def site_facts() -> dict[str, SiteFacts]:
    """The arena's sites as task files are checked against them (`awm/sites/schema/<site>.sql`)."""
    from awm.sites.registry import SITES, site_accounts
    from awm.sites.site import SCHEMA_DIR

    facts = {}
    for name in SITES:
        path = SCHEMA_DIR / f"{name}.sql"
        facts[name] = SiteFacts(frozenset(site_accounts()[name]), path.read_text() if path.is_file() else None)
    return facts


def _problems(template: Template, sites: dict[str, SiteFacts]) -> list[str]:
    """What is wrong with a parsed template, each as 'key: what was expected'."""
    problems: list[str] = []
    if not _ID.match(template.id):
        problems.append(f"id: '{template.id}' must be lower-case words joined by '-'")
    facts = sites.get(template.site)
    if facts is None:
        problems.append(f"site: unknown site '{template.site}' (known: {', '.join(sorted(sites))})")
    elif template.login is not None and template.login not in facts.accounts:
        known = ", ".join(sorted(facts.accounts))
        problems.append(f"login: '{template.login}' is not an account of {template.site} (known: {known})")
    if not template.start.startswith("/"):
        problems.append(f"start: '{template.start}' must be a path on the site starting with '/'")
    if not template.instance:
        problems.append("instance: a template needs instances ([[template.instance]])")
    if not template.numbers("test"):
        problems.append("instance: a template needs at least one test instance")
    if template.kind == "infeasible" and not template.check.infeasible:
        problems.append("check.infeasible: an infeasible template's check must say infeasible = true")
    reserved = {USER, PASSWORD} if template.login is not None else set()
    secret_used = False
    for n, inst in enumerate(template.instance):
        where = f"instance[{n}]"
        if inst.split == "train" and not (inst.demo or template.demo):
            problems.append(f"{where}.demo: a train instance needs a demonstration (its own or the template's)")
        clash = reserved & set(inst.values)
        if clash:
            problems.append(f"{where}.values: {', '.join(sorted(clash))} is given by login, not by values")
        names = set(inst.values) | reserved
        used = set(PLACEHOLDER.findall(template.goal)) | set(template.check.placeholders())
        for line_no, line in enumerate(inst.demo or template.demo):
            try:
                step = parse_step(line)
            except ValueError as exc:
                problems.append(f"{where}.demo[{line_no}]: {exc}")
                continue
            used |= set(step.placeholders())
        missing = sorted(used - names)
        if missing:
            problems.append(f"{where}.values: no value for {', '.join('{' + m + '}' for m in missing)}")
        secret_used = secret_used or PASSWORD in used
        unbound = sorted(set(template.check.parameters()) - set(inst.values) - reserved)
        if unbound:
            problems.append(f"{where}.values: the check's SQL binds :{', :'.join(unbound)} and this instance has no value for it")
    if template.login is None and PASSWORD in PLACEHOLDER.findall(template.goal):
        problems.append("goal: {password} needs login = '<account>'")
    if template.changes and facts is not None and facts.schema is not None:
        tables = set(re.findall(r'CREATE TABLE (?:IF NOT EXISTS )?"?(\w+)"?', facts.schema))
        unknown = [t for t in template.changes if t not in tables]
        if unknown:
            problems.append(f"changes: {', '.join(unknown)} is not a table of {template.site}'s database")
    if template.check.sql is not None and facts is not None:
        if facts.schema is None:
            problems.append(f"check.sql: no schema file for site {template.site} to check the query against")
        else:
            why = validate_sql(template.check.sql, facts.schema)
            if why is not None:
                problems.append(f"check.sql: {why}")
    return problems


def load_task_file(path: Path, *, sites: dict[str, SiteFacts] | None = None) -> list[Template]:
    """Every template of one file, validated against `sites` (default: the arena's); a `DataError`
    naming the file, the template and the key otherwise."""
    path = Path(path)
    sites = site_facts() if sites is None else sites
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"task file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"task file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"task file {path} is not valid TOML: {exc}") from None
    try:
        file = TaskFile.model_validate(raw)
    except ValidationError as exc:
        raise DataError(f"task file {path}: {_pydantic_message(exc)} (expected `site = \"...\"` and [[template]] tables)") from None
    templates: list[Template] = []
    seen: set[str] = set()
    for n, table in enumerate(file.template):
        name = str(table.get("id", f"#{n + 1}"))
        if not isinstance(table, dict):
            raise DataError(f"task file {path}: template #{n + 1} must be a table")
        try:
            template = Template.model_validate({**table, "site": table.get("site", file.site), "source": str(path)})
        except ValidationError as exc:
            raise DataError(f"task file {path}, template '{name}': {_pydantic_message(exc)}") from None
        problems = _problems(template, sites)
        if template.id in seen:
            problems.insert(0, f"id: '{template.id}' appears twice in this file")
        if problems:
            raise DataError(f"task file {path}, template '{name}': " + "; ".join(problems))
        seen.add(template.id)
        templates.append(template)
    return templates


def builtin_task_files() -> list[Path]:
    return sorted(TASKS_DIR.glob("*.toml"))


_PARSED: dict[tuple[str, int, int], list[Template]] = {}


def _parsed(path: Path) -> list[Template]:
    """`load_task_file`, parsed and validated once per version of the file (its path, size and mtime):
    every episode's reset looks its template up, and validating 55 templates' SQL against their schemas
    cost each reset ~0.7 s. A file that changes is read again; a file that fails is never kept."""
    try:
        stat = Path(path).stat()
    except OSError:
        return load_task_file(path)  # names the missing or unreadable file
    key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _PARSED:
        _PARSED[key] = load_task_file(path)
    return _PARSED[key]


def load_templates(extra_files: list[Path] | None = None) -> dict[str, Template]:
    """Every template awm ships plus those of `extra_files`, by key (`site.id`); a key defined twice
    is an error naming both files."""
    found: dict[str, Template] = {}
    for path in [*builtin_task_files(), *(extra_files or [])]:
        for template in _parsed(path):
            if template.key in found:
                raise DataError(
                    f"task file {path}: template '{template.id}' of site {template.site} is already defined in "
                    f"{found[template.key].source}"
                )
            found[template.key] = template
    return found
