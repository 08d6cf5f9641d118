"""The LLM web agent: prompt shape (stable prefix, no example ids, fitted whole), grammar only for the
local backend, retries that show the exact error, and one real-model episode through the whole path."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from awm.actions import action_grammar, actions_offered, parse_action
from awm.config import BrowserSettings, Settings, load_settings
from awm.errors import ActionParseError, PromptTooLargeError
from awm.llm.factory import make_client
from awm.llm.openai_backend import OpenAICompatibleClient
from awm.memory.view import MemoryView
from awm.memory.workflow import Workflow, WorkflowStep
from awm.tokens import CharEstimateCounter, count_messages
from awm.trajectory import Step, TargetDesc, Task
from awm.webarena import prompts
from awm.webarena.agent import LLMAgent, prompt_hash
from awm.webarena.env import BrowserSession, PageState
from awm.webarena.fingerprint import ControlState, PageSnapshot
from awm.webarena.guidance_filters import spent_plain_actions, without_spent_choices, without_undoing_clicks
from awm.webarena.harness import DecisionContext, HarnessConfig, cycle_period, page_targets, run_episode
from tests.stub_llm_server import Reply, StubLLMServer
from tests.test_actions import gbnf_to_regex

TASK = Task(task_id="browsergym/miniwob.login-user", scope="miniwob/login-user", benchmark="miniwob", seed=0)
GOAL = 'Enter the username "kanesha" and the password "x9" into the text fields and press login.'


# A goal that names no values: nothing on the page waits for one (`goal_progress`).
PLAIN_GOAL = "Log in with the account written on the card and press the button."


def page(ids: list[str], *, extra: str = "", goal: str = GOAL) -> PageState:
    elements = {
        i: TargetDesc(role="textbox" if n < 2 else "button", label=f"field {n}") for n, i in enumerate(ids)
    }
    text = "\n".join(f"[{i}] {d.role} '{d.label}'" for i, d in elements.items()) + extra
    return PageState(text=text, ids=ids, elements=elements, url="", goal=goal, fingerprint=f"fp-{len(text)}")


def past_step(index: int, action: str, feedback: str) -> Step:
    return Step(index=index, thought=f"thought {index}", action_str=action, feedback=feedback)


def ctx(p: PageState, history: list[Step], *, retry_error: str = "", feedback: str = "") -> DecisionContext:
    return DecisionContext(
        task=TASK,
        page=p,
        history=history,
        feedback=feedback,
        retry_error=retry_error,
        step_index=len(history),
    )


def workflows() -> list[Workflow]:
    login = Workflow(
        name="log_in",
        description="Log in with a user name and password.",
        steps=[
            WorkflowStep(
                reasoning="Type the user name.",
                action="fill",
                target=TargetDesc(role="textbox", label="Username"),
                value="{username}",
            ),
            WorkflowStep(
                reasoning="Submit.", action="click", target=TargetDesc(role="button", label="Login")
            ),
        ],
    )
    other = Workflow(
        name="clear_field",
        description="Empty a text box.",
        steps=[WorkflowStep(action="clear", target=TargetDesc(role="textbox", label="Search"))],
    )
    return [login, other]


def stub_settings(stub: StubLLMServer, **llm: object) -> Settings:
    base = {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False}
    return load_settings(overrides={"llm": {**base, **llm}})


def local_style_client(stub: StubLLMServer, settings: Settings) -> OpenAICompatibleClient:
    """The client class the local backend uses, in its llama.cpp configuration, pointed at the stub."""
    return OpenAICompatibleClient(
        model="qwen-stub", api_key="not-needed", settings=settings.llm, base_url=stub.base_url,
        backend="local", llama_cpp=True,
    )  # fmt: skip


def test_a_decision_carries_the_prompt_tokens_the_server_reused_from_its_cache() -> None:
    """What the llama.cpp server reports (`prompt_tokens_details.cached_tokens`) reaches the decision, and
    the harness adds it to the step (`Step.cached_prompt_tokens`), so a run says what its prompts cost."""
    with StubLLMServer([Reply(text="click('12')", prompt_tokens=640, cached_tokens=600)]) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        decision = agent.decide(ctx(page(["11", "12", "13"]), []))
    assert (decision.prompt_tokens, decision.cached_prompt_tokens) == (640, 600)


# --- prompt shape (no model call) ---------------------------------------------------------------


def _served_on(port: int, task: Task) -> DecisionContext:
    """The same arena page and history as served on `port` (the port a site gets is drawn per run)."""
    origin = f"http://127.0.0.1:{port}"
    p = page(["11", "12", "13"], extra=f"\n[14] link 'Report' (see {origin}/report/1)").model_copy(
        update={"url": f"{origin}/ticket/7"}
    )
    earlier = Step(index=0, action_str="click('9')", url=f"{origin}/", feedback=f"Page changed: now at {origin}/ticket/7")
    return DecisionContext(task=task, page=p, history=[earlier], feedback=earlier.feedback, step_index=1)


def test_two_runs_on_different_ports_send_byte_identical_prompts() -> None:
    """An arena site's or a served live page's origin is shown by a stable name, so the same page gives the
    same prompt, and the embedded model the same answer, whatever port the run drew; WebArena's (whose
    action set has goto, where the model types URLs) is shown as it is."""
    with StubLLMServer() as stub:  # never called: build_request only builds
        settings = stub_settings(stub)
        agent = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings)
    trac = Task(task_id="browsergym/sites.trac.open-ticket", goal=GOAL, scope="sites/trac/open-ticket", benchmark="sites", seed=2)
    first, second = (agent.build_request(_served_on(port, trac)).request for port in (53699, 60565))
    assert first.messages == second.messages
    sent = "\n".join(m["content"] for m in first.messages)
    assert "http://trac.arena/ticket/7" in sent and "http://trac.arena/report/1" in sent and "127.0.0.1" not in sent
    live = Task(task_id="browsergym/openended", goal=GOAL, scope="live/x", benchmark="live")
    assert "http://local.site/ticket/7" in agent.build_request(_served_on(41000, live)).request.messages[-1]["content"]
    webarena = Task(task_id="browsergym/webarena.3", goal=GOAL, scope="webarena/shopping", benchmark="webarena")
    assert "127.0.0.1:41000/ticket/7" in agent.build_request(_served_on(41000, webarena)).request.messages[-1]["content"]




def test_system_message_and_history_are_a_stable_prefix_across_steps() -> None:
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        memory = MemoryView(scope="miniwob/login-user", version=3, workflows=tuple(workflows()))
        agent = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings, memory=memory)
        s1 = past_step(0, "fill('11', 'kanesha')", "Page: textbox 'field 0' now 'kanesha'")
        s2 = past_step(1, "fill('12', 'x9')", "Page: textbox 'field 1' now 'x9'")
        first, *_ = agent.build_request(ctx(page(["11", "12", "13"]), []))
        second, *_ = agent.build_request(ctx(page(["21", "22", "23", "24"]), [s1], feedback=s1.feedback))
        third, *_ = agent.build_request(
            ctx(page(["31", "32", "33"], extra="\n[34] link 'more'"), [s1, s2], feedback=s2.feedback)
        )
    # System + memory: byte-identical on steps 1 and 3, and it carries the workflows.
    assert first.messages[0]["content"] == third.messages[0]["content"]
    assert "## log_in" in first.messages[0]["content"] and "## clear_field" in first.messages[0]["content"]
    # The user message grows at the end only: everything before the page is kept from the last step.
    for before, after in ((second, third),):
        head = before.messages[1]["content"].split("\n\n## Current page")[0]
        assert after.messages[1]["content"].startswith(head)
    assert third.messages[1]["content"].startswith("## Goal\n" + GOAL)
    # The last action's result is shown once (in the history), not twice.
    assert third.messages[1]["content"].count(s2.feedback) == 1


def test_system_text_has_no_example_ids_a_page_could_have() -> None:
    memory = MemoryView(scope="s", version=1, workflows=tuple(workflows()))
    text = prompts.system_text(prompts.action_names_for(TASK)) + "\n".join(
        prompts.memory_texts(memory.workflows)
    )
    quoted = re.findall(r"""['"]([^'"]*)['"]""", text)
    bid_like = [q for q in quoted if re.fullmatch(r"[a-z]{0,2}\d+", q)]
    assert bid_like == []
    assert "click('BID')" in text  # the placeholder is there instead


def test_request_fits_the_context_window_and_keeps_the_instructions() -> None:
    huge = "\n".join(f"[{i}] link 'item number {i} with a long label'" for i in range(100, 3100))
    with StubLLMServer() as stub:
        settings = stub_settings(stub, context_window=2048, max_tokens=200)
        counter = CharEstimateCounter()
        agent = LLMAgent(make_client(settings), counter, settings=settings, memory=None)
        history = [past_step(i, f"click('{i}')", "Page: nothing changed " * 20) for i in range(8)]
        request, tokens, *_ = agent.build_request(ctx(page(["1", "2", "3"], extra="\n" + huge), history))
    assert count_messages(request.messages, counter) == tokens <= 2048 - 200
    assert request.messages[0]["content"] == prompts.system_text(prompts.action_names_for(TASK))
    assert GOAL in request.messages[1]["content"]
    assert "cut to fit the context window" in request.messages[1]["content"]


class CountingEmbedder:
    """Two-dimensional vectors: texts that mention "log" point one way, the rest the other."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[1.0, 0.0] if "log" in t.lower() else [0.0, 1.0] for t in texts], dtype=np.float32)


