"""Evidence for the judge, gathered without a model: how the episode ended, and the goal's values checked.

Why: asked for a story verdict over a whole trajectory, the embedded 1.5B model called every episode a
failure (recall 0 on 36 MiniWoB++ episodes). Much of the answer needs no model at all: an episode the
loop detector, the step budget or an error ended is a failure; a value the goal names (a quoted
string, a date, a number, a name) that no action used and no page showed was not entered, nor was one
the page offered as a control (a link, a checkbox) that no action touched; and "Expand the section and
click submit" is not done by one click. What is left for the model is one narrow question over these
checked facts (`awm.evaluation.judge`).

Measured on 165 finished MiniWoB++ episodes of the base split (scripts/judge_evidence_report.py), these
rules alone fail 97 episodes, all but one truly failed, and leave 68 for the model, 54 of them true
successes (98% of all true successes); the model's question has 14 failures left to catch.

Everything here is pure and generic (no benchmark's task names): it reads the goal text, each step's
action, target, outcome and page feedback, the final answer and the final page. It never reads the
ground-truth reward or the benchmark's info (`meta["env_info"]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from awm.goal_values import (
    PLACE,
    GoalClause,
    GoalLiteral,
    asked_case,
    extract_goal_literals,
    goal_clauses,
    in_case,
    is_whole_value,
    literal_in,
    required_actions,
    without_quoted,
)
from awm.trajectory import EpisodeEnd, Step, Trajectory, action_values

__all__ = ["GoalLiteral", "action_values", "extract_goal_literals", "literal_in", "required_actions"]  # read here by the judge's tests too

# Ends that settle the verdict without a model: the harness, not the page or the agent, stopped the
# episode (loop detector, step or token budget, errors, the rails, or it never finished).
FAILED_ENDS: frozenset[str] = frozenset(
    {"stuck", "max_steps", "timeout", "llm_error", "env_error", "budget_exhausted", "refused", "running"}
)
# Ends where the page (`done`) or the agent (`answered`, `infeasible`) closed the episode: these go on.
SELF_ENDS: frozenset[str] = frozenset({"done", "answered", "infeasible"})
assert FAILED_ENDS | SELF_ENDS == set(get_args(EpisodeEnd)), "every EpisodeEnd must be classified"

_END_REASONS = {
    "stuck": "the loop detector stopped it (the same action on an unchanged page)",
    "max_steps": "it ran out of steps",
    "timeout": "it ran out of time",
    "llm_error": "the model could not be reached",
    "env_error": "the browser or environment failed",
    "budget_exhausted": "it ran out of token budget",
    "refused": "the safety rails refused an action",
    "running": "it never finished",
}

# --- the goal's literal values -------------------------------------------------------------------

# --- where the agent used or saw a value ---------------------------------------------------------

PAGE_SAID_CHARS = 120
_VERBS = {
    "fill": "typed by fill",
    "type": "typed by type",
    "select_option": "chosen by select_option",
    "send_msg_to_user": "said in the answer (send_msg_to_user)",
    "report_infeasible": "said in the infeasibility report",
    "goto": "visited by goto",
    "press": "pressed",
    "run_workflow": "passed to run_workflow",
}


def action_name(step: Step) -> str:
    name = step.action.get("name") if step.action else None
    return str(name) if name else (step.action_str.split("(", 1)[0] or "(no action)")


def describe_target(step: Step) -> str:
    """`listbox 'colors'` from the step's target; empty when it had none."""
    if step.target is None or not (step.target.role or step.target.label):
        return ""
    role = step.target.role or "element"
    return f"{role} '{step.target.label}'" if step.target.label else role


