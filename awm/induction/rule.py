"""Rule-based induction (no LLM): one executable workflow per group of trajectories with the same
abstract steps.

Why a rule-based inducer: it is deterministic, free, and a baseline the neural inducer must beat.
A group is the set of admitted trajectories of one scope whose abstract sequences (action type,
target role, target label) are equal.

What becomes a ``{placeholder}``, and why:
- a value the task states is a parameter of the task, even when only one trajectory taught it
  (without this, a single successful login would teach the next episode its username). A value is
  stated when it is a quoted part or a whole word of every member's goal, or a quoted part under one
  simple transformation (``strip``, ``lower``, ``upper``, ``title``): enter-text-2 says "myron" and
  wants "MYRON" typed, so the value is ``{textbox|upper}`` and the goal template ``"{textbox}"``;
  `bind_parameters` then reads the next seed's raw word and `instantiate` applies the transformation.
  A pressed key counts only when quoted: "press Enter" in a goal is an instruction, not a value;
- values that differ across a group's members;
- the label of a clicked, hovered, checked, unchecked or selected-in target that is a *quoted* part
  of every member's goal (``Click on the link "Faucibus"`` -> label ``{link}``): one success then
  teaches every seed, and groups that differ only in such a label give one workflow. Bare words stay
  literal: login-user says "press login", and its button is always "Login".
Other values equal across all members stay literal. A value's parameter is named after its target's
label (else role), a label's after its role; a parameter is identified by the goal part it comes
from, so one part used twice (typed twice, or typed in two cases) is one parameter.

An answer the goal does not state (``send_msg_to_user('minor')`` after opening the ticket asked about)
is not kept: it was read off the page the procedure led to, and replaying it would give every later
task the taught task's answer. The workflow ends where the answer is read, and the agent answers from
that page (an answer the goal states, a parameter, is kept).

Fills and selections get a ``value_is`` postcondition, the value the executor must see in the field
afterwards; clicks get none, since a page's reaction to a click is not reliably recorded.
Element ids quoted in the model's thoughts are removed, since they only held on the page that
produced them; a thought that only repeats the action (``fill, value='MYRON'``) is dropped, since it
teaches nothing the step does not already say.
Trajectories with no executed, successful step are skipped, so every workflow has at least one step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from awm.actions import ACTION_SETS
from awm.goal_values import quoted_parts, without_quoted
from awm.induction.abstraction import (
    ID_ARGS,
    VALUE_ARGS,
    AbstractStep,
    AbstractTrajectory,
    abstract_trajectory,
    normalise,
)
from awm.induction.parts import STATE_ACTIONS, split_parts
from awm.memory.composition import compose_from_parts
from awm.memory.workflow import (
    CASE_PARAMETER,
    CASE_WORDS,
    PLACEHOLDER,
    TRANSFORMS,
    Provenance,
    StepCheck,
    Workflow,
    WorkflowStep,
)
from awm.secrets import is_placeholder
from awm.trajectory import Trajectory

_SLUG = re.compile(r"[^a-z0-9]+")
MAX_NAME_CHARS = 80

# How a value may come from its goal, in the order tried (the first that fits every member wins): a
# quoted part as it is ("") or stripped, a whole word ("word"), a quoted part in another case.
MATCH_ORDER = ("", "strip", "word", "lower", "upper", "title")
# Actions whose target is chosen by its label, so a label the goal quotes is a task parameter.
LABEL_ACTIONS = frozenset({"click", "dblclick", "hover", "check", "uncheck", "select_option"})
# Actions whose value is a key, a task value only when the goal quotes it.
KEY_ACTIONS = frozenset({"press"})
# Actions that answer the user: their text is read off the page unless the goal states it.
ANSWER_ACTIONS = frozenset({"send_msg_to_user"})
# Actions whose target holds the step's value afterwards: they get a ``value_is`` check.
VALUE_CHECK_ACTIONS = frozenset({"fill", "select_option"})
# Words a thought may hold and still only repeat its action (besides action and argument names).
FILLER_WORDS = frozenset({"then", "and"})
MAX_FILLER_WORDS = 2
ACTION_SYNONYMS = frozenset({"type", "select", "enter", "input"})

# Quoted parts of a goal: "...", '...' (not an apostrophe inside a word) and curly quotes.


@dataclass
class RuleReport:
    """What rule induction did with its inputs, for the driver's report."""

    skipped_empty: list[str] = field(default_factory=list)  # trajectory ids with no usable step
    groups: dict[str, list[str]] = field(default_factory=dict)  # workflow name -> member trajectory ids


