"""Typed Mind2Web records, in the dataset's native schema (osunlp/Mind2Web, `train/train_*.json`).

Why models and not dicts: every consumer (ranking, pruning, prompting, scoring) reads the same fields, and a
malformed record must fail once, at load time, with the file, record and field named (see `data.py`), not
deep inside a prompt builder as a `KeyError`.

Native quirks handled here:
- a candidate's ``attributes`` is a JSON *string* (``"{\\"backend_node_id\\": \\"136\\", ...}"``); it is
  parsed with `json.loads` into a ``dict[str, str]`` (scalar values become strings);
- ``operation.op`` is CLICK, TYPE or SELECT; ``original_op`` may also be HOVER or ENTER, which AWM and
  MindAct score as CLICK. Should ``op`` itself hold HOVER or ENTER, it is normalised to CLICK and the
  original kept in ``original_op``;
- ids are strings in the data; an integer id is accepted and turned into its string.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator
from pydantic_core import from_json

SCORED_OPS = ("CLICK", "TYPE", "SELECT")
CLICK_LIKE_OPS = ("HOVER", "ENTER")


def _as_id(value: Any) -> Any:
    """Ids are strings in the data; accept a non-negative int as its decimal string (never a bool)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class Candidate(BaseModel):
    """One element of the page that MindAct's ranker scored: a positive (the target) or a negative.

    ``score`` and ``rank`` exist only in MindAct's scored dumps (ranker output merged into the records);
    they are None in the raw dataset, where the scores come as a separate file (`ranking.py`).
    """

    model_config = ConfigDict(extra="ignore")

    tag: str
    attributes: dict[str, str]
    backend_node_id: str
    is_original_target: bool = False
    is_top_level_target: bool = False
    score: float | None = None
    rank: int | None = None

    @field_validator("backend_node_id", mode="before")
    @classmethod
    def _id_to_str(cls, value: Any) -> Any:
        return _as_id(value)

    @field_validator("attributes", mode="before")
    @classmethod
    def _parse_attributes(cls, value: Any) -> Any:
        """The native value is a JSON object serialised into a string; parse it (never eval)."""
        if isinstance(value, str):
            try:
                value = from_json(value)  # the Rust parser: ~2x json.loads, and there is one per candidate
            except ValueError as exc:
                raise ValueError(f"expected a JSON object in a string; {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object of attributes; got {type(value).__name__}")
        if all(type(item) is str for item in value.values()):
            return value
        out: dict[str, str] = {}
        for key, item in value.items():
            if isinstance(item, str):
                out[str(key)] = item
            elif item is None or isinstance(item, bool | int | float):
                out[str(key)] = "" if item is None else json.dumps(item)
            else:
                raise ValueError(f"attribute {key!r}: expected a string; got {type(item).__name__}")
        return out


class Operation(BaseModel):
    """The gold operation of a step. ``op`` is what is scored; ``original_op`` is what the annotator did."""

    model_config = ConfigDict(extra="ignore")

    op: str
    original_op: str = ""
    value: str = ""

    @model_validator(mode="before")
    @classmethod
    def _normalise_op(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        op = data.get("op")
        if not isinstance(op, str):
            return data  # the field validator reports the type error
        upper = op.strip().upper()
        allowed = SCORED_OPS + CLICK_LIKE_OPS
        if upper not in allowed:
            raise ValueError(f"op: expected one of {', '.join(allowed)}; got {op!r}")
        data = dict(data)
        if upper in CLICK_LIKE_OPS:
            if not data.get("original_op"):
                data["original_op"] = upper
            upper = "CLICK"
        data["op"] = upper
        if data.get("value") is None:
            data["value"] = ""
        if data.get("original_op") is None:
            data["original_op"] = ""
        return data


class ActionRecord(BaseModel):
    """One step of a task: the page snapshot (html), the gold operation and the scored candidates."""

    model_config = ConfigDict(extra="ignore")

    action_uid: str
    raw_html: str = ""
    cleaned_html: str = ""
    operation: Operation
    pos_candidates: list[Candidate]
    neg_candidates: list[Candidate]

    @field_validator("action_uid", mode="before")
    @classmethod
    def _uid_to_str(cls, value: Any) -> Any:
        return _as_id(value)

    @field_validator("raw_html", "cleaned_html", mode="before")
    @classmethod
    def _none_html(cls, value: Any) -> Any:
        return "" if value is None else value

    @property
    def target_id(self) -> str | None:
        """The id AWM scores against: the FIRST positive candidate's; None when there is no positive."""
        return self.pos_candidates[0].backend_node_id if self.pos_candidates else None


class TaskRecord(BaseModel):
    """One Mind2Web task: the instruction, the readable action list and the steps.

    ``split`` is not in the native data; `data.iter_records` fills it with the split the record came from.
    """

    model_config = ConfigDict(extra="ignore")

    annotation_id: str
    website: str
    domain: str
    subdomain: str = ""
    confirmed_task: str
    action_reprs: list[str]
    actions: list[ActionRecord]
    split: str = ""

    @field_validator("subdomain", mode="before")
    @classmethod
    def _none_subdomain(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("actions")
    @classmethod
    def _reprs_match_actions(cls, actions: list[ActionRecord], info: ValidationInfo) -> list[ActionRecord]:
        if not actions:
            raise ValueError("expected at least one action")
        reprs = info.data.get("action_reprs")
        if reprs is not None and len(reprs) != len(actions):
            raise ValueError(f"expected one action per action_reprs entry ({len(reprs)}); got {len(actions)}")
        return actions
