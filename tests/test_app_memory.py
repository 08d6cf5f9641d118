"""The memory browser of `awm serve`, used the way a person uses it: real server, real Chromium.

A memory database is built with `WorkflowStore` (three commits to `miniwob/login-user`: a workflow
added, then one changed and one more added), next to the scripted run from `scripted_runs`, so a
workflow's source episode resolves to a served episode page. Each scope is used by one test that writes
(or by none), so the tests hold in any order.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from awm.memory.composition import call_step
from awm.memory.store import WorkflowStore, WorkflowUse
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.traces import RunRecorder
from awm.traces.db import RunDatabase
from awm.trajectory import TargetDesc, Task, Trajectory
from tests.app_server import get_json, get_status, post_json, serve, snap

SHOWN = "miniwob/login-user"  # read only: the pages' diff and provenance
CLICKED = "miniwob/click-test"  # rolled back in the browser
POSTED = "miniwob/enter-text"  # rolled back through the API
ODD = "edge/versions"  # a scope whose name is a route word: the routes must not shadow each other
REPLAYED = "miniwob/replayed"  # v2 keeps v1's workflow, replayed and re-admitted: a provenance change only
MISSING_EPISODE = "never-served#0"
COMPOSED = "sites/trac/close-ticket"  # a whole that calls its log-in part (`awm.memory.composition`)


def step(action: str, role: str, label: str, value: str = "") -> WorkflowStep:
    return WorkflowStep(action=action, target=TargetDesc(role=role, label=label), value=value)


def build_memory(db: Path, episode_id: str) -> None:
    """`SHOWN`: v1 enter_credentials; v2 + press_enter; v3 enter_credentials changed, + check_result."""
    credentials = Workflow(
        name="enter_credentials",
        description='Enter the username "{username}" and the password "{password}"',
        parameters=["username", "password"],
        steps=[step("fill", "textbox", "Username", "{username}"), step("fill", "textbox", "Password", "{password}")],
        provenance=Provenance(trajectory_ids=[episode_id, MISSING_EPISODE], mode="rule", admission="success"),
    )
    press_enter = Workflow(name="press_enter", steps=[step("press", "textbox", "Password", "Enter")])
    changed = credentials.model_copy(update={"steps": [*credentials.steps, step("click", "button", "Login")]})
    check = Workflow(name="check_result", description="See that the page says done", steps=[step("noop", "", "")])
    with WorkflowStore(db) as store:
        store.commit(SHOWN, [credentials], parent=None, author="rule", message="first induction")
        store.commit(SHOWN, [credentials, press_enter], parent=1, author="import", message="import keys.txt")
        store.commit(SHOWN, [changed, press_enter, check], parent=2, author="neural", message="re-induced")
        replayed = credentials.model_copy(update={"provenance": credentials.provenance.model_copy(
            update={"admission": "replay: success", "replay_trajectory_id": "replay-7", "replay_verdict": "success"})})
        store.commit(REPLAYED, [credentials], parent=None, author="rule", message="induced")
        store.commit(REPLAYED, [replayed], parent=1, author="rule", message="replayed")
        log_in = credentials.model_copy(update={"name": "log in", "provenance": Provenance(
            part_of="close ticket", replay_verdict="with its whole: success (URL contains '/ticket/7')")})
        whole = Workflow(
            name="close ticket", description="As {username}, close ticket {ticket}", parameters=["username", "password", "ticket"],
            steps=[call_step(log_in), step("click", "link", "#{ticket}"), step("click", "button", "Close")],
            provenance=Provenance(replay_verdict="success (URL contains '/ticket/7')"),
        )
        store.commit(COMPOSED, [whole, log_in], parent=None, author="rule", message="induced with parts")
        for scope in (CLICKED, POSTED, ODD):
            store.commit(scope, [press_enter], parent=None, author="manual", message="seed")
            store.commit(scope, [press_enter, check], parent=1, author="neural", message="grew")
        store.record_uses(SHOWN, [
            WorkflowUse("ep-1", 0, "press_enter", True, 1, 1, ""),
            WorkflowUse("ep-2", 0, "press_enter", False, 0, 1, "step 1 of 1 (press [textbox] Password): target_not_found"),
        ])  # fmt: skip


@pytest.fixture(scope="module")
def episode_id(scripted_runs: Path) -> str:
    with RunDatabase(scripted_runs / "scripted") as db:
        return db.episodes()[0].id


REMEMBERED = "remembered#0-c3"  # an episode that ran with SHOWN at v2 (the head is v3)


def record_remembering_run(run_dir: Path) -> None:
    """A run of one episode that saw `SHOWN`'s version 2."""
    with RunRecorder(run_dir, config={}, config_hash="h", name="remembered") as recorder:
        task = Task(task_id="remembered", goal="Log in", scope=SHOWN, benchmark="miniwob", seed=0)
        trajectory = Trajectory(trajectory_id=REMEMBERED, task=task, memory_scope=SHOWN, memory_version=2)
        recorder.start_episode(trajectory)
        trajectory.end = "done"
        recorder.end_episode(trajectory)


