"""MindAct's pruned DOM tree as text: the page format AWM's published Mind2Web figures were made with.

The published algorithm (Deng et al. 2023, "Mind2Web: Towards a Generalist Agent for the Web", NeurIPS
Datasets and Benchmarks; github.com/OSU-NLP-Group/Mind2Web, ``src/data_utils/dom_utils.py``), as copied
into Wang et al. 2024, "Agent Workflow Memory" (github.com/zorazrw/agent-workflow-memory,
``mind2web/utils/env.py``, whose ``get_top_k_obs``/``get_target_obs`` build every prompt's page with it;
this AWM copy is the text this module was written from):

``prune_tree(dom, candidates, max_depth=5, max_children=50, max_sibling=3)`` collects, per candidate, the
``backend_node_id`` of the candidate, of all its ancestors, of its first 50 descendants in document order
no deeper than 6 levels below it (``get_descendants``), and of its element siblings (``<text>`` nodes
left out) up to 3 on each side. It then walks a copy of the tree bottom-up: an element whose id is not
collected is removed with its subtree (a ``<text>`` node follows its parent; an element without an id
counts as id ``""``, which is collected as soon as any collected node lacks an id); a kept element loses
its ``backend_node_id`` unless it is a candidate, and a kept element left with no attribute at all, no
``<text>`` child and at most one child is unwrapped (its child takes its place). ``get_tree_repr(tree,
max_value_length=5, max_length=20, keep_html_brackets=False)`` replaces each element's attributes by
``id=<backend_node_id>`` (candidates only) and the values of role, aria_role, type, alt,
aria_description, aria_label, label, title, name, text_value, value, placeholder, input_checked,
input_value, option_selected and class, lower-cased, without the values hidden/none/presentation/null/
undefined or ``http...``, at most 5 words of under 15 characters per value, each distinct value once, 20
words in all; a ``<text>`` node becomes its first 20 words. The serialised tree is then rewritten
with parentheses for tags, double quotes turned into spaces, a few HTML entities decoded and all
whitespace collapsed::

    (html (div search-panel (label From ) (button id=11 submit (span Search flights ) ) ) )

Where we differ, and why:

* Efficiency, not output: the page is parsed and its ids indexed once per step (the published code
  searches the whole page once per candidate); each candidate's kept ids are collected once and reused
  when a prompt budget asks for fewer candidates; one walk over the kept nodes writes the text (no deep
  copies of the tree, no regex passes over the whole page). `MindActPage.renders` counts the walks.
  During development the output was compared with a literal transcription of the published functions
  on the fixture pages and on generated pages (text, tails, entities, quotes, the 50-descendant cap):
  the same text throughout; the tests hold hand-written golden cases.
* A page that is not well-formed XML (the published ``etree.fromstring`` raises) is read with lxml's
  recovering parser; comments and processing instructions are dropped (cleaned_html has none).
* A candidate missing from the page (the published code raises ``IndexError``) is shown after the tree,
  from the dataset's own tag and attributes, so no id the answer grammar allows is hidden.
* A ``<text>`` node without text (the published code fails on ``None.split()``) shows nothing, and a
  ``<text>`` node is shown as its words only (its attributes and any child elements are not shown).
* Page text that itself contains ``id= ``, ``meta= `` or ``$/$`` is shown as is; the published string
  rewriting edits those everywhere, page text included.
* Length: the published routine has no cap (AWM skips a step whose prompt is over the context limit);
  `MindActPage.fit` keeps the highest-ranked candidates that fit a character budget, as the compact
  format does, so a long page drops candidates rather than the step.
* ``keep_html_brackets``: MindAct's default (False) gives the parenthesised form above; AWM's
  ``get_target_obs`` passes True, giving ``<html> <div search-panel> ... </div> </html>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from lxml import etree

ID_ATTRIBUTE = "backend_node_id"
TEXT_TAG = "text"
MAX_DEPTH = 5  # prune_tree's max_depth: descendants down to MAX_DEPTH + 1 levels below a candidate
MAX_CHILDREN = 50  # prune_tree's max_children: descendants kept per candidate
MAX_SIBLING = 3  # prune_tree's max_sibling: element siblings kept on each side of a candidate
MAX_VALUE_WORDS = 5  # get_tree_repr's max_value_length: words kept per attribute value
MAX_WORDS = 20  # get_tree_repr's max_length: words of all attribute values, and of one text node
MAX_WORD_CHARS = 14  # words of 15 characters or more are dropped from attribute values
META_ATTRIBUTES = (
    "role",
    "aria_role",
    "type",
    "alt",
    "aria_description",
    "aria_label",
    "label",
    "title",
    "name",
    "text_value",
    "value",
    "placeholder",
    "input_checked",
    "input_value",
    "option_selected",
    "class",
)
SKIPPED_VALUES = frozenset({"hidden", "none", "presentation", "null", "undefined"})
# What the published decoding does to the page's own text once serialisation has escaped it: '&', '<'
# and '>' come back as they were, and these entities, written literally in the text, are decoded.
ENTITIES = (
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&nbsp;", " "),
    ("&ndash;", "-"),
    ("&rsquo;", "'"),
    ("&lsquo;", "'"),
    ("&ldquo;", '"'),
    ("&rdquo;", '"'),
    ("&#39;", "'"),
    ("&#40;", "("),
    ("&#41;", ")"),
)
_SPACES = re.compile(r"\s+")

Fallback = Mapping[str, tuple[str, Mapping[str, str]]]  # id -> (tag, attributes) of a candidate


def parse_tree(html: str) -> etree._Element:
    """The page as an lxml tree: strict XML as published, or lxml's recovering parser when that fails."""
    options = {"remove_comments": True, "remove_pis": True, "huge_tree": True, "resolve_entities": False}
    try:
        return etree.fromstring(html, etree.XMLParser(**options))
    except etree.XMLSyntaxError:
        root = etree.fromstring(html, etree.XMLParser(recover=True, **options))
        return root if root is not None else etree.Element("html")


