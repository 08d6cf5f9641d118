"""What a goal's clauses act on, and whether the episode's pages ever named it (`awm.goal_values`):
the live done check is not asked about a thing no page named."""

from __future__ import annotations

import pytest

from awm.goal_values import clause_object_words, goal_clauses, unseen_objects


@pytest.mark.parametrize(
    ("goal", "objects"),
    [
        ("Turn on two-factor authentication for my account.", [["two-factor", "authentication"]]),
        ("Turn on dark mode and save the settings.", [["dark", "mode"], []]),  # "settings" is too vague
        ("Put the Blue Ceramic Mug in my cart.", [["blue", "ceramic", "mug"]]),
        ("Switch my account to the Basic plan.", [[]]),  # the user's own: where, not what
        ("Open the profile of Alice Smith", [["profile", "alice", "smith"]]),
        ("Click the first link in the results", [[]]),
    ],
)
def test_a_clauses_object_is_its_words_up_to_a_preposition(goal: str, objects: list[list[str]]) -> None:
    assert [clause_object_words(c) for c in goal_clauses(goal)] == objects


def test_an_object_counts_as_seen_by_any_of_its_words_or_their_stem() -> None:
    goal = "Turn on two-factor authentication for my account."
    assert unseen_objects(goal, "Account preferences\nSave preferences\nPreferences saved") == ["two-factor authentication"]
    assert unseen_objects(goal, "switch 'Two-factor sign-in'") == []
    assert unseen_objects("Cancel my subscriptions to the weekly digest.", "x") == []  # the user's own
    assert unseen_objects("Delete the subscription for Anna", "link 'Subscribe'") == []  # the stem
    assert unseen_objects("Delete the comment by Anna", "heading 'Comments'\nbutton 'Delete'") == []
    assert unseen_objects("What time does it open?", "") == []  # no clause to act on
