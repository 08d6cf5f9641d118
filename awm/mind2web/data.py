"""Stream Mind2Web task records from the native split files, one validated `TaskRecord` at a time.

Why streaming: a real train file is 100-300 MB of JSON (each step carries its full raw and cleaned html),
a split is several GB. `iter_records` reads one file at a time through an incremental parser built on the
stdlib `json.JSONDecoder.raw_decode` over growing chunks, so memory holds one task record plus one chunk,
never a whole file or split.

Layout (as downloaded from the Hugging Face repo ``osunlp/Mind2Web``, test splits unzipped):
``ROOT/<split>/<split>_<n>.json`` (or ``ROOT/data/<split>/...``), each file a JSON list of task records.
Files are read in numeric order (``train_2`` before ``train_10``).

Errors name the file, the record index in that file, and the field: ``file F, record N, field X: expected
...``. With ``skip_bad=True`` a bad record is appended to ``bad`` (a `BadRecord`) and skipped instead; a
JSON *syntax* error cannot be resynchronised in a stream, so it skips the rest of that file (one
`BadRecord` with field ``(json)``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from awm.errors import DataError
from awm.mind2web.schema import TaskRecord

HUB_NAME = "osunlp/Mind2Web"
SPLITS = ("train", "test_task", "test_website", "test_domain")
_CHUNK_CHARS = 4 << 20  # measured: 4 MiB streams as fast as json.loads of a whole file
_NUM_SUFFIX = re.compile(r"^(.*?)(\d+)$")
_WS = " \t\n\r"


class BadRecord(BaseModel):
    """A record that failed validation and was skipped (``skip_bad``): where it is and what was wrong."""

    file: str
    index: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"file {self.file}, record {self.index}, field {self.field}: {self.message}"


def step_key(annotation_id: str, action_uid: str) -> str:
    """The key of one step in predictions and ranker scores: MindAct's ``"{annotation_id}_{action_uid}"``."""
    return f"{annotation_id}_{action_uid}"


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


def _numeric_order(path: Path) -> tuple[str, int, str]:
    m = _NUM_SUFFIX.match(path.stem)
    return (m.group(1), int(m.group(2)), path.name) if m else (path.stem, -1, path.name)


def split_files(root: Path, split: str) -> list[Path]:
    """The split's JSON files in numeric order; `DataError` naming what is missing and what exists."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"Mind2Web data directory {str(root)!r} does not exist; expected ROOT/<split>/*.json")
    folder = root / split
    if not folder.is_dir() and (root / "data" / split).is_dir():
        folder = root / "data" / split  # the Hugging Face repo keeps the files under data/
    if not folder.is_dir():
        found = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise DataError(
            f"split {split!r} not found: expected a folder {str(folder)!r} of JSON files"
            f" (splits: {', '.join(SPLITS)}); folders found in {str(root)!r}: {found or 'none'}"
        )
    files = sorted((p for p in folder.glob("*.json") if p.is_file()), key=_numeric_order)
    if not files:
        raise DataError(f"split {split!r}: no .json files in {str(folder)!r}")
    return files


def _iter_json_array(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (index, value) for each element of the top-level JSON array in `path`, one at a time.

    The buffer grows geometrically while an element is incomplete, so decoding stays linear in the file
    size even when one record is larger than a chunk. Elements must be objects: a complete object cannot
    be the prefix of a longer one, so a successful `raw_decode` is never a truncated value.
    """
    decoder = json.JSONDecoder()
    name = str(path)
    try:
        fh = path.open("r", encoding="utf-8-sig")
    except OSError as exc:
        raise DataError(f"file {name}: cannot read ({exc.strerror})") from None
    with fh:
        buf = ""
        pos = 0
        offset = 0  # chars consumed before buf[0], for error positions
        eof = False

        def fill(min_extra: int) -> bool:
            """Drop the consumed prefix and read at least `min_extra` more chars; False at end of file."""
            nonlocal buf, pos, offset, eof
            if eof:
                return False
            try:
                more = fh.read(max(_CHUNK_CHARS, min_extra))
            except UnicodeDecodeError as exc:
                raise DataError(f"file {name}: not UTF-8 text ({exc.reason})") from None
            if not more:
                eof = True
                return False
            offset += pos
            buf = buf[pos:] + more
            pos = 0
            return True

        def skip_ws() -> str:
            """Skip whitespace; return the next char ('' at end of file)."""
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _WS:
                    pos += 1
                if pos < len(buf):
                    return buf[pos]
                if not fill(0):
                    return ""

        if skip_ws() != "[":
            raise DataError(
                f"file {name}: expected a JSON list of task records (the file must start with '[')"
            )
        pos += 1
        index = 0
        if skip_ws() == "]":
            pos += 1
        else:
            while True:
                char = skip_ws()
                if char != "{":
                    got = repr(char) if char else "end of file"
                    raise DataError(f"file {name}, record {index}: expected a JSON object; got {got}")
                while True:
                    try:
                        value, end = decoder.raw_decode(buf, pos)
                        break
                    except json.JSONDecodeError as exc:
                        if not fill(len(buf) - pos):
                            raise DataError(
                                f"file {name}, record {index}: not valid JSON ({exc.msg} at char "
                                f"{offset + exc.pos} of the file)"
                            ) from None
                pos = end
                yield index, value
                index += 1
                char = skip_ws()
                if char == ",":
                    pos += 1
                    continue
                if char == "]":
                    pos += 1
                    break
                got = repr(char) if char else "end of file"
                raise DataError(f"file {name}, after record {index - 1}: expected ',' or ']'; got {got}")
        if skip_ws():
            raise DataError(f"file {name}: unexpected text after the closing ']' of the list")


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(err: dict[str, Any]) -> tuple[str, str]:
    """(field path, 'expected ...' message) for the first pydantic error."""
    field = ".".join(str(p) for p in err.get("loc", ())) or "(record)"
    msg: str = err.get("msg", "invalid")
    kind = err.get("type", "")
    if kind == "missing":
        return field, "expected a value; the field is missing"
    if msg.startswith("Value error, "):
        text = msg[len("Value error, ") :]
        return field, text if text.startswith("expected") or ":" in text else f"expected {text}"
    text = msg.replace("Input should be ", "", 1)
    return field, f"expected {text}; got {_short(err.get('input'))}"


