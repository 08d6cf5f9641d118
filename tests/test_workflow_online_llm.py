"""A small online loop with executable memory and the real local model (Qwen2.5-Coder-1.5B, llama.cpp).

One MiniWoB++ task, two seeds: the first seed teaches (when the model solves it, the
induced workflow is replayed on that seed before it is committed), the second may call it. Asserted:
what the pipeline guarantees whatever the model does (replay provenance on every committed workflow,
sub-steps traced under the calling step, run_workflow offered only with memory), and, for login-user,
that the model does call the workflow once it is memory (the behaviour this feature exists for; at
temperature 0 it is repeatable on this model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from awm.config import load_settings
from awm.llm.usage import UsageMeter
from awm.memory.store import WorkflowStore
from awm.pipeline.config import parse_pipeline_table
from awm.pipeline.driver import run_arm
from awm.pipeline.stages import Clients
from awm.traces.db import open_run

pytestmark = [pytest.mark.browser, pytest.mark.llm]


def test_online_executable_memory_with_the_local_model(tmp_path: Path, local_llm) -> None:
    config = parse_pipeline_table(
        {
            "name": "exec-online",
            "benchmark": "miniwob",
            "tasks": ["login-user"],  # one task: enter-text added two minutes and no assertion of its own
            "seeds": [0, 1],
            "max_steps": 5,
            "policy": "llm",
            "memory": "online",
            "induction": "rule",
            "admission": "gt",
            "workflows": "executable",
            "verify": "replay",
            "episode_timeout_s": 90,
        }
    )
    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False, "max_tokens": 96}})
    clients = Clients(settings, UsageMeter(), actor=local_llm)
    result = run_arm(config, settings, tmp_path / "run", show_progress=False, clients=clients)
    assert result.failed_stage is None, result.error
    with open_run(tmp_path / "run") as db:
        trajectories = {t.task.key: db.trajectory(t.task_key) for t in db.episodes()}
    first, second = trajectories["browsergym/miniwob.login-user#0"], trajectories["browsergym/miniwob.login-user#1"]
    assert first.verdict.raw_reward == 1.0, "the model solves login-user seed 0 on its own"
    with WorkflowStore(tmp_path / "run" / "memory.sqlite") as store:
        for scope in store.scopes():
            for workflow in store.head(scope).workflows:
                assert workflow.provenance.replay_verdict == "success", (scope, workflow.name)
                assert (tmp_path / "run" / "replays" / f"{workflow.provenance.replay_trajectory_id}.json").is_file()
        assert store.head("miniwob/login-user") is not None
    assert first.workflow_calls == []  # nothing to call before memory exists
    [call] = second.workflow_calls
    assert call.completed, call.error
    subs = [s for s in second.steps if s.called_by == call.step]
    assert len(subs) == call.steps_total and all(s.outcome == "ok" and s.llm_calls == 0 for s in subs)
    assert second.verdict.raw_reward == 1.0
