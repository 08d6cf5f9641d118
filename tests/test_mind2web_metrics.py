"""AWM's Mind2Web metrics on the hand-made fixture, with every expected number worked out by hand below.

Fixture (tests/fixtures/mind2web/test_task, 5 tasks, 16 steps) and predictions.jsonl, step by step.
EA = element correct, F1 = action F1, SS = step success. "any" differs from "awm" only where noted.

T1 united/Travel (3 steps)
  s1 gold CLICK [101]            pred `CLICK [101]`                 EA 1  F1 1                      SS 1
  s2 gold TYPE [102] New York    pred `TYPE [102] [New York City]`  EA 1  F1 {TYPE,New,York,City} vs
                                 {TYPE,New,York}: P 3/4, R 1, F1 = 2*(3/4)/(7/4) = 6/7           SS 0
  s3 gold ENTER->CLICK [103]     pred `CLICK [999]`                 EA 0  F1 1                      SS 0
  task means: EA 2/3, F1 (1 + 6/7 + 1)/3 = 20/21, SS 1/3, task 0
T2 delta/Travel (2 steps)
  s1 gold SELECT [201] Economy   pred `SELECT [201] [Economy]`      EA 1  F1 1  SS 1
  s2 gold HOVER->CLICK [202,203] pred `CLICK [203]`                 awm: EA 0 F1 1 SS 0 | any: EA 1 F1 1 SS 1
  task means: awm EA 1/2, F1 1, SS 1/2, task 0 | any EA 1, F1 1, SS 1, task 1
T3 amazon/Shopping (4 steps)
  s1 gold TYPE [301] say "hi" [x] pred `TYPE [301] [say "hi" [x]]`  EA 1  F1 1  SS 1
  s2 gold CLICK, NO positive     pred `CLICK [302]`                 EA 0  F1 0  SS 0 (AWM: never right)
  s3 gold CLICK [303,304]        pred "I think the answer is clear." unparsed: 0 0 0, listed
  s4 gold SELECT [305] Size 10   pred `SELECT [305] [Size 9]`       EA 1  F1 {SELECT,Size,9} vs
                                 {SELECT,Size,10}: P = R = 2/3, F1 2/3                            SS 0
  task means: EA 2/4, F1 (1 + 0 + 0 + 2/3)/4 = 5/12, SS 1/4, task 0
T4 amazon/Shopping (2 steps)
  s1 gold TYPE [401] laptop      pred type [401] [laptop] (lower case op, no backticks)  EA 1 F1 1 SS 1
  s2 gold CLICK [402]            pred `CLICK [402]`                 EA 1  F1 1  SS 1
  task means: EA 1, F1 1, SS 1, task 1
T5 united/Travel (5 steps)
  s1 gold CLICK [501]            pred `CLICK [501]`                 EA 1  F1 1  SS 1
  s2 gold CLICK [502]            pred `TYPE [502] [Boston]`         EA 1  F1 {TYPE,Boston} vs {CLICK}: 0  SS 0
  s3 gold TYPE [503] Boston - MA pred `TYPE [503] [Boston MA]`      EA 1  F1 1 ("-" is punctuation, dropped)
                                                                    SS 0 (value not the same)
  s4 gold CLICK [504]            pred `CLICK [504]` ([option] ...)  EA 1  F1 1  SS 1
  s5 gold CLICK [505]            no prediction                      EA 0  F1 0  SS 0
  task means: EA 4/5, F1 3/5, SS 2/5, task 0

awm macro: EA (2/3 + 1/2 + 1/2 + 1 + 4/5)/5 = (52/15)/5 = 52/75  -> 69.333...
           F1 (20/21 + 1 + 5/12 + 1 + 3/5)/5 = (3.969047...)/5     -> 79.3809...
           SS (1/3 + 1/2 + 1/4 + 1 + 2/5)/5 = (149/60)/5 = 149/300 -> 49.666...
           task 1/5                                                -> 20
awm micro: EA (2+1+2+2+4)/16 = 11/16 -> 68.75
           F1 (20/7 + 2 + 5/3 + 2 + 3)/16 = (95/21 + 7)/16 = (242/21)/16 -> 72.0238...
           SS (1+1+1+2+2)/16 = 7/16 -> 43.75 ; task = macro task -> 20
any macro: EA (2/3 + 1 + 1/2 + 1 + 4/5)/5 = (119/30)/5 = 119/150 -> 79.333...
           F1 unchanged -> 79.3809... ; SS (1/3 + 1 + 1/4 + 1 + 2/5)/5 = (179/60)/5 = 179/300 -> 59.666...
           task 2/5 -> 40
any micro: EA 12/16 -> 75 ; F1 -> 72.0238... ; SS 8/16 -> 50 ; task 40
per website (awm, macro): united = T1, T5: EA (2/3 + 4/5)/2 = 11/15, F1 (20/21 + 3/5)/2 = 163/210,
  SS (1/3 + 2/5)/2 = 11/30, task 0; delta = T2; amazon = T3, T4: task 1/2.
per domain (awm, macro): Travel = T1, T2, T5: EA (2/3 + 1/2 + 4/5)/3 = 59/90; Shopping = T3, T4.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awm.errors import ActionParseError, ConfigError, DataError
from awm.mind2web.commands import app
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.metrics import ScoreReport, score, score_step, token_f1
from awm.mind2web.predictions import load_predictions, parse_prediction
from awm.mind2web.schema import ActionRecord, TaskRecord

FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"
PREDICTIONS = FIXTURES / "predictions.jsonl"
T3 = "a1c0ffee-0003-4000-8000-000000000003"


def _gold(split: str = "test_task") -> list[TaskRecord]:
    return list(iter_records(FIXTURES, split, with_html=False))


def _report(match: str) -> ScoreReport:
    return score(_gold(), load_predictions(PREDICTIONS), match=match)  # type: ignore[arg-type]


def _four(agg) -> tuple[float, float, float, float]:
    return (agg.element_accuracy, agg.action_f1, agg.step_success_rate, agg.task_success_rate)


F1_MACRO = 100 * (20 / 21 + 1 + 5 / 12 + 1 + 3 / 5) / 5
F1_MICRO = 100 * (242 / 21) / 16


def test_golden_awm_mode() -> None:
    report = _report("awm")
    assert _four(report.macro) == pytest.approx((100 * 52 / 75, F1_MACRO, 100 * 149 / 300, 20.0))
    assert _four(report.micro) == pytest.approx((68.75, F1_MICRO, 43.75, 20.0))
    assert (report.macro.n_tasks, report.macro.n_steps) == (5, 16)
    assert report.unparsed == [f"{T3}_u3-s3: I think the answer is clear."]
    united = report.per_website["united"]
    assert _four(united) == pytest.approx((100 * 11 / 15, 100 * 163 / 210, 100 * 11 / 30, 0.0))
    assert report.per_website["amazon"].task_success_rate == pytest.approx(50.0)
    assert sorted(report.per_website) == ["amazon", "delta", "united"]
    assert report.per_domain["Travel"].element_accuracy == pytest.approx(100 * 59 / 90)
    assert report.per_domain["Shopping"].n_tasks == 2
    assert _four(report.per_split["test_task"]) == pytest.approx(_four(report.macro))


def test_golden_any_mode() -> None:
    report = _report("any")
    assert report.match == "any"
    assert _four(report.macro) == pytest.approx((100 * 119 / 150, F1_MACRO, 100 * 179 / 300, 40.0))
    assert _four(report.micro) == pytest.approx((75.0, F1_MICRO, 50.0, 40.0))
    assert _four(report.per_website["delta"]) == pytest.approx((100.0, 100.0, 100.0, 100.0))


def _perfect(records: list[TaskRecord]) -> dict[str, str]:
    """Answers built from the gold actions, in AWM's answer format, for every step with a positive."""
    out = {}
    for record in records:
        for action in record.actions:
            if not action.pos_candidates:
                continue
            op, value = action.operation.op, action.operation.value
            text = (
                f"`{op} [{action.target_id}]`" if op == "CLICK" else f"`{op} [{action.target_id}] [{value}]`"
            )
            out[step_key(record.annotation_id, action.action_uid)] = text
    return out


