"""The episode page says what decided it, counts model steps and workflow sub-steps apart, and shows the
values a `run_workflow` call ran with; opened in Chromium over a run recorded without a browser.

The run (`details`) has two episodes of the same shape: one model step that called `run_workflow`, and the
three sub-steps it ran (typing 'juan' and 'Jc', then a click). `new-login` records the values it read
off the goal (`WorkflowCall.bound`) and ends with the benchmark's reward 1 but raw reward 0.2 (partial
credit: a failure); `old-login` is a record from before the bound values were kept, with a full reward.
"""

from __future__ import annotations

import csv
import io
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.app.runs import BoundValue, call_values, decided_by, step_counts, verdict_short
from awm.traces import RunRecorder
from awm.traces.db import RunDatabase
from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict, WorkflowCall
from tests.app_server import get_json, serve, snap
from tests.test_app_units import _episode


def record_workflow_run(run_dir: Path, *, name: str = "details", raw_reward: float = 0.2, old: bool = True, suffix: str = "") -> Path:
    """A run of two `run_workflow` episodes (see the module docstring); `raw_reward`: `new-login`'s;
    `old`: False leaves `old-login` out; `suffix` ends the episode ids (another run's ids differ)."""
    episodes = [("new-login#0-a1" + suffix, {"username": "juan", "password": "Jc"}, raw_reward), ("old-login#0-b2" + suffix, {}, None)]
    with RunRecorder(run_dir, config={"llm": {"model": "m"}}, config_hash="h", name=name) as recorder:
        for episode_id, bound, raw in episodes[: 2 if old else 1]:
            task = Task(task_id=episode_id.split("#")[0], goal="Log in as juan with password Jc", scope="s", benchmark="miniwob", seed=0)
            trajectory = Trajectory(trajectory_id=episode_id, task=task)
            recorder.start_episode(trajectory)
            call = Step(
                index=0, action={"name": "run_workflow", "args": {"name": "login", "params": {}}},
                action_str="run_workflow('login', {})", prompt_tokens=900, completion_tokens=12, llm_calls=1,
                guidance=["no_page_to_go_back_to"],
            )  # fmt: skip
            subs = [
                Step(index=1, action={"name": "fill", "args": {"bid": "16", "value": "juan"}}, action_str="fill('16', 'juan')",
                     target=TargetDesc(role="textbox", label="Username"), called_by=0, workflow="login"),
                Step(index=2, action={"name": "fill", "args": {"bid": "19", "value": "Jc"}}, action_str="fill('19', 'Jc')",
                     target=TargetDesc(role="textbox", label="Password"), called_by=0, workflow="login"),
                Step(index=3, action={"name": "click", "args": {"bid": "20"}}, action_str="click('20')",
                     target=TargetDesc(role="button", label="Login"), called_by=0, workflow="login"),
            ]  # fmt: skip
            for step in [*subs, call]:  # the harness records a model step after the sub-steps it called
                trajectory.steps.append(step)
                recorder.record_step(trajectory, step, None)
            trajectory.steps.sort(key=lambda s: s.index)
            trajectory.workflow_calls = [WorkflowCall(step=0, name="login", bound=bound, steps_total=3, steps_run=3, completed=True)]
            trajectory.end, trajectory.verdict = "done", Verdict(reward=1.0, raw_reward=raw)
            recorder.end_episode(trajectory)
    return run_dir


@pytest.fixture(scope="module")
def served_details(tmp_path_factory) -> Iterator[str]:
    runs = tmp_path_factory.mktemp("details") / "runs"
    record_workflow_run(runs / "details")
    record_workflow_run(runs / "other", name="other", raw_reward=1.0, old=False, suffix="9")  # new-login solved
    with serve([runs]) as base:
        yield base


def test_decided_by_names_the_rule_that_decided() -> None:
    partial = _episode(reward=1.0, raw_reward=0.2)
    assert decided_by(partial).startswith("ground truth: failed, raw reward 0.2 is below the full reward 1")
    assert "counts partial credit" in decided_by(partial) and verdict_short(partial) == "raw reward 0.2 < 1"
    assert decided_by(_episode(reward=1.0)) == "ground truth: success, reward 1 is the full reward 1"
    assert decided_by(_episode(reward=0.0, end="stuck")).endswith("; the agent gave up (stuck)")
    assert decided_by(_episode(end="answered", judge="success")).startswith("judge: success")
    assert "not decided" in decided_by(_episode(end="answered"))
    assert decided_by(_episode(end="llm_error", reward=0.0)).startswith("error: the episode ended with llm_error")
    assert verdict_short(_episode(end="answered", judge="failure")) == "judge: failure"


