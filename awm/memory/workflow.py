"""The workflow model: a reusable, parameterised routine induced from good trajectories."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from awm.goal_values import QUOTED, without_quoted
from awm.trajectory import TargetDesc, utc_now

InductionMode = Literal["neural", "rule", "import", "manual"]

# ``{name}`` or ``{name|transform}``: group 1 is the name (so ``findall`` returns names). A transform
# applies to a value bound from the goal (see `instantiate`): the goal says "myron", the field wants
# "MYRON" -> ``{text|upper}``. ``{text|case}`` takes the transform from the goal too: the value of the
# parameter ``case`` (enter-text-2 says "in all upper case letters" on one seed, "lower" on the next).
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)(?:\|(?:lower|upper|strip|title|case))?\}")
PLACEHOLDER_PARTS = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)(?:\|(lower|upper|strip|title|case))?\}")
CASE_PARAMETER = "case"
CALL_ACTION = "run_workflow"  # a step that calls another workflow (`awm.memory.composition`)
CASE_WORDS = ("upper", "lower")
Transform = Literal["lower", "upper", "strip", "title"]
TRANSFORMS: dict[str, Callable[[str], str]] = {
    "lower": str.lower,
    "upper": str.upper,
    "strip": str.strip,
    "title": str.title,
}


class StepCheck(BaseModel):
    """What the page shows after a step went right, as data (`value` may hold placeholders).

    ``value_is``: the step's target now holds `value` (a field's text, a select's option);
    ``url_contains``: the page URL contains `value`; ``text_appears``: the page's text contains `value`.
    Why not the suite's selector-based postconditions: a workflow runs on pages whose element ids and
    markup it never saw; these three hold on any page the step's target grounds on.
    """

    kind: Literal["value_is", "url_contains", "text_appears"]
    value: str


class WorkflowStep(BaseModel):
    """One step: why, what action, on which kind of element, with which (templated) value.

    `action` is an action name from the closed action set (``click``, ``fill``, ``select_option``,
    ``press``, ``send_msg_to_user``... or Mind2Web's ``CLICK``/``TYPE``/``SELECT``). `value` may hold
    ``{placeholders}``. The target is a role plus label, never a raw element id. `post`, when set, is
    checked after the step runs as part of an executable workflow (`run_workflow`).

    A step may call another workflow of the same memory version (`awm.memory.composition`): action
    ``run_workflow``, `value` the callee's name, `params` the callee's parameters as text that may hold
    this workflow's placeholders (``{"username": "{username}"}``).
    """

    reasoning: str = ""
    action: str
    target: TargetDesc = Field(default_factory=TargetDesc)
    value: str = ""
    post: StepCheck | None = None
    params: dict[str, str] = Field(default_factory=dict)
    # A choice in a drop-down list whose value is a parameter: the options the list offered when the
    # teaching task chose (`bind_by_options` reads a goal's choice by them). Empty elsewhere.
    options: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_params(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No ``params`` key on a step that calls nothing, no ``options`` key on a step that chooses in no
        list: a workflow's body (its content address in the memory store) stays what it was before steps
        could call workflows or keep a list's options."""
        data = handler(self)
        if not self.params:
            data.pop("params", None)
        if not self.options:
            data.pop("options", None)
        return data

    @property
    def is_call(self) -> bool:
        return self.action == CALL_ACTION

    def placeholders(self) -> list[str]:
        if self.is_call:  # the callee's name is no template (it may hold braces), its arguments are
            return [name for text in self.params.values() for name in PLACEHOLDER.findall(text)]
        found = PLACEHOLDER.findall(self.value) + PLACEHOLDER.findall(self.target.label)
        found += PLACEHOLDER.findall(self.target.row)
        return found + (PLACEHOLDER.findall(self.post.value) if self.post is not None else [])


class Provenance(BaseModel):
    """Where a workflow came from."""

    trajectory_ids: list[str] = Field(default_factory=list)
    model: str = ""
    prompt_hash: str = ""
    mode: InductionMode = "manual"
    admission: str = ""
    created_at: str = Field(default_factory=utc_now)
    # Replay verification (ASI): the replay episode's trajectory id and its verdict ("success" or why not).
    replay_trajectory_id: str = ""
    replay_verdict: str = ""
    # A part of a longer workflow (`awm.induction.parts`): the whole's name; admitted with it.
    part_of: str = ""
    # The part that ran right before this one in its whole (its name; empty for the first part and for
    # a whole): a site's procedures keep their order (log in, then open the ticket, then change it).
    follows: str = ""


class Workflow(BaseModel):
    """A named routine with a description of when it applies."""

    name: str
    description: str = ""
    parameters: list[str] = Field(default_factory=list)
    steps: list[WorkflowStep] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)

    def abstract_signature(self) -> tuple[tuple[str, str, str], ...]:
        """The steps without values or ids (a call: the callee's name): used to detect duplicates."""
        return tuple(
            (s.action.lower(), s.target.role.lower(), (s.value if s.is_call else s.target.label).lower())
            for s in self.steps
        )


