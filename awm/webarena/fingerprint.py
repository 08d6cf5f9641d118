"""Page fingerprints and the plain-language difference between two of them: the feedback after each action.

A fingerprint covers the URL, the structure of the main frame and of each iframe, the focused element and
every form control's state. Why both a digest and a diff: the digest is the loop detector's key (same page,
same action, again), the diff tells the model precisely what its action did ("the value of [12] textbox
'Username' is now 'bob'") or that it did nothing, which small models need to stop repeating themselves.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, Field

from awm.webarena.observation import Line, Observation

NO_CHANGE = "no detectable change"


def shows_masked(shown: str, value: str) -> bool:
    """Whether a field's shown value is `value` as Chromium shows a password field: one bullet per
    character (the accessibility tree never holds a password's text)."""
    return bool(shown) and set(shown) == {"•"} and len(shown) == len(value)


class ControlState(BaseModel):
    """The user-visible state of one element: what it is, its value and its flags."""

    role: str
    label: str = ""
    value: str | None = None
    flags: list[str] = Field(default_factory=list)

    def describe(self, bid: str) -> str:
        return f"[{bid}] {self.role}" + (f" '{self.label}'" if self.label else "")


class PageSnapshot(BaseModel):
    """Everything the fingerprint hashes, kept so two snapshots can be compared line by line."""

    url: str = ""
    frames: dict[str, list[str]] = Field(
        default_factory=dict
    )  # frame bid ("" = main) -> state-free line keys
    controls: dict[str, ControlState] = Field(default_factory=dict)
    focused: str = ""
    dialogs: list[str] = Field(default_factory=list)
    shown: dict[str, str] = Field(default_factory=dict)  # line key -> line text, to name what appeared

    def digest(self) -> str:
        """Short stable hash of the whole snapshot (the page half of the loop detector's key)."""
        payload = self.model_dump(mode="json", exclude={"shown"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _line_key(line: Line) -> str:
    return line.key or line.text


def snapshot_page(url: str, observation: Observation) -> PageSnapshot:
    """Fingerprint inputs from a built observation (all lines, before the size budget cut)."""
    frames: dict[str, list[str]] = {}
    controls: dict[str, ControlState] = {}
    shown: dict[str, str] = {}
    for line in observation.lines:
        key = _line_key(line)
        frames.setdefault(line.frame, []).append(key)
        shown.setdefault(key, line.text)
        if line.bid:
            flags = [f for f in line.flags if f != "focused"]
            controls[line.bid] = ControlState(role=line.role, label=line.label, value=line.value, flags=flags)
    return PageSnapshot(
        url=url, frames=frames, controls=controls, focused=observation.focused_bid,
        dialogs=list(observation.dialogs), shown=shown,
    )  # fmt: skip


def _frame_name(frame: str) -> str:
    return "the main frame" if not frame else f"iframe [{frame}]"


def _list(items: list[str], limit: int) -> str:
    head = ", ".join(items[:limit])
    return head + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _flag_change(name: str, gained: bool) -> str:
    opposites = {"checked": "unchecked", "selected": "not selected", "pressed": "not pressed",
                 "disabled": "enabled", "expanded": "collapsed", "collapsed": "expanded"}  # fmt: skip
    return name if gained else opposites.get(name, f"no longer {name}")


def describe_changes(before: PageSnapshot, after: PageSnapshot, max_items: int = 4) -> list[str]:
    """What changed between two snapshots, most telling first; `[NO_CHANGE]` when nothing did."""
    changes: list[str] = []
    if before.url != after.url:
        changes.append(f"URL changed to {after.url}")
    for dialog in after.dialogs:
        if dialog not in before.dialogs:
            changes.append(f"a new dialog appeared: '{dialog}'" if dialog else "a new dialog appeared")
    for dialog in before.dialogs:
        if dialog not in after.dialogs:
            changes.append(f"the dialog '{dialog}' closed" if dialog else "a dialog closed")
    for bid, state in after.controls.items():
        old = before.controls.get(bid)
        if old is None or (old.role, old.label) != (state.role, state.label):
            continue  # a new or different element; reported with the structure below
        if old.value != state.value:
            shown = f"'{state.value}'" if state.value is not None else "empty"
            changes.append(f"the value of {state.describe(bid)} is now {shown}")
        for flag in sorted(set(state.flags) - set(old.flags)):
            changes.append(f"{state.describe(bid)} is now {_flag_change(flag, True)}")
        for flag in sorted(set(old.flags) - set(state.flags)):
            if flag in ("expanded", "collapsed"):
                continue  # the opposite flag was just reported as gained
            changes.append(f"{state.describe(bid)} is now {_flag_change(flag, False)}")
    if before.focused != after.focused and after.focused:
        target = after.controls.get(after.focused)
        changes.append(
            f"focus moved to {target.describe(after.focused) if target else '[' + after.focused + ']'}"
        )
    for frame in sorted(set(before.frames) | set(after.frames)):
        old_keys, new_keys = before.frames.get(frame, []), after.frames.get(frame, [])
        if frame not in before.frames:
            changes.append(f"a new {_frame_name(frame)} appeared")
            continue
        if frame not in after.frames:
            changes.append(f"{_frame_name(frame)} disappeared")
            continue
        if old_keys == new_keys:
            continue
        old_set, new_set = set(old_keys), set(new_keys)
        added = [after.shown.get(k, k) for k in new_keys if k not in old_set]
        removed = [k for k in old_keys if k not in new_set]
        where = _frame_name(frame)
        if added:
            changes.append(f"new in {where}: {_list(added, max_items)}")
        if removed:
            changes.append(f"{len(removed)} line(s) disappeared from {where}")
        if not added and not removed:
            changes.append(f"the content of {where} was rearranged")
    return changes or [NO_CHANGE]


def new_text(before: PageSnapshot, after: PageSnapshot, limit: int = 2) -> list[str]:
    """The first `limit` lines of text (not controls) that appeared in the main frame: what the page said."""
    old = set(before.frames.get("", []))
    added = [after.shown.get(k, k) for k in after.frames.get("", []) if k not in old]
    return [text for text in added if not text.startswith("[")][:limit]


def render_changes(changes: list[str]) -> str:
    """One feedback paragraph from `describe_changes` output."""
    return "; ".join(changes) + "."