def test_a_topk_view_is_narrowed_by_the_goal_once_and_each_decision_names_what_it_carried() -> None:
    embedder = CountingEmbedder()
    view = MemoryView(
        scope="miniwob/login-user", version=7, workflows=tuple(reversed(workflows())), mode="topk", k=1
    )
    with StubLLMServer([Reply(text="fill the name\nfill('11', 'kanesha')")] * 2) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(
            make_client(settings), CharEstimateCounter(), settings=settings, memory=view, embedder=embedder
        )
        d1 = agent.decide(ctx(page(["11", "12", "13"]), []))
        d2 = agent.decide(ctx(page(["11", "12", "13"]), [past_step(0, "fill('11', 'kanesha')", "ok")]))
        sent = [r.body["messages"] for r in stub.requests]
    assert len(embedder.calls) == 2  # the view's workflows and the goal, embedded once per episode
    assert d1.workflows == d2.workflows == ["log_in"]  # the most similar of two, not the view's first
    assert "clear_field" not in sent[0][0]["content"] and "log_in" in sent[0][0]["content"]
    assert agent.memory is view  # the view itself is never changed or replaced
    # The prompt hash is sha256 of the messages that were actually sent.
    assert (
        d1.prompt_hash
        == prompt_hash(sent[0])
        == hashlib.sha256(json.dumps(sent[0], sort_keys=True).encode()).hexdigest()
    )
    assert d1.prompt_hash != d2.prompt_hash


