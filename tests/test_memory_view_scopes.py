"""Memory across tasks: a prefix scope (``miniwob``) reads the heads of every scope below it, with names
unique within the view, and the pipeline's view of a task follows the arm's `scope` and `workflows`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from awm.errors import AwmError
from awm.memory.store import WorkflowStore
from awm.memory.view import merge_scopes, other_choices, scopes_under, view_at_head, view_over_prefix
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.pipeline.config import PipelineConfig
from awm.pipeline.stages import memory_view, read_scope
from awm.trajectory import TargetDesc, Task


def wf(name: str, *labels: str, description: str = "") -> Workflow:
    """A workflow filling one textbox per label (its abstract signature is the labels)."""
    return Workflow(
        name=name,
        description=description or f"Workflow {name}.",
        parameters=["x"],
        steps=[
            WorkflowStep(
                reasoning="", action="fill", target=TargetDesc(role="textbox", label=label), value="{x}"
            )
            for label in labels or ("Q",)
        ],
        provenance=Provenance(mode="rule", trajectory_ids=[f"traj-{name}"]),
    )


@pytest.fixture
def store(tmp_path: Path):
    with WorkflowStore(tmp_path / "memory.sqlite") as s:
        yield s


def task(short: str, benchmark: str = "miniwob") -> Task:
    return Task(
        task_id=f"browsergym/{benchmark}.{short}", scope=f"{benchmark}/{short}", benchmark=benchmark, seed=0
    )


def test_prefix_view_collects_the_scopes_below_it_in_sorted_order(store: WorkflowStore) -> None:
    store.commit("miniwob/login-user", [wf("login", "Username", "Password")], parent=None, author="rule")
    store.commit(
        "miniwob/login-user",
        [wf("login", "Username", "Password"), wf("name", "Name")],
        parent=1,
        author="rule",
    )
    store.commit("miniwob/enter-text", [wf("enter", "Text")], parent=None, author="rule")
    store.commit("miniwobx/enter-text", [wf("other", "Other")], parent=None, author="rule")
    store.commit("webarena/shopping", [wf("shop", "Search")], parent=None, author="rule")
    view = view_over_prefix(store, "miniwob", k=2, use="executable")
    assert view.scope == "miniwob" and view.version is None
    assert view.versions == {"miniwob/enter-text": 1, "miniwob/login-user": 2}
    assert [w.name for w in view.workflows] == ["enter", "login", "name"]  # enter-text < login-user
    assert (view.mode, view.k, view.use) == ("topk", 2, "executable")
    # A trailing slash names the same prefix.
    assert view_over_prefix(store, "miniwob/").versions == view.versions
    # The prefix itself is a scope like any other below it.
    store.commit("miniwob", [wf("shared", "Shared")], parent=None, author="manual")
    assert list(view_over_prefix(store, "miniwob").versions) == [
        "miniwob",
        "miniwob/enter-text",
        "miniwob/login-user",
    ]


def test_scopes_under_needs_a_slash_after_the_prefix() -> None:
    scopes = ["miniwobx/a", "miniwob/b", "miniwob", "mini/c", "miniwob/a/deep"]
    assert scopes_under(scopes, "miniwob") == ["miniwob", "miniwob/a/deep", "miniwob/b"]


def test_prefix_view_with_no_scope_is_empty_not_an_error(store: WorkflowStore) -> None:
    view = view_over_prefix(store, "miniwob")
    assert view.empty and view.versions == {} and view.version is None and view.scope == "miniwob"
    with pytest.raises(AwmError, match="prefix"):
        view_over_prefix(store, "/")


def test_equal_signatures_from_two_scopes_keep_the_first() -> None:
    a = wf("login", "Username", "Password")
    b = wf("sign in", "username", "PASSWORD", description="Another description.")  # same steps, any case
    merged = merge_scopes([("miniwob/a", [a]), ("miniwob/b", [b, wf("extra", "Extra")])])
    assert [w.name for w in merged] == ["login", "extra"]
    assert merged[0] is a


def test_name_clashes_are_renamed_after_the_scope_deterministically() -> None:
    heads = [
        ("miniwob/enter-text", [wf("fill", "Text")]),
        ("miniwob/login-user", [wf("fill", "Username")]),
        ("miniwob/x/login-user", [wf("fill", "Password")]),
    ]
    merged = merge_scopes(heads)
    assert [w.name for w in merged] == ["fill", "fill (login-user)", "fill (login-user 2)"]
    assert [w.steps[0].target.label for w in merged] == ["Text", "Username", "Password"]
    assert merge_scopes(heads) == merged  # same input, same names
    assert [w.name for w in heads[1][1]] == ["fill"]  # the inputs are not renamed in place
    assert len({w.name for w in merged}) == len(merged)


def test_workflows_without_steps_are_not_merged_by_signature() -> None:
    merged = merge_scopes([("s/a", [Workflow(name="a")]), ("s/b", [Workflow(name="b")])])
    assert [w.name for w in merged] == ["a", "b"]


class _WordEmbedder:
    """Bag of two words: enough to rank a login workflow above a text one for a login goal."""

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array(
            [[t.lower().count("login"), t.lower().count("text")] for t in texts], dtype=np.float32
        )


def test_prefix_view_selects_top_k_by_the_goal(store: WorkflowStore) -> None:
    store.commit("miniwob/enter-text", [wf("enter text", "Text")], parent=None, author="rule")
    store.commit("miniwob/login-user", [wf("login", "Username")], parent=None, author="rule")
    store.commit("miniwob/other", [wf("other text", "Other")], parent=None, author="rule")
    view = view_over_prefix(store, "miniwob", k=1)
    assert [w.name for w in view.select("Login as bob", _WordEmbedder())] == ["login"]


def test_the_pipeline_view_follows_scope_and_workflows(store: WorkflowStore) -> None:
    store.commit("miniwob/login-user", [wf("login", "Username")], parent=None, author="rule")
    store.commit("miniwob/enter-text", [wf("enter", "Text")], parent=None, author="rule")
    login = task("login-user")
    per_task = PipelineConfig(tasks=["login-user"], workflows="executable")
    assert read_scope(per_task, login) == "miniwob/login-user"
    view = memory_view(store, per_task, login)
    assert view == view_at_head(store, "miniwob/login-user", use="executable")
    assert (view.version, view.use, view.versions) == (1, "executable", {})

    shared = PipelineConfig(tasks=["login-user"], scope="benchmark", k=4)
    assert read_scope(shared, login) == "miniwob"
    view = memory_view(store, shared, login)
    assert (view.scope, view.version, view.mode, view.k, view.use) == ("miniwob", None, "topk", 4, "text")
    assert view.versions == {"miniwob/enter-text": 1, "miniwob/login-user": 1}
    assert [w.name for w in view.workflows] == ["enter", "login"]

    fixed = PipelineConfig(
        tasks=["login-user"], memory="fixed", memory_scope="miniwob/enter-text", scope="benchmark"
    )
    assert read_scope(fixed, login) == "miniwob/enter-text"  # a fixed scope wins, as before
    assert memory_view(store, fixed, login) == view_at_head(store, "miniwob/enter-text")


def test_the_context_reads_its_own_store_and_none_without_memory(
    store: WorkflowStore, tmp_path: Path
) -> None:
    from awm.pipeline.stages import PipelineContext

    store.commit("miniwob/login-user", [wf("login", "Username")], parent=None, author="rule")
    config = PipelineConfig(tasks=["login-user"], scope="benchmark", workflows="executable")
    unused: dict = dict(
        settings=None, recorder=None, clients=None, meter=None, env_config=None, harness_config=None
    )
    ctx = PipelineContext(config=config, run_dir=tmp_path, store=store, **unused)
    assert ctx.memory_scope(task("login-user")) == "miniwob"
    assert ctx.view_for(task("login-user")) == memory_view(store, config, task("login-user"))
    off = PipelineContext(
        config=config.model_copy(update={"memory": "off"}), run_dir=tmp_path, store=None, **unused
    )
    assert off.view_for(task("login-user")) is None


def test_a_site_scope_reads_the_sites_other_templates_top_k_and_commits_stay_per_template(
    store: WorkflowStore,
) -> None:
    store.commit("sites/trac/ticket-create", [wf("create ticket", "Summary")], parent=None, author="rule")
    store.commit("sites/trac/ticket-priority", [wf("set priority", "Priority")], parent=None, author="rule")
    store.commit("sites/trac/wiki-edit", [wf("edit wiki", "Page")], parent=None, author="rule")
    store.commit("sites/shop/cart-add", [wf("add to cart", "Quantity")], parent=None, author="rule")
    priority = task("trac.ticket-priority", "sites").model_copy(update={"scope": "sites/trac/ticket-priority"})
    config = PipelineConfig(benchmark="sites", tasks=["trac"], scope="site", k=2, workflows="executable")
    assert read_scope(config, priority) == "sites/trac"
    view = memory_view(store, config, priority)
    assert (view.scope, view.mode, view.k, view.use) == ("sites/trac", "topk", 2, "executable")
    # its own template and the other site are left out: the arm measures what other templates teach
    assert view.versions == {"sites/trac/ticket-create": 1, "sites/trac/wiki-edit": 1}
    assert [w.name for w in view.workflows] == ["create ticket", "edit wiki"]


def test_a_site_scope_needs_the_arena_and_a_scope_with_a_site_level() -> None:
    from awm.errors import ConfigError
    from awm.pipeline.stages import site_scope

    with pytest.raises(ValueError, match="scope 'site'.*benchmark = 'sites'"):
        PipelineConfig(tasks=["login-user"], scope="site")
    assert site_scope("sites/shop/cart-add") == "sites/shop"
    with pytest.raises(ConfigError, match="'miniwob/login-user' has no site level"):
        site_scope("miniwob/login-user")


def test_a_parts_view_leaves_out_what_gives_up(store: WorkflowStore) -> None:
    """A shop's "cancel a shipped order" template learnt to give up ('open the order, report_infeasible');
    offered to another template it can only give up there too. Its own scope keeps it."""
    gives_up = wf("open the order", "Order").model_copy(
        update={"steps": [*wf("o", "Order").steps, WorkflowStep(action="report_infeasible", value="{reason}")]}
    )
    store.commit("sites/shop/cancel-shipped", [gives_up, wf("search", "Search")], parent=None, author="rule")
    assert [w.name for w in view_over_prefix(store, "sites/shop", parts_only=True).workflows] == ["search"]
    assert [w.name for w in view_over_prefix(store, "sites/shop").workflows] == ["open the order", "search"]


def test_top_k_puts_first_the_workflows_whose_values_the_goal_gives(store: WorkflowStore) -> None:
    """An ordinary shop: "What colour is the kettle "Aurora"?" reads more like the colour-changing part
    (another task's: it needs a colour the question does not state) than like the part that opens the
    kettle's page, whose one value the question gives; the opening part comes first."""

    def step(action: str, role: str, label: str, value: str = "") -> WorkflowStep:
        return WorkflowStep(reasoning="", action=action, target=TargetDesc(role=role, label=label), value=value)

    recolour = Workflow(
        name="select Colour:", description='Change the colour of the kettle "{item}" to {colour}.',
        parameters=["colour"], steps=[step("select_option", "combobox", "Colour:", "{colour}"), step("click", "button", "Save")],
    )  # fmt: skip
    open_item = Workflow(
        name="click Kettles, click {item}", description='Add the kettle "{item}" to the basket.',
        parameters=["item"], steps=[step("click", "link", "Kettles"), step("click", "link", "{item}")],
    )  # fmt: skip
    store.commit("shop/recolour", [recolour], parent=None, author="rule")
    store.commit("shop/add-to-basket", [open_item], parent=None, author="rule")

    class ColourWords:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[t.lower().count("colour") + 0.1, 1.0] for t in texts], dtype=np.float32)

    view = view_over_prefix(store, "shop", k=1)
    assert [w.name for w in view.select('What colour is the kettle "Aurora"?', ColourWords())] == [open_item.name]
    # A goal that gives the colour too: similarity decides again.
    assert [w.name for w in view.select('Change the colour of the kettle "Aurora" to red.', ColourWords())] == [
        recolour.name
    ]


