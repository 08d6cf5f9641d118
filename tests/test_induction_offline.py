"""The offline driver and `awm induce`: loading, scope, commit, no-change, dry run, legacy logs, safety."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from awm.config import load_settings
from awm.errors import DataError
from awm.induction.commands import register
from awm.induction.neural import InductionError
from awm.induction.offline import induce_into_store, load_inputs, parse_legacy_log
from awm.llm.factory import make_client
from awm.memory.store import WorkflowStore
from awm.tokens import CharEstimateCounter
from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict, load_trajectory, save_trajectory
from tests.stub_llm_server import Reply, StubLLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"
SCOPE = "miniwob/login-user"


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register(app)
    return app


def test_rule_induction_commits_once_then_reports_no_change(tmp_path: Path):
    store = WorkflowStore(tmp_path / "m.sqlite")
    trajectories = load_inputs(FIXTURES, scope=SCOPE)
    first = induce_into_store(store, SCOPE, trajectories, mode="rule", admission="gt")
    assert first.commit.version is not None and first.commit.version.author == "rule"
    assert first.commit.changed and not first.commit.already_committed
    assert first.admitted_ids == ["login-s1", "login-s2", "login-s3"]
    assert first.report.out_of_scope == ["click-s1"]
    assert "login-s4" in first.report.rejected
    assert first.commit.diff.added == [first.candidates[0].name]
    # the same induction again is found by its commit message: nothing induced, nothing committed
    again = induce_into_store(store, SCOPE, trajectories, mode="rule", admission="gt")
    assert again.commit.already_committed and again.commit.version.version == 1
    assert again.candidates == [] and not again.commit.changed
    # other inputs that teach nothing new: merged, unchanged, and no version for it
    subset = induce_into_store(store, SCOPE, trajectories[1:3], mode="rule", admission="gt")
    assert not subset.commit.already_committed and not subset.commit.changed
    assert subset.commit.version is None and subset.commit.diff is None
    assert [v.version for v in store.log(SCOPE)] == [1]


def test_new_trajectory_updates_provenance_in_a_new_version(tmp_path: Path):
    store = WorkflowStore(tmp_path / "m.sqlite")
    trajectories = load_inputs(FIXTURES, scope=SCOPE)
    induce_into_store(store, SCOPE, trajectories[:2], mode="rule", admission="gt")
    result = induce_into_store(store, SCOPE, trajectories, mode="rule", admission="gt")
    head = store.head(SCOPE)
    assert head.version == 2 and len(head.workflows) == 1
    assert head.workflows[0].provenance.trajectory_ids == ["login-s1", "login-s2", "login-s3"]
    assert result.report.merge.updated == [head.workflows[0].name] and result.report.merge.added == []


def test_nothing_admitted_commits_nothing(tmp_path: Path):
    store = WorkflowStore(tmp_path / "m.sqlite")
    trajectories = load_inputs(FIXTURES, scope=SCOPE)
    with pytest.raises(InductionError, match="no trajectory in scope 'miniwob/login-user' passes"):
        induce_into_store(
            store,
            SCOPE,
            trajectories,
            mode="rule",
            admission="both",
            verdicts={"login-s1": Verdict(judge="failure"), "login-s2": Verdict(judge="unknown")},
        )
    assert store.head(SCOPE) is None


def test_dry_run_shows_a_diff_and_commits_nothing(tmp_path: Path):
    store = WorkflowStore(tmp_path / "m.sqlite")
    result = induce_into_store(
        store, SCOPE, load_inputs(FIXTURES, scope=SCOPE), mode="rule", admission="gt", dry_run=True
    )
    assert result.commit.version is None and result.commit.changed
    assert result.commit.diff is not None and len(result.commit.diff.added) == 1
    assert (result.commit.diff.a, result.commit.diff.b) == (0, 1)
    assert store.head(SCOPE) is None


def test_manual_admission_asks_about_each_workflow(tmp_path: Path):
    store = WorkflowStore(tmp_path / "m.sqlite")
    asked = []
    result = induce_into_store(
        store,
        "miniwob",
        load_inputs(FIXTURES, scope="miniwob"),
        mode="rule",
        admission="manual",
        review=lambda w: asked.append(w.name) or "{button}" in w.name,
    )
    assert len(asked) == 2
    assert [w.name for w in store.head("miniwob").workflows] == ["click {button}"]  # the button the goal names
    assert result.report.declined == [n for n in asked if "{button}" not in n]


def test_jsonl_dataset_and_sorting_by_key(tmp_path: Path):
    files = sorted(FIXTURES.glob("*.json"), reverse=True)
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("\n".join(load_trajectory(f).model_dump_json() for f in files) + "\n")
    loaded = load_inputs(dataset, scope=SCOPE)
    assert [t.trajectory_id for t in loaded] == ["click-s1", "login-s1", "login-s2", "login-s3", "login-s4"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"trajectory_id": "x"}\n')
    with pytest.raises(DataError, match="bad.jsonl: line 1: field 'task'"):
        load_inputs(bad, scope=SCOPE)


LEGACY_LOG = """2024-06-01 10:00:00 - browsergym.experiments.loop - INFO - Goal: Log in as ann
2024-06-01 10:00:01 - browsergym.experiments.loop - INFO - I fill the username box first.