def test_grammar_is_sent_only_to_the_local_backend_and_kept_on_retry() -> None:
    p = page(["11", "12", "13"], goal=PLAIN_GOAL)
    with StubLLMServer(default=Reply(text="go\nclick('13')")) as stub:
        settings = stub_settings(stub)
        hosted = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings, memory=None)
        local = LLMAgent(
            local_style_client(stub, settings), CharEstimateCounter(), settings=settings, memory=None
        )
        hosted.decide(ctx(p, []))
        local.decide(ctx(p, []))
        local.decide(ctx(p, [], retry_error="id_not_on_page: element '99' is not on the current page"))
        bodies = [r.body for r in stub.requests]
    assert "grammar" not in bodies[0]
    expected = action_grammar(
        "browser",
        page_ids=p.ids,
        names=actions_offered("miniwob"),
        with_thought=False,
        ids_for={**page_targets(p).ids_for, "click": ["13"]},  # the text fields are filled, not clicked
    )
    assert bodies[1]["grammar"] == expected == bodies[2]["grammar"]
    assert "'13'" in expected and "'99'" not in expected
    # The retry changed the prompt: the exact error is the last thing the model reads.
    retry_user = bodies[2]["messages"][1]["content"]
    assert retry_user != bodies[1]["messages"][1]["content"]
    assert "id_not_on_page: element '99' is not on the current page" in retry_user.split("## Current page")[1]


