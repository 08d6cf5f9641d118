"""The memory an episode may read: one scope at one version, chosen by the driver before the episode.

Why a value and not a lookup: the driver (which alone writes memory) resolves the scope and version
once, before the episode starts, and hands the policy this immutable view; the trajectory records the
same object's scope and version. Nothing a worker does can read a newer version half-way through an
episode, and a worker process needs no store at all. The goal of a MiniWoB++ task is known only after
the page loads, so ``topk`` picks the k workflows most similar to the goal from the view, at the first
step, by cosine over the same ``name + description`` text the retrieval index embeds.

A view may also span a prefix of scopes (``miniwob`` reads ``miniwob/login-user``,
``miniwob/enter-text``...): memory shared across the tasks of a benchmark. Its workflows are the heads
of every scope under the prefix, merged by `merge_scopes` so that names stay unique within the view
(the agent calls a workflow by its name); `versions` records each scope's head and `version` is None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from awm.errors import AwmError
from awm.memory.composition import expand_all
from awm.memory.embeddings import Embedder, normalise
from awm.memory.retrieval import workflow_text
from awm.memory.store import WorkflowStore
from awm.memory.workflow import PLACEHOLDER, Workflow, bind_parameters, instantiate, open_parameters

ViewMode = Literal["all", "topk"]
WorkflowUse = Literal["text", "executable"]


class MemoryView(BaseModel):
    """A scope's workflows at one version, and how many of them an episode is shown."""

    model_config = ConfigDict(frozen=True)

    scope: str
    version: int | None = None
    workflows: tuple[Workflow, ...] = ()
    mode: ViewMode = "all"
    k: int = Field(default=3, ge=1)
    # ``text``: workflows are shown in the prompt to imitate; ``executable``: each one that the grounded
    # executor can run is also offered as a `run_workflow` action.
    use: WorkflowUse = "text"
    # A prefix scope (``miniwob``) reads every scope below it: each one's version at view time.
    versions: dict[str, int] = Field(default_factory=dict)
    # Workflow name -> the descriptions of the other scopes that taught the same steps (`merge_scopes`
    # keeps one copy): a part every change of a site begins with is relevant to a goal like any of them.
    taught_by: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # Part name -> every part it follows in some scope (`Provenance.follows`, named as in this view):
    # merged once, a part shared by several procedures comes after another part in each.
    follows: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.workflows

    def select(self, goal: str, embedder: Embedder | None = None) -> list[Workflow]:
        """The workflows to show for `goal`, most relevant first (``all``: the version's own order), each
        with its calls to other workflows expanded: a prompt shows the steps, not names to look up.

        ``topk`` ranks by similarity, and shows the workflows that need a value this goal does not state
        (`unstated_values`) only where no workflow takes this goal's values (`top_k_ways`). Why: measured
        on the arena's Trac with site scope, "What priority does the ticket X have?" was shown the
        priority-changing and milestone-changing parts of other templates (their goals say "priority" and
        "ticket" too), each
        needing a value the question does not state, and not the part that opens the ticket; the 1.5B
        model answered without looking. On any site a procedure whose values the task does not state is
        another task's procedure. Nor does ``topk`` show a workflow that makes a choice its own task
        named and this goal does not (`other_choices`). A fixed route (`is_fixed_route`) counts as
        needing a value. Ways to open the same item count as one of the k (`top_k_ways`)."""
        workflows = expand_all(list(self.workflows))
        if self.mode == "all":
            return workflows
        workflows = [w for w in workflows if not other_choices(w, goal)]
        if len(workflows) <= self.k:
            return workflows
        if embedder is None:
            from awm.memory.embeddings import default_embedder

            embedder = default_embedder()
        texts = [[w.description, *self.taught_by.get(w.name, ())] for w in workflows]
        flat = [workflow_text(w.name, text) for w, own in zip(workflows, texts, strict=True) for text in own]
        flat_scores = (normalise(embedder.embed(flat)) @ normalise(embedder.embed([goal])).T).ravel()
        scores, start = [], 0
        for own in texts:  # a workflow taught by several goals scores as the closest of them
            scores.append(float(flat_scores[start : start + len(own)].max()))
            start += len(own)
        needs = [bool(unstated_values(w, goal)) or is_fixed_route(w) for w in workflows]
        order = sorted(range(len(workflows)), key=lambda i: (-scores[i], i))
        return top_k_ways([workflows[i] for i in order], goal, self.k, needs=[needs[i] for i in order])


