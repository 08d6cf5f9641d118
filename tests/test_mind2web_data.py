"""Loading Mind2Web records: file order, streaming across chunk boundaries, validation errors, filters, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awm.errors import DataError
from awm.mind2web import data
from awm.mind2web.commands import app
from awm.mind2web.data import BadRecord, iter_records, split_files, step_key
from awm.mind2web.schema import Candidate, TaskRecord

FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"
SPLITS = ("train", "test_task")


def _ids(records) -> list[str]:
    return [r.annotation_id for r in records]


def test_split_files_sort_numerically() -> None:
    names = [p.name for p in split_files(FIXTURES, "train")]
    assert names == ["train_0.json", "train_1.json", "train_2.json", "train_10.json"]


def test_split_files_missing_split_names_what_exists(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"split 'test_domain' not found.*'bad', 'test_task', 'train'"):
        split_files(FIXTURES, "test_domain")
    with pytest.raises(DataError, match="does not exist"):
        split_files(tmp_path / "nowhere", "train")
    (tmp_path / "train").mkdir()
    with pytest.raises(DataError, match="no .json files"):
        split_files(tmp_path, "train")


def test_split_files_accept_the_hub_layout(tmp_path: Path) -> None:
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / "train_3.json").write_text("[]", encoding="utf-8")
    assert [p.name for p in split_files(tmp_path, "train")] == ["train_3.json"]
    assert list(iter_records(tmp_path, "train")) == []


def test_train_records_stream_in_file_order() -> None:
    records = list(iter_records(FIXTURES, "train"))
    # train_0 holds tasks 1 and 2, train_1 task 3, train_2 task 4, train_10 task 5
    assert [r.annotation_id.split("-")[1] for r in records] == ["0001", "0002", "0003", "0004", "0005"]
    assert {r.split for r in records} == {"train"}
    assert [len(r.actions) for r in records] == [2, 3, 4, 5, 2]


def test_fixture_is_native_and_self_consistent() -> None:
    """Every candidate id is an element of its step's cleaned_html (MindAct style), attributes are JSON text."""
    raw = json.loads((FIXTURES / "test_task" / "test_task_0.json").read_text(encoding="utf-8"))
    assert isinstance(raw[0]["actions"][0]["pos_candidates"][0]["attributes"], str)
    for split in SPLITS:
        for record in iter_records(FIXTURES, split):
            assert len(record.action_reprs) == len(record.actions)
            for action in record.actions:
                for cand in action.pos_candidates + action.neg_candidates:
                    assert f'backend_node_id="{cand.backend_node_id}"' in action.cleaned_html
                    assert cand.attributes["backend_node_id"] == cand.backend_node_id
                assert f'data_pw_testid_buckeye="{action.action_uid}"' in action.raw_html


def test_native_quirks_are_parsed() -> None:
    t1, t2, t3, _, _ = iter_records(FIXTURES, "test_task")
    enter = t1.actions[2].operation
    assert (enter.op, enter.original_op) == ("CLICK", "ENTER")
    assert (t2.actions[1].operation.op, t2.actions[1].operation.original_op) == ("CLICK", "HOVER")
    assert [c.backend_node_id for c in t2.actions[1].pos_candidates] == ["202", "203"]
    assert t3.actions[0].operation.value == 'say "hi" [x]'
    assert t3.actions[1].pos_candidates == [] and t3.actions[1].target_id is None
    assert t1.actions[0].target_id == "101"
    cand = t1.actions[0].pos_candidates[0]
    assert cand.attributes["aria_label"] == "One-way" and cand.is_top_level_target
    assert step_key(t1.annotation_id, "u1-s1") == "a1c0ffee-0001-4000-8000-000000000001_u1-s1"


def test_filters_and_without_html() -> None:
    assert len(list(iter_records(FIXTURES, "test_task", website="united"))) == 2
    assert {r.website for r in iter_records(FIXTURES, "test_task", domain="Shopping")} == {"amazon"}
    assert list(iter_records(FIXTURES, "test_task", subdomain="Hotels")) == []
    light = list(iter_records(FIXTURES, "test_task", with_html=False))
    assert all(a.cleaned_html == "" and a.raw_html == "" for r in light for a in r.actions)
    full = list(iter_records(FIXTURES, "test_task"))
    assert [r.model_dump(exclude={"actions"}) for r in light] == [
        r.model_dump(exclude={"actions"}) for r in full
    ]


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_streaming_is_chunk_size_independent(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    expected = [r.model_dump() for r in iter_records(FIXTURES, "test_task")]
    monkeypatch.setattr(data, "_CHUNK_CHARS", chunk)
    assert [r.model_dump() for r in iter_records(FIXTURES, "test_task")] == expected


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _one_task() -> dict:
    raw = json.loads((FIXTURES / "train" / "train_10.json").read_text(encoding="utf-8"))
    return raw[0]


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_compact_and_spaced_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(data, "_CHUNK_CHARS", chunk)
    task = _one_task()
    _write(tmp_path / "train", "train_0.json", json.dumps([task, task], separators=(",", ":")))
    _write(tmp_path / "train", "train_1.json", "\ufeff \n [ \n" + json.dumps(task) + " \n ] \n")
    _write(tmp_path / "train", "train_2.json", " [ ] ")
    assert len(list(iter_records(tmp_path, "train"))) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}', "must start with '\\['"),
        ("[1, 2]", "record 0: expected a JSON object; got '1'"),
        ('[{"annotation_id": "x"', "record 0: not valid JSON"),
        ("[T  T]", "after record 0: expected ',' or '\\]'"),
        ("[T] extra", "unexpected text after"),
        ("[T,", "record 1: expected a JSON object; got end of file"),
    ],
)
def test_json_syntax_errors_name_file_and_record(tmp_path: Path, text: str, message: str) -> None:
    _write(tmp_path / "train", "train_0.json", text.replace("T", json.dumps(_one_task())))
    with pytest.raises(DataError, match=re.escape(str(tmp_path / "train" / "train_0.json")) + ".*" + message):
        list(iter_records(tmp_path, "train"))


