"""Binding call arguments to an action's signature, and checking them: types, the page's ids, the role.

Shared by the parser (`awm.actions.parser`) and the renderer (`awm.actions.render`), so both hold an
action's arguments to the same rules. Every refusal is an `ActionParseError(kind, message)` whose message
is written to be shown to the model as is.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from awm.actions.roles import ROLE_NEEDS
from awm.actions.table import ACTION_SETS, BID_PLACEHOLDER, ActionSpec, ArgSpec, ArgValue
from awm.errors import ActionParseError


def _arity_text(spec: ActionSpec) -> str:
    required = sum(a.required for a in spec.args)
    total = len(spec.args)
    if total == 0:
        return f"{spec.name}() takes no arguments"
    count = f"{required}" if required == total else f"{required} to {total}"
    noun = "argument" if total == 1 else "arguments"
    params = ", ".join(a.signature() for a in spec.args)
    return f"{spec.name}() takes {count} {noun} ({params})"


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _check_value(spec: ActionSpec, arg: ArgSpec, value: Any) -> ArgValue:
    """Type-check one bound value; returns the canonical value (ints given as ids become strings)."""
    where = f"argument '{arg.name}' of {spec.name}()"
    texts = value if isinstance(value, list | tuple) else [value]
    if any(isinstance(t, str) and _SURROGATE_RE.search(t) for t in texts):
        # lone surrogates cannot be stored as JSON (trajectories) nor typed into a page
        raise ActionParseError(
            "bad_argument", f"{where} must be valid Unicode text; got a lone surrogate in {value!r}"
        )
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if arg.type == "id":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            value = str(value)  # small models often drop the quotes around numeric bids
        if not isinstance(value, str) or not value or any(c.isspace() for c in value):
            raise ActionParseError(
                "bad_argument",
                f"{where} must be an element id string like '{BID_PLACEHOLDER}'; got {value!r}",
            )
        if spec.name in ACTION_SETS["mind2web"] and ("[" in value or "]" in value):
            raise ActionParseError("bad_argument", f"{where} must not contain brackets; got {value!r}")
        return value
    if arg.type == "str":
        if not isinstance(value, str):
            raise ActionParseError("bad_argument", f"{where} must be a quoted string; got {value!r}")
        return value
    if arg.type == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ActionParseError("bad_argument", f"{where} must be an integer; got {value!r}")
        return value
    if arg.type == "float":
        if not is_number or not math.isfinite(value):
            raise ActionParseError("bad_argument", f"{where} must be a finite number; got {value!r}")
        return value
    if arg.type == "params":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ActionParseError(
                "bad_argument", f"{where} must be a dict of parameter names to values; got {value!r}"
            )
        out: dict[str, str] = {}
        for key, item in value.items():
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise ActionParseError(
                    "bad_argument", f"{where}: the value of '{key}' must be a quoted string; got {item!r}"
                )
            out[key] = str(item)
        return out
    # str_or_list
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return value
    raise ActionParseError("bad_argument", f"{where} must be a string or a list of strings; got {value!r}")


def bind_args(
    spec: ActionSpec,
    positional: Sequence[Any],
    keywords: Sequence[tuple[str, Any]],
    literal: Callable[[Any, str], Any] | None = None,
) -> dict[str, ArgValue]:
    """Bind call arguments to the signature like Python would; returns all args in order, defaults filled.

    The parser passes AST nodes and `literal` to read them, so an unknown keyword is reported as such
    before its value is looked at.
    """
    names = [a.name for a in spec.args]
    given = len(positional) + len(keywords)
    if len(positional) > len(spec.args):
        raise ActionParseError("wrong_arity", f"{_arity_text(spec)}; got {given}")
    bound: dict[str, Any] = dict(zip(names, positional, strict=False))
    for key, value in keywords:
        if key not in names:
            params = ", ".join(a.signature() for a in spec.args)
            raise ActionParseError(
                "wrong_arity",
                f"{spec.name}() got an unexpected keyword argument '{key}'; its arguments are ({params})",
            )
        if key in bound:
            raise ActionParseError("wrong_arity", f"{spec.name}() got multiple values for argument '{key}'")
        bound[key] = value
    missing = [a.name for a in spec.args if a.required and a.name not in bound]
    if missing:
        raise ActionParseError(
            "wrong_arity", f"{_arity_text(spec)}; got {given} (missing {', '.join(missing)})"
        )
    out: dict[str, ArgValue] = {}
    for arg in spec.args:
        value = bound.get(arg.name, arg.default)
        if literal is not None and arg.name in bound:
            value = literal(value, f"argument '{arg.name}' of {spec.name}()")
        out[arg.name] = _check_value(spec, arg, value)
    return out


def check_on_page(spec: ActionSpec, args: dict[str, ArgValue], page_ids: Collection[str] | None) -> None:
    """Refuse an element id that is not on the page, naming the closest ids that are."""
    key = spec.id_arg
    if page_ids is None or key is None:
        return
    target = str(args[key])
    valid = [str(i) for i in page_ids]
    if target in set(valid):
        return
    if not valid:
        raise ActionParseError(
            "id_not_on_page", f"element '{target}' is not on the current page, which has no element ids"
        )
    close = difflib.get_close_matches(target, valid, n=3, cutoff=0.5)
    shown = list(dict.fromkeys(close + valid))[:5]
    more = ", ..." if len(valid) > len(shown) else ""
    listed = ", ".join(f"'{i}'" for i in shown)
    raise ActionParseError(
        "id_not_on_page", f"element '{target}' is not on the current page; valid ids include {listed}{more}"
    )


def check_role(
    spec: ActionSpec,
    args: dict[str, ArgValue],
    ids_for: Mapping[str, Collection[str]] | None,
    describe: Mapping[str, str] | None,
    action_set: str,
) -> None:
    """Refuse an action on an element of the wrong kind, saying what it is and what to do instead."""
    key = spec.id_arg
    if ids_for is None or key is None or spec.name not in ids_for:
        return
    target = str(args[key])
    if target in {str(i) for i in ids_for[spec.name]}:
        return
    what = (describe or {}).get(target, "")
    shown = f"[{target}] is {_article(what)}" if what else f"[{target}] is not one"
    need = ROLE_NEEDS.get(spec.name, f"an element {spec.name} can act on")
    m2w = action_set == "mind2web"
    head = f"{spec.name} needs {need}" if m2w else f"{spec.name}() needs {need}"
    select = "SELECT" if m2w else "select_option"
    if spec.name != select and target in {str(i) for i in ids_for.get(select, ())}:
        instead = f"SELECT [{target}] [option]" if m2w else f"select_option({target!r}, 'option')"
    elif m2w:
        instead = f"CLICK [{target}]"
    elif spec.name != "select_text" and target in {str(i) for i in ids_for.get("select_text", ())}:
        instead = f"select_text({target!r})"
    else:
        instead = f"click({target!r})"
    fitting = [str(i) for i in ids_for[spec.name]][:5]
    here = f"; ids that fit: {', '.join(repr(i) for i in fitting)}" if fitting else ""
    raise ActionParseError("bad_argument", f"{head}; {shown}: use {instead}{here}")


def _article(text: str) -> str:
    return ("an " if text[:1].lower() in "aeiou" else "a ") + text
