"""The ablation page and its API over a real ablation: `awm ablate` with the scripted policy on two MiniWoB
tasks in real Chromium (two arms, one repeat), served by a real `awm serve`, opened in real Chromium.

A second folder is the same report with a judge audit (computed by `awm.evaluation.audit` from the real
trajectories with judge labels given to them), rewritten with `write_report`, then tampered with: raw
HTML appended to RESULTS.md and a task name with markup. It has an empty `arms/`, so no run is linked.
Files planted around the ablation check that no request reads outside its folder.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.app.ablation_pages import arm_views, per_task_rows, relative_file, render_markdown, without_sections
from awm.app.catalog import Folder
from awm.evaluation.audit import audit
from awm.pipeline.ablation import arm_dir
from awm.pipeline.report import AblationReport
from awm.pipeline.report_render import write_report
from awm.pipeline.results import RESULTS_JSON, RESULTS_MD
from awm.trajectory import Verdict, load_trajectories
from tests.app_server import get_json, serve, snap

REPO = Path(__file__).resolve().parents[1]
SECRET = b'{"secret": "OUTSIDE-THE-ABLATION-7f3a"}'
HOSTILE_HTML = (
    '\n<script>alert(1)</script>\n\n<img src="x" onerror="alert(2)">\n\n[bad](javascript:alert(3))\n'
)
MARKUP_TASK = '<img src=x onerror="alert(4)">'
CONFIG = """
[pipeline]
name = "page"
tasks = ["click-test", "login-user"]
seeds = [0]
max_steps = 2   # login-user needs 3 steps: it fails by max_steps, click-test succeeds
policy = "scripted"

[[arm]]
name = "off"
memory = "off"

[[arm]]
name = "online"
memory = "online"
induction = "rule"
admission = "gt"
"""


def fetch(url: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers.get("content-type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read()


def _hostile_copy(ablation: Path, into: Path) -> None:
    """The report again with a real judge audit on the online arm (every episode labelled success, so
    the failed login-user is a false positive) and a task named with markup, then raw HTML in RESULTS.md."""
    report = AblationReport.model_validate_json((ablation / RESULTS_JSON).read_text())
    judged = [
        t.model_copy(
            update={
                "verdict": Verdict(reward=t.verdict.reward, raw_reward=t.verdict.raw_reward, judge="success")
            }
        )
        for t in load_trajectories(arm_dir(ablation, "online", 1) / "trajectories")
    ]
    arms = [
        a.model_copy(update={"judge_audit": audit(judged)}) if a.name == "online" else a for a in report.arms
    ]
    per_task = {**report.per_task, MARKUP_TASK: {"off": [0, 1], "online": [1, 1]}}
    write_report(report.model_copy(update={"arms": arms, "per_task": per_task}), into)
    (into / "arms").mkdir()
    text = (into / RESULTS_MD).read_text(encoding="utf-8")
    title, rest = text.split("\n", 1)  # into the report's head, which the page shows (not a section it drops)
    (into / RESULTS_MD).write_text(f"{title}\n{HOSTILE_HTML}\n{rest}", encoding="utf-8")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, served root): `abl` (the real ablation) and `hostile` (its tampered copy)."""
    base = tmp_path_factory.mktemp("ablation-page")
    root = base / "served"
    config = base / "ablate.toml"
    config.write_text(textwrap.dedent(CONFIG))
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "ablate", str(config), "--out", str(root / "abl"), "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _hostile_copy(root / "abl", root / "hostile")
    (base / "secret.json").write_bytes(SECRET)  # outside the served root
    (root / "outside.json").write_bytes(SECRET)  # inside the served root, outside the ablation
    (root / "abl" / "leak.json").symlink_to(base / "secret.json")
    (root / "abl" / "leak.png").symlink_to(base / "secret.json")
    with serve([root]) as url:
        yield url, root


# --- pure shaping -----------------------------------------------------------------------------------