def test_the_answer_is_the_action_alone_unless_a_thought_is_asked_for() -> None:
    """Measured: asked for a thought line, the 1.5B model wrote its plan there (`fill[19], press[20]`)
    and then copied the plan's first step, already done, as its action; asked for the action alone it
    pressed Login. The instructions, the grammar and a refused answer's retry text all say the same."""
    p = page(["11", "12", "13"], goal=PLAIN_GOAL)
    refused = "id_not_on_page: element '99' is not on the current page"
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        bare = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        thinking = LLMAgent(
            local_style_client(stub, settings), CharEstimateCounter(), settings=settings, thought=True
        )
        bare_request = bare.build_request(ctx(p, [], retry_error=refused))[0]
        thinking_request = thinking.build_request(ctx(p, [], retry_error=refused))[0]
    assert "Reply with exactly one action, nothing else." in bare_request.messages[0]["content"]
    assert "thought" not in bare_request.messages[0]["content"] + bare_request.messages[1]["content"]
    bare_regex = re.compile(gbnf_to_regex(bare_request.grammar or ""))
    assert bare_regex.fullmatch("click('13')") and not bare_regex.fullmatch("Press Login.\nclick('13')")
    assert "one short thought on the first line" in thinking_request.messages[0]["content"]
    assert "one thought line" in thinking_request.messages[1]["content"]
    assert re.compile(gbnf_to_regex(thinking_request.grammar or "")).fullmatch("Press Login.\nclick('13')")


def test_with_workflows_to_call_the_answer_keeps_its_thought_line() -> None:
    """Probed on login-user with its workflow in memory: asked for the action alone the model typed the
    workflow's steps itself; asked for a thought and an action it called the workflow."""
    p = page(["11", "12", "13"])
    p.elements["11"], p.elements["12"] = TargetDesc(role="textbox", label="Username"), TargetDesc(role="textbox", label="Password")
    login = Workflow(
        name="log in",
        description='Log in as "{username}" with "{password}".',
        parameters=["username", "password"],
        steps=[
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Username"), value="{username}"),
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Password"), value="{password}"),
        ],
    )
    view = MemoryView(scope="miniwob/login-user", workflows=(login,), use="executable")
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings, memory=view)
        request = agent.build_request(ctx(p, []))[0]
    assert "run_workflow(" in request.messages[0]["content"]
    assert "one short thought on the first line" in request.messages[0]["content"]
    assert re.compile(gbnf_to_regex(request.grammar or "")).fullmatch(
        "Call it.\nrun_workflow('log in', {'username': 'kanesha', 'password': 'x9'})"
    )


def test_local_grammar_lets_fill_reach_text_fields_only() -> None:
    """The measured failure: after filling the form, the 1.5B model called fill() on the Submit button
    until the loop stop. Under the role-aware grammar that answer cannot be decoded."""
    p = page(["11", "12", "13"], goal=PLAIN_GOAL)  # two textboxes, then the button
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        role_aware = LLMAgent(
            local_style_client(stub, settings), CharEstimateCounter(), settings=settings, memory=None
        )
        plain = LLMAgent(
            local_style_client(stub, settings), CharEstimateCounter(), settings=settings, role_aware=False
        )
        grammar = role_aware.build_request(ctx(p, []))[0].grammar
        old = plain.build_request(ctx(p, []))[0].grammar
    assert grammar is not None and old is not None
    fill_rule = next(line for line in grammar.splitlines() if line.startswith("fill ::= "))
    ids_rule = fill_rule.split()[3]  # fill ::= "fill(" <ids> ", " string ")"
    fill_ids = next(line for line in grammar.splitlines() if line.startswith(f"{ids_rule} ::= "))
    assert "'11'" in fill_ids and "'12'" in fill_ids and "'13'" not in fill_ids
    assert "check ::=" not in grammar and "select-option ::=" not in grammar  # no checkbox, no dropdown
    # A text field is filled, not clicked (measured: the model clicked email-inbox-forward's 'to:' field
    # again and again after filling it, until the step limit).
    assert 'click ::= "click(" bid-click ")"' in grammar and "bid-click ::= \"'13'\"\n" in grammar
    assert old == action_grammar(
        "browser", page_ids=p.ids, names=actions_offered("miniwob"), with_thought=False
    )