@pytest.mark.parametrize("match", ["awm", "any"])
def test_perfect_predictions_score_100(match: str) -> None:
    records = _gold("train")
    report = score(records, _perfect(records), match=match)  # type: ignore[arg-type]
    for agg in (report.macro, report.micro, *report.per_website.values(), *report.per_domain.values()):
        assert _four(agg) == pytest.approx((100.0, 100.0, 100.0, 100.0))
    assert report.unparsed == []


def test_perfect_predictions_cannot_fix_a_step_without_positive() -> None:
    records = _gold()
    report = score(records, _perfect(records))
    # 15 of 16 steps have a positive; only T3 (the one holding the no-positive step) fails as a task
    assert report.micro.element_accuracy == pytest.approx(100 * 15 / 16)
    assert report.macro.task_success_rate == pytest.approx(80.0)
    assert report.per_website["amazon"].element_accuracy == pytest.approx(100 * (3 / 4 + 1) / 2)


def test_no_predictions_score_zero_and_unknown_key_is_an_error() -> None:
    records = _gold()
    report = score(records, {})
    assert _four(report.macro) == (0.0, 0.0, 0.0, 0.0)
    assert report.unparsed == []
    with pytest.raises(DataError, match=r"'nope_x'"):
        score(records, {"nope_x": "`CLICK [1]`"})
    with pytest.raises(ConfigError, match="match"):
        score(records, {}, match="first")  # type: ignore[arg-type]


