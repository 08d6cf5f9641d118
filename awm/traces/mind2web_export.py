"""A run's episodes as Mind2Web task records (`awm traces export RUN --mind2web DIR`).

Why: a successful `awm run` episode is an annotated demonstration, on MiniWoB++ or a live page, and
Mind2Web's native schema is what offline induction (`awm.pipeline.mind2web_memory`), the element-choice
solver and the scorer (`awm.mind2web`) already read. Written in that schema (`awm.mind2web.schema`),
the loader (`data.iter_records`) and the scorer (`metrics.score`) run on it unchanged.

One record per episode; per step that acted on an element (``outcome == "ok"``):

- ``cleaned_html``: the page the step decided on (`RUN/pages/<episode>/<index>.html`, written by the
  recorder), cleaned the Mind2Web way: no head, scripts or styles, no element the browser did not
  render, and only Mind2Web's salient attributes (``aria-label`` spelled ``aria_label``, as in the
  dataset); ``raw_html`` is the whole page;
- ids: **the BrowserGym bid is the ``backend_node_id``** (the id the agent's action named), so the acted
  element is the positive candidate and a prediction names an element as the agent did;
- ``pos_candidates``: the acted element; ``neg_candidates``: up to `max_negatives` other rendered,
  actionable elements (links, buttons, fields, elements with a click handler), a sample fixed by the
  step's id; a candidate's ``attributes`` is a JSON object in a string, as in the dataset;
- ``operation``: click, double-click, check and uncheck are CLICK, hover is CLICK (``original_op``
  HOVER), pressing Enter is CLICK (ENTER), fill is TYPE, select_option is SELECT, with the value;
  actions on no element (scroll, goto, the final answer) and other key presses have no Mind2Web form
  and are left out;
- ``action_reprs``: ``[role]  label -> OP`` (``-> TYPE: value``), from the element the agent saw.

The task: ``confirmed_task`` is the goal, ``website`` the scope's site (the MiniWoB task name, a live
page's registrable domain), ``domain`` the benchmark, ``subdomain`` empty. Ids are UUIDs (as in the
dataset), derived from the run id, the episode id and the step index, so exporting again gives the same
ids and a predictions file stays valid; `DIR/awm_export.json` maps them back to episodes and steps.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from awm.errors import DataError
from awm.evaluation.success import is_success
from awm.files import write_text_atomic
from awm.mind2web.data import SPLITS
from awm.mind2web.schema import TaskRecord
from awm.trajectory import Step, Trajectory
from awm.webarena.observation import BID_ATTRIBUTE, INTERACTIVE_ROLES

from . import PAGES_DIR, open_run, page_relpath

ID_ATTRIBUTE = "backend_node_id"
DEFAULT_MAX_NEGATIVES = 50
MANIFEST_NAME = "awm_export.json"
_NAMESPACE = uuid.UUID("6f1c3c9e-2b7a-4d3e-9a51-8c0d6e4b2f17")  # the export's own uuid5 namespace

# browser action -> (op, original_op); `press` counts only with Enter (Mind2Web's ENTER)
OPERATIONS = {
    "click": ("CLICK", "CLICK"),
    "dblclick": ("CLICK", "CLICK"),
    "check": ("CLICK", "CLICK"),
    "uncheck": ("CLICK", "CLICK"),
    "hover": ("CLICK", "HOVER"),
    "press": ("CLICK", "ENTER"),
    "fill": ("TYPE", "TYPE"),
    "select_option": ("SELECT", "SELECT"),
}
# Mind2Web's salient attributes (MindAct's cleaning keeps these and the id), in its underscore spelling.
SALIENT_ATTRIBUTES = frozenset(
    {"alt", "aria_description", "aria_label", "aria_role", "input_checked", "input_value", "label", "name",
     "option_selected", "placeholder", "role", "text_value", "title", "type", "value"}
)  # fmt: skip
# Snapshot attributes that are not the page's own (`observation.page_html` adds them).
_SNAPSHOT_ONLY = frozenset({BID_ATTRIBUTE, "bounding_box_rect", "is_clickable"})
_CLEANED_DROPS = frozenset({"head", "script", "style", "noscript", "template", "meta", "link", "title"})
_ACTIONABLE_TAGS = frozenset({"a", "button", "input", "select", "textarea", "summary"})
_ALWAYS_SHOWN = frozenset({"option", "optgroup"})  # a closed select's options have no box of their own
_VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())  # noqa: SIM905
_LABEL_CHARS = 80
_TAG_ROLES = {"a": "link", "select": "combobox", "textarea": "textbox", "img": "img", "svg": "img"}
_INPUT_ROLES = {"checkbox": "checkbox", "radio": "radio", "submit": "button", "button": "button"}


# --------------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Element:
    tag: str
    attrs: list[tuple[str, str | None]]
    parent: _Element | None = None
    children: list[_Element | str] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.attrs if k == name), None)

    @property
    def bid(self) -> str | None:
        return self.get(BID_ATTRIBUTE)

    @property
    def rendered(self) -> bool:
        """Whether the browser drew it: it has a box (elements without a bid are taken as drawn)."""
        return self.bid is None or self.get("bounding_box_rect") is not None

    def text(self, limit: int = 10_000) -> str:
        parts: list[str] = []
        stack: list[_Element | str] = [self]
        size = 0
        while stack and size < limit:
            item = stack.pop()
            if isinstance(item, str):
                words = " ".join(item.split())
                if words:
                    parts.append(words)
                    size += len(words) + 1
            else:
                stack.extend(reversed(item.children))
        return " ".join(parts)[:limit]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Element("#root", [])
        self.stack = [self.root]
        self.by_bid: dict[str, _Element] = {}
        self.order: list[_Element] = []  # elements with a bid, in document order

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = _Element(tag, attrs, parent=self.stack[-1])
        self.stack[-1].children.append(element)
        bid = element.bid
        if bid and bid not in self.by_bid:
            self.by_bid[bid] = element
            self.order.append(element)
        if tag not in _VOID_TAGS:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):  # an unmatched end tag is ignored
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def _parse(html: str) -> _Parser:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser


def _m2w_name(name: str) -> str:
    """An attribute name as Mind2Web spells it: ``aria-label`` -> ``aria_label``."""
    return name.replace("-", "_")


def _attr_text(name: str, value: str | None) -> str:
    return f" {name}" if value is None else f' {name}="{escape(value, quote=True)}"'


def _render(root: _Element, *, cleaned: bool, keep: set[int]) -> str:
    """The tree as HTML, bids written as ``backend_node_id``: the whole page (raw) or the cleaned one.

    Cleaned: no head, scripts or styles, no element that was not drawn (unless it is or holds the acted
    element, `keep`), salient attributes only, whitespace collapsed. Iterative (deep pages)."""
    out: list[str] = []
    stack: list[_Element | str | tuple[str]] = list(reversed(root.children))  # (tag,): its end tag
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            out.append(f"</{item[0]}>")
            continue
        if isinstance(item, str):
            text = " ".join(item.split()) if cleaned else item
            if text:
                out.append(escape(text, quote=False))
            continue
        if cleaned and id(item) not in keep:
            if item.tag in _CLEANED_DROPS:
                continue
            if not item.rendered and item.tag not in _ALWAYS_SHOWN:
                continue
        bid = item.bid
        attrs = f' {ID_ATTRIBUTE}="{escape(bid, quote=True)}"' if bid is not None else ""
        for name, value in item.attrs:
            if name == BID_ATTRIBUTE:
                continue
            if cleaned:
                name = _m2w_name(name)
                if name not in SALIENT_ATTRIBUTES or not value:
                    continue
            attrs += _attr_text(name, value)
        out.append(f"<{item.tag}{attrs}>")
        if item.tag in _VOID_TAGS:
            continue
        stack.append((item.tag,))
        stack.extend(reversed(item.children))
    return "".join(out)


def _candidate(element: _Element, *, target: bool) -> dict[str, Any]:
    """A candidate as the dataset has it: tag, attributes as a JSON string, the id, the target flags."""
    bid = element.bid or ""
    attributes: dict[str, str] = {ID_ATTRIBUTE: bid}
    box = element.get("bounding_box_rect")
    if box is not None:
        attributes["bounding_box_rect"] = box
    for name, value in element.attrs:
        if name not in _SNAPSHOT_ONLY:
            attributes.setdefault(_m2w_name(name), value or "")
    return {
        "tag": element.tag,
        "attributes": json.dumps(attributes),
        ID_ATTRIBUTE: bid,
        "is_original_target": target,
        "is_top_level_target": target,
    }


def _actionable(element: _Element) -> bool:
    if not element.rendered or element.bid is None:
        return False
    box = element.get("bounding_box_rect") or ""
    sizes = box.split(",")
    if len(sizes) == 4 and any(part.strip() in ("0", "-0") for part in sizes[2:]):
        return False  # drawn with no area
    role = element.get("role") or ""
    return (
        element.tag in _ACTIONABLE_TAGS or role in INTERACTIVE_ROLES or element.get("is_clickable") == "true"
    )


def _role_of(element: _Element | None) -> str:
    if element is None:
        return ""
    if element.get("role"):
        return element.get("role") or ""
    if element.tag == "input":
        return _INPUT_ROLES.get((element.get("type") or "text").lower(), "textbox")
    return _TAG_ROLES.get(element.tag, element.tag)


def _shown_as(step: Step, target: _Element | None) -> tuple[str, str]:
    """(role, label) of the acted element: as the agent saw it (`Step.target`), else from the page."""
    shown = step.target
    role = shown.role if shown is not None and shown.role not in ("", "clickable") else ""
    label = shown.label if shown is not None else ""
    if not label and target is not None:
        label = target.text(_LABEL_CHARS)
    return role or _role_of(target) or "element", " ".join(label.split())


# --------------------------------------------------------------------------------------------------
# Steps and episodes (pure)
# --------------------------------------------------------------------------------------------------


def step_operation(step: Step) -> tuple[str, str, str, str] | None:
    """(op, original_op, value, bid) of a step that acted on an element, in Mind2Web's terms; None for
    a step Mind2Web has no form for (failed, no element, a key other than Enter)."""
    action = step.action or {}
    args = action.get("args") or {}
    spec = OPERATIONS.get(str(action.get("name", "")))
    bid = args.get("bid")
    if step.outcome != "ok" or spec is None or bid in (None, ""):
        return None
    op, original = spec
    if action.get("name") == "press" and str(args.get("key_comb", "")).strip().lower() != "enter":
        return None
    value = ""
    if op == "TYPE":
        value = str(args.get("value", ""))
    elif op == "SELECT":
        options = args.get("options", "")
        value = ", ".join(str(o) for o in options) if isinstance(options, list) else str(options)
    return op, original, value, str(bid)


def action_repr(role: str, label: str, op: str, value: str) -> str:
    """Mind2Web's readable action: ``[button]  Search -> CLICK``, ``[textbox]  From -> TYPE: Boston``."""
    head = f"[{role}]  {label} -> {op}"
    return f"{head}: {value}" if op in ("TYPE", "SELECT") else head