def test_spent_choices_are_not_offered_next_step() -> None:
    """Measured next: kept off the button, the model re-filled the field, or pressed Enter in it and
    filled it again, until the loop stop."""
    ids = ["11", "12", "13"]
    ids_for = {"fill": ["11", "12"], "press": ["11", "12"], "check": []}
    text = "[11] textbox 'Name' value='kanesha'\n[12] textbox 'Password'\n[13] button 'Submit'"

    def step(name: str, bid: str, outcome: str = "ok", fingerprint: str = "before") -> Step:
        return Step(
            index=0, action={"name": name, "args": {"bid": bid}}, outcome=outcome, fingerprint=fingerprint
        )

    def spent(*history: Step, page_text: str = text) -> dict[str, list[str]]:
        return without_spent_choices(ids_for, ids, list(history), page_text, "now")

    filled = step("fill", "11")
    assert spent(filled) == {"fill": ["12"], "press": ["11", "12"], "check": []}
    assert spent(filled, page_text=text.replace(" value='kanesha'", ""))["fill"] == ["12"]  # just done
    # filled earlier, value still shown: not re-filled; a field whose value is gone may be filled again
    assert spent(filled, step("fill", "12"))["fill"] == []
    assert spent(filled, step("click", "13"), page_text=text.replace(" value='kanesha'", "")) == ids_for
    assert spent(step("fill", "11", outcome="action_error"), page_text="[11] textbox 'Name'") == ids_for
    # press: only when it changed nothing
    assert spent(step("press", "12", fingerprint="now"))["press"] == ["11"]
    assert spent(step("press", "12", fingerprint="before"))["press"] == ["11", "12"]
    assert spent(step("hover", "13"))["hover"] == ["11", "12"]  # an action with no role rule
    assert spent(step("click", "13")) == ids_for  # a click may toggle: never taken out
    assert spent() == ids_for
    # in the request: the only text field just filled -> fill is not in this step's grammar at all
    p = PageState(
        text="[11] textbox 'Name' value='kanesha'\n[13] button 'Submit'",
        ids=["11", "13"],
        elements={
            "11": TargetDesc(role="textbox", label="Name"),
            "13": TargetDesc(role="button", label="Submit"),
        },
        url="",
        goal=GOAL,
        fingerprint="fp",
    )
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        before = agent.build_request(ctx(p, []))[0].grammar or ""
        after = agent.build_request(ctx(p, [filled]))[0].grammar or ""
    assert "fill ::= " in before and "fill ::= " not in after and "click ::= " in after


def test_actions_tried_on_this_page_state_are_not_offered_again() -> None:
    """Measured: one click repeated until the loop stop, a folder toggled open and shut (A-B-A-B).
    Back on a page state it already acted on, the agent is not offered what it did there, worked or
    failed; on any other state it is."""
    ids = ["11", "12", "13"]
    ids_for = {"fill": ["11", "12"]}

    def step(name: str, bid: str, fingerprint: str, outcome: str = "ok") -> Step:
        return Step(
            index=0, action={"name": name, "args": {"bid": bid}}, outcome=outcome, fingerprint=fingerprint
        )

    def offered(*history: Step) -> dict[str, list[str]]:
        return without_spent_choices(ids_for, ids, list(history), "[13] button 'Open'", "folder-shut")

    toggled = [step("click", "13", "folder-shut"), step("click", "13", "folder-open")]
    assert offered(*toggled)["click"] == ["11", "12"]  # clicked from this very state: not again
    assert offered(step("click", "13", "folder-open")) == ids_for  # another state: still offered
    assert offered(step("click", "12", "folder-shut", outcome="not_interactable"))["click"] == ["11", "13"]
    assert offered(step("fill", "11", "folder-shut", outcome="action_error"))["fill"] == ["12"]