@dataclass(frozen=True)
class LiteralCheck:
    """Where one goal value was found: `acted` (an executed action used it, or the final answer said
    it), `page` (only the page showed it, as text), `unused` (the page offered it as a control, a link
    or a checkbox, and no action used that control), `failed` (only an action that failed used it),
    `skipped` (only shown, while an action used another value of the same list), `miscased` (typed,
    but not in the letter case the goal asks for: "in all upper case letters"), `missing`."""

    literal: GoalLiteral
    status: Literal["acted", "page", "failed", "skipped", "unused", "miscased", "misplaced", "missing"]
    where: str

    @property
    def missing(self) -> bool:
        """A value the agent did not use, nor see, nor skip in a list it worked on, or typed into another
        field than the goal names for it: evidence of failure."""
        return self.status in ("missing", "failed", "skipped", "unused", "miscased", "misplaced")

    def render(self) -> str:
        return f"goal value '{self.literal.text}': {self.where}"


# Actions that point at an element without doing anything to it: focusing or hovering a button is not
# pressing it.
LOOK_ONLY_ACTIONS = frozenset({"focus", "hover", "scroll"})


def _acted_by(literal: GoalLiteral, step: Step) -> str | None:
    """How `step`'s action used the literal (its values, or the label of the element it acted on); a
    focus or a hover uses nothing (`LOOK_ONLY_ACTIONS`). Why: on "Click button ONE" an episode that
    focused ONE and clicked TWO was judged a success (seen on fresh seeds of click-test-2)."""
    target = describe_target(step)
    on = f" on {target}" if target else ""
    name = action_name(step)
    if name in LOOK_ONLY_ACTIONS:
        return None
    if any(literal_in(literal, v) for v in action_values(step)):
        return f"{_VERBS.get(name, 'used by ' + name)}{on} at step {step.index}"
    if step.target is not None and literal_in(literal, step.target.label):
        return f"target of {name}{on} at step {step.index}"
    return None


# Words between a field's name and its value in a goal ("the password is X", "username: X", "as X").
_CUE_FILLERS = frozenset(
    {"the", "a", "an", "is", "as", "of", "be", "with", "named", "called", "set", "enter", "type", "for", "in", "into", "and"}
)
_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")


def field_cue(literal: GoalLiteral, goal: str) -> str | None:
    """The word the goal names a typed value's field by: the last word before the value that is not a
    filler ("with the password 'Y'" -> password, "username: X" -> username); None when the value opens
    the goal. Pure.

    Why read the goal so, on any site: a goal that gives several values to type says which is which by
    naming each one's field right before it (username X, password Y; from Paris, to Rome); a value typed
    into another field than the one named is the task done wrong, however the page ended."""
    at = goal.find(literal.text)
    if at <= 0:
        return None
    words = _WORD.findall(goal[:at])[-3:]
    for word in reversed(words):
        if word.lower() not in _CUE_FILLERS:
            return word.lower()
    return None


def _misplaced(literal: GoalLiteral, step: Step, trajectory: Trajectory) -> str | None:
    """Why a fill put the goal's value into the wrong field, or None: the goal names the value's field
    (`field_cue`), the episode filled a field whose label says that word, and this fill's field's label
    does not."""
    if action_name(step) != "fill" or step.target is None:
        return None
    cue = field_cue(literal, trajectory.task.goal)
    if cue is None:
        return None
    def says_cue(label: str) -> bool:
        return cue in {w.lower() for w in _WORD.findall(label)}

    labels = {s.target.label for s in trajectory.steps if s.target is not None and action_name(s) == "fill" and s.outcome == "ok"}
    named = sorted(label for label in labels if says_cue(label))
    if not named or says_cue(step.target.label):
        return None
    return f"typed into {describe_target(step)} at step {step.index}, but the goal names it as the {cue} ({named[0]!r} was filled too)"


def _page_said(step: Step, trajectory: Trajectory) -> str:
    """What the page showed in answer to an executed action (reaction, feedback), without the
    harness's echo of actions ("You repeated fill('17', '03/15/2016')..."): an echo is not the page."""
    if step.outcome != "ok":
        return ""
    said = " ".join(x for x in (step.reaction, step.feedback) if x)
    for s in trajectory.steps:
        if s.action_str:
            said = said.replace(s.action_str, " ")
    return said


def _without_goal(text: str, goal: str) -> str:
    """A page that repeats the goal sentence (an instruction banner) does not show its values as done."""
    return text.replace(goal, " ") if goal else text


