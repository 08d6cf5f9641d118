"""The package never evaluates text as code and never unpickles without a whitelist."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "awm"
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_ATTRIBUTES = {("pickle", "load"), ("pickle", "loads"), ("marshal", "loads"), ("dill", "load")}


def _violations(path: Path) -> list[str]:
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append(f"{path.name}:{node.lineno} {func.id}()")
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and (func.value.id, func.attr) in FORBIDDEN_ATTRIBUTES
            ):
                found.append(f"{path.name}:{node.lineno} {func.value.id}.{func.attr}()")
        if isinstance(node, ast.keyword) and node.arg == "allow_dangerous_deserialization":
            found.append(f"{path.name}:{node.lineno} allow_dangerous_deserialization")
    return found


def test_no_eval_exec_or_unrestricted_unpickling_anywhere_in_the_package():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 40
    violations = [v for path in files for v in _violations(path)]
    assert violations == []


def test_the_checker_would_catch_them(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nx = eval('1')\npickle.loads(b'')\nf(allow_dangerous_deserialization=True)\n")
    assert len(_violations(bad)) == 3