def unstated_values(workflow: Workflow, goal: str) -> list[str]:
    """The placeholders of the workflow's description that `goal` does not fill (`bind_parameters`) and
    its steps need: values its own task stated and this one does not. A description without placeholders
    (a hand-written or model-written workflow) states none, so it needs none here."""
    open_ones = open_parameters(workflow, bind_parameters(workflow, goal))
    stated = set(PLACEHOLDER.findall(workflow.description))
    return [name for name in open_ones if name in stated]


def is_fixed_route(workflow: Workflow) -> bool:
    """Whether the workflow takes no value at all (no step holds a placeholder): the same clicks
    whatever the goal says.

    Why it counts as needing a value the goal does not state (`MemoryView.select`):
    measured on the arena's Trac with site scope, "close the ticket X with the resolution fixed" was
    shown the question template's route "click WIKI, click Who does what" in the third place (ahead of
    every part that needs a value the goal does not state), the model ran it after opening the ticket
    and gave up on the wiki page. A route that reads nothing of the goal is tied to the goal by its
    words alone; a workflow that takes the goal's values (the user, the ticket) is known to be about
    this goal's things. On any site a fixed route (the contacts page, the help page) is another task's
    destination unless its words are the closest; it still ranks by them among the rest."""
    return bool(workflow.steps) and not any(step.placeholders() for step in workflow.steps)


def opened_item(workflow: Workflow, goal: str | dict[str, str]) -> tuple[str, str, str] | None:
    """What the workflow ends by opening, with its values read off `goal` (or given as bound values):
    its last step's (action, role, label) when that label holds a parameter (the ticket, the product,
    the page a goal names); None when it ends on a fixed control (a Submit button) or has no steps."""
    if not workflow.steps or not PLACEHOLDER.search(workflow.steps[-1].target.label):
        return None
    values = bind_parameters(workflow, goal) if isinstance(goal, str) else goal
    last = instantiate(workflow, values).steps[-1]
    return (last.action, last.target.role, " ".join(last.target.label.split()))


def top_k_ways(ranked: Sequence[Workflow], goal: str, k: int, *, needs: Sequence[bool]) -> list[Workflow]:
    """The first `k` of `ranked`, where the workflows that open the same item (`opened_item`) count as
    one: each way to an item taken comes along, in rank order. `needs[i]`: whether `ranked[i]` needs a
    value the goal does not state (`unstated_values`) or is a fixed route (`is_fixed_route`), worked out
    once by `MemoryView.select`.

    Why: measured on the arena's Trac with site scope, the top 3 of "move the ticket X to milestone 1.2"
    (and of change-priority, close-ticket and accept-ticket) were the log-in part and two parts that
    open the ticket X, one through the Active Tickets report and one through the report that also lists
    closed tickets, and no part that changes anything; the model opened the ticket and gave up. Either
    way may be the one that works (a closed ticket is only on the second report), so both stay, as one
    step of the procedure, and the next place goes to what comes after it. Endings on a fixed control
    (every change ends with "Submit changes") are different procedures and each takes a place. Not a
    workflow that needs a value the goal does not state: given such a place, a question about a
    ticket's owner was shown another template's closing part, and the model gave up without looking.
    Nor any such workflow (or fixed route, `is_fixed_route`) where one that takes the goal's values is
    shown: they are what the view has only where it has nothing bound to this goal."""
    all_need = all(needs)
    ranked = [w for w, needs_value in zip(ranked, needs, strict=True) if all_need or not needs_value]
    items = [opened_item(workflow, goal) for workflow in ranked]
    taken: set[tuple[str, str, str]] = set()
    places = shown = 0
    keep: list[bool] = []
    for item in items:
        if item is not None and item in taken:
            keep.append(True)
            shown += 1
            continue
        # A workflow needing a value the goal does not state gets no place a merged way freed: it is
        # another task's ending, shown only where fewer than k workflows are (`MemoryView.select`).
        free = places < k and (shown < k or not all_need)
        keep.append(free)
        if free:
            places += 1
            shown += 1
            if item is not None:
                taken.add(item)
    return [w for w, kept, item in zip(ranked, keep, items, strict=True) if kept and (item is None or item in taken)]


CHOICE_ACTIONS = frozenset({"check", "select_option"})
_WORD = re.compile(r"[a-z0-9]+")


# Letters a word's stem keeps: "resolve" and "resolution", "subscribe" and "subscription" share theirs.
STEM_LETTERS = 5


