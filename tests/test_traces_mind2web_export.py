"""`awm traces export RUN --mind2web DIR`: a run's episodes as Mind2Web task records.

The conversion on a hand-made trajectory and page; the page snapshot itself (DOMSnapshot -> HTML, and
the `[browser] pages` switch); the recorder writing it; and end to end, a scripted `awm run` in real
Chromium exported and read back by the Mind2Web loader and scorer unchanged (a perfect prediction file
built from the records scores 100 everywhere). An old run without page snapshots is refused, exit 2.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from awm.config import BrowserSettings
from awm.errors import DataError
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.metrics import score
from awm.mind2web.predictions import load_predictions
from awm.mind2web.schema import TaskRecord
from awm.traces import RunRecorder, open_run
from awm.traces.db import safe_name
from awm.traces.mind2web_export import episode_record, export_run, step_operation
from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict
from awm.webarena.dom import parse_dom
from awm.webarena.env import BrowserSession
from awm.webarena.harness import StepCapture
from awm.webarena.observation import page_html

REPO = Path(__file__).resolve().parents[1]

# A page as `observation.page_html` writes it: bids, boxes, the live value, a hidden element, a script.
PAGE = (
    '<html bid="0" bounding_box_rect="0,0,800,600"><head bid="1"><title bid="2">Shop</title></head>'
    '<body bid="3" bounding_box_rect="0,0,800,600">'
    '<div bid="4" class="bar" bounding_box_rect="0,0,800,40">'
    '<a bid="5" href="/home" bounding_box_rect="0,0,60,20" is_clickable="true">Home</a>'
    '<span bid="6" data-x="1" bounding_box_rect="70,0,60,20" is_clickable="true">Menu &amp; more</span>'
    '<a bid="7" href="/hidden">Hidden link</a></div>'
    '<label bid="8" bounding_box_rect="0,50,80,20">City</label>'
    '<input bid="9" type="text" aria-label="City name" value="Bos" input_value="Bos" '
    'bounding_box_rect="90,50,200,30" is_clickable="true">'
    '<select bid="10" name="size" bounding_box_rect="0,90,100,30" is_clickable="true">'
    '<option bid="11" value="s">Small</option><option bid="12" value="l" option_selected="true">Large</option>'
    "</select>"
    '<button bid="13" type="submit" bounding_box_rect="0,130,80,30" is_clickable="true">Search</button>'
    '<button bid="14" bounding_box_rect="0,170,0,0">Empty</button>'
    "</body></html>"
)


def _step(index: int, name: str, args: dict, *, target: TargetDesc | None = None, outcome: str = "ok") -> Step:
    action_str = f"{name}(...)"
    return Step(index=index, action={"name": name, "args": args}, action_str=action_str, target=target, outcome=outcome)  # type: ignore[arg-type]


def _trajectory() -> Trajectory:
    steps = [
        _step(0, "fill", {"bid": "9", "value": "Boston"}, target=TargetDesc(role="textbox", label="City name")),
        _step(1, "click", {"bid": "13"}, outcome="target_not_found"),  # failed: no gold action
        _step(2, "scroll", {"delta_x": 0, "delta_y": 300}),  # on no element
        _step(3, "select_option", {"bid": "10", "options": ["Large"]}, target=TargetDesc(role="combobox", label="")),
        _step(4, "press", {"bid": "9", "key_comb": "Tab"}),  # not Enter: no Mind2Web form
        _step(5, "hover", {"bid": "6"}, target=TargetDesc(role="clickable", label="Menu & more")),
        _step(6, "press", {"bid": "9", "key_comb": "Enter"}, target=TargetDesc(role="textbox", label="City name")),
        _step(7, "click", {"bid": "13", "button": "left"}, target=TargetDesc(role="button", label="Search")),
        _step(8, "send_msg_to_user", {"text": "done"}),
    ]
    task = Task(task_id="live.abc", goal="Search Boston, size large.", scope="live/shop.example", benchmark="live")
    return Trajectory(trajectory_id="live.abc-1234", task=task, steps=steps, end="answered")


def test_an_episode_becomes_one_native_record_with_the_bid_as_the_element_id() -> None:
    trajectory = _trajectory()
    pages = {s.index: PAGE for s in trajectory.steps}
    record = episode_record(trajectory, pages, run_id="run1")
    assert record is not None
    assert list(record) == ["annotation_id", "confirmed_task", "website", "domain", "subdomain", "action_reprs", "actions"]
    assert (record["confirmed_task"], record["website"], record["domain"], record["subdomain"]) == (
        "Search Boston, size large.", "shop.example", "live", "",
    )  # fmt: skip
    assert record["action_reprs"] == [
        "[textbox]  City name -> TYPE: Boston",
        "[combobox]  Small Large -> SELECT: Large",  # no label seen: the element's own text
        "[span]  Menu & more -> HOVER",  # a generic clickable is named by its tag
        "[textbox]  City name -> ENTER",
        "[button]  Search -> CLICK",
    ]
    actions = record["actions"]
    assert [a["operation"] for a in actions] == [
        {"original_op": "TYPE", "value": "Boston", "op": "TYPE"},
        {"original_op": "SELECT", "value": "Large", "op": "SELECT"},
        {"original_op": "HOVER", "value": "", "op": "CLICK"},
        {"original_op": "ENTER", "value": "", "op": "CLICK"},
        {"original_op": "CLICK", "value": "", "op": "CLICK"},
    ]
    assert [a["pos_candidates"][0]["backend_node_id"] for a in actions] == ["9", "10", "6", "9", "13"]
    first = actions[0]
    assert list(first) == ["action_uid", "raw_html", "cleaned_html", "operation", "pos_candidates", "neg_candidates"]
    [positive] = first["pos_candidates"]
    assert positive["tag"] == "input" and positive["is_original_target"] and positive["is_top_level_target"]
    assert isinstance(positive["attributes"], str)  # a JSON object in a string, as in the dataset
    assert json.loads(positive["attributes"]) == {
        "backend_node_id": "9", "bounding_box_rect": "90,50,200,30", "type": "text", "aria_label": "City name",
        "value": "Bos", "input_value": "Bos",
    }  # fmt: skip
    # negatives: the other drawn, actionable elements; not the hidden link, not the box of no area
    assert [c["backend_node_id"] for c in first["neg_candidates"]] == ["5", "6", "10", "13"]
    assert not any(c["is_original_target"] for c in first["neg_candidates"])
    cleaned = first["cleaned_html"]
    assert cleaned.startswith('<html backend_node_id="0"><body backend_node_id="3">')
    assert '<input backend_node_id="9" type="text" aria_label="City name" value="Bos" input_value="Bos">' in cleaned
    assert "<head" not in cleaned and "Hidden link" not in cleaned and "bid=" not in cleaned
    assert "href" not in cleaned and "Menu &amp; more" in cleaned  # salient attributes only; text escaped
    assert '<option backend_node_id="12" value="l" option_selected="true">Large</option>' in cleaned
    assert "<title" in first["raw_html"] and 'backend_node_id="7"' in first["raw_html"]
    # the native schema takes it as is; ids are UUIDs, the same on every export
    parsed = TaskRecord.model_validate(record)
    assert parsed.actions[0].target_id == "9" and parsed.actions[0].pos_candidates[0].attributes["aria_label"] == "City name"
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", record["annotation_id"])
    assert episode_record(trajectory, pages, run_id="run1") == record
    other = episode_record(trajectory, pages, run_id="run2")
    assert other is not None and other["annotation_id"] != record["annotation_id"]


def test_the_acted_element_stays_in_the_cleaned_page_even_when_not_drawn_and_negatives_are_a_fixed_sample() -> None:
    trajectory = Trajectory(
        trajectory_id="t-1",
        task=Task(task_id="browsergym/miniwob.click-test", scope="miniwob/click-test", benchmark="miniwob"),
        steps=[_step(0, "click", {"bid": "7"}, target=TargetDesc(role="link", label="Hidden link"))],
    )
    record = episode_record(trajectory, {0: PAGE}, run_id="r", max_negatives=2)
    assert record is not None and record["website"] == "click-test" and record["domain"] == "miniwob"
    [action] = record["actions"]
    assert '<a backend_node_id="7">Hidden link</a>' in action["cleaned_html"]
    negatives = [c["backend_node_id"] for c in action["neg_candidates"]]
    assert len(negatives) == 2 and set(negatives) <= {"5", "6", "9", "10", "13"}
    assert episode_record(trajectory, {0: PAGE}, run_id="r", max_negatives=2) == record  # the same sample


def test_steps_without_an_element_or_a_page() -> None:
    assert step_operation(_step(0, "click", {"bid": "3"})) == ("CLICK", "CLICK", "", "3")
    assert step_operation(_step(0, "goto", {"url": "https://x.org"})) is None
    only_answers = _trajectory().model_copy(update={"steps": [_step(0, "send_msg_to_user", {"text": "hi"})]})
    assert episode_record(only_answers, {}, run_id="r") is None
    with pytest.raises(DataError, match=r"episode live.abc-1234, step 3 .*no page snapshot .*pages/live.abc-1234/3.html"):
        episode_record(_trajectory(), {0: PAGE}, run_id="r")


# --- the snapshot ---------------------------------------------------------------------------------


def _snapshot() -> tuple[dict, dict]:
    """A two-document DOMSnapshot (an iframe) in CDP's layout, and BrowserGym's extra properties."""
    strings: list[str] = []

    def s(text: str) -> int:
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    def doc(rows: list[tuple[int, int, str, str | None, list[str]]], **extra: dict) -> dict:
        """rows: (parent, node type, name, value, [attr, value, ...])"""
        return {
            "nodes": {
                "parentIndex": [r[0] for r in rows],
                "nodeType": [r[1] for r in rows],
                "nodeName": [s(r[2]) for r in rows],
                "nodeValue": [s(r[3]) if r[3] is not None else -1 for r in rows],
                "attributes": [[s(a) for a in r[4]] for r in rows],
                **extra,
            }
        }

    main = doc(
        [
            (-1, 9, "#document", None, []),
            (0, 1, "HTML", None, ["bid", "0", "browsergym_visibility_ratio", "1"]),
            (1, 1, "HEAD", None, ["bid", "1"]),
            (2, 1, "SCRIPT", None, ["bid", "2"]),
            (3, 3, "#text", "if (a < b) alert('x')", []),
            (1, 1, "BODY", None, ["bid", "3"]),
            (5, 8, "#comment", "a comment", []),
            (5, 1, "INPUT", None, ["bid", "4", "title", 'say "hi"', "disabled", ""]),
            (5, 3, "#text", "1 < 2 & 3", []),
            (5, 1, "IFRAME", None, ["bid", "5"]),
            (5, 1, "::before", None, []),
        ],
        inputValue={"index": [7], "value": [s("typed")]},
        contentDocumentIndex={"index": [9], "value": [1]},
    )
    frame = doc(
        [
            (-1, 9, "#document", None, []),
            (0, 1, "HTML", None, ["bid", "5a"]),
            (1, 1, "BODY", None, ["bid", "5b"]),
            (2, 1, "BUTTON", None, ["bid", "5c"]),
            (3, 3, "#text", "Go", []),
        ]
    )
    extra = {
        "4": {"visibility": 1.0, "bbox": [10.0, 20.5, 100.0, 30.0], "clickable": True, "set_of_marks": True},
        "2": {"visibility": 0.0, "bbox": None, "clickable": False, "set_of_marks": False},
    }
    return {"documents": [main, frame], "strings": strings}, extra


def test_the_page_snapshot_is_escaped_html_with_bids_live_state_and_iframes_inlined() -> None:
    dom, extra = _snapshot()
    assert page_html(parse_dom(dom), extra) == (
        '<html bid="0"><head bid="1"></head><body bid="3">'
        '<input bid="4" title="say &quot;hi&quot;" disabled="" input_value="typed" bounding_box_rect="10,20.5,100,30" is_clickable="true">'
        '1 &lt; 2 &amp; 3<iframe bid="5"><html bid="5a"><body bid="5b"><button bid="5c">Go</button></body></html></iframe>'
        "</body></html>"
    )
    assert page_html(None) == "" and page_html(parse_dom({"documents": []})) == ""


def test_pages_setting_and_the_recorder(tmp_path: Path) -> None:
    dom, extra = _snapshot()
    obs = {"axtree_object": {}, "dom_object": dom, "extra_element_properties": extra, "url": "http://x.test/"}
    page = BrowserSession(BrowserSettings())._page_state(obs)
    html = page.html()
    assert html is not None and 'bid="5c"' in html and page.html() is html  # made once
    assert "dom" not in page.model_dump()
    off = BrowserSession(BrowserSettings(pages=False))._page_state(obs)
    assert off.html() is None and StepCapture.of(off) is None  # no screenshot either here
    assert StepCapture.of(page) == StepCapture(png=None, html=html)

    recorder = RunRecorder(tmp_path / "run", config={}, config_hash="h")
    trajectory = Trajectory(trajectory_id="ep/1#0", task=Task(task_id="t", scope="s", benchmark="miniwob"))
    steps = [Step(index=0), Step(index=1)]
    recorder.start_episode(trajectory)
    recorder.record_step(trajectory, steps[0], StepCapture(html="<p bid='1'>x</p>"))
    recorder.record_step(trajectory, steps[1], None)
    recorder.close()
    assert (tmp_path / "run" / "pages" / "ep_1_0" / "0.html").read_text() == "<p bid='1'>x</p>"
    assert not (tmp_path / "run" / "pages" / "ep_1_0" / "1.html").exists()
    assert steps[0].screenshot is None and not (tmp_path / "run" / "screenshots").exists()


# --- end to end: a scripted run in real Chromium --------------------------------------------------


def _awm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "awm.cli", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def _answer(op: str, element: str, value: str) -> str:
    return f"`CLICK [{element}]`" if op == "CLICK" else f"`{op} [{element}] [{value}]`"


@pytest.mark.browser
def test_a_scripted_run_exports_to_records_the_loader_reads_and_the_scorer_scores_perfect(
    scripted_runs: Path, tmp_path: Path
) -> None:
    run_dir = scripted_runs / "scripted"  # `awm run --tasks login-user,click-test --seeds 0 --policy scripted`
    out = tmp_path / "m2w"
    done = _awm("traces", "export", str(run_dir), "--mind2web", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wrote {out / 'train' / 'train_0.json'}: 2 record(s), 4 step(s)" in done.stderr

    records = list(iter_records(out, "train"))
    assert sorted(r.website for r in records) == ["click-test", "login-user"]
    manifest = json.loads((out / "awm_export.json").read_text())
    with open_run(run_dir) as db:
        trajectories = {e["annotation_id"]: db.trajectory(e["episode_id"]) for e in manifest["records"]}
    steps_of = {e["annotation_id"]: e["steps"] for e in manifest["records"]}
    for record in records:
        trajectory = trajectories[record.annotation_id]
        assert record.domain == "miniwob" and record.confirmed_task == trajectory.task.goal
        by_index = {s.index: s for s in trajectory.steps}
        for action, shown in zip(record.actions, record.action_reprs, strict=True):
            step = by_index[steps_of[record.annotation_id][action.action_uid]]
            assert step.action is not None and step.target is not None
            assert shown.startswith(f"[{step.target.role}]  {step.target.label} -> ")  # as the agent saw it
            bid = step.action["args"]["bid"]
            assert action.target_id == bid  # the BrowserGym bid is the element id
            assert f'backend_node_id="{bid}"' in action.cleaned_html
            page = (run_dir / "pages" / safe_name(trajectory.trajectory_id) / f"{step.index}.html").read_text()
            assert f'bid="{bid}"' in page  # the page this step decided on
            assert all(c.backend_node_id != bid for c in action.neg_candidates)
    login = next(r for r in records if r.website == "login-user")
    user, password = re.findall(r'"([^"]+)"', login.confirmed_task)
    assert [(a.operation.op, a.operation.value) for a in login.actions] == [("TYPE", user), ("TYPE", password), ("CLICK", "")]
    assert login.action_reprs == [
        f"[textbox]  Username -> TYPE: {user}", f"[textbox]  Password -> TYPE: {password}", "[button]  Login -> CLICK",
    ]  # fmt: skip
    assert [c.tag for c in login.actions[2].neg_candidates] == ["input", "input"]
    click = next(r for r in records if r.website == "click-test")
    assert click.action_reprs == ["[button]  Click Me! -> CLICK"] and click.actions[0].pos_candidates[0].tag == "button"

    # a perfect prediction file, built from the records themselves, scores 100 on every metric
    lines = [
        json.dumps({"annotation_id": r.annotation_id, "action_uid": a.action_uid,
                    "prediction": _answer(a.operation.op, a.target_id or "", a.operation.value)})
        for r in records for a in r.actions
    ]  # fmt: skip
    (tmp_path / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    predictions = load_predictions(tmp_path / "predictions.jsonl")
    assert set(predictions) == {step_key(r.annotation_id, a.action_uid) for r in records for a in r.actions}
    report = score(iter_records(out, "train", with_html=False), predictions)
    for agg in (report.macro, report.micro):
        assert (agg.element_accuracy, agg.action_f1, agg.step_success_rate, agg.task_success_rate) == (100, 100, 100, 100)
        assert (agg.n_tasks, agg.n_steps) == (2, 4)
    scored = _awm("mind2web", "score", "--data", str(out), "--split", "train",
                  "--predictions", str(tmp_path / "predictions.jsonl"), "--json")  # fmt: skip
    assert scored.returncode == 0, scored.stdout + scored.stderr

    # exporting again gives the same file (ids from the run, the episode and the step)
    first = (out / "train" / "train_0.json").read_text()
    assert _awm("traces", "export", str(run_dir), "--mind2web", str(out)).returncode == 0
    assert (out / "train" / "train_0.json").read_text() == first


@pytest.mark.browser
def test_an_old_run_without_page_snapshots_is_refused_and_nothing_is_written(scripted_runs: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-run"
    shutil.copytree(scripted_runs / "scripted", old, ignore=shutil.ignore_patterns("pages"))
    out = tmp_path / "m2w"
    done = _awm("traces", "export", str(old), "--mind2web", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert str(old) in done.stderr and "no page snapshots" in done.stderr and "pages" in done.stderr
    assert not out.exists()
    with pytest.raises(DataError, match="no page snapshots"):
        export_run(old, out)
    assert not out.exists()


def _one_click_run(run: Path, reward: float) -> Path:
    """A run folder of one episode: a click on the page `PAGE`, recorded with its page snapshot."""
    recorder = RunRecorder(run, config={}, config_hash="h")
    trajectory = Trajectory(
        trajectory_id="ep-1",
        task=Task(task_id="browsergym/miniwob.click-test", goal="Click.", scope="miniwob/click-test", benchmark="miniwob"),
    )
    recorder.start_episode(trajectory)
    step = _step(0, "click", {"bid": "13"}, target=TargetDesc(role="button", label="Search"))
    trajectory.steps.append(step)
    recorder.record_step(trajectory, step, StepCapture(html=PAGE))
    trajectory.end, trajectory.verdict = "done", Verdict(reward=reward)
    recorder.end_episode(trajectory)
    recorder.close()
    return run


def test_export_refuses_what_it_cannot_write_cleanly(tmp_path: Path) -> None:
    """Before anything is written: a split folder with other files, a run whose episodes all failed."""
    run = _one_click_run(tmp_path / "run", reward=0.0)
    out = tmp_path / "m2w"
    with pytest.raises(DataError, match=r"no episode to export \(--include-failed .*ep-1: not a success"):
        export_run(run, out)
    assert not out.exists()
    report = export_run(run, out, include_failed=True)
    assert [r.episode_id for r in report.records] == ["ep-1"] and report.n_steps == 1
    (out / "train" / "train_7.json").write_text("[]")
    with pytest.raises(DataError, match=r"already holds train_7.json"):
        export_run(run, out, include_failed=True)
    bad = _awm("traces", "export", str(run), "ep-1", "--mind2web", str(out))
    assert bad.returncode == 2 and "--mind2web exports the whole run" in bad.stderr + bad.stdout


def test_a_destination_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`--mind2web /proc/...` (no file can be made there, even by root) or a folder below a plain file:
    refused before the export starts, one line, nothing written; a writable one then works."""
    run = _one_click_run(tmp_path / "run", reward=1.0)
    (tmp_path / "a-file").write_text("not a folder")
    bad = [tmp_path / "a-file" / "m2w", *([Path("/proc/awm-forbidden")] if Path("/proc").is_dir() else [])]
    for out in bad:
        done = _awm("traces", "export", str(run), "--mind2web", str(out))
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"--mind2web {out}: cannot be written" in done.stderr
        assert not out.exists()
    good = _awm("traces", "export", str(run), "--mind2web", str(tmp_path / "new" / "m2w"))
    assert good.returncode == 0, good.stderr
    assert [r.annotation_id for r in iter_records(tmp_path / "new" / "m2w", "train")]