@dataclass(frozen=True)
class GoalMatch:
    """Where a step's value (or label) comes from in each member's goal, and under which transformation.

    `parts` holds, per member, the goal's own text (what `bind_parameters` will read on a new goal);
    `transform` is "" for the value itself, else a key of `TRANSFORMS`.
    """

    transform: str
    parts: tuple[str, ...]

    def template(self, name: str) -> str:
        return "{" + name + (f"|{self.transform}" if self.transform else "") + "}"


@dataclass
class _StepPlan:
    """One step's templates and what to replace in the goal and thought for them."""

    value: str
    label: str
    row: str = ""  # the row words template (`row_match`): "" when the goal names nothing in the row
    goal_parts: list[tuple[str, str]] = field(default_factory=list)  # (first member's goal text, name)
    thought_parts: list[tuple[str, str]] = field(default_factory=list)  # (text, replacement)
    names: list[str] = field(default_factory=list)


def slugify(text: str, fallback: str = "value") -> str:
    """A placeholder name from a label: ``User name`` -> ``user_name``; a digit start gets a prefix."""
    slug = _SLUG.sub("_", text.lower()).strip("_")[:40].strip("_")
    if not slug:
        return fallback
    return slug if not slug[0].isdigit() else f"v_{slug}"


def _from_goal(value: str, goal: str) -> bool:
    """Whether a step's value is stated in the task's goal (as a whole word or quoted phrase)."""
    return bool(value.strip()) and re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", goal) is not None


def _goal_part(value: str, goal: str, transform: str, *, quoted_only: bool) -> str | None:
    """The part of `goal` that `value` is under `transform` ("" for itself, "word" for itself as a
    whole word anywhere), or None. Transformed parts are quoted parts of the goal."""
    if not value.strip():
        return None
    quoted = quoted_parts(goal)
    if transform == "word":
        return value if not quoted_only and _from_goal(value, goal) else None
    if not transform:
        return value if value in quoted else None
    apply = TRANSFORMS[transform]
    return next((part for part in quoted if part != value and apply(part) == value), None)


def match_value(
    values: Sequence[str], goals: Sequence[str], *, quoted_only: bool = False
) -> GoalMatch | None:
    """The first way (`MATCH_ORDER`) in which every member's value comes from its goal, or None.

    A quoted part is the value itself, or the value with its padding stripped (``" kanesha "``: the
    template then holds the whole quoted part, which binds however the next seed pads it), before a
    whole word of the goal is; changed case comes last and only from quoted parts, since a bare word
    that equals a value in another case ("Submit" vs "submit") is rarely what was typed.
    """
    for transform in MATCH_ORDER:
        parts = [
            _goal_part(v, g, transform, quoted_only=quoted_only) for v, g in zip(values, goals, strict=True)
        ]
        if all(p is not None for p in parts):
            return GoalMatch(
                "" if transform == "word" else transform, tuple(p for p in parts if p is not None)
            )
    return None


def match_label(labels: Sequence[str], goals: Sequence[str]) -> GoalMatch | None:
    """The quoted part of every member's goal equal to its target label (case and spacing aside), or None."""
    parts = []
    for label, goal in zip(labels, goals, strict=True):
        part = next(
            (p for p in quoted_parts(goal) if label.strip() and normalise(p) == normalise(label)), None
        )
        if part is None:
            return None
        parts.append(part)
    return GoalMatch("", tuple(parts))


_NAMING_WORD = re.compile(r"^(?:[A-Z]\w*|\S*\d\S*)$")  # a capitalised word or one holding a digit
_PUNCTUATION = ".,;:!?()\"'“”‘’"


