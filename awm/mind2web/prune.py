"""Prune a Mind2Web page to its top-ranked candidate elements, MindAct style, as compact text.

Why prune: a Mind2Web ``cleaned_html`` snapshot is tens of thousands of tokens; MindAct (and AWM after
it) shows the model only the ranker's top-k candidates, each with its own text, the tags of its
ancestors (where on the page it sits) and a little text of its siblings (the label next to a box).
Element ids are the dataset's ``backend_node_id``s, so the model's answer is scored as is.

Output, one line per kept node, indented by depth among kept nodes; only candidates carry an id::

    <body> <form>
      [1234] <input placeholder="From">
      Departure city
      [1235] <button> Search

Parsed with the standard library's `html.parser` (no extra dependency): the snapshots are machine-written
and every element we need carries a ``backend_node_id`` attribute.

This is ``awm mind2web run --page-format compact``; the default, ``mindact``, is MindAct's own tree
(`awm.mind2web.dom_tree`), the format AWM's published figures were made with. The parse (`Dom`) serves
ranking and target labels in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

# Elements that never have children (so no end tag is waited for).
VOID_TAGS = frozenset(
    "area base br col embed hr img input link meta param source track wbr".split()  # noqa: SIM905
)
# Attributes worth showing: they carry what a person reads or what a field is for. Both spellings, since
# cleaned_html uses ``aria_label`` while raw attributes use ``aria-label``.
SHOWN_ATTRIBUTES = (
    "aria_label",
    "aria-label",
    "placeholder",
    "title",
    "alt",
    "value",
    "input_value",
    "label",
    "name",
    "type",
    "role",
    "aria_role",
    "option_selected",
    "input_checked",
)
ID_ATTRIBUTE = "backend_node_id"
TEXT_CHARS = 80  # a candidate's own text, cut to this
SIBLING_CHARS = 40  # each sibling's text, cut to this
DEFAULT_MAX_CHARS = 6000
DEFAULT_ANCESTORS = 3  # nearest ancestors kept per candidate
DEFAULT_SIBLINGS = 1  # siblings kept on each side of a candidate


@dataclass(eq=False)
class Node:
    """An element: tag, attributes, children (nodes and text) and parent."""

    tag: str
    attrs: dict[str, str]
    parent: Node | None = None
    children: list[Node | str] = field(default_factory=list)

    @property
    def node_id(self) -> str | None:
        return self.attrs.get(ID_ATTRIBUTE)

    def text(self, limit: int = 10_000) -> str:
        """The visible text under this element, whitespace collapsed, cut to about `limit` characters."""
        parts: list[str] = []
        size = 0
        stack: list[Node | str] = [self]
        while stack and size < limit:
            item = stack.pop()
            if isinstance(item, str):
                words = " ".join(item.split())
                if words:
                    parts.append(words)
                    size += len(words) + 1
            else:
                stack.extend(reversed(item.children))
        return _cut(" ".join(parts), limit)

    def ancestors(self) -> list[Node]:
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out


@dataclass
class Dom:
    """A parsed snapshot: the root and every element that has a backend_node_id."""

    root: Node
    by_id: dict[str, Node]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack: list[Node] = [self.root]
        self.by_id: dict[str, Node] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: (v or "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)
        if node.node_id is not None:
            self.by_id.setdefault(node.node_id, node)
        if tag not in VOID_TAGS:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: (v or "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)
        if node.node_id is not None:
            self.by_id.setdefault(node.node_id, node)

    def handle_endtag(self, tag: str) -> None:
        # Close up to the nearest open element of this tag; an unmatched end tag is ignored.
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.stack[-1].children.append(data)


def parse_dom(html: str) -> Dom:
    """Parse a snapshot once (ranking and pruning both read it)."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return Dom(builder.root, builder.by_id)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def _quote(value: str) -> str:
    return '"' + _cut(" ".join(value.split()), SIBLING_CHARS).replace('"', "'") + '"'


def describe_attributes(attrs: dict[str, str]) -> str:
    """The readable attributes as ``name="value"`` pairs (ids, classes and styles left out)."""
    shown = []
    for name in SHOWN_ATTRIBUTES:
        value = attrs.get(name, "").strip()
        if name in ("input_checked", "option_selected"):
            if value.lower() == "true":
                shown.append(name)
        elif value:
            shown.append(f"{name.replace('-', '_')}={_quote(value)}")
    return " ".join(shown)


def element_line(node_id: str, tag: str, attrs: dict[str, str], text: str) -> str:
    """``[id] <tag attr="..."> text``: how a candidate is shown to the model."""
    described = describe_attributes(attrs)
    head = f"<{tag} {described}>" if described else f"<{tag}>"
    return f"[{node_id}] {head} {_cut(text, TEXT_CHARS)}".rstrip()


def element_text(dom: Dom, node_id: str) -> str:
    """A candidate's own text and readable attributes (for ranking and for target labels)."""
    node = dom.by_id.get(node_id)
    if node is None:
        return ""
    return " ".join(p for p in (describe_attributes(node.attrs), node.text(TEXT_CHARS * 2)) if p)


