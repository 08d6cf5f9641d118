"""`awm serve`'s runs dashboard and episode viewer, opened in real Chromium the way a person uses them.

The server is the real one (a child process on a free loopback port) over a copy of a run folder made
by the scripted policy in Chromium; a second served folder holds the planted traps: a step whose
recorded screenshot path climbs out of the run, a screenshot that is a symlink to a file outside, and a
symlinked run folder. None of them may be read.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.traces import open_run
from tests.app_server import REPO, get_json, get_status, serve, snap

SECRET = b"not-for-the-web-7f3a"


@pytest.fixture(scope="module")
def served(scripted_runs: Path, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("app-runs")
    runs = root / "runs"
    shutil.copytree(scripted_runs, runs)
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(SECRET)
    trap = runs / "trap"
    shutil.copytree(runs / "scripted", trap)
    with open_run(trap) as db:
        episode = next(e for e in db.episodes() if e.task_key.endswith("login-user#0"))
        steps = db.steps(episode.id)
    with sqlite3.connect(trap / "run.sqlite") as conn:  # what a tampered or foreign run database could say
        conn.execute("UPDATE step SET screenshot = ? WHERE episode_id = ? AND idx = 0", ("../../outside/secret.png", episode.id))
        conn.execute("UPDATE step SET screenshot = ? WHERE episode_id = ? AND idx = 1", (str(outside / "secret.png"), episode.id))
    linked = trap / steps[2].screenshot
    linked.unlink()
    linked.symlink_to(outside / "secret.png")
    outside_run = outside / "elsewhere"
    shutil.copytree(runs / "scripted", outside_run)
    (runs / "linked").symlink_to(outside_run, target_is_directory=True)
    with serve([runs]) as base:
        yield base, runs


def _episode_id(base: str, run: str, suffix: str) -> str:
    status, episodes = get_json(f"{base}/api/runs/{run}/episodes")
    assert status == 200
    return next(e["id"] for e in episodes if e["task_key"].endswith(suffix))


@pytest.mark.browser
def test_the_runs_page_lists_the_run_and_filters_it(served: tuple[str, Path], chromium) -> None:
    base, _ = served
    page = chromium.new_page(viewport={"width": 1300, "height": 800})
    page.goto(f"{base}/")
    row = page.locator("#runs tr[data-key='scripted']")
    assert row.count() == 1
    text = row.inner_text()
    assert "miniwob" in text and "scripted-miniwob" in text and "100%" in text and "success 2" in text
    assert page.locator("#runs tr[data-key='linked']").count() == 0  # a symlinked folder is not served
    snap(page, "runs")
    page.select_option("#status-filter", "failed")
    page.click("text=Filter")
    assert page.locator("#runs tr[data-key='scripted']").count() == 0
    page.goto(f"{base}/?q=scripted-miniwob")
    assert page.locator("#runs tr[data-key='scripted']").count() == 1
    page.close()


@pytest.mark.browser
def test_clicking_an_episode_shows_its_steps_with_loaded_screenshots(served: tuple[str, Path], chromium) -> None:
    base, _ = served
    page = chromium.new_page(viewport={"width": 1300, "height": 900})
    page.goto(f"{base}/")
    page.click("#runs tr[data-key='scripted'] a")
    page.click("#episodes a:has-text('login-user')")
    page.wait_for_selector("section.step")
    assert page.locator("section.step").count() == 3
    page.wait_for_function("[...document.querySelectorAll('section.step img')].every(i => i.complete)")
    widths = page.eval_on_selector_all("section.step img", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) == 3 and all(w > 0 for w in widths)
    first = page.locator("section.step").first.inner_text()
    assert "fill('16', 'cierra')" in first and "textbox 'Username'" in first and "ok" in first
    assert "reward 1" in page.locator(".episode-facts").inner_text()
    # the page after the last action (the judge's end state), recorded by the harness, one click away
    assert "login-user.html" in page.locator("#final-page + p").inner_text()
    page.click("details.final-page summary")
    assert page.locator("details.final-page pre").inner_text().strip()
    # ... and its picture: the end state a failed episode shows nowhere else
    page.wait_for_function("document.querySelector('#final-picture').complete")
    assert page.eval_on_selector("#final-picture", "i => i.naturalWidth") > 0
    full = page.get_attribute(".final-shot a", "href") or ""
    assert full.endswith("/final/screenshot.png")
    snap(page, "episode")
    assert page.request.get(base + full).body()[:4] == b"\x89PNG"
    # each recorded page's HTML, a click away, as text (its scripts never run in the app's origin)
    links = page.eval_on_selector_all("a.page-html", "links => links.map(a => a.getAttribute('href'))")
    assert len(links) == 4 and links[-1].endswith("/final/page.html") and links[0].endswith("/steps/0/page.html")
    for link in (links[0], links[-1]):
        response = page.request.get(base + link)
        assert response.headers["content-type"].startswith("text/plain")
        assert response.headers["x-content-type-options"] == "nosniff" and 'bid="' in response.text()
    page.close()


def test_the_api_gives_steps_as_json_with_screenshot_urls(served: tuple[str, Path]) -> None:
    base, _ = served
    episode = _episode_id(base, "scripted", "login-user#0")
    status, body = get_json(f"{base}/api/runs/scripted/episodes/{episode.replace('#', '%23')}")
    assert status == 200 and body["status"] == "success"
    assert [s["action_str"] for s in body["steps"]] == ["fill('16', 'cierra')", "fill('19', '11L')", "click('20')"]
    import urllib.request

    with urllib.request.urlopen(base + body["steps"][0]["screenshot_url"]) as response:
        assert response.headers["content-type"] == "image/png" and response.read()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/..%2F..%2Fetc/episodes",
        "/api/runs/%2Fetc%2Fpasswd/episodes",
        "/api/runs/..~..~outside/episodes",
        "/api/runs/linked/episodes",
        "/api/runs/scripted/episodes/..%2F..%2Frun.sqlite",
        "/runs/..%2F..%2Foutside",
    ],
)
def test_paths_outside_the_served_runs_are_not_found(served: tuple[str, Path], path: str) -> None:
    base, _ = served
    assert get_status(base + path) == 404


@pytest.mark.parametrize("image", ["screenshot.png", "picture.png"])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_screenshots_a_run_database_points_outside_are_refused(served: tuple[str, Path], index: int, image: str) -> None:
    """Step 0 says `../../outside/secret.png`, step 1 an absolute path, step 2 is a symlink out; the
    cropped picture is read through the same checks as the full frame."""
    import urllib.error
    import urllib.request

    base, _ = served
    episode = _episode_id(base, "trap", "login-user#0").replace("#", "%23")
    url = f"{base}/api/runs/trap/episodes/{episode}/steps/{index}/{image}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url)
    assert refused.value.code == 404 and SECRET not in refused.value.read()


def test_an_unknown_run_page_is_a_404_page(served: tuple[str, Path]) -> None:
    base, _ = served
    assert get_status(f"{base}/runs/no-such-run") == 404


@pytest.mark.browser
def test_traces_export_html_is_one_self_contained_file(served: tuple[str, Path], chromium, tmp_path: Path) -> None:
    _, runs = served
    out = tmp_path / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "traces", "export", str(runs / "scripted"), "--html", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    # each step's picture and its full frame, and each episode's final frame, embedded
    assert html.count("data:image/png;base64,") == 12 and "/api/" not in html and "/static/" not in html
    page = chromium.new_page()
    page.goto(out.as_uri())
    page.locator("section.step img").last.scroll_into_view_if_needed()  # lazily loaded: one below the fold read 0
    page.wait_for_function("[...document.querySelectorAll('section.step img')].every(i => i.complete)")
    widths = page.eval_on_selector_all("section.step img", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) == 4 and all(w > 0 for w in widths)
    page.locator(".final-shot img").last.scroll_into_view_if_needed()  # loaded lazily, as the steps' are
    page.wait_for_function("[...document.querySelectorAll('.final-shot img')].every(i => i.complete)")
    finals = page.eval_on_selector_all(".final-shot img", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(finals) == 2 and all(w > 0 for w in finals)
    assert page.locator("a.page-html").count() == 0  # the API is not there: no link to it
    assert "login-user" in page.inner_text("main") and "click-test" in page.inner_text("main")
    snap(page, "export")
    page.close()


def test_a_request_naming_another_host_is_refused(served: tuple[str, Path]) -> None:
    """DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    import urllib.error
    import urllib.request

    base, _ = served
    request = urllib.request.Request(f"{base}/api/runs", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 400
    assert get_status(f"{base}/api/runs") == 200
