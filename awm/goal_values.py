"""The values a goal names (quoted strings, dates, times, numbers, names), and whether a text holds one.

Read by the judge's evidence (`awm.evaluation.evidence`: was each value used or shown?) and by the web
agent (`awm.webarena.goal_progress`: which of the goal's controls on this page are not done yet), so
it lives outside both. Pure and generic: it reads goal text, never a benchmark's task names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

LiteralKind = Literal["quoted", "date", "time", "number", "name"]


@dataclass(frozen=True)
class GoalLiteral:
    """One value named in the goal text, which the agent must have used or seen for the goal to be met."""

    text: str
    kind: LiteralKind
    # Names listed together ("Select Jc, s6WcI and XMHY") share a group number: one enumeration, one
    # role in the goal. None: not part of a list.
    group: int | None = None

    @property
    def case_sensitive(self) -> bool:
        """Random-looking codes ("s6WcI", "tN", "x9") must match exactly; words and ALL-CAPS match in any case."""
        return self.kind == "name" and any(_is_code(word) for word in self.text.split())


# A quoted text, in straight or typographic quotes; an apostrophe inside a word ("don't") opens none.
# The one pattern for quotes in goals and thoughts (`quoted_parts`, `without_quoted`, workflow binding).
QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|(?<![\w])'([^']+)'(?![\w])")
_DATE = re.compile(
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?(?:, \d{4})?\b"
)
# A numbered label: "Tab #1", "Section #2", "Order #000123" (one value, not the number alone).
_NUMBERED = re.compile(r"\b[A-Z][\w-]*\s+#\s?\d+\b")
# The rest of a goal after its one colon, as one value: "Add a task to my list: Call the plumber". Only a
# tail of a few words with no comma, colon or quote (a list after a colon, "item: Chicken wings, Caesar
# Salad", is values one by one), and only where the goal has no other colon before a space ("from: X to:
# Y" names fields, not one value).
_COLON_TAIL = re.compile(r"(?<=\w):\s+([^,:;\"'“”‘’]{1,60}?)\s*[.!?]?\s*$")
_COLON_SPACE = re.compile(r":\s")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?")
# A number: optional currency sign, digits with thousands separators and decimals; not an ordinal
# ("5th"), not glued to letters ("x9", "1LO4eNb" are codes, found as names), not a percentage's sign.
# Thousands separators only in threes ("1,250"): "[17,15,11]" is three numbers.
_NUMBER = re.compile(r"(?<![\w.$])[$€£]?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w)%?")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)", re.IGNORECASE)
ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip
# A place in a list ("the 4th search result", "the third checkbox", "the last one"); "first name" is a field.
PLACE = re.compile(
    r"\b(\d+)(?:st|nd|rd|th)\b|\b(" + "|".join(ORDINAL_WORDS) + r"|last)\b(?!\s*names?\b)", re.IGNORECASE
)


def place_number(match: re.Match[str]) -> int | None:
    """The place a `PLACE` match names, counted from 1 ("3rd" and "third": 3); None for "last"."""
    if match.group(1):
        return int(match.group(1))
    return ORDINAL_WORDS.get(match.group(2).lower())
_SENTENCES = re.compile(r"(?<=[.!?;])\s+")

# Words of the instruction itself, never values, even when capitalised at a sentence start
# ("Select", "Click", "Submit"). Compared in lower case.
INSTRUCTION_WORDS = frozenset(
    """
    a an the and or but then also to from into onto in on at of for by with without as is are be it its this
    that these those there here i me my you your we our they them their he she his her him please if when
    what which who whom whose where why how all any each every some
    add answer book buy cancel change check choose clear click close copy create delete drag draw drop enter
    expand fill find forward give go hit highlight leave log login logout make mark move navigate open order
    paste pick press put remove reply resize return scroll search select send set show sign sort star
    submit switch tell type uncheck use view write
    button buttons link links field fields text box textbox form list item items tab tabs page option options
    """.split()
)


def _spans(pattern: re.Pattern[str], text: str) -> Iterator[tuple[int, int, str]]:
    for m in pattern.finditer(text):
        value = next((g for g in m.groups() if g), None) if m.groups() else m.group(0)
        yield m.start(), m.end(), (value or "").strip()


def _blank(text: str, start: int, end: int) -> str:
    """Replace a span by spaces of the same length, so later patterns neither see it nor shift offsets."""
    return text[:start] + " " * (end - start) + text[end:]


def quoted_parts(text: str) -> list[str]:
    """The text's quoted parts, in order (``Click on "Submit"`` -> ``["Submit"]``)."""
    return [next(g for g in m.groups() if g is not None) for m in QUOTED.finditer(text)]