def record_ids(run_id: str, episode_id: str, indexes: list[int]) -> tuple[str, list[str]]:
    """The record's annotation_id and its steps' action_uids: UUIDs fixed by run, episode and step."""
    annotation = uuid.uuid5(_NAMESPACE, f"{run_id}/{episode_id}")
    return str(annotation), [str(uuid.uuid5(annotation, str(i))) for i in indexes]


def site_of(trajectory: Trajectory) -> tuple[str, str, str]:
    """(website, domain, subdomain): the scope's site (`miniwob/login-user` -> login-user, `live/x.org`
    -> x.org), the benchmark, and no subdomain."""
    task = trajectory.task
    _, _, site = task.scope.partition("/")
    return site or task.task_id.removeprefix("browsergym/"), task.benchmark, ""


def exported_steps(trajectory: Trajectory) -> list[Step]:
    """The steps that become Mind2Web actions, in order (`step_operation` is not None)."""
    return [step for step in trajectory.steps if step_operation(step) is not None]


def episode_record(
    trajectory: Trajectory,
    pages: Mapping[int, str],
    *,
    run_id: str,
    max_negatives: int = DEFAULT_MAX_NEGATIVES,
) -> dict[str, Any] | None:
    """One episode as a Mind2Web task record (a plain dict in the dataset's field order), from its
    trajectory and the HTML of the pages its steps decided on (`pages`: step index -> HTML, as the
    recorder wrote it). None when no step acted on an element; `DataError` naming the episode and step
    when such a step has no page.
    """
    steps = exported_steps(trajectory)
    if not steps:
        return None
    annotation_id, uids = record_ids(run_id, trajectory.trajectory_id, [s.index for s in steps])
    actions: list[dict[str, Any]] = []
    reprs: list[str] = []
    for step, uid in zip(steps, uids, strict=True):
        op, original, value, bid = step_operation(step)  # type: ignore[misc]  # not None: exported_steps
        html = pages.get(step.index)
        if html is None:
            raise DataError(
                f"episode {trajectory.trajectory_id}, step {step.index} ({step.action_str}): no page snapshot"
                f" ({page_relpath(trajectory.trajectory_id, step.index)})"
            )
        page = _parse(html)
        target = page.by_bid.get(bid)
        keep: set[int] = set()
        node = target
        while node is not None:
            keep.add(id(node))
            node = node.parent
        others = [e for e in page.order if e is not target and _actionable(e)]
        if len(others) > max_negatives:
            picked = set(random.Random(f"{annotation_id}/{uid}").sample(range(len(others)), max_negatives))
            others = [e for i, e in enumerate(others) if i in picked]
        actions.append(
            {
                "action_uid": uid,
                "raw_html": _render(page.root, cleaned=False, keep=keep),
                "cleaned_html": _render(page.root, cleaned=True, keep=keep),
                "operation": {"original_op": original, "value": value, "op": op},
                "pos_candidates": [_candidate(target, target=True)] if target is not None else [],
                "neg_candidates": [_candidate(e, target=False) for e in others],
            }
        )
        reprs.append(action_repr(*_shown_as(step, target), original, value))
    website, domain, subdomain = site_of(trajectory)
    return {
        "annotation_id": annotation_id,
        "confirmed_task": trajectory.task.goal,
        "website": website,
        "domain": domain,
        "subdomain": subdomain,
        "action_reprs": reprs,
        "actions": actions,
    }