def test_top_k_leaves_out_a_workflow_whose_fixed_choice_another_goal_named(store: WorkflowStore) -> None:
    """An ordinary shop: the "subscribe to the newsletter" template taught a part that ticks
    'Subscribe' (its goal names it) and a sign-in part that ticks 'Remember me' (no goal names it). A
    goal to unsubscribe is not shown the subscribing part; the sign-in part stays, whatever the goal;
    a goal that names the choice is shown it."""

    def step(action: str, role: str, label: str, value: str = "") -> WorkflowStep:
        return WorkflowStep(reasoning="", action=action, target=TargetDesc(role=role, label=label), value=value)

    taught = "As {user}, subscribe to the newsletter."
    subscribe = Workflow(
        name="click Settings, check Subscribe", description=taught,
        steps=[step("click", "link", "Settings"), step("check", "checkbox", "Subscribe"), step("click", "button", "Save")],
    )  # fmt: skip
    sign_in = Workflow(
        name="fill Email, check Remember me", description=taught, parameters=["user"],
        steps=[step("fill", "textbox", "Email", "{user}"), step("check", "checkbox", "Remember me"), step("click", "button", "Sign in")],
    )  # fmt: skip
    open_orders = wf("open orders", "My orders", description="Open my orders.")
    store.commit("shop/subscribe", [subscribe, sign_in, open_orders], parent=None, author="rule")

    class Flat:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

    view = view_over_prefix(store, "shop", k=3)
    assert other_choices(subscribe, "As ann, stop the newsletter.") == ["Subscribe"]
    assert other_choices(sign_in, "As ann, stop the newsletter.") == []
    assert [w.name for w in view.select("As ann, stop the newsletter.", Flat())] == [sign_in.name, open_orders.name]
    assert subscribe.name in [w.name for w in view.select("As bob, subscribe to the newsletter.", Flat())]


