"""Grounding rules on snapshot fixtures (no browser): exact, ambiguous, and each structural fallback."""

from __future__ import annotations

from awm.grounding.ground import NoMatch, Resolution, ground_exact, ground_structural
from awm.grounding.model import GroundedStep, SuiteTask, Target
from awm.grounding.snapshot import Element


def el(ref: str, role: str, **fields: object) -> Element:
    return Element(ref=ref, tag="button" if role == "button" else "input", role=role, **fields)  # type: ignore[arg-type]


SIGNIN = [
    el("0-0", "textbox", label="Email", name="email", form_id="login"),
    el("0-1", "textbox", label="Password", name="password", form_id="login"),
    el("0-2", "button", text="Sign in", form_id="login", submit=True),
    el("0-3", "button", text="Sign in with SSO"),
    el("0-4", "link", text="Forgot password?"),
    el("0-5", "button", text="Sign in", visible=False),  # a hidden duplicate never counts
]


def test_exact_text_beats_substring_and_hidden_or_disabled_elements_never_count() -> None:
    found = ground_exact(SIGNIN, Target(role="button", text="Sign in"))
    assert isinstance(found, Resolution) and found.element.ref == "0-2" and found.score == 100
    sso = ground_exact(SIGNIN, Target(role="button", text="SSO"))
    assert isinstance(sso, Resolution) and sso.element.ref == "0-3" and sso.score == 50
    disabled = [e.model_copy(update={"enabled": False}) if e.ref == "0-2" else e for e in SIGNIN]
    only_sso = ground_exact(disabled, Target(role="button", text="Sign in"))
    assert isinstance(only_sso, Resolution) and only_sso.element.ref == "0-3" and only_sso.score == 50


def test_a_named_label_or_name_must_match_exactly() -> None:
    found = ground_exact(SIGNIN, Target(role="textbox", label="email"))  # case and spacing aside
    assert isinstance(found, Resolution) and found.element.ref == "0-0"
    renamed = [e.model_copy(update={"label": "Work email"}) if e.ref == "0-0" else e for e in SIGNIN]
    miss = ground_exact(renamed, Target(role="textbox", label="Email"))
    assert isinstance(miss, NoMatch) and not miss.ambiguous
    by_name = ground_exact(renamed, Target(role="textbox", name="email"))
    assert isinstance(by_name, Resolution) and by_name.element.ref == "0-0"


def test_an_exact_tie_goes_to_the_element_with_the_targets_case_too() -> None:
    """A project's start page: the navigation bar's 'ROADMAP' and a paragraph's 'roadmap' link."""
    page = [el("0-0", "link", text="ROADMAP"), el("0-1", "link", text="roadmap"), el("0-2", "link", text="Roadmap notes")]
    found = ground_exact(page, Target(role="link", text="ROADMAP"))
    assert isinstance(found, Resolution) and found.element.ref == "0-0" and found.score == 100
    lower = ground_exact(page, Target(role="link", text="roadmap"))
    assert isinstance(lower, Resolution) and lower.element.ref == "0-1"
    neither = ground_exact(page, Target(role="link", text="Roadmap"))  # case aside, still a tie
    assert isinstance(neither, NoMatch) and neither.ambiguous


def test_a_tie_is_ambiguity_not_a_choice() -> None:
    twins = [el("0-0", "button", text="Save", form_id="a"), el("0-1", "button", text="Save", form_id="b")]
    tie = ground_exact(twins, Target(role="button", text="Save"))
    assert isinstance(tie, NoMatch) and tie.ambiguous and tie.candidates == 2
    in_b = ground_exact(twins, Target(role="button", text="Save", form="b"))  # the form hint decides
    assert isinstance(in_b, Resolution) and in_b.element.ref == "0-1"


def test_structural_fallback_answers_only_when_unambiguous() -> None:
    page = [
        el("0-0", "textbox", label="Work email", form_id="newsletter"),
        el("0-1", "button", text="Subscribe now", form_id="newsletter", submit=True),
        el("0-2", "textbox", label="Search", ancestors=["header"]),
        el("0-3", "button", text="Go", ancestors=["header"]),
    ]
    only = ground_structural(page, Target(role="textbox", label="Email", form="newsletter"))
    assert isinstance(only, Resolution) and (only.rule, only.element.ref) == ("only_in_scope", "0-0")
    submit = ground_structural(page, Target(role="button", text="Subscribe", form="newsletter", kind="submit"))
    assert isinstance(submit, Resolution) and (submit.rule, submit.element.ref) == ("form_submit", "0-1")
    container = ground_structural(page, Target(role="textbox", form="header"))  # a container id is a scope
    assert isinstance(container, Resolution) and container.element.ref == "0-2"
    undecided = ground_structural(page, Target(role="textbox", label="Email"))  # two on the page, no scope
    assert isinstance(undecided, NoMatch) and undecided.ambiguous
    last_resort = ground_structural(page[:1] + page[1:2], Target(role="textbox", label="Email"))
    assert isinstance(last_resort, Resolution) and last_resort.rule == "only_in_scope"
    one_link = [el("0-9", "link", text="Home"), *page]
    on_page = ground_structural(one_link, Target(role="link", text="Start", form="nowhere"))
    assert isinstance(on_page, Resolution) and (on_page.rule, on_page.element.ref) == ("only_on_page", "0-9")


def test_structural_fallback_never_takes_a_field_labelled_for_another_datum() -> None:
    """The one text box of a catalogue page is its search box: a login form's "Username:" step must not
    type into it. A label reworded around the same datum still answers ("Email" for "Work email",
    "User name" for "Username", "Card no." for "Card number"), and so does an unlabelled box; buttons are
    not judged by their words (a site may swap "Get the newsletter" for "Join free")."""
    catalogue = [el("0-0", "textbox", label="Search", name="q"), el("0-1", "button", text="Search")]
    username = ground_structural(catalogue, Target(role="textbox", text="Username:"))
    assert isinstance(username, NoMatch) and "'Search', another field than 'Username:'" in username.reason
    assert isinstance(ground_structural(catalogue, Target(role="textbox", label="Search terms")), Resolution)
    for have, wanted in [("Work email", "Email"), ("User name", "Username"), ("Card no.", "Card number")]:
        page = [el("0-0", "textbox", label=have)]
        assert isinstance(ground_structural(page, Target(role="textbox", label=wanted)), Resolution), have
    unlabelled = [el("0-0", "textbox")]
    assert isinstance(ground_structural(unlabelled, Target(role="textbox", label="Username")), Resolution)
    join = [el("0-0", "button", text="Join free")]
    assert isinstance(ground_structural(join, Target(role="button", text="Get the newsletter")), Resolution)


def test_resolutions_explain_themselves() -> None:
    found = ground_exact(SIGNIN, Target(role="button", text="Sign in"))
    assert isinstance(found, Resolution)
    assert found.explain() == "exact (score 100, 2 candidate(s)) -> button 'Sign in'"  # SSO matched by substring


def test_steps_and_tasks_are_data_that_round_trip_as_json() -> None:
    task = SuiteTask(
        id="t",
        page="signin/plain.html",
        goal="Sign in",
        steps=[
            GroundedStep(
                action="click",
                target=Target(role="button", text="Sign in", kind="submit"),
                post={"kind": "all_of", "checks": [{"kind": "text_is", "selector": "#status", "text": "Welcome"}]},
            )
        ],
        success={"kind": "url_matches", "pattern": "signin"},
    )
    assert SuiteTask.model_validate_json(task.model_dump_json()) == task