def without_quoted(text: str) -> str:
    """`text` with its quoted strings blanked (same length), so what they say is not read as words of
    the instruction ("type 'and then'" has one clause)."""
    for start, end, _ in list(_spans(QUOTED, text)):
        text = _blank(text, start, end)
    return text


def _is_code(word: str) -> bool:
    """A random-looking token: an upper-case letter after a lower-case one somewhere ("tN", "s6WcI"),
    or letters mixed with digits ("x9", "1LO4eNb"). Not "Ertha", not "SHG"."""
    mixed_case = any(c.islower() for c in word) and any(c.isupper() for c in word[1:])
    mixed_digits = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return mixed_case or mixed_digits


def _is_name_token(word: str) -> bool:
    """A value-like token: Capitalised ("Ertha"), ALL-CAPS ("SHG"), or a code ("tN", "x9", "1LO4eNb")."""
    if word.lower() in INSTRUCTION_WORDS or _ORDINAL.fullmatch(word):
        return False
    return word[0].isupper() or _is_code(word)


def _is_plain_capitalised(word: str) -> bool:
    return word[:1].isupper() and not _is_code(word) and not word.isupper()


_ENUMERATION_GLUE = frozenset({",", "and", "or"})
_NAME_TOKENS = re.compile(r"[^\W_][\w'&.-]*[^\W_]|[^\W_]|[,:;()]")


def _names(text: str) -> Iterator[tuple[str, int]]:
    """Runs of value-like tokens, each with an enumeration number: "Norfolk Island", "TX", "s6WcI".

    Punctuation ends a run, so "Palm Springs, CA" gives "Palm Springs" and "CA" (each checked on its
    own); instruction words end a run ("Select Ertha from" gives "Ertha"). Runs separated only by
    commas, "and" or "or" are one enumeration and share the number. A sentence's first word is
    capitalised by grammar, not because it is a name, and goals are imperatives ("Pay Bob"), so it is
    dropped unless it is ALL-CAPS or a code.
    """
    group = 0
    for sentence in _SENTENCES.split(text):
        first = True
        run: list[str] = []
        gap: list[str] | None = None  # the tokens since the last run ended; None: no run yet
        for found in [*_NAME_TOKENS.findall(sentence), ";"]:
            word = found[:-2] if found.endswith(("'s", "’s")) else found  # "José's" names José
            skip, first = first and _is_plain_capitalised(word), False
            if word[:1].isalnum() and not skip and _is_name_token(word):
                if not run and not (gap and all(t in _ENUMERATION_GLUE for t in gap)):
                    group += 1
                run.append(word)
                continue
            if run:
                yield " ".join(run), group
                run, gap = [], []
            if gap is not None:
                gap.append(word.lower())


def extract_goal_literals(goal: str) -> list[GoalLiteral]:
    """The literal values a goal names, in order, without duplicates.

    What counts, in this order (each pass blanks what it took, so a date is not also three numbers):
    quoted strings ("...", '...', curly quotes); the few words after a colon that end the goal ("...
    my list: Call the plumber", `_COLON_TAIL`); dates (03/17/2016, 2016-03-17, "March 5, 2016");
    numbered labels ("Tab #1"); times (10:30 PM); numbers ($12.50, 1,200, 42; not ordinals like "5th"); and names: runs of
    Capitalised, ALL-CAPS or mixed letter-digit tokens that are not instruction words ("Select",
    "Submit", "the"). Plain lower-case words are never values: "log in as alice" gives nothing, which
    errs towards asking the model rather than towards a false failure.

    >>> [x.text for x in extract_goal_literals('Select 03/17/2016 as the date and hit submit.')]
    ['03/17/2016']
    >>> [x.text for x in extract_goal_literals('Click on the "cancel" button.')]
    ['cancel']
    """
    text = goal
    found: list[GoalLiteral] = []
    passes = (
        (QUOTED, "quoted"), (_COLON_TAIL, "quoted"), (_DATE, "date"), (_NUMBERED, "name"), (_TIME, "time"),
        (_NUMBER, "number"),
    )  # fmt: skip
    for pattern, kind in passes:
        if pattern is _COLON_TAIL and len(_COLON_SPACE.findall(text)) != 1:
            continue
        for start, end, value in list(_spans(pattern, text)):
            if value:
                found.append(GoalLiteral(value, kind))  # type: ignore[arg-type]
            text = _blank(text, start, end)
    names = list(_names(text))
    sizes = {g: sum(1 for _, h in names if h == g) for _, g in names}
    found += [GoalLiteral(name, "name", g if sizes[g] > 1 else None) for name, g in names]
    unique: dict[str, GoalLiteral] = {}
    for item in found:
        unique.setdefault(item.text.casefold(), item)
    return list(unique.values())