def row_part(row: str, label: str, goal: str) -> str | None:
    """The longest part of the goal that the row's text holds (pure): a quoted part, else a run of the
    goal's words with a name or a number in it ("Alice Smith", "#42", "1.3"); None when there is none.
    Words of the step's own label do not count (the row of an Edit link holds "Edit" too).

    Why a goal can be read so on any site: a task that means one row of a list (the e-mail from Alice,
    the Edit link of ticket #42) must say which, and rows are told apart by a name, a number or a
    title, which the row shows; the words of the goal's own sentence are not capitalised (but its first)
    and hold no digit, so they do not pass for the row's identity.
    """
    text = normalise(row)
    if not text:
        return None
    own = set(normalise(label).split())
    quoted = [p for p in quoted_parts(goal) if p.strip() and normalise(p) in text and normalise(p) not in own]
    if quoted:
        return max(quoted, key=len)
    words = [w.strip(_PUNCTUATION) for w in goal.split()]
    naming = [i > 0 and bool(_NAMING_WORD.match(w)) and normalise(w) not in own for i, w in enumerate(words)]
    best: str | None = None
    for start in range(len(words)):
        for stop in range(start + 1, len(words) + 1):
            run = words[start:stop]
            part = " ".join(run)
            if not all(run) or not naming[start] or not naming[stop - 1] or (best and len(part) <= len(best)):
                continue
            held = re.search(r"(?<!\w)" + re.escape(normalise(part)) + r"(?!\w)", text)
            if held and _from_goal(part, goal):
                best = part
    return best


def row_match(rows: Sequence[str], labels: Sequence[str], goals: Sequence[str]) -> GoalMatch | None:
    """The part of every member's goal that its step's row holds (`row_part`), or None: what a control
    repeated in every row (a star icon, an Edit link) is grounded by on a new goal's page."""
    parts = [row_part(r, lab, g) for r, lab, g in zip(rows, labels, goals, strict=True)]
    if not all(parts):
        return None
    return GoalMatch("", tuple(p for p in parts if p))


@dataclass(frozen=True)
class LabelMiddle:
    """Labels that differ only in words each member's goal states (``Milestone: 1.3`` taught by "...
    milestone 1.3 ...", ``Milestone: 1.2`` by "... milestone 1.2 ..."): the shared words around them
    and where the differing words come from in each goal."""

    prefix: str
    suffix: str
    match: GoalMatch


def label_middle(labels: Sequence[str], goals: Sequence[str]) -> LabelMiddle | None:
    """The words the labels do not share, when each member's goal states its own (pure); None when the
    labels are all equal, or what differs is not in the goals.

    Why only across members that differ: one label alone cannot say which of its words vary (``VIEW
    TICKETS`` shares "tickets" with many a goal), but two demonstrations of one task whose labels differ
    exactly where their goals do show the label is built from the task's value."""
    if len(set(labels)) < 2:
        return None
    words = [label.split() for label in labels]
    start = 0
    while all(len(w) > start for w in words) and len({w[start] for w in words}) == 1:
        start += 1
    end = 0
    while all(len(w) > start + end for w in words) and len({w[len(w) - 1 - end] for w in words}) == 1:
        end += 1
    middles = [" ".join(w[start : len(w) - end]) for w in words]
    if not all(m and _from_goal(m, g) for m, g in zip(middles, goals, strict=True)):
        return None
    first = words[0]
    prefix = " ".join(first[:start]) + (" " if start else "")
    suffix = (" " if end else "") + " ".join(first[len(first) - end :])
    return LabelMiddle(prefix=prefix, suffix=suffix, match=GoalMatch("", tuple(middles)))


