"""`awm ablate` on Mind2Web: config checks, the statistics by hand, and an end-to-end ablation (arms off,
offline, online) on the fixture data with the stub model, whose RESULTS.md numbers are recomputed from
each arm's predictions with `awm.mind2web.metrics.score`."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from awm.errors import ConfigError, StageError
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.metrics import score
from awm.mind2web.solve import predictions_for
from awm.pipeline.ablation import arm_dir, load_ablation, run_ablation
from awm.pipeline.mind2web_report import (
    NO_BUDGET_MATCH,
    USAGE_JSON,
    Mind2WebAblationReport,
    TaskResult,
    compare,
    metric_stats,
)
from awm.pipeline.mind2web_report_render import PLOT_METRICS
from awm.pipeline.report import AblationReport
from awm.pipeline.stats import bootstrap_mean_ci, bootstrap_ratio_ci, sign_test_p, wilson_interval
from awm.trajectory import load_trajectory
from tests.stub_llm_server import Reply, StubLLMServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"
METRIC_KEYS = ("element_accuracy", "action_f1", "step_success_rate", "task_success_rate")


@pytest.fixture(scope="module")
def records():
    return list(iter_records(FIXTURES, "test_task"))


def gold_answer(action) -> str:
    op, value, target = action.operation.op, action.operation.value, action.target_id or "0"
    return f"{op} [{target}]" if op == "CLICK" else f"{op} [{target}] [{value}]"


def write_scores(path: Path, records) -> Path:
    """MindAct-style scores with the positives first (recall@k 1 wherever a positive exists)."""
    table = {}
    for r in records:
        for a in r.actions:
            pos = {c.backend_node_id for c in a.pos_candidates}
            table[step_key(r.annotation_id, a.action_uid)] = {
                c.backend_node_id: (1.0 if c.backend_node_id in pos else 0.0)
                for c in [*a.pos_candidates, *a.neg_candidates]
            }
    path.write_bytes(pickle.dumps({"scores": table}))
    return path


def write_config(path: Path, *, base_url: str, scores: Path, arms: str, extra: str = "") -> Path:
    path.write_text(
        f"""
{extra}
[llm]
backend = "openai"
base_url = "{base_url}"
model = "stub"
cache = false
max_tokens = 32
context_window = 8192

[pipeline]
name = "m2w"
benchmark = "mind2web"
data = "{FIXTURES}"
split = "test_task"
ranker = "mindact"
scores = "{scores}"
top_k = 5
induction = "rule"
{arms}
"""
    )
    return path


ARMS = """
[[arm]]
name = "off"
memory = "off"

[[arm]]
name = "offline"
memory = "offline"