@dataclass(frozen=True)
class FinalPage:
    """The page text to check against, and what it is: the page after the last action when the
    harness stored it, else the last observation the agent saw (before its last action)."""

    text: str
    after_last_action: bool

    @property
    def label(self) -> str:
        return "the final page" if self.after_last_action else "the last page the agent saw"


def final_page(trajectory: Trajectory) -> FinalPage:
    """`meta["final_observation"]` (after the last action) when stored, else the last step's observation."""
    final = trajectory.meta.get("final_observation")
    if isinstance(final, str) and final:
        return FinalPage(final, True)
    return FinalPage(trajectory.steps[-1].observation if trajectory.steps else "", False)


# Roles of the observation's element lines ("[24] clickable 'et'") that the agent could act on.
CONTROL_ROLES = frozenset(
    """
    button checkbox clickable combobox link listbox menuitem menuitemcheckbox menuitemradio option radio
    searchbox slider spinbutton switch tab textbox treeitem
    """.split()
)
_CONTROL_LINE = re.compile(r"\s*\[[^\]\s]+\]\s+([\w-]+)\s+'(.*?)'(?:,|\s|$)")


def _offered_control(literal: GoalLiteral, trajectory: Trajectory) -> str | None:
    """The first control of a page the agent saw (or the final page) whose whole label is the value.

    Why: a goal value that is the very name of a link, tab or checkbox the page offered designates that
    control ("click on the link 'et'", "select tN"); if no action ever used it, the agent did something
    else. Only the whole label counts: a value inside a longer label ("Anne" in an inbox row 'Anne
    Ullamcorper...') may only locate what to act on ("find the email by Anne and click its star").
    Only asked when the agent gave no final answer: a question may name a control it only had to read.
    """
    pages = [s.observation for s in trajectory.steps] + [final_page(trajectory).text]
    for page in pages:
        for line in page.splitlines():
            match = _CONTROL_LINE.match(line)
            if match is None or match.group(1).lower() not in CONTROL_ROLES:
                continue
            label = " ".join(match.group(2).split())
            if is_whole_value(literal, label):
                return f"{match.group(1)} '{label}'"
    return None


def check_literal(literal: GoalLiteral, trajectory: Trajectory) -> LiteralCheck:
    """Find `literal` in, by order of strength: executed actions and the final answer, what the page
    said changed after an action (feedback, reaction) or the final page, and actions that failed.

    For executed actions the LAST one that used the value is reported, with what the page said after
    it, so a value chosen and then undone ("checkbox 'CA9b' is now unchecked") shows as such.
    """
    goal = trajectory.task.goal
    acted = [(s, how) for s in trajectory.steps if (how := _acted_by(literal, s)) is not None]
    done = [(s, how) for s, how in acted if s.outcome == "ok"]
    if done:
        last, how = done[-1]
        case = asked_case(goal)
        typed = [v for v in action_values(last) if literal_in(literal, v)]
        if case is not None and typed and not any(in_case(v, case) for v in typed):
            return LiteralCheck(literal, "miscased", f"{how}, as {typed[-1]!r}: not in {case} case as the goal asks")
        wrong_field = _misplaced(literal, last, trajectory)
        if wrong_field is not None:
            return LiteralCheck(literal, "misplaced", wrong_field)
        earlier = [str(s.index) for s, _ in done[:-1]]
        where = how + (f" (also at step {', '.join(earlier)})" if earlier else "")
        said = " ".join(_page_said(last, trajectory).split())
        if said:
            where += f"; the page then said: {said[:PAGE_SAID_CHARS]}"
        return LiteralCheck(literal, "acted", where)
    if trajectory.final_answer and literal_in(literal, trajectory.final_answer):
        return LiteralCheck(literal, "acted", "said in the final answer")
    control = None if trajectory.final_answer else _offered_control(literal, trajectory)
    if control is not None:
        return LiteralCheck(literal, "unused", f"the page offered it ({control}), but no action used it")
    for step in reversed(trajectory.steps):
        said = _page_said(step, trajectory)
        if said and literal_in(literal, _without_goal(said, goal)):
            return LiteralCheck(literal, "page", f"shown by the page after step {step.index}")
    page = final_page(trajectory)
    if page.text and literal_in(literal, _without_goal(page.text, goal)):
        return LiteralCheck(literal, "page", f"shown on {page.label} (no action used it)")
    if acted:
        step, how = acted[0]
        return LiteralCheck(literal, "failed", f"only in {how}, which failed ({step.outcome})")
    return LiteralCheck(literal, "missing", "not found in any action or the final page")