def _plan_steps(members: Sequence[AbstractTrajectory]) -> list[_StepPlan]:
    """Per step of the first member: its value and label templates and the parts they replace.

    A parameter is keyed by where it comes from (the goal parts member by member, or the differing
    values): two steps with the same key share one placeholder (the same username typed twice, or a
    goal word typed once as it is and once in upper case); otherwise a clashing name gets a numeric suffix.
    """
    first = members[0]
    goals = [m.goal for m in members]
    by_key: dict[tuple, str] = {}
    used: set[str] = set()

    def name_for(key: tuple, base: str) -> str:
        if key in by_key:
            return by_key[key]
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        by_key[key] = name
        return name

    plans = []
    for i, step in enumerate(first.steps):
        plan = _StepPlan(value=step.value, label=step.label)
        if step.action in LABEL_ACTIONS and (
            label := match_label([m.steps[i].label for m in members], goals)
        ):
            name = name_for(("goal", label.parts), slugify(step.role, fallback="target"))
            plan.label = "{" + name + "}"
            plan.goal_parts.append((label.parts[0], name))
            plan.thought_parts += [(step.label, plan.label), (label.parts[0], plan.label)]
            plan.names.append(name)
        elif step.action in LABEL_ACTIONS and (
            middle := label_middle([m.steps[i].label for m in members], goals)
        ):
            name = name_for(("goal", middle.match.parts), slugify(middle.prefix or step.role, fallback="target"))
            plan.label = f"{middle.prefix}{{{name}}}{middle.suffix}"
            plan.goal_parts.append((middle.match.parts[0], name))
            plan.thought_parts.append((step.label, plan.label))
            plan.names.append(name)
        if step.action in LABEL_ACTIONS and plan.label == step.label and (
            row := row_match([m.steps[i].row for m in members], [m.steps[i].label for m in members], goals)
        ):
            name = name_for(("goal", row.parts), "row")
            plan.row = "{" + name + "}"
            plan.goal_parts.append((row.parts[0], name))
            plan.names.append(name)
        values = [m.steps[i].value for m in members]
        stated = match_value(values, goals, quoted_only=step.action in KEY_ACTIONS)
        if stated is None and len(set(values)) == 1:
            plans.append(plan)
            continue
        base = slugify((step.label if plan.label == step.label else "") or step.role or step.action)
        key = ("goal", stated.parts) if stated else ("value", tuple(values))
        name = name_for(key, base)
        plan.value = stated.template(name) if stated else "{" + name + "}"
        if stated is not None and _case_named_by_goals(stated.transform, goals) and (
            CASE_PARAMETER not in used or by_key.get(("case",)) == CASE_PARAMETER
        ):
            # The goal names the case ("in all upper case letters"): the case is a parameter too, so
            # a seed that asks for lower case binds it, and the value follows (`{name|case}`).
            name_for(("case",), CASE_PARAMETER)
            plan.value = "{" + name + "|" + CASE_PARAMETER + "}"
            plan.goal_parts.append((stated.transform, CASE_PARAMETER))
            plan.names.append(CASE_PARAMETER)
        part = stated.parts[0] if stated else step.value
        plan.goal_parts.append((part, name))
        plan.thought_parts += [(step.value, plan.value), (part, "{" + name + "}")]
        plan.names.append(name)
        plans.append(plan)
    return plans


def _case_named_by_goals(transform: str, goals: Sequence[str]) -> bool:
    """Whether every goal names the case transform as a word (``upper`` in "in all upper case letters")."""
    if transform not in CASE_WORDS:
        return False
    word = re.compile(r"(?<!\w)" + transform + r"(?=\s+case\b)", re.IGNORECASE)
    return all(word.search(goal) for goal in goals)


def _substitute(text: str, replacements: Sequence[tuple[str, str]], *, quoted: Sequence[str] = ()) -> str:
    """Replace each text (as a whole word) by its replacement in one pass, longest first.

    One pass, so a replacement is never itself replaced (a value "name" does not reach into
    ``{name}``). A text in `quoted` is replaced only where it stands between quotes, so a goal's quoted
    value does not also take the same word elsewhere in the goal.
    """
    table: dict[str, str] = {}
    for t, r in replacements:
        if t.strip():
            table.setdefault(t, r)  # the first replacement of a text wins
    if not table:
        return text
    alternatives = []
    for t in sorted(table, key=lambda t: (-len(t), t)):
        if t in quoted:
            alternatives.append(r"(?<=[\"'\u201c\u2018])" + re.escape(t) + r"(?=[\"'\u201d\u2019])")
        else:
            alternatives.append(r"(?<!\w)" + re.escape(t) + r"(?!\w)")
    return re.sub("|".join(alternatives), lambda m: table[m.group(0)], text)