def _validate(raw: Any, split: str, file: str, index: int) -> TaskRecord | BadRecord:
    try:
        record = TaskRecord.model_validate(raw)
    except ValidationError as exc:
        field, message = _describe(exc.errors()[0])
        return BadRecord(file=file, index=index, field=field, message=message)
    record.split = split
    return record


def _keep(raw: Any, website: str | None, domain: str | None, subdomain: str | None) -> bool:
    if not isinstance(raw, dict):
        return True  # validation reports it
    wanted = {"website": website, "domain": domain, "subdomain": subdomain}
    return all(v is None or raw.get(k) == v for k, v in wanted.items())


def _drop_html(raw: Any) -> None:
    actions = raw.get("actions") if isinstance(raw, dict) else None
    if isinstance(actions, list):
        for action in actions:
            if isinstance(action, dict):
                action.pop("raw_html", None)
                action.pop("cleaned_html", None)


def _is_hub_name(root: Path | str) -> bool:
    text = str(root)
    return text.startswith("hf:") or (text.lower() == HUB_NAME.lower() and not Path(text).exists())


def _iter_hub(name: str, split: str) -> Iterator[tuple[str, int, Any]]:
    """Raw records from the Hugging Face hub (streaming); only possible online."""
    name = name.removeprefix("hf:")
    offline = any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
    )
    how = (
        f"download it once (e.g. `huggingface-cli download {name} --repo-type dataset --local-dir DIR`; "
        "the test splits come as a password-protected zip to unpack into DIR/<split>/) and pass --data DIR"
    )
    if offline:
        raise DataError(f"cannot load {name!r} from the Hugging Face hub: offline mode is on here; {how}")
    try:
        import datasets

        stream = datasets.load_dataset(name, split=split, streaming=True)
    except Exception as exc:  # network, auth, unknown split: all fixable by the user the same way
        raise DataError(f"cannot load split {split!r} of {name!r} from the hub ({exc}); {how}") from None
    for index, raw in enumerate(stream):
        yield f"{name}:{split}", index, raw


def iter_records(
    root: Path | str,
    split: str,
    *,
    website: str | None = None,
    domain: str | None = None,
    subdomain: str | None = None,
    skip_bad: bool = False,
    bad: list[BadRecord] | None = None,
    with_html: bool = True,
) -> Iterator[TaskRecord]:
    """Validated task records of one split, in file order then record order, optionally filtered.

    `root` is a directory (see the module docstring), or the hub name ``osunlp/Mind2Web`` (or
    ``hf:OWNER/NAME``) to stream through `datasets` when online. ``with_html=False`` drops the html of each
    step before validation (for scoring and statistics, which never read it). A bad record raises
    `DataError` (``file F, record N, field X: expected ...``) or, with ``skip_bad``, is appended to `bad`.
    """

    def raw_records() -> Iterator[tuple[str, int, Any]]:
        if _is_hub_name(root):
            yield from _iter_hub(str(root), split)
            return
        for path in split_files(Path(root), split):
            try:
                for index, raw in _iter_json_array(path):
                    yield str(path), index, raw
            except DataError as exc:
                if not skip_bad:
                    raise
                if bad is not None:
                    m = re.search(r"record (\d+)", str(exc))
                    bad.append(
                        BadRecord(
                            file=str(path),
                            index=int(m.group(1)) if m else -1,
                            field="(json)",
                            message=f"{exc}; the rest of this file was skipped",
                        )
                    )

    for file, index, raw in raw_records():
        if not _keep(raw, website, domain, subdomain):
            continue
        if not with_html:
            _drop_html(raw)
        result = _validate(raw, split, file, index)
        if isinstance(result, BadRecord):
            if not skip_bad:
                raise DataError(str(result))
            if bad is not None:
                bad.append(result)
            continue
        yield result