def test_clicks_that_would_undo_a_choice_and_spent_scrolls_are_not_offered() -> None:
    """Measured: a ticked box clicked again (unticked), a chosen radio or option clicked three times, a
    page that does not scroll scrolled until the loop stop."""
    controls = {
        "11": ControlState(role="checkbox", label="Nb", flags=["checked"]),
        "12": ControlState(role="checkbox", label="Ne"),
        "13": ControlState(role="option", label="Lavinia", flags=["selected"]),
        "14": ControlState(role="tab", label="Tab #1", flags=["selected"]),
        "15": ControlState(role="button", label="Submit", flags=["selected"]),  # no choice to undo
    }
    text = "[11] checkbox 'Nb', checked\n[12] checkbox 'Ne'\n[13] option 'Lavinia', selected"
    p = PageState(
        text=text, ids=list(controls), elements={}, url="", goal=GOAL, fingerprint="fp",
        snapshot=PageSnapshot(controls=controls),
    )  # fmt: skip
    offered = without_undoing_clicks({"check": ["11", "12"]}, p)
    assert offered == {"check": ["11", "12"], "click": ["12", "15"]}  # uncheck/check stay as they were
    scrolled = Step(
        index=0, action={"name": "scroll", "args": {"delta_x": 0, "delta_y": 300}}, fingerprint="fp"
    )
    assert spent_plain_actions([scrolled.model_copy(update={"observation": text})], p) == {"scroll"}
    assert spent_plain_actions([scrolled.model_copy(update={"observation": "above the fold"})], p) == set()
    clicked = Step(
        index=0, action={"name": "click", "args": {"bid": "12"}}, fingerprint="fp", observation=text
    )
    assert spent_plain_actions([clicked], p) == set()  # an element action: without_spent_choices' job


def test_a_cycle_over_page_states_is_seen_when_it_comes_round_twice() -> None:
    a, b, c = ("shut", "click('13')"), ("open", "click('13')"), ("open", "click('14')")
    assert cycle_period([a, b, a, b]) == 2
    assert cycle_period([c, a, b, c, a, b]) == 3
    assert cycle_period([a, b, a]) == 0  # not yet round twice
    assert cycle_period([a, a, a, a]) == 0  # one action repeated: the repeat count's job
    assert cycle_period([a, b, c, b]) == 0


def test_oversized_prompt_is_raised_as_is_for_the_harness() -> None:
    with StubLLMServer() as stub:
        settings = stub_settings(stub, context_window=256, max_tokens=200)
        agent = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings, memory=None)
        with pytest.raises(PromptTooLargeError):
            agent.decide(ctx(page(["11", "12", "13"]), []))
        assert stub.requests == []  # nothing was sent


# --- against a real browser -------------------------------------------------------------------------


@pytest.mark.browser
def test_parse_error_is_fed_back_once_with_the_exact_error() -> None:
    bad = "I will click the example.\nclick('BID')"
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings, memory=None)
        task = Task(
            task_id="browsergym/miniwob.click-test", scope="miniwob/click-test", benchmark="miniwob", seed=0
        )
        with BrowserSession(BrowserSettings(screenshots=False)) as session:
            first_page = session.reset(task)
            button = next(i for i in first_page.ids if first_page.elements[i].role == "button")
            stub.push(Reply(text=bad), Reply(text=f"click it\nclick('{button}')"))
            trajectory = run_episode(session, agent, task, HarnessConfig(max_steps=1))
        requests = [r.body for r in stub.requests]
    with pytest.raises(ActionParseError) as refused:
        parse_action(bad, page_ids=first_page.ids)
    exact = f"{refused.value.kind}: {refused.value}"
    assert len(requests) == 2  # one retry, no more
    assert exact not in requests[0]["messages"][1]["content"]
    assert exact in requests[1]["messages"][1]["content"]
    step = trajectory.steps[0]
    assert step.llm_calls == 2 and step.action_str == f"click('{button}')" and step.outcome == "ok"
    assert trajectory.end == "done" and trajectory.verdict.reward and trajectory.verdict.reward > 0


@pytest.mark.llm
@pytest.mark.browser
def test_real_local_model_reaches_an_executed_action_on_click_test(local_llm, tmp_path: Path) -> None:
    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False, "max_tokens": 64}})
    agent = LLMAgent(local_llm, local_llm.token_counter(), settings=settings, memory=None)
    task = Task(
        task_id="browsergym/miniwob.click-test", scope="miniwob/click-test", benchmark="miniwob", seed=3
    )
    with BrowserSession(BrowserSettings(screenshots=False)) as session:
        trajectory = run_episode(session, agent, task, HarnessConfig(max_steps=2))
    first = trajectory.steps[0]
    assert agent.use_grammar  # the local backend decodes under the page's ids by default
    assert first.outcome != "llm_error", first.error
    assert first.action is not None and first.action_str, first.model_output  # parsed and executed
    assert first.prompt_tokens > 0 and first.completion_tokens > 0


