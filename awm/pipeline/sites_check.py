"""Every template validated by its own demonstration, with no model: the check must fail on the
site's pristine state and pass after the scripted replay of a train instance's demonstration.

Why both halves: a check that already passes before anything was done (a query that matches a seeded
row, a URL the start page has) would count every episode as solved, and a demonstration that does not
make its check pass means the template, its data or its check is wrong. Either is a defect of the
template, found before any model sees it.

It lives in the driver's package because it drives the browser consumer (`awm.webarena`'s harness and
replay policy), which sits above the sites in the import graph; `awm sites check` is its command.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

from awm.config import BrowserSettings
from awm.files import write_text_atomic
from awm.sites import lifecycle
from awm.sites.checks import Evidence, evaluate
from awm.sites.registry import get_site
from awm.sites.templates import Template, load_templates
from awm.trajectory import Task
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.policies import ReplayPolicy


@dataclass
class TemplateCheck:
    """The verdict on one instance of one template."""

    key: str
    instance: int
    before: str  # the check's detail on the pristine state
    failed_before: bool
    after: str  # the check's detail after the replay (or why the replay did not run)
    passed_after: bool
    end: str = ""
    seconds: float = 0.0
    trajectory_id: str = ""
    sub_steps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed_before and self.passed_after


def _before(template: Template, number: int) -> tuple[bool, str]:
    """Does the check fail on the pristine state (no answer given, the start page open)?

    The check reads the pristine database itself (read-only), not a reset live copy: the episode that
    follows resets the site anyway, and a second reset is a restart for Trac."""
    site = get_site(template.site)
    state = lifecycle.up(site)
    evidence = Evidence(url=state.url + template.start, page_text="", answer=None, infeasible=False, ended=True)
    outcome = evaluate(template.check, template.values(number), site.pristine / site.database_file, evidence)
    return not outcome.passed, outcome.detail


def check_instance(session: BrowserSession, template: Template, number: int, out: Path) -> TemplateCheck:
    """Reset, check before, replay the demonstration in a real browser, check after."""
    started = time.monotonic()
    failed_before, before = _before(template, number)
    workflow = template.demonstration(number)
    assert workflow is not None, "train instances have demonstrations (checked when the file loads)"
    values = {k: v for k, v in template.values(number).items()}
    task = Task(
        task_id=f"browsergym/sites.{template.key}", scope=template.scope, benchmark="sites", seed=number,
        meta={"max_steps": 1, **({"task_kwargs": {"task_files": [template.source]}} if _external(template) else {})},
    )  # fmt: skip
    policy = ReplayPolicy(workflow, values, scope=template.scope)
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=1))
    write_text_atomic(out / "trajectories" / f"{trajectory.trajectory_id}.json", trajectory.to_json())
    info = trajectory.meta.get("env_info", {})
    detail = str(info.get("check") or "")
    call = trajectory.workflow_calls[0] if trajectory.workflow_calls else None
    if call is not None and not call.completed:
        detail = f"the demonstration stopped: {call.error}" + (f" ({detail})" if detail else "")
    elif not detail:
        first = next((s.error for s in trajectory.steps if s.error), "")
        detail = f"no check ran: {first or trajectory.end}"
    subs = [f"{s.action_str or s.action} -> {s.outcome}" for s in trajectory.steps if s.called_by is not None]
    return TemplateCheck(
        key=template.key, instance=number, before=before, failed_before=failed_before, after=detail,
        passed_after=(trajectory.verdict.reward or 0.0) >= 1.0, end=trajectory.end,
        seconds=round(time.monotonic() - started, 2), trajectory_id=trajectory.trajectory_id, sub_steps=subs,
    )  # fmt: skip


def _external(template: Template) -> bool:
    from awm.sites.templates import TASKS_DIR

    return not template.source.startswith(str(TASKS_DIR))


def check_templates(
    sites: set[str],
    wanted: set[str],
    task_files: list[Path],
    *,
    all_instances: bool,
    out: Path,
    console: Console | None = None,
) -> list[TemplateCheck]:
    """Check the templates of `sites` (only the `wanted` ids when given), one train instance each or
    all of them; each site is started if it is down and left running."""
    templates = [
        t for t in load_templates(task_files).values() if t.site in sites and (not wanted or t.id in wanted)
    ]
    results: list[TemplateCheck] = []
    out.mkdir(parents=True, exist_ok=True)
    with BrowserSession(BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0)) as session:
        for template in templates:
            numbers = template.numbers("train")
            for number in numbers if all_instances else numbers[:1]:
                result = check_instance(session, template, number, out)
                results.append(result)
                if console is not None:
                    mark = "ok " if result.ok else "BAD"
                    console.print(f"{mark} {template.key}#{number} ({result.seconds:.1f} s)", markup=False)
    write_text_atomic(out / "check.json", json.dumps([asdict(r) | {"ok": r.ok} for r in results], indent=2) + "\n")
    write_text_atomic(out / "CHECK.md", render_check(results))
    return results


def render_check(results: list[TemplateCheck]) -> str:
    good = sum(r.ok for r in results)
    lines = [
        "# Arena templates checked by demonstration",
        "",
        f"{good} of {len(results)} instance(s) ok: the check failed on the pristine site and passed after the "
        "scripted replay of the demonstration.",
        "",
        "| template | instance | fails before | passes after | s | detail |",
        "|---|---:|---|---|---:|---|",
    ]
    for r in results:
        detail = r.after if r.failed_before else f"passes BEFORE anything was done: {r.before}"
        lines.append(
            f"| {r.key} | {r.instance} | {'yes' if r.failed_before else 'NO'} | {'yes' if r.passed_after else 'NO'} | "
            f"{r.seconds:.1f} | {detail.replace('|', '/')[:200]} |"
        )
    return "\n".join(lines) + "\n"