def test_empty_records_give_zero_aggregates() -> None:
    report = score([], {})
    assert report.macro.n_tasks == 0 and report.micro.element_accuracy == 0.0


def test_token_f1_follows_awm() -> None:
    assert token_f1("CLICK", "CLICK") == 1.0
    assert token_f1("TYPE New York", "TYPE new york") == pytest.approx(1 / 3)  # case is kept
    assert token_f1("TYPE a - b", "TYPE a b") == 1.0  # punctuation tokens are dropped
    assert token_f1("TYPE ()", "TYPE") == 1.0  # AWM's substring test also drops runs like "()"
    assert token_f1("TYPE (a)", "TYPE a") == pytest.approx(0.5)  # but not a word with punctuation
    assert token_f1("", "") == 1.0
    assert token_f1("-", "CLICK") == 0.0
    assert token_f1("TYPE x x x", "TYPE x") == 1.0  # sets, not bags


def _step(op: str, value: str, pos: list[str], original_op: str = "") -> ActionRecord:
    cand = [{"tag": "a", "attributes": "{}", "backend_node_id": i} for i in pos]
    return ActionRecord.model_validate(
        {
            "action_uid": "u",
            "operation": {"op": op, "original_op": original_op or op, "value": value},
            "pos_candidates": cand,
            "neg_candidates": [],
        }
    )