def test_target_first_asks_for_the_element_as_the_page_lists_it_then_its_action() -> None:
    p = page(["11", "12", "13"], goal=PLAIN_GOAL)
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(
            local_style_client(stub, settings), CharEstimateCounter(), settings=settings, target_first=True
        )
        request = agent.build_request(ctx(p, []))[0]
        plain = LLMAgent(make_client(settings), CharEstimateCounter(), settings=settings, target_first=True)
        hosted = plain.build_request(ctx(p, []))[0]
    grammar = request.grammar or ""
    assert grammar.startswith("root ::= on-") and "On: " in request.messages[0]["content"]
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("On: textbox 'field 0' [11]\nfill('11', 'kanesha')")  # the page's own line
    assert regex.fullmatch("On: button 'field 2' [13]\nclick('13')")
    assert not regex.fullmatch("On: textbox 'field 0' [11]\nclick('11')")  # a text field is filled
    # without a grammar the format cannot be held: the usual thought-and-action instructions
    assert not plain.target_first and hosted.grammar is None and "On: " not in hosted.messages[0]["content"]


def test_a_page_with_nothing_left_to_offer_offers_the_spent_actions_again() -> None:
    """Measured: click-pie's page has no element ids; once its scroll was spent nothing was left and the
    grammar could not be built, which ended the whole run. The spent scroll is offered again (the repeat
    count ends the episode as stuck)."""
    p = PageState(text="Q\nM\n+", ids=[], elements={}, url="", goal=GOAL, fingerprint="fp")
    scrolled = Step(
        index=0, action={"name": "scroll", "args": {"delta_x": 0, "delta_y": 300}}, fingerprint="fp",
        observation=p.text, outcome="ok",
    )  # fmt: skip
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        grammar = agent.build_request(ctx(p, [scrolled]))[0].grammar or ""
    assert "scroll ::= " in grammar


def test_when_every_choice_is_spent_the_spent_scroll_comes_back_and_the_role_rules_hold() -> None:
    """Everything tried on this page state (each action on each element, and the scroll): the spent
    scroll comes back so the harness's repeat count can end the episode, and no choice that the role
    rules forbid does (before, the fallback dropped the role rules and let the model fill the button)."""
    p = page(["11", "12"])
    p.elements["12"] = TargetDesc(role="button", label="Submit")
    p = p.model_copy(update={"text": "[11] textbox 'field 0'\n[12] button 'Submit'"})

    def tried(name: str, args: dict[str, object]) -> Step:
        return Step(
            index=0, action={"name": name, "args": args}, fingerprint=p.fingerprint, observation=p.text,
            outcome="ok",
        )  # fmt: skip

    history = [tried(name, {"bid": b}) for name in ("click", "fill", "clear", "press", "focus") for b in ("11", "12")]
    history.append(tried("scroll", {"delta_x": 0, "delta_y": 300}))
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        grammar = agent.build_request(ctx(p, history))[0].grammar or ""
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("scroll(0, 300)")
    assert not regex.fullmatch("fill('12', 'x')") and not regex.fullmatch("fill('11', 'x')")


def test_a_slider_is_filled_not_clicked() -> None:
    """Measured on use-slider: a click on the slider moved its handle to the box's centre."""
    text = "[16] slider (id=slider) value='-91'\n[19] button 'Submit'"
    elements = {"16": TargetDesc(role="slider", label=""), "19": TargetDesc(role="button", label="Submit")}
    p = PageState(text=text, ids=list(elements), elements=elements, url="", goal=PLAIN_GOAL, fingerprint="fp")
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        regex = re.compile(gbnf_to_regex(agent.build_request(ctx(p, []))[0].grammar or ""))
    assert regex.fullmatch("fill('16', '-94')") and not regex.fullmatch("click('16')")
    assert regex.fullmatch("click('19')") and not regex.fullmatch("fill('19', '-94')")


