"""The pure parts of `awm serve`: the catalog's path checks, page rows, live requests, the file gate."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from awm.app.catalog import Catalog, NotServed, file_in
from awm.app.live import LiveRequest, LiveRun, child_command, pending_questions, terminal_event
from awm.app.runs import RunListing, episode_status, read_run, screenshot_url, step_tree
from awm.app.serve_cli import bind_warning, served_folders
from awm.app.server import StepShot, episode_payload, episode_view_data, filter_runs, list_runs
from awm.app.web import AppContext, AppSettings
from awm.errors import ConfigError
from awm.gate import FolderGate, GateRequest, answer_question
from awm.traces import RunRecorder
from awm.traces.db import EpisodeRow, RunDatabase, StepRow
from awm.trajectory import Step, Task, Trajectory, Verdict
from awm.webarena.harness import StepCapture


def _episode(**fields) -> EpisodeRow:
    base = dict(
        id="e", run_id="r", task_key="t#0", task=Task(task_id="t", goal="g", scope="s", benchmark="miniwob"), scope="", memory_version=None,
        model="m", status="ended", end="done", final_answer="", reward=None, judge=None, judge_reason="",
        started_at="", seconds=0.0, prompt_tokens=0, completion_tokens=0,
    )  # fmt: skip
    return EpisodeRow(**{**base, **fields})


def _step(idx: int, outcome: str = "ok", called_by: int | None = None) -> StepRow:
    return StepRow(
        episode_id="e", idx=idx, prompt_hash="", observation="", model_output="", thought="", action=None,
        action_str="", target=None, outcome=outcome, error="", feedback="", url="", fingerprint="", llm_ms=None,
        exec_ms=None, observe_ms=None, timings={}, prompt_tokens=0, completion_tokens=0, llm_calls=0,
        screenshot=None, recorded_at="", called_by=called_by,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"reward": 1.0}, "success"),
        ({"reward": 0.0}, "failed"),
        ({"reward": 0.0, "end": "stuck"}, "stuck"),
        ({"end": "llm_error", "reward": 0.0}, "error"),
        ({"end": "answered"}, "unjudged"),
        ({"end": "answered", "judge": "success"}, "success"),
        ({"status": "running", "end": "running"}, "running"),
    ],
)
def test_episode_status_words(fields: dict, status: str) -> None:
    assert episode_status(_episode(**fields)) == status


def _recorded_run(run_dir: Path) -> Path:
    """A run of two episodes: `ep-a` ended (recovered once, a screenshot at steps 0 and 2), `ep-b` never
    ended (its trajectory only in the rows; recovered once)."""
    png = b"\x89PNG\r\n\x1a\n not really an image"
    with RunRecorder(run_dir, config={"llm": {"model": "m"}}, config_hash="h", name="two") as recorder:
        for episode_id, outcomes in (("ep-a", ["parse_error", "ok", "ok"]), ("ep-b", ["no_progress", "ok"])):
            trajectory = Trajectory(trajectory_id=episode_id, task=Task(task_id=episode_id, goal="g", scope="s", benchmark="miniwob"))
            recorder.start_episode(trajectory)
            for index, outcome in enumerate(outcomes):
                step = Step(index=index, outcome=outcome, action_str=f"click('{index}')")  # type: ignore[arg-type]
                trajectory.steps.append(step)
                capture = StepCapture(png=png) if episode_id == "ep-a" and index != 1 else None
                recorder.record_step(trajectory, step, capture)
            if episode_id == "ep-a":
                trajectory.end, trajectory.verdict = "done", Verdict(reward=1.0)
                recorder.end_episode(trajectory)
    return run_dir


def test_the_runs_listing_counts_recoveries_per_episode_and_per_run(tmp_path: Path) -> None:
    _recorded_run(tmp_path / "runs" / "two")
    settings = AppSettings(runs=[tmp_path / "runs"], live_dir=tmp_path / "runs" / "live")
    ctx = AppContext(settings=settings, catalog=Catalog(settings.runs))
    [listing] = list_runs(ctx)
    assert (listing.key, listing.episodes, listing.recoveries) == ("two", 2, 2)
    _, episodes, recovered = read_run(ctx.catalog.folder("two", "run"))
    assert [e.id for e in episodes] == ["ep-a", "ep-b"] and recovered == {"ep-a": 1, "ep-b": 1}


def test_the_episode_view_reads_through_one_open_database_and_links_screenshots_one_way(tmp_path: Path) -> None:
    _recorded_run(tmp_path / "runs" / "two")
    folder = Catalog([tmp_path / "runs"]).folder("two", "run")
    with RunDatabase(folder.path) as db:
        linked = episode_view_data(None, folder, db, "ep-a", embed=False)
        embedded = episode_view_data(None, folder, db, "ep-a", embed=True)
        running = episode_view_data(None, folder, db, "ep-b", embed=False)  # rebuilt from its rows
        with pytest.raises(NotServed, match="no episode 'ep'"):
            episode_view_data(None, folder, db, "ep", embed=False)  # exact ids only
        payload = episode_payload(folder, *(db.episode("ep-a"), db.steps("ep-a")))
    assert linked["shots"] == {
        i: StepShot(picture=screenshot_url("two", "ep-a", i, "picture.png"), full=screenshot_url("two", "ep-a", i)) for i in (0, 2)
    }
    assert [s["screenshot_url"] for s in payload["steps"]] == [linked["shots"][0].full, None, linked["shots"][2].full]
    assert [s["picture_url"] for s in payload["steps"]] == [linked["shots"][0].picture, None, linked["shots"][2].picture]
    assert set(embedded["shots"]) == {0, 2}
    assert all(u.startswith("data:image/png;base64,") for s in embedded["shots"].values() for u in (s.picture, s.full))
    assert [n.step.idx for n in running["tree"]] == [0, 1] and running["shots"] == {}
    assert running["status"] == "running" and linked["status"] == "success"


def test_step_tree_nests_workflow_sub_steps_and_keeps_orphans() -> None:
    tree = step_tree([_step(0), _step(1), _step(2, called_by=1), _step(3, called_by=1), _step(4, called_by=9)])
    assert [(n.step.idx, [c.idx for c in n.children]) for n in tree] == [(0, []), (1, [2, 3]), (4, [])]


def test_filter_runs_by_status_and_text() -> None:
    rows = [
        RunListing(key="a", name="miniwob-llm", created_at="1", status="done", counts={"success": 2}),
        RunListing(key="b", name="live", created_at="2", status="running", counts={"failed": 1}),
    ]
    assert [r.key for r in filter_runs(rows, "failed", "")] == ["b"]
    assert [r.key for r in filter_runs(rows, "running", "")] == ["b"]
    assert [r.key for r in filter_runs(rows, "", "MINIWOB")] == ["a"]
    assert filter_runs(rows, "stuck", "") == []


def test_catalog_resolves_only_files_inside_a_served_folder(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = root / "group" / "one"
    run.mkdir(parents=True)
    (run / "run.sqlite").write_bytes(b"")
    (run / "shot.png").write_bytes(b"png")
    (tmp_path / "secret.png").write_bytes(b"secret")
    (run / "link.png").symlink_to(tmp_path / "secret.png")
    catalog = Catalog([root])
    folder = catalog.folder("group~one", "run")
    assert file_in(folder, "shot.png") == (run / "shot.png").resolve()
    for bad in ("../../secret.png", str(tmp_path / "secret.png"), "link.png", "", "missing.png"):
        with pytest.raises(NotServed):
            file_in(folder, bad)
    with pytest.raises(NotServed):
        catalog.folder("group~one", "ablation")
    assert catalog.key_of(run) == "group~one" and catalog.key_of(tmp_path) is None


def test_bind_warning_only_off_loopback() -> None:
    assert bind_warning("127.0.0.1", 8765) is None and bind_warning("::1", 1) is None
    assert bind_warning("localhost", 1) is None
    warning = bind_warning("0.0.0.0", 8765)
    assert warning is not None and "anyone who can reach port 8765 can" in warning and "start live runs" in warning


def test_serve_refuses_a_runs_folder_that_is_not_there_before_it_starts(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "serve", "--runs", str(tmp_path), "--runs", str(missing), "--port", "9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: --runs {missing}: no such folder (give a folder of run folders, e.g. --runs runs)"
    assert not (tmp_path / "no").exists()


def test_served_folders_are_the_named_ones_or_the_default_made_on_first_use(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert served_folders([tmp_path], tmp_path / "default") == [tmp_path]
    assert not (tmp_path / "default").exists()  # named folders: the default is not touched
    assert served_folders(None, tmp_path / "default") == [tmp_path / "default"] and (tmp_path / "default").is_dir()
    for bad in ([tmp_path / "missing"], [tmp_path / "file"]):
        with pytest.raises(ConfigError, match=str(bad[0])):
            served_folders(bad, tmp_path / "default")


def test_live_requests_name_a_goal_or_a_complete_intent() -> None:
    assert LiveRequest(url="https://a.example/", goal=" Find the price ").goal_text() == "Find the price"
    assert LiveRequest(url="https://a.example/", intent="click", label="Sign in").goal_text() == (
        "Click the element labelled 'Sign in'."
    )
    typed = LiveRequest(url="https://a.example/", intent="type", label="Search", text="socks")
    assert typed.goal_text() == "Type 'socks' into the field labelled 'Search' and submit it."
    for bad in ({"goal": ""}, {"intent": "click"}, {"intent": "type", "label": "Search"}, {"goal": "x", "shell": "1"}):
        with pytest.raises(ValidationError):
            LiveRequest(url="https://a.example/", **bad)


def test_child_command_is_awm_run_with_the_app_gate(tmp_path: Path) -> None:
    settings = AppSettings(runs=[tmp_path], live_dir=tmp_path / "live", allow_hosts=["127.0.0.1"], config=tmp_path / "c.toml")
    command = child_command(settings, tmp_path / "live" / "x", "http://127.0.0.1:9/", "say hi; rm -rf /", judge=True)
    assert command[:4] == [sys.executable, "-m", "awm.cli", "run"]
    assert command[command.index("--goal") + 1] == "say hi; rm -rf /"  # one argument, never a shell line
    assert ["--confirm", "--confirm-with", "app"] == command[command.index("--confirm") : command.index("--confirm") + 3]
    assert ["--allow-host", "127.0.0.1"] == command[command.index("--allow-host") : command.index("--allow-host") + 2]
    assert command[-1] == "--judge" and str(tmp_path / "c.toml") in command


def _request() -> GateRequest:
    return GateRequest(action="click('7')", reason="it submits a form", element="button 'Pay'", screenshot_png=b"png", label="ep-3")


def test_the_folder_gate_waits_for_the_answer_written_beside_its_question(tmp_path: Path) -> None:
    gate = FolderGate(tmp_path, timeout_s=20, poll_s=0.05)

    def person() -> None:
        for _ in range(200):
            waiting = pending_questions(tmp_path)
            if waiting:
                assert answer_question(tmp_path, waiting[0]["id"], approve=True, by="app")
                return
            time.sleep(0.05)

    answerer = threading.Thread(target=person)
    answerer.start()
    approval = gate.ask(_request())
    answerer.join()
    assert approval.approved and approval.approver == "app" and approval.action == "click('7')"
    assert Path(approval.screenshot).read_bytes() == b"png" and pending_questions(tmp_path) == []


def test_no_answer_in_time_denies_and_a_late_answer_is_refused(tmp_path: Path) -> None:
    approval = FolderGate(tmp_path, timeout_s=0.3, poll_s=0.05).ask(_request())
    assert not approval.approved and approval.approver == "timeout"
    [question] = list(tmp_path.glob("*.question.json"))
    question_id = question.name.removesuffix(".question.json")
    assert answer_question(tmp_path, question_id, approve=True, by="app") is False


def test_a_run_that_exits_non_zero_ends_with_an_error_event_not_a_verdict(tmp_path: Path) -> None:
    (tmp_path / "serve.log").write_text("error: --url http://x/: refused: x is not a public name\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    process.wait()
    event = terminal_event(LiveRun("x", tmp_path, "http://x/", "g", process, "now"), "live~x")
    assert event["event"] == "error" and "exit 2" in event["data"]["message"]
    assert "refused" in event["data"]["detail"]


def test_filter_runs_keeps_an_ablation_with_its_matching_arms() -> None:
    arms = [
        RunListing(key="abl~arms~off~rep1", name="x", created_at="1", status="done", counts={"failed": 1}, ablation="abl", arm="off", repeat="rep1"),
        RunListing(key="abl~arms~on~rep1", name="x", created_at="1", status="done", counts={"success": 1}, ablation="abl", arm="on", repeat="rep1"),
    ]  # fmt: skip
    rows = [RunListing(key="abl", kind="ablation", name="abl", created_at="2", status="done", counts={"failed": 1, "success": 1}, arms=arms)]
    assert [a.key for a in filter_runs(rows, "failed", "")[0].arms] == ["abl~arms~off~rep1"]
    assert [a.key for a in filter_runs(rows, "", "abl")[0].arms] == ["abl~arms~off~rep1", "abl~arms~on~rep1"]
    assert filter_runs(rows, "stuck", "") == []
