"""`awm run --url`: the command a person types, end to end, with a scripted stand-in for a hosted model.

The page is a fixture on 127.0.0.1, reachable only with `--allow-host 127.0.0.1`; the model is the stub
OpenAI server on 127.0.0.1 (what a user pays for), so the run's path is the real one: the URL check,
BrowserGym's open-ended task in Chromium under the rails, the harness, the run folder, the summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from awm.traces import open_run
from tests.stub_llm_server import Reply, StubLLMServer, stub_settings_file

REPO = Path(__file__).resolve().parents[1]
DELETE_BID = "17"  # BrowserGym's id of the 'Delete account' button on live_account.html (checked below)


def awm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "awm.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=240, input=stdin
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--goal", "look around"], "refused: 127.0.0.1 is a loopback address"),
        (["--goal", "look around", "--allow-host", "127.0.0.1", "--max-steps", "99"], "above the live-run step budget 15"),
        (["--goal", "look around", "--allow-host", "127.0.0.1", "--tasks", "click-test"], "either --tasks"),
        (["--allow-host", "127.0.0.1"], "needs a goal"),
        (["--goal", "look", "--allow-host", "127.0.0.1", "--confirm-with", "app"], "--confirm-with goes with --confirm"),
    ],
)  # fmt: skip
def test_bad_live_requests_fail_before_any_browser(live_page_url: str, tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "run"
    done = awm("run", "--url", live_page_url, *args, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_goal_without_url_is_refused() -> None:
    done = awm("run", "--tasks", "click-test", "--goal", "x")
    assert done.returncode == 2 and "--goal goes with --url" in done.stderr


@pytest.mark.browser
def test_a_live_run_ends_on_the_agents_answer_and_reports_it_as_self_reported(live_page_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    answer = "The page is open.\nsend_msg_to_user('The status reads: Nothing changed yet')"
    with StubLLMServer([Reply(text=answer)]) as stub:
        done = awm(
            "run", "--url", live_page_url, "--goal", "What does the status line say?", "--allow-host", "127.0.0.1",
            "--config", str(stub_settings_file(tmp_path, stub.base_url)), "--out", str(out),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the agent says: The status reads: Nothing changed yet" in done.stdout
    assert "self-reported" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    [episode] = summary["episodes"]
    assert episode["end"] == "answered" and episode["verdict_source"] == "self-reported"
    assert not episode["success"] and episode["start_url"] == live_page_url
    assert "the agent ended it itself as 'answered' (self-reported)" in (out / "summary.md").read_text()
    with open_run(out) as db:
        [row] = db.episodes()
        [step] = db.steps(row.id)
        assert step.screenshot and (out / step.screenshot).is_file()
    [trajectory] = list((out / "trajectories").glob("*.json"))
    meta = json.loads(trajectory.read_text())["meta"]
    assert meta["rails"]["site"] == "127.0.0.1" and meta["rails"]["allow_hosts"] == ["127.0.0.1"]


@pytest.mark.browser
@pytest.mark.parametrize(("typed", "approved"), [("y\n", True), ("n\n", False)])
def test_confirm_asks_on_the_terminal_and_the_trace_records_the_answer(
    live_page_url: str, tmp_path: Path, typed: str, approved: bool
) -> None:
    out = tmp_path / "run"
    replies = [
        Reply(text=f"Delete the account.\nclick('{DELETE_BID}')"),
        Reply(text="Done.\nsend_msg_to_user('I tried to delete the account')"),
    ]
    with StubLLMServer(replies) as stub:
        done = awm(
            "run", "--url", live_page_url, "--goal", "Delete my account", "--allow-host", "127.0.0.1", "--confirm",
            "--config", str(stub_settings_file(tmp_path, stub.base_url)), "--out", str(out), stdin=typed,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Allow it? [y/N]" in done.stderr and "the control says 'delete'" in done.stderr
    with open_run(out) as db:
        [row] = db.episodes()
        first = db.steps(row.id)[0]
    assert first.target is not None and first.target.label == "Delete account"
    assert first.approval is not None and first.approval.approved is approved
    assert first.approval.approver == "terminal"
    assert first.outcome == ("ok" if approved else "denied")
    assert Path(first.approval.screenshot).parent == out / "confirm"
    assert ("approved" if approved else "denied") + " by terminal" in done.stdout


@pytest.mark.browser
def test_with_judge_the_live_run_gets_a_verdict_instead_of_a_self_report(live_page_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    replies = [
        Reply(text="The page is open.\nsend_msg_to_user('The status reads: Nothing changed yet')"),
        Reply(text="yes"),  # the judge's yes/no question (awm.evaluation.judge)
    ]
    with StubLLMServer(replies) as stub:
        done = awm(
            "run", "--url", live_page_url, "--goal", "What does the status line say?", "--allow-host", "127.0.0.1",
            "--judge", "--config", str(stub_settings_file(tmp_path, stub.base_url)), "--out", str(out),
        )  # fmt: skip
        judged = [r for r in stub.requests if "The status reads" in json.dumps(r.body)]
    assert done.returncode == 0, done.stdout + done.stderr
    [episode] = json.loads((out / "summary.json").read_text())["episodes"]
    assert episode["verdict_source"] == "judge" and episode["judge"] == "success" and episode["success"]
    assert "verdict (judge): success; end answered" in done.stdout
    assert len(judged) == 1  # the judge was shown the agent's message