# --- matching ------------------------------------------------------------------------------------


# Glyphs a goal names by their look, which the accessibility tree names by their job: the "x" of a
# dialog is a button 'Close'.
GLYPH_NAMES: dict[str, tuple[str, ...]] = {"x": ("close", "×", "✕", "✖"), "×": ("close", "x")}


def _variants(literal: GoalLiteral) -> list[str]:
    """Spellings that count as the same value: a date with or without zero padding, a number without
    its currency sign or thousands separators, a glyph by its accessible name ("x" and 'Close')."""
    t = literal.text
    out = [t, *GLYPH_NAMES.get(t.casefold(), ())]
    if literal.kind == "date" and "/" in t:
        parts = t.split("/")
        out.append("/".join(p.lstrip("0") or "0" for p in parts))
    if literal.kind == "number":
        bare = t.lstrip("$€£").rstrip("%")
        out += [bare, bare.replace(",", "")]
    return list(dict.fromkeys(v for v in out if v))


def _normalise(text: str) -> str:
    return " ".join(text.split())


def literal_in(literal: GoalLiteral, text: str) -> bool:
    """Whether `literal` occurs in `text` as a whole value (word boundaries; whitespace collapsed).

    "5" is not in "15" (nor in "-5", "5.5" or "item-5"), "CA" is not in "Cancel"; codes match
    case-sensitively, words in any case.
    """
    haystack = _normalise(text)
    flags = 0 if literal.case_sensitive else re.IGNORECASE
    for variant in _variants(literal):
        needle = re.escape(_normalise(variant))
        left = r"(?<![\w])" if variant[:1].isalnum() else ""
        right = r"(?![\w])" if variant[-1:].isalnum() else ""
        if literal.kind == "number":  # "2" is not in "checkbox-2", "-2" or "2.5"; "-3" not in "checkbox-3"
            left = r"(?<![\w.-])" if variant[:1].isdigit() else r"(?<![\w])"
            right += r"(?!\.\d)"
        if re.search(left + needle + right, haystack, flags):
            return True
    return False


def is_whole_value(literal: GoalLiteral, label: str) -> bool:
    """Whether `label` is exactly the value (one of its spellings), in its case rule."""
    if literal.case_sensitive:
        return label in _variants(literal)
    return label.casefold() in {v.casefold() for v in _variants(literal)}


# --- the letter case a goal asks for ------------------------------------------------------------

_SELECT_TEXT = re.compile(r"\b(?:highlight|select)\s+(?:all\s+)?(?:of\s+)?(?:the\s+)?(?:\w+\s+)?text\b", re.IGNORECASE)


def asks_to_select_text(goal: str) -> bool:
    """Whether the goal asks to highlight (select) text: "Highlight the text in the 2nd paragraph"."""
    return bool(_SELECT_TEXT.search(goal))


_DRAG = re.compile(r"\bdrag(?:ging)?\b", re.IGNORECASE)


def asks_to_drag(goal: str) -> bool:
    """Whether the goal asks to drag something ("Drag the circle left then press Submit")."""
    return bool(_DRAG.search(goal))


_CASE = re.compile(r"\b(upper|lower)[\s-]?case\b|\b(capital)\s+letters\b", re.IGNORECASE)


def asked_case(goal: str) -> Literal["upper", "lower"] | None:
    """The letter case the goal asks a value to be typed in ("in all upper case letters"), if any."""
    match = _CASE.search(goal)
    if match is None:
        return None
    return "lower" if (match.group(1) or "").lower() == "lower" else "upper"


def in_case(value: str, case: Literal["upper", "lower"]) -> bool:
    """Whether `value` is written in `case` (digits and punctuation count as either)."""
    return value == (value.upper() if case == "upper" else value.lower())



# --- how many actions the goal asks for ---------------------------------------------------------

# Imperative verbs that each need at least one action of their own when they start a clause of the
# goal ("Expand the section and click submit": two). Left out on purpose: verbs that need no action
# of their own ("find", "look", "scroll", "go", "use", "view", "check", "see": the agent may click
# the target directly) and "drop" (one drag-and-drop does "drag ... and drop").
ACTION_VERBS = frozenset(
    """
    add answer book buy cancel change choose clear click close copy create delete drag draw enter expand
    fill forward generate give hit highlight leave log login logout make mark move open order paste pay pick
    post press put rate remove reply resize return save select send set sign sort star submit switch tell
    turn type uncheck write
    """.split()
)
_CLAUSE_OPENERS = frozenset({"and", "then", "also", "please", "next", "finally", "first", "now"})
_NOTHING = frozenset({"nothing", "none"})
_GOAL_TOKENS = re.compile(r"[^\W\d_][\w'-]*|[.!?;:,]")