def _elements(node: etree._Element) -> Iterator[etree._Element]:
    return (child for child in node if isinstance(child.tag, str))


def _id(node: etree._Element) -> str:
    return node.get(ID_ATTRIBUTE, "")


def _descendants(node: etree._Element, levels: int) -> Iterator[etree._Element]:
    """Descendants in document order, `levels` deep at most (``get_descendants``)."""
    for child in _elements(node):
        yield child
        if levels > 1:
            yield from _descendants(child, levels - 1)


def _context_ids(node: etree._Element) -> frozenset[str]:
    """The ids one candidate keeps: itself, its ancestors, some descendants and its nearest siblings."""
    ids = {_id(node)}
    ids.update(_id(a) for a in node.iterancestors())
    ids.update(_id(d) for d in islice(_descendants(node, MAX_DEPTH + 1), MAX_CHILDREN))
    parent = node.getparent()
    if parent is not None and node.tag != TEXT_TAG:
        siblings = [s for s in _elements(parent) if s.tag != TEXT_TAG]
        at = siblings.index(node)
        ids.update(_id(s) for s in siblings[max(0, at - MAX_SIBLING) : at + MAX_SIBLING + 1])
    return frozenset(ids)


def attribute_words(attrs: Mapping[str, str]) -> str:
    """The attribute values MindAct shows (``get_attribute_repr``'s ``meta``), decoded as it decodes them."""
    seen: list[str] = []
    for name in META_ATTRIBUTES:
        value = (attrs.get(name) or "").lower()
        if value in SKIPPED_VALUES or value.startswith("http"):
            continue
        value = " ".join([w for w in value.split() if len(w) <= MAX_WORD_CHARS][:MAX_VALUE_WORDS])
        if value and value not in seen:
            seen.append(value)
    return _decode(" ".join(" ".join(seen).split()[:MAX_WORDS]))


def _decode(text: str) -> str:
    for entity, char in ENTITIES:
        text = text.replace(entity, char)
    return text


def _page_text(text: str | None) -> str:
    """Page text (element text and tails) as the published rewriting leaves it: quotes become spaces."""
    return _decode(text.replace('"', " ")) if text else ""


@dataclass
class _Open:
    """An element being written: its children still to visit and the pieces they left."""

    node: etree._Element
    kept: bool  # its id was collected (the root is written either way)
    children: list[etree._Element]
    pending: Iterator[etree._Element]
    inner: list[str] = field(default_factory=list)


