"""MindAct's pruned DOM tree (`awm.mind2web.dom_tree`): golden texts, pruning rules, fitting, and runs.

The golden texts below were written by hand, following the published algorithm step by step (not by
running our code): MindAct's ``prune_tree`` and ``get_tree_repr`` (Deng et al. 2023, "Mind2Web: Towards
a Generalist Agent for the Web"; github.com/OSU-NLP-Group/Mind2Web, ``src/data_utils/dom_utils.py``;
the copy AWM prompts with, Wang et al. 2024, "Agent Workflow Memory",
github.com/zorazrw/agent-workflow-memory, ``mind2web/utils/env.py``), with their defaults: descendants
to 6 levels and 50 nodes, 3 element siblings each side, 5 words per attribute value (words of 15+
characters dropped), 20 words of attributes and of each text node.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from awm.config import load_settings
from awm.errors import ConfigError
from awm.llm.factory import make_client
from awm.mind2web.data import iter_records, step_key
from awm.mind2web.dom_tree import MindActPage, render_tree
from awm.mind2web.prompt import build_step_prompt, system_prompt
from awm.pipeline.mind2web_run import RunOptions, register_run, run_mind2web
from awm.tokens import CharEstimateCounter
from tests.stub_llm_server import Reply, StubLLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "mind2web"

# A flight search page shaped like Mind2Web's cleaned_html: every element has a backend_node_id, text
# sits in <text> nodes, and tags are separated by spaces.
PAGE = (
    '<html backend_node_id="1"> <body backend_node_id="2"> <div backend_node_id="3"> '
    '<div backend_node_id="4" class="search-panel"> '
    '<label backend_node_id="5"> <text backend_node_id="6">From</text> </label> '
    '<input backend_node_id="7" type="text" aria_label="Departure city" placeholder="City or airport"/> '
    '<label backend_node_id="8"> <text backend_node_id="9">To</text> </label> '
    '<input backend_node_id="10" type="text" aria_label="Destination city" placeholder="City or airport"/> '
    '<button backend_node_id="11" type="submit" aria_label="Search for flights with flexible dates" '
    'class="btn btn-primary-large-xl"> '
    '<span backend_node_id="12"> <text backend_node_id="13">Search flights</text> </span> </button> '
    '<a backend_node_id="14" href="/deals"> <text backend_node_id="15">Today only: save up to 30% on '
    "round-trip flights to over 100 destinations when you book with your miles before midnight tonight"
    "</text> </a> "
    '<a backend_node_id="16" href="/help" title="Help &amp; support"> '
    '<text backend_node_id="17">Help</text> </a> '
    "</div> </div> "
    '<nav backend_node_id="30"> <a backend_node_id="31" href="/account"> '
    '<text backend_node_id="32">Sign in</text> </a> </nav> '
    '<footer backend_node_id="20"> <a backend_node_id="21" href="/privacy" '
    'title="https://example.com/privacy"> <text backend_node_id="22">Privacy</text> </a> </footer> '
    "</body> </html>"
)

# Candidates 11 (the search button) and 21 (the privacy link). By hand:
# - kept ids: 11, its ancestors 4 3 2 1, its descendants 12 13, its element siblings within 3 places
#   (7 8 10 | 14 16: the label "From", 4 places before, goes); 21, its ancestors 20 2 1, its text 22.
#   The nav (30 31 32) is nobody's relative: removed, "Sign in" with it.
# - unwrapped (no attribute but the id, no text child, one child left): div 3 (only div 4 is left in
#   it) and the footer 20 (only the link 21). body keeps two children, so it stays.
# - ids shown only on candidates: input 7 and 10, links 14 and 16 are shown without theirs.
# - attribute words: type, then aria_label (5 words: "...flexible", "dates" cut), then class (the
#   19-character "btn-primary-large-xl" dropped); "https://..." values are skipped; "&amp;" decodes.
# - the deal text is cut to its first 20 words ("midnight tonight" go); an empty input is written
#   "(input words )", as the published "/>" becomes " )".
GOLDEN = (
    "(html (body (div search-panel "
    "(input text departure city city or airport ) "
    "(label To ) "
    "(input text destination city city or airport ) "
    "(button id=11 submit search for flights with flexible btn (span Search flights ) ) "
    "(a Today only: save up to 30% on round-trip flights to over 100 destinations when you book "
    "with your miles before ) "
    "(a help & support Help ) ) "
    "(a id=21 Privacy ) ) )"
)
# The same pruning with keep_html_brackets=True, the form AWM's get_target_obs passes.
GOLDEN_HTML_BRACKETS = (
    "<html> <body> <div search-panel> "
    "<input text departure city city or airport /> "
    "<label> To </label> "
    "<input text destination city city or airport /> "
    "<button id=11 submit search for flights with flexible btn> <span> Search flights </span> </button> "
    "<a> Today only: save up to 30% on round-trip flights to over 100 destinations when you book "
    "with your miles before </a> "
    "<a help & support> Help </a> </div> "
    "<a id=21> Privacy </a> </body> </html>"
)


@pytest.fixture(scope="module")
def records():
    return list(iter_records(FIXTURES, "test_task"))


def test_golden_page_follows_the_published_algorithm() -> None:
    assert render_tree(PAGE, ["11", "21"]) == GOLDEN


def test_golden_page_with_html_brackets() -> None:
    assert render_tree(PAGE, ["11", "21"], keep_html_brackets=True) == GOLDEN_HTML_BRACKETS


def test_golden_fixture_step(records) -> None:
    """The first step of the united fixture task, candidate 101 alone.

    By hand: kept are 101, its ancestors (div 3, body 2, html 1), its text 9000 and its siblings header
    4, button 110 and link 111; body, left with one child and no attribute, is unwrapped. The fixture's
    html has no whitespace between tags, and the published rewriting adds none: tag words and text touch.
    """
    action = records[0].actions[0]
    expected = (
        "(html(div page(headerWelcome)(button id=101 one-wayOne-way)(button round tripRound trip)(aDeals)))"
    )
    assert render_tree(action.cleaned_html, ["101"]) == expected


def test_ancestors_of_a_deep_candidate_are_kept_in_order() -> None:
    levels = "".join(f'<div backend_node_id="{i}" class="level-{i}"> ' for i in range(2, 12))
    html = (
        f'<html backend_node_id="1"> {levels}<button backend_node_id="99"> <text>Go</text> </button> '
        + "</div> " * 10
        + '<p backend_node_id="50"> <text>Elsewhere</text> </p> </html>'
    )
    text = render_tree(html, ["99"])
    opening = "(html " + "".join(f"(div level-{i} " for i in range(2, 12))
    assert text == opening + "(button id=99 Go ) " + ") " * 10 + ")"
    assert "Elsewhere" not in text  # a sibling of an ancestor is no relative of the candidate


def test_only_candidates_show_ids(records) -> None:
    for record in records:
        for action in record.actions:
            ids = [c.backend_node_id for c in [*action.pos_candidates, *action.neg_candidates]]
            for k in range(1, len(ids) + 1):
                shown = re.findall(r"id=(\d+)", render_tree(action.cleaned_html, ids[:k]))
                assert sorted(shown) == sorted(set(ids[:k])), (record.annotation_id, action.action_uid, k)
    shown = re.findall(r"id=(\d+)", render_tree(PAGE, ["11", "21"]))
    assert shown == ["11", "21"]  # document order; 7, 10, 14 and 16 are kept without their ids


def test_candidate_missing_from_the_page_is_shown_after_the_tree() -> None:
    page = MindActPage(PAGE, {"999": ("button", {"aria_label": "Ghost"})})
    # 21 alone: body keeps one child (the footer's link, once the footer is unwrapped), so it goes too
    assert page.render(["21", "999"]) == "(html (a id=21 Privacy ) ) (button id=999 ghost )"
    assert page.render(["21", "404"]) == page.render(["21"])  # nothing known of it: not shown


def test_a_page_that_is_not_well_formed_xml_still_renders() -> None:
    html = '<html backend_node_id="1"> <div backend_node_id="2"> <input backend_node_id="3"> </html>'
    assert "id=3" in render_tree(html, ["3"])


def test_fit_drops_the_lowest_ranked_and_counts_renders() -> None:
    page = MindActPage(PAGE)
    full = page.fit(["21", "11"], 10_000)
    assert full == GOLDEN and page.renders == 1  # one prune, one render when the page fits
    small = page.fit(["21", "11"], len(render_tree(PAGE, ["21"])))
    assert "id=21" in small and "id=11" not in small  # the lower-ranked 11 went
    assert page.renders == 2  # the full render came from the cache; one render for ["21"]
    cut = page.fit(["21", "11"], 20)  # even 21 alone is longer: its tree is cut
    assert len(cut) <= 20 and cut.endswith("...")
    ranked = [str(i) for i in (7, 8, 10, 11, 14, 16, 21, 5, 12, 20)]
    page = MindActPage(PAGE)
    page.fit(ranked, 200)
    assert page.renders <= 2 + math.ceil(math.log2(len(ranked)))  # a binary search, not 3 per candidate


# --- the prompt and `awm mind2web run` ----------------------------------------------------------------


def test_step_prompt_in_either_format_shows_backend_node_ids(records) -> None:
    record, action = records[0], records[0].actions[0]
    ranked = ["101", "110", "111"]
    kwargs = {"counter": CharEstimateCounter(), "context_window": 4096, "completion_tokens": 64}
    tree = build_step_prompt(record, action, ranked, page_format="mindact", **kwargs)
    lines = build_step_prompt(record, action, ranked, page_format="compact", **kwargs)
    assert tree.fitted.messages[0]["content"].startswith(system_prompt("mindact"))
    assert "id=ID" in system_prompt("mindact") and "[ID]" in system_prompt("compact")
    assert tree.observation == render_tree(action.cleaned_html, ranked)
    assert "[101]" in lines.observation and "id=101" not in lines.observation
    assert tree.page_renders == 1 and lines.page_renders >= 1


def _scores(tmp_path: Path, records) -> Path:
    """MindAct-style scores with the positives first, so the top-k holds the target where there is one."""
    table = {
        step_key(r.annotation_id, a.action_uid): {
            c.backend_node_id: float(c in a.pos_candidates) for c in [*a.pos_candidates, *a.neg_candidates]
        }
        for r in records
        for a in r.actions
    }
    path = tmp_path / "scores_all_data.pkl"
    path.write_bytes(pickle.dumps({"scores": table}))
    return path


def _gold(action) -> str:
    op, target = action.operation.op, action.target_id or "0"
    return f"{op} [{target}]" if op == "CLICK" else f"{op} [{target}] [{action.operation.value}]"


@pytest.mark.parametrize("page_format", ["awm", "mindact", "compact"])
def test_cli_run_with_each_page_format(tmp_path: Path, records, monkeypatch, page_format: str) -> None:
    app = typer.Typer()
    register_run(app)

    @app.callback()
    def _root() -> None:
        """Test app."""

    united = [r for r in records if r.website == "united"]
    answers = [_gold(a) for r in united for a in r.actions]
    out = tmp_path / "run"
    args = ["run", "--data", str(FIXTURES), "--website", "united", "--ranker", "mindact"]
    args += ["--scores", str(_scores(tmp_path, records)), "--backend", "openai", "--model", "stub"]
    args += ["--no-cache", "--out", str(out), "--page-format", page_format, "--exemplars", "1"]
    with StubLLMServer([Reply(text=a) for a in answers]) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("AWM_HOME", str(tmp_path / "home"))
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        bodies = [r.body for r in stub.requests]
    assert len(bodies) == len(answers)
    first = bodies[0]["messages"]
    assert first[0]["content"].startswith(system_prompt(page_format))  # type: ignore[arg-type]
    example = first[0]["content"].split("## Examples", 1)[1]  # a train step, in the same format
    opening = {"awm": "Page:\n<html", "mindact": "Page:\n(html", "compact": "Page:\n"}[page_format]
    assert opening in example and "Answer: " in example
    shown = "[101]" if page_format == "compact" else "id=101"
    assert shown in first[1]["content"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["options"]["page_format"] == page_format
    assert summary["micro"]["step_success_rate"] == pytest.approx(100.0)  # the ids scored as they are
    assert f"{page_format} page" in (out / "summary.md").read_text()


def test_page_format_is_a_result_field_and_old_runs_were_compact(tmp_path: Path, records) -> None:
    out = tmp_path / "run"
    scores = str(_scores(tmp_path, records))
    options = RunOptions(data=str(FIXTURES), limit=1, ranker="mindact", scores=scores)
    assert options.page_format == "awm"  # the default: the page as AWM prompted with it
    counter = CharEstimateCounter()
    with StubLLMServer(default=Reply(text="CLICK [101]")) as stub:
        llm = {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False}
        client = make_client(load_settings(overrides={"llm": llm}))
        run_mind2web(options, out, client=client, counter=counter)
        compact = options.model_copy(update={"page_format": "compact"})
        with pytest.raises(ConfigError, match="page_format: 'awm' -> 'compact'"):
            run_mind2web(compact, out, client=client, counter=counter)
        # a run.json from before the option: its pages were compact, so an awm resume is refused
        saved = json.loads((out / "run.json").read_text())
        saved.pop("page_format")
        (out / "run.json").write_text(json.dumps(saved))
        with pytest.raises(ConfigError, match="page_format: 'compact' -> 'awm'"):
            run_mind2web(options, out, client=client, counter=counter)
