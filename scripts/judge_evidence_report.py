"""Offline: how much of the judge's work the trajectory settles alone, against ground truth (no model).

For each finished episode of a run folder it prints the judge's no-model decision
(`awm.evaluation.evidence.pre_decide`: failure by the end, by no executed action, by a missing goal
value, by too few actions; success when executed actions used every goal value before the page closed
the task; or "to model") and the goal-value checks, next to the ground truth (full-reward rule,
`awm.evaluation.success`). Then the figures: the precision and recall of the no-model successes alone
(the judge's figures if the model said no to everything), and the best case with the model (it says
yes to every episode it is asked about): the judge's precision then, and the ceiling of its recall.

Why: it tells us how much the model must add before anyone spends model time on an audit.

With `--judge` it then asks the configured LLM judge (`awm.evaluation.judge.judge_trajectory`, the
embedded model by default; `--config` for another) about every episode and prints the judge audit
against ground truth (`awm.evaluation.audit`): the no-model decisions cost nothing, the rest is one
short yes/no call each. The verdicts are printed, never written into RUN.

Read-only: it only reads `RUN/trajectories/*.json` (or `*.json` under RUN) and writes nothing there, so
it is safe on a run that is still being written. Episodes still running are skipped.

Run: .venv/bin/python scripts/judge_evidence_report.py RUN [--quiet] [--json] [--judge [--config FILE] [--ask-model]]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from awm.errors import DataError
from awm.evaluation.audit import JudgeAudit, audit
from awm.evaluation.evidence import PreDecision, pre_decide, pre_judge_figures
from awm.evaluation.judge import judge_trajectory
from awm.evaluation.success import ground_truth_success
from awm.llm.base import LLMClient
from awm.trajectory import Trajectory, load_trajectory


def load_finished(run: Path) -> list[Trajectory]:
    """The run's finished trajectories, sorted by task key; unreadable or running ones are skipped."""
    folder = run / "trajectories" if (run / "trajectories").is_dir() else run
    out: list[Trajectory] = []
    for path in sorted(folder.glob("*.json")):
        try:
            trajectory = load_trajectory(path)
        except DataError as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        if trajectory.end != "running":
            out.append(trajectory)
    return sorted(out, key=lambda t: (t.task.key, t.trajectory_id))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _truth_word(truth: bool | None) -> str:
    return {True: "SUCCESS", False: "failure", None: "no reward"}[truth]


def episode_lines(trajectory: Trajectory, decision: PreDecision, truth: bool | None) -> list[str]:
    """One header line (id, end, decision, ground truth) and one line per goal-value check."""
    label = {"ask_model": "to model", "success": "SUCCESS"}.get(decision.label, "FAIL") + f" ({decision.rule})"
    lines = [
        f"{trajectory.trajectory_id:<50} end={trajectory.end:<10} {label:<26} gt={_truth_word(truth)}",
        f"    goal: {trajectory.task.goal}",
    ]
    if decision.label == "failure" and decision.rule != "literal":
        lines.append(f"    {decision.reason}")
    lines += [f"    [{c.status}] {c.render()}" for c in decision.checks]
    return lines


def report(trajectories: Iterable[Trajectory], *, quiet: bool = False) -> dict[str, object]:
    """Print the per-episode lines (unless `quiet`) and the figures; return the figures as a dict."""
    rows = [(t, pre_decide(t), ground_truth_success(t.verdict)) for t in trajectories]
    if not quiet:
        for t, decision, truth in rows:
            print("\n".join(episode_lines(t, decision, truth)))
    figures = pre_judge_figures(rows)
    summary: dict[str, object] = {
        "episodes": figures.episodes,
        "with_ground_truth": figures.with_truth,
        "decided_by_rule": dict(sorted(figures.by_rule.items())),
        "ground_truth_successes": figures.truth_successes,
        "evidence_successes": figures.evidence_successes,
        "evidence_false_successes": figures.evidence_false_successes,
        "evidence_precision": figures.evidence_precision,
        "evidence_recall": figures.evidence_recall,
        "to_model": figures.to_model,
        "successes_to_model": figures.successes_to_model,
        "failures_to_model": figures.failures_to_model,
        "precision_if_model_says_yes": figures.precision,
        "recall_ceiling": figures.recall,
        "true_successes_failed_without_model": figures.false_failures,
    }
    called = figures.evidence_successes + len(figures.evidence_false_successes)
    print(
        "\n".join(
            [
                "",
                f"episodes: {figures.episodes} ({figures.with_truth} with ground truth, "
                f"{figures.truth_successes} true successes)",
                "decided by rule: "
                + ", ".join(f"{k}={v}" for k, v in sorted(figures.by_rule.items()))
                + "  (none = goes to the model)",
                f"success without the model: {called} ({figures.evidence_successes} true successes): "
                f"precision {_pct(figures.evidence_precision)}, recall {_pct(figures.evidence_recall)}",
                f"  called success wrongly: {', '.join(figures.evidence_false_successes) or 'none'}",
                f"to the model: {figures.to_model} ({figures.successes_to_model} true successes, "
                f"{figures.failures_to_model} true failures the model must catch)",
                f"if the model said yes to all: precision {_pct(figures.precision)}, recall {_pct(figures.recall)}",
                f"true successes failed without the model: {', '.join(figures.false_failures) or 'none'}",
            ]
        )
    )
    return summary


def judge_and_audit(
    trajectories: list[Trajectory], client: LLMClient, *, ask_model: bool | None = None
) -> JudgeAudit:
    """Judge every episode with `client` (in memory only) and audit the labels against ground truth;
    `ask_model` as in `judge_trajectory` (None: the embedded model is not asked)."""
    judged = []
    for t in trajectories:
        verdict = judge_trajectory(client, t, ask_model=ask_model)
        print(f"{t.trajectory_id:<50} judge={verdict.judge:<8} {verdict.judge_reason[:160]}")
        judged.append(t.model_copy(update={"verdict": verdict}))
    return audit(judged)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "run", type=Path, help="a run folder (with trajectories/) or a folder of trajectory files"
    )
    parser.add_argument("--quiet", action="store_true", help="figures only, no per-episode lines")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    parser.add_argument("--judge", action="store_true", help="then ask the LLM judge and print its audit")
    parser.add_argument("--config", type=Path, default=None, help="settings TOML for the judge's client")
    parser.add_argument(
        "--ask-model",
        action="store_true",
        help="ask the model what the evidence leaves open even when it is the embedded one (to measure it)",
    )
    args = parser.parse_args(argv)
    if not args.run.is_dir():
        parser.error(f"{args.run}: not a folder")
    trajectories = load_finished(args.run)
    summary = report(trajectories, quiet=args.quiet)
    if args.json:
        print(json.dumps(summary, indent=2))
    if args.judge:
        from awm.config import load_settings
        from awm.llm.factory import make_client

        client = make_client(load_settings(args.config))
        ask = True if args.ask_model else None
        print("\n" + judge_and_audit(trajectories, client, ask_model=ask).to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
