"""The answer check: where the agent ends the task itself and the goal is a question, a short separate
question to the model on each new page that names what the goal asks about: "what is the answer on this
page?". An answer the page bears out ends the episode as the message to the user.

Why a separate question: measured on the arena's Trac information templates (offline memory, template
scope), the workflow opened the right ticket, and the 1.5B model, shown the ticket page with the whole
agent prompt, filled the search box with the ticket's summary, ticked boxes and reported the task
infeasible; asked only "answer the question from the page", it read the priority ('blocker'), the owner
and the resolution off the same three pages (scripts in the closing note of issue 26). The agent prompt
is long and about acting; the question is short and about reading. It holds on any site: a question
asked of a web page is answered by text that page shows, and a page that does not name the thing the
question is about is not asked.

What keeps a wrong answer out (each pure, below): the goal must be a question (`asks_question`); the
page must name every value the goal states (the ticket's quoted summary, a weekday), else what the
question is about when it states none (`page_names_subject`), in its own text, not in a value the agent
typed (`page_says`); a page state is asked once per episode
(`asked_before`); and the answer must be borne out by the page: every word of it on the page, one word
at least that the goal does not already say, never "not on this page" (`grounded_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from awm.goal_values import INSTRUCTION_WORDS, extract_goal_literals, literal_in, stem_seen
from awm.trajectory import Step

NOT_HERE = "not on this page"
ANSWER_SYSTEM = (
    "Answer the question from the page. Reply with the answer only (a few words copied from the page), "
    f"or '{NOT_HERE}' if the page does not answer it."
)
ANSWER_MAX_CHARS = 80
# Under a grammar: the refusal, or one line of at most ANSWER_MAX_CHARS characters.
ANSWER_GRAMMAR = f'root ::= "{NOT_HERE}" | [^\\n]{{1,{ANSWER_MAX_CHARS}}}\n'
_WORDS = re.compile(r"\w+")
_CONTENT = re.compile(r"[^\W\d_]{3,}")
# The words of a question that say what is asked, not what about.
QUESTION_WORDS = frozenset(
    "does did do have has had was were can could would should will many much according after before about "
    "long often".split()
)
# An element's id and role as the page lists it ("[108] link 'blocker'"): not words an answer may use.
_ELEMENT_HEAD = re.compile(r"\[[^\]\s]+\]\s+\w+")
# A field's value as the page lists it (" value='...'", before its flags or the line's end): what the
# agent typed is not what the page says.
_FIELD_VALUE = re.compile(r" value='.*?'(?=, |$)", re.MULTILINE)


def page_says(page_text: str) -> str:
    """The page's text without the values of its fields: measured on Trac, the agent had typed the
    ticket's summary into the search box, and the start page then 'named' the ticket the question asked
    about (the model answered 'TracWiki')."""
    return _FIELD_VALUE.sub("", page_text)


def asks_question(goal: str) -> bool:
    """Whether the goal asks a question: its last sentence ends with a question mark ("What priority
    does the ticket "X" have?", "When does the shop open on Sunday?")."""
    return goal.strip().endswith("?")


def page_names_subject(goal: str, page_text: str) -> bool:
    """Whether the page names what the question is about: every value the goal states
    (`extract_goal_literals`: its quoted strings, names, numbers) stands on the page; a goal that states
    none ("what are the opening hours?") needs two in three of its own words on the page instead (or a
    word sharing their stem: `stem_seen`), the question's and instruction words left out."""
    page_text = page_says(page_text)
    literals = extract_goal_literals(goal)
    if literals:
        return all(literal_in(literal, page_text) for literal in literals)
    words = [w for w in _CONTENT.findall(goal.lower()) if w not in INSTRUCTION_WORDS | QUESTION_WORDS]
    seen = page_text.lower()
    return bool(words) and 3 * sum(stem_seen(w, seen) for w in words) >= 2 * len(words)


def asked_before(history: Sequence[Step], fingerprint: str) -> bool:
    """Whether an earlier step of the agent's own (not a workflow's inner step) was decided on this same
    page state: the check was asked there and found no answer (the same goal, the same page)."""
    return bool(fingerprint) and any(
        step.called_by is None and step.fingerprint == fingerprint for step in history
    )


def answer_question(goal: str, page_text: str) -> str:
    """The question's text: the page, then the goal as the question."""
    return f"## Page\n{page_text}\n\n## Question\n{goal.strip()}"


def grounded_answer(answer: str, goal: str, page_text: str) -> str | None:
    """The model's answer when the page bears it out, else None: not the refusal, every word of it on
    the page (ids and roles of the page's lines are not words of it), and one word at least that the goal
    does not already say (a copy of the goal's own words answers nothing)."""
    text = answer.strip()
    for _ in range(2):  # "'Kessler & Sons'." -> Kessler & Sons
        text = text.strip("'\"“”‘’").strip()
        if text.endswith(".") and not text[-2:-1].isdigit():
            text = text[:-1].rstrip()
    words = [w.casefold() for w in _WORDS.findall(text)]
    if not words or text.casefold().startswith(NOT_HERE):
        return None
    page_words = {w.casefold() for w in _WORDS.findall(_ELEMENT_HEAD.sub(" ", page_says(page_text)))}
    goal_words = {w.casefold() for w in _WORDS.findall(goal)}
    if not all(w in page_words for w in words) or all(w in goal_words for w in words):
        return None
    return text
