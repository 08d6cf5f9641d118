"""The pruned page a model sees: one line per actionable element or needed text, within a token budget.

Built from BrowserGym's merged AXTree (main frame and iframes) plus its per-bid extra properties
(visibility, bounding box, whether a click handler is attached). Why not BrowserGym's
`flatten_axtree_to_str`: it prints every InlineTextBox twice over, hides clickable spans and divs
(`skip_generic`), and never bounds its size. Here every name and value is sanitized, unnamed inputs take
the label printed just before them, native selects list their options inline, hidden elements are dropped,
off-screen ones go first when the budget is tight, and the result is a pure function of its inputs.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Any

from awm.actions import TEXT_BLOCK_ROLE
from awm.trajectory import TargetDesc
from awm.webarena.dom import DomDocument, PageDom
from awm.webarena.figures import describe, svg_figures
from awm.webarena.sanitize import quote, sanitize_text

CHARS_PER_TOKEN = 3.2  # measured on MiniWoB++ and WebArena trees (DESIGN.md §3)

# Roles a model can act on directly.
INTERACTIVE_ROLES = frozenset(
    {
        "button", "link", "textbox", "searchbox", "combobox", "listbox", "option", "checkbox", "radio",
        "switch", "slider", "spinbutton", "menuitem", "menuitemcheckbox", "menuitemradio", "tab",
        "treeitem", "PopUpButton", "ToggleButton",
    }
)  # fmt: skip
# Roles whose own box is the thing to click when a handler is attached (spans, divs, cells...).
CLICK_TARGET_ROLES = frozenset(
    {"generic", "none", "presentation", "cell", "gridcell", "row", "listitem", "image", "img", "paragraph",
     "StaticText", "Section", "group", "article", "columnheader", "rowheader", "heading", "LabelText",
     "DescriptionListTerm", "DescriptionListDetail", "figure", "mark", "strong", "emphasis", "code", "time"}
)  # fmt: skip
# Roles that take their label from the text printed just before them when they have no name.
LABEL_BEFORE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider", "listbox"})
LABEL_AFTER_ROLES = frozenset({"checkbox", "radio", "switch"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider", "ProgressIndicator"})
OPAQUE_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "slider"})
SKIPPED_ROLES = frozenset({"InlineTextBox", "LineBreak", "ListMarker"})
# Chromium's own roles for date and time inputs, shown as the text fields they are: as they come, the
# input's line is its picker button and its parts are spinbuttons sharing its id (Hours, Minutes, AM/PM),
# so the role rules refused `fill` on it and the model could not enter a time (enter-time 0/3). The
# executor writes the value in the field's own format (`awm.webarena.field_values`).
DATE_TIME_ROLES = {"InputTime": "time", "Date": "date", "DateTime": "date and time"}
DIALOG_ROLES = frozenset({"dialog", "alertdialog"})
TEXT_ROLES_WITH_NAME = frozenset({"heading", "image", "img", "alert", "status", "caption", "figure"})
# Boolean states worth a word on the line (shown only when they hold, except `expanded`).
_FLAGS = ("checked", "selected", "pressed", "disabled", "focused")
_MAX_OPTIONS = 15
_WITHIN_CHARS = 24  # of the enclosing element's label, on a line without a label of its own
_HINT_ATTRS = ("title", "alt", "placeholder")
_MIN_FIGURE_PX = 5  # an SVG figure under this many pixels on its longer side is not shown


@dataclass
class Line:
    """One rendered line plus what the budget, the fingerprint and the traces need to know about it."""

    text: str
    frame: str = ""  # bid of the enclosing iframe, "" for the main frame
    bid: str | None = None  # set when the line shows an id the model may act on
    role: str = ""
    label: str = ""
    key: str = ""  # state-free identity (role + label or text) for change detection
    value: str | None = None
    flags: tuple[str, ...] = ()
    offscreen: bool = False
    is_text: bool = False
    hint: str = ""  # the DOM-attribute description shown for an unnamed element
    spelled: bool = False  # text drawn one character at a time, joined into one word (`join_spelled`)
    row: str = ""  # an element's row, list item or card: its text (`TargetDesc.row`)
    in_cell: bool = False  # a text line inside a table cell (`CELL_ROLES`): a value of its own, never spelled
    table_row: int = -1  # a text line in a cell: which table row (a number per row walked), -1 outside one
    form: str = ""  # the enclosing form's AXTree node id ("" outside any form): which fields a button submits
    multiline: bool = False  # a text box of several lines (a textarea): where a composed text is typed
    field_key: str = ""  # a text field's form key, its name or id (`field_keys`); "" for anything else


@dataclass
class Observation:
    """The pruned page: what the prompt shows (`text`, `ids`) and everything derived from the full page."""

    text: str
    ids: list[str]
    elements: dict[str, TargetDesc]
    lines: list[Line]  # every kept line before the budget cut (fingerprints use these)
    focused_bid: str = ""
    omitted: int = 0
    tokens: int = 0
    dialogs: list[str] = field(default_factory=list)

    @property
    def forms(self) -> dict[str, str]:
        """Each element inside a form: its id -> the form's key (`Line.form`)."""
        return {line.bid: line.form for line in self.lines if line.bid and line.form}

    @property
    def multiline(self) -> frozenset[str]:
        """The ids of the page's text boxes of several lines (`Line.multiline`)."""
        return frozenset(line.bid for line in self.lines if line.bid and line.multiline)

    @property
    def field_keys(self) -> dict[str, str]:
        """Each text field with a form key: its id -> the key (`Line.field_key`)."""
        return {line.bid: line.field_key for line in self.lines if line.bid and line.field_key}