@dataclass(frozen=True)
class GoalClause:
    """One clause of the goal that opens with an action verb: the verb and the clause's words after it."""

    verb: str
    rest: str


def goal_clauses(goal: str) -> list[GoalClause]:
    """The goal's clauses that open with an action verb, in order, each with the words that follow it
    up to the next clause ("Expand the section below and click submit." -> expand 'the section below',
    click 'submit').

    A verb counts at the start of the goal or of a clause (after punctuation, "and", "then"), never
    inside a quoted value or after "to" ("click the box to select it" is one clause); a clause that
    asks for nothing ("Select nothing") is not one.
    """
    text = without_quoted(goal)
    clauses: list[tuple[str, list[str]]] = []
    at_start = True
    in_clause = False  # the words after a verb, up to punctuation, belong to its clause
    for token in _GOAL_TOKENS.findall(text):
        word = token.lower()
        if token in ".!?;:,":
            at_start, in_clause = True, False
        elif at_start and word in ACTION_VERBS:
            clauses.append((word, []))
            at_start, in_clause = False, True
        else:
            at_start = word in _CLAUSE_OPENERS
            if in_clause and not at_start:
                clauses[-1][1].append(token)
    return [
        GoalClause(verb, " ".join(words))
        for verb, words in clauses
        if not (words and words[0].lower() in _NOTHING)  # "Select nothing and click Submit": no action
    ]


def required_actions(goal: str) -> list[str]:
    """The action verbs that open a clause of the goal, in order: a lower bound on the actions it needs.

    >>> required_actions("Expand the sections below, to find and click on the link 'vel'.")
    ['expand', 'click']
    """
    return [c.verb for c in goal_clauses(goal)]


# --- whether the pages ever showed what the goal acts on ------------------------------------------

# Words that open a clause's object without naming it ("turn ON the dark mode", "open MY profile").
_OBJECT_OPENERS = frozenset(
    "a an the my our your his her their its this that these those all each every some any on off up down in out".split()
)
_POSSESSIVES = frozenset({"my", "our", "your"})
# Words that end a clause's object: what follows says where or for whom, not what ("... for my account").
_OBJECT_ENDERS = frozenset(
    "for in on to from with into onto at by under as via using so because before after within inside".split()
)
# Words of an object too common or too vague to have to show on a page ("the first one", "two of them").
_VAGUE_WORDS = frozenset(
    """
    one two three four five six seven eight nine ten first second third last next new old item items
    thing things page button link option options setting settings it them
    """.split()
)


def clause_object_words(clause: GoalClause) -> list[str]:
    """The words naming what a clause acts on: its words after the verb, less the leading particles and
    articles, up to the first preposition, less vague words ("Turn on two-factor authentication for my
    account" -> ['two-factor', 'authentication']). Empty when the clause names nothing specific, and when
    its object is the user's own ("Switch my account to the Basic plan": the account is where the change
    is made, named by the page's owner, not by the page)."""
    words = clause.rest.split()
    if words and words[0].lower() in _POSSESSIVES:
        return []
    while words and words[0].lower() in _OBJECT_OPENERS:
        words = words[1:]
    named: list[str] = []
    for word in words:
        if word.lower() in _OBJECT_ENDERS:
            break
        if len(word) >= 3 and word.lower() not in _VAGUE_WORDS and word.lower() not in _OBJECT_OPENERS:
            named.append(word.lower())
    return named


def stem_seen(word: str, seen: str) -> bool:
    """The word, or a word sharing its stem (all but its last five letters, at least four), starts a word
    of the seen text: 'subscription' is seen in 'Subscribe', 'comments' in 'Comment'. Loose on purpose: a
    word seen in vain only costs the guard, never an action."""
    stem = word[: max(4, len(word) - 5)]
    return re.search(r"(?<![\w-])" + re.escape(stem), seen) is not None


def unseen_objects(goal: str, seen_text: str) -> list[str]:
    """The objects of the goal's clauses of which no word was ever seen in `seen_text` (the pages the
    episode showed), each as its words joined ('two-factor authentication').

    Why: a page that reacted to a click ("Preferences saved") does not make a goal about a thing no page
    ever named done: "Turn on two-factor authentication" on an account page with no such setting was
    claimed done by the 1.5B model's done check after saving the preferences. On an ordinary site the
    thing a goal changes is named where it is changed (a switch, a row, a heading); a page that names it
    otherwise ("2FA") only costs the shortcut of asking whether the goal is done, never an action.
    """
    seen = seen_text.lower()
    unseen: list[str] = []
    for clause in goal_clauses(goal):
        words = clause_object_words(clause)
        if words and not any(stem_seen(word, seen) for word in words):
            unseen.append(" ".join(words))
    return unseen