def test_step_counts_name_model_steps_and_sub_steps_apart() -> None:
    assert step_counts(1, 3) == "1 model step, 3 workflow sub-steps"
    assert step_counts(4, 0) == "4 model steps"
    assert step_counts(2, 1) == "2 model steps, 1 workflow sub-step"


def test_a_call_shows_its_values_from_the_record_or_else_from_what_its_sub_steps_typed(tmp_path: Path) -> None:
    record_workflow_run(tmp_path / "r")
    with RunDatabase(tmp_path / "r") as db:
        new, old = db.episode("new-login#0-a1"), db.episode("old-login#0-b2")
        assert (new.steps, new.sub_steps, new.model_steps) == (4, 3, 1)
        children = [s for s in db.steps(old.id) if s.called_by == 0]
    assert call_values(new.workflow_calls[0], children) == [
        BoundValue(name="password", value="Jc", source="goal"), BoundValue(name="username", value="juan", source="goal")
    ]
    given = WorkflowCall(step=0, name="login", params={"username": "juan"})
    assert call_values(given, children) == [
        BoundValue(name="username", value="juan", source="model"), BoundValue(name="Password", value="Jc", source="typed")
    ]


def test_the_episodes_api_counts_steps_apart_and_says_what_decided(served_details: str) -> None:
    status, rows = get_json(f"{served_details}/api/runs/details/episodes")
    assert status == 200
    new = next(r for r in rows if r["id"] == "new-login#0-a1")
    assert (new["model_steps"], new["sub_steps"], new["status_word"]) == (1, 3, "failed")
    assert new["decided_by"].startswith("ground truth: failed, raw reward 0.2")
    status, body = get_json(f"{served_details}/api/runs/details/episodes/new-login%230-a1")
    assert status == 200 and (body["model_steps"], body["sub_steps"]) == (1, 3) and body["decided_by"] == new["decided_by"]


@pytest.mark.browser
def test_the_episode_page_is_honest_about_verdict_steps_and_values(served_details: str, chromium) -> None:
    page = chromium.new_page(viewport={"width": 1300, "height": 900})
    page.goto(f"{served_details}/runs/details")
    row = page.locator("#episodes tr:has-text('new-login')").inner_text()
    assert "raw reward 0.2 < 1" in row and "\t1\t3\t" in row  # model steps, workflow sub-steps
    page.click("#episodes a:has-text('new-login')")
    page.wait_for_selector("section.step")
    decided = page.locator("[data-decided-by]").inner_text()
    assert "failed" in page.locator("h1 .badge").inner_text()
    assert decided.startswith("decided by ground truth: failed, raw reward 0.2 is below the full reward 1")
    facts = page.locator(".episode-facts").inner_text()
    assert "1 model step, 3 workflow sub-steps" in facts and "1 steps" not in facts
    assert "login with password = 'Jc' (read off the goal), username = 'juan' (read off the goal)" in facts
    assert "3 of 3 sub-steps ran" in facts
    call = page.locator("section.step[data-step='0']").inner_text()
    assert "run_workflow('login', {})" in call and "username = 'juan' (read off the goal)" in call
    assert "1 model call" in call
    assert "no_page_to_go_back_to (the filters that held" in page.locator("section.step[data-step='0'] [data-guidance]").inner_text()
    sub = page.locator(".substeps section.step[data-step='1']").inner_text()
    assert "no model call" in sub and "prompt not recorded" not in sub and "0 in / 0 out" not in sub
    snap(page, "episode-workflow")
    page.goto(f"{served_details}/runs/details/episodes/old-login%230-b2")
    facts = page.locator(".episode-facts").inner_text()
    assert "Username = 'juan' (typed by a sub-step), Password = 'Jc' (typed by a sub-step)" in facts
    assert page.locator("[data-decided-by]").inner_text() == "decided by ground truth: success, reward 1 is the full reward 1"
    page.close()




