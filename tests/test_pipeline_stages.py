"""Pipeline stages without a browser: config errors, idempotent commits, stage failures that stop the run."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from awm.config import load_settings
from awm.errors import ConfigError
from awm.llm.usage import UsageMeter
from awm.memory.store import WorkflowStore
from awm.pipeline.config import load_pipeline_config, parse_pipeline_table
from awm.pipeline.driver import run_arm
from awm.pipeline.online import commit_points
from awm.pipeline.stages import (
    Clients,
    PipelineStageError,
    admit_stage,
    commit_stage,
    induce_stage,
)
from awm.trajectory import Task, load_trajectory
from tests.stub_llm_server import Reply, StubLLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"
ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- config ---------------------------------------------------------------------------------------


def test_config_loads_pipeline_table_and_settings(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "arm.toml",
        '[pipeline]\nname = "a"\ntasks = ["click-test"]\nseeds = [0, 1]\ninduce_every = 2\n'
        'offline_from = ["rel/run"]\n[llm]\nmodel = "m1"\n',
    )
    config, settings = load_pipeline_config(cfg, {"memory": "off"})
    assert (config.name, config.seeds, config.induce_every, config.memory) == ("a", [0, 1], 2, "off")
    assert settings.llm.model == "m1"
    assert config.offline_from == [(Path.cwd() / "rel/run").resolve()]  # stored absolute for resume


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('[pipeline]\ntasks = ["click-test"]\nmemory = "sometimes"\n', "'memory'"),
        ('[pipeline]\ntasks = ["click-test"]\ninduce_evry = 2\n', "'induce_evry'"),
        ('[pipeline]\ntasks = ["click-test"]\ninduce_every = 0\n', "'induce_every'"),
        ("[pipeline]\nname = 'x'\n", "'tasks'"),
        ('[pipeline]\ntasks = ["click-test"]\nadmission = "judge"\n', "admission 'judge' needs judge = true"),
        ('[pipeline]\ntasks = ["click-test"]\nmemory = "offline"\n', "offline_from"),
        ('[pipeline]\ntasks = ["click-test"]\nscope = "site"\n', "scope 'site' reads the other templates"),
        ('[pipeline]\ntasks = ["click-test"]\n[llm]\ntemprature = 0.5\n', "unknown key 'llm.temprature'"),
        ('[pipeline]\ntasks = ["click-test"]\n[agent]\ngrammar = false\n', "unknown key 'agent.grammar'"),
        ('[pipline]\ntasks = ["click-test"]\n', "unknown key 'pipline'"),
    ],
)
def test_config_errors_name_the_file_and_the_field(tmp_path: Path, body: str, field: str) -> None:
    cfg = _write(tmp_path / "bad.toml", body)
    with pytest.raises(ConfigError) as err:
        load_pipeline_config(cfg)
    assert str(cfg) in str(err.value) and field in str(err.value)


@pytest.mark.parametrize(
    ("command", "body", "named"),
    [
        (["pipeline", "online", "--config"], '[pipeline]\ntasks = ["click-test"]\npolicy = "oracle"\n', "'policy'"),
        (["ablate"], '[pipeline]\ntasks = ["click-test"]\n[llm]\ntemprature = 0.5\n[[arm]]\nname = "off"\nmemory = "off"\n', "'llm.temprature'"),
        (["ablate"], '[pipeline]\ntasks = ["click-test"]\n[[arm]]\nname = "off"\nmemroy = "off"\n', "'memroy'"),
        (["run", "--tasks", "click-test", "--config"], '[llm]\ntemprature = 0.5\n', "'llm.temprature'"),
    ],
)
def test_cli_prints_the_config_error_and_exits_2(
    tmp_path: Path, command: list[str], body: str, named: str
) -> None:
    cfg = _write(tmp_path / "bad.toml", body)
    proc = subprocess.run(
        [sys.executable, "-m", "awm.cli", *command, str(cfg), "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert str(cfg) in proc.stderr and named in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


# --- pure parts -----------------------------------------------------------------------------------


def _task(name: str, seed: int) -> Task:
    return Task(task_id=f"browsergym/miniwob.{name}", scope=f"miniwob/{name}", benchmark="miniwob", seed=seed)


def test_commit_points_cut_each_scope_into_batches_and_end_on_the_last_task() -> None:
    tasks = [_task("a", s) for s in range(5)] + [_task("b", s) for s in range(2)]
    points = commit_points(tasks, every=2)
    assert {k: [t.key for t in v] for k, v in points.items()} == {
        "browsergym/miniwob.a#1": ["browsergym/miniwob.a#0", "browsergym/miniwob.a#1"],
        "browsergym/miniwob.a#3": ["browsergym/miniwob.a#2", "browsergym/miniwob.a#3"],
        "browsergym/miniwob.a#4": ["browsergym/miniwob.a#4"],
        "browsergym/miniwob.b#1": ["browsergym/miniwob.b#0", "browsergym/miniwob.b#1"],
    }


@dataclass
class _Tools:
    config: Any
    clients: Any
    recorder: Any = None


def _logins() -> list:
    return [load_trajectory(p) for p in sorted(FIXTURES.glob("login-s*.json"))]


def test_commit_is_idempotent_by_message_and_skips_no_change(tmp_path: Path) -> None:
    config = parse_pipeline_table({"tasks": ["login-user"]})
    tools = _Tools(config=config, clients=None)
    admitted = admit_stage(_logins(), rule="gt")
    assert len(admitted.admitted) == 3 and list(admitted.rejected) == ["login-s4"]
    candidates = induce_stage(admitted.admitted, mode="rule", ctx=tools).candidates
    assert candidates
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        first = commit_stage(
            store, "miniwob/login-user", candidates, author="online-rule", message="online after x#0"
        )
        again = commit_stage(
            store, "miniwob/login-user", candidates, author="online-rule", message="online after x#0"
        )
        same_content = commit_stage(
            store, "miniwob/login-user", candidates, author="online-rule", message="online after x#1"
        )
        log = store.log("miniwob/login-user")
    assert first is not None and again is not None and again.version == first.version == 1
    assert same_content is None  # merging identical candidates changes nothing: no new version
    assert [v.message for v in log] == ["online after x#0"]


def test_induce_returns_nothing_when_no_admitted_trajectory_acted() -> None:
    config = parse_pipeline_table({"tasks": ["login-user"]})
    empty = [t.model_copy(update={"steps": []}) for t in _logins()]
    outcome = induce_stage(empty, mode="rule", ctx=_Tools(config=config, clients=None))
    assert outcome.candidates == [] and "no admitted trajectory with an executed step" in outcome.reason


def _stub_settings(stub: StubLLMServer, tmp_path: Path) -> Any:
    return load_settings(
        overrides={
            "llm": {
                "backend": "openai",
                "base_url": stub.base_url,
                "model": "stub",
                "cache": False,
                "max_attempts": 1,
            },
            "memory_db": str(tmp_path / "unused.sqlite"),
        }
    )


def test_neural_induction_of_garbage_is_a_result_with_its_reason_not_a_failure(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(text="I like turtles. {not a workflow")) as stub:
        settings = _stub_settings(stub, tmp_path)
        config = parse_pipeline_table({"tasks": ["login-user"], "induction": "neural"})
        tools = _Tools(config=config, clients=Clients(settings, UsageMeter()))
        outcome = induce_stage(_logins(), mode="neural", ctx=tools)
    assert outcome.candidates == []
    assert outcome.reason.startswith("neural induction produced no usable workflow")
    assert outcome.llm_calls >= 1 or stub.requests, "the model was asked"


def test_an_unreachable_induction_model_fails_the_induce_stage(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(text="unused")) as stub:
        settings = _stub_settings(stub, tmp_path)
    # the stub has stopped: its loopback port now refuses connections
    config = parse_pipeline_table({"tasks": ["login-user"], "induction": "neural"})
    tools = _Tools(config=config, clients=Clients(settings, UsageMeter()))
    with pytest.raises(PipelineStageError) as err:
        induce_stage(_logins(), mode="neural", ctx=tools)
    assert err.value.stage == "induce"
    assert str(err.value).startswith("stage 'induce' failed: ")


# --- a failing stage stops the whole pipeline -----------------------------------------------------


def _episodes(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "run.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM episode").fetchone()[0]


def test_missing_offline_source_stops_before_any_episode(tmp_path: Path) -> None:
    config = parse_pipeline_table(
        {
            "tasks": ["login-user"],
            "memory": "offline",
            "offline_from": [str(tmp_path / "nope")],
            "policy": "scripted",
        }
    )
    result = run_arm(config, load_settings(), tmp_path / "run", show_progress=False)
    assert result.failed_stage == "induce"
    assert str(tmp_path / "nope") in (result.error or "")
    assert result.trajectories == [] and _episodes(tmp_path / "run") == 0
    with WorkflowStore(tmp_path / "run" / "memory.sqlite") as store:
        assert store.scopes() == []
    with sqlite3.connect(tmp_path / "run" / "run.sqlite") as conn:
        assert conn.execute("SELECT status, failed_stage FROM pipeline_run").fetchone() == (
            "failed",
            "induce",
        )


def test_neural_garbage_in_offline_induction_stops_before_solving(tmp_path: Path) -> None:
    sources = tmp_path / "src"
    shutil.copytree(FIXTURES, sources)
    with StubLLMServer(default=Reply(text="garbage, no workflow here")) as stub:
        settings = _stub_settings(stub, tmp_path)
        config = parse_pipeline_table(
            {
                "tasks": ["login-user"],
                "memory": "offline",
                "offline_from": [str(sources)],
                "induction": "neural",
                "policy": "scripted",
            }
        )
        result = run_arm(config, settings, tmp_path / "run", show_progress=False)
    assert result.failed_stage == "induce", result.error  # an offline arm with nothing to freeze stops
    assert "neural induction produced no usable workflow" in (result.error or "")
    assert _episodes(tmp_path / "run") == 0  # nothing downstream ran
    assert result.usage["induction"].calls >= 1 and "actor" not in result.usage
