"""The shared pieces of both ablation reports (`awm.pipeline.stats`, `awm.pipeline.results`), tested
directly: what the MiniWoB++ and Mind2Web report tests reach only through whole reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from awm.pipeline.results import (
    RESULTS_JSON,
    RESULTS_MD,
    fmt_ci,
    fmt_counts,
    md_table,
    memory_lines,
    write_results,
)
from awm.pipeline.stats import (
    bootstrap_mean_ci,
    merge_usage,
    paired_diffs,
    paired_test,
    rows_by_task,
    sign_test_p,
    success_counts,
    usage_tokens,
)


@dataclass(frozen=True)
class Row:
    arm: str
    key: str
    success: bool


# --- statistics ------------------------------------------------------------------------------------


def test_paired_diffs_average_each_task_over_its_repeats_and_keep_the_key_order() -> None:
    rows = [
        Row("a", "t2", True), Row("a", "t1", True), Row("a", "t1", False),
        Row("b", "t1", True), Row("b", "t1", True), Row("b", "t2", False), Row("b", "t3", True),
    ]  # fmt: skip
    tasks_a = rows_by_task(r for r in rows if r.arm == "a")
    tasks_b = rows_by_task(r for r in rows if r.arm == "b")
    assert list(tasks_a) == ["t2", "t1"]  # first-seen order
    assert paired_diffs(tasks_a, tasks_b, ["t1", "t2"], lambda r: float(r.success)) == [0.5, -1.0]
    assert success_counts(rows, lambda r: r.key) == {
        "t2": {"a": [1, 1], "b": [0, 1]},
        "t1": {"a": [1, 2], "b": [2, 2]},
        "t3": {"b": [1, 1]},
    }


def test_paired_test_counts_float_noise_as_a_tie() -> None:
    diffs = [1e-12, 0.5, -0.25, 0.0, 2 / 3 - (1 - 1 / 3)]  # the last is 0 up to rounding
    test = paired_test(diffs)
    assert (test.b_wins, test.a_wins, test.ties) == (1, 1, 3)
    assert test.mean_diff == pytest.approx(0.25 / 5)
    assert test.ci95 == bootstrap_mean_ci(diffs)
    assert test.sign_test_p == sign_test_p(1, 1) == pytest.approx(1.0)
    empty = paired_test([])
    assert (empty.mean_diff, empty.ci95, empty.sign_test_p, empty.ties) == (None, None, None, 0)


def test_merge_usage_sums_field_by_field_and_drops_what_is_not_a_number() -> None:
    first = {"judge": {"prompt_tokens": 3, "cost_usd": 0.25, "model": "m"}}  # type: ignore[dict-item]
    second = {"judge": {"prompt_tokens": 4, "completion_tokens": 1}, "induction": {"calls": 2}}
    total = merge_usage(first, second)
    assert total == {
        "judge": {"prompt_tokens": 7, "cost_usd": 0.25, "completion_tokens": 1},
        "induction": {"calls": 2},
    }
    assert first["judge"]["prompt_tokens"] == 3  # the inputs are left alone
    assert merge_usage() == {}
    assert usage_tokens(total["judge"]) == 8.0 and usage_tokens(None) == 0.0


# --- rendering ---------------------------------------------------------------------------------------


def test_md_table_aligns_each_column_and_refuses_a_mismatched_alignment() -> None:
    assert md_table(("arm", "tasks"), "lr", [("off", 3), ("", 0)]) == [
        "| arm | tasks |",
        "|---|---:|",
        "| off | 3 |",
        "| | 0 |",
    ]
    with pytest.raises(ValueError, match="align"):
        md_table(("arm", "tasks"), "l", [])


def test_intervals_and_counts_as_text() -> None:
    assert fmt_ci(None) == "n/a" and fmt_ci(None, signed=True, suffix=" pts") == "n/a"
    assert fmt_ci((12.345, 100.0)) == "[12.3, 100.0]"
    assert fmt_ci((-5.0, 0.0), signed=True, suffix=" pts") == "[-5.0, +0.0] pts"
    assert fmt_ci((31.8, 86.44), unit="%") == "[31.8%, 86.4%]"
    assert fmt_counts({"done": 2, "timeout": 1}) == "done x2, timeout x1"
    assert fmt_counts({}, "none") == "none"


def test_memory_lines_name_each_head_and_say_when_there_is_none() -> None:
    @dataclass
    class Arm:
        name: str
        memory: str
        final_versions: dict[str, int | None]

    assert memory_lines(Arm("off", "off", {"s": 3})) == ["- **off**: memory off"]
    assert memory_lines(Arm("on", "online", {"a/x": 2, "a/y": None})) == [
        "- **on** (online): heads after the stream: a/x v2"
    ]
    assert memory_lines(Arm("on", "online", {})) == ["- **on** (online): heads after the stream: no version"]


class _Report(BaseModel):
    name: str
    plots: list[str] = Field(default_factory=list)


def test_write_results_draws_the_plots_first_and_names_them_in_results_json(tmp_path: Path) -> None:
    drawn: list[str] = []

    def draw(report: _Report, path: Path) -> None:
        drawn.append(path.name)
        path.write_bytes(b"png")

    out = tmp_path / "out"
    md = write_results(
        _Report(name="x"), out, plots=[("a.png", draw), ("b.png", draw)], render=lambda r: f"# {r.plots}\n"
    )
    assert md == out / RESULTS_MD and drawn == ["a.png", "b.png"]
    assert _Report.model_validate_json((out / RESULTS_JSON).read_text()).plots == ["a.png", "b.png"]
    assert md.read_text() == "# ['a.png', 'b.png']\n"

    def broken(report: _Report, path: Path) -> None:
        raise RuntimeError("no display")

    with pytest.raises(RuntimeError):
        write_results(_Report(name="y"), out, plots=[("c.png", broken)], render=lambda r: "new\n")
    assert md.read_text() == "# ['a.png', 'b.png']\n"  # a failed plot leaves the last report whole
    assert _Report.model_validate_json((out / RESULTS_JSON).read_text()).name == "x"