def test_markdown_targets_that_name_files_point_at_the_files_api() -> None:
    text = (
        "![plot](success_per_task.png) [prov](provenance.json) [deep](arms/off/rep1/summary.md)\n"
        "[web](https://example.org/x.png) [here](#per-task) [abs](/etc/passwd) [js](javascript:alert(1))\n"
        "<b>raw</b>\n"
    )
    html = render_markdown(text, "runs~my abl")
    assert '<img src="/api/ablations/runs~my%20abl/files/success_per_task.png" alt="plot"' in html
    assert 'href="/api/ablations/runs~my%20abl/files/provenance.json"' in html
    assert 'href="/api/ablations/runs~my%20abl/files/arms/off/rep1/summary.md"' in html
    assert 'href="https://example.org/x.png"' in html and 'href="#per-task"' in html
    assert 'href="/etc/passwd"' in html  # left alone: an absolute path is the app's own, not the folder's
    assert "javascript:" not in html.replace("[js](javascript:alert(1))", "")  # never a link
    assert "&lt;b&gt;raw&lt;/b&gt;" in html and "<b>" not in html
    assert relative_file("my%20plot.png") == "my plot.png" and relative_file("#x") is None


def test_per_task_rows_and_arm_links_follow_the_report(tmp_path: Path) -> None:
    report = AblationReport(
        name="x", config_path="c.toml", config_hash="h",
        arms=[{"name": "off"}, {"name": "online"}],  # type: ignore[list-item]
        per_task={"b": {"off": [0, 2], "online": [2, 2]}, "a": {"off": [1, 1]}},
    )  # fmt: skip
    rows = per_task_rows(report)
    assert [r.task for r in rows] == ["a", "b"]
    assert [(c.successes, c.episodes) for c in rows[1].cells] == [(0, 2), (2, 2)]
    assert rows[1].diffs == [1.0] and rows[0].diffs == [None]  # online never ran task a

    ablation = Folder(key="abl", path=tmp_path / "abl", root=tmp_path, kind="ablation")

    def run(*parts: str) -> Folder:
        return Folder(
            key="~".join(["abl", *parts]), path=tmp_path.joinpath("abl", *parts), root=tmp_path, kind="run"
        )

    served = {f.key: f for f in (ablation, run("arms", "off", "rep10"), run("arms", "off", "rep2"),
                                 run("arms", "extra", "rep1"), run("arms", "off", "rep1", "nested"))}  # fmt: skip
    views = arm_views(report, ablation, served)
    assert [(v.name, [r.label for r in v.runs]) for v in views] == [
        ("off", ["rep2", "rep10"]), ("online", []), ("extra", ["rep1"]),
    ]  # fmt: skip
    assert views[2].stats is None


# --- the API ---------------------------------------------------------------------------------------


def test_api_serves_results_json_and_the_report_files(served: tuple[str, Path]) -> None:
    base, root = served
    status, data = get_json(f"{base}/api/ablations/abl")
    assert status == 200 and data == json.loads((root / "abl" / RESULTS_JSON).read_text())
    assert [a["name"] for a in data["arms"]] == ["off", "online"]
    for name, media in (
        ("success_per_task.png", "image/png"), (RESULTS_MD, "text/markdown"), (RESULTS_JSON, "application/json"),
        ("provenance.json", "application/json"), ("arms/off/rep1/summary.md", "text/markdown"),
    ):  # fmt: skip
        status, kind, body = fetch(f"{base}/api/ablations/abl/files/{name}")
        assert (status, kind.split(";")[0]) == (200, media), name
        assert body == (root / "abl" / name).read_bytes()
    for name in ("arms/off/rep1/run.sqlite", "arms/off/rep1/events.jsonl", "nope.png"):
        assert fetch(f"{base}/api/ablations/abl/files/{name}")[0] == 404, name
    assert get_json(f"{base}/api/ablations/nope")[0] == 404
    assert get_json(f"{base}/api/ablations/abl~arms~off~rep1")[0] == 404  # a run, not an ablation


def test_the_per_task_table_downloads_as_csv(served: tuple[str, Path]) -> None:
    import csv
    import io

    base, _ = served
    status, kind, body = fetch(f"{base}/api/ablations/abl/per-task?format=csv")
    assert status == 200 and kind.startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    status, listed = get_json(f"{base}/api/ablations/abl/per-task")
    assert status == 200 and [r["task"] for r in rows] == [r["task"] for r in listed] and rows
    first = listed[0]
    assert rows[0]["arms.off.successes"] == str(first["arms"]["off"]["successes"])
    assert rows[0]["arms.online.episodes"] == str(first["arms"]["online"]["episodes"])
    assert get_json(f"{base}/api/ablations/abl/per-task?format=html")[0] == 400