def test_score_step_rules() -> None:
    hover = _step("HOVER", "", ["7"])  # an op of HOVER is normalised and scored as CLICK
    assert hover.operation.op == "CLICK" and hover.operation.original_op == "HOVER"
    s = score_step(hover, "`CLICK [7]`")
    assert (s.element_correct, s.action_f1, s.step_success, s.parsed) == (True, 1.0, True, True)
    # CLICK ignores a value in the answer; TYPE needs the exact value for step success
    assert score_step(_step("CLICK", "", ["7"]), "CLICK [7] [junk]").step_success
    typed = score_step(_step("TYPE", "Paris", ["7"]), "`TYPE [7] [paris]`")
    assert typed.element_correct and not typed.step_success and typed.action_f1 == pytest.approx(0.5)
    # the right element with the wrong op
    wrong_op = score_step(_step("SELECT", "Paris", ["7"]), "`TYPE [7] [Paris]`")
    assert wrong_op.element_correct and not wrong_op.step_success and wrong_op.action_f1 == pytest.approx(0.5)
    # no positive: nothing can be right, even a perfect-looking answer
    none = score_step(_step("CLICK", "", []), "`CLICK [7]`")
    assert (none.element_correct, none.action_f1, none.step_success, none.parsed) == (False, 0.0, False, True)
    missing = score_step(_step("CLICK", "", ["7"]), None)
    assert not missing.parsed and missing.action_f1 == 0.0
    assert not score_step(_step("CLICK", "", ["7"]), "no idea").parsed
    two = _step("CLICK", "", ["7", "8"])
    assert not score_step(two, "`CLICK [8]`").element_correct
    assert score_step(two, "`CLICK [8]`", match="any").element_correct


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("`TYPE [2031] [new york]`", ("TYPE", "2031", "new york")),
        ("`type [5] [a]b \"q\" 'r']`", ("TYPE", "5", "a]b \"q\" 'r'")),
        ("Action: `TYPE [12] [Paris]` ([textbox] To -> TYPE: Paris)", ("TYPE", "12", "Paris")),
        ("I would CLICK [3] first.\nAnswer: `CLICK [4]`", ("CLICK", "4", "")),
        ("Select [9] [Economy] please", ("SELECT", "9", "Economy")),
        ("```\nCLICK [9]\n```", ("CLICK", "9", "")),
        ("CLICK [3] or CLICK [4]", ("CLICK", "3", "")),  # AWM's regex takes the first
        ("SELECT [9]", ("SELECT", "9", "")),  # a missing value is an empty value, scored by F1
    ],
)
def test_parse_prediction(text: str, expected: tuple[str, str, str]) -> None:
    p = parse_prediction(text)
    assert (p.op, p.element_id, p.value) == expected


@pytest.mark.parametrize("text", ["", "no action here", "DRAG [3]", "CLICK []", "`CLICK`"])
def test_parse_prediction_rejects(text: str) -> None:
    with pytest.raises(ActionParseError):
        parse_prediction(text)


def test_load_predictions_errors(tmp_path: Path) -> None:
    good = json.dumps({"annotation_id": "a", "action_uid": "u", "prediction": "`CLICK [1]`"})
    path = tmp_path / "p.jsonl"
    path.write_text(good + "\n\n{not json}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"p\.jsonl, line 3: not valid JSON"):
        load_predictions(path)
    path.write_text(good + '\n{"annotation_id": "a", "action_uid": "v"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2, field prediction"):
        load_predictions(path)
    path.write_text(good + "\n" + good + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: a second prediction for step 'a_u'"):
        load_predictions(path)
    path.write_text(good + "\n", encoding="utf-8")
    assert load_predictions(path) == {"a_u": "`CLICK [1]`"}
    with pytest.raises(DataError, match="cannot read"):
        load_predictions(tmp_path / "missing.jsonl")


runner = CliRunner()


def test_cli_score_json_matches_golden() -> None:
    args = ["score", "--data", str(FIXTURES), "--predictions", str(PREDICTIONS), "--split", "test_task"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    for part in ("macro", "micro"):
        assert set(payload[part]) >= {
            "element_accuracy",
            "action_f1",
            "step_success_rate",
            "task_success_rate",
        }
    assert payload["macro"]["step_success_rate"] == pytest.approx(100 * 149 / 300)
    assert payload["micro"]["element_accuracy"] == pytest.approx(68.75)
    assert set(payload["per_website"]) == {"amazon", "delta", "united"}
    assert payload["match"] == "awm"
    any_mode = json.loads(runner.invoke(app, [*args, "--json", "--match", "any"]).output)
    assert any_mode["macro"]["task_success_rate"] == pytest.approx(40.0)
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "69.3" in table.output and "could not be parsed" in table.output


def test_cli_score_bad_jsonl_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "preds.jsonl"
    bad.write_text(PREDICTIONS.read_text(encoding="utf-8") + "oops\n", encoding="utf-8")
    result = runner.invoke(app, ["score", "--data", str(FIXTURES), "--predictions", str(bad)])
    assert isinstance(result.exception, DataError)
    assert "preds.jsonl, line 16" in str(result.exception)
    result = runner.invoke(
        app, ["score", "--data", str(FIXTURES), "--predictions", str(PREDICTIONS), "--match", "first"]
    )
    assert isinstance(result.exception, ConfigError)