def check_literals(trajectory: Trajectory) -> list[LiteralCheck]:
    """Every goal value checked; then, within one listed group ("Select A, B, C"), a value only shown
    on a page while an action used another of the list is `skipped`: the list names the things to act
    on, and the agent acted on some of them, not this one."""
    checks = [check_literal(x, trajectory) for x in extract_goal_literals(trajectory.task.goal)]
    used = {c.literal.group: c.literal.text for c in checks if c.status == "acted" and c.literal.group}
    return [
        LiteralCheck(c.literal, "skipped", f"listed with '{used[c.literal.group]}', which an action used; "
                     "this one only shown on a page, no action used it")
        if c.status == "page" and c.literal.group in used
        else c
        for c in checks
    ]  # fmt: skip


def executed_actions(trajectory: Trajectory) -> list[Step]:
    """Steps whose action ran (`ok`), workflow sub-steps included."""
    return [s for s in trajectory.steps if s.outcome == "ok" and (s.action_str or s.action)]


# Controls whose clicks add to a set of choices (each box is on or off by itself): what a goal that lists
# the boxes to tick can be over-done on. A radio button or an option replaces the one before it, so a
# wrong one chosen first and put right later leaves no extra state; those are not counted.
MULTI_CHOICE_ROLES = frozenset({"checkbox", "switch", "menuitemcheckbox"})
_TOGGLES = frozenset({"click", "check", "uncheck"})


def extra_choices(trajectory: Trajectory) -> list[str]:
    """The boxes the episode left ticked that the goal does not name, when it ticked ones the goal does
    name (pure): "Select Jc and XMHY, then submit" done with 0QW ticked too set state the goal did not
    ask for. A box clicked an even number of times was put back. Read from the executed actions, not
    the page: the final page may have gone on (a form submitted), and a box named by a value is a box
    the goal lists on any site ("Tick Newsletter and Offers"), so this holds off MiniWoB++ too."""
    goal = trajectory.task.goal
    clicks: dict[str, int] = {}
    for step in executed_actions(trajectory):
        target = step.target
        if action_name(step) in _TOGGLES and target is not None and target.role in MULTI_CHOICE_ROLES and target.label:
            clicks[target.label] = clicks.get(target.label, 0) + 1
    ticked = [label for label, n in clicks.items() if n % 2]
    # Named: the label stands in the goal as a whole phrase. Not the extracted values: a plain word
    # ("dhjq") or one like a stop word ("BY") is listed all the same ("Select dhjq, yBDX and BY").
    named = {label for label in clicks if re.search(rf"(?<!\w){re.escape(label)}(?!\w)", goal, re.IGNORECASE)}
    return [label for label in ticked if label not in named] if named else []


# --- a goal of named clicks, done click by click ---------------------------------------------------

# Clause verbs that one action on one control does, and the actions that do them.
_CLAUSE_ACTIONS = {
    "click": {"click", "press"}, "press": {"click", "press"}, "hit": {"click", "press"},
    "expand": {"click"}, "open": {"click"}, "highlight": {"select_text"},
}  # fmt: skip
_ELEMENT_LINE = re.compile(r"^\[[^\]]+\] (\S+)(?: '(.*?)')?(?:,|$)", re.MULTILINE)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3}


