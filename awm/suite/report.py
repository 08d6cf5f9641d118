"""RESULTS.md of a suite folder, generated from its run files (`run_on.json`, `run_off.json`).

Pure rendering from the stored reports: the recovery ablation table (plain and adversarial tasks apart),
the failure taxonomy of the run without recovery (each failure with its class and error), and per task
the recoveries the run with recovery spent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from awm.files import write_text_atomic
from awm.suite.results import AGENT_RUN_JSON, AgentSuiteRun, SuiteRun, load_agent_run, load_run, run_file


def _row(name: str, run: SuiteRun | None) -> str:
    if run is None:
        return f"| {name} | not run | | | | |"
    plain = [t for t in run.tasks if t.variant == "plain"]
    adversarial = [t for t in run.tasks if t.variant != "plain"]
    return (
        f"| {name} | {run.solved}/{len(run.tasks)} | {sum(t.success for t in plain)}/{len(plain)} | "
        f"{sum(t.success for t in adversarial)}/{len(adversarial)} | {sum(t.recoveries for t in run.tasks)} | "
        f"{run.seconds:.1f} |"
    )


def render_results(on: SuiteRun | None, off: SuiteRun | None, agent: AgentSuiteRun | None = None) -> str:
    lines = [
        "# Adversarial suite: grounded executor, recovery on vs off",
        "",
        "Success is what the page shows (each task's postcondition), checked after the last step.",
        "",
        "| recovery | solved | plain | adversarial | recoveries | seconds |",
        "|---|---:|---:|---:|---:|---:|",
        _row("on", on),
        _row("off", off),
        "",
    ]
    if off is not None:
        failures = [t for t in off.tasks if not t.success]
        counts = Counter(t.failure or "?" for t in failures)
        lines += ["## Failure taxonomy without recovery", ""]
        lines += [", ".join(f"{k}: {v}" for k, v in counts.most_common()) or "no failure", ""]
        if failures:
            lines += ["| task | variant | class | error |", "|---|---|---|---|"]
            for t in failures:
                error = t.error.replace("|", "\\|")
                lines.append(f"| {t.task_id} | {t.variant} | {t.failure} | {error} |")
            lines.append("")
    if on is not None:
        lines += ["## Recoveries spent with recovery on", ""]
        lines += [
            "| task | variant | solved | steps | attempts | recoveries | error |",
            "|---|---|---|---:|---:|---:|---|",
        ]
        for t in on.tasks:
            error = t.error.replace("|", "\\|")
            lines.append(
                f"| {t.task_id} | {t.variant} | {'yes' if t.success else 'no'} | {t.steps_completed}/{t.steps_total} | "
                f"{t.attempts} | {t.recoveries} | {error} |"
            )
        lines.append("")
    if agent is not None:
        lines += _agent_lines(agent)
    return "\n".join(lines)


def _agent_lines(agent: AgentSuiteRun) -> list[str]:
    solved = [t for t in agent.tasks if t.success]
    lines = [
        f"## The web agent ({agent.agent}) on the same pages",
        "",
        "Success is the task's postcondition on the agent's page. A clean end is an episode the agent ended "
        "itself (an answer, finish or infeasible); a stuck end is one the loop detector stopped; a wrong action "
        "acted on an element the task forbids (a decoy, what injected text asked for).",
        "",
        "| solved | solved and ended cleanly | stuck ends | tasks with a wrong action | seconds |",
        "|---:|---:|---:|---:|---:|",
        f"| {len(solved)}/{len(agent.tasks)} | {sum(t.clean_end for t in solved)}/{len(solved)} | "
        f"{sum(t.stuck for t in agent.tasks)} | {sum(bool(t.wrong_actions) for t in agent.tasks)} | {agent.seconds:.0f} |",
        "",
        "| task | variant | solved | end | steps | wrong actions |",
        "|---|---|---|---|---:|---|",
    ]
    for t in agent.tasks:
        wrong = ", ".join(t.wrong_actions).replace("|", "\\|") or "-"
        lines.append(
            f"| {t.task_id} | {t.variant} | {'yes' if t.success else 'no'} | {t.end} | {t.steps} | {wrong} |"
        )
    lines.append("")
    return lines


def write_results(out: Path) -> Path:
    """Regenerate OUT/RESULTS.md from the run files there (atomic write)."""
    out = Path(out)
    agent = load_agent_run(out / AGENT_RUN_JSON)
    text = render_results(load_run(run_file(out, True)), load_run(run_file(out, False)), agent)
    return write_text_atomic(out / "RESULTS.md", text)
