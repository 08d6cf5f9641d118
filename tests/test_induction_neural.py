"""Neural induction against a stub OpenAI-compatible server (and one test with the real local model)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from awm.config import load_settings
from awm.induction.abstraction import abstract_trajectory
from awm.induction.neural import (
    InductionError,
    induce_neural,
    parse_answer,
    plan_batches,
    render_trajectory,
    style_for,
    system_prompt,
    user_prompt,
)
from awm.induction.offline import induce_into_store
from awm.llm.factory import make_client
from awm.memory.store import WorkflowStore
from awm.tokens import CharEstimateCounter, count_messages
from awm.trajectory import Step, TargetDesc, Task, Trajectory, load_trajectories
from tests.stub_llm_server import Reply, StubLLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"

LOGIN_ANSWER = """## log_in
Log in with a username and a password.

I type the username into the Username box.
fill('[textbox] Username', '{username}')

I type the password into the Password box.
fill('[textbox] Password', '{password}')

I press Login.
click('[button] Login')
"""

FILL_ONLY_ANSWER = """Here are the workflows:

## enter_credentials
Type the credentials without submitting.

fill('[textbox] Username', '{user}')

fill('[textbox] Password', '{secret}')

These workflows cover the tasks.
"""


def _logins():
    return [t for t in load_trajectories(FIXTURES) if t.task.scope == "miniwob/login-user"][:3]


def _client(stub: StubLLMServer):
    settings = load_settings(
        overrides={
            "llm": {
                "backend": "openai",
                "base_url": stub.base_url,
                "api_key": "x",
                "model": "stub",
                "cache": False,
            }
        }
    )
    return make_client(settings)


def _prompt_text(request) -> str:
    return "\n\n".join(m["content"] for m in request.body["messages"])


def test_valid_answer_becomes_workflows_with_provenance():
    with StubLLMServer([Reply(text=LOGIN_ANSWER)]) as stub:
        workflows, report = induce_neural(
            _logins(), client=_client(stub), admission="gt", counter=CharEstimateCounter()
        )
        assert len(stub.requests) == 1
        prompt = _prompt_text(stub.requests[0])
    (workflow,) = workflows
    assert workflow.name == "log_in"
    assert [s.value for s in workflow.steps] == ["{username}", "{password}", ""]
    assert workflow.parameters == ["username", "password"]
    provenance = workflow.provenance
    assert provenance.mode == "neural" and provenance.model == "stub" and provenance.admission == "gt"
    assert provenance.trajectory_ids == ["login-s1", "login-s2", "login-s3"]
    assert provenance.prompt_hash == hashlib.sha256(prompt.encode()).hexdigest()
    # The prompt shows targets by role and label and never the bids of the recorded steps.
    assert "fill('[textbox] Username', 'kanesha')" in prompt
    assert "'14'" not in prompt and "'23'" not in prompt
    assert report.calls == 1 and report.rejected == []


def test_chatter_around_workflows_is_tolerated_and_one_step_workflows_are_rejected():
    answer = FILL_ONLY_ANSWER + "\n## just_click\nClick it.\nclick('[button] Login')\n"
    workflows, rejected = parse_answer(answer, source="answer")
    assert [w.name for w in workflows] == ["enter_credentials"]
    assert len(workflows[0].steps) == 2
    assert any("'just_click' has 1 step(s)" in r for r in rejected)


def test_workflows_that_name_elements_by_id_are_rejected():
    answer = "## by_id\nUse ids.\n\nfill('14', '{username}')\n\nclick('[button] Login')\n"
    workflows, rejected = parse_answer(answer, source="answer")
    assert workflows == []
    assert "step 1 names its element by id" in rejected[0]


def test_garbage_answer_is_rejected_and_the_store_does_not_change(tmp_path: Path):
    store = WorkflowStore(tmp_path / "memory.sqlite")
    with StubLLMServer([Reply(text=LOGIN_ANSWER)]) as stub:
        first = induce_into_store(
            store,
            "miniwob/login-user",
            _logins()[:2],  # other inputs than below: the same induction again would be "already committed"
            mode="neural",
            admission="gt",
            client=_client(stub),
            counter=CharEstimateCounter(),
        )
    assert first.commit.version is not None and first.commit.version.version == 1
    before = store.head("miniwob/login-user")
    for garbage in ("I am sorry, I cannot do that.", "## broken\nclick(\nfill('[textbox] A'", ""):
        with StubLLMServer([Reply(text=garbage)]) as stub:
            with pytest.raises(InductionError, match="no usable workflow"):
                induce_into_store(
                    store,
                    "miniwob/login-user",
                    _logins(),
                    mode="neural",
                    admission="gt",
                    client=_client(stub),
                    counter=CharEstimateCounter(),
                )
    after = store.head("miniwob/login-user")
    assert after.version == before.version == 1
    assert after.workflows == before.workflows
    assert len(store.log("miniwob/login-user")) == 1


def test_tiny_budget_splits_into_batches_whose_results_are_merged_and_deduplicated():
    counter = CharEstimateCounter()
    logins = _logins()
    one = plan_batches(
        [abstract_trajectory(logins[0])], style="webarena", counter=counter, budget_tokens=100_000
    )
    budget = one[0].prompt_tokens + 5  # room for exactly one trajectory per call
    replies = [
        Reply(text=LOGIN_ANSWER),
        Reply(text=LOGIN_ANSWER.replace("## log_in", "## sign_in")),  # same steps, other name: a duplicate
        Reply(text=FILL_ONLY_ANSWER),
    ]
    with StubLLMServer(replies) as stub:
        workflows, report = induce_neural(logins, client=_client(stub), counter=counter, budget_tokens=budget)
        assert len(stub.requests) == 3
        assert all(count_messages(r.body["messages"], counter) <= budget for r in stub.requests)
    assert report.batches == [["login-s1"], ["login-s2"], ["login-s3"]]
    assert [w.name for w in workflows] == ["log_in", "enter_credentials"]
    assert workflows[0].provenance.trajectory_ids == ["login-s1", "login-s2"]
    assert workflows[1].provenance.trajectory_ids == ["login-s3"]
    assert len({w.provenance.prompt_hash for w in workflows}) == 2


def _size(rendered: list[str], counter) -> int:
    messages = [
        {"role": "system", "content": system_prompt("webarena")},
        {"role": "user", "content": user_prompt(rendered)},
    ]
    return count_messages(messages, counter)


def test_a_trajectory_too_big_for_a_batch_is_shrunk_then_refused():
    counter = CharEstimateCounter()
    abstract = abstract_trajectory(_logins()[0])
    full = _size([render_trajectory(abstract, "webarena", 0)], counter)
    bare = _size([render_trajectory(abstract, "webarena", 2)], counter)
    assert bare < full
    (shrunk,) = plan_batches([abstract], style="webarena", counter=counter, budget_tokens=full - 1)
    assert shrunk.detail >= 1 and shrunk.prompt_tokens <= full - 1
    assert "kanesha" in shrunk.messages[1]["content"]  # shortened, never dropped
    with pytest.raises(InductionError, match=f"trajectory login-s1 needs {bare} prompt tokens"):
        plan_batches([abstract], style="webarena", counter=counter, budget_tokens=bare - 1)
    with pytest.raises(InductionError, match="does not even hold the instructions"):
        plan_batches([abstract], style="webarena", counter=counter, budget_tokens=_size([], counter))


@pytest.mark.llm
def test_real_local_model_induces_a_parseable_workflow(local_llm):
    workflows, report = induce_neural(_logins(), client=local_llm, admission="gt", max_tokens=400)
    assert workflows, report.rejected
    assert all(len(w.steps) >= 2 for w in workflows)
    assert all(w.provenance.mode == "neural" and w.provenance.prompt_hash for w in workflows)


def test_mind2web_trajectories_use_the_mind2web_text_style():
    trajectory = Trajectory(
        trajectory_id="m1",
        task=Task(
            task_id="ann-1", goal="Book a table for 2", scope="mind2web/exploretock", benchmark="mind2web"
        ),
        steps=[
            Step(
                index=0,
                action={"name": "TYPE", "args": {"id": "881", "value": "2"}},
                target=TargetDesc(role="textbox", label="Guests"),
                thought="Set the party size.",
            ),
            Step(index=1, action_str="CLICK [902]", target=TargetDesc(role="button", label="Search")),
        ],
    )
    assert style_for([trajectory]) == "mind2web"
    text = render_trajectory(abstract_trajectory(trajectory), "mind2web")
    assert (
        text
        == "Task: Book a table for 2\nSet the party size.\n[textbox] Guests -> TYPE: 2\n[button] Search -> CLICK"
    )
    assert "881" not in system_prompt("mind2web") + text
    answer = (
        "## book_table\nBook a table.\n[textbox] Guests -> TYPE: {party_size}\n[button] Search -> CLICK\n"
    )
    (workflow,), rejected = parse_answer(answer, source="answer")
    assert rejected == [] and workflow.parameters == ["party_size"]
