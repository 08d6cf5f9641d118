"""SVG figures in words (`awm.webarena.figures`), and text blocks with ids, in the observation: no browser."""

from __future__ import annotations

import copy
from typing import Any

from awm.config import BrowserSettings
from awm.webarena.dom import PageDom, parse_dom
from awm.webarena.env import BrowserSession
from awm.webarena.figures import describe, svg_figures
from awm.webarena.observation import build_observation, page_html
from tests.test_webarena_observation import Tree


class Snapshot:
    """Builds a DOMSnapshot.captureSnapshot-shaped dict: one document, strings interned."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.names: list[int] = []
        self.parents: list[int] = []
        self.values: list[int] = []
        self.attributes: list[list[int]] = []

    def _s(self, text: str) -> int:
        if text not in self.strings:
            self.strings.append(text)
        return self.strings.index(text)

    def add(self, tag: str, parent: int = -1, text: str = "", **attrs: str) -> int:
        self.names.append(self._s(tag))
        self.parents.append(parent)
        self.values.append(self._s(text) if tag == "#text" else -1)
        pairs: list[int] = []
        for name, value in attrs.items():
            pairs += [self._s(name.replace("_", "-")), self._s(value)]
        self.attributes.append(pairs)
        return len(self.names) - 1

    def text(self, tag: str, parent: int, chars: str, **attrs: str) -> int:
        node = self.add(tag, parent, **attrs)
        self.add("#text", node, chars)
        return node

    def dump(self) -> dict[str, Any]:
        types = [3 if self.strings[name] == "#text" else 1 for name in self.names]
        nodes = {"nodeName": self.names, "nodeType": types, "parentIndex": self.parents, "nodeValue": self.values,
                 "attributes": self.attributes}  # fmt: skip
        return {"strings": self.strings, "documents": [{"nodes": nodes}]}

    def parsed(self) -> PageDom | None:
        """The snapshot as the session hands it on: decoded once (`awm.webarena.dom.parse_dom`)."""
        return parse_dom(self.dump())


def shapes_page() -> Snapshot:
    """click-shape's drawing: texts in two font sizes and three shapes, as MiniWoB++ renders them."""
    dom = Snapshot()
    body = dom.add("body")
    svg = dom.add("svg", body, bid="13")
    dom.text("text", svg, "8", bid="14", fill="black", font_size="10px")
    dom.text("text", svg, "J", bid="15", fill="blue", font_size="20px")
    dom.add("circle", svg, bid="16", r="10", fill="red")
    dom.add("rect", svg, bid="17", width="10", height="10", fill="#00ff00")
    dom.add("polygon", svg, bid="18", points="0,20 10,0 20,20", style="cursor:pointer; fill: Yellow")
    dom.add("div", body, bid="19")  # not a figure
    return dom


def test_figures_are_named_by_kind_colour_and_size_among_their_drawing():
    words = describe(svg_figures(shapes_page().parsed()))
    assert words == {
        "14": "small black digit",
        "15": "large blue letter",
        "16": "large red circle",
        "17": "small rectangle",  # a hex colour is no word
        "18": "large yellow triangle",
    }


def test_one_size_for_all_figures_gets_no_size_word_and_tspans_belong_to_their_text():
    dom = Snapshot()
    svg = dom.add("svg", bid="1")
    label = dom.add("text", svg, bid="2", font_size="12px")
    dom.add("#text", dom.add("tspan", label, bid="3"), "+")
    dom.add("circle", svg, bid="4", r="6", fill="none")
    figures = svg_figures(dom.parsed())
    assert describe(figures) == {"2": "text", "4": "circle"}
    assert figures["2"].text == "+"


def shapes_tree() -> Tree:
    """The AXTree Chromium gives `shapes_page`: its texts are generics, its shapes graphics-symbols."""
    tree = Tree()
    svg = tree.add(tree.root, "SvgRoot", "", bid="13", bbox=(0, 0, 160, 160))
    digit = tree.add(svg, "generic", "", bid="14", clickable=True, bbox=(10, 10, 9, 16.5))
    tree.text(digit, "8")
    letter = tree.add(svg, "generic", "", bid="15", bbox=(30, 10, 15, 33))
    tree.text(letter, "J")
    tree.add(svg, "graphics-symbol", "", bid="16", clickable=True, bbox=(50, 50, 20, 20))
    tree.add(svg, "graphics-symbol", "", bid="17", clickable=True, bbox=(80, 80, 1.5, 1.5))  # folded
    button = tree.add(tree.root, "button", "Submit", bid="20")
    tree.text(button, "Submit")
    return tree


SHAPES_LINES = [
    "[14] clickable '8' (small black digit)",
    "figure 'J' (large blue letter)",
    "[16] clickable (large red circle)",
    "[20] button 'Submit'",
]


def test_figure_lines_in_the_observation_clickable_or_as_text_and_invisible_ones_left_out():
    tree = shapes_tree()
    obs = build_observation({"nodes": tree.nodes}, tree.extra, dom=shapes_page().parsed())
    assert obs.text.splitlines() == SHAPES_LINES
    assert obs.ids == ["14", "16", "20"]


def test_the_session_decodes_the_snapshot_once_for_the_observation_and_the_page_html():
    """The observation's figures and hints and the page's HTML come from one decoded snapshot: after the
    observation is built the raw snapshot is never read again (spoiling it changes nothing)."""
    dom = shapes_page()
    dom.add("span", 0, bid="21", title="Send it")
    raw = dom.dump()
    tree = shapes_tree()
    tree.add(tree.root, "generic", "", bid="21", clickable=True)  # no name: the page's title says what it is
    obs = {"axtree_object": {"nodes": tree.nodes}, "dom_object": raw, "extra_element_properties": tree.extra}
    expected = page_html(parse_dom(copy.deepcopy(raw)), tree.extra)
    page = BrowserSession(BrowserSettings())._page_state({**obs, "url": "http://x.test/"})
    raw["strings"][:] = ["spoiled"] * len(raw["strings"])
    raw["documents"].clear()
    assert page.dom is not None and isinstance(page.dom[0], PageDom)
    assert page.text.splitlines() == [*SHAPES_LINES, "[21] clickable (title=Send it)"]
    html = page.html()
    assert html == expected
    assert html is not None and html.startswith('<body><svg bid="13" bounding_box_rect="0,0,160,160">')
    assert '<span bid="21" title="Send it" bounding_box_rect="0,0,10,10" is_clickable="true"></span>' in html


def test_blocks_of_text_carry_their_ids_only_when_asked():
    tree = Tree()
    box = tree.add(tree.root, "generic", "", bid="10")
    first = tree.add(box, "paragraph", "", bid="11")
    tree.text(first, "Lorem ipsum dolor.")
    second = tree.add(box, "paragraph", "", bid="12")
    tree.text(second, "Cras dignissim.")
    button = tree.add(tree.root, "button", "Submit", bid="13")
    tree.text(button, "Submit")
    asked = build_observation({"nodes": tree.nodes}, tree.extra, text_ids=True)
    assert asked.text.splitlines() == ["[11] text 'Lorem ipsum dolor.'", "[12] text 'Cras dignissim.'", "[13] button 'Submit'"]
    assert asked.elements["12"].role == "text" and asked.ids == ["11", "12", "13"]
    plain = build_observation({"nodes": tree.nodes}, tree.extra)
    assert plain.text.splitlines() == ["Lorem ipsum dolor.", "Cras dignissim.", "[13] button 'Submit'"]
