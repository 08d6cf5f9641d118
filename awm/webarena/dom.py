"""BrowserGym's DOM snapshot, decoded once per observation: each node's tag, parent, children, attributes.

Why one reader: the observation's attribute hints (`observation.dom_hints`), the SVG figures
(`figures.svg_figures`) and the page's HTML (`observation.page_html`) all read the same snapshot
(CDP's ``DOMSnapshot.captureSnapshot``, BrowserGym's ``dom_object``), whose names and values are indexes
into one string table. Each used to decode it on its own, three walks a step; now `parse_dom` decodes it
once, the session keeps the `PageDom` beside the observation, and all three take it.

Lenient where CDP leaves things out: a column the snapshot lacks reads as empty (no tag, no parent, no
attributes), and the string index -1 (no string) reads as "" (an attribute's value as None).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DomDocument:
    """One document of the snapshot (the page, or an iframe's content), every list indexed by node."""

    tags: list[str]  # the node name in lower case ("div", "svg", "#text"); "" where the snapshot has none
    types: list[int]  # the DOM node type (1 element, 3 text, 9 document...); 0 where unknown
    parents: list[int]  # -1 for the root
    children: list[list[int]]  # in document order
    texts: list[str]  # the node value: a text node's characters, "" for elements
    attributes: list[dict[str, str | None]]  # name as written -> value (None: the snapshot gave no string)
    frames: dict[int, int]  # iframe node -> the index of its content document
    input_values: dict[int, str]  # node -> its live input value
    checked: set[int]
    selected: set[int]


@dataclass(frozen=True)
class PageDom:
    """The whole snapshot, decoded: its documents, the first being the page itself."""

    documents: list[DomDocument]

    def elements(self) -> Iterator[tuple[str, dict[str, str | None]]]:
        """Each node that carries BrowserGym's id, in every document: (its bid, its attributes). What the
        observation's attribute hints and form keys read (`observation.dom_hints`, `field_keys`)."""
        for document in self.documents:
            for pairs in document.attributes:
                bid = pairs.get("bid")
                if bid:
                    yield bid, pairs


def _document(raw: dict[str, Any], strings: list[str | None]) -> DomDocument:
    """One document decoded; `strings` is the snapshot's string table with None appended (index -1)."""
    nodes = raw.get("nodes") or {}
    names = nodes.get("nodeName", [])
    attributes = nodes.get("attributes", [])
    count = max(len(names), len(nodes.get("parentIndex", [])), len(attributes))

    def column(key: str, fill: Any) -> list[Any]:  # one value per node, `fill` where the snapshot has none
        values = nodes.get(key) or []
        return values if len(values) == count else [*values[:count], *[fill] * (count - len(values))]

    parents: list[int] = column("parentIndex", -1)
    children: list[list[int]] = [[] for _ in range(count)]
    for i, parent in enumerate(parents):  # nodes come in document order, so children do too
        if 0 <= parent < count:
            children[parent].append(i)
    decoded = [
        {(strings[pairs[k]] or ""): strings[pairs[k + 1]] for k in range(0, len(pairs) - 1, 2)}
        for pairs in column("attributes", [])
    ]
    frames = nodes.get("contentDocumentIndex") or {}
    inputs = nodes.get("inputValue") or {}
    return DomDocument(
        tags=[(strings[i] or "").lower() for i in column("nodeName", -1)],
        types=column("nodeType", 0),
        parents=parents,
        children=children,
        texts=[strings[i] or "" for i in column("nodeValue", -1)],
        attributes=decoded,
        frames=dict(zip(frames.get("index", []), frames.get("value", []), strict=False)),
        input_values={
            i: strings[v] or ""
            for i, v in zip(inputs.get("index", []), inputs.get("value", []), strict=False)
            if v >= 0
        },
        checked=set((nodes.get("inputChecked") or {}).get("index", [])),
        selected=set((nodes.get("optionSelected") or {}).get("index", [])),
    )


def parse_dom(snapshot: dict[str, Any] | None) -> PageDom | None:
    """The snapshot decoded, or None when there is none (or it holds no document)."""
    if not snapshot or not snapshot.get("documents"):
        return None
    strings: list[str | None] = [*snapshot.get("strings", []), None]  # index -1: no string
    return PageDom(documents=[_document(raw, strings) for raw in snapshot["documents"]])


__all__ = ["DomDocument", "PageDom", "parse_dom"]