# --------------------------------------------------------------------------------------------------
# A run folder
# --------------------------------------------------------------------------------------------------


class ExportedRecord(BaseModel):
    """Where one record came from: its episode, and which trajectory step each action_uid is."""

    annotation_id: str
    episode_id: str
    task_key: str
    steps: dict[str, int]


class ExportReport(BaseModel):
    """What an export wrote (`DIR/awm_export.json`) and which episodes it left out, and why."""

    run_dir: str
    run_id: str
    split: str
    file: str
    records: list[ExportedRecord] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)  # episode id -> reason

    @property
    def n_steps(self) -> int:
        return sum(len(r.steps) for r in self.records)


def _read_pages(run_dir: Path, trajectory: Trajectory) -> dict[int, str]:
    pages: dict[int, str] = {}
    for step in trajectory.steps:
        path = run_dir / page_relpath(trajectory.trajectory_id, step.index)
        if path.is_file():
            pages[step.index] = path.read_text(encoding="utf-8")
    return pages


def export_run(
    run_dir: Path,
    out_dir: Path,
    *,
    split: str = "train",
    include_failed: bool = False,
    max_negatives: int = DEFAULT_MAX_NEGATIVES,
) -> ExportReport:
    """Write the run's episodes as `out_dir/<split>/<split>_0.json` (one Mind2Web record each) and
    `out_dir/awm_export.json`; successful episodes only unless `include_failed`.

    Everything is checked before anything is written: a run without page snapshots (recorded before
    they existed, or with ``[browser] pages = false``), a split folder holding other files, or no
    episode to export is a `DataError` and leaves `out_dir` as it was.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if split not in SPLITS:
        raise DataError(f"--split must be one of {', '.join(SPLITS)} (got {split!r})")
    if max_negatives < 0:
        raise DataError(f"--negatives must be 0 or more (got {max_negatives})")
    with open_run(run_dir) as db:
        run_id = db.run().id
        episodes = db.episodes()
        pages_dir = run_dir / PAGES_DIR
        if not pages_dir.is_dir() or not any(pages_dir.glob("*/*.html")):
            raise DataError(
                f"{run_dir}: no page snapshots to export: expected {pages_dir}/<episode>/<step>.html, the "
                "page each step decided on; this run was recorded without them (before `awm run` saved "
                "them, or with [browser] pages = false), so run it again to export it to Mind2Web"
            )
        trajectories = [(e, db.trajectory(e.id)) for e in episodes]
    target = out_dir / split / f"{split}_0.json"
    if (out_dir / split).is_dir():
        others = sorted(p.name for p in (out_dir / split).glob("*.json") if p != target)
        if others:
            raise DataError(
                f"{out_dir / split} already holds {', '.join(others[:5])}; the loader would read them with"
                " this export: choose another folder or remove them"
            )
    report = ExportReport(run_dir=str(run_dir), run_id=run_id, split=split, file=str(target))
    records: list[dict[str, Any]] = []
    for episode, trajectory in trajectories:
        if episode.status != "ended":
            report.skipped[episode.id] = "the episode never ended"
            continue
        if not include_failed and not is_success(trajectory):
            report.skipped[episode.id] = (
                f"not a success (ended {trajectory.end}, reward {trajectory.verdict.reward})"
            )
            continue
        try:
            record = episode_record(
                trajectory, _read_pages(run_dir, trajectory), run_id=run_id, max_negatives=max_negatives
            )
        except DataError as exc:
            report.skipped[episode.id] = str(exc)
            continue
        if record is None:
            report.skipped[episode.id] = "no step acted on an element"
            continue
        TaskRecord.model_validate(record)  # what the loader checks, before writing (failing here is a bug)
        uids = [a["action_uid"] for a in record["actions"]]
        indexes = [s.index for s in exported_steps(trajectory)]
        report.records.append(
            ExportedRecord(
                annotation_id=record["annotation_id"],
                episode_id=episode.id,
                task_key=episode.task_key,
                steps=dict(zip(uids, indexes, strict=True)),
            )
        )
        records.append(record)
    if not records:
        why = "; ".join(f"{k}: {v}" for k, v in list(report.skipped.items())[:5]) or "the run has no episodes"
        more = " (--include-failed exports unsuccessful episodes too)" if not include_failed else ""
        raise DataError(f"{run_dir}: no episode to export{more}: {why}")
    write_text_atomic(target, json.dumps(records, ensure_ascii=False))
    write_text_atomic(out_dir / MANIFEST_NAME, report.model_dump_json(indent=2))
    return report