def _names_control(clause: GoalClause, step: Step) -> bool:
    """Whether the clause names the control `step` acted on: its whole label stands in the clause
    ("click submit" -> button 'Submit'), or the clause's words pick it alone among the page's elements of
    its role (the page before the step): the clause says the role and the page had one such element
    ("Click the button." on a page with one button), or only its label shares a word with the clause
    ("Expand the section below" -> tab 'Section #11', not tab 'Submit')."""
    target = step.target
    if target is None:
        return False
    label = " ".join(target.label.split())
    if label and re.search(rf"(?<!\w){re.escape(label)}(?!\w)", clause.rest, re.IGNORECASE):
        return True
    said = _words(clause.rest)
    same_role = [name for role, name in _ELEMENT_LINE.findall(step.observation) if role == target.role]
    if target.role in said:
        return len(same_role) == 1
    sharing = [name for name in same_role if _words(name) & said]
    return len(sharing) == 1 and bool(_words(label) & said)


def clauses_done(trajectory: Trajectory) -> bool:
    """Whether the executed actions are, one for one and in order, the goal's clauses of one action each
    (click, press, expand, open, highlight), each on the control its clause names (`_names_control`),
    and nothing else ran.

    Why: "Click the button." or "Expand the section below and click submit." names no value, so the
    value check cannot settle it, and the embedded model's yes/no was a coin toss; the clauses themselves
    say which controls, and a run that touched exactly those, in that order, did what was asked. On an
    ordinary site the same holds: "Click the Sign in button" on a page where 'Sign in' is the one button
    the agent pressed. A control picked by a quality ("the button that best describes the figure") is
    never named this way when the page has several of its role, so that goes to the model.
    """
    clauses = goal_clauses(trajectory.task.goal)
    executed = executed_actions(trajectory)
    if not clauses or len(executed) != len(clauses):
        return False
    return all(
        action_name(step) in _CLAUSE_ACTIONS.get(clause.verb, set()) and _names_control(clause, step)
        for clause, step in zip(clauses, executed, strict=True)
    )


# --- the decision before any model ---------------------------------------------------------------

PreLabel = Literal["failure", "success", "ask_model"]


@dataclass(frozen=True)
class PreDecision:
    """What the trajectory settles alone: `failure` with a plain reason, `success` when every value the
    goal names was used, or `ask_model` with the checks.

    `rule` names the rule that decided (`end`, `no_action`, `literal`, `extra_choice`, `too_few_actions`,
    `values_used`, `clauses_done`, or `none` when the model is asked).
    """

    label: PreLabel
    rule: Literal[
        "end", "no_action", "literal", "extra_choice", "too_few_actions", "values_used", "clauses_done", "none"
    ]
    reason: str
    checks: list[LiteralCheck] = field(default_factory=list)

    @property
    def facts(self) -> list[str]:
        return [c.render() for c in self.checks]


def pre_decide(trajectory: Trajectory) -> PreDecision:
    """Failure by the end, by no executed action, by a missing goal value, by a box left ticked that the
    goal does not name (`extra_choices`), or by fewer executed actions
    than the goal's action verbs; success when the page closed the task after the last action (`done`),
    the goal names values, executed actions used every one of them (typed, chosen, clicked by its
    label) and the goal names no position ("the 4th result") that values cannot show, or, for a goal
    with no values, when the actions were its clauses one for one (`clauses_done`); else ask the
    model. An answer (`answered`) always goes to the model: using the goal's values does not make the
    answer right.

    Precision first: when the trajectory shows the goal was not met, the model is not asked, however it
    would answer. An `infeasible` claim is exempt from the action count (it needs no actions), not from
    the goal-value check, and is never a success without the model.

    Why success without the model: asked one yes/no question over this evidence, the 1.5B model was a
    coin toss (P(yes) 0.46-0.61 on successes and failures alike, 105 episodes of the development split),
    and with every goal value used the question added no precision the rule did not have. Measured on two
    whole runs of the split (`scripts/judge_evidence_report.py`), see the README.
    """
    end = trajectory.end
    if end in FAILED_ENDS:
        last = trajectory.steps[-1] if trajectory.steps else None
        error = " ".join(last.error.split())[:160] if last is not None and last.error else ""
        detail = f" (last step: {error})" if error else ""
        return PreDecision("failure", "end", f"episode ended '{end}': {_END_REASONS[end]}{detail}")
    checks = check_literals(trajectory)
    executed = executed_actions(trajectory)
    if not executed and not trajectory.final_answer:
        return PreDecision("failure", "no_action", "no action was executed", checks)
    missing = [c for c in checks if c.missing]
    if missing:
        names = ", ".join(f"'{c.literal.text}'" for c in missing)
        return PreDecision("failure", "literal", f"goal value {names} not used or shown", checks)
    extra = extra_choices(trajectory)
    if extra:
        names = ", ".join(f"'{label}'" for label in extra)
        return PreDecision("failure", "extra_choice", f"{names} left ticked, which the goal does not name", checks)
    verbs = required_actions(trajectory.task.goal)
    if end != "infeasible" and len(executed) < len(verbs):
        reason = (
            f"the goal asks for at least {len(verbs)} actions ({', '.join(verbs)}); "
            f"{len(executed)} ran ({', '.join(action_name(s) for s in executed)})"
        )
        return PreDecision("failure", "too_few_actions", reason, checks)
    # A place in a list ("the 2nd paragraph"): which element it was, the values and labels do not show.
    position = PLACE.search(without_quoted(trajectory.task.goal))
    if end == "done" and position is None and all(c.status == "acted" for c in checks):
        if checks:
            return PreDecision(
                "success", "values_used", "every value the goal names was used by an executed action", checks
            )
        if clauses_done(trajectory):
            reason = "each clause of the goal was done, in order, on the control it names, and nothing else"
            return PreDecision("success", "clauses_done", reason, checks)
    return PreDecision("ask_model", "none", "goes to the model", checks)


