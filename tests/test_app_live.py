"""Live runs from `awm serve`: started from the page or the API, streamed as server-sent events, gated.

Real parts end to end: the server (a child process on a free loopback port), each run a child `awm run
--url` in real Chromium under the rails, a fixture page on 127.0.0.1 (reachable only because the server
was started with `--allow-host 127.0.0.1`). The model is the stub OpenAI server on 127.0.0.1 (what a
user pays for), so each run's steps are known in advance.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from awm.app.catalog import Catalog
from awm.app.live import LiveRun, events
from tests.app_server import get_json, post_json, serve, snap
from tests.stub_llm_server import Reply, StubLLMServer, stub_settings_file

DELETE_BID = "17"  # BrowserGym's id of the 'Delete account' button on live_account.html
TERMINAL = ("verdict", "error")


def read_stream(url: str, timeout: float = 240) -> list[tuple[str, dict]]:
    """Every (event, data) of a server-sent event stream until the server closes it."""
    out: list[tuple[str, dict]] = []
    kind = ""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind:
                out.append((kind, json.loads(line.removeprefix("data: "))))
                kind = ""
    return out


def wait_ended(base: str, run_id: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, runs = get_json(f"{base}/api/live")
        if not next(r for r in runs if r["run_id"] == run_id)["running"]:
            return
        time.sleep(0.5)
    raise AssertionError(f"live run {run_id} still running after {timeout} s")


@pytest.mark.browser
def test_a_live_run_streams_its_steps_and_exactly_one_terminal_event(live_page_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    replies = [Reply(text="Read it.\nsend_msg_to_user('The status reads: Nothing changed yet')")]
    with StubLLMServer(replies) as stub, serve([runs], "--allow-host", "127.0.0.1", "--config", str(stub_settings_file(tmp_path, stub.base_url, rails="max_steps = 4\n"))) as base:
        status, body = post_json(f"{base}/api/live", {"url": live_page_url, "goal": "What does the status line say?"})
        assert status == 202, body
        stream = read_stream(base + body["events"])
        kinds = [k for k, _ in stream]
        assert kinds.count("step") == 1 and [k for k in kinds if k in TERMINAL] == ["verdict"] and kinds[-1] == "verdict"
        step = next(d for k, d in stream if k == "step")
        assert step["action_str"].startswith("send_msg_to_user(") and step["screenshot_url"]
        with urllib.request.urlopen(base + step["screenshot_url"]) as shot:
            assert shot.read()[:4] == b"\x89PNG"
        with urllib.request.urlopen(base + step["picture_url"]) as picture:  # cropped to the page
            assert picture.read()[:4] == b"\x89PNG"
        verdict = stream[-1][1]
        assert verdict["end"] == "answered" and verdict["verdict_source"] == "self-reported"
        assert "The status reads: Nothing changed yet" in verdict["final_answer"]
        # The run is an ordinary run folder, listed with the others.
        _, listed = get_json(f"{base}/api/runs")
        assert [r["benchmark"] for r in listed if r["key"] == verdict["run"]] == ["live"]


@pytest.mark.browser
def test_a_visitor_who_leaves_does_not_stop_the_run(live_page_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    replies = [Reply(text="Read it.\nsend_msg_to_user('Nothing changed yet')", delay=2.0)]
    with StubLLMServer(replies) as stub, serve([runs], "--allow-host", "127.0.0.1", "--config", str(stub_settings_file(tmp_path, stub.base_url, rails="max_steps = 4\n"))) as base:
        _, body = post_json(f"{base}/api/live", {"url": live_page_url, "goal": "What does the status line say?"})
        with urllib.request.urlopen(base + body["events"], timeout=30) as response:
            response.readline()  # connected (a ping or the first event), then the visitor goes away
        wait_ended(base, body["run_id"])
        summary = json.loads((runs / "live" / body["run_id"] / "summary.json").read_text())
        assert summary["episodes"][0]["end"] == "answered"


@pytest.mark.browser
def test_three_concurrent_live_requests_give_one_429(live_page_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    answers: list[tuple[int, dict]] = []
    with StubLLMServer([], default=Reply(text="Done.\nsend_msg_to_user('done')")) as stub, serve(
        [runs], "--allow-host", "127.0.0.1", "--config", str(stub_settings_file(tmp_path, stub.base_url, rails="max_steps = 4\n"))
    ) as base:
        def ask() -> None:
            answers.append(post_json(f"{base}/api/live", {"url": live_page_url, "goal": "Say done"}))

        threads = [threading.Thread(target=ask) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(code for code, _ in answers)
        assert statuses == [202, 202, 429]
        assert next(body for code, body in answers if code == 429)["detail"] == "another run is in progress"
        for code, body in answers:
            if code == 202:
                wait_ended(base, body["run_id"])
        status, body = post_json(f"{base}/api/live", {"url": live_page_url, "goal": "Say done"})
        assert status == 202  # a slot is free again once the runs ended
        wait_ended(base, body["run_id"])


def test_refused_urls_and_incomplete_requests_answer_422_without_starting(live_page_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with serve([runs]) as base:  # no --allow-host: the fixture on 127.0.0.1 is refused like any loopback
        for url, reason in ((live_page_url, "loopback"), ("http://10.1.2.3/", "private"), ("file:///etc/passwd", "http")):
            status, body = post_json(f"{base}/api/live", {"url": url, "goal": "look"})
            assert status == 422 and body["detail"]["rail"] == "url" and reason in body["detail"]["reason"], body
        status, body = post_json(f"{base}/api/live", {"url": "https://example.com/", "intent": "type", "label": "Name"})
        assert status == 422 and "text to type" in json.dumps(body)
    assert not (runs / "live").exists() or not any((runs / "live").iterdir())


@pytest.mark.browser
def test_the_live_page_shows_steps_and_asks_a_person_to_approve(live_page_url: str, tmp_path: Path, chromium) -> None:
    runs = tmp_path / "runs"
    replies = [Reply(text=f"Delete the account.\nclick('{DELETE_BID}')"), Reply(text="yes")]  # the click; the done check
    with StubLLMServer(replies, default=Reply(text="Done.\nsend_msg_to_user('Deleted')")) as stub, serve(
        [runs], "--allow-host", "127.0.0.1", "--config", str(stub_settings_file(tmp_path, stub.base_url, rails="max_steps = 4\n"))
    ) as base:
        page = chromium.new_page(viewport={"width": 1300, "height": 900})
        page.goto(f"{base}/live")
        page.fill("#live-url", live_page_url)
        page.fill("#live-goal", "Delete my account")
        snap(page, "live-form")
        page.click("#live-start")
        page.wait_for_url("**/live/*")
        box = page.wait_for_selector(".approval", timeout=120_000)
        assert "click('17')" in box.inner_text() and "delete" in box.inner_text()
        snap(page, "live-approval")
        page.click(".approval button.approve")
        page.wait_for_selector("#terminal", timeout=120_000)
        assert page.get_attribute("#terminal", "data-kind") == "verdict"
        first = page.locator("#live-steps section.step").first.inner_text()
        assert "click('17')" in first and "approved by app" in first
        page.wait_for_function("[...document.querySelectorAll('#live-steps img')].every(i => i.complete && i.naturalWidth > 0)")
        snap(page, "live-run")
        page.close()
    [run_dir] = list((runs / "live").iterdir())
    from awm.traces import open_run

    with open_run(run_dir) as db:
        [episode] = db.episodes()
        first_step = db.steps(episode.id)[0]
    assert first_step.approval is not None and first_step.approval.approved and first_step.approval.approver == "app"
    assert first_step.outcome == "ok"


@pytest.mark.browser
def test_a_refused_url_is_shown_on_the_form(tmp_path: Path, chromium) -> None:
    with serve([tmp_path / "runs"]) as base:
        page = chromium.new_page()
        page.goto(f"{base}/live")
        page.fill("#live-url", "http://192.168.1.1/admin")
        page.fill("#live-goal", "look")
        page.click("#live-start")
        page.wait_for_selector("#live-refusal:not(:empty)")
        assert "private" in page.inner_text("#live-refusal")
        snap(page, "live-refused")
        page.close()


def test_a_stream_with_no_event_for_the_idle_time_ends_with_run_timed_out(tmp_path: Path) -> None:
    """The stream's own clock: a run that writes nothing (here a child that only sleeps) times out."""
    import asyncio

    run_dir = tmp_path / "runs" / "live" / "quiet"
    run_dir.mkdir(parents=True)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        run = LiveRun("quiet", run_dir, "http://example.com/", "nothing", process, "now")

        async def collect() -> list[dict[str, str]]:
            return [event async for event in events(run, Catalog([tmp_path / "runs"]), idle_s=0.6)]

        got: list[dict[str, str]] = []
        # In a thread of its own: the process's Playwright (another test's) holds this thread's event loop.
        worker = threading.Thread(target=lambda: got.extend(asyncio.run(collect())))
        worker.start()
        worker.join(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert [e["event"] for e in got] == ["error"] and "run timed out" in got[0]["data"]