def test_disabled_elements_are_not_offered() -> None:
    """Measured on login-user-popup: the model filled, cleared and clicked the fields a popup had
    disabled until the step limit, while the popup's own buttons were there to answer."""
    text = (
        "[16] textbox 'Username', disabled\n[19] textbox 'Password', disabled\n[20] button 'OK', disabled\n"
        "Your session is about to time out.\n[25] button 'OK'\n[26] button 'Cancel'"
    )
    elements = {
        "16": TargetDesc(role="textbox", label="Username"), "19": TargetDesc(role="textbox", label="Password"),
        "20": TargetDesc(role="button", label="OK"), "25": TargetDesc(role="button", label="OK"),
        "26": TargetDesc(role="button", label="Cancel"),
    }  # fmt: skip
    p = PageState(text=text, ids=list(elements), elements=elements, url="", goal=PLAIN_GOAL, fingerprint="fp")
    assert p.flags("16") == ("disabled",) and p.flags("25") == ()
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        regex = re.compile(gbnf_to_regex(agent.build_request(ctx(p, []))[0].grammar or ""))
    assert regex.fullmatch("click('25')") and regex.fullmatch("click('26')")
    assert not any(regex.fullmatch(a) for a in ("click('20')", "fill('16', 'juan')", "focus('19')"))


def test_submit_waits_while_boxes_the_goal_lists_are_unticked() -> None:
    """Measured: the model ticked one of the boxes the goal listed and clicked Submit (two steps)."""
    goal = "Select Jc, XMHY and click Submit."
    text = "[18] checkbox 'Jc', checked\n[24] checkbox 'XMHY'\n[27] checkbox '0QW'\n[36] button 'Submit'"
    elements = {
        "18": TargetDesc(role="checkbox", label="Jc"), "24": TargetDesc(role="checkbox", label="XMHY"),
        "27": TargetDesc(role="checkbox", label="0QW"), "36": TargetDesc(role="button", label="Submit"),
    }  # fmt: skip
    p = PageState(text=text, ids=list(elements), elements=elements, url="", goal=goal, fingerprint="fp")
    with StubLLMServer() as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        request = agent.build_request(ctx(p, []))[0]
        done = p.model_copy(update={"text": text.replace("'XMHY'", "'XMHY', checked")})
        ticked = Step(index=0, action={"name": "click", "args": {"bid": "24"}}, target=elements["24"])
        after = agent.build_request(ctx(done, [ticked]))[0]
    assert "Named in the goal and not done yet: [24] checkbox 'XMHY'" in request.messages[1]["content"]
    regex = re.compile(gbnf_to_regex(request.grammar or ""))
    assert regex.fullmatch("click('24')") and not regex.fullmatch("click('36')")
    assert "not done yet" not in after.messages[1]["content"]
    assert re.compile(gbnf_to_regex(after.grammar or "")).fullmatch("click('36')")


def test_select_text_and_drag_are_offered_only_when_the_goal_asks_for_them() -> None:
    from awm.goal_values import asks_to_select_text

    asks = ["Highlight the text in the 2nd paragraph and click submit.", "Select all the text below."]
    not_asks = ["Select TnJ, kMLSI5 and click Submit.", "Type the text below into the text field."]
    assert all(asks_to_select_text(g) for g in asks) and not any(asks_to_select_text(g) for g in not_asks)
    assert "select_text" in (prompts.action_names_for(TASK, asks[0]) or [])
    assert "select_text" not in (prompts.action_names_for(TASK, not_asks[0]) or [])
    whole = Task(task_id="browsergym/webarena.1", scope="webarena/1", benchmark="webarena", seed=0)
    whole_names = prompts.action_names_for(whole, asks[0]) or []
    assert "select_text" in whole_names and "drag" not in whole_names and "click" in whole_names
    assert "select_text" not in (prompts.action_names_for(whole, not_asks[0]) or ["select_text"])
    dragging = prompts.action_names_for(TASK, "Drag the circle left then press Submit.") or []
    assert "drag" in dragging and "select_text" not in dragging
    assert prompts.action_names_for(whole, "Drag the text in the 2nd paragraph and highlight the text.") is None