def test_files_api_never_reads_outside_the_ablation(served: tuple[str, Path]) -> None:
    base, _ = served
    for name in (
        "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "..%2F..%2Fsecret.json", "..%2Foutside.json",
        "arms%2F..%2F..%2Foutside.json", "leak.json", "leak.png", "%2E%2E%2Foutside.json",
    ):  # fmt: skip
        status, _, body = fetch(f"{base}/api/ablations/abl/files/{name}")
        assert status == 404, name
        assert b"OUTSIDE-THE-ABLATION" not in body and b"root:" not in body, name


# --- the page in Chromium --------------------------------------------------------------------------


@pytest.mark.browser
def test_ablation_page_shows_the_report_plots_tasks_and_runs(served: tuple[str, Path], chromium) -> None:
    base, root = served
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        assert page.goto(f"{base}/ablations/abl").status == 200
        assert page.inner_text("h1").startswith("Ablation page")
        markdown = page.inner_text("div.markdown")
        assert "Ablation page" in markdown and "Failure classes" in markdown
        # Each section once: the page's own per-task, paired and plots, not RESULTS.md's again.
        results = (root / "abl" / RESULTS_MD).read_text()
        assert "## Per task" in results and "## Paired differences" in results and "## Plots" in results
        in_markdown = page.eval_on_selector_all("div.markdown h2", "hs => hs.map(h => h.innerText.trim())")
        assert "Arms" in in_markdown and "Failure classes" in in_markdown
        assert not [h for h in in_markdown if h.startswith(("Per task", "Paired differences", "Plots", "Judge audit"))]
        headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.innerText.trim())")
        assert [h for h in headings if h.startswith(("Per task", "Paired differences", "Plots", "Judge audit"))] == [
            "Plots", "Per task", "Paired differences against the first arm", "Judge audit",
        ]  # fmt: skip
        # RESULTS.md's other tables, in its order: arms, model calls, what a model step cost, failure classes.
        assert page.eval_on_selector_all("div.markdown table", "t => t.length") == 4
        assert "What a model step cost" in in_markdown

        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth])"
        )
        plots = sorted(p.name for p in (root / "abl").glob("*.png") if not p.is_symlink())
        assert len(plots) == 3
        shown = page.eval_on_selector_all("#plots img", "els => els.map(e => e.alt)")
        assert sorted(shown) == plots  # leak.png (a symlink out of the folder) is not among them
        assert len(images) == len(plots) and all(width > 0 for _, width in images), images  # once

        rows = page.eval_on_selector_all(
            "#per-task tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.replace(/\\s+/g, '')))"
        )
        assert rows == [
            ["miniwob.click-test", "1/1✓", "1/1✓", "+0pts"],
            ["miniwob.login-user", "0/1✗", "0/1✗", "+0pts"],
        ]
        # each cell's episodes link to their pages
        failed = page.locator("#per-task tbody tr").nth(1).locator("a.episode").nth(1)
        assert failed.get_attribute("title") == "online rep1 seed 0: failed: open the episode"
        with page.expect_navigation():
            failed.click()
        assert page.url.startswith(f"{base}/runs/abl~arms~online~rep1/episodes/") and "login-user" in page.inner_text("h1")
        page.go_back()
        assert "No arm has both a judge label" in page.inner_text("#judge-audit")

        links = page.eval_on_selector_all("#arms a", "els => els.map(e => e.getAttribute('href'))")
        assert links == ["/runs/abl~arms~off~rep1", "/runs/abl~arms~online~rep1"]
        for link in links:
            status, episodes = get_json(f"{base}/api/runs/{link.removeprefix('/runs/')}/episodes")
            assert status == 200 and len(episodes) == 2
        href = page.get_attribute("div.markdown a[href$='provenance.json']", "href")
        assert href == "/api/ablations/abl/files/provenance.json" and fetch(base + href)[0] == 200
        snap(page, "ablation")
    finally:
        page.close()