def estimate_tokens(text: str) -> int:
    """Cheap token estimate (~3.2 characters per token on these pages); exact counts come from tiktoken."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _props(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prop in node.get("properties", []):
        value = prop.get("value", {})
        if "value" in value:
            out[prop["name"]] = value["value"]
    return out


def dom_hints(dom: PageDom | None) -> dict[str, str]:
    """bid -> a short description from DOM attributes (title, alt, data-*, inline background colour; else id/class).

    Why: clickable boxes without text (MiniWoB's click-color, icon buttons) have no accessible name; the
    page's own attributes are the only words that tell them apart.
    """
    if dom is None:
        return {}
    hints: dict[str, str] = {}
    for bid, pairs in dom.elements():
        parts: list[str] = []
        for name in _HINT_ATTRS:
            if pairs.get(name):
                parts.append(f"{name}={pairs[name]}")
        for name, value in pairs.items():
            if name.startswith("data-") and value and len(value) <= 30 and not name.startswith("data-bs"):
                parts.append(f"{name}={value}")
        style = pairs.get("style") or ""
        if "background" in style:
            for decl in style.split(";"):
                prop, _, value = decl.partition(":")
                if prop.strip() in ("background-color", "background") and value.strip():
                    parts.append(f"background={value.strip()}")
        if not parts:  # last resort: the author's own names for the element
            parts = [
                f"{name}={pairs[name]}" for name in ("id", "class") if 0 < len(pairs.get(name) or "") <= 30
            ]
        seen_values: set[str] = set()
        unique = []
        for part in parts:
            value = part.split("=", 1)[1]
            if value not in seen_values:
                seen_values.add(value)
                unique.append(part)
        if unique:
            hints[bid] = " ".join(unique)
    return hints


def field_keys(dom: PageDom | None) -> dict[str, str]:
    """bid -> the form's key for the field (its ``name``, else its ``id``, 3 to 30 characters).

    Why: a field's label is sometimes an instruction or an example, not what the field is for. Trac's
    comment box is labelled "You may use WikiFormatting here.", a card number's placeholder is
    "1234 5678 9012 3456", a forum's answer box "Be kind.". Measured on the arena's comment-ticket: with
    the comment box on the page and the comment not typed yet, the model reported that the ticket page
    had no comment field (5 of 5 episodes). The key the page's author gave the field (``comment``,
    ``card``) says what it is on any site; `_Builder.emit_element` shows it where the label does not.
    """
    if dom is None:
        return {}
    out: dict[str, str] = {}
    for bid, pairs in dom.elements():
        key = next((pairs[name] for name in ("name", "id") if 3 <= len(pairs.get(name) or "") <= 30), None)
        if key and re.search(r"[A-Za-z]{3}", key):
            out[bid] = key
    return out


def names_the_field(label: str, key: str) -> bool:
    """Whether a label already says what its field's key does: a word of one is part of a word of the
    other ("Username:" and ``user``, "From:" and ``flight-from``; a word under three letters only as
    itself: "Cc:" and ``field_cc``). "You may use WikiFormatting here." and ``comment`` share none, so
    the key is shown beside the label."""
    label_words = re.findall(r"[a-z]+", label.lower())
    key_words = re.findall(r"[a-z]+", key.lower())
    return any(
        k == w or (min(len(k), len(w)) >= 3 and (k in w or w in k)) for k in key_words for w in label_words
    )


# Page regions whose words are the site's boilerplate, not the page's content: a footer ("Powered by ...",
# copyright, "Visit the project at ..."). Their links and controls stay (a footer link may be the way
# somewhere); their plain text is left out. Measured on the arena's pages (`scripts/bench_sites.py
# --observe`): the one pruning that takes words a task never asks about and nothing a task acts on.
BOILERPLATE_ROLES = frozenset({"contentinfo"})
# Containers that make one item of a list: a table row, a list item, a card (`article`). The text of the
# nearest one is each element's `row`, what a workflow grounds a repeated control by (the Edit link of
# one ticket, the star of one e-mail).
ROW_ROLES = frozenset({"row", "listitem", "article"})
# A table's cells: a one-letter text in one is a value of its own (a grade, a size), not a letter of a
# word drawn one box at a time (`join_spelled`).
CELL_ROLES = frozenset({"cell", "gridcell", "columnheader", "rowheader"})


class _Builder:
    """Depth-first walk over the merged AXTree that emits `Line`s; one instance per observation."""

    def __init__(
        self,
        axtree: dict[str, Any],
        extra: dict[str, Any],
        hints: dict[str, str],
        name_chars: int,
        field_keys: dict[str, str] | None = None,
        figures: dict[str, str] | None = None,
        text_ids: bool = False,
        prune: bool = True,
    ):
        self.nodes = axtree.get("nodes", [])
        self.prune = prune  # a page footer's words are left out (`BOILERPLATE_ROLES`)
        self.in_boilerplate = 0  # depth of boilerplate regions around the node being walked
        self.rows: list[str] = []  # the texts of the rows (`ROW_ROLES`) around the node being walked
        self.row_numbers: list[int] = []  # a number for each of those rows, to tell one row's cells apart
        self.rows_walked = 0
        self.in_cell = 0  # depth of table cells (`CELL_ROLES`) around the node being walked
        self.forms: list[str] = []  # the AXTree node ids of the forms around the node being walked
        self.figures = figures or {}  # bid -> "small black digit" (`awm.webarena.figures`)
        self.text_ids = text_ids  # blocks of text carry their ids (`TEXT_BLOCK_ROLE`)
        self.by_id = {node["nodeId"]: node for node in self.nodes}
        self.extra = extra or {}
        self.hints = hints
        self.field_keys = field_keys or {}  # bid -> the form's key for the field (`field_keys`)
        self.name_chars = name_chars
        self.lines: list[Line] = []
        self.dialogs: list[str] = []

    # --- helpers ---------------------------------------------------------------------------------
    def children(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.by_id[c] for c in node.get("childIds", []) if c in self.by_id and c != node["nodeId"]]

    def subtree_text(self, node: dict[str, Any], limit: int = 300) -> str:
        parts: list[str] = []

        def visit(n: dict[str, Any]) -> None:
            if sum(len(p) for p in parts) > limit:
                return
            if n["role"]["value"] == "StaticText":
                parts.append(n.get("name", {}).get("value", ""))
                return
            for child in self.children(n):
                visit(child)

        visit(node)
        return " ".join(p.strip() for p in parts if p.strip())

    def visibility(self, bid: str | None) -> tuple[bool, bool]:
        """(hidden, offscreen) for an element with extra properties; unknown counts as shown."""
        props = self.extra.get(bid) if bid else None
        if not props:
            return False, False
        bbox = props.get("bbox")
        if bbox is None or len(bbox) < 4 or bbox[2] * bbox[3] <= 0:
            return True, False
        ratio = props.get("visibility")
        return False, ratio is not None and ratio <= 0

    def has_interactive_descendant(self, node: dict[str, Any]) -> bool:
        """A clickable cell or div around a real link or button: the inner element is the target."""
        stack = self.children(node)
        while stack:
            child = stack.pop()
            if child["role"]["value"] in INTERACTIVE_ROLES and child.get("browsergym_id"):
                return True
            stack.extend(self.children(child))
        return False

    def is_text_block(self, node: dict[str, Any]) -> bool:
        """An element whose own children include text and nothing to act on (a paragraph): what
        `select_text` takes when the goal asks to highlight text."""
        kids = self.children(node)
        return (
            node["role"]["value"] not in INTERACTIVE_ROLES
            and any(k["role"]["value"] == "StaticText" and (k.get("name", {}).get("value") or "").strip() for k in kids)
            and not self.has_interactive_descendant(node)
        )

    def is_slider_box(self, node: dict[str, Any]) -> bool:
        """A clickable box with no text whose one child is a nameless, empty, focusable handle: a slider
        drawn by script (jQuery UI's, and most others, carry no ARIA role). Why: shown as a bare
        `clickable`, the model clicked it (which moves the handle to the box's centre) and submitted;
        as a `slider` it takes `fill` with the value (`awm.webarena.executor` moves the handle by keys)."""
        kids = self.children(node)
        if len(kids) != 1 or self.subtree_text(node).strip():
            return False
        handle = kids[0]
        if not (
            _props(handle).get("focusable") is True
            and not (handle.get("name", {}).get("value") or "").strip()
            and not self.children(handle)
        ):
            return False
        # A track at least three handles long: an icon button's box is about its icon's size.
        box = self.extra.get(node.get("browsergym_id") or "", {}).get("bbox")
        knob = self.extra.get(handle.get("browsergym_id") or "", {}).get("bbox")
        if not (box and knob):
            return False
        return max(box[2], box[3]) >= 3 * max(knob[2], knob[3], 1)

    def options_of(self, node: dict[str, Any]) -> list[str]:
        found: list[str] = []

        def visit(n: dict[str, Any]) -> None:
            if n["role"]["value"] in ("option", "menuitem") and not n.get("ignored"):
                found.append(n.get("name", {}).get("value", ""))
                return
            for child in self.children(n):
                visit(child)

        for child in self.children(node):
            visit(child)
        return found

    # --- the walk --------------------------------------------------------------------------------
    def walk(self, node: dict[str, Any], frame: str, hidden: bool, offscreen: bool, covered: str) -> None:
        """Emit lines for `node` and its subtree. `covered` is text an emitted ancestor already shows."""
        role = node["role"]["value"]
        if role in SKIPPED_ROLES:
            return
        bid = node.get("browsergym_id")
        if bid and bid in self.extra:
            hidden, offscreen = self.visibility(bid)
        name = node.get("name", {}).get("value", "") or ""
        props = _props(node)
        ignored = bool(node.get("ignored"))
        clickable = bool(bid and self.extra.get(bid, {}).get("clickable"))

        if not ignored and not hidden:
            if role == "StaticText":
                text = name.strip()
                if text and text not in covered and not self.in_boilerplate:
                    shown = sanitize_text(text, self.name_chars * 2)
                    if shown.strip():  # an icon font's glyph sanitizes to nothing: no empty line
                        self.emit_text(shown, frame, offscreen)
                return
            if role == "Iframe":
                title = sanitize_text(name, self.name_chars)
                self.emit_text(f"iframe '{title}'" if title else "iframe", frame, offscreen)
                child_frame = bid or frame
                for child in self.children(node):
                    self.walk(child, child_frame, hidden, offscreen, "")
                return
            if bid in self.figures:
                self.emit_figure(node, bid, frame, offscreen, clickable)
                return  # a <text> figure's characters are its label
            if self.text_ids and bid and not clickable and self.is_text_block(node):
                text = sanitize_text(self.subtree_text(node, 2000), self.name_chars * 4)
                line = f"[{bid}] {TEXT_BLOCK_ROLE} '{text}'"
                self.lines.append(Line(
                    text=line, frame=frame, bid=bid, role=TEXT_BLOCK_ROLE, label=text,
                    key=f"{TEXT_BLOCK_ROLE}:{text}", offscreen=offscreen,
                ))  # fmt: skip
                return
            if role in DIALOG_ROLES:
                label = sanitize_text(name or self.subtree_text(node, 80), self.name_chars)
                self.dialogs.append(label)
                self.emit_text(f"{role} '{label}'" if label else role, frame, offscreen)
            elif clickable and role in ("generic", "none") and self.is_slider_box(node):
                self.emit_element(node, "slider", name, props, bid, frame, offscreen)
                return  # its handle is the slider itself
            elif role in DATE_TIME_ROLES and bid:
                self.emit_element(node, "textbox", name, props, bid, frame, offscreen, kind=DATE_TIME_ROLES[role])
                return  # its parts (spinbuttons, the picker button) are the field itself
            elif role in INTERACTIVE_ROLES or (
                clickable and role in CLICK_TARGET_ROLES and not self.has_interactive_descendant(node)
            ):
                if bid:
                    covered = self.emit_element(node, role, name, props, bid, frame, offscreen, within=covered)
                    if role == "combobox" and self.options_of(node):
                        return  # native select: options are listed inline
                    if role in OPAQUE_ROLES:
                        return  # a field's children are its own value text
            elif role in TEXT_ROLES_WITH_NAME and name.strip() and not self.in_boilerplate:
                shown = sanitize_text(name, self.name_chars * 2)
                self.emit_text(f"{role} '{shown}'", frame, offscreen)
                covered = name
        boilerplate = self.prune and role in BOILERPLATE_ROLES and not ignored
        self.in_boilerplate += boilerplate
        row = role in ROW_ROLES and not ignored and not hidden
        if row:
            self.rows.append(sanitize_text(self.subtree_text(node, 200), self.name_chars))
            self.rows_walked += 1
            self.row_numbers.append(self.rows_walked)
        cell = role in CELL_ROLES
        self.in_cell += cell
        form = role == "form"  # Chromium exposes every <form>, named or not, as a "form" node
        if form:
            self.forms.append(f"{frame}:{node['nodeId']}")
        for child in self.children(node):
            self.walk(child, frame, hidden, offscreen, covered)
        if form:
            self.forms.pop()
        self.in_cell -= cell
        if row:
            self.rows.pop()
            self.row_numbers.pop()
        self.in_boilerplate -= boilerplate

    def emit_text(self, text: str, frame: str, offscreen: bool) -> None:
        in_cell = self.in_cell > 0
        self.lines.append(Line(
            text=text, frame=frame, key=f"text:{text}", offscreen=offscreen, is_text=True, in_cell=in_cell,
            table_row=self.row_numbers[-1] if in_cell and self.row_numbers else -1,
        ))  # fmt: skip

    def emit_figure(self, node: dict[str, Any], bid: str, frame: str, offscreen: bool, clickable: bool) -> None:
        """An SVG figure: a `clickable` line when it takes clicks, else a `figure` text line; either way
        with its words (`awm.webarena.figures.describe`) where an HTML element would have a name."""
        bbox = self.extra.get(bid, {}).get("bbox") or []
        if len(bbox) >= 4 and max(bbox[2], bbox[3]) < _MIN_FIGURE_PX:
            return  # drawn too small to see: a menu folded into a point before it opens (click-pie)
        words = sanitize_text(self.figures[bid], self.name_chars)
        if clickable:
            self.emit_element(node, "generic", "", _props(node), bid, frame, offscreen, kind=words)
            return
        label = sanitize_text(self.subtree_text(node), self.name_chars)
        self.emit_text(f"figure '{label}' ({words})" if label else f"figure ({words})", frame, offscreen)

    def emit_element(
        self,
        node: dict[str, Any],
        role: str,
        name: str,
        props: dict[str, Any],
        bid: str,
        frame: str,
        offscreen: bool,
        kind: str = "",
        within: str = "",
    ) -> str:
        """Emit one element line; returns the text it covers (so child text is not printed twice).
        `kind`: what a field takes when its role does not say (``time``), shown as the line's hint.
        `within`: the label of the element line this one is inside, named on a line that has no label
        of its own (an icon in a row: ``image (class=trash, in 'Misty Ut. Ultrices')``). Why: measured on
        email-inbox-delete, the model clicked the first trash icon of the inbox whichever e-mail the goal
        named; the icons differ only by the row they are in."""
        shown_role = "clickable" if role in ("generic", "none", "presentation") else role
        label_source = name.strip()
        if not label_source and role not in LABEL_BEFORE_ROLES | LABEL_AFTER_ROLES:
            label_source = self.subtree_text(node)
        label = sanitize_text(label_source, self.name_chars)
        value = None
        if role in VALUE_ROLES:
            raw = node.get("value", {}).get("value")
            written = str(props.get("valuetext", "")).strip()
            if role == "spinbutton" and _NUMBER.fullmatch(written):
                # The number as the field shows it: the tree's value is a 32-bit float ("59.99" reads
                # 59.9900016784668, "12.50" reads 12.5), so a typed price never read back as typed and
                # the fill's `value_is` check failed (the arena shop's change-price got no workflow). A
                # value text that is no number ("Blank" in a date's day field) leaves the value as it is.
                raw = written
            if raw not in (None, ""):
                value = sanitize_text(raw, self.name_chars)
        flags = [flag for flag in _FLAGS if props.get(flag) in (True, "true", "mixed")]
        if props.get("checked") == "mixed":
            flags = ["partly checked" if f == "checked" else f for f in flags]
        if "expanded" in props:
            flags.append("expanded" if props["expanded"] else "collapsed")
        text = f"[{bid}] {shown_role}" + (f" '{label}'" if label else "")
        field_key = sanitize_text(self.field_keys.get(bid, ""), self.name_chars) if role in OPAQUE_ROLES else ""
        hint = ""
        if kind:
            hint = f" ({kind})"
            text += hint
        elif label and field_key and not names_the_field(label, field_key):
            hint = f" (name={field_key})"
            text += hint
        elif not label and bid in self.hints:
            where = sanitize_text(within, _WITHIN_CHARS) if within.strip() else ""
            hint = f" ({sanitize_text(self.hints[bid], self.name_chars)}" + (f", in '{where}')" if where else ")")
            text += hint
        if value is not None:
            text += f" value='{value}'"
        if role == "combobox":
            options = self.options_of(node)
            if options:
                shown = [sanitize_text(o, 40) for o in options[:_MAX_OPTIONS]]
                more = f" | … {len(options) - _MAX_OPTIONS} more" if len(options) > _MAX_OPTIONS else ""
                text += ", options: " + " | ".join(shown) + more
        if flags:
            text += ", " + ", ".join(flags)
        # Its row: the enclosing row, list item or card, else (an unlabelled icon) the element it is inside.
        row = self.rows[-1] if self.rows else sanitize_text(within, self.name_chars) if not label else ""
        line = Line(
            text=text, frame=frame, bid=bid, role=shown_role, label=label, key=f"{shown_role}:{label}:{bid}",
            value=value, flags=tuple(flags), offscreen=offscreen, hint=hint, row=row,
            form=self.forms[-1] if self.forms else "", multiline=props.get("multiline") in (True, "true"),
            field_key=field_key,
        )  # fmt: skip
        self.lines.append(line)
        return label_source

    # --- after the walk --------------------------------------------------------------------------
    def join_spelled(self) -> None:
        """Join runs of one-character text lines into one word: a page that draws a word a letter at a
        time (each letter its own box, as a captcha or an animated headline does) otherwise shows one
        letter a line, and the field below took the last letter as its label. Why: measured on
        text-transform, the model saw ``L``, ``O``, ``4`` and a field labelled 'e', and typed 'e'. A
        letter in a table cell stays alone: a column of grades (A, B, A) is three values, not a word."""
        out: list[Line] = []
        run: list[Line] = []

        def flush() -> None:
            if len(run) >= 2:
                word = "".join(line.text for line in run)
                out.append(Line(
                    text=word, frame=run[0].frame, key=f"text:{word}", offscreen=any(ln.offscreen for ln in run),
                    is_text=True, spelled=True,
                ))  # fmt: skip
            else:
                out.extend(run)
            run.clear()

        for line in self.lines:
            single = line.is_text and len(line.text) == 1 and not line.text.isspace() and not line.in_cell
            if single and (not run or run[-1].frame == line.frame):
                run.append(line)
                continue
            flush()
            if single:
                run.append(line)
            else:
                out.append(line)
        flush()
        self.lines = out

    def join_table_rows(self) -> None:
        """Join the text cells of one table row into one line, ``Sunday | 11:00 | 16:00``: a table printed
        a cell a line loses which value belongs to which row. Why: measured on a library's hours page
        (scripts/bench_live.py), shown ``Sunday``, ``11:00``, ``16:00`` on lines of their own among the
        other days, the 1.5B model reported the opening time not given. Only runs of text lines are
        joined: a cell holding a field or a link keeps its line, so a form laid out in a table keeps
        its labels next to its fields."""
        out: list[Line] = []
        for line in self.lines:
            last = out[-1] if out else None
            if (
                last is not None and line.is_text and last.is_text and line.table_row >= 0
                and line.table_row == last.table_row and line.frame == last.frame
            ):  # fmt: skip
                text = f"{last.text} | {line.text}"
                out[-1] = Line(
                    text=text, frame=line.frame, key=f"text:{text}", offscreen=last.offscreen and line.offscreen,
                    is_text=True, in_cell=True, table_row=line.table_row,
                )  # fmt: skip
                continue
            out.append(line)
        self.lines = out

    def show_slider_values(self) -> None:
        """A slider without a value of its own takes the number printed just after it as its value (a
        script slider shows its value in a box beside it): `[16] slider value='-91'`, not a stray `-91`
        that the next field would take as its label."""
        drop: set[int] = set()
        for i, line in enumerate(self.lines[:-1]):
            after = self.lines[i + 1]
            if line.role == "slider" and line.value is None and after.is_text and _NUMBER.fullmatch(after.text):
                line.value = after.text
                line.text += f" value='{after.text}'"
                drop.add(i + 1)
        self.lines = [line for k, line in enumerate(self.lines) if k not in drop]

    def attach_labels(self) -> None:
        """Give unnamed inputs the short text printed just before (fields) or after (checkboxes) them."""
        drop: set[int] = set()
        for i, line in enumerate(self.lines):
            if line.bid is None:
                continue
            if line.label:  # a <label> printed just before or after its own field says nothing new
                for j in (i - 1, i + 1):
                    near = self.lines[j] if 0 <= j < len(self.lines) else None
                    if (
                        near is not None
                        and near.is_text
                        and near.text == line.label
                        and near.frame == line.frame
                    ):
                        drop.add(j)
                continue
            j = i - 1 if line.role in LABEL_BEFORE_ROLES else i + 1 if line.role in LABEL_AFTER_ROLES else -1
            if 0 <= j < len(self.lines) and j not in drop:
                other = self.lines[j]
                if (
                    other.is_text
                    and not other.spelled
                    and other.frame == line.frame
                    and len(other.text) <= 60
                    and " '" not in other.text
                ):
                    line.label = other.text
                    head = f"[{line.bid}] {line.role}"
                    rest = line.text[len(head) :].removeprefix(line.hint)  # the label says more than id/class
                    line.text = f"{head} '{other.text}'" + rest
                    line.key = f"{line.role}:{line.label}:{line.bid}"
                    drop.add(j)
        self.lines = [line for k, line in enumerate(self.lines) if k not in drop]


def _fit_budget(lines: list[Line], token_budget: int) -> tuple[list[Line], int]:
    """Drop lines until the text fits: off-screen text, off-screen elements, on-screen text, then the tail."""
    total = sum(len(line.text) + 1 for line in lines)
    limit = int(token_budget * CHARS_PER_TOKEN) if token_budget > 0 else 0
    if not limit or total <= limit:
        return lines, 0
    keep = [True] * len(lines)
    tiers = (
        lambda ln: ln.offscreen and ln.is_text,
        lambda ln: ln.offscreen,
        lambda ln: ln.is_text,
        lambda ln: True,
    )
    for tier in tiers:
        for i in range(len(lines) - 1, -1, -1):
            if total <= limit:
                break
            if keep[i] and tier(lines[i]):
                keep[i] = False
                total -= len(lines[i].text) + 1
    kept = [line for line, k in zip(lines, keep, strict=True) if k]
    return kept, len(lines) - len(kept)


def build_observation(
    axtree: dict[str, Any],
    extra_properties: dict[str, Any] | None = None,
    *,
    dom: PageDom | None = None,
    focused_bid: str = "",
    token_budget: int = 2000,
    name_chars: int = 100,
    text_ids: bool = False,
    prune: bool = True,
) -> Observation:
    """Prune BrowserGym's AXTree to lines a model can act on, sanitized and within `token_budget` tokens.
    `dom` is the page's DOM snapshot, decoded once (`awm.webarena.dom.parse_dom`): the words for
    unnamed elements and SVG figures come from it. With `text_ids` (the goal asks to highlight text) each
    block of text is a line with its id. `prune` leaves out the words of a page's footer
    (`BOILERPLATE_ROLES`)."""
    figures = describe(svg_figures(dom))
    builder = _Builder(
        axtree,
        extra_properties or {},
        dom_hints(dom),
        name_chars,
        field_keys(dom),
        figures,
        text_ids=text_ids,
        prune=prune,
    )
    if builder.nodes:
        builder.walk(builder.nodes[0], "", False, False, "")
    builder.join_spelled()
    builder.join_table_rows()
    builder.show_slider_values()
    builder.attach_labels()
    lines = builder.lines
    # A focused element is marked even when the tree did not flag it (e.g. inside an iframe).
    for line in lines:
        if focused_bid and line.bid == focused_bid and "focused" not in line.flags:
            line.flags = (*line.flags, "focused")
            line.text += ", focused"
    kept, omitted = _fit_budget(lines, token_budget)
    body = [line.text for line in kept]
    if omitted:
        body.append(
            f"(… {omitted} more lines not shown: off-screen or over the size budget; scroll to see them)"
        )
    text = "\n".join(body)
    ids = [line.bid for line in kept if line.bid]
    elements = {line.bid: TargetDesc(role=line.role, label=line.label, row=line.row) for line in lines if line.bid}
    return Observation(
        text=text, ids=ids, elements=elements, lines=lines, focused_bid=focused_bid or "",
        omitted=omitted, tokens=estimate_tokens(text), dialogs=builder.dialogs,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The page as HTML (recorded per step for offline data: `awm traces export --mind2web`)
# --------------------------------------------------------------------------------------------------

BID_ATTRIBUTE = "bid"  # BrowserGym's element id (browsergym.core.constants.BROWSERGYM_ID_ATTRIBUTE)
_BROWSERGYM_ATTRS = "browsergym_"  # its scratch attributes (visibility ratio, set-of-marks flag)
_DROPPED_TAGS = frozenset({"script", "style", "noscript", "template"})
_VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())  # noqa: SIM905
_ATTR_NAME = re.compile(r"[^\s\"'<>/=]+")


def _box(bbox: Any) -> str:
    """BrowserGym's [x, y, width, height] as Mind2Web's ``bounding_box_rect`` text ("120,340.5,210,38")."""
    return ",".join(str(int(v)) if float(v).is_integer() else str(round(float(v), 3)) for v in bbox)


def _open_tag(doc: DomDocument, i: int, extra: dict[str, Any]) -> str | None:
    """``<tag attr="...">`` of element `i` (see `page_html`); None for an element left out."""
    tag = doc.tags[i]
    if tag in _DROPPED_TAGS or not _ATTR_NAME.fullmatch(tag) or tag.startswith(":"):
        return None  # also pseudo-elements ("::before")
    attrs: dict[str, str | None] = {
        name: value
        for name, value in doc.attributes[i].items()
        if not name.startswith(_BROWSERGYM_ATTRS) and _ATTR_NAME.fullmatch(name)
    }
    if i in doc.input_values:
        attrs["input_value"] = doc.input_values[i]
    if i in doc.checked:
        attrs["input_checked"] = "true"
    if i in doc.selected:
        attrs["option_selected"] = "true"
    bid = attrs.get(BID_ATTRIBUTE)
    props = extra.get(bid) if bid else None
    if props:
        bbox = props.get("bbox")
        if bbox is not None and len(bbox) >= 4:
            attrs["bounding_box_rect"] = _box(bbox[:4])
        if props.get("clickable"):
            attrs["is_clickable"] = "true"
    shown = "".join(
        f" {name}" if value is None else f' {name}="{html.escape(value, quote=True)}"'
        for name, value in attrs.items()
    )
    return f"<{tag}{shown}>"


def page_html(dom: PageDom | None, extra_properties: dict[str, Any] | None = None) -> str:
    """The page of a DOM snapshot (BrowserGym's ``dom_object``, decoded by `awm.webarena.dom.parse_dom`)
    as one HTML string, iframes inlined.

    Every element keeps its own attributes, BrowserGym's ``bid`` included (the id actions name); its
    scratch attributes are left out, and so are scripts, styles, comments and pseudo-elements. The
    snapshot's live state is added under the names Mind2Web uses (its pages came from the same CDP
    call): ``input_value``, ``input_checked``, ``option_selected``; and per element with a bid, from
    BrowserGym's extra properties, ``bounding_box_rect`` ("x,y,width,height", rendered elements only)
    and ``is_clickable``. Text and attribute values are escaped. Why not BrowserGym's
    `flatten_dom_to_str`: it writes values unescaped (a quote in a value breaks the tag), drops the
    input state, and pretty-prints through BeautifulSoup, which changes the text and costs more than
    the walk. Iterative, so a deep page cannot exhaust the recursion limit. '' without a snapshot.
    """
    if dom is None or not dom.documents[0].tags:
        return ""
    documents = dom.documents
    extra = extra_properties or {}
    out: list[str] = []
    stack: list[tuple[int, int] | str] = [(0, 0)]  # (document, node) to write, or a closing tag
    inlined: set[int] = {0}
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        d, i = item
        doc = documents[d]
        kind = doc.types[i]
        if kind in (3, 4):  # text, CDATA
            if doc.texts[i]:
                out.append(html.escape(doc.texts[i], quote=False))
            continue
        closing: list[str] = []
        if kind == 1:
            tag = _open_tag(doc, i, extra)
            if tag is None:
                continue
            out.append(tag)
            name = tag[1:].split(" ", 1)[0].rstrip(">")
            if name in _VOID_TAGS:
                continue
            closing.append(f"</{name}>")
        elif kind not in (9, 11):  # a document or shadow root shows its children; comments, doctypes: nothing
            continue
        content: list[tuple[int, int]] = []
        sub = doc.frames.get(i)  # an iframe shows its document first
        if sub is not None and sub not in inlined and 0 <= sub < len(documents):
            inlined.add(sub)
            content.append((sub, 0))
        content.extend((d, child) for child in doc.children[i])
        stack.extend(closing)
        stack.extend(reversed(content))
    return "".join(out)


__all__ = [
    "Line", "Observation", "build_observation", "dom_hints", "estimate_tokens", "field_keys", "page_html",
    "quote",
]  # fmt: skip