def assert_no_skipped_heading(page) -> None:
    levels = page.eval_on_selector_all("main h1, main h2, main h3, main h4", "hs => hs.map(h => +h.tagName[1])")
    assert levels and levels[0] == 1, levels
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), levels


@pytest.mark.browser
def test_an_episode_address_pasted_with_its_hash_opens_the_episode(served_details: str, chromium) -> None:
    page = chromium.new_page()
    page.goto(f"{served_details}/runs/details/episodes/new-login#0-a1")  # the browser sends /episodes/new-login
    page.wait_for_url(f"{served_details}/runs/details/episodes/new-login%230-a1*")
    assert page.locator("h1").inner_text().startswith("new-login#0")
    response = page.goto(f"{served_details}/runs/details/episodes/new-login")  # no fragment: say which ones
    assert response is not None and response.status == 404
    assert page.locator("#cut-episodes a").get_attribute("href") == "/runs/details/episodes/new-login%230-a1"
    assert_no_skipped_heading(page)
    page.close()
    status, body = get_json(f"{served_details}/api/runs/details/episodes/new-login")
    assert status == 404 and "write it as %23" in body["detail"]


def test_a_bad_parameter_is_a_readable_400(served_details: str) -> None:
    status, body = get_json(f"{served_details}/api/runs/details/episodes/new-login%230-a1/steps/first/screenshot.png")
    assert status == 400
    assert body == {"detail": "path parameter 'index': expected a valid integer, unable to parse string as an integer, got 'first'"}


@pytest.mark.browser
def test_headings_do_not_skip_levels_and_the_text_filter_has_a_label(served_details: str, chromium) -> None:
    page = chromium.new_page()
    for path in ("/", "/runs/details", "/runs/details/episodes/new-login%230-a1", "/live"):
        page.goto(served_details + path)
        assert_no_skipped_heading(page)
    page.goto(served_details + "/")
    page.get_by_label("Text").fill("details")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/?*q=details*")
    assert page.locator("#runs tr[data-key='details']").count() == 1
    page.close()


def _csv(url: str) -> tuple[str, str, list[dict[str, str]]]:
    with urllib.request.urlopen(url, timeout=30) as response:
        kind, disposition = response.headers["content-type"], response.headers["content-disposition"]
        return kind, disposition, list(csv.DictReader(io.StringIO(response.read().decode())))


def test_each_list_downloads_as_csv_or_json_and_an_unknown_format_is_a_400(served_details: str) -> None:
    kind, disposition, rows = _csv(f"{served_details}/api/runs/details/episodes?format=csv")
    assert kind.startswith("text/csv") and disposition == 'attachment; filename="details-episodes.csv"'
    assert [(r["id"], r["status_word"], r["model_steps"], r["sub_steps"]) for r in rows] == [
        ("new-login#0-a1", "failed", "1", "3"), ("old-login#0-b2", "success", "1", "3")
    ]
    assert rows[0]["task.goal"] == "Log in as juan with password Jc" and rows[0]["decided_by"].startswith("ground truth: failed")
    assert get_json(f"{served_details}/api/runs/details/episodes?format=json") == get_json(f"{served_details}/api/runs/details/episodes")
    _, disposition, runs = _csv(f"{served_details}/api/runs?format=csv&q=other")  # filtered as the page filters
    assert disposition == 'attachment; filename="runs.csv"'
    assert [(r["key"], r["episodes"], r["counts.success"]) for r in runs] == [("other", "1", "1")]
    for url in ("/api/runs?format=xml", "/api/runs/details/episodes?format=CSV"):
        status, body = get_json(served_details + url)
        assert status == 400, url
        assert body["detail"].startswith("query parameter 'format': expected 'json' or 'csv', got ")