class _Writer:
    """One walk over the kept nodes of a page, writing MindAct's text for one set of candidates.

    The walk goes down only into kept elements (a removed element takes its subtree with it) and is
    iterative, so a deep page cannot exhaust the interpreter's stack.
    """

    def __init__(self, keep: set[str], candidates: set[str], html_brackets: bool) -> None:
        self.keep, self.candidates, self.html_brackets = keep, candidates, html_brackets

    def head(self, tag: str, node_id: str | None, words: str) -> str:
        """``tag id=N words``: what stands in an element's opening bracket."""
        return " ".join(p for p in (tag, f"id={node_id}" if node_id is not None else "", words) if p)

    def element(self, head: str, has_attributes: bool, inner: str | None) -> str:
        """An element with its content; `inner` None: an empty element, which serialises as ``<tag/>``."""
        if inner is None:
            if self.html_brackets:
                return f"<{head} />" if has_attributes else f"<{head}/>"
            return f"({head} )" if has_attributes else f"({head})"
        tag = head.split(" ", 1)[0]
        return f"<{head}>{inner}</{tag}>" if self.html_brackets else f"({head}{inner})"

    def write(self, root: etree._Element) -> str:
        """The pruned tree under `root` (never removed nor unwrapped, as it has no parent)."""
        stack = [self._open(root)]
        while True:
            top = stack[-1]
            child = next(top.pending, None)
            if child is None:
                stack.pop()
                if not stack:
                    return self._close(top, is_root=True)[0]
                stack[-1].inner.extend(self._close(top, is_root=False))
            elif child.tag == TEXT_TAG:
                if top.kept:  # a text node follows its parent
                    words = " ".join((child.text or "").split()[:MAX_WORDS])
                    top.inner.append(_page_text(words) + _page_text(child.tail))
            elif _id(child) in self.keep:
                stack.append(self._open(child))

    def _open(self, node: etree._Element) -> _Open:
        children = list(_elements(node))
        return _Open(node, _id(node) in self.keep, children, iter(children))

    def _close(self, top: _Open, *, is_root: bool) -> list[str]:
        """What an element leaves in its parent, with its tail: itself, or (unwrapped: no attribute left,
        no text child, at most one child) its only child, its own text and tail dropped as published."""
        node, inner = top.node, top.inner
        node_id = _id(node) if ID_ATTRIBUTE in node.attrib and _id(node) in self.candidates else None
        others = any(name != ID_ATTRIBUTE for name in node.attrib)
        has_text = top.kept and any(child.tag == TEXT_TAG for child in top.children)
        if not is_root and node_id is None and not others and not has_text and len(inner) <= 1:
            return inner
        words = attribute_words(node.attrib)
        content = None if node.text is None and not inner else _page_text(node.text) + "".join(inner)
        text = self.element(self.head(str(node.tag), node_id, words), bool(node_id or words), content)
        return [text] if is_root else [text + _page_text(node.tail)]


class MindActPage:
    """One step's page, parsed once, rendered in MindAct's format for any candidates of it.

    `fallback` gives tag and attributes for candidates missing from the page (shown after the tree).
    `renders` counts the walks that wrote text (a repeated candidate set is answered from a cache).
    """

    def __init__(self, html: str, fallback: Fallback | None = None, *, keep_html_brackets: bool = False):
        self.root = parse_tree(html)
        self.fallback = dict(fallback or {})
        self.keep_html_brackets = keep_html_brackets
        self.renders = 0
        self._by_id: dict[str, etree._Element] | None = None
        self._context: dict[str, frozenset[str]] = {}
        self._texts: dict[tuple[str, ...], str] = {}

    def find(self, node_id: str) -> etree._Element | None:
        """The first element with this backend_node_id, as the published xpath lookup takes it (one pass
        over the page indexes them all: a search per candidate would cost a pass each)."""
        if self._by_id is None:
            self._by_id = {}
            for node in self.root.iter(etree.Element):
                if ID_ATTRIBUTE in node.attrib:
                    self._by_id.setdefault(node.attrib[ID_ATTRIBUTE], node)
        return self._by_id.get(node_id)

    def kept_ids(self, candidate_ids: Sequence[str]) -> set[str]:
        """The ids `prune_tree` keeps for these candidates (each candidate's share collected once)."""
        keep: set[str] = set()
        for node_id in candidate_ids:
            node = self.find(node_id)
            if node is not None:
                if node_id not in self._context:
                    self._context[node_id] = _context_ids(node)
                keep |= self._context[node_id]
        return keep

    def render(self, candidate_ids: Sequence[str]) -> str:
        """The pruned tree of these candidates as one line of text (document order, not rank order)."""
        ids = tuple(dict.fromkeys(candidate_ids))
        if ids not in self._texts:
            self.renders += 1
            writer = _Writer(self.kept_ids(ids), set(ids), self.keep_html_brackets)
            missing = [
                writer.element(writer.head(tag, i, attribute_words(attrs)), True, None)
                for i in ids
                if self.find(i) is None and i in self.fallback
                for tag, attrs in [self.fallback[i]]
            ]
            self._texts[ids] = _SPACES.sub(" ", " ".join([writer.write(self.root), *missing])).strip()
        return self._texts[ids]

    def fit(self, ranked_ids: Sequence[str], max_chars: int) -> str:
        """The tree of the most candidates, best ranked first, whose text is within `max_chars`.

        Text grows with the candidates kept, so the cut is found by binary search (about log2(k) renders
        beyond the first); when even the best candidate alone is too long, its tree is cut to fit.
        """
        ranked = list(dict.fromkeys(ranked_ids))
        text = self.render(ranked)
        if len(text) <= max_chars or len(ranked) <= 1:
            return text if len(text) <= max_chars else _cut(text, max_chars)
        lo, hi = 0, len(ranked) - 1  # largest n in [1, len-1] that fits; 0: none does
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(self.render(ranked[:mid])) <= max_chars:
                lo = mid
            else:
                hi = mid - 1
        return self.render(ranked[:lo]) if lo else _cut(self.render(ranked[:1]), max_chars)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def render_tree(html: str, candidate_ids: Sequence[str], *, keep_html_brackets: bool = False) -> str:
    """Parse, prune and render in one call (``get_tree_repr(prune_tree(dom, candidates))``)."""
    return MindActPage(html, keep_html_brackets=keep_html_brackets).render(candidate_ids)