def bind_parameters(workflow: Workflow, goal: str) -> dict[str, str]:
    """Values for the workflow's placeholders read off a goal that matches its description template.

    A rule-induced description is the teaching task's goal with its values replaced by placeholders
    (``Enter the username "{username}" ...``); matching it against a new goal recovers this task's
    values. Where the whole template does not match (another template's workflow, offered by a site
    scope), each placeholder is read by the words around it (`bind_by_context`). Returns {} when the
    template has no placeholder or nothing matches (then the prompt keeps the placeholders and the
    model must fill them in).
    """
    names = PLACEHOLDER.findall(workflow.description)
    if not names:
        return {}
    values = _bind_whole(workflow.description, goal) or bind_by_context(workflow.description, goal)
    return values | bind_by_options(workflow, goal, values)


def describes(workflow: Workflow, goal: str) -> bool:
    """Whether the workflow's description template, placeholders and all, matches `goal` as a whole:
    the goal is one of the task family that taught it, not another template's that a site scope serves."""
    names = PLACEHOLDER.findall(workflow.description)
    return bool(names) and bool(_bind_whole(workflow.description, goal))


# How many words around a placeholder `bind_by_context` reads at most: before it, after it.
CONTEXT_WORDS = (3, 2)
# An opening quote -> its closing quote: a quoted placeholder's value is what the quotes hold.
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019"}


def open_parameters(workflow: Workflow, bound: dict[str, str]) -> tuple[str, ...]:
    """The placeholders still unfilled once `bound` is applied, in the order the workflow lists them."""
    names = list(workflow.parameters)
    for step in workflow.steps:
        names.extend(step.placeholders())
    return tuple(n for n in dict.fromkeys(names) if n not in bound)


def bind_by_context(description: str, goal: str) -> dict[str, str]:
    """Values for a description's placeholders read off a goal of another template, one placeholder at
    a time: the words right before it and right after it (at most `CONTEXT_WORDS`, the most that occur
    in the goal; the end of the text counts as the words after the last placeholder) must stand in the
    goal exactly once around one value. A placeholder whose words are not found stays open.

    Why: the arena's templates share their goals' phrasing ("As {username} (password {password}), ...
    ticket "{link}" ..."); a site scope offers one template the parts another template taught (log in,
    open the ticket), whose whole description never matches the new goal, and the 1.5B model, left to
    fill the values in, passed a URL or '...'. Read by the surrounding words, the username and the
    ticket are bound on any goal that says them the same way; a value said in other words is left to
    the model. Punctuation alone is no context: read by its opening quote only, the comment of 'add the
    comment "{text}"' was bound to the ticket's title in 'change the priority of the ticket "X"', and
    the model posted the title as a comment. An unquoted placeholder's value is a word or a short name
    (`_plain_value`): read by 'to {priority}.', "According to the project wiki, who ... reviews?" gave
    the priority a whole clause, and 'add the comment "..." to the ticket "X".' gave it the ticket. A
    placeholder right after its own name ('to milestone {milestone}.') is the value of a field the
    teaching goal named; another goal names its own field there, or none ('to minor.', 'to priority
    high.'), so where the name is not in the goal the words before the name are read instead: on Trac
    the milestone-changing part reads "minor" off "change the priority of the ticket X to minor", and
    the executor chooses it in the list that offers it (`awm.webarena.choice_lists`). The words that
    open the description are read where they open the goal, also when the goal says them again later:
    "As {username} (password ...)" read nothing off "As erin (password ...), accept the ticket X, so
    that it is marked as being worked on" (two "as"), and the log-in part was ranked as needing a user
    name the goal states first thing. An unquoted placeholder is never read inside a text the goal
    quotes: close-duplicate's 'as a {as} of the ticket' read "choice" off the comment "Users asked for a
    choice of delivery time.", and comment-ticket was shown the closing part as taking its values."""
    goal_text = " ".join(goal.split())
    unquoted_text = QUOTED.sub('""', goal_text)  # what an unquoted placeholder may be read off
    parts = PLACEHOLDER.split(" ".join(description.split()))
    names, literals = parts[1::2], parts[0::2]
    values: dict[str, str] = {}
    for i, name in enumerate(names):
        text = goal_text if literals[i][-1:] in _QUOTES else unquoted_text
        found = _between(text, literals[i], literals[i + 1], last=i == len(names) - 1, opens=i == 0)
        if found is None and (unnamed := _without_field_name(literals[i], name)) is not None:
            found = _between(text, unnamed, literals[i + 1], last=i == len(names) - 1)
        if found is not None and literals[i][-1:] not in _QUOTES and not _plain_value(found):
            continue  # an unquoted value is a word or a name, never a clause: leave it to the model
        if found is not None and values.setdefault(name, found) != found:
            values.pop(name)  # one placeholder, two different values: leave it to the model
    return values