def _stems(text: str) -> set[str]:
    """The text's words, each cut to its first `STEM_LETTERS` letters (a crude English stem)."""
    return {word[:STEM_LETTERS] for word in _WORD.findall(text.lower())}


def other_choices(workflow: Workflow, goal: str) -> list[str]:
    """The choices the workflow makes that its own task's goal named and `goal` does not: a box it ticks
    or an option it selects by a fixed label (not a parameter) that is a word of its description (the
    goal it was taught by) and not a word of `goal`.

    Why: measured on the arena's Trac with site scope, "close the ticket X with the resolution fixed"
    was offered the part another template taught, "click Modify Ticket, check accept, click Submit
    changes" (its goal: "accept the ticket ..."), called it, and it broke. On any site a fixed choice the
    teaching goal asked for by name (accept, subscribe, express delivery) is that task's ending; a goal
    that does not name it wants another. A fixed choice no goal named (a "Remember me" box ticked on the
    way) is part of the procedure and keeps it shown. Words are compared by their stems (`_stems`): the
    goal "close the ticket with the resolution fixed" names the choice "resolve"."""
    taught = _stems(PLACEHOLDER.sub(" ", workflow.description))
    asked = _stems(goal)
    out: list[str] = []
    for step in workflow.steps:
        if step.action not in CHOICE_ACTIONS:
            continue
        label = step.value if step.action == "select_option" else step.target.label
        words = _stems(label)
        if words and not PLACEHOLDER.search(label) and set(words) <= taught and not set(words) <= asked:
            out.append(label)
    return out


def view_at_head(
    store: WorkflowStore, scope: str, *, mode: ViewMode = "all", k: int = 3, use: WorkflowUse = "text"
) -> MemoryView:
    """The scope's head as a view (an empty view when the scope has no version yet)."""
    head = store.head(scope)
    if head is None:
        return MemoryView(scope=scope, mode=mode, k=k, use=use)
    return MemoryView(
        scope=scope, version=head.version, workflows=tuple(head.workflows), mode=mode, k=k, use=use
    )


def scopes_under(scopes: Sequence[str], prefix: str) -> list[str]:
    """The scopes equal to `prefix` or below it (``prefix/...``), sorted; ``miniwobx/...`` is not below
    ``miniwob``."""
    prefix = prefix.rstrip("/")
    return sorted(s for s in scopes if s == prefix or s.startswith(prefix + "/"))


def merge_scopes(heads: Sequence[tuple[str, Sequence[Workflow]]]) -> list[Workflow]:
    """Several scopes' workflows as one list with unique names, in the order given (pure).

    A workflow whose steps (`Workflow.abstract_signature`) equal one already taken from another scope
    is the same routine learnt twice: the first is kept. A different workflow whose name is already
    taken is renamed after its scope's last part (``login (login-user)``, then ``login (login-user 2)``
    ...), so the result depends only on the input order. Workflows without steps are never merged by
    signature (an empty signature says nothing about what they do).
    """
    taken: set[str] = set()
    first_scope: dict[tuple[tuple[str, str, str], ...], str] = {}
    out: list[Workflow] = []
    for scope, workflows in heads:
        tail = scope.rstrip("/").rsplit("/", 1)[-1] or scope
        for workflow in workflows:
            signature = workflow.abstract_signature()
            if signature:
                if first_scope.setdefault(signature, scope) != scope:
                    continue
            name = workflow.name
            if name in taken:
                name, n = f"{workflow.name} ({tail})", 2
                while name in taken:
                    name, n = f"{workflow.name} ({tail} {n})", n + 1
                workflow = workflow.model_copy(update={"name": name})
            taken.add(name)
            out.append(workflow)
    return out


def taught_by(merged: Sequence[Workflow], heads: Sequence[tuple[str, Sequence[Workflow]]]) -> dict[str, tuple[str, ...]]:
    """For each merged workflow, the other descriptions that taught its steps (`abstract_signature`) in
    `heads`, in the order given; workflows taught once are left out (pure).

    Why: measured on the arena's Trac with site scope, the log-in part that all nine change templates
    teach was kept with the description of the first of them (accept-ticket), and "move the ticket X to
    milestone 1.2" ranked it below three other parts: the model never logged in. Ranked by the closest
    of the goals that taught it, a part shared by a site's procedures is found from any of them."""
    described: dict[tuple[tuple[str, str, str], ...], list[str]] = {}
    for _scope, workflows in heads:
        for workflow in workflows:
            signature = workflow.abstract_signature()
            if signature and workflow.description not in described.setdefault(signature, []):
                described[signature].append(workflow.description)
    out: dict[str, tuple[str, ...]] = {}
    for workflow in merged:
        others = [d for d in described.get(workflow.abstract_signature(), []) if d != workflow.description]
        if others:
            out[workflow.name] = tuple(others)
    return out