# --- the offline figures: how much the model must add -------------------------------------------


@dataclass
class PreJudgeFigures:
    """The no-model part alone against ground truth: what it decides as success (and how rightly),
    what it leaves to the model, and the true successes it fails."""

    episodes: int = 0
    with_truth: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)
    truth_successes: int = 0
    evidence_successes: int = 0  # true successes the evidence calls success (no model)
    evidence_false_successes: list[str] = field(default_factory=list)  # true failures it calls success
    successes_to_model: int = 0  # true successes left to the model question
    failures_to_model: int = 0  # true failures the model must still catch
    false_failures: list[str] = field(default_factory=list)  # true successes the no-model part failed

    @property
    def to_model(self) -> int:
        return self.successes_to_model + self.failures_to_model

    @property
    def evidence_precision(self) -> float | None:
        """Precision of the no-model success decisions alone (the model never asked)."""
        called = self.evidence_successes + len(self.evidence_false_successes)
        return self.evidence_successes / called if called else None

    @property
    def evidence_recall(self) -> float | None:
        """Recall of the no-model success decisions alone: the judge's recall if the model said no to all."""
        return self.evidence_successes / self.truth_successes if self.truth_successes else None

    @property
    def precision(self) -> float | None:
        """The judge's precision if the model said yes to every episode it is asked about."""
        called = self.evidence_successes + len(self.evidence_false_successes) + self.to_model
        return (self.evidence_successes + self.successes_to_model) / called if called else None

    @property
    def recall(self) -> float | None:
        """The ceiling of the judge's recall: true successes not failed without the model."""
        kept = self.evidence_successes + self.successes_to_model
        return kept / self.truth_successes if self.truth_successes else None


def pre_judge_figures(rows: Iterable[tuple[Trajectory, PreDecision, bool | None]]) -> PreJudgeFigures:
    """Count (trajectory, decision, ground truth) rows; rows without ground truth count only in `episodes`."""
    out = PreJudgeFigures()
    for trajectory, decision, truth in rows:
        out.episodes += 1
        out.by_rule[decision.rule] = out.by_rule.get(decision.rule, 0) + 1
        if truth is None:
            continue
        out.with_truth += 1
        out.truth_successes += int(truth)
        if decision.label == "ask_model":
            out.successes_to_model += int(truth)
            out.failures_to_model += int(not truth)
        elif decision.label == "success":
            if truth:
                out.evidence_successes += 1
            else:
                out.evidence_false_successes.append(trajectory.trajectory_id)
        elif truth:
            out.false_failures.append(trajectory.trajectory_id)
    return out
