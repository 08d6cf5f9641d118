"""Each worker its own copy of a site: two copies of Trac on two ports, each with its own database, reset
in turn without touching the other; a task a worker resets reads that worker's copy; and two workers that
run the same site's tasks at once each solve theirs (scripted replays, real Chromium, real Trac)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator

import pytest

from awm.config import BrowserSettings, load_settings
from awm.pipeline.parallel import AllJobs, EpisodeJob, PoolConfig, job_for, run_jobs, worker_site_instance
from awm.pipeline.policy import PolicyFactory
from awm.sites import lifecycle
from awm.sites.registry import get_site
from awm.sites.site import INSTANCE_ENV, Site
from awm.sites.task import SiteTask
from awm.trajectory import Trajectory
from awm.webarena.harness import HarnessConfig
from awm.webarena.tasks import site_tasks

pytestmark = [pytest.mark.sites]


@pytest.fixture
def two_copies() -> Iterator[tuple[Site, Site]]:
    copies = (get_site("trac", instance="test-a"), get_site("trac", instance="test-b"))
    yield copies
    for site in copies:
        lifecycle.down(site)
        shutil.rmtree(site.home, ignore_errors=True)


def priority(site: Site, ticket: int = 1) -> str:
    with sqlite3.connect(site.database) as db:
        return db.execute("SELECT priority FROM ticket WHERE id = ?", (ticket,)).fetchone()[0]


def test_two_copies_of_a_site_never_see_each_others_changes_or_resets(two_copies: tuple[Site, Site]) -> None:
    a, b = two_copies
    first, second = lifecycle.up(a), lifecycle.up(b)
    assert first.port != second.port and a.database != b.database
    seeded = priority(a)
    with sqlite3.connect(a.database) as db:  # an episode on copy a changes a ticket
        db.execute("UPDATE ticket SET priority = 'trivial' WHERE id = 1")
    lifecycle.reset(b)  # copy b is reset meanwhile: copy a keeps its episode's change
    assert (priority(a), priority(b)) == ("trivial", seeded)
    lifecycle.reset(a)
    assert priority(a) == seeded
    assert lifecycle.server_state(b) is not None and lifecycle.server_state(b).port == second.port


def test_a_task_reads_the_copy_of_the_worker_that_resets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INSTANCE_ENV, "test-c")
    task = SiteTask(3, template_key="trac.change-priority")
    assert task.site.instance == "test-c" and task.site.database == get_site("trac", instance="test-c").database
    monkeypatch.delenv(INSTANCE_ENV)
    assert SiteTask(3, template_key="trac.change-priority").site.database == get_site("trac").database


def test_a_site_instance_name_is_a_folder_name() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        get_site("trac", instance="../x")


@pytest.mark.browser
def test_two_workers_on_one_site_each_solve_their_own_episode() -> None:
    """Two update tasks of Trac at once, one per worker: each worker resets and checks its own copy (with
    one copy, one worker's reset would restore the database under the other's episode)."""
    tasks = site_tasks(["trac.change-priority"], None, [], split="train")
    factory = PolicyFactory(load_settings(), "scripted")
    got: dict[int, Trajectory] = {}

    def keep(job: EpisodeJob, trajectory: Trajectory, _shots: list) -> None:
        got[job.index] = trajectory

    try:
        run_jobs(
            AllJobs([job_for(i, t) for i, t in enumerate(tasks)]), policy_factory=factory,
            env_config=BrowserSettings(screenshots=False), harness_config=HarnessConfig(max_steps=2),
            pool=PoolConfig(workers=2), on_result=keep,
        )  # fmt: skip
    finally:
        for index in (1, 2):
            shutil.rmtree(get_site("trac", instance=worker_site_instance(index)).home, ignore_errors=True)
    assert sorted(got) == [0, 1] and all(t.verdict.reward == 1.0 for t in got.values()), [t.end for t in got.values()]
    urls = {t.meta["env_info"]["site_url"] for t in got.values()}
    assert len(urls) == 2  # two copies of Trac, two ports
    assert all(lifecycle.server_state(get_site("trac", instance=worker_site_instance(i))) is None for i in (1, 2))