def goal_template(members: Sequence[AbstractTrajectory], plans: Sequence[_StepPlan]) -> str:
    """The first member's goal with its parameters' goal parts replaced by plain ``{name}``.

    Plain, even for a transformed value: the template is read by `bind_parameters`, which must recover
    the goal's own text; the step applies the transformation. When the members' goals differ only in
    those parts (the common case for one task family), this is their common template, e.g.
    ``Log in as {username} with password {password}``. Spacing is collapsed as `bind_parameters`
    collapses a goal's.
    """
    goal = members[0].goal
    pairs = [(part, "{" + name + "}") for plan in plans for part, name in plan.goal_parts]
    return re.sub(r"\s+", " ", _substitute(goal, pairs, quoted=quoted_parts(goal)))


_QUOTED_ID = re.compile(r"\[\s*[A-Za-z]?\d+\s*\]|\(\s*['\"]?[A-Za-z]?\d+['\"]?\s*\)")
_WORD = re.compile(r"\w+")


def scrub_ids(thought: str) -> str:
    """A thought without the element ids it quoted (``fill[19], press[20]`` -> ``fill, press``)."""
    text = _QUOTED_ID.sub("", thought)
    return re.sub(r"\s+([,.;])", r"\1", re.sub(r"\s{2,}", " ", text)).strip(" ,;")


def _action_vocabulary() -> frozenset[str]:
    """Action and argument names of every action set, lower case: the words of an action echo."""
    words = set(ACTION_SYNONYMS) | ID_ARGS | set(VALUE_ARGS)
    for specs in ACTION_SETS.values():
        for spec in specs.values():
            words.add(spec.name.lower())
            words.update(a.name.lower() for a in spec.args)
    return frozenset(words)


def repeats_action(thought: str) -> bool:
    """Whether a thought only repeats an action: action and argument names, quoted values, numbers
    (ids left bare), punctuation and at most `MAX_FILLER_WORDS` of "then"/"and".

    A small model's compressed thoughts (``fill, value='MYRON'``, ``fill, press``) say nothing the
    step does not, and a stale value in them misleads the next seed more than no reasoning does. Any
    other word keeps the thought: a bare value or label may be all a thought says, but it may also be
    text worth keeping, and a kept echo costs a line while a dropped sentence loses the why.
    """
    echo = _action_vocabulary()
    fillers = 0
    for word in _WORD.findall(without_quoted(thought).lower()):
        if word in FILLER_WORDS:
            fillers += 1
        elif not (word.isdigit() or word in echo):
            return False
    return fillers <= MAX_FILLER_WORDS


def step_reasoning(step: AbstractStep, plan: _StepPlan) -> str:
    """The step's thought without ids, with its parameters' texts replaced; "" if it only echoes."""
    thought = scrub_ids(step.thought)
    if repeats_action(thought):
        return ""
    return _substitute(thought, plan.thought_parts)


def workflow_name(steps: Sequence[AbstractStep], labels: Sequence[str] | None = None) -> str:
    """A readable name from the steps, e.g. ``fill Username, fill Password, click Log in``; `labels`
    (the workflow's own, parameters in braces) replace the teaching labels step for step.

    Why the workflow's labels: named after the teaching labels, the ticket workflows of the arena were
    called ``click VIEW TICKETS, ..., click Sync token invalid after...`` after one training ticket's
    summary, and the next instance, about another ticket, learned a second workflow of the same steps
    under the other summary's name; the model is shown the name when it picks a workflow.
    """
    shown = labels if labels is not None else [s.label for s in steps]
    parts = [f"{s.action} {label or s.role}".strip() for s, label in zip(steps, shown, strict=True)]
    name = ", ".join(parts)
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 3].rstrip(", ") + "..."