def _step(action: str, role: str, label: str, value: str = "") -> WorkflowStep:
    return WorkflowStep(reasoning="", action=action, target=TargetDesc(role=role, label=label), value=value)


def test_a_choice_named_by_another_form_of_its_word_counts_as_named() -> None:
    """A helpdesk: "close the request with the resolution fixed" names the radio button 'resolve'; a goal
    to change the request's priority names neither form of the word."""
    close = Workflow(
        name="check resolve", description='Close the request "{item}" with the resolution {how}.',
        steps=[_step("check", "radio", "resolve"), _step("select_option", "combobox", "as", "{how}")],
    )  # fmt: skip
    assert other_choices(close, 'Close the request "Printer" with the resolution fixed.') == []
    assert other_choices(close, 'Change the priority of the request "Printer" to high.') == ["resolve"]


def test_a_part_taught_by_several_goals_ranks_by_the_closest_of_them(store: WorkflowStore) -> None:
    """An ordinary shop: the sign-in part that every order change teaches is kept once, with the first
    scope's description ("cancel the order"); a goal to change the delivery address reads like the
    second teacher's goal, and the part ranks first for it."""
    sign_in = Workflow(
        name="sign in", description="As {user}, cancel the order {order}.", parameters=["user"],
        steps=[_step("fill", "textbox", "Email", "{user}"), _step("click", "button", "Sign in")],
    )  # fmt: skip
    address = sign_in.model_copy(update={"description": "As {user}, change the address of the order {order}."})
    wishlist = wf("open wishlist", "Wishlist", description="Open the wishlist.")
    store.commit("shop/cancel-order", [sign_in], parent=None, author="rule")
    store.commit("shop/change-address", [address], parent=None, author="rule")
    store.commit("shop/a-wishlist", [wishlist], parent=None, author="rule")  # first in the view: wins a tie

    class AddressWords:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[t.lower().count("address"), 0.5] for t in texts], dtype=np.float32)

    view = view_over_prefix(store, "shop", k=1)
    assert [w.name for w in view.workflows] == ["open wishlist", "sign in"]  # one copy of the shared part
    assert view.taught_by == {"sign in": ("As {user}, change the address of the order {order}.",)}
    assert [w.name for w in view.select("As ann, change the address of the order 7.", AddressWords())] == ["sign in"]
    alone = view_over_prefix(store, "shop", k=1, exclude="shop/change-address")
    assert alone.taught_by == {}
    assert [w.name for w in alone.select("As ann, change the address of the order 7.", AddressWords())] == [
        "open wishlist"
    ]  # ranked by "cancel the order" alone, the part reads no closer than the other one: a tie


