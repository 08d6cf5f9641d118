"""Model answers for Mind2Web steps: parse one answer text, and read a predictions JSONL file.

Why a tolerant parser on top of `awm.actions.parse_action`: scoring must judge what the model *meant* the
way AWM did (AWM took the text between backticks and matched ``(CLICK|SELECT|TYPE) [id] [value]``), so a
reply that repeats its action in prose and then in backticks, or writes ``CLICK [12] [x]``, still counts.
The strict parser (the one whose messages are fed back to the model) runs first; the fallbacks only decide
what to score.

File format (one JSON object per line, one line per step)::

    {"annotation_id": "...", "action_uid": "...", "prediction": "`TYPE [2031] [new york]`"}
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ValidationError

from awm.actions import parse_action
from awm.errors import ActionParseError, DataError
from awm.mind2web.data import step_key


class Prediction(BaseModel):
    """A parsed answer: upper-case op (CLICK, TYPE, SELECT), the element id, and the value ("" for CLICK)."""

    op: str
    element_id: str
    value: str = ""


class PredictionRecord(BaseModel):
    """One line of a predictions file: which step, and the model's raw answer text."""

    annotation_id: str
    action_uid: str
    prediction: str

    @property
    def key(self) -> str:
        return step_key(self.annotation_id, self.action_uid)


# op, then [id], then an optional [value] running to the LAST ']' of the line (values may contain ']')
_LOOSE_RE = re.compile(
    r"(?<![A-Za-z0-9_])(click|type|select)\s*\[\s*([^\[\]\s]+?)\s*\](?:[ \t]*\[(.*)\])?",
    re.IGNORECASE,
)
_BACKTICKS_RE = re.compile(r"`+([^`]+)`+")


def _from_match(m: re.Match[str]) -> Prediction:
    op = m.group(1).upper()
    element_id = m.group(2).strip("'\"")
    value = "" if op == "CLICK" or m.group(3) is None else m.group(3)
    return Prediction(op=op, element_id=element_id, value=value)


def _strict(text: str) -> Prediction:
    action = parse_action(text, action_set="mind2web").action
    return Prediction(
        op=action.name, element_id=str(action.args["id"]), value=str(action.args.get("value", ""))
    )


def parse_prediction(text: str) -> Prediction:
    """The action a Mind2Web answer states; `ActionParseError` when it states none.

    Order: the strict parser on each backtick-quoted span (first that parses; AWM read the answer between
    backticks, and a trailing ``([textbox] From -> TYPE: ...)`` note must not leak into the value); then
    on the whole text; then a loose match of ``OP [id] [value]`` (first occurrence, as AWM's regex), in
    the spans and then the text. CLICK ignores any value. Without backticks a value runs to the last
    ``]`` of its line, so values may contain ``]``.
    """
    spans = _BACKTICKS_RE.findall(text)
    for span in spans:
        try:
            return _strict(span)
        except ActionParseError:
            continue
    try:
        return _strict(text)
    except ActionParseError as exc:
        first_error = exc
    for candidate in [*spans, text]:
        m = _LOOSE_RE.search(candidate)
        if m and m.group(2).strip("'\""):
            return _from_match(m)
    raise first_error


def load_predictions(path: Path | str) -> dict[str, str]:
    """Raw answer text per step key from a JSONL file; `DataError` naming the file and line on bad input."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise DataError(f"predictions file {str(path)!r}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"predictions file {str(path)!r}: not UTF-8 text ({exc.reason})") from None
    out: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"predictions file {path}, line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at char {exc.pos})") from None
        try:
            record = PredictionRecord.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(line)"
            raise DataError(
                f"{where}, field {field}: expected an object with string fields annotation_id, action_uid, "
                f"prediction ({err['msg']})"
            ) from None
        if record.key in out:
            raise DataError(f"{where}: a second prediction for step {record.key!r}; expected one per step")
        out[record.key] = record.prediction
    return out
