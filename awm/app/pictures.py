"""A step's picture as the episode page shows it: the stored screenshot cropped to the page's content,
with the box of the element the step acted on marked.

Why: a screenshot is the whole viewport (1920 x 1080, or as configured) and a MiniWoB++ task fills a
~240 x 315 px patch of it in the top-left corner; shown 600 px wide the task is unreadable. The crop is
made when the page is served, from the stored full frame (which stays one click away), so old runs get
it too. Pure functions over PNG bytes (`content_box`, `step_picture`) and a small bounded cache.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw

from awm.trajectory import Box

BACKGROUND_TOLERANCE = 24  # per channel: JPEG-free PNGs, but anti-aliased edges and faint shadows
MARGIN_PX = 12  # kept around the content, so a border is not cut in half
MARK_RGB = (230, 0, 126)  # a magenta no page here uses, so the mark reads as ours
CACHE_SIZE = 256


def content_box(image: Image.Image, keep: Box | None = None) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of everything that is not the page's background, with a margin; the
    background is the colour of the bottom-right corner (a MiniWoB++ page: the white around `#wrap`;
    a site filling the viewport is its own content, so nothing is cut). `keep` (the marked element's
    box) always stays inside. The whole image when nothing differs from the background."""
    rgb = image.convert("RGB")
    width, height = rgb.size
    background = Image.new("RGB", rgb.size, rgb.getpixel((width - 1, height - 1)))
    differs = ImageChops.difference(rgb, background).convert("L").point(lambda v: 255 if v > BACKGROUND_TOLERANCE else 0)
    found = differs.getbbox()
    if found is None:
        return (0, 0, width, height)
    left, top, right, bottom = found
    if keep is not None:
        left, top = min(left, int(keep.x)), min(top, int(keep.y))
        right, bottom = max(right, int(keep.x + keep.width) + 1), max(bottom, int(keep.y + keep.height) + 1)
    return (
        max(0, left - MARGIN_PX),
        max(0, top - MARGIN_PX),
        min(width, right + MARGIN_PX),
        min(height, bottom + MARGIN_PX),
    )


def mark_rect(box: Box, offset: tuple[int, int], size: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """Where the mark goes on the cropped picture: the box moved by the crop's offset, 3 px outside the
    element (so its own border shows), kept on the picture; None when the box lies off it."""
    left, top = box.x - offset[0] - 3, box.y - offset[1] - 3
    right, bottom = box.x + box.width - offset[0] + 2, box.y + box.height - offset[1] + 2
    if right < 0 or bottom < 0 or left >= size[0] or top >= size[1]:
        return None
    return (max(0, round(left)), max(0, round(top)), min(size[0] - 1, round(right)), min(size[1] - 1, round(bottom)))


def step_picture(png: bytes, box: Box | None) -> bytes:
    """The picture of a step: `png` cropped to its content (`content_box`) with `box` (the acted
    element, in the screenshot's pixels) outlined in `MARK_RGB`, as PNG bytes; `png` as it is when it
    is no image Pillow reads (a picture is a nicety: the page still shows what was stored)."""
    try:
        with Image.open(io.BytesIO(png)) as image:
            crop = content_box(image, keep=box)
            picture = image.convert("RGB").crop(crop)
    except (OSError, ValueError):  # UnidentifiedImageError is an OSError; a truncated file too
        return png
    if box is not None:
        rect = mark_rect(box, (crop[0], crop[1]), picture.size)
        if rect is not None:
            ImageDraw.Draw(picture).rectangle(rect, outline=MARK_RGB, width=3)
    out = io.BytesIO()
    picture.save(out, format="PNG", compress_level=1)
    return out.getvalue()


class PictureCache:
    """Step pictures already made, by screenshot file (and its modification time) and box: an episode
    page asks for each again on every visit. Bounded: the oldest is dropped past `size`."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._pictures: OrderedDict[tuple[str, int, str], bytes] = OrderedDict()
        self._lock = threading.Lock()  # routes run on the server's thread pool

    def picture(self, path: Path, box: Box | None) -> bytes:
        """The picture of the screenshot at `path` with `box` marked, made once per file version."""
        key = (str(path), path.stat().st_mtime_ns, "" if box is None else box.model_dump_json())
        with self._lock:
            if key in self._pictures:
                self._pictures.move_to_end(key)
                return self._pictures[key]
        made = step_picture(path.read_bytes(), box)
        with self._lock:
            self._pictures[key] = made
            while len(self._pictures) > self.size:
                self._pictures.popitem(last=False)
        return made
