"""An arena run on the runs pages: its episodes counted per site and template, as a researcher compares
them there. The run is written through `RunRecorder` (no browser needed to make it); the page is opened
in real Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from awm.app.runs import arena_groups
from awm.traces import RunRecorder
from awm.traces.db import RunDatabase
from awm.trajectory import Task, Trajectory, Verdict
from tests.app_server import serve, snap

OUTCOMES = [
    ("sites.trac.close-ticket", 2, 1.0), ("sites.trac.close-ticket", 3, 0.0), ("sites.trac.ticket-owner", 2, 0.0),
    ("sites.forum.open-profile", 2, 1.0), ("miniwob.click-test", 0, 1.0),
]  # fmt: skip


def record_arena_run(run_dir: Path) -> None:
    with RunRecorder(run_dir, config={}, config_hash="h", name="arena") as recorder:
        for task_id, seed, reward in OUTCOMES:
            task = Task(task_id=f"browsergym/{task_id}", goal="g", scope=task_id, benchmark="sites", seed=seed)
            trajectory = Trajectory(trajectory_id=f"{task_id}#{seed}", task=task, verdict=Verdict(reward=reward))
            if task_id.startswith("sites.trac.close-ticket") and seed == 3:  # what the task reported at its end
                trajectory.meta["env_info"] = {
                    "template": "trac.close-ticket", "check": "no row matched; but the episode also changed ...",
                    "changes": ["milestone: 1 changed (~('1.0', 'Ship it') -> ('1.0', 'gone'))"],
                }  # fmt: skip
            recorder.start_episode(trajectory)
            trajectory.end = "done"
            recorder.end_episode(trajectory)


def test_episodes_are_counted_per_site_and_template(tmp_path: Path) -> None:
    record_arena_run(tmp_path / "arena")
    with RunDatabase(tmp_path / "arena") as db:
        groups = arena_groups(db.episodes())
    assert [(g.site, g.template, g.episodes, g.succeeded) for g in groups] == [
        ("forum", "open-profile", 1, 1), ("trac", "close-ticket", 2, 1), ("trac", "ticket-owner", 1, 0),
    ]  # fmt: skip (the MiniWoB++ episode is no arena task)


@pytest.mark.browser
def test_the_run_page_groups_an_arena_run_by_site_and_template(tmp_path: Path, chromium) -> None:
    record_arena_run(tmp_path / "runs" / "arena")
    with serve([tmp_path / "runs"]) as base:
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"{base}/runs/arena")
        rows = page.locator("#by-template tbody tr")
        assert rows.count() == 3
        assert rows.nth(1).inner_text().split("\t") == ["trac", "close-ticket", "2", "1"]
        snap(page, "run-by-template")
        page.goto(f"{base}/runs/arena/episodes/sites.trac.close-ticket%233")  # what it changed in the site
        assert page.locator("[data-site-changed]").inner_text() == "milestone: 1 changed (~('1.0', 'Ship it') -> ('1.0', 'gone'))"
        assert page.locator("[data-site-check]").inner_text().startswith("no row matched; but the episode also")
        page.goto(f"{base}/runs/arena/episodes/sites.trac.close-ticket%232")  # no report: nothing claimed
        assert page.locator("[data-site-changed]").count() == 0
        page.close()
