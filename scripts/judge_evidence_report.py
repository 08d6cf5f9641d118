"""Offline: how much of the judge's work the trajectory settles alone, against ground truth (no model).

For each finished episode of a run folder it prints the judge's no-model decision
(`awm.evaluation.evidence.pre_decide`: failure by the end, by no executed action, by a missing goal
value, or "to model") and the goal-value checks, next to the ground truth (full-reward rule,
`awm.evaluation.success`). Then the figures the no-model part alone reaches when every "to model"
episode is counted as success (the model's best case): its precision (the judge's precision if the
model said yes to everything) and the share of true successes that survive to the model question
(the ceiling of the judge's recall). It also shows the stricter variant in which a goal value found
only on a page (no action used it) counts as missing, to weigh that rule on real data.

Why: it tells us how much the model must add before anyone spends model time on an audit.

With `--judge` it then asks the configured LLM judge (`awm.evaluation.judge.judge_trajectory`, the
embedded model by default; `--config` for another) about every episode and prints the judge audit
against ground truth (`awm.evaluation.audit`): the no-model decisions cost nothing, the rest is one
short yes/no call each. The verdicts are printed, never written into RUN.

Read-only: it only reads `RUN/trajectories/*.json` (or `*.json` under RUN) and writes nothing there, so
it is safe on a run that is still being written. Episodes still running are skipped.

Run: .venv/bin/python scripts/judge_evidence_report.py RUN [--quiet] [--json] [--judge [--config FILE]]
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


def strict_label(decision: PreDecision) -> str:
    """The decision if a goal value seen only on a page (never used by an action) counted as missing."""
    if decision.label == "ask_model" and any(c.status == "page" for c in decision.checks):
        return "failure"
    return decision.label


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _truth_word(truth: bool | None) -> str:
    return {True: "SUCCESS", False: "failure", None: "no reward"}[truth]


def episode_lines(trajectory: Trajectory, decision: PreDecision, truth: bool | None) -> list[str]:
    """One header line (id, end, decision, ground truth) and one line per goal-value check."""
    label = "to model" if decision.label == "ask_model" else f"FAIL ({decision.rule})"
    lines = [
        f"{trajectory.trajectory_id:<50} end={trajectory.end:<10} {label:<18} gt={_truth_word(truth)}",
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
    strict_rows = [(t, d, gt) for t, d, gt in rows if gt is not None and strict_label(d) == "ask_model"]
    strict_tp = sum(1 for _, _, gt in strict_rows if gt)
    strict_precision = strict_tp / len(strict_rows) if strict_rows else None
    strict_surviving = strict_tp / figures.truth_successes if figures.truth_successes else None
    summary: dict[str, object] = {
        "episodes": figures.episodes,
        "with_ground_truth": figures.with_truth,
        "decided_by_rule": dict(sorted(figures.by_rule.items())),
        "ground_truth_successes": figures.truth_successes,
        "to_model": figures.to_model,
        "successes_to_model": figures.successes_to_model,
        "failures_to_model": figures.failures_to_model,
        "no_model_precision": figures.precision,
        "successes_surviving": figures.recall,
        "true_successes_failed_without_model": figures.false_failures,
        "strict_to_model": len(strict_rows),
        "strict_precision": strict_tp / len(strict_rows) if strict_rows else None,
        "strict_successes_surviving": strict_tp / figures.truth_successes
        if figures.truth_successes
        else None,
    }
    print(
        "\n".join(
            [
                "",
                f"episodes: {figures.episodes} ({figures.with_truth} with ground truth, "
                f"{figures.truth_successes} true successes)",
                "decided by rule: "
                + ", ".join(f"{k}={v}" for k, v in sorted(figures.by_rule.items()))
                + "  (none = goes to the model)",
                f"to the model: {figures.to_model} ({figures.successes_to_model} true successes, "
                f"{figures.failures_to_model} true failures the model must catch)",
                f"no-model part, 'to model' counted as success: precision {_pct(figures.precision)}, "
                f"true successes surviving {_pct(figures.recall)}",
                f"true successes failed without the model: {', '.join(figures.false_failures) or 'none'}",
                f"strict variant (page-only values count as missing): {len(strict_rows)} to the model, "
                f"precision {_pct(strict_precision)}, successes surviving {_pct(strict_surviving)}",
            ]
        )
    )
    return summary


def judge_and_audit(trajectories: list[Trajectory], client: LLMClient) -> JudgeAudit:
    """Judge every episode with `client` (in memory only) and audit the labels against ground truth."""
    judged = []
    for t in trajectories:
        verdict = judge_trajectory(client, t)
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
        print("\n" + judge_and_audit(trajectories, client).to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
