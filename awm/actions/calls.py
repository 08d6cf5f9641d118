"""Reading calls in model text: find the candidate calls (inside ``` fences when there are any, never in a
comment), and read one call's arguments as literals.

Why our own reader: model text never reaches BrowserGym, and it is never evaluated. A call is read by walking
the AST of exactly that call (`ast.parse`), accepting literal nodes only: strings, numbers, lists of strings,
and for `run_workflow` a dict of quoted parameter values; never eval/exec.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from typing import Any

from awm.actions.binding import bind_args
from awm.actions.table import ActionSpec, ArgValue
from awm.errors import ActionParseError

_CALL_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")
_FENCE_RE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Call:
    """A `name(` found in model text, with the extent of its argument list."""

    name: str
    start: int
    end: int | None  # index of the closing parenthesis, None when unbalanced
    attribute: bool  # written as obj.name(...)


def shorten(text: str, limit: int = 80) -> str:
    """Text quoted in an error message: one line (when it had several), at most `limit` characters."""
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _closing_paren(text: str, open_idx: int) -> int | None:
    """Index of the parenthesis closing text[open_idx], skipping strings and comments; None if none."""
    depth = 0
    i, n = open_idx, len(text)
    while i < n:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i if c == ")" else None
        elif c == "#":
            newline = text.find("\n", i)
            if newline < 0:
                return None
            i = newline
        elif c in "'\"":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                if text[i] == "\\":
                    i += 1
                elif len(quote) == 1 and text[i] in "\r\n":
                    return None
                i += 1
            if i >= n:
                return None
            i += len(quote) - 1
        i += 1
    return None


def line_bounds(text: str, pos: int) -> tuple[int, int]:
    """Start and end offsets of the line holding text[pos]."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, (len(text) if end < 0 else end)


def _scan_calls(text: str, lo: int, hi: int) -> list[Call]:
    """Every `name(` in text[lo:hi] outside comment lines, with the extent of its argument list."""
    calls: list[Call] = []
    pos = lo
    while (m := _CALL_RE.search(text, pos, hi)) is not None:
        start = m.start(1)
        line_start, line_end = line_bounds(text, start)
        if text[line_start:start].lstrip().startswith("#"):
            pos = line_end
            continue
        end = _closing_paren(text, m.end() - 1)
        if end is not None and end >= hi:
            end = None
        calls.append(Call(m.group(1), start, end, start > 0 and text[start - 1] == "."))
        if end is None:
            pos = m.end()
            continue
        pos = end + 1
        _, rest_end = line_bounds(text, pos) if pos < len(text) else (pos, pos)
        if text[pos:rest_end].lstrip().startswith("#"):  # a trailing comment is not code
            pos = rest_end
    return calls


def call_text(text: str, call: Call) -> str:
    """The call as written (its first 40 characters when it is unbalanced), for error messages."""
    return text[call.start : call.end + 1] if call.end is not None else text[call.start : call.start + 40]


def candidate_calls(text: str) -> list[Call]:
    """Calls inside ``` fences when the fences hold any; otherwise calls anywhere in the text."""
    fenced = [c for m in _FENCE_RE.finditer(text) for c in _scan_calls(text, m.start(1), m.end(1))]
    return fenced or _scan_calls(text, 0, len(text))


def _describe_node(node: ast.AST) -> str:
    kinds = {
        ast.Call: "a function call",
        ast.Attribute: "an attribute access",
        ast.Name: "a variable name",
        ast.JoinedStr: "an f-string",
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.GeneratorExp: "a generator",
        ast.Starred: "a starred argument",
        ast.Subscript: "a subscript",
        ast.Dict: "a dict",
        ast.Set: "a set",
    }
    kind = kinds.get(type(node), "an expression")
    try:
        code = ast.unparse(node)
    except Exception:  # unparse of odd trees is best effort; it never executes anything
        code = type(node).__name__
    return f"{kind} `{shorten(code, 60)}`"


def _literal(node: ast.AST, where: str) -> Any:
    """The value of a literal node: a constant, a signed number, or a list/tuple of constants."""
    literal_hint = "a literal (a quoted string, a number or a list of strings)"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str | int | float) and not isinstance(node.value, bool):
            return node.value
        raise ActionParseError(
            "bad_argument", f"{where} must be a quoted string or a number; got {node.value!r}"
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, int | float)
            and not isinstance(operand.value, bool)
        ):
            return -operand.value if isinstance(node.op, ast.USub) else operand.value
    if isinstance(node, ast.Dict):  # run_workflow's parameters: {'name': 'value', ...}
        out: dict[Any, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
                raise ActionParseError("non_literal", f"{where}: dict keys must be quoted parameter names")
            if not isinstance(item, ast.Constant) or isinstance(item.value, bool) or item.value is None:
                raise ActionParseError(
                    "non_literal",
                    f"{where}: the value of '{key.value}' must be a quoted string; got {_describe_node(item)}",
                )
            out[key.value] = item.value
        return out
    if isinstance(node, ast.List | ast.Tuple):
        items = []
        for element in node.elts:
            if not isinstance(element, ast.Constant):
                raise ActionParseError(
                    "non_literal", f"{where} must be {literal_hint}; got {_describe_node(element)} in a list"
                )
            if not isinstance(element.value, str):
                raise ActionParseError(
                    "bad_argument", f"{where}: list items must be quoted strings; got {element.value!r}"
                )
            items.append(element.value)
        return items
    raise ActionParseError("non_literal", f"{where} must be {literal_hint}; got {_describe_node(node)}")


def parse_call(text: str, call: Call, spec: ActionSpec) -> dict[str, ArgValue]:
    """The arguments of one candidate call, bound to `spec` and read as literals; anything else is refused."""
    if call.end is None:
        snippet = shorten(text[call.start :], 60)
        raise ActionParseError(
            "syntax", f"could not parse `{snippet}`: unbalanced parentheses or an unterminated string"
        )
    source = text[call.start : call.end + 1]
    if call.attribute:
        raise ActionParseError(
            "syntax", f"write the action as a bare call like {spec.name}(...), not as `obj.{spec.name}(...)`"
        )
    after = text[call.end + 1 :].lstrip(" \t")
    if after[:1] in (".", "(", "["):
        raise ActionParseError(
            "syntax", f"write the action as a bare call; `{shorten(source, 50)}` is followed by `{after[:1]}`"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences warn; they are still literals
            tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        raise ActionParseError("syntax", f"could not parse `{shorten(source, 60)}`: {reason}") from None
    node = tree.body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise ActionParseError("syntax", f"could not parse `{shorten(source, 60)}` as one call")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise ActionParseError(
            "non_literal", f"{spec.name}() arguments must be literals; `*` unpacking is not allowed"
        )
    if any(kw.arg is None for kw in node.keywords):
        raise ActionParseError(
            "non_literal", f"{spec.name}() arguments must be literals; `**` unpacking is not allowed"
        )
    keywords = [(kw.arg, kw.value) for kw in node.keywords if kw.arg is not None]
    return bind_args(spec, node.args, keywords, literal=_literal)