@pytest.mark.browser
def test_the_download_link_gives_the_table_and_a_header_click_sorts_it(served_details: str, chromium, tmp_path: Path) -> None:
    page = chromium.new_page(viewport={"width": 1300, "height": 700})
    page.goto(f"{served_details}/")
    keys = lambda: page.eval_on_selector_all("#runs tbody tr", "rows => rows.map(r => r.dataset.key)")  # noqa: E731
    header = page.locator("#runs th", has_text="episodes")
    header.click()
    assert keys() == ["other", "details"] and header.get_attribute("aria-sort") == "ascending"  # 1 before 2
    header.click()
    assert keys() == ["details", "other"] and header.get_attribute("aria-sort") == "descending"
    page.goto(f"{served_details}/runs/details")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    saved = tmp_path / "episodes.csv"
    download.value.save_as(saved)
    rows = list(csv.DictReader(saved.open()))
    assert download.value.suggested_filename == "details-episodes.csv" and [r["id"] for r in rows] == ["new-login#0-a1", "old-login#0-b2"]
    page.locator("#episodes th", has_text="episode").first.click()
    page.locator("#episodes th", has_text="episode").first.click()
    ids = page.eval_on_selector_all("#episodes tbody tr td:first-child", "cells => cells.map(c => c.innerText)")
    assert ids == ["old-login#0-b2", "new-login#0-a1"]
    snap(page, "run-sorted")
    page.close()


def test_compare_pairs_by_task_and_seed_and_keeps_the_latest_attempt() -> None:
    from awm.app.compare import compare_runs

    a = [_episode(id="a1", task_key="t#0", reward=0.0), _episode(id="a2", task_key="t#0", reward=1.0), _episode(id="a3", task_key="u#0", reward=1.0)]
    b = [_episode(id="b1", task_key="t#0", reward=0.0), _episode(id="b2", task_key="v#0", reward=1.0)]
    result = compare_runs("A", a, "B", b)
    assert [(r.task_key, r.change) for r in result.rows] == [("t#0", "better in a"), ("u#0", "only in a"), ("v#0", "only in b")]
    first = result.rows[0]
    assert first.a is not None and (first.a.episode, first.a.attempts, first.a.url) == ("a2", 2, "/runs/A/episodes/a2")
    assert (result.shared, result.success) == (1, {"a": 1, "b": 0})


def test_the_compare_api_answers_rows_csv_and_clear_errors(served_details: str) -> None:
    status, body = get_json(f"{served_details}/api/compare?a=details&b=other")
    assert status == 200 and (body["shared"], body["success"]) == (1, {"a": 0, "b": 1})
    rows = {r["task_key"]: r for r in body["rows"]}
    new, old = rows["new-login#0"], rows["old-login#0"]
    assert (new["a"]["status"], new["b"]["status"], new["change"]) == ("failed", "success", "better in b")
    assert new["b"]["url"] == "/runs/other/episodes/new-login%230-a19"
    assert old["b"] is None and old["change"] == "only in a"
    _, disposition, lines = _csv(f"{served_details}/api/compare?a=details&b=other&format=csv")
    assert disposition == 'attachment; filename="compare-details-other.csv"'
    assert [(r["task_key"], r["a.status"], r["b.status"], r["change"]) for r in lines] == [
        ("new-login#0", "failed", "success", "better in b"), ("old-login#0", "success", "", "only in a")
    ]
    assert get_json(f"{served_details}/api/compare?a=details&b=nope") == (404, {"detail": "no run 'nope' under the served folders"})
    assert get_json(f"{served_details}/api/compare?a=details") == (400, {"detail": "query parameter 'b' is required"})


@pytest.mark.browser
def test_the_compare_page_shows_both_runs_side_by_side_with_links(served_details: str, chromium) -> None:
    page = chromium.new_page(viewport={"width": 1300, "height": 700})
    page.goto(f"{served_details}/")
    page.get_by_role("link", name="Compare").click()
    page.select_option("#run-a", "details")
    page.select_option("#run-b", "other")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/compare?a=details&b=other")
    assert_no_skipped_heading(page)
    summary = page.locator("#compare-summary").inner_text()
    assert "1 task in both: A solves 0, B solves 1; better in B 1" in summary and "only in A 1, only in B 0" in summary
    new = page.locator("#compare tr[data-task='new-login#0']").inner_text()
    assert "failed" in new and "raw reward 0.2 < 1" in new and "success" in new and "better in B" in new
    assert "not in this run" in page.locator("#compare tr[data-task='old-login#0']").inner_text()
    assert page.get_by_role("link", name="Download CSV").get_attribute("href") == "/api/compare?a=details&b=other&format=csv"
    snap(page, "compare")
    page.locator("#compare tr[data-task='new-login#0'] a.steps-link").click()
    page.wait_for_url("**/compare/steps?a=details&b=other&task=new-login%230")
    assert page.locator("#diverged").inner_text() == "never: the same actions on the same targets"
    assert page.locator("#step-pairs tbody tr").count() == 1 and "3 workflow sub-steps" in page.locator("#step-pairs").inner_text()
    snap(page, "compare-steps")
    page.go_back()
    page.locator("#compare tr[data-task='new-login#0'] td:nth-child(5) a").click()
    page.wait_for_url("**/runs/other/episodes/new-login%230-a19")
    assert "decided by ground truth: success" in page.locator("[data-decided-by]").inner_text()
    response = page.goto(f"{served_details}/compare?a=details&b=nope")
    assert response is not None and response.status == 404
    assert page.locator("#compare-error").inner_text() == "no run 'nope' under the served folders"
    assert page.locator("#compare-form").count() == 1 and page.locator("#compare").count() == 0
    page.close()