@pytest.fixture(scope="module")
def server(scripted_runs: Path, episode_id: str, tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("memory")
    db = root / "memory.sqlite"
    build_memory(db, episode_id)
    record_remembering_run(root / "runs" / "remembered")
    with serve([scripted_runs, root / "runs"], memory=db) as base:
        yield base


def test_api_answers_as_specified(server: str) -> None:
    status, scopes = get_json(f"{server}/api/memory/scopes")
    assert status == 200
    shown = next(row for row in scopes if row["scope"] == SHOWN)
    assert shown["head"] == 3 and shown["n_workflows"] == 3 and shown["author"] == "neural" and shown["created_at"]

    status, log = get_json(f"{server}/api/memory/{SHOWN}/versions")
    assert status == 200
    assert [(v["version"], v["parent"], v["author"]) for v in log] == [(1, None, "rule"), (2, 1, "import"), (3, 2, "neural")]

    status, version = get_json(f"{server}/api/memory/{SHOWN}/versions/1")
    assert status == 200 and version["version"] == 1
    assert [w["name"] for w in version["workflows"]] == ["enter_credentials"]
    assert MISSING_EPISODE in version["workflows"][0]["provenance"]["trajectory_ids"]

    status, diff = get_json(f"{server}/api/memory/{SHOWN}/diff?a=2&b=3")
    assert status == 200
    assert (diff["added"], diff["removed"], diff["changed"]) == (["check_result"], [], ["enter_credentials"])
    assert '"label": "Login"' in diff["patches"]["enter_credentials"]

    # A scope named like a route word is still a scope, on every route.
    assert get_json(f"{server}/api/memory/{ODD}/versions")[1][-1]["version"] == 2
    assert get_json(f"{server}/api/memory/{ODD}/versions/1")[1]["scope"] == ODD

    for url in (
        f"{server}/api/memory/no/such/versions",
        f"{server}/api/memory/no/such/versions/1",
        f"{server}/api/memory/{SHOWN}/versions/9",
        f"{server}/api/memory/{SHOWN}/diff?a=1&b=9",
    ):
        status, body = get_json(url)
        assert status == 404, url
        assert "no memory scope 'no/such'" in body["detail"] or "has no version 9" in body["detail"]
    assert get_status(f"{server}/memory/scope/no/such") == 404


def test_api_rollback_needs_confirm(server: str) -> None:
    url = f"{server}/api/memory/{POSTED}/rollback"
    head = get_json(f"{server}/api/memory/{POSTED}/versions")[1][-1]["version"]
    status, body = post_json(url, {"version": 1})
    assert status == 422 and "confirm" in body["detail"]
    assert post_json(url, {"version": 99, "confirm": True})[0] == 404
    assert post_json(f"{server}/api/memory/no/such/rollback", {"version": 1, "confirm": True})[0] == 404
    assert get_json(f"{server}/api/memory/{POSTED}/versions")[1][-1]["version"] == head  # nothing changed

    status, body = post_json(url, {"version": 1, "confirm": True})
    assert status == 200 and body["version"] == head + 1 and body["rollback_to"] == 1
    latest = get_json(f"{server}/api/memory/{POSTED}/versions")[1][-1]
    assert (latest["version"], latest["author"], latest["parent"]) == (head + 1, "rollback", head)
    assert get_json(f"{server}/api/memory/{POSTED}/versions/{head + 1}")[1]["workflows"][0]["name"] == "press_enter"


def test_no_memory_database_is_said_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "memory.sqlite"
    (tmp_path / "runs").mkdir()
    with serve([tmp_path / "runs"], memory=missing) as base:
        status, body = get_json(f"{base}/api/memory/scopes")
        assert status == 404 and body["detail"] == f"no memory database at {missing}"
        assert get_status(f"{base}/memory") == 200
        assert get_status(f"{base}/memory/scope/{SHOWN}") == 404
    assert not missing.exists() and not missing.parent.exists()


def test_the_pages_read_memory_read_only(tmp_path: Path) -> None:
    """Reads leave the database's bytes as they were; a file that is not memory is refused untouched; a
    rollback on a missing database is a 404 that creates nothing either."""
    (tmp_path / "runs").mkdir()
    db = tmp_path / "memory.sqlite"
    build_memory(db, "ep-1")
    before = db.read_bytes()
    foreign = tmp_path / "run.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE run (id TEXT PRIMARY KEY)")
    conn.close()
    foreign_before = foreign.read_bytes()
    with serve([tmp_path / "runs"], memory=db) as base:
        assert get_status(f"{base}/memory") == 200 and get_status(f"{base}/memory/scope/{SHOWN}") == 200
        assert get_json(f"{base}/api/memory/{SHOWN}/diff?a=1&b=3")[0] == 200
    assert db.read_bytes() == before
    with serve([tmp_path / "runs"], memory=foreign) as base:
        status, body = get_json(f"{base}/api/memory/scopes")
        assert status == 422 and "not a usable workflow memory database" in body["detail"]
    assert foreign.read_bytes() == foreign_before
    missing = tmp_path / "none" / "memory.sqlite"
    with serve([tmp_path / "runs"], memory=missing) as base:
        status, _ = post_json(f"{base}/api/memory/{POSTED}/rollback", {"version": 1, "confirm": True})
        assert status == 404
    assert not missing.parent.exists()