def value_check(step: AbstractStep, value: str) -> StepCheck | None:
    """The `value_is` check of a fill or a selection: the field must show the value afterwards.

    None for a secret (the teaching step typed `{password}`): the executor types the secret's value,
    which the workflow never holds, so a check against the placeholder could never pass (every login
    workflow of the arena was refused by its replay for this), and a password field's value is not
    read back anyway."""
    if step.action not in VALUE_CHECK_ACTIONS or is_placeholder(step.value):
        return None
    return StepCheck(kind="value_is", value=value)


def read_answers(members: Sequence[AbstractTrajectory]) -> set[int]:
    """The indices of the members' answer steps whose text no member's goal states (pure): answers read
    off the page, which a workflow must leave to the agent (see the module docstring). Stated means
    quoted: a bare word is too weak a sign ("How many tickets has milestone 1.3?" answered "3" is no
    answer the goal dictates, though "3" stands alone in "1.3")."""
    goals = [m.goal for m in members]
    return {
        i
        for i, step in enumerate(members[0].steps)
        if step.action in ANSWER_ACTIONS
        and match_value([m.steps[i].value for m in members], goals, quoted_only=True) is None
    }


def unsubmitted_before(members: Sequence[AbstractTrajectory], answers: set[int]) -> set[int]:
    """The indices of the fields set (fill, select, check) right before a read answer, with nothing
    after them but the answer (pure): a value typed and never submitted changed nothing the answer
    was read from. Why: measured on the arena's Trac, the model opened the ticket by the workflow it
    was given, typed the ticket's summary into the search box, did not search, and answered; online
    induction then learnt "open the ticket, then type its summary into the search box" as a workflow."""
    steps = members[0].steps
    out: set[int] = set()
    for i in sorted(answers):
        j = i - 1
        while j >= 0 and steps[j].action in STATE_ACTIONS and j not in answers:
            out.add(j)
            j -= 1
    return out


def without_read_answers(members: Sequence[AbstractTrajectory]) -> list[AbstractTrajectory]:
    """The members without their answers read off the page (`read_answers`) and the fields set right
    before them and never submitted (`unsubmitted_before`), step for step alike (pure)."""
    answers = read_answers(members)
    dropped = answers | unsubmitted_before(members, answers)
    return [replace(m, steps=tuple(s for i, s in enumerate(m.steps) if i not in dropped)) for m in members]


def workflow_from_group(members: Sequence[AbstractTrajectory], *, admission: str) -> Workflow:
    """One workflow for a group of members with equal signatures (placeholders for task values)."""
    plans = _plan_steps(members)
    first = members[0]
    steps = []
    for step, plan in zip(first.steps, plans, strict=True):
        post = value_check(step, plan.value)
        steps.append(
            WorkflowStep(
                reasoning=step_reasoning(step, plan),
                action=step.action,
                target=step.target.model_copy(update={"label": plan.label, "row": plan.row}),
                value=plan.value,
                post=post,
                options=list(step.options) if PLACEHOLDER.search(plan.value) else [],
            )
        )
    return Workflow(
        name=workflow_name(first.steps, [plan.label for plan in plans]),
        description=goal_template(members, plans),
        parameters=list(dict.fromkeys(n for plan in plans for n in plan.names)),
        steps=steps,
        provenance=Provenance(
            trajectory_ids=[m.trajectory_id for m in members], mode="rule", admission=admission, model=""
        ),
    )


def _joined_on_label_middles(
    groups: dict[tuple[str, tuple], list[AbstractTrajectory]],
) -> dict[tuple[str, tuple], list[AbstractTrajectory]]:
    """Groups of one scope whose steps differ only in labels built from their goals' values
    (`label_middle`) joined into one, in first-appearance order (pure): the same procedure on another
    item ("Milestone: 1.3", "Milestone: 1.2"), which would otherwise teach one workflow per item."""
    joined: dict[tuple[str, tuple], list[AbstractTrajectory]] = {}
    for key, members in groups.items():
        target = next((k for k, m in joined.items() if _joinable(m, members)), None)
        if target is None:
            joined[key] = list(members)
        else:
            joined[target].extend(members)
    return joined


