"""Words for SVG figures: what kind of shape, what colour, and whether small or large among its siblings.

Why: a shape drawn in SVG has no accessible name and no text; in Chromium's AXTree a `<circle>` is a
nameless `graphics-symbol` and a `<text>` a nameless generic around its characters. Measured on the
MiniWoB++ split: click-shape ("Click on a small black 8") was 0 of 3 and identify-shape ("the button that
best describes the figure") 1 of 3 because the model saw only the letters run together (``9J86HD``) or
nothing at all. The page's own attributes (tag, ``fill``, ``r``, ``width``, ``font-size``, ``points``) say
what a person sees; this module reads them from BrowserGym's DOM snapshot (decoded once per observation,
`awm.webarena.dom`), so the observation can show ``[16] clickable '8' (small black digit)`` or
``figure (large red circle)``.

Sizes are relative: a figure is "small" or "large" only when the figures of its `<svg>` come in more than
one size (below or above the middle of the smallest and largest); one size for all gets no size word.
Colours are named only when the page names them (``fill="red"``); a hex code tells a model nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from awm.webarena.dom import PageDom

# SVG elements a person sees as one figure, and the word for each (a polygon's word is by its corners).
_KINDS = {"circle": "circle", "ellipse": "ellipse", "rect": "rectangle", "polygon": "polygon", "text": "text"}
_CORNERS = {3: "triangle", 4: "quadrilateral"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_COLOUR_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Figure:
    """One SVG figure as a person would name it; `text` is the characters a `<text>` draws."""

    kind: str
    colour: str = ""
    size: float = 0.0
    text: str = ""
    svg: int = -1  # the enclosing <svg> node's index (sizes compare within one drawing)


def _number(value: str | None) -> float:
    match = _NUMBER.search(value or "")
    return abs(float(match.group())) if match else 0.0


def _polygon(points: str | None) -> tuple[str, float]:
    """(word, extent) of a polygon from its ``points`` attribute."""
    values = [float(v) for v in _NUMBER.findall(points or "")]
    xs, ys = values[0::2], values[1::2]
    corners = min(len(xs), len(ys))
    if corners < 3:
        return "polygon", 0.0
    extent = max(max(xs) - min(xs), max(ys) - min(ys))
    return _CORNERS.get(corners, "polygon"), extent


def _colour(attrs: dict[str, str]) -> str:
    fill = attrs.get("fill", "")
    for decl in attrs.get("style", "").split(";"):
        prop, _, value = decl.partition(":")
        if prop.strip() == "fill":
            fill = value
    fill = fill.strip().lower()
    return fill if _COLOUR_WORD.fullmatch(fill) and fill not in ("none", "transparent", "currentcolor") else ""


def _figure(tag: str, attrs: dict[str, str], text: str, svg: int) -> Figure | None:
    kind = _KINDS.get(tag)
    if kind is None:
        return None
    if tag == "circle":
        size = 2 * _number(attrs.get("r"))
    elif tag == "ellipse":
        size = 2 * max(_number(attrs.get("rx")), _number(attrs.get("ry")))
    elif tag == "rect":
        size = max(_number(attrs.get("width")), _number(attrs.get("height")))
    elif tag == "polygon":
        kind, size = _polygon(attrs.get("points"))
    else:
        size = _number(attrs.get("font-size"))
        text = text.strip()
        if not text:
            return None
        if len(text) == 1 and text.isdigit():
            kind = "digit"
        elif len(text) == 1 and text.isalpha():
            kind = "letter"
    return Figure(kind=kind, colour=_colour(attrs), size=size, text=text, svg=svg)


def svg_figures(dom: PageDom | None) -> dict[str, Figure]:
    """bid -> the `Figure` of each SVG shape or text of the page (elements need a bid: the session marks
    every tag, not only standard HTML ones)."""
    if dom is None:
        return {}
    found: dict[str, Figure] = {}
    for document in dom.documents:
        tags, parents = document.tags, document.parents
        texts: dict[int, list[str]] = {}
        svg_of: dict[int, int] = {}
        for i, tag in enumerate(tags):
            parent = parents[i]
            if tag == "svg":
                svg_of[i] = i
            elif parent in svg_of:
                svg_of[i] = svg_of[parent]
            if tag == "#text" and parent in svg_of:  # the characters of a <text> (or its <tspan>)
                owner = parent
                while owner >= 0 and tags[owner] == "tspan":
                    owner = parents[owner]
                texts.setdefault(owner, []).append(document.texts[i])
        for i, svg in svg_of.items():
            tag = tags[i]
            if tag not in _KINDS:
                continue
            attrs = {name.lower(): value or "" for name, value in document.attributes[i].items()}
            bid = attrs.get("bid")
            figure = _figure(tag, attrs, "".join(texts.get(i, [])), svg) if bid else None
            if bid and figure is not None:
                found[bid] = figure
    return found


def describe(figures: dict[str, Figure]) -> dict[str, str]:
    """bid -> "small black digit" / "large red circle": colour, kind and a size word where sizes differ."""
    sizes: dict[int, list[float]] = {}
    for figure in figures.values():
        if figure.size > 0:
            sizes.setdefault(figure.svg, []).append(figure.size)
    words: dict[str, str] = {}
    for bid, figure in figures.items():
        seen = sizes.get(figure.svg, [])
        size_word = ""
        if figure.size > 0 and max(seen) > 1.2 * min(seen):
            size_word = "small" if figure.size < (max(seen) + min(seen)) / 2 else "large"
        words[bid] = " ".join(part for part in (size_word, figure.colour, figure.kind) if part)
    return words
