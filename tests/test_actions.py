"""The closed action set: render/parse identity, injection safety, prose tolerance, ids, grammar, CLI."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awm.actions import (
    ACTION_SETS,
    EXECUTED_BY_AWM,
    Action,
    ArgSpec,
    action_grammar,
    browsergym_action_set,
    describe_actions,
    ids_for_roles,
    parse_action,
    render_action,
    target_first_grammar,
)
from awm.errors import ActionParseError, ConfigError

ROOT = Path(__file__).resolve().parent.parent
UNICODE = st.characters(codec="utf-8")  # any code point but lone surrogates (not valid text)


# --------------------------------------------------------------------------------------------------
# Strategies: canonical actions (every argument present, in signature order)
# --------------------------------------------------------------------------------------------------


def _no_space(s: str) -> bool:
    return not any(c.isspace() for c in s)


def _value(arg: ArgSpec, action_set: str, text: st.SearchStrategy[str]) -> st.SearchStrategy:
    if arg.type == "id":
        alphabet = (
            st.characters(codec="utf-8", exclude_characters="[]") if action_set == "mind2web" else UNICODE
        )
        return st.text(alphabet, min_size=1, max_size=12).filter(_no_space)
    if arg.type == "str":
        return text
    if arg.type == "int":
        return st.integers()
    if arg.type == "float":
        return st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False))
    return st.one_of(text, st.lists(text, max_size=4))


def actions(action_set: str, text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Action]:
    if text is None:
        text = st.text(UNICODE, max_size=30)
        if action_set == "mind2web":  # a Mind2Web value is one line
            text = text.filter(lambda s: "\n" not in s and "\r" not in s)
    per_spec = [
        st.fixed_dictionaries({a.name: _value(a, action_set, text) for a in spec.args}).map(
            lambda args, name=spec.name: Action(name=name, args=args)
        )
        for spec in ACTION_SETS[action_set].values()
    ]
    return st.one_of(per_spec)


# --------------------------------------------------------------------------------------------------
# render -> parse is the identity
# --------------------------------------------------------------------------------------------------


@given(actions("browser"))
def test_browser_render_then_parse_is_identity(action: Action) -> None:
    parsed = parse_action(render_action(action))
    assert parsed.action == action
    assert parsed.thought == ""


@given(actions("mind2web"))
def test_mind2web_render_then_parse_is_identity(action: Action) -> None:
    parsed = parse_action(render_action(action, "mind2web"), action_set="mind2web")
    assert parsed.action == action


PROSE = st.text(st.sampled_from("abcXYZ .,:;!?'\"-0123456789\n"), max_size=60)


@given(actions("browser"), PROSE)
def test_browser_action_after_prose_parses_and_keeps_the_thought(action: Action, prose: str) -> None:
    text = f"{prose}\nAction: {render_action(action)}"
    parsed = parse_action(text)
    assert parsed.action == action
    assert parsed.thought == prose.strip()


@pytest.fixture(scope="module")
def browsergym_set():
    return browsergym_action_set()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=actions("browser"))
def test_rendered_action_is_what_browsergym_executes(browsergym_set, action: Action) -> None:
    """BrowserGym re-parses our string and writes each call back with repr: it must come out unchanged."""
    if action.name in EXECUTED_BY_AWM:
        return  # done by our executor with BrowserGym's own actions (select_text: a mouse drag)
    rendered = render_action(action)
    code = browsergym_set.to_python_code(rendered)
    assert code.rstrip().splitlines()[-1] == rendered
    assert (
        f"def {action.name}(" in code
    )  # the function is defined in the executed program (check/uncheck too)


def test_canonical_args_fill_defaults_and_keep_signature_order() -> None:
    action = parse_action("fill(value='Bob', bid='a7')").action
    assert list(action.args) == ["bid", "value"]
    assert action.args == {"bid": "a7", "value": "Bob"}
    assert render_action(action) == "fill('a7', 'Bob')"
    assert parse_action("noop()").action.args == {"wait_ms": 1000}
    assert render_action(parse_action("noop(1000)").action) == "noop()"
    assert render_action(parse_action("noop(250.5)").action) == "noop(wait_ms=250.5)"
    assert parse_action("click(12)").action.target_id == "12"  # unquoted numeric bid is read as the string
    assert parse_action("select_option('3', ('a', 'b'))").action.args["options"] == ["a", "b"]


def test_render_is_repr_safe_for_hard_strings() -> None:
    hard = 'it\'s "quoted" \\ back\nslash\ttab é 😀 \x07 ]) # not a comment'
    action = Action(name="fill", args={"bid": "5", "value": hard})
    rendered = render_action(action)
    assert "\n" not in rendered
    assert parse_action(rendered).action == action


def test_action_is_hashable_and_frozen() -> None:
    a = parse_action("fill('5', 'x')").action
    assert len({a, parse_action("fill('5', 'x')").action}) == 1
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises its ValidationError for frozen models
        a.name = "click"  # type: ignore[misc]


def test_target_id() -> None:
    assert parse_action("scroll(0, 100)").action.target_id is None
    assert parse_action("TYPE [42] [x]", action_set="mind2web").action.target_id == "42"


# --------------------------------------------------------------------------------------------------
# Injection: rejected with the right kind, and nothing runs
# --------------------------------------------------------------------------------------------------

PAYLOADS = [
    ("__import__('os').system('touch {m}')", "unknown_action"),
    ("exec(\"__import__('os').system('touch {m}')\")", "unknown_action"),
    ("eval(\"click('5') or __import__('os').system('touch {m}')\")", "unknown_action"),
    ("Action: os.system('touch {m}')", "unknown_action"),
    ("click(__import__('os').system('touch {m}'))", "non_literal"),
    ("click(open('{m}', 'w').write('x'))", "non_literal"),
    ("fill('5', open('{m}', 'w').name)", "non_literal"),
    ("click((lambda: __import__('os').system('touch {m}'))())", "non_literal"),
    ("click(f\"{{__import__('os').system('touch {m}')}}\")", "non_literal"),
    ("click([__import__('os').system('touch {m}') for _ in 'x'])", "non_literal"),
    ("click(*[__import__('os').system('touch {m}')])", "non_literal"),
    ("click(**{{'bid': __import__('os').system('touch {m}')}})", "non_literal"),
    ("click('5' if __import__('os').system('touch {m}') else '6')", "non_literal"),
    ("click(x := __import__('os').system('touch {m}'))", "non_literal"),
    ("fill('5', '{m}' + __import__('os').popen('touch {m}').read())", "non_literal"),
    ("select_option('5', [__import__('os').system('touch {m}')])", "non_literal"),
    ("send_msg_to_user(__import__('subprocess').run(['touch', '{m}']))", "non_literal"),
    ("fill(value=__import__('os').system('touch {m}'), bid='5')", "non_literal"),
    ("click(bid)", "non_literal"),
    ("click('5').__class__.__init__.__globals__['os'].system('touch {m}')", "syntax"),
    ("page.click('5'); __import__('os').system('touch {m}')", "syntax"),
    ("fill('5', b'{m}')", "bad_argument"),
    ("click(None)", "bad_argument"),
]


@pytest.mark.parametrize(("template", "kind"), PAYLOADS)
def test_injection_is_rejected_and_nothing_runs(tmp_path: Path, template: str, kind: str) -> None:
    marker = tmp_path / "pwned"
    text = template.format(m=marker)
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert info.value.kind == kind, str(info.value)
    assert not marker.exists()


def test_the_marker_payload_does_run_when_executed(tmp_path: Path) -> None:
    """Control: the payloads above would create the marker if anything executed them."""
    marker = tmp_path / "pwned"
    subprocess.run([sys.executable, "-c", PAYLOADS[0][0].format(m=marker)], check=True)
    assert marker.exists()


def test_code_next_to_a_valid_action_is_never_part_of_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    parsed = parse_action(f"go_back(); __import__('os').system('touch {marker}')")
    assert render_action(parsed.action) == "go_back()"
    assert not marker.exists()


@pytest.mark.parametrize("path", sorted((ROOT / "awm" / "actions").glob("*.py")), ids=lambda p: p.name)
def test_action_modules_never_call_eval_or_exec(path: Path) -> None:
    tree = ast.parse(path.read_text())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__"}


# --------------------------------------------------------------------------------------------------
# Prose, fences, comments, labels
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "thought", "rendered"),
    [
        ("click('5')", "", "click('5')"),
        ("The submit button is 5.\nAction: click('5')", "The submit button is 5.", "click('5')"),
        ("Thought: type the name\naction: fill('7', 'Ada')", "type the name", "fill('7', 'Ada')"),
        ("I will search.\n```python\nfill('7', 'shoes')\n```\nDone.", "I will search.", "fill('7', 'shoes')"),
        ("```\nclick('5')  # the OK button, not click('6')\n```", "", "click('5')"),
        ("Next action: `press('9', 'Enter')`", "", "press('9', 'Enter')"),
        ("Pick the button(s) then click('5')", "Pick the button(s) then", "click('5')"),
        ("# click('6') was wrong\nclick('5')", "# click('6') was wrong", "click('5')"),
        (
            "Mention click('4') in prose\n```python\nclick('5')\n```",
            "Mention click('4') in prose",
            "click('5')",
        ),
        ("fill('5', '''multi\nline''')", "", "fill('5', 'multi\\nline')"),
        ("scroll(-50.5, +100)", "", "scroll(-50.5, 100)"),
    ],
)
def test_prose_and_fences_are_tolerated(text: str, thought: str, rendered: str) -> None:
    parsed = parse_action(text)
    assert parsed.thought == thought
    assert render_action(parsed.action) == rendered


@pytest.mark.parametrize(
    "text",
    [
        "click('5')\nclick('6')",
        "click('5'); fill('6', 'x')",
        "```python\nfill('6', 'x')\nclick('7')\n```",
        "First click('5') and then click('6')",
    ],
)
def test_multiple_actions_are_rejected(text: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert info.value.kind == "multiple_actions"
    assert "found 2 actions" in str(info.value)
    assert "exactly one action" in str(info.value)


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("fill('5')", "wrong_arity", "fill() takes 2 arguments (bid, value); got 1 (missing value)"),
        ("go_back('5')", "wrong_arity", "go_back() takes no arguments; got 1"),
        (
            "click('5', 'left', 'x')",
            "wrong_arity",
            "click() takes 1 argument (bid); got 3",
        ),
        ("hover('5', '6')", "wrong_arity", "hover() takes 1 argument (bid); got 2"),
        (
            "click('5', force=True)",
            "wrong_arity",
            "click() got an unexpected keyword argument 'force'; its arguments are (bid)",
        ),
        ("click('5', bid='6')", "wrong_arity", "click() got multiple values for argument 'bid'"),
        (
            "click('5', button='right')",
            "wrong_arity",
            "click() got an unexpected keyword argument 'button'; its arguments are (bid)",
        ),
        ("tab_focus(1.5)", "bad_argument", "argument 'index' of tab_focus() must be an integer; got 1.5"),
        ("scroll(0, 1e999)", "bad_argument", "must be a finite number"),
        ("click('')", "bad_argument", "must be an element id string"),
        ("fill('5', '\\ud800')", "bad_argument", "valid Unicode"),
        ("click('5'", "syntax", "unbalanced parentheses or an unterminated string"),
        ("fill('5', 'abc)", "syntax", "could not parse"),
        ("I am not sure what to do.", "no_action", "no action found; reply with exactly one action"),
        ("Click('5')", "unknown_action", "'Click' is not an allowed action (did you mean click?)"),
        ("mouse_click(10, 20)", "unknown_action", "allowed actions: click, dblclick"),
    ],
)
def test_errors_are_precise(text: str, kind: str, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert info.value.kind == kind
    assert message in str(info.value)


def test_ids_are_restricted_to_the_page() -> None:
    ids = ["12", "13", "a5", "b534"]
    assert parse_action("click('a5')", page_ids=ids).action.target_id == "a5"
    with pytest.raises(ActionParseError) as info:
        parse_action("click('a6')", page_ids=ids)
    assert info.value.kind == "id_not_on_page"
    message = str(info.value)
    assert "'a6' is not on the current page" in message
    assert "'a5'" in message and "'12'" in message
    assert parse_action("scroll(0, 10)", page_ids=[]).action.name == "scroll"  # no id: nothing to check
    with pytest.raises(ActionParseError, match="no element ids"):
        parse_action("click('1')", page_ids=[])
    with pytest.raises(ActionParseError) as m2w:
        parse_action("CLICK [99]", action_set="mind2web", page_ids=["100", "101"])
    assert m2w.value.kind == "id_not_on_page"


# --------------------------------------------------------------------------------------------------
# Mind2Web
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("CLICK [12]", "CLICK", {"id": "12"}),
        ("click [12]", "CLICK", {"id": "12"}),
        ("Answer: `TYPE [3] [new york]`", "TYPE", {"id": "3", "value": "new york"}),
        ("The field is 3.\nType [3] [a]b [c] \"d\" 'e']", "TYPE", {"id": "3", "value": "a]b [c] \"d\" 'e'"}),
        ("SELECT [ 7 ] [Economy] because it is cheap", "SELECT", {"id": "7", "value": "Economy"}),
        ("select [7] []", "SELECT", {"id": "7", "value": ""}),
        ("I should CLICK [5] to open the menu [top]", "CLICK", {"id": "5"}),
    ],
)
def test_mind2web_answers(text: str, name: str, args: dict) -> None:
    action = parse_action(text, action_set="mind2web").action
    assert (action.name, action.args) == (name, args)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("TYPE [3]", "wrong_arity"),
        ("CLICK [3] [Search]", "wrong_arity"),
        ("CLICK [3]\nTYPE [4] [x]", "multiple_actions"),
        ("HOVER [3]", "unknown_action"),
        ("I don't know", "no_action"),
        ("CLICK [a b]", "bad_argument"),
        ("CLICK [3", "syntax"),
    ],
)
def test_mind2web_errors(text: str, kind: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text, action_set="mind2web")
    assert info.value.kind == kind


def test_mind2web_value_must_be_one_line() -> None:
    with pytest.raises(ActionParseError) as info:
        render_action(Action(name="TYPE", args={"id": "1", "value": "a\nb"}), "mind2web")
    assert info.value.kind == "bad_argument"


# --------------------------------------------------------------------------------------------------
# Prompt text
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action_set", ["browser", "mind2web"])
def test_description_lists_every_action_once_with_safe_examples(action_set: str) -> None:
    text = describe_actions(action_set)  # type: ignore[arg-type]
    lines = text.splitlines()
    assert [line.split("(")[0].split(" ")[0] for line in lines] == list(ACTION_SETS[action_set])
    for line in lines:
        if "Example: " not in line:
            continue
        parsed = parse_action(line.split("Example: ", 1)[1], action_set=action_set)  # type: ignore[arg-type]
        assert parsed.action.target_id in (None, "BID", "ID")
    assert not re.search(r"\[\d+\]|'[a-z]?\d+'", text), "an example id that could exist on a real page"


def test_description_and_grammar_honour_names() -> None:
    assert describe_actions(names=["fill", "click"]).splitlines()[0].startswith("click(")
    assert len(describe_actions(names=["fill", "click"]).splitlines()) == 2
    with pytest.raises(ConfigError):
        describe_actions(names=["rm_rf"])


# --------------------------------------------------------------------------------------------------
# GBNF grammar: a small GBNF reader that checks structure and turns the (non-recursive) grammar into a
# Python regex, so we can test that what the grammar allows, the parser accepts, and vice versa.
# --------------------------------------------------------------------------------------------------

_GBNF_TOKEN = re.compile(
    r'\s+|"(?P<lit>(?:\\.|[^"\\])*)"|\[(?P<cls>(?:\\.|[^\]\\])*)\]|(?P<ref>[a-zA-Z0-9-]+)'
    r"|(?P<rep>\{\d+(?:,\d*)?\})|(?P<op>[()|?*+])"
)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "'": "'"}


def _unescape(body: str) -> list[str]:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        else:
            assert nxt in _ESCAPES, f"unknown GBNF escape \\{nxt}"
            out.append(_ESCAPES[nxt])
            i += 2
    return out


def _char_class(body: str) -> str:
    negate = body.startswith("^")
    chars = _unescape(body[1:] if negate else body)
    parts, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            parts.append(f"\\U{ord(chars[i]):08x}-\\U{ord(chars[i + 2]):08x}")
            i += 3
        else:
            parts.append(f"\\U{ord(chars[i]):08x}")
            i += 1
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def parse_gbnf(grammar: str) -> dict[str, str]:
    rules: dict[str, str] = {}
    for line in grammar.splitlines():
        if not line.strip():
            continue
        name, sep, body = line.partition(" ::= ")
        assert sep and re.fullmatch(r"[a-zA-Z0-9-]+", name), f"bad rule line: {line!r}"
        assert name not in rules, f"rule {name} defined twice"
        rules[name] = body
    assert "root" in rules
    return rules


def gbnf_to_regex(grammar: str, start: str = "root") -> str:
    rules = parse_gbnf(grammar)

    def convert(name: str, stack: tuple[str, ...]) -> str:
        assert name in rules, f"rule {name!r} is referenced but not defined"
        assert name not in stack, f"rule {name!r} is recursive"
        body, out, pos = rules[name], [], 0
        while pos < len(body):
            m = _GBNF_TOKEN.match(body, pos)
            assert m, f"cannot read GBNF at {body[pos:]!r}"
            pos = m.end()
            if m.group("lit") is not None:
                out.append("".join(re.escape(c) for c in _unescape(m.group("lit"))))
            elif m.group("cls") is not None:
                out.append(_char_class(m.group("cls")))
            elif m.group("ref"):
                out.append(f"(?:{convert(m.group('ref'), (*stack, name))})")
            elif m.group("rep"):
                out.append(m.group("rep"))
            elif m.group("op"):
                out.append("(?:" if m.group("op") == "(" else m.group("op"))
        return "".join(out)

    return convert(start, ())


PAGE_IDS = ["12", "a5", "b534", "it's"]


def test_grammar_is_well_formed_and_limited_to_page_ids() -> None:
    grammar = action_grammar("browser", page_ids=PAGE_IDS)
    rules = parse_gbnf(grammar)
    gbnf_to_regex(grammar)  # every referenced rule is defined, nothing recursive
    bid = re.compile(gbnf_to_regex(grammar, "bid"))
    for i in PAGE_IDS:
        assert bid.fullmatch(repr(i))
    assert not bid.fullmatch("'13'")
    assert all(name.replace("-", "_") in ACTION_SETS["browser"] for name in rules["action"].split(" | "))


def test_grammar_without_ids_offers_only_actions_without_ids() -> None:
    grammar = action_grammar("browser", page_ids=[])
    rules = parse_gbnf(grammar)
    assert "bid" not in rules
    assert "click" not in rules["action"].split(" | ")
    assert "scroll" in rules["action"].split(" | ")
    with pytest.raises(ConfigError):
        action_grammar("browser", page_ids=[], names=["click"])


def test_grammar_names_and_no_thought() -> None:
    grammar = action_grammar("browser", page_ids=["7"], names=["click"], with_thought=False)
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("click('7')")
    assert not regex.fullmatch("click('7', button='right')")  # a left click only (see BROWSER_ACTIONS)
    assert not regex.fullmatch("click('8')")
    assert not regex.fullmatch("Let me click.\nclick('7')")
    assert not regex.fullmatch("fill('7', 'x')")


BROWSER_REGEX = re.compile(gbnf_to_regex(action_grammar("browser", page_ids=PAGE_IDS)))
MIND2WEB_REGEX = re.compile(gbnf_to_regex(action_grammar("mind2web", page_ids=["12", "345"])))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(BROWSER_REGEX, fullmatch=True, alphabet=UNICODE))
def test_everything_the_browser_grammar_allows_parses(text: str) -> None:
    parsed = parse_action(text, page_ids=PAGE_IDS)
    assert parsed.action.target_id in (None, *PAGE_IDS)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(MIND2WEB_REGEX, fullmatch=True, alphabet=UNICODE))
def test_everything_the_mind2web_grammar_allows_parses(text: str) -> None:
    parsed = parse_action(text, action_set="mind2web", page_ids=["12", "345"])
    assert parsed.action.target_id in ("12", "345")


def _grammar_friendly(action: Action) -> bool:
    """Numbers the grammar writes: up to 6 integer digits and 4 decimals, no exponent."""
    for value in action.args.values():
        if isinstance(value, int | float) and not re.fullmatch(r"-?\d{1,6}(\.\d{1,4})?", repr(value)):
            return False
        if isinstance(value, int) and action.name == "tab_focus" and abs(value) > 9999:
            return False
    return action.target_id in (None, *PAGE_IDS)


BMP_TEXT = st.text(st.characters(codec="utf-8", max_codepoint=0xFFFF), max_size=20)


@given(actions("browser", BMP_TEXT).filter(_grammar_friendly))
def test_canonical_renders_are_in_the_browser_grammar(action: Action) -> None:
    assert BROWSER_REGEX.fullmatch(render_action(action)), render_action(action)


# --------------------------------------------------------------------------------------------------
# CLI, through the real entry point
# --------------------------------------------------------------------------------------------------


def _awm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "awm.cli", "actions", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_cli_parse_prints_json() -> None:
    result = _awm("parse", "Submit it.\nclick('5')", "--ids", "5,6")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload == {
        "thought": "Submit it.",
        "action": {"name": "click", "args": {"bid": "5"}},
        "rendered": "click('5')",
    }


def test_cli_parse_rejects_a_payload_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    result = _awm("parse", f"__import__('os').system('touch {marker}')")
    assert result.returncode == 2
    assert "[unknown_action]" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not marker.exists()
    wrong_set = _awm("parse", "CLICK [3]", "--set", "nope")
    assert wrong_set.returncode == 2 and "Traceback" not in wrong_set.stderr
    m2w = _awm("parse", "TYPE [3] [new york]", "--set", "mind2web", "--ids", "3")
    assert json.loads(m2w.stdout)["rendered"] == "TYPE [3] [new york]"


# --------------------------------------------------------------------------------------------------
# The real local model, constrained by the grammar
# --------------------------------------------------------------------------------------------------


@pytest.mark.llm
def test_local_model_output_under_the_grammar_parses_to_a_page_id(local_llm) -> None:
    from awm.llm.base import ChatRequest

    ids = ["14", "15", "16"]
    names = ["click", "fill"]
    page = "[14] textbox 'First name'\n[15] textbox 'Last name'\n[16] button 'Submit'"
    system = (
        "You control a web page. Reply with one short line of reasoning, then one action on its own line.\n"
        + describe_actions("browser", names=names)
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Goal: enter the first name Ada.\nPage:\n{page}"},
    ]
    grammar = action_grammar("browser", page_ids=ids, names=names, max_thought_chars=120)
    result = local_llm.chat(ChatRequest(messages=messages, grammar=grammar, max_tokens=64))
    parsed = parse_action(result.text, page_ids=ids)
    assert parsed.action.name in names
    assert parsed.action.target_id in ids

    # A grammar that allows one string only: proves the backend enforces it rather than ignoring it.
    only = action_grammar("browser", page_ids=["16"], names=["click"], with_thought=False)
    forced = local_llm.chat(ChatRequest(messages=messages, grammar=only, max_tokens=16))
    assert re.fullmatch(gbnf_to_regex(only), forced.text.strip()), forced.text
    assert parse_action(forced.text, page_ids=["16"]).action.target_id == "16"


# --- role-aware ids: fill only text fields, check only checkboxes, select only dropdowns ------------

ROLES = {"12": "textbox", "13": "textbox", "15": "button", "20": "checkbox", "21": "combobox", "22": "link"}
DESCRIBE = {"12": "textbox 'Username'", "15": "button 'Submit'", "20": "checkbox 'Remember me'"}
ROLE_IDS = ids_for_roles(ROLES)


def test_ids_for_roles_groups_ids_by_what_each_action_can_act_on() -> None:
    assert ROLE_IDS["fill"] == ROLE_IDS["clear"] == ["12", "13", "21"]
    assert ROLE_IDS["press"] == ["12", "13", "15", "21"]  # Enter on a button presses it
    assert ROLE_IDS["check"] == ROLE_IDS["uncheck"] == ["20"]
    assert ROLE_IDS["select_option"] == ["21"]
    assert "click" not in ROLE_IDS and "hover" not in ROLE_IDS and "focus" not in ROLE_IDS  # any id
    # page order from `ids`; an id whose role is unknown is never made unreachable
    with_unknown = ids_for_roles({"15": "button", "12": "textbox"}, ["99", "15", "12"])
    assert with_unknown["fill"] == ["99", "12"] and with_unknown["check"] == ["99"]
    assert ids_for_roles({"7": "button"}, action_set="mind2web") == {"TYPE": [], "SELECT": []}


def test_a_block_of_text_takes_select_text_and_drag_alone_and_select_text_nothing_else() -> None:
    roles = {"12": "text", "13": "text", "15": "button"}
    ids_for = ids_for_roles(roles)
    assert ids_for["select_text"] == ["12", "13"]
    assert ids_for["click"] == ids_for["focus"] == ["15"] and ids_for["fill"] == []
    assert "drag" not in ids_for  # a list item of text is dragged into place: drag takes any id
    assert "click" not in ids_for_roles({"15": "button"})  # without text blocks, click takes any id
    with pytest.raises(ActionParseError) as refused:
        parse_action("click('13')", page_ids=roles, ids_for=ids_for, describe={"13": "text 'Cras'"})
    assert "[13] is a text 'Cras': use select_text('13')" in str(refused.value)


def test_fill_on_a_button_is_refused_with_the_fix() -> None:
    with pytest.raises(ActionParseError) as refused:
        parse_action("fill('15', 'Submit')", page_ids=ROLES, ids_for=ROLE_IDS, describe=DESCRIBE)
    assert refused.value.kind == "bad_argument"
    assert str(refused.value) == (
        "fill() needs a text field or a slider; [15] is a button 'Submit': use click('15'); ids that fit: '12', '13', '21'"
    )
    with pytest.raises(ActionParseError, match=r"check\(\) needs a checkbox.*\[12\] is a textbox 'Username'"):
        parse_action("check('12')", page_ids=ROLES, ids_for=ROLE_IDS, describe=DESCRIBE)
    with pytest.raises(ActionParseError, match=r"\[22\] is not one: use click\('22'\); ids that fit: '21'$"):
        parse_action("select_option('22', 'x')", ids_for=ROLE_IDS)  # no description: still precise
    with pytest.raises(ActionParseError, match=r"use select_option\('21', 'option'\)"):
        parse_action("check('21')", ids_for=ROLE_IDS)
    # the right kind of element, and actions without a role rule, pass
    assert parse_action("fill('12', 'kanesha')", ids_for=ROLE_IDS).action.target_id == "12"
    assert parse_action("click('15')", ids_for=ROLE_IDS).action.target_id == "15"
    assert parse_action("check('20')", ids_for=ROLE_IDS).action.target_id == "20"
    # without ids_for nothing changes
    assert parse_action("fill('15', 'Submit')", page_ids=ROLES).action.name == "fill"


def test_mind2web_type_on_a_button_is_refused() -> None:
    ids_for = ids_for_roles({"5": "button", "6": "textbox"}, action_set="mind2web")
    with pytest.raises(
        ActionParseError, match=r"^TYPE needs a text field; \[5\] is a button 'Go': use CLICK \[5\]"
    ):
        parse_action("TYPE [5] [x]", action_set="mind2web", ids_for=ids_for, describe={"5": "button 'Go'"})
    assert parse_action("TYPE [6] [x]", action_set="mind2web", ids_for=ids_for).action.target_id == "6"


def test_role_aware_grammar_holds_each_action_to_its_own_ids() -> None:
    names = ["click", "fill", "press", "check", "select_option", "scroll"]
    grammar = action_grammar("browser", page_ids=list(ROLES), names=names, ids_for=ROLE_IDS)
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("type it\nfill('12', 'kanesha')")
    assert regex.fullmatch("click('15')") and regex.fullmatch("check('20')")
    assert regex.fullmatch("select_option('21', 'Blue')") and regex.fullmatch("press('13', 'Enter')")
    assert not regex.fullmatch("fill('15', 'Submit')")
    assert regex.fullmatch("press('15', 'Enter')") and not regex.fullmatch("press('20', 'Enter')")
    assert not regex.fullmatch("check('12')")
    assert not regex.fullmatch("select_option('12', 'x')")
    # ids_for is limited to the page: an id in ids_for but not on the page is not offered
    off_page = action_grammar("browser", page_ids=["12"], names=["fill"], ids_for={"fill": ["12", "77"]})
    assert not re.compile(gbnf_to_regex(off_page)).fullmatch("fill('77', 'x')")


def test_role_aware_grammar_leaves_out_actions_with_no_ids_and_keeps_the_old_form() -> None:
    only_buttons = ids_for_roles({"15": "button", "16": "link"})
    grammar = action_grammar("browser", page_ids=["15", "16"], ids_for=only_buttons)
    actions = parse_gbnf(grammar)["action"].split(" | ")
    assert "click" in actions and "hover" in actions and "press" in actions
    assert not {"fill", "clear", "check", "uncheck", "select_option"} & set(actions)
    assert action_grammar("browser", page_ids=PAGE_IDS, ids_for=None) == action_grammar(
        "browser", page_ids=PAGE_IDS
    )
    m2w = action_grammar(
        "mind2web",
        page_ids=["5", "6"],
        ids_for=ids_for_roles({"5": "button", "6": "textbox"}, action_set="mind2web"),
    )
    m2w_regex = re.compile(gbnf_to_regex(m2w))
    assert m2w_regex.fullmatch("TYPE [6] [x]") and m2w_regex.fullmatch("CLICK [5]")
    assert not m2w_regex.fullmatch("TYPE [5] [x]") and "SELECT" not in parse_gbnf(m2w)["action"]


ROLE_REGEX = re.compile(gbnf_to_regex(action_grammar("browser", page_ids=list(ROLES), ids_for=ROLE_IDS)))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(ROLE_REGEX, fullmatch=True, alphabet=UNICODE))
def test_everything_the_role_aware_grammar_allows_parses_with_the_same_sets(text: str) -> None:
    parsed = parse_action(text, page_ids=list(ROLES), ids_for=ROLE_IDS, describe=DESCRIBE)
    own = ROLE_IDS.get(parsed.action.name)
    assert parsed.action.target_id is None or parsed.action.target_id in (own if own is not None else ROLES)


# --- target first: the element as the page describes it, then an action that fits it ---------------


def test_target_first_grammar_names_the_element_then_only_its_own_actions() -> None:
    targets = {"12": "textbox 'Username'", "15": "button 'Submit'", "20": "checkbox 'Remember (me)'"}
    names = ["click", "fill", "press", "check", "scroll"]
    grammar = target_first_grammar(targets, names, ids_for=ids_for_roles(ROLES, list(targets)))
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("On: textbox 'Username' [12]\nfill('12', 'kanesha')")
    assert regex.fullmatch("On: button 'Submit' [15]\nclick('15')")
    assert regex.fullmatch("On: button 'Submit' [15]\npress('15', 'Enter')")
    assert regex.fullmatch("On: checkbox 'Remember me' [20]\ncheck('20')")  # no parentheses in a line
    assert regex.fullmatch("On: page\nscroll(0, 300)")
    assert not regex.fullmatch("On: button 'Submit' [15]\nfill('15', 'x')")  # a button takes no text
    assert not regex.fullmatch("On: button 'Submit' [15]\nclick('12')")  # the id is the element's own
    assert not regex.fullmatch("On: page\nclick('15')")
    assert not regex.fullmatch("click('15')")  # the element comes first
    # what the line says is read back as the thought, and the action as usual
    parsed = parse_action("On: checkbox 'Remember me' [20]\ncheck('20')", page_ids=list(targets))
    assert parsed.thought == "On: checkbox 'Remember me' [20]" and parsed.action.target_id == "20"
    # spent ids leave their element out; nothing left is a clear error
    only_submit = target_first_grammar(targets, ["click"], ids_for={"click": ["15"]})
    assert "Username" not in only_submit and "Submit" in only_submit
    with pytest.raises(ConfigError):
        target_first_grammar({"12": "textbox"}, ["check"], ids_for={"check": []})


def test_target_first_grammar_offers_workflow_calls_on_the_page_line() -> None:
    grammar = target_first_grammar({"5": "button 'Go'"}, ["click"], workflows={"search": ["query"]})
    regex = re.compile(gbnf_to_regex(grammar))
    assert regex.fullmatch("On: page\nrun_workflow('search', {'query': 'socks'})")
    assert regex.fullmatch("On: button 'Go' [5]\nclick('5')")