def _joinable(a: Sequence[AbstractTrajectory], b: Sequence[AbstractTrajectory]) -> bool:
    first, other = a[0], b[0]
    if first.scope != other.scope or len(first.steps) != len(other.steps):
        return False
    members = [*a, *b]
    goals = [m.goal for m in members]
    for i, (x, y) in enumerate(zip(first.steps, other.steps, strict=True)):
        if (normalise(x.action), normalise(x.role)) != (normalise(y.action), normalise(y.role)):
            return False
        labels = [m.steps[i].label for m in members]
        if len({normalise(label) for label in labels}) > 1 and (
            x.action not in LABEL_ACTIONS
            or (match_label(labels, goals) is None and label_middle(labels, goals) is None)
        ):
            return False
    return True


def induce_rule(
    trajectories: Sequence[Trajectory], *, admission: str = "", parts: bool = False
) -> tuple[list[Workflow], RuleReport]:
    """Group admitted trajectories by (scope, abstract sequence) and emit one workflow per group.

    Groups that yield the same workflow once their labels are parameters (``click {link}`` taught by
    "Faucibus" and by "Tortor") are one workflow taught by both, named after the first. Groups keep
    the order in which their first member appears, and members the input order, so the result is
    deterministic for a given input (the loaders sort by task key). With `parts`, each workflow is
    followed by its reusable parts (`awm.induction.parts`), a part equal to one already emitted kept once.
    """
    report = RuleReport()
    groups: dict[tuple[str, tuple], list[AbstractTrajectory]] = {}
    for trajectory in trajectories:
        abstract = abstract_trajectory(trajectory)
        if not abstract.steps:
            report.skipped_empty.append(trajectory.trajectory_id)
            continue
        groups.setdefault((abstract.scope, abstract.signature), []).append(abstract)
    groups = _joined_on_label_middles(groups)
    workflows: dict[tuple, Workflow] = {}
    for (scope, _), members in groups.items():
        members = without_read_answers(members)
        if not members[0].steps:  # they only answered, from the page: no procedure to keep
            report.skipped_empty.extend(m.trajectory_id for m in members)
            continue
        workflow = workflow_from_group(members, admission=admission)
        ids = [m.trajectory_id for m in members]
        kept_parts = [
            _kept(workflows, scope, part, ids, report)
            for part in (split_parts(workflow, members[0].steps, workflow_name) if parts else [])
        ]
        # The whole calls the parts as kept (an equal part taught earlier keeps its own name).
        _kept(workflows, scope, compose_from_parts(workflow, kept_parts), ids, report)
    return _wholes_first(list(workflows.values())), report


def _kept(workflows: dict[tuple, Workflow], scope: str, one: Workflow, ids: list[str], report: RuleReport) -> Workflow:
    """`one`, or the equal workflow already emitted (which gains `ids` as teaching trajectories)."""
    content = (scope, one.provenance.part_of != "", one.model_dump_json(exclude={"name", "provenance"}))
    if content in workflows:
        one = workflows[content]
        one.provenance.trajectory_ids.extend(i for i in ids if i not in one.provenance.trajectory_ids)
    else:
        workflows[content] = one
    report.groups.setdefault(one.name, []).extend(ids)
    return one


def _wholes_first(workflows: list[Workflow]) -> list[Workflow]:
    """Each whole before its parts, in the order the groups came (a reader meets the routine before its
    pieces; the parts were kept first only so that the whole could call them by their kept names)."""
    order: list[Workflow] = []
    placed: set[int] = set()

    def place(workflow: Workflow) -> None:
        if id(workflow) not in placed:
            placed.add(id(workflow))
            order.append(workflow)

    for workflow in workflows:
        if not workflow.provenance.part_of:
            place(workflow)
            for part in workflows:
                if part.provenance.part_of == workflow.name:
                    place(part)
    for workflow in workflows:
        place(workflow)
    return order