@pytest.mark.browser
def test_memory_page_lists_scopes(server: str, chromium) -> None:
    page = chromium.new_page()
    page.goto(f"{server}/memory")
    row = page.locator(f'#scopes tr[data-scope="{SHOWN}"]')
    assert row.locator("td").nth(1).inner_text() == "v3"
    assert row.locator("td").nth(2).inner_text() == "3"
    assert "neural" in row.inner_text()
    assert page.locator("nav a.here").inner_text() == "Memory"
    snap(page, "memory-scopes")
    row.get_by_role("link", name=SHOWN).click()
    page.wait_for_url(f"{server}/memory/scope/{SHOWN}")
    assert page.locator("h1").inner_text().startswith(SHOWN)
    page.close()


@pytest.mark.browser
def test_scope_page_shows_diff_and_provenance(server: str, chromium, episode_id: str) -> None:
    page = chromium.new_page()
    page.goto(f"{server}/memory/scope/{SHOWN}")
    assert page.locator("#versions tbody tr").count() == 3
    # By default the previous version against the head.
    result = page.locator("#diff-result")
    assert "v2 → v3" in result.inner_text()
    assert result.locator("li.add").inner_text() == "+ check_result"
    assert result.locator("li.hunk").inner_text() == "~ enter_credentials"
    added_line = result.locator("pre.patch span.add", has_text='"label": "Login"')
    assert added_line.is_visible()
    # The source episode links to its page when a served run holds it; an unknown one stays text.
    credentials = page.locator('section.workflow[data-name="enter_credentials"]')
    link = credentials.get_by_role("link", name=episode_id)
    assert link.get_attribute("href") == f"/runs/scripted/episodes/{quote(episode_id, safe='')}"
    assert credentials.get_by_role("link", name=MISSING_EPISODE).count() == 0
    assert MISSING_EPISODE in credentials.inner_text()
    # Each workflow's calls: how often it ran to the end and where it last broke.
    calls = page.locator('section.workflow[data-name="press_enter"] dd.calls').inner_text()
    assert calls == "2 calls, 1 ran to the end, 1 broke (last break: step 1 of 1 (press [textbox] Password): target_not_found)"
    assert credentials.locator("dd.calls").inner_text() == "not called yet"
    snap(page, "memory-scope")

    page.select_option("#diff-a", "1")
    page.select_option("#diff-b", "2")
    page.get_by_role("button", name="Show diff").click()
    page.wait_for_url(re.compile(r"\?a=1&b=2#diff$"))
    result = page.locator("#diff-result")
    assert "v1 → v2" in result.inner_text()
    assert result.locator("li.add").inner_text() == "+ press_enter"
    assert result.locator("li.hunk").count() == 0
    snap(page, "memory-diff")

    with page.expect_navigation() as opened:
        credentials.get_by_role("link", name=episode_id).click()
    assert opened.value.status == 200 and episode_id in page.locator("main").inner_text()
    page.close()


