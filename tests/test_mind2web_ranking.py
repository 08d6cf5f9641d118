"""Mind2Web ranking (MindAct scores through a restricted unpickler, offline MiniLM ranker) and pruning."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import pytest

from awm.errors import DataError
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.prune import parse_dom, prune_dom, prune_html
from awm.mind2web.ranking import (
    EmbeddingRanker,
    MindActRanker,
    load_mindact_scores,
    recall_at_k,
    restricted_loads,
)

FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"


@pytest.fixture(scope="module")
def test_records():
    return list(iter_records(FIXTURES, "test_task"))


# --- restricted unpickler ---------------------------------------------------------------------------


class _Exploit:
    """Unpickling this would run a shell command that creates a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_code_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"scores": {"a_b": {"1": _Exploit(marker)}}})
    with pytest.raises(pickle.UnpicklingError, match=r"refused to load (posix|os|nt)\.system"):
        restricted_loads(payload)
    path = tmp_path / "scores_all_data.pkl"
    path.write_bytes(payload)
    with pytest.raises(DataError, match="not a plain-data pickle"):
        load_mindact_scores(path)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_restricted_unpickler_loads_plain_data(protocol: int) -> None:
    data = {"scores": {"a_1": {"10": 0.5, "11": -2}}, "ranks": {"a_1": {"10": 1, "11": 2}}, "s": {1, 2}}
    assert restricted_loads(pickle.dumps(data, protocol=protocol)) == data


def test_numpy_scalars_are_rebuilt_without_numpy_reducers() -> None:
    np = pytest.importorskip("numpy")
    data = {"k": {"1": np.float32(0.25), "2": np.int64(-3), "3": np.float64(1.5)}}
    loaded = restricted_loads(pickle.dumps(data))
    assert loaded == {"k": {"1": 0.25, "2": -3, "3": 1.5}}
    assert all(type(v) in (float, int) for v in loaded["k"].values())
    # a numpy object array (not a plain scalar) is refused
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        restricted_loads(pickle.dumps(np.array([1.0, 2.0])))
    # a scalar whose bytes do not match its type is refused, not misread
    assert struct.calcsize("<f") == 4


def test_mindact_scores_and_ranks(tmp_path: Path, test_records) -> None:
    record = test_records[0]
    action = record.actions[1]  # target 102, negatives 112 and 113
    key = step_key(record.annotation_id, action.action_uid)
    path = tmp_path / "scores.pkl"
    path.write_bytes(pickle.dumps({"scores": {key: {"102": 0.1, "112": 0.9, "113": 0.5}}, "ranks": {}}))
    ranking = MindActRanker.from_file(path).rank(record, action, [])
    assert [cid for cid, _ in ranking] == ["112", "113", "102"]
    # ranks only: lower rank is better
    path.write_bytes(pickle.dumps({"ranks": {key: {"102": 1, "112": 3, "113": 2}}}))
    assert [cid for cid, _ in MindActRanker.from_file(path).rank(record, action, [])] == ["102", "113", "112"]
    # a step the file does not cover is an error naming it
    with pytest.raises(DataError, match=record.actions[0].action_uid):
        MindActRanker.from_file(path).rank(record, record.actions[0], [])


def test_mindact_scores_reject_non_numbers(tmp_path: Path) -> None:
    path = tmp_path / "scores.pkl"
    path.write_bytes(pickle.dumps({"scores": {"a_b": {"1": "high"}}}))
    with pytest.raises(DataError, match="entry 'a_b', candidate '1': expected a number"):
        load_mindact_scores(path)


# --- offline ranker -------------------------------------------------------------------------------------


def test_embedding_ranker_recall_on_fixtures(test_records) -> None:
    ranker = EmbeddingRanker()
    report = recall_at_k(ranker, test_records, 3)
    steps = sum(len(r.actions) for r in test_records)
    assert report.steps == steps and report.no_positive == 1
    # Every step that has a positive has it in the top 3 (fixture pages have 2-3 candidates, so also
    # check the ranking is not trivially "all": top-1 must beat chance).
    assert report.hits == steps - 1
    top1 = recall_at_k(ranker, test_records, 1)
    assert top1.recall > 0.45, top1
    ranking = ranker.rank(test_records[0], test_records[0].actions[0], [])
    assert ranking[0][0] == "101"  # "One-way" for a one-way flight search
    assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)


# --- pruning ------------------------------------------------------------------------------------------------


HTML = (
    '<html backend_node_id="1"><body backend_node_id="2"><div><form backend_node_id="5">'
    '<label>Departure city</label><input backend_node_id="10" placeholder="From" type="text"/>'
    '<span>To</span><input backend_node_id="11" aria_label="Destination">'
    '<button backend_node_id="12"> Search <b>now</b></button></form></div>'
    '<nav><a backend_node_id="20" title="Home">Home page</a><p backend_node_id="21">Not kept</p></nav>'
    "</body></html>"
)


def test_prune_keeps_candidates_with_ids_text_context() -> None:
    text = prune_html(HTML, ["12", "10", "20"])
    lines = text.splitlines()
    assert any(line.strip().startswith("[12] <button> Search now") for line in lines)
    assert any('[10] <input placeholder="From" type="text">' in line for line in lines)
    assert any('[20] <a title="Home"> Home page' in line for line in lines)
    assert "Departure city" in text  # sibling text of the From box
    assert "<form>" in text and "<nav>" in text  # ancestors' tags
    # non-candidates never get an id; a neighbour's text may appear as plain context
    assert "[11]" not in text and "[21]" not in text
    assert "Not kept" in text and "Destination" not in text
    # document order, not rank order
    assert text.index("[10]") < text.index("[12]") < text.index("[20]")


def test_prune_respects_max_chars_by_dropping_lowest_ranked() -> None:
    full = prune_html(HTML, ["12", "10", "20"])
    small = prune_html(HTML, ["12", "10", "20"], max_chars=60)
    assert len(small) <= 60 < len(full)
    assert "[12]" in small and "[20]" not in small


def test_prune_shows_candidates_missing_from_the_page() -> None:
    dom = parse_dom(HTML)
    text = prune_dom(dom, ["12", "999"], fallback={"999": ("button", {"aria_label": "Ghost"})})
    assert '[999] <button aria_label="Ghost">' in text and "[12]" in text


def test_prune_on_fixture_pages_keeps_every_candidate(test_records) -> None:
    for record in test_records:
        for action in record.actions:
            ids = [c.backend_node_id for c in [*action.pos_candidates, *action.neg_candidates]]
            text = prune_html(action.cleaned_html, ids)
            for cid in ids:
                assert f"[{cid}]" in text, (record.annotation_id, action.action_uid, cid)