@pytest.mark.browser
def test_raw_html_in_the_report_is_shown_escaped_and_never_runs(served: tuple[str, Path], chromium) -> None:
    base, _ = served
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        assert page.goto(f"{base}/ablations/hostile").status == 200
        page.wait_for_timeout(300)
        text = page.inner_text("div.markdown")
        assert "<script>alert(1)</script>" in text and '<img src="x" onerror="alert(2)">' in text
        assert page.eval_on_selector_all("main script, div.markdown img[onerror]", "e => e.length") == 0
        assert page.eval_on_selector_all("a[href^='javascript']", "e => e.length") == 0
        assert MARKUP_TASK in page.inner_text("#per-task")  # a task name with markup is text too
        assert dialogs == []

        audit_row = page.eval_on_selector_all(
            "#judge-audit tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))"
        )
        assert len(audit_row) == 1 and audit_row[0][:7] == ["online", "2/2", "1", "1", "0", "0", "0"]
        assert audit_row[0][7] == "50%" and "login-user" in audit_row[0][11]
        assert "Judge audit" not in text and "(FP)" not in text  # RESULTS.md's own is not shown twice
        assert "no run folder served" in page.inner_text("#arms")  # hostile/arms is empty
        snap(page, "ablation-hostile")
    finally:
        page.close()


def test_markdown_sections_the_page_shows_itself_are_left_out() -> None:
    text = "# R\n\nhead\n\n## Arms\n\na\n\n## Per task\n\n```\n## not a heading\n```\n\nb\n\n## Failure classes\n\nc\n\n## Plots\n\n![p](p.png)\n"
    kept = without_sections(text, ("Per task", "Plots"))
    assert kept == "# R\n\nhead\n\n## Arms\n\na\n\n## Failure classes\n\nc\n\n"


@pytest.mark.browser
def test_the_runs_page_nests_the_arms_under_their_ablation(served: tuple[str, Path], chromium) -> None:
    base, _ = served
    status, runs = get_json(f"{base}/api/runs")
    assert status == 200
    assert not any("~arms~" in r["key"] for r in runs)  # no arm is a run of its own
    abl = next(r for r in runs if r["key"] == "abl")
    assert [(a["arm"], a["repeat"], a["ablation"]) for a in abl["arms"]] == [("off", "rep1", "abl"), ("online", "rep1", "abl")]
    assert abl["episodes"] == 4 and abl["counts"]["success"] == 2 and sum(abl["counts"].values()) == 4  # its arms'
    status, _, body = fetch(f"{base}/api/runs?format=csv")
    lines = list(csv.DictReader(io.StringIO(body.decode())))
    assert status == 200 and "arms" not in lines[0]  # a flat file: the arms as rows after their ablation
    at = [r["key"] for r in lines].index("abl")
    assert [(r["key"], r["ablation"]) for r in lines[at + 1 : at + 3]] == [("abl~arms~off~rep1", "abl"), ("abl~arms~online~rep1", "abl")]
    page = chromium.new_page(viewport={"width": 1300, "height": 800})
    try:
        page.goto(f"{base}/")
        keys = page.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => [r.dataset.key, r.dataset.parent || ''])")
        at = keys.index(["abl", ""])
        assert keys[at + 1 : at + 3] == [["abl~arms~off~rep1", "abl"], ["abl~arms~online~rep1", "abl"]]
        page.locator("#runs th", has_text="episodes").locator("button").click()  # sorting keeps arms under it
        keys = page.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => [r.dataset.key, r.dataset.parent || ''])")
        at = keys.index(["abl", ""])
        assert [k for k, _ in keys[at + 1 : at + 3]] == ["abl~arms~off~rep1", "abl~arms~online~rep1"]
        snap(page, "runs-ablation-nested")
        page.locator("tr[data-key='abl~arms~online~rep1'] a").click()
        page.wait_for_url(f"{base}/runs/abl~arms~online~rep1")
        assert page.inner_text("h1").startswith("Arm online rep1")
        page.click("#ablation-link")
        page.wait_for_url(f"{base}/ablations/abl")
        response = page.goto(f"{base}/runs/abl")  # an ablation named as a run: its page, not a 404
        assert response is not None and response.status == 200 and page.url == f"{base}/ablations/abl"
    finally:
        page.close()