@pytest.mark.browser
def test_rollback_needs_the_confirmation_click(server: str, chromium) -> None:
    head = get_json(f"{server}/api/memory/{CLICKED}/versions")[1][-1]["version"]
    page = chromium.new_page()
    page.goto(f"{server}/memory/scope/{CLICKED}")
    assert page.locator(f'#versions tr[data-version="{head}"] a.rollback').count() == 0  # not to the head
    page.get_by_role("link", name="Roll back to v1").click()

    confirm = page.locator("#confirm-rollback")
    assert f"This records a new version v{head + 1} with v1's workflows; nothing is deleted." in confirm.inner_text()
    assert "- check_result" in confirm.inner_text()
    snap(page, "memory-rollback-confirm")
    assert get_json(f"{server}/api/memory/{CLICKED}/versions")[1][-1]["version"] == head  # one click: nothing

    page.get_by_role("button", name=f"Confirm: record v{head + 1}").click()
    page.wait_for_url(f"{server}/memory/scope/{CLICKED}?done={head + 1}")
    assert f"Recorded version {head + 1}, by rollback: rollback to version 1." in page.locator("#recorded").inner_text()
    top = page.locator("#versions tbody tr").first
    assert top.get_attribute("data-version") == str(head + 1)
    assert "rollback" in top.inner_text() and "head" in top.inner_text()
    assert "- check_result" in page.locator("#diff-result").inner_text()
    snap(page, "memory-rolled-back")
    page.close()

    latest = get_json(f"{server}/api/memory/{CLICKED}/versions")[1][-1]
    assert (latest["version"], latest["author"], latest["message"]) == (head + 1, "rollback", "rollback to version 1")


@pytest.mark.browser
def test_a_diff_to_a_missing_version_keeps_the_page_and_says_so(server: str, chromium) -> None:
    page = chromium.new_page()
    response = page.goto(f"{server}/memory/scope/{SHOWN}?a=1&b=9#diff")
    assert response is not None and response.status == 200
    assert page.locator("#diff-error").inner_text() == f"{SHOWN} has no version 9 (versions: v1, v2, v3): choose two versions below"
    assert page.locator("#versions tbody tr").count() == 3 and page.locator("section.workflow").count() == 3
    response = page.goto(f"{server}/memory/scope/{SHOWN}?a=one&b=2")  # a bad value: a page naming it, not JSON
    assert response is not None and response.status == 400
    assert "query parameter 'a': expected a valid integer" in page.locator("main .error").inner_text()
    page.close()
    status, body = get_json(f"{server}/api/memory/{SHOWN}/diff?a=1")
    assert status == 400 and body == {"detail": "query parameter 'b' is required"}


def test_the_memory_lists_download_as_csv(server: str) -> None:
    import csv
    import io
    import urllib.request

    with urllib.request.urlopen(f"{server}/api/memory/{SHOWN}/versions?format=csv", timeout=30) as response:
        assert response.headers["content-disposition"] == 'attachment; filename="miniwob-login-user-versions.csv"'
        rows = list(csv.DictReader(io.StringIO(response.read().decode())))
    assert [(r["version"], r["parent"], r["author"]) for r in rows] == [("1", "", "rule"), ("2", "1", "import"), ("3", "2", "neural")]
    with urllib.request.urlopen(f"{server}/api/memory/scopes?format=csv", timeout=30) as response:
        scopes = {r["scope"]: r for r in csv.DictReader(io.StringIO(response.read().decode()))}
    assert scopes[SHOWN]["head"] == "3" and scopes[SHOWN]["n_workflows"] == "3"
    assert get_json(f"{server}/api/memory/scopes?format=tsv")[0] == 400


def test_a_version_and_a_diff_answer_with_messages_and_provenance(server: str) -> None:
    status, version = get_json(f"{server}/api/memory/{SHOWN}/versions/2")
    assert status == 200
    assert (version["parent"], version["author"], version["message"]) == (1, "import", "import keys.txt")
    status, missing = get_json(f"{server}/api/memory/{SHOWN}/versions/9")
    assert status == 404 and "has no version 9" in missing["detail"]
    status, diff = get_json(f"{server}/api/memory/{REPLAYED}/diff?a=1&b=2")
    assert status == 200 and diff["changed"] == []  # the steps are the same ...
    assert {(c["workflow"], c["field"], c["before"], c["after"]) for c in diff["provenance"]} == {
        ("enter_credentials", "admission", "success", "replay: success"),
        ("enter_credentials", "replay_trajectory_id", "", "replay-7"),
        ("enter_credentials", "replay_verdict", "", "success"),
    }  # ... and the provenance says what happened to it
    assert diff["versions"]["1"]["message"] == "induced" and diff["versions"]["2"]["message"] == "replayed"