def test_syntax_error_with_skip_bad_keeps_earlier_records(tmp_path: Path) -> None:
    task = json.dumps(_one_task())
    _write(tmp_path / "train", "train_0.json", f"[{task}, {task}, {task[:-40]}")
    _write(tmp_path / "train", "train_1.json", f"[{task}]")
    bad: list[BadRecord] = []
    records = list(iter_records(tmp_path, "train", skip_bad=True, bad=bad))
    assert len(records) == 3  # two before the break, and the next file
    assert [(b.index, b.field) for b in bad] == [(2, "(json)")]
    assert "rest of this file was skipped" in bad[0].message


def test_bad_record_error_names_file_record_field() -> None:
    with pytest.raises(DataError) as info:
        list(iter_records(FIXTURES, "bad"))
    text = str(info.value)
    assert "bad_0.json, record 1, field actions.1.pos_candidates.0.attributes: expected a JSON object" in text


def test_skip_bad_collects_and_continues() -> None:
    bad: list[BadRecord] = []
    records = list(iter_records(FIXTURES, "bad", skip_bad=True, bad=bad))
    assert [r.annotation_id.split("-")[1] for r in records] == ["0006", "0008"]
    assert len(bad) == 1
    assert (Path(bad[0].file).name, bad[0].index) == ("bad_0.json", 1)
    assert bad[0].field == "actions.1.pos_candidates.0.attributes"


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda t: t.pop("website"), "website", "expected a value; the field is missing"),
        (lambda t: t.update(website=3), "website", "expected a valid string; got 3"),
        (
            lambda t: t["actions"][0]["operation"].update(op="DRAG"),
            "actions.0.operation",
            "op: expected one of",
        ),
        (lambda t: t["action_reprs"].pop(), "actions", "one action per action_reprs entry (1); got 2"),
        (lambda t: t.update(actions=[], action_reprs=[]), "actions", "at least one action"),
        (
            lambda t: t["actions"][0]["pos_candidates"][0].update(attributes="[1]"),
            "attributes",
            "JSON object",
        ),
        (lambda t: t["actions"][0].pop("neg_candidates"), "actions.0.neg_candidates", "missing"),
    ],
)
def test_schema_errors(tmp_path: Path, mutate, field: str, message: str) -> None:
    task = _one_task()
    mutate(task)
    _write(tmp_path / "train", "train_0.json", json.dumps([_one_task(), task]))
    with pytest.raises(DataError, match=r"train_0\.json, record 1, field [\w.]*" + re.escape(field)) as info:
        list(iter_records(tmp_path, "train"))
    assert message in str(info.value)


def test_candidate_attribute_values_become_strings() -> None:
    cand = Candidate.model_validate(
        {"tag": "input", "attributes": '{"a": 1, "b": true, "c": null}', "backend_node_id": 12}
    )
    assert cand.attributes == {"a": "1", "b": "true", "c": ""}
    assert cand.backend_node_id == "12"
    with pytest.raises(ValueError, match="expected a string"):
        Candidate.model_validate({"tag": "a", "attributes": '{"a": [1]}', "backend_node_id": "1"})


def test_task_record_round_trips() -> None:
    record = next(iter_records(FIXTURES, "test_task"))
    assert TaskRecord.model_validate(record.model_dump()) == record


def test_hub_name_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match="offline.*--data DIR"):
        list(iter_records("osunlp/Mind2Web", "train"))


runner = CliRunner()


def test_cli_validate_counts() -> None:
    result = runner.invoke(app, ["validate", "--data", str(FIXTURES), "--split", "test_task", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["tasks"], summary["steps"], summary["websites"]) == (5, 16, 3)
    assert summary["domains"] == {"Shopping": 2, "Travel": 3}
    assert summary["ops"]["ENTER"] == 1 and summary["ops"]["HOVER"] == 1
    assert summary["steps_without_positive"] == 1 and summary["bad"] == []


def test_cli_validate_bad_split() -> None:
    result = runner.invoke(app, ["validate", "--data", str(FIXTURES), "--split", "bad", "--skip-bad"])
    assert result.exit_code == 1
    assert "record 1, field actions.1.pos_candidates.0.attributes" in result.output
    assert "1 bad record(s) skipped" in result.output
    result = runner.invoke(app, ["validate", "--data", str(FIXTURES), "--split", "bad"])
    assert isinstance(result.exception, DataError)
