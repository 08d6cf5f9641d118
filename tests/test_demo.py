"""`awm demo`: which demonstrations the arena demo replays first, and that its config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from awm.demo import DEFAULT_CONFIG, after_the_job, demonstration_folders, train_instances
from awm.errors import ConfigError
from awm.pipeline.ablation import load_ablation

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_the_demo_replays_the_train_instances_of_its_templates_into_the_memory_arms_folder() -> None:
    tasks, task_files, folders = demonstration_folders(DEFAULT_CONFIG)
    assert tasks == ["trac.file-ticket", "trac.comment-ticket", "trac.reassign-ticket"]
    assert task_files == [] and folders == [Path("runs/demo-trac-demos")]
    assert train_instances(tasks[:2], []) == [
        "trac.file-ticket#0", "trac.file-ticket#1", "trac.comment-ticket#0", "trac.comment-ticket#1",
    ]  # fmt: skip
    assert len(train_instances(["trac"], [])) == 38  # a site: every template's two train instances (19 templates)
    assert demonstration_folders(CONFIGS / "miniwob-demo.toml") == ([], [], [])  # nothing to replay


def test_an_unknown_template_or_config_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'trac.no-such' is no arena site or template"):
        train_instances(["trac.no-such"], [])
    with pytest.raises(ConfigError, match="demo config .*missing.toml does not exist"):
        demonstration_folders(tmp_path / "missing.toml")


def test_the_demo_config_loads_once_its_demonstrations_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # offline_from is read from the working directory
    with pytest.raises(ConfigError, match="arm 'memory': offline_from .*demo-trac-demos does not exist"):
        load_ablation(DEFAULT_CONFIG)
    (tmp_path / "runs" / "demo-trac-demos").mkdir(parents=True)
    plan = load_ablation(DEFAULT_CONFIG)
    arms = {a.name: a.config for a in plan.arms}
    assert list(arms) == ["off", "memory"] and plan.base.benchmark == "sites" and plan.base.seeds == [2, 3]
    memory = arms["memory"]
    assert (memory.memory, memory.workflows, memory.verify, memory.scope) == ("online", "executable", "replay", "task")
    assert memory.offline_from == [tmp_path / "runs" / "demo-trac-demos"]


def test_the_job_stops_the_sites_it_started_and_names_the_ones_it_leaves_running() -> None:
    before = {"shop": "http://127.0.0.1:4100/"}
    after = {"shop": "http://127.0.0.1:4100/", "trac": "http://127.0.0.1:4200/"}
    to_stop, lines = after_the_job(before, after)
    assert to_stop == ["trac"]
    assert lines == [
        "stopped trac (started for this job)",
        "left running: shop at http://127.0.0.1:4100/ (it was running before the job; "
        "`awm sites down --site shop` stops it)",
    ]
    assert after_the_job({}, {}) == ([], [])