def follows_in_view(
    merged: Sequence[Workflow], heads: Sequence[tuple[str, Sequence[Workflow]]]
) -> dict[str, tuple[str, ...]]:
    """For each merged part, the merged parts it follows in any scope of `heads` (`Provenance.follows`,
    read within its scope and named as `merge_scopes` kept it); parts that follow none are left out.

    Why: measured on the arena's Trac with site scope, the part that opens a ticket through the report
    of all tickets was kept with a question template's provenance (follows nothing), and "move the ticket
    X to milestone 1.2" opened the ticket before logging in: as a visitor, with nothing to change it by.
    The change templates that taught the same part taught it after the log-in part."""
    kept = {w.abstract_signature(): w.name for w in merged if w.abstract_signature()}
    out: dict[str, list[str]] = {}
    for _scope, workflows in heads:
        signature_of = {w.name: w.abstract_signature() for w in workflows}
        for workflow in workflows:
            before = kept.get(signature_of.get(workflow.provenance.follows, ()))
            me = kept.get(workflow.abstract_signature())
            if before and me and before != me and before not in out.setdefault(me, []):
                out[me].append(before)
    return {name: tuple(names) for name, names in out.items() if names}


def without_split_wholes(workflows: Sequence[Workflow]) -> list[Workflow]:
    """The workflows less those split into parts (each part names its whole: `Provenance.part_of`).

    Why: offered another template's whole workflows, the model ran them on its own task and they did
    the other template's ending (measured on the arena's Trac, site scope: a new ticket filed with the
    open-the-ticket workflow, a reassignment with set-milestone's, `milestone = 'carol'`). Its parts
    (log in, open the ticket) are what carries over; the ending is the task's own."""
    split = {w.provenance.part_of for w in workflows if w.provenance.part_of}
    return [w for w in workflows if w.name not in split]


def without_giving_up(workflows: Sequence[Workflow]) -> list[Workflow]:
    """The workflows less those with a `report_infeasible` step (their calls expanded first).

    Why: giving up is one template's conclusion about its own task (a reporter may not close a ticket;
    a milestone that does not exist), never a step toward another's. Measured on the arena's Trac, site
    scope: reporter-close's "click Modify Ticket, report_infeasible" was offered to close-ticket and
    reassign-ticket, and called four times; each broke at its first step."""
    return [w for w in workflows if not any(step.action == "report_infeasible" for step in w.steps)]


def view_over_prefix(
    store: WorkflowStore,
    prefix: str,
    *,
    mode: ViewMode = "topk",
    k: int = 3,
    use: WorkflowUse = "text",
    exclude: str | None = None,
    parts_only: bool = False,
) -> MemoryView:
    """Every scope under `prefix` at its head, merged into one view (`merge_scopes`, scopes sorted);
    `exclude` leaves one scope out (a site-scope arm reads only the site's *other* templates);
    `parts_only` keeps of each scope its parts and the workflows that split into none
    (`without_split_wholes`), less those that give up (`without_giving_up`).

    `versions` holds each scope's head version and `version` is None: no single version describes the
    view. A workflow's calls to others (`awm.memory.composition`) are expanded within its own scope's
    version before the merge, since a merged view may rename or drop the callee. No scope under the prefix yet: an empty view, not an error.
    """
    prefix = prefix.rstrip("/")
    if not prefix:
        raise AwmError("a memory scope prefix must not be empty (e.g. 'miniwob')")
    heads: list[tuple[str, Sequence[Workflow]]] = []
    versions: dict[str, int] = {}
    for scope in scopes_under(store.scopes(), prefix):
        if scope == exclude:
            continue
        head = store.head(scope)
        if head is None:  # cannot happen (a listed scope has a head, and heads are never removed)
            continue
        workflows = expand_all(head.workflows)  # calls resolve within their own version
        heads.append((scope, without_giving_up(without_split_wholes(workflows)) if parts_only else workflows))
        versions[scope] = head.version
    merged = merge_scopes(heads)
    return MemoryView(
        scope=prefix,
        version=None,
        workflows=tuple(merged),
        taught_by=taught_by(merged, heads),
        follows=follows_in_view(merged, heads),
        mode=mode,
        k=k,
        use=use,
        versions=versions,
    )