def _sibling_texts(node: Node, siblings: int, kept_ids: set[str]) -> list[str]:
    """Short text of up to `siblings` neighbours on each side that have any text (kept candidates are
    shown on their own line, so they are skipped here)."""
    if node.parent is None or siblings <= 0:
        return []
    row = node.parent.children
    at = next(i for i, child in enumerate(row) if child is node)
    out: list[str] = []
    for side in (range(at - 1, -1, -1), range(at + 1, len(row))):
        found = 0
        for i in side:
            child = row[i]
            if isinstance(child, Node) and child.node_id in kept_ids:
                continue
            text = " ".join(child.split()) if isinstance(child, str) else child.text(SIBLING_CHARS)
            if text:
                out.append(_cut(text, SIBLING_CHARS))
                found += 1
                if found >= siblings:
                    break
    return out


def _render(
    dom: Dom, keep: list[str], ancestors: int, siblings: int, fallback: dict[str, tuple[str, dict[str, str]]]
) -> str:
    """Render the kept candidates found in the page in document order, then those not found."""
    found = [i for i in keep if i in dom.by_id]
    kept_ids = set(found)
    on_path: set[int] = set()  # every ancestor of a kept candidate: where the walk must go
    shown: set[int] = set()  # the nearest `ancestors` of each: whose tags are printed
    notes: dict[int, list[str]] = {}  # sibling text shown under a candidate
    for node_id in found:
        node = dom.by_id[node_id]
        chain = node.ancestors()
        on_path.update(id(a) for a in chain)
        shown.update(id(a) for a in chain[:ancestors] if a.tag != "#root")
        texts = _sibling_texts(node, siblings, kept_ids)
        if texts:
            notes[id(node)] = texts
    lines: list[str] = []

    def walk(node: Node, depth: int, pending: list[str]) -> None:
        kids = [
            c for c in node.children if isinstance(c, Node) and (id(c) in on_path or c.node_id in kept_ids)
        ]
        if node.node_id in kept_ids:
            prefix = " ".join(pending) + " " if pending else ""
            line = element_line(node.node_id, node.tag, node.attrs, node.text(TEXT_CHARS + 3))
            lines.append("  " * depth + prefix + line)
            lines.extend("  " * (depth + 1) + text for text in notes.get(id(node), []))
            pending, depth = [], depth + 1
        elif id(node) in shown:
            pending = [*pending, f"<{node.tag}>"]
            if len(kids) != 1:  # a branching ancestor gets its own line; a single-child chain is one line
                lines.append("  " * depth + " ".join(pending))
                pending, depth = [], depth + 1
        for child in kids:
            walk(child, depth, pending)

    walk(dom.root, 0, [])
    for node_id in keep:
        if node_id not in kept_ids and node_id in fallback:
            tag, attrs = fallback[node_id]
            lines.append(element_line(node_id, tag, attrs, ""))
    return "\n".join(lines)


def _fit(
    dom: Dom,
    keep_ids: list[str],
    max_chars: int,
    ancestors: int,
    siblings: int,
    fallback: dict[str, tuple[str, dict[str, str]]],
) -> tuple[str, int]:
    """`prune_dom`'s text and how many renders it took (one per candidate count and context level)."""
    keep = list(dict.fromkeys(keep_ids))
    renders = 0
    for n in range(len(keep), 0, -1):
        for anc, sib in ((ancestors, siblings), (ancestors, 0), (0, 0)):
            text = _render(dom, keep[:n], anc, sib, fallback)
            renders += 1
            if len(text) <= max_chars:
                return text, renders
    if not keep:
        return "", renders
    return _cut(_render(dom, keep[:1], 0, 0, fallback), max(max_chars, 1)), renders + 1


def prune_dom(
    dom: Dom,
    keep_ids: list[str],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    ancestors: int = DEFAULT_ANCESTORS,
    siblings: int = DEFAULT_SIBLINGS,
    fallback: dict[str, tuple[str, dict[str, str]]] | None = None,
) -> str:
    """The kept candidates with context, within `max_chars` (best effort: the first candidate always stays).

    `keep_ids` is in rank order: when the text is too long, sibling text goes first, then ancestors, then
    candidates from the end of the list (the lowest ranked). `fallback` gives tag and attributes for
    candidates not found in the page, so a candidate is never silently lost.
    """
    return _fit(dom, keep_ids, max_chars, ancestors, siblings, fallback or {})[0]


@dataclass
class CompactPage:
    """One step's page in the compact format, with the number of renders its fitting took.

    Each fit re-renders from all candidates down (up to three renders per candidate dropped): what
    `awm mind2web run --page-format compact` costs, counted so it can be set beside `MindActPage`.
    """

    dom: Dom
    fallback: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    renders: int = 0

    def fit(self, ranked_ids: list[str], max_chars: int) -> str:
        text, renders = _fit(
            self.dom, ranked_ids, max_chars, DEFAULT_ANCESTORS, DEFAULT_SIBLINGS, self.fallback
        )
        self.renders += renders
        return text


def prune_html(
    cleaned_html: str,
    keep_ids: list[str],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    ancestors: int = DEFAULT_ANCESTORS,
    siblings: int = DEFAULT_SIBLINGS,
) -> str:
    """Parse `cleaned_html` and prune it to `keep_ids` (see `prune_dom`)."""
    return prune_dom(
        parse_dom(cleaned_html), keep_ids, max_chars=max_chars, ancestors=ancestors, siblings=siblings
    )