[[arm]]
name = "online"
memory = "online"
"""


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch):
    for name in ("AWM_MODEL", "AWM_BACKEND", "AWM_MEMORY_DB", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWM_HOME", str(tmp_path / "home"))
    return tmp_path


# --- config ---------------------------------------------------------------------------------------------


def test_config_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    scores = tmp_path / "none.pkl"
    scores.write_bytes(pickle.dumps({"scores": {}}))
    miniwob = '[pipeline]\ntasks = ["click-test"]\npolicy = "scripted"\ntop_k = 5\n[[arm]]\nname = "x"\n'
    path.write_text(miniwob)
    with pytest.raises(ConfigError, match=r"field 'top_k' is a Mind2Web field.*benchmark = 'mind2web'"):
        load_ablation(path)
    path.write_text('[pipeline]\nbenchmark = "mind2web"\n[[arm]]\nname = "x"\n')
    with pytest.raises(
        ConfigError, match=r"field 'data' is missing.*huggingface.co/datasets/osunlp/Mind2Web"
    ):
        load_ablation(path)
    path.write_text(
        f'[pipeline]\nbenchmark = "mind2web"\ndata = "{tmp_path / "nowhere"}"\n[[arm]]\nname = "x"\n'
    )
    with pytest.raises(ConfigError, match=r"field 'data': the Mind2Web folder .*nowhere.* does not exist"):
        load_ablation(path)
    head = f'[pipeline]\nbenchmark = "mind2web"\ndata = "{FIXTURES}"\n'
    path.write_text(head + 'max_steps = 3\n[[arm]]\nname = "x"\n')
    with pytest.raises(ConfigError, match="field 'max_steps' does not apply to benchmark 'mind2web'"):
        load_ablation(path)
    path.write_text(head + '[[arm]]\nname = "x"\nsplit = "test_domain"\n')
    with pytest.raises(ConfigError, match=r"arm 'x' sets split"):
        load_ablation(path)
    path.write_text("budget_matched = true\n" + head + '[[arm]]\nname = "x"\nmemory = "off"\n')
    with pytest.raises(ConfigError, match="'budget_matched' does not apply to benchmark 'mind2web'"):
        load_ablation(path)
    path.write_text(head + 'split = "test_website"\n[[arm]]\nname = "x"\n')  # the fixtures lack it
    with pytest.raises(ConfigError, match="has no test_website/ folder"):
        load_ablation(path)
    path.write_text(head + 'page_format = "html"\n[[arm]]\nname = "x"\n')
    with pytest.raises(ConfigError, match="field 'page_format': must be one of"):
        load_ablation(path)
    path.write_text(head + '[[arm]]\nname = "x"\nmemory = "fixed"\n')
    with pytest.raises(ConfigError, match="memory 'fixed' is not offered for mind2web"):
        load_ablation(path)


def test_shipped_config_loads_once_the_data_is_there(tmp_path: Path) -> None:
    shipped = ROOT / "configs" / "mind2web-ablation.toml"
    text = shipped.read_text()
    assert 'data = "data/mind2web"' in text
    if not (Path.cwd() / "data" / "mind2web").exists():
        with pytest.raises(ConfigError, match=r"field 'data'.*osunlp/Mind2Web"):
            load_ablation(shipped)
    copy = tmp_path / "m2w.toml"
    copy.write_text(text.replace('data = "data/mind2web"', f'data = "{FIXTURES}"'))
    plan = load_ablation(copy)
    assert [a.name for a in plan.arms] == ["off", "offline", "online"]
    assert [a.config.memory for a in plan.arms] == ["off", "offline", "online"]
    assert plan.base.benchmark == "mind2web" and plan.base.data == FIXTURES.resolve()
    assert (plan.base.ranker, plan.base.top_k, plan.base.induction) == ("minilm", 10, "neural")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[pipeline]\ntasks = ["click-test"]\nsplit = "test_task"\n[[arm]]\nname = "x"\n', "field 'split' is a Mind2Web field"),
        ('[pipeline]\nbenchmark = "mind2web"\ndata = "{missing}"\n[[arm]]\nname = "x"\n', "field 'data'"),
    ],
    ids=["mind2web-field-on-miniwob", "missing-data"],
)  # fmt: skip
def test_bad_config_is_exit_2_and_writes_nothing(tmp_path: Path, body: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(body.format(missing=tmp_path / "missing"))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "ablate", str(config), "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    if "data" in message:
        assert "huggingface.co/datasets/osunlp/Mind2Web" in done.stderr
    assert not out.exists()


# --- statistics (pure) ------------------------------------------------------------------------------------


def _row(arm: str, key: str, steps: int, right: int, *, repeat: int = 1, tokens: int = 10) -> TaskResult:
    return TaskResult(
        arm=arm,
        repeat=repeat,
        position=0,
        key=key,
        website="w",
        steps=steps,
        elements_correct=right,
        action_f1_sum=float(right),
        steps_succeeded=right,
        success=right == steps,
        prompt_tokens=tokens,
    )


def test_macro_micro_intervals_and_pairs_by_hand() -> None:
    a = [_row("a", "t1", 2, 2), _row("a", "t2", 4, 1), _row("a", "t3", 1, 0)]
    b = [_row("b", "t1", 2, 2), _row("b", "t2", 4, 4, tokens=30), _row("b", "t3", 1, 1)]
    step = metric_stats(a, "step_success_rate")
    assert step.macro == pytest.approx(100 * (1 + 0.25 + 0) / 3)  # mean over tasks
    assert step.micro == pytest.approx(100 * 3 / 7)  # over steps: they differ
    assert step.ci95 == pytest.approx([100 * x for x in bootstrap_mean_ci([1.0, 0.25, 0.0])])
    assert step.micro_ci95 == pytest.approx([100 * x for x in bootstrap_ratio_ci([2, 1, 0], [2, 4, 1])])
    sr = metric_stats(a, "task_success_rate")
    assert (sr.macro, sr.micro, sr.ci_method) == (pytest.approx(100 / 3), None, "wilson")
    assert sr.ci95 == pytest.approx([100 * x for x in wilson_interval(1, 3)])
    # with repeats the task is the unit: per-task means, then a bootstrap over tasks
    repeated = metric_stats(
        a + [r.model_copy(update={"repeat": 2, "success": True}) for r in a], "task_success_rate"
    )
    assert repeated.ci_method == "task-bootstrap" and repeated.macro == pytest.approx(
        100 * (1 + 0.5 + 0.5) / 3
    )
    c = compare("a", "b", a + b)
    d = c.metrics["step_success_rate"]
    assert (c.pairs, d.b_wins, d.a_wins, d.ties) == (3, 2, 0, 1)
    assert d.mean_diff == pytest.approx(100 * (0 + 0.75 + 1) / 3)
    assert d.sign_test_p == pytest.approx(sign_test_p(2, 0)) == pytest.approx(0.5)
    assert (c.b_wins, c.a_wins, c.mean_success_diff) == (
        2,
        0,
        pytest.approx(2 / 3),
    )  # task success, fractions
    assert c.mean_tokens_diff == pytest.approx(20 / 3)
    # the ratio bootstrap by hand: all tasks alike gives a point interval
    assert bootstrap_ratio_ci([1, 1], [2, 2]) == (0.5, 0.5) and bootstrap_ratio_ci([], []) is None


# --- end to end ----------------------------------------------------------------------------------------


def _md_row(text: str, arm: str, average: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and cells[0] == arm and cells[2] == average:
            return cells
    raise AssertionError(f"no {average} row for {arm} in RESULTS.md")


def test_ablation_off_offline_online_end_to_end(isolated: Path, records) -> None:
    tmp = isolated
    scores = write_scores(tmp / "scores.pkl", records)
    wrong = "CLICK [999999]"
    answers = {
        "off": [gold_answer(a) if i < 2 else wrong for i, r in enumerate(records) for a in r.actions],
        "offline": [gold_answer(a) for r in records for a in r.actions],
        "online": [
            "I am not sure." if i == 3 else gold_answer(a) for i, r in enumerate(records) for a in r.actions
        ],
    }
    out = tmp / "out"
    n_steps = sum(len(r.actions) for r in records)
    with StubLLMServer([Reply(text=t) for arm in ("off", "offline", "online") for t in answers[arm]]) as stub:
        config = write_config(tmp / "m2w.toml", base_url=stub.base_url, scores=scores, arms=ARMS)
        report, md = run_ablation(load_ablation(config), out, show_progress=False)
        assert len(stub.requests) == 3 * n_steps  # rule induction: no model call but the actor's
        # the same command again resumes: no model call, the same numbers
        again, _ = run_ablation(load_ablation(config), out, show_progress=False)
        assert len(stub.requests) == 3 * n_steps
    for name in ("RESULTS.md", "results.json", PLOT_METRICS, "ablation.json", "provenance.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    data = json.loads((out / "results.json").read_text())
    parsed = Mind2WebAblationReport.model_validate(data)
    assert parsed.arms == again.arms and parsed.comparisons == again.comparisons  # written last
    assert [a.metrics for a in again.arms] == [a.metrics for a in report.arms]
    served = AblationReport.model_validate(data)  # what `awm serve` reads: the shared fields fit
    assert [a.name for a in served.arms] == ["off", "offline", "online"]
    from fastapi.testclient import TestClient

    from awm.app.server import AppSettings, create_app

    page = TestClient(create_app(AppSettings(runs=[tmp], live_dir=tmp / "live")), base_url="http://127.0.0.1").get("/ablations/out")
    assert page.status_code == 200 and "There is no budget-matched arm" in page.text  # RESULTS.md shown
    text = md.read_text()
    assert "Wilson" in text and "bootstrap" in text
    assert NO_BUDGET_MATCH in text

    per_task: dict[str, dict[str, float]] = {}
    for arm in parsed.arms:
        folder = arm_dir(out, arm.name, 1)
        assert (folder / "run.json").is_file() and (folder / "summary.md").is_file()
        assert (folder / USAGE_JSON).is_file()
        trajectories = {
            r.annotation_id: load_trajectory(folder / "tasks" / f"{r.annotation_id}.json") for r in records
        }
        predictions = {k: v for t in trajectories.values() for k, v in predictions_for(t).items()}
        expected = score(records, predictions)
        for metric in METRIC_KEYS:
            assert arm.metrics[metric].macro == pytest.approx(getattr(expected.macro, metric), abs=1e-9)
        for metric in METRIC_KEYS[:3]:
            assert arm.metrics[metric].micro == pytest.approx(getattr(expected.micro, metric), abs=1e-9)
        macro, micro = _md_row(text, arm.name, "macro"), _md_row(text, arm.name, "micro")
        assert macro[3:5] == [str(len(records)), str(n_steps)]
        for i, metric in enumerate(METRIC_KEYS):
            assert macro[5 + i].split(" [")[0] == f"{getattr(expected.macro, metric):.1f}", (arm.name, metric)
            low, high = arm.metrics[metric].ci95
            assert macro[5 + i].endswith(f"[{low:.1f}, {high:.1f}]")
        for i, metric in enumerate(METRIC_KEYS[:3]):
            assert micro[5 + i].split(" [")[0] == f"{getattr(expected.micro, metric):.1f}", (arm.name, metric)
        # SR with one repeat: Wilson over tasks
        k = round(expected.macro.task_success_rate * len(records) / 100)
        assert arm.metrics["task_success_rate"].ci95 == pytest.approx(
            [100 * x for x in wilson_interval(k, len(records))]
        )
        assert (arm.successes, arm.episodes, arm.ci_method) == (k, len(records), "wilson")
        # tokens per component: the actor's from the trajectories, no induction call (rule)
        actor = sum(t.prompt_tokens + t.completion_tokens for t in trajectories.values())
        assert arm.tokens_per_task["actor"] == pytest.approx(round(actor / len(records), 1))
        assert arm.tokens_per_task["induction"] == 0.0
        assert f"{arm.tokens_per_task['actor']:,.0f} / 0 = " in text
        per_task[arm.name] = {
            r.annotation_id: score(
                [r], predictions_for(trajectories[r.annotation_id])
            ).macro.step_success_rate
            for r in records
        }
    assert (
        parsed.arms[0].metrics["task_success_rate"].macro < parsed.arms[1].metrics["task_success_rate"].macro
    )
    # paired per task against the first arm, recomputed from per-task scores
    for comparison in parsed.comparisons:
        assert comparison.arm_a == "off" and comparison.pairs == len(records) and comparison.unpaired == 0
        diffs = [per_task[comparison.arm_b][k] - per_task["off"][k] for k in per_task["off"]]
        wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        step = comparison.metrics["step_success_rate"]
        assert step.mean_diff == pytest.approx(sum(diffs) / len(diffs))
        assert (step.b_wins, step.a_wins, step.sign_test_p) == (wins, losses, sign_test_p(wins, losses))
        row = f"| off | {comparison.arm_b} | {len(records)} | 0 | step SR | {wins} | {losses} |"
        assert row in text
    # memory: offline induced per website from train before solving; online committed while solving
    offline, online = parsed.arms[1], parsed.arms[2]
    assert {n.scope for n in offline.memory_notes} == {f"mind2web/{r.website}" for r in records}
    assert set(offline.final_versions) == {f"mind2web/{r.website}" for r in records}
    seen = {
        r.key: (r.memory_version_seen, r.memory_version_committed)
        for r in parsed.task_results
        if r.arm == "online"
    }
    assert seen[records[0].annotation_id] == (None, 1) and seen[records[3].annotation_id] == (1, None)
    assert online.unparsed == len(records[3].actions)


def test_websites_and_repeats_run_one_folder_per_website(isolated: Path, records) -> None:
    tmp = isolated
    scores = write_scores(tmp / "scores.pkl", records)
    chosen = [next(r for r in records if r.website == site) for site in ("united", "amazon")]  # limit 1 each
    arms = '[[arm]]\nname = "off"\nmemory = "off"\n[[arm]]\nname = "online"\nmemory = "online"\n'
    replies = [Reply(text=gold_answer(a)) for _ in range(4) for r in chosen for a in r.actions]
    with StubLLMServer(replies) as stub:
        config = write_config(
            tmp / "m2w.toml", base_url=stub.base_url, scores=scores, arms=arms, extra="repeats = 2"
        )
        config.write_text(
            config.read_text().replace(
                "top_k = 5", 'top_k = 5\nwebsites = ["united", "amazon"]\nlimit = 1\npage_format = "compact"'
            )
        )
        report, md = run_ablation(load_ablation(config), tmp / "out", show_progress=False)
        assert len(stub.requests) == len(replies)
    for arm in ("off", "online"):
        for repeat in (1, 2):
            for site in ("united", "amazon"):
                options = json.loads((arm_dir(tmp / "out", arm, repeat) / site / "run.json").read_text())
                assert (options["website"], options["page_format"]) == (site, "compact")  # passed through
    off = report.arms[0]
    assert (off.tasks, off.episodes, off.repeats) == (2, 4, 2)
    assert off.metrics["task_success_rate"].ci_method == "task-bootstrap"  # repeats: the task is the unit
    expected = score(
        chosen, {step_key(r.annotation_id, a.action_uid): gold_answer(a) for r in chosen for a in r.actions}
    )
    for metric in METRIC_KEYS:
        assert off.metrics[metric].macro == pytest.approx(getattr(expected.macro, metric))
    assert "websites: united, amazon" in md.read_text()


def test_a_failed_arm_is_reported_and_resumed(isolated: Path, records) -> None:
    tmp = isolated
    scores = write_scores(tmp / "scores.pkl", records)
    first = records[0]  # limit = 1: the split's first task
    arms = '[[arm]]\nname = "a"\nmemory = "off"\n[[arm]]\nname = "b"\nmemory = "off"\n'
    gold = [Reply(text=gold_answer(a)) for a in first.actions]
    with StubLLMServer([Reply(status=400), *gold]) as stub:
        config = write_config(tmp / "m2w.toml", base_url=stub.base_url, scores=scores, arms=arms)
        config.write_text(
            config.read_text()
            .replace("max_tokens = 32", "max_tokens = 32\nmax_attempts = 1")
            .replace("top_k = 5", "top_k = 5\nlimit = 1")
        )
        with pytest.raises(StageError, match=r"a \(repeat 1\) at solve"):
            run_ablation(load_ablation(config), tmp / "out", show_progress=False)
        data = Mind2WebAblationReport.model_validate_json((tmp / "out" / "results.json").read_text())
        a, b = data.arms
        assert (a.tasks, b.tasks) == (0, 1) and a.failed_stages and not b.failed_stages
        assert data.comparisons[0].pairs == 0 and data.comparisons[0].unpaired == 1
        assert any("arm a" in w for w in data.warnings)
        stub.push(*gold)
        report, _ = run_ablation(load_ablation(config), tmp / "out", show_progress=False)  # resumes a only
        assert len(stub.requests) == 1 + 2 * len(first.actions)
    assert [x.tasks for x in report.arms] == [1, 1] and report.comparisons[0].pairs == 1
    assert not report.warnings


def test_induction_tokens_are_counted_apart_and_kept_across_resumes(isolated: Path, records) -> None:
    tmp = isolated
    scores = write_scores(tmp / "scores.pkl", records)
    arms = '[[arm]]\nname = "neural"\nmemory = "offline"\ninduction = "neural"\n'
    with StubLLMServer(default=Reply(text="CLICK [101]", prompt_tokens=11, completion_tokens=3)) as stub:
        config = write_config(tmp / "m2w.toml", base_url=stub.base_url, scores=scores, arms=arms)
        config.write_text(config.read_text().replace("top_k = 5", "top_k = 5\nlimit = 1"))
        report, md = run_ablation(load_ablation(config), tmp / "out", show_progress=False)
        calls = len(stub.requests)
        again, _ = run_ablation(load_ablation(config), tmp / "out", show_progress=False)
        assert len(stub.requests) == calls  # resumed: no call at all, induction included
    induction_calls = calls - len(records[0].actions)  # one task; the rest induced united's memory
    assert induction_calls >= 1
    for arm in (report.arms[0], again.arms[0]):
        assert arm.tokens_per_task["induction"] == 14.0 * induction_calls  # from the meter, per task (1)
        assert arm.tokens_per_task["actor"] == 14.0 * len(records[0].actions)  # from the trajectory
    actor, induction = 14 * len(records[0].actions), 14 * induction_calls
    assert f"| {actor} / {induction} = {actor + induction} |" in md.read_text()
