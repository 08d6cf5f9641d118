"""A step's picture is readable: the screenshot cropped to the page's content, the element acted on
marked where its box is, the full frame one click away; the episode page steps through by keys and keeps
each step's observation text behind a `<details>`.

Checked on a drawn image (pure) and on the scripted policy's MiniWoB++ run in real Chromium, where the
recorded page HTML gives `#wrap`'s and the target's boxes as the browser measured them.
"""

from __future__ import annotations

import io
import re
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from awm.app.pictures import MARGIN_PX, MARK_RGB, PictureCache, content_box, step_picture
from awm.traces import open_run
from awm.trajectory import Box
from tests.app_server import get_json, serve, snap


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _page(size: tuple[int, int] = (1920, 1080)) -> Image.Image:
    """A MiniWoB++-like frame: grey all round, a white 240 x 315 task at the top left, a button in it."""
    image = Image.new("RGB", size, (85, 85, 85))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 239, 314), fill="white")
    draw.rectangle((40, 200, 139, 239), fill=(230, 230, 230), outline="black")
    return image


def _picture(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def test_the_picture_is_cropped_to_the_content_and_marks_the_box() -> None:
    box = Box(x=40, y=200, width=100, height=40)
    picture = _picture(step_picture(_png(_page()), box))
    assert picture.size == (240 + MARGIN_PX, 315 + MARGIN_PX)  # the task, a margin right and below
    assert picture.getpixel((40 - 2, 220)) == MARK_RGB and picture.getpixel((140 + 1, 220)) == MARK_RGB
    assert picture.getpixel((90, 200 - 2)) == MARK_RGB and picture.getpixel((90, 240 + 1)) == MARK_RGB
    assert picture.getpixel((90, 220)) == (230, 230, 230)  # the element itself is not painted over
    assert picture.getpixel((20, 20)) == (255, 255, 255)


def test_a_page_that_fills_the_frame_is_not_cut_and_a_box_outside_the_content_stays_in() -> None:
    full = Image.new("RGB", (800, 600), "white")
    ImageDraw.Draw(full).rectangle((0, 0, 799, 40), fill=(30, 40, 60))  # a site's header bar
    ImageDraw.Draw(full).text((300, 580), "footer", fill="black")
    assert content_box(full) == (0, 0, 800, 600)
    far = Box(x=600, y=500, width=50, height=20)  # an element drawn in the background's own colour
    assert content_box(_page((800, 600)), keep=far) == (0, 0, 650 + 1 + MARGIN_PX, 520 + 1 + MARGIN_PX)
    assert content_box(Image.new("RGB", (50, 40), "white")) == (0, 0, 50, 40)


def test_the_cache_makes_a_picture_once_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "0.png"
    path.write_bytes(_png(_page()))
    cache = PictureCache(size=1)
    first = cache.picture(path, None)
    assert cache.picture(path, None) is first
    marked = cache.picture(path, Box(x=40, y=200, width=100, height=40))
    assert marked != first and len(cache._pictures) == 1  # bounded: the older one went


@pytest.fixture(scope="module")
def served(scripted_runs: Path, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    runs = tmp_path_factory.mktemp("app-pictures") / "runs"
    shutil.copytree(scripted_runs, runs)
    with serve([runs]) as base:
        yield base, runs


def _rect(html: str, marker: str) -> tuple[float, float, float, float]:
    """An element's `bounding_box_rect` (x, y, width, height) in a recorded page, by an attribute of it."""
    tag = re.search(r"<[^>]*" + re.escape(marker) + r"[^>]*>", html)
    assert tag is not None, marker
    found = re.search(r'bounding_box_rect="([^"]+)"', tag.group(0))
    assert found is not None
    x, y, w, h = (float(v) for v in found.group(1).split(","))
    return x, y, w, h


def test_a_recorded_click_keeps_its_box_and_the_picture_marks_it_on_the_task_area(served: tuple[str, Path]) -> None:
    base, runs = served
    with open_run(runs / "scripted") as db:
        episode = next(e for e in db.episodes() if e.task_key.endswith("login-user#0"))
        click = db.steps(episode.id)[2]
    assert click.action_str == "click('20')" and click.box is not None
    html = (runs / "scripted" / "pages" / Path(click.screenshot or "").parent.name / "2.html").read_text()
    wrap = _rect(html, 'id="wrap"')
    button = _rect(html, 'bid="20"')
    assert (click.box.x, click.box.y, click.box.width, click.box.height) == pytest.approx(button, abs=1)
    status, body = get_json(f"{base}/api/runs/scripted/episodes/{episode.id.replace('#', '%23')}")
    assert status == 200
    with urllib.request.urlopen(base + body["steps"][2]["picture_url"]) as response:
        assert response.headers["content-type"] == "image/png"
        picture = _picture(response.read())
    # the task area (#wrap, at the top left) and the margin, not the 1920 x 1080 frame
    assert picture.size == (round(wrap[0] + wrap[2]) + MARGIN_PX, round(wrap[1] + wrap[3]) + MARGIN_PX)
    x, y, w, h = button
    middle_y, middle_x = round(y + h / 2), round(x + w / 2)
    assert picture.getpixel((round(x + w) + 1, middle_y)) == MARK_RGB  # right edge
    assert picture.getpixel((middle_x, round(y) - 2)) == MARK_RGB  # top edge
    assert picture.getpixel((middle_x, round(y + h) + 1)) == MARK_RGB  # bottom edge
    assert picture.getpixel((middle_x, middle_y)) != MARK_RGB
    with urllib.request.urlopen(base + body["steps"][2]["screenshot_url"]) as response:
        assert _picture(response.read()).size == (1920, 1080)  # the full frame, as recorded


@pytest.mark.browser
def test_the_episode_page_shows_pictures_steps_through_by_keys_and_keeps_the_observation(served: tuple[str, Path], chromium) -> None:
    base, _ = served
    page = chromium.new_page(viewport={"width": 1300, "height": 900})
    page.goto(f"{base}/runs/scripted")
    page.click("#episodes a:has-text('login-user')")
    page.wait_for_selector("section.step")
    page.wait_for_function("[...document.querySelectorAll('section.step img')].every(i => i.complete && i.naturalWidth)")
    sizes = page.eval_on_selector_all("section.step img", "imgs => imgs.map(i => [i.naturalWidth, i.clientWidth])")
    assert all(natural < 400 and shown > natural for natural, shown in sizes)  # cropped, then shown larger
    assert "the element acted on" in page.locator("#step-2").inner_text()
    snap(page, "episode-pictures")
    page.keyboard.press("j")
    assert page.evaluate("location.hash") == "#step-0"
    page.keyboard.press("j")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("location.hash") == "#step-2"
    assert page.locator("section.step.current").get_attribute("id") == "step-2"
    page.keyboard.press("k")
    assert page.evaluate("location.hash") == "#step-1"
    assert page.evaluate("document.getElementById('step-1').getBoundingClientRect().top") < 40  # brought up
    observation = page.locator("#step-1 details.observation")
    assert not observation.locator("pre").is_visible()
    observation.locator("summary").click()
    assert "Username" in observation.locator("pre").inner_text()
    snap(page, "episode-step-keys")
    with page.expect_navigation():
        page.click("#step-1 a[data-full-frame]")
    assert page.url.endswith("/steps/1/screenshot.png")
    assert page.evaluate("document.images[0].naturalWidth") == 1920
    page.close()
