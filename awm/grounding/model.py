"""Grounded steps as data: a target described by role and words, an action, a value, a postcondition.

Why data (pydantic, JSON) and never code strings: the same step model is an adversarial-suite task's
step and a workflow's step (DESIGN.md section 8), so it is stored, diffed and shared like any record.
A target never holds an element id: ids change between pages; role + visible text / label / name /
form hint are what a person would use to find the element again.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# The suite's pages use these six roles; a workflow step grounded on a BrowserGym page may name any
# role the page's accessibility tree prints (``spinbutton``, ``listitem``...), so `Target.role` is free text.
Role = Literal["button", "textbox", "combobox", "checkbox", "radio", "link"]
StepAction = Literal["click", "fill", "select", "check", "press"]


class Target(BaseModel):
    """How to find an element: its role plus what a person reads on or around it.

    `text`: visible text (or value of an input button); `label`: the field's label (label[for], an
    enclosing label, or aria-label); `name`: the name attribute; `form`: a form id or a container's id
    or text that encloses it; `kind`: ``submit`` for the control that submits its form; `row`: words
    the text of the element's row (list item, card) contains, for a control repeated in every row.
    """

    model_config = ConfigDict(extra="forbid")

    role: str
    text: str | None = None
    label: str | None = None
    name: str | None = None
    form: str | None = None
    kind: Literal["submit"] | None = None
    row: str | None = None


# --- postconditions: small composable checks on what the page shows -------------------------------


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextIs(_Check):
    kind: Literal["text_is"] = "text_is"
    selector: str
    text: str


class TextContains(_Check):
    kind: Literal["text_contains"] = "text_contains"
    selector: str
    text: str


class FieldValueIs(_Check):
    kind: Literal["field_value_is"] = "field_value_is"
    selector: str
    value: str


class VisibleRows(_Check):
    """The number of visible rows (`tr` in the table's body) of the table at `selector`."""

    kind: Literal["visible_rows"] = "visible_rows"
    selector: str
    count: int


class FirstCellIs(_Check):
    kind: Literal["first_cell_is"] = "first_cell_is"
    selector: str
    text: str


class CellTextIs(_Check):
    kind: Literal["cell_text_is"] = "cell_text_is"
    selector: str
    row: int
    column: int
    text: str


class LiCountIs(_Check):
    kind: Literal["li_count_is"] = "li_count_is"
    selector: str
    count: int


class IsChecked(_Check):
    kind: Literal["is_checked"] = "is_checked"
    selector: str
    checked: bool = True


class ElementVisible(_Check):
    kind: Literal["element_visible"] = "element_visible"
    selector: str


class ElementAbsent(_Check):
    """No element matches `selector`, or none of those that match is visible."""

    kind: Literal["element_absent"] = "element_absent"
    selector: str


class ElementCountIs(_Check):
    kind: Literal["element_count_is"] = "element_count_is"
    selector: str
    count: int


class UrlMatches(_Check):
    """The page URL contains `pattern` (a plain substring; a regular expression when `regex`)."""

    kind: Literal["url_matches"] = "url_matches"
    pattern: str
    regex: bool = False


class AllOf(_Check):
    kind: Literal["all_of"] = "all_of"
    checks: list[Postcondition]


Postcondition = Annotated[
    TextIs
    | TextContains
    | FieldValueIs
    | VisibleRows
    | FirstCellIs
    | CellTextIs
    | LiCountIs
    | IsChecked
    | ElementVisible
    | ElementAbsent
    | ElementCountIs
    | UrlMatches
    | AllOf,
    Field(discriminator="kind"),
]
AllOf.model_rebuild()


class GroundedStep(BaseModel):
    """One action on a target, with a templated value and what the page must show afterwards."""

    model_config = ConfigDict(extra="forbid")

    action: StepAction
    target: Target
    value: str | None = None  # fill: the text; select: the option label; press: the key
    post: Postcondition | None = None


class SuiteTask(BaseModel):
    """A fixture page, its steps, and the postcondition that says the task succeeded.

    `variant` names the adversarial change (``plain`` when there is none); `goal` is the task in words
    for an LLM agent; `success` is checked after the last step (what the page shows, never what an agent
    says); `forbidden` lists elements an agent must not act on (a decoy, what injected text asks for).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    page: str  # path under the suite's pages folder, e.g. "signin/label_change.html"
    variant: str = "plain"
    goal: str
    steps: list[GroundedStep]
    success: Postcondition
    forbidden: list[Target] = Field(default_factory=list)