def bind_by_options(workflow: Workflow, goal: str, bound: dict[str, str]) -> dict[str, str]:
    """Values for the placeholders of list choices (`WorkflowStep.options`) that `bound` leaves open:
    the one option of the step's list that the goal names as a word, outside quotes and outside the
    values already bound. Two options named, or none: the placeholder stays open.

    Why: a list's options are the site's own words for a choice, and a goal that wants one names it,
    in whatever sentence its task uses ("close the ticket X with the resolution fixed", "ship it by
    express", "in size large"); the words around a placeholder (`bind_by_context`) hold only for goals
    phrased like the teaching one. Measured on the arena's Trac with site scope, close-ticket was shown
    no part that closes a ticket: the one another template taught (close as a duplicate: 'as a {as} of
    the ticket') read nothing off 'with the resolution fixed', so it counted as needing a value the goal
    does not state, and the model opened the ticket and reported it "already closed". A title or a
    comment the goal quotes is not a choice ("Sync token invalid after restart" names the resolution
    "invalid" by chance), nor is a value already bound (the user, the ticket)."""
    text = without_quoted(" ".join(goal.split()))
    for value in bound.values():
        text = text.replace(value, " ")
    out: dict[str, str] = {}
    for step in workflow.steps:
        placeholder = PLACEHOLDER.fullmatch(step.value.strip()) if step.options else None
        if placeholder is None or placeholder.group(1) in bound or placeholder.group(1) in out:
            continue
        named = {option for option in step.options if _names_option(text, option)}
        if len(named) == 1:
            out[placeholder.group(1)] = named.pop()
    return out


def _names_option(text: str, option: str) -> bool:
    """Whether `text` says `option` as words of its own (case aside; not inside a longer word)."""
    words = option.split()
    if not words or not any(ch.isalnum() for ch in option):
        return False
    return re.search(rf"(?<![\w-]){_words(words)}(?![\w-])", text, re.IGNORECASE) is not None


def _without_field_name(before: str, name: str) -> str | None:
    """The literal before a placeholder less its last word, when that word is the placeholder's own
    name ("to milestone " before {milestone}); None otherwise."""
    words = before.split()
    if not words or words[-1].lower() != name.lower() or not before[-1:].isspace():
        return None
    return before.rstrip()[: -len(words[-1])]


# The most words an unquoted value holds: a priority, a user name, "milestone 1.2", a short product name.
MAX_UNQUOTED_WORDS = 4


def _plain_value(value: str) -> bool:
    """Whether a value read at an unquoted placeholder looks like one: a few words, no quote marks, no
    clause punctuation (a goal quotes a longer text, as it quotes a comment or a ticket's title)."""
    return len(value.split()) <= MAX_UNQUOTED_WORDS and not re.search(r"[\"'\u201c\u201d\u2018\u2019,;]", value)


def _words(words: list[str]) -> str:
    return r"\s+".join(re.escape(w) for w in words)