def test_ways_to_open_the_same_item_take_one_place_of_the_top_k(store: WorkflowStore) -> None:
    """An ordinary shop: two parts open the order the goal names (from the open orders, from all
    orders); together they take one of the k places, and the part that changes the order gets the next."""
    from_open = Workflow(
        name="open orders, click {order}", description='Cancel the order "{order}".', parameters=["order"],
        steps=[_step("click", "link", "Open orders"), _step("click", "link", "{order}")],
    )  # fmt: skip
    from_all = from_open.model_copy(
        update={"name": "all orders, click {order}", "steps": [_step("click", "link", "All orders"), from_open.steps[1]]}
    )
    change = Workflow(
        name="select Delivery:", description='Change the delivery of the order "{order}" to {delivery}.',
        parameters=["delivery"], steps=[_step("select_option", "combobox", "Delivery:", "{delivery}"), _step("click", "button", "Save")],
    )  # fmt: skip
    store.commit("shop/cancel", [from_open], parent=None, author="rule")
    store.commit("shop/track", [from_all], parent=None, author="rule")
    store.commit("shop/delivery", [change], parent=None, author="rule")

    class Flat:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

    goal = 'Change the delivery of the order "A-17" to express.'
    shown = [w.name for w in view_over_prefix(store, "shop", k=2).select(goal, Flat())]
    assert shown == [from_open.name, change.name, from_all.name]  # in rank order (a tie: the scopes' order)
    assert [w.name for w in view_over_prefix(store, "shop", k=1).select(goal, Flat())] == [from_open.name, from_all.name]
    # a question states no delivery: the changing part gets no place the second way freed
    question = 'Where is the order "A-17"?'
    assert [w.name for w in view_over_prefix(store, "shop", k=2).select(question, Flat())] == [
        from_open.name, from_all.name
    ]  # fmt: skip
    assert change.name in [w.name for w in view_over_prefix(store, "shop", k=3).select(question, Flat())]


