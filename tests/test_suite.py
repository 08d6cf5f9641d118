"""The adversarial suite: its task list, a small smoke of `awm suite run` (both recovery modes, real
Chromium), and the web-agent path on the same pages (a scripted policy: no model needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from awm.config import load_settings
from awm.suite import PAGES_DIR, tasks_by_id
from awm.webarena.harness import Decision, DecisionContext

ROOT = Path(__file__).resolve().parent.parent
REQUIRED_VARIANTS = {
    "label_change", "double_label_change", "renamed_field", "rename_under_overlay", "late_overlay",
    "overlay_move", "banner_reappears", "decoy_button", "moved_button", "aria_label_quotes",
    "prompt_injection", "disabled_after_done", "native_select", "iframe_button", "enter_only_search",
    "dead_button", "duplicate_labels", "below_fold", "delayed_element",
}  # fmt: skip
SMOKE = ["signin-plain", "signin-late_overlay", "newsletter-label_change"]


def test_the_suite_has_every_required_variant_on_real_pages() -> None:
    tasks = tasks_by_id()
    assert len(tasks) >= 36
    plain = [t for t in tasks.values() if t.variant == "plain"]
    assert len(plain) >= len(tasks) // 4 and {t.page.split("/")[0] for t in plain} == {
        t.page.split("/")[0] for t in tasks.values()
    }  # every surface has its plain page
    assert REQUIRED_VARIANTS <= {t.variant for t in tasks.values()}
    for task in tasks.values():
        assert (PAGES_DIR / task.page).is_file(), task.page
        assert task.steps and task.goal


@pytest.mark.browser
def test_suite_run_with_and_without_recovery_writes_the_ablation(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    for mode in ("off", "on"):
        done = subprocess.run(
            [sys.executable, "-m", "awm.cli", "suite", "run", "--recovery", mode, "--tasks", ",".join(SMOKE), "--out", str(out)],
            capture_output=True, text=True, cwd=ROOT, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    off = {t["task_id"]: t for t in json.loads((out / "run_off.json").read_text())["tasks"]}
    on = {t["task_id"]: t for t in json.loads((out / "run_on.json").read_text())["tasks"]}
    assert off["signin-plain"]["success"] and on["signin-plain"]["success"]
    assert (off["signin-late_overlay"]["success"], off["signin-late_overlay"]["failure"]) == (
        False,
        "action_error",
    )
    assert off["newsletter-label_change"]["failure"] == "target_not_found"
    assert off["newsletter-label_change"]["error"].startswith("step ")  # names the step that broke
    assert all(t["success"] for t in on.values())
    assert on["signin-late_overlay"]["recoveries"] >= 1 and on["signin-plain"]["recoveries"] == 0
    events = [
        json.loads(line)["event"]
        for line in (out / "logs" / "signin-late_overlay-on.jsonl").read_text().splitlines()
    ]
    assert {"observe", "failure", "recovery", "step_ok", "task_success"} <= set(events)
    results = (out / "RESULTS.md").read_text()
    assert "| on | 3/3 |" in results and "| off | 1/3 |" in results
    assert "target_not_found: 1" in results and "action_error: 1" in results


def test_an_unknown_suite_task_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "suite", "run", "--tasks", "signin-nope", "--out", str(tmp_path / "s")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "signin-nope" in done.stderr and "signin-plain" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "s").exists()


class ClaimsDone:
    """Says the task is done without doing it: a clean end that must not count as success."""

    name = "claims-done"
    memory = None

    def decide(self, ctx: DecisionContext) -> Decision:
        return Decision(text="The task is done.\nsend_msg_to_user('I signed you in.')")


@pytest.mark.browser
def test_the_web_agent_path_judges_by_the_page_not_by_what_the_agent_says(tmp_path: Path) -> None:
    from awm.suite.agent_run import run_suite_agent

    tasks = tasks_by_id()
    run = run_suite_agent(
        [tasks["signin-plain"], tasks["settings-prompt_injection"]],
        out=tmp_path,
        settings=load_settings(),
        policy_for=lambda _task: ClaimsDone(),
        max_steps=3,
    )
    assert [(t.task_id, t.success, t.end, t.clean_end) for t in run.tasks] == [
        ("signin-plain", False, "answered", True),
        ("settings-prompt_injection", False, "answered", True),
    ]
    assert run.agent == "claims-done" and (tmp_path / "run_agent.json").is_file()
    assert "## The web agent (claims-done) on the same pages" in (tmp_path / "RESULTS.md").read_text()


def test_a_wrong_action_is_an_executed_action_on_a_forbidden_element() -> None:
    from awm.grounding.model import Target
    from awm.suite.agent_run import wrong_actions
    from awm.trajectory import Step, TargetDesc, Task, Trajectory

    steps = [
        Step(index=0, action_str="click('12')", target=TargetDesc(role="button", label="Save")),
        Step(index=1, action_str="click('31')", target=TargetDesc(role="button", label="Delete  account")),
        Step(
            index=2,
            action_str="click('31')",
            target=TargetDesc(role="button", label="Delete account"),
            outcome="action_error",
        ),
    ]
    trajectory = Trajectory(
        trajectory_id="t", task=Task(task_id="x", scope="s", benchmark="suite"), steps=steps
    )
    assert wrong_actions(trajectory, [Target(role="button", text="Delete account")]) == ["click('31')"]
    assert wrong_actions(trajectory, [Target(role="link", text="Delete account")]) == []
