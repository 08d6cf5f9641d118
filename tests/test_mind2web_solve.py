"""Mind2Web prompting, solving, scoring, resuming and memory: a stub LLM server, and one real-model test."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from awm.config import load_settings
from awm.llm.factory import make_client
from awm.memory.store import WorkflowStore
from awm.memory.view import MemoryView
from awm.memory.workflow import Workflow, WorkflowStep
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.memory import train_source, train_trajectory
from awm.mind2web.metrics import score
from awm.mind2web.prompt import build_step_prompt, pick_exemplar_steps, sample_exemplars, system_prompt
from awm.mind2web.ranking import MindActRanker, MindActScores
from awm.mind2web.solve import predictions_for, solve_task
from awm.pipeline.mind2web_run import RunOptions, register_run, run_mind2web
from awm.tokens import CharEstimateCounter
from awm.trajectory import TargetDesc, load_trajectory, save_trajectory
from tests.stub_llm_server import Reply, StubLLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"
COUNTER = CharEstimateCounter()


@pytest.fixture(scope="module")
def records():
    return list(iter_records(FIXTURES, "test_task"))


@pytest.fixture(scope="module")
def train():
    return list(iter_records(FIXTURES, "train"))


def gold_answer(action) -> str:
    op, value, target = action.operation.op, action.operation.value, action.target_id or "0"
    return f"{op} [{target}]" if op == "CLICK" else f"{op} [{target}] [{value}]"


def gold_ranker(records) -> MindActRanker:
    """MindAct-style scores: positives first (so recall@k is 1 where a positive exists)."""
    table = {}
    for r in records:
        for a in r.actions:
            pos = {c.backend_node_id for c in a.pos_candidates}
            table[step_key(r.annotation_id, a.action_uid)] = {
                c.backend_node_id: (1.0 if c.backend_node_id in pos else 0.0)
                for c in [*a.pos_candidates, *a.neg_candidates]
            }
    return MindActRanker(MindActScores(scores=table))


def stub_client(stub: StubLLMServer):
    settings = load_settings(
        overrides={"llm": {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False}}
    )
    return make_client(settings)


def workflow(name: str, n_steps: int = 2) -> Workflow:
    return Workflow(
        name=name,
        description=f"How to {name} on this site. " * 4,
        steps=[
            WorkflowStep(
                reasoning="I pick it.", action="CLICK", target=TargetDesc(role="button", label=f"{name} {i}")
            )
            for i in range(n_steps)
        ],
    )


# --- prompt -------------------------------------------------------------------------------------------


def test_prompt_fits_and_keeps_instructions_task_and_top_candidate(records) -> None:
    record, action = records[4], records[4].actions[4]
    ranked = [c.backend_node_id for c in [*action.pos_candidates, *action.neg_candidates]]
    workflows = [workflow(f"flow_{i}", 6) for i in range(12)]
    big = build_step_prompt(
        record,
        action,
        ranked,
        counter=COUNTER,
        context_window=100_000,
        completion_tokens=64,
        workflows=workflows,
        previous_actions=record.action_reprs[:4],
    )
    assert big.workflows_kept == 12 and big.fitted.history_kept == 4
    budget = big.fitted.prompt_tokens // 2
    fitted = build_step_prompt(
        record,
        action,
        ranked,
        counter=COUNTER,
        context_window=budget + 64,
        completion_tokens=64,
        workflows=workflows,
        previous_actions=record.action_reprs[:4],
    )
    assert fitted.fitted.prompt_tokens <= budget
    assert 0 < fitted.workflows_kept < 12  # memory was counted, and the least relevant went first
    system, user = fitted.fitted.messages[0]["content"], fitted.fitted.messages[1]["content"]
    assert system.startswith(system_prompt()) and "## flow_0" in system and "## flow_11" not in system
    assert f"Task: {record.confirmed_task}" in user and f"[{ranked[0]}]" in user


def test_exemplars_are_seeded_and_shown(train, records) -> None:
    picks = pick_exemplar_steps(train, 3, seed=7)
    assert picks == pick_exemplar_steps(list(reversed(train)), 3, seed=7)  # not file order
    assert picks != pick_exemplar_steps(train, 3, seed=8) or len(picks) < 3
    shots = sample_exemplars(train, 2, seed=7)
    assert shots == sample_exemplars(train, 2, seed=7) and len(shots) == 2
    assert all("Answer: " in s for s in shots)
    prompt = build_step_prompt(
        records[0],
        records[0].actions[0],
        ["101"],
        counter=COUNTER,
        context_window=8000,
        completion_tokens=64,
        exemplars=shots,
    )
    assert prompt.exemplars_kept == 2 and "## Examples" in prompt.fitted.messages[0]["content"]


# --- solving ------------------------------------------------------------------------------------------------


def test_solve_with_stub_gives_expected_predictions_and_scores(records) -> None:
    record = records[2]  # amazon, 4 steps; step 2 has no positive candidate
    answers = [
        'Thought: type the phrase.\nTYPE [301] [say "hi" [x]]',  # a value holding brackets
        "I would sort the results now.",  # no action: unparseable
        "CLICK [303]",
        "SELECT [305] [Size 10]",
    ]
    with StubLLMServer([Reply(text=a) for a in answers]) as stub:
        client = stub_client(stub)
        trajectory = solve_task(
            record,
            client=client,
            ranker=gold_ranker(records),
            counter=COUNTER,
            context_window=4096,
            top_k=5,
            memory=MemoryView(scope="mind2web/amazon", version=3, workflows=(workflow("search"),)),
        )
        bodies = [r.body for r in stub.requests]
    assert len(bodies) == 4
    assert [s.outcome for s in trajectory.steps] == ["ok", "parse_error", "ok", "ok"]
    assert trajectory.steps[0].action == {"name": "TYPE", "args": {"id": "301", "value": 'say "hi" [x]'}}
    assert trajectory.steps[0].target == TargetDesc(role="textbox", label="Search Amazon")
    assert trajectory.steps[3].action_str == "SELECT [305] [Size 10]"
    assert trajectory.memory_version == 3 and trajectory.workflows_used == ["search"]
    assert "## search" in bodies[0]["messages"][0]["content"]
    # teacher forcing: step 3 sees the GOLD previous actions, not the unparseable answer
    third = bodies[2]["messages"][1]["content"]
    assert record.action_reprs[0] in third and record.action_reprs[1] in third
    assert "I would sort" not in third
    predictions = predictions_for(trajectory)
    assert predictions == {
        step_key(record.annotation_id, a.action_uid): t for a, t in zip(record.actions, answers, strict=True)
    }
    report = score([record], predictions)
    assert report.macro.element_accuracy == pytest.approx(75.0)
    assert report.macro.step_success_rate == pytest.approx(75.0)
    assert report.macro.task_success_rate == 0.0
    assert len(report.unparsed) == 1 and "I would sort" in report.unparsed[0]


def test_grammar_limits_answers_to_shown_ids(records) -> None:
    record = records[0]
    with StubLLMServer([Reply(text=gold_answer(a)) for a in record.actions]) as stub:
        solve_task(
            record,
            client=stub_client(stub),
            ranker=gold_ranker(records),
            counter=COUNTER,
            context_window=4096,
            top_k=1,
            use_grammar=True,
        )
        grammars = [r.body.get("grammar") for r in stub.requests]
    for action, grammar in zip(record.actions, grammars, strict=True):
        assert f'id ::= "{action.target_id}"\n' in grammar  # top-1 is the positive: the only id allowed
    with StubLLMServer([Reply(text=gold_answer(a)) for a in record.actions]) as stub:
        solve_task(
            record,
            client=stub_client(stub),
            ranker=gold_ranker(records),
            counter=COUNTER,
            context_window=4096,
        )
        assert all("grammar" not in r.body for r in stub.requests)  # hosted backends answer freely


def test_context_overflow_is_recorded_and_scored_wrong(records) -> None:
    record = records[3]
    with StubLLMServer([Reply(text=gold_answer(a)) for a in record.actions]) as stub:
        trajectory = solve_task(
            record,
            client=stub_client(stub),
            ranker=gold_ranker(records),
            counter=COUNTER,
            context_window=120,
            max_tokens=32,
        )
        assert stub.requests == []
    assert [s.outcome for s in trajectory.steps] == ["context_overflow"] * len(record.actions)
    assert "irreducible prompt" in trajectory.steps[0].error
    predictions = predictions_for(trajectory)
    assert len(predictions) == len(record.actions)  # recorded, not skipped
    report = score([record], predictions)
    assert report.macro.step_success_rate == 0.0 and report.macro.element_accuracy == 0.0


# --- runs: resume, online memory, CLI ---------------------------------------------------------------------


def write_scores(tmp_path: Path, records) -> Path:
    path = tmp_path / "scores_all_data.pkl"
    path.write_bytes(pickle.dumps({"scores": gold_ranker(records).scores.scores}))
    return path


def test_run_resumes_without_model_calls_or_duplicates(tmp_path: Path, records) -> None:
    out = tmp_path / "run"
    options = RunOptions(
        data=str(FIXTURES),
        limit=3,
        ranker="mindact",
        scores=str(write_scores(tmp_path, records)),
        context_window=4096,
    )
    n_steps = sum(len(r.actions) for r in records[:3])
    answers = [gold_answer(a) for r in records[:3] for a in r.actions]
    with StubLLMServer([Reply(text=a) for a in answers]) as stub:
        first = run_mind2web(options, out, client=stub_client(stub), counter=COUNTER)
        assert len(stub.requests) == n_steps
        second = run_mind2web(options, out, client=stub_client(stub), counter=COUNTER)
        assert len(stub.requests) == n_steps  # nothing asked again
        # a task whose file is lost is solved again, and only that one
        lost = out / "tasks" / f"{records[1].annotation_id}.json"
        lost.unlink()
        stub.push(*[Reply(text=gold_answer(a)) for a in records[1].actions])
        third = run_mind2web(options, out, client=stub_client(stub), counter=COUNTER)
        assert len(stub.requests) == n_steps + len(records[1].actions)
    assert sorted(p.name for p in (out / "tasks").iterdir()) == sorted(
        f"{r.annotation_id}.json" for r in records[:3]
    )
    assert first.macro == second.macro == third.macro
    # the one step without a positive candidate counts as a miss: recall is the ceiling on step success
    assert first.tasks == 3 and first.recall_steps == n_steps
    assert first.recall_at_k == pytest.approx((n_steps - 1) / n_steps)
    # gold answers everywhere: every step with a positive succeeds; the one without cannot
    assert first.micro["step_success_rate"] == pytest.approx(100 * (n_steps - 1) / n_steps)
    with pytest.raises(Exception, match="other options"):
        run_mind2web(options.model_copy(update={"top_k": 2}), out, client=stub_client(stub), counter=COUNTER)


def test_online_memory_commits_a_version_only_when_a_task_changes_it(tmp_path: Path, records) -> None:
    out = tmp_path / "online"
    options = RunOptions(
        data=str(FIXTURES),
        memory="online",
        induction="rule",
        ranker="mindact",
        scores=str(write_scores(tmp_path, records)),
        context_window=8192,
    )
    # gold answers, except the second amazon task: answered with no action, it teaches nothing
    second_amazon = records[3]
    assert second_amazon.website == "amazon" and records[2].website == "amazon"
    answers = ["I am not sure." if r is second_amazon else gold_answer(a) for r in records for a in r.actions]
    with StubLLMServer([Reply(text=a) for a in answers]) as stub:
        summary = run_mind2web(options, out, client=stub_client(stub), counter=COUNTER)
        amazon_second = stub.requests[
            len(records[0].actions) + len(records[1].actions) + len(records[2].actions)
        ]
    # each task saw its scope's head when it started; a version is committed only where memory changed
    expected = {  # annotation id -> (seen, committed)
        records[0].annotation_id: (None, 1),  # united
        records[1].annotation_id: (None, 1),  # delta
        records[2].annotation_id: (None, 1),  # amazon
        records[3].annotation_id: (1, None),  # amazon: nothing new, no version
        records[4].annotation_id: (1, 2),  # united
    }
    for task_id, (seen, committed) in expected.items():
        row = summary.memory_versions[task_id]
        assert (row["seen"], row["committed"]) == (seen, committed), task_id
        saved = load_trajectory(out / "tasks" / f"{task_id}.json")
        assert saved.memory_version == seen and saved.meta["memory_committed"] == committed
        assert saved.meta["induction"]["version"] == (committed or seen)
    with WorkflowStore(out / "memory.sqlite") as store:
        logs = {
            site: [v.version for v in store.log(f"mind2web/{site}")] for site in ("united", "delta", "amazon")
        }
        assert logs == {"united": [1, 2], "delta": [1], "amazon": [1]}
        assert store.log("mind2web/amazon")[0].message.startswith(
            f"online after task {records[2].annotation_id}"
        )
        assert store.head("mind2web/amazon").workflows  # induced from the agent's own answers
    # the second amazon task saw the workflow induced from the first
    assert "## Workflows" in amazon_second.body["messages"][0]["content"]
    # resuming commits nothing more; a task whose commit happened but was not recorded (a crash in
    # between) finds its version by the commit message instead of committing again
    last = out / "tasks" / f"{records[4].annotation_id}.json"
    crashed = load_trajectory(last)
    for key in ("induction", "memory_committed"):
        crashed.meta.pop(key)
    save_trajectory(crashed, last)
    with StubLLMServer() as stub:
        again = run_mind2web(options, out, client=stub_client(stub), counter=COUNTER)
        assert stub.requests == []
    assert again.memory_versions[records[4].annotation_id]["committed"] == 2
    assert load_trajectory(last).meta["memory_committed"] == 2
    with WorkflowStore(out / "memory.sqlite") as store:
        assert store.head_version("mind2web/united") == 2 and len(store.log("mind2web/united")) == 2
        assert store.head_version("mind2web/amazon") == 1


def test_offline_memory_from_train_and_cli_summary(tmp_path: Path, records, monkeypatch) -> None:
    app = typer.Typer()
    register_run(app)

    @app.callback()
    def _root() -> None:
        """Test app."""

    out = tmp_path / "cli"
    scores = write_scores(tmp_path, records)
    with StubLLMServer(default=Reply(text="CLICK [101]")) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("AWM_HOME", str(tmp_path / "home"))
        args = [
            "run",
            "--data",
            str(FIXTURES),
            "--split",
            "test_task",
            "--website",
            "united",
            "--memory",
            "offline",
            "--induction",
            "rule",
            "--ranker",
            "mindact",
            "--scores",
            str(scores),
            "--backend",
            "openai",
            "--model",
            "stub",
            "--no-cache",
            "--out",
            str(out),
        ]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        united_steps = sum(len(r.actions) for r in records if r.website == "united")
        assert len(stub.requests) == united_steps
        assert "## Workflows" in stub.requests[0].body["messages"][0]["content"]
    summary = (out / "summary.md").read_text()
    assert (
        "recall@10 of the target 100.0%" in summary
        and "offline mind2web/united: from website:united" in summary
    )
    data = (out / "summary.json").read_text()
    assert '"memory": "offline"' in data and '"element_accuracy"' in data


def test_train_trajectory_uses_gold_actions_and_targets(train) -> None:
    t = train_trajectory(train[0])
    assert t.verdict.reward == 1.0 and t.task.scope == "mind2web/united"
    assert t.steps[1].action == {"name": "TYPE", "args": {"id": "1010", "value": "query 1"}}
    assert t.steps[1].target == TargetDesc(role="textbox", label="Search")


@pytest.mark.llm
def test_real_model_end_to_end_with_memory(tmp_path: Path, records, local_llm) -> None:
    options = RunOptions(
        data=str(FIXTURES),
        limit=2,
        memory="offline",
        induction="rule",
        top_k=5,
        max_tokens=24,
        context_window=4096,
        model="local",
    )
    summary = run_mind2web(options, tmp_path / "real", client=local_llm, counter=local_llm.token_counter())
    assert summary.tasks == 2 and summary.llm_calls == sum(len(r.actions) for r in records[:2])
    for r in records[:2]:
        saved = load_trajectory(tmp_path / "real" / "tasks" / f"{r.annotation_id}.json")
        assert saved.memory_version is not None and saved.workflows_used
        assert all(s.outcome in ("ok", "parse_error") and s.model_output for s in saved.steps)
    assert 0.0 <= summary.macro["step_success_rate"] <= 100.0


def test_train_source_prefers_the_website_then_its_subdomain_then_its_domain(train, records) -> None:
    source, own = train_source("united", records, train)
    assert source == "website:united" and {r.website for r in own} == {"united"}
    jetblue = records[0].model_copy(update={"website": "jetblue"})  # an unseen airline (test_website)
    source, same = train_source("jetblue", [jetblue], train)
    assert source == "subdomain:Airlines" and {r.website for r in same} == {"united", "delta"}
    shop = records[2].model_copy(update={"website": "ebay", "subdomain": ""})
    source, same = train_source("ebay", [shop], train)
    assert source == "domain:Shopping" and {r.website for r in same} == {"amazon"}
    assert train_source("nowhere", records, train) == ("none", [])