def test_a_merged_part_follows_what_it_followed_in_any_scope(store: WorkflowStore) -> None:
    """An ordinary shop: "track the order" (a question any visitor may ask) taught the part that opens an
    order on its own; "cancel the order" taught the same part after signing in. The view keeps the
    question's copy (its scope comes first) and still knows the part follows the sign-in part."""
    open_order = Workflow(
        name="orders, click {order}", description='Where is the order "{order}"?', parameters=["order"],
        steps=[_step("click", "link", "Orders"), _step("click", "link", "{order}")],
    )  # fmt: skip
    sign_in = Workflow(
        name="sign in", description='As {user}, cancel the order "{order}".', parameters=["user"],
        steps=[_step("fill", "textbox", "Email", "{user}"), _step("click", "button", "Sign in")],
        provenance=Provenance(mode="rule", part_of="whole"),
    )  # fmt: skip
    after = open_order.model_copy(
        update={"description": sign_in.description, "provenance": Provenance(mode="rule", part_of="whole", follows="sign in")}
    )
    store.commit("shop/a-track", [open_order], parent=None, author="rule")
    store.commit("shop/cancel", [sign_in, after], parent=None, author="rule")
    view = view_over_prefix(store, "shop")
    assert [(w.name, w.provenance.follows) for w in view.workflows] == [(open_order.name, ""), ("sign in", "")]
    assert view.follows == {open_order.name: ("sign in",)}


def test_a_fixed_route_and_another_tasks_ending_rank_after_what_takes_the_goals_values(store: WorkflowStore) -> None:
    """An ordinary library site: "As ann, renew the book "Dune"" is closest in words to the question
    template's fixed route to the opening hours (it reads nothing of any goal) and to the part that
    moves a loan to another branch (it needs a branch this goal does not state). Neither is shown while
    the parts that take this goal's values (sign in as ann, open "Dune") are; a goal that the view has
    nothing bound to still gets the closest of them."""
    sign_in = Workflow(
        name="sign in", description='As {user}, reserve the book "{book}".', parameters=["user"],
        steps=[_step("fill", "textbox", "Card number", "{user}"), _step("click", "button", "Sign in")],
    )  # fmt: skip
    open_book = Workflow(
        name="loans, click {book}", description='As {user}, return the book "{book}".', parameters=["book"],
        steps=[_step("click", "link", "My loans"), _step("click", "link", "{book}")],
    )  # fmt: skip
    hours = Workflow(
        name="help, opening hours", description="When does the library renew its opening hours?",
        steps=[_step("click", "link", "Help"), _step("click", "link", "Opening hours")],
    )  # fmt: skip
    branch = Workflow(
        name="select Branch:", description='As {user}, renew the book "{book}" at the branch {branch}.',
        parameters=["branch"], steps=[_step("select_option", "combobox", "Branch:", "{branch}"), _step("click", "button", "Renew")],
    )  # fmt: skip
    for scope, workflow in [("reserve", sign_in), ("return", open_book), ("hours", hours), ("move", branch)]:
        store.commit(f"library/{scope}", [workflow], parent=None, author="rule")

    class RenewWords:
        """Closest to the goal: whatever says "renew" (the route and the branch part)."""

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[t.lower().count("renew") + 0.1, 1.0] for t in texts], dtype=np.float32)

    view = view_over_prefix(store, "library", k=3)
    goal = 'As ann, renew the book "Dune".'
    assert sorted(w.name for w in view.select(goal, RenewWords())) == sorted([sign_in.name, open_book.name])
    # nothing in the view takes a value of this goal: the closest by words are shown
    class HoursWords:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[t.lower().count("hours") + 0.1, 1.0] for t in texts], dtype=np.float32)

    shown = [w.name for w in view_over_prefix(store, "library", k=1).select("What are our opening hours?", HoursWords())]
    assert shown == [hours.name]