def _between(goal: str, before: str, after: str, *, last: bool, opens: bool = False) -> str | None:
    """The value of `goal` right after the one occurrence of the longest tail of the literal `before`
    and up to the longest head of the literal `after` (up to `CONTEXT_WORDS` words each; the goal's end
    for a last placeholder followed by sentence punctuation at most); None when nothing matches.
    `opens`: `before` opens the description, so all of it at the goal's start is that occurrence."""
    head_words, tail_words = before.split(), after.split()
    if not head_words:
        return None  # a placeholder with nothing before it (or right after another) has no context
    glue_before = r"\s+" if before[-1:].isspace() else ""
    glue_after = r"\s+" if after[:1].isspace() else ""
    may_end = last and after.strip() in ("", ".", "?", "!")
    for n_before in range(min(CONTEXT_WORDS[0], len(head_words)), 0, -1):
        if not any(ch.isalnum() for ch in "".join(head_words[-n_before:])):
            break  # a quote mark alone says nothing of which value: 'add the comment "' read a ticket's title
        heads = list(re.finditer(rf"(?<!\S){_words(head_words[-n_before:])}{glue_before}", goal, re.IGNORECASE))
        if opens and n_before == len(head_words) and heads and heads[0].start() == 0:
            heads = heads[:1]  # the words that open the description, where they open the goal
        if len(heads) != 1:
            continue  # absent, or said twice: no telling which value is meant
        rest = goal[heads[0].end():]
        for n_after in range(min(CONTEXT_WORDS[1], len(tail_words)), -1, -1):
            if n_after == 0 and not may_end:
                continue
            # (?!\w): the words after end where a word ends ('1.2.' is the value 1.2, not 1)
            tail = glue_after + _words(tail_words[:n_after]) + r"(?!\w)" if n_after else r"[.?!]?$"
            found = re.match(rf"(.+?){tail}", rest, re.IGNORECASE)
            if found is not None and found.group(1).strip():
                return found.group(1).strip()
        closer = _QUOTES.get(before[-1:])
        if closer and after.startswith(closer):
            # A quoted placeholder ('the ticket "{link}".') whose words after the quote differ in the
            # goal ('the ticket "Crash when ..." to milestone 1.2'): the value is what the quotes hold.
            found = re.match(rf"(.+?){re.escape(closer)}(?!\w)", rest)
            if found is not None and found.group(1).strip():
                return found.group(1).strip()
    return None


def _bind_whole(description: str, goal: str) -> dict[str, str]:
    """Values read off a goal that the whole description template matches; {} when it does not."""
    return dict(_whole_match(description, " ".join(goal.split())))


@functools.lru_cache(maxsize=1024)
def _whole_match(description: str, goal: str) -> tuple[tuple[str, str], ...]:
    """(placeholder, value) pairs for a goal the whole template matches, () when it does not. Cached:
    binding a workflow and asking whether it `describes` a goal read the same match each step."""
    parts = PLACEHOLDER.split(description)  # literal, name, literal, name, ..., literal
    pattern = ""
    for i, part in enumerate(parts):
        if i % 2:
            pattern += "(.+?)"
        else:
            pattern += (
                r"\s+".join(re.escape(word) for word in part.split(" ")) if part.strip() else re.escape(part)
            )
    match = re.fullmatch(pattern, goal, flags=re.DOTALL)
    if match is None:
        return ()
    values: dict[str, str] = {}
    for name, value in zip(parts[1::2], match.groups(), strict=True):
        if values.setdefault(name, value) != value:
            return ()  # one placeholder, two different values: not this template
    return tuple(values.items())


def fill_placeholders(text: str, values: dict[str, str], *, transforms: bool = True) -> str:
    """`text` with each known ``{name}`` / ``{name|transform}`` replaced (unknown ones stay).

    `transforms=False` puts values in as given: a value the agent supplies is the text to type, while a
    transform belongs to a value read off the goal (the goal says "myron", the field wants "MYRON").
    """

    def one(match: re.Match[str]) -> str:
        name, transform = match.group(1), match.group(2)
        if name not in values:
            return match.group(0)
        value = values[name]
        if not transform or not transforms:
            return value
        if transform == CASE_PARAMETER:
            named = values.get(CASE_PARAMETER, "").strip().lower()
            return TRANSFORMS[named](value) if named in CASE_WORDS else value
        return TRANSFORMS[transform](value)

    return PLACEHOLDER_PARTS.sub(one, text)


def instantiate(workflow: Workflow, values: dict[str, str], *, transforms: bool = True) -> Workflow:
    """The workflow with known placeholder values filled in (unknown placeholders stay as they are);
    `transforms` as in `fill_placeholders`."""
    if not values:
        return workflow

    def fill(text: str) -> str:
        return fill_placeholders(text, values, transforms=transforms)

    steps = [
        step.model_copy(
            update={
                "value": step.value if step.is_call else fill(step.value),
                "reasoning": fill(step.reasoning),
                "target": step.target.model_copy(
                    update={"label": fill(step.target.label), "row": fill(step.target.row)}
                ),
                "post": step.post.model_copy(update={"value": fill(step.post.value)}) if step.post else None,
                "params": {name: fill(text) for name, text in step.params.items()},
            }
        )
        for step in workflow.steps
    ]
    remaining = [p for p in workflow.parameters if p not in values]
    return workflow.model_copy(
        update={"description": fill(workflow.description), "steps": steps, "parameters": remaining}
    )