@pytest.mark.browser
def test_a_workflow_built_on_another_shows_the_call_and_its_arguments(server: str, chromium) -> None:
    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{server}/memory/scope/{COMPOSED}/versions/1")
    whole = page.locator('section.workflow[data-name="close ticket"]')
    first = whole.locator("table.steps tbody tr").first
    assert first.locator("td.call").inner_text() == "the workflow log in"
    assert "username = {username}, password = {password}" in first.inner_text()
    # a verdict with the check's detail, and a part's "with its whole", are successes
    assert whole.locator("dl.provenance .badge").get_attribute("class") == "badge success"
    part = page.locator('section.workflow[data-name="log in"]')
    assert part.locator("dl.provenance .badge").get_attribute("class") == "badge success"
    assert "close ticket" in part.locator("dl.provenance").inner_text()  # part of
    snap(page, "memory-composed")
    page.close()


@pytest.mark.browser
def test_a_version_is_a_page_with_its_workflows_parent_and_message(server: str, chromium, episode_id: str) -> None:
    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{server}/memory/scope/{SHOWN}")
    page.locator('#versions tr[data-version="2"] td').first.get_by_role("link", name="v2").click()
    page.wait_for_url(f"{server}/memory/scope/{SHOWN}/versions/2")
    assert page.locator("h1").inner_text() == f"{SHOWN} version 2"
    facts = page.locator("#version-facts").inner_text()
    assert "import keys.txt" in facts and "import" in facts and "v1" in facts and "v3" in facts
    assert [page.locator("section.workflow").nth(i).get_attribute("data-name") for i in range(2)] == ["enter_credentials", "press_enter"]
    credentials = page.locator('section.workflow[data-name="enter_credentials"]')
    assert "rule" in credentials.locator("dl.provenance").inner_text()
    assert credentials.get_by_role("link", name=episode_id).count() == 1
    snap(page, "memory-version")
    page.click("#parent-link")
    page.wait_for_url(f"{server}/memory/scope/{SHOWN}/versions/1")
    assert "none (the scope's first version)" in page.locator("#version-facts").inner_text()
    page.click("#next-version")
    page.wait_for_url(f"{server}/memory/scope/{SHOWN}/versions/2")
    page.click("#diff-parent")
    page.wait_for_url(re.compile(r"\?a=1&b=2#diff$"))
    assert "by import: import keys.txt" in page.locator("#diff-messages").inner_text()
    response = page.goto(f"{server}/memory/{SHOWN}/versions/3")  # as people write it
    assert response is not None and response.status == 200
    assert page.url == f"{server}/memory/scope/{SHOWN}/versions/3" and "head" in page.locator("h1").inner_text()
    response = page.goto(f"{server}/memory/scope/{SHOWN}/versions/9")
    assert response is not None and response.status == 404
    error = page.locator("#version-error").inner_text()
    assert error == f"{SHOWN} has no version 9 (versions: v1, v2, v3; the head is v3)"
    assert page.locator("#known-versions a").count() == 3 and page.locator("nav a.here").inner_text() == "Memory"
    snap(page, "memory-version-missing")
    page.close()


@pytest.mark.browser
def test_the_diff_shows_provenance_and_message_changes(server: str, chromium) -> None:
    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{server}/memory/scope/{REPLAYED}")
    result = page.locator("#diff-result")
    assert "no changes to the workflows' steps; provenance of 1 changed" in result.inner_text()
    messages = page.locator("#diff-messages").inner_text()
    assert "by rule: induced" in messages and "by rule: replayed" in messages
    rows = page.locator("#provenance-changes tbody tr")
    assert rows.count() == 3
    assert "replay_verdict" in rows.nth(2).inner_text() and "success" in rows.nth(2).inner_text()
    snap(page, "memory-diff-provenance")
    page.close()


@pytest.mark.browser
def test_the_episode_page_links_the_memory_version_it_used(server: str, chromium) -> None:
    page = chromium.new_page()
    page.goto(f"{server}/runs/remembered/episodes/{quote(REMEMBERED, safe='')}")
    link = page.locator(".episode-facts").get_by_role("link", name=f"{SHOWN} v2")
    assert link.get_attribute("href") == f"/memory/scope/{SHOWN}/versions/2"  # not the head (v3)
    link.click()
    page.wait_for_url(f"{server}/memory/scope/{SHOWN}/versions/2")
    assert page.locator("h1").inner_text() == f"{SHOWN} version 2"
    page.close()