def _plain_run(run_dir: Path, steps: list[tuple[str, str, str]]) -> None:
    """A run of one task (`steps`: action text, target label, outcome) as the harness records it."""
    with RunRecorder(run_dir, config={}, config_hash="h", name=run_dir.name) as recorder:
        task = Task(task_id="shop.add-to-cart", goal="Add the blue kettle to the cart", scope="s", benchmark="browsergym", seed=0)
        trajectory = Trajectory(trajectory_id=f"shop.add-to-cart#0-{run_dir.name}", task=task)
        recorder.start_episode(trajectory)
        for i, (action, label, outcome) in enumerate(steps):
            step = Step(index=i, action_str=action, target=TargetDesc(role="link", label=label), outcome=outcome)  # type: ignore[arg-type]
            trajectory.steps.append(step)
            recorder.record_step(trajectory, step, None)
        trajectory.end = "done"
        recorder.end_episode(trajectory)


def test_two_episodes_of_a_task_step_by_step_and_where_they_diverged(tmp_path: Path) -> None:
    from awm.app.compare import _latest as latest
    from awm.app.compare import compare_steps

    _plain_run(tmp_path / "a", [("click('12')", "Kettles", "ok"), ("click('31')", "Blue kettle", "ok"), ("click('40')", "Add to cart", "ok")])
    _plain_run(tmp_path / "b", [("click('9')", "Kettles", "ok"), ("click('33')", "Red kettle", "ok")])
    sides = []
    for key in ("a", "b"):
        with RunDatabase(tmp_path / key) as db:
            outcome = latest(key, db.episodes())["shop.add-to-cart#0"]
            sides.append((outcome, db.steps(outcome.episode)))
    result = compare_steps("a", sides[0], "b", sides[1], "shop.add-to-cart#0")
    assert [p.same for p in result.pairs] == [True, False, False]  # the first click is the same, ids aside
    assert result.diverged_at == 2 and result.pairs[2].b is None
    assert (result.pairs[1].a.target, result.pairs[1].b.target) == ("link 'Blue kettle'", "link 'Red kettle'")  # type: ignore[union-attr]


def test_the_step_by_step_api_answers_and_names_what_is_missing(served_details: str) -> None:
    status, body = get_json(f"{served_details}/api/compare/steps?a=details&b=other&task=new-login%230")
    assert status == 200 and body["diverged_at"] is None
    [pair] = body["pairs"]  # one model step each: the run_workflow call, its three sub-steps folded in
    assert pair["same"] and pair["a"]["sub_steps"] == 3 and pair["b"]["action"] == "run_workflow('login', {})"
    status, missing = get_json(f"{served_details}/api/compare/steps?a=details&b=other&task=nothing%230")
    assert status == 404 and missing["detail"] == "neither details nor other has an episode of task 'nothing#0'"


def test_the_html_export_says_the_same_as_the_episode_page(tmp_path: Path) -> None:
    from awm.app.export import export_html

    html = export_html(record_workflow_run(tmp_path / "r"))
    assert "decided by ground truth: failed, raw reward 0.2 is below the full reward 1" in html
    assert "1 model step, 3 workflow sub-steps" in html and "(typed by a sub-step)" in html and "no model call" in html