action:
fill('14', 'ann')

2024-06-01 10:00:02 - browsergym.experiments.loop - INFO - Now I submit.

action:
click('18')
__import__('os').system('touch {marker}')
"""


def test_legacy_log_is_parsed_safely_and_never_run(tmp_path: Path):
    marker = tmp_path / "pwned"
    run = tmp_path / "results" / "webarena.7"
    run.mkdir(parents=True)
    (run / "experiment.log").write_text(LEGACY_LOG.format(marker=marker))
    (run / "summary_info.json").write_text(json.dumps({"cum_reward": 1.0}))
    (trajectory,) = load_inputs(tmp_path / "results", scope="webarena/shop")
    assert trajectory.task.task_id == "webarena.7" and trajectory.task.goal == "Log in as ann"
    assert [s.action["name"] for s in trajectory.steps] == ["fill", "click"]
    assert trajectory.steps[0].thought == "I fill the username box first."
    assert trajectory.meta["skipped_lines"] == 1
    assert trajectory.verdict.reward == 1.0
    assert not marker.exists()


def test_code_in_a_trajectory_is_stored_and_induced_as_plain_text(tmp_path: Path):
    marker = tmp_path / "pwned"
    code = f"__import__('os').system('touch {marker}')"
    trajectories = [
        Trajectory(
            trajectory_id=f"evil-{i}",
            # The goal does not state the value verbatim (a stated value would become a {placeholder}).
            task=Task(
                task_id="evil", seed=i, goal=f"Type this: {code[:12]} please", scope="s", benchmark="miniwob"
            ),
            steps=[
                Step(
                    index=0,
                    thought=code,
                    action={"name": "fill", "args": {"bid": "3", "value": code}},
                    action_str=f"fill('3', {code!r})",
                    target=TargetDesc(role="textbox", label=code),
                ),
                Step(index=1, action_str=code, outcome="parse_error"),
            ],
            verdict=Verdict(reward=1.0),
        )
        for i in range(2)
    ]
    for t in trajectories:
        save_trajectory(t, tmp_path / "run" / f"{t.trajectory_id}.json")
    store = WorkflowStore(tmp_path / "m.sqlite")
    induce_into_store(store, "s", load_inputs(tmp_path / "run", scope="s"), mode="rule", admission="gt")
    (workflow,) = store.head("s").workflows
    assert workflow.steps[0].value == code and workflow.steps[0].target.label == code
    assert workflow.steps[0].reasoning == code
    legacy = parse_legacy_log(code, task_id="x", scope="s")
    assert legacy.steps == [] and legacy.meta["skipped_lines"] == 1
    answer = f"## type_it\nType the text.\n\nfill('[textbox] Name', {code!r})\n\nclick('[button] OK')\n"
    with StubLLMServer([Reply(text=answer)]) as stub:
        settings = load_settings(
            overrides={
                "llm": {
                    "backend": "openai",
                    "base_url": stub.base_url,
                    "api_key": "x",
                    "model": "stub",
                    "cache": False,
                }
            }
        )
        result = induce_into_store(
            store,
            "s",
            trajectories,
            mode="neural",
            admission="gt",
            client=make_client(settings),
            counter=CharEstimateCounter(),
        )
        assert code in stub.requests[0].body["messages"][1]["content"]
    assert result.commit.version is not None
    assert store.head("s").workflows[-1].steps[0].value == code
    assert not marker.exists()


def test_cli_rule_induction_prints_version_and_diff_then_no_change(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES, run)
    db = tmp_path / "m.sqlite"
    args = [
        "induce",
        "--from",
        str(run),
        "--scope",
        SCOPE,
        "--mode",
        "rule",
        "--admit",
        "gt",
        "--db",
        str(db),
    ]
    runner = CliRunner()
    result = runner.invoke(_app(), args)
    assert result.exit_code == 0, result.output
    assert "committed miniwob/login-user version 1" in result.output
    assert "+ fill Username, fill Password, click Login" in result.output
    assert "fill('[textbox] Username', '{username}')" in result.output
    again = runner.invoke(_app(), args)
    assert again.exit_code == 0 and "no change: these inputs were committed before" in again.output
    assert WorkflowStore(db).head(SCOPE).version == 1


def test_cli_help_has_an_example():
    result = CliRunner().invoke(_app(), ["induce", "--help"])
    assert result.exit_code == 0 and "Example: awm induce" in result.output


def test_cli_neural_induction_against_a_stub_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWM_HOME", str(tmp_path / "home"))  # the response cache lands in tmp
    answer = "## log_in\nLog in.\n\nfill('[textbox] Username', '{username}')\n\nfill('[textbox] Password', '{password}')\n"
    db = tmp_path / "m.sqlite"
    with StubLLMServer([Reply(text=answer)]) as stub:
        args = [
            "induce",
            "--from",
            str(FIXTURES),
            "--scope",
            SCOPE,
            "--mode",
            "neural",
            "--admit",
            "gt",
            "--db",
            str(db),
            "--backend",
            "openai",
            "--base-url",
            stub.base_url,
            "--model",
            "stub",
        ]
        result = CliRunner().invoke(_app(), args)
        assert len(stub.requests) == 1
    assert result.exit_code == 0, result.output
    assert "model calls" in result.output and "+ log_in" in result.output
    (workflow,) = WorkflowStore(db).head(SCOPE).workflows
    assert workflow.provenance.mode == "neural" and workflow.provenance.model == "stub"


def test_a_site_scope_arm_on_one_template_learns_from_all_the_sites_templates() -> None:
    """Offline site scope on change-priority alone still induces set-milestone's and ticket-priority's
    memory from the demonstrations: those are what its episodes read (the site's other templates)."""
    from awm.pipeline.config import parse_pipeline_table
    from awm.pipeline.offline import site_scopes_of

    arena = Path(__file__).parent / "fixtures" / "arena"
    table = {"name": "probe", "benchmark": "sites", "tasks": ["trac.change-priority"], "memory": "offline",
             "offline_from": [str(arena)], "policy": "scripted"}  # fmt: skip
    task = Task(task_id="browsergym/sites.trac.change-priority", scope="sites/trac/change-priority", benchmark="sites")
    site = parse_pipeline_table({**table, "scope": "site"})
    assert site_scopes_of(site, [task], site.offline_from) == [
        "sites/trac/change-priority", "sites/trac/set-milestone", "sites/trac/ticket-priority"
    ]  # fmt: skip
    assert site_scopes_of(parse_pipeline_table(table), [task], site.offline_from) == []  # template scope: its own
