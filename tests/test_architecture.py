"""The house rules of `docs/architecture.md`, checked on the source: no import cycle between modules of
`awm`, no arrow from a consumer (`awm.webarena`, `awm.mind2web`) up into the driver or its parts, none
from the arena's sites (`awm.sites`, below the consumer that runs their tasks) up into the consumer or
the driver, and nothing below the web application (`awm.app`) importing it.

Every import counts: top-level, inside functions, and under `TYPE_CHECKING` (a cycle that only a type
checker sees is still two modules that cannot be understood apart).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "awm"

# consumer -> packages it must never import (the driver owns runs, recording, judging and memory writes)
FORBIDDEN = {
    "awm.webarena": ("awm.pipeline", "awm.traces", "awm.evaluation", "awm.induction", "awm.mind2web"),
    "awm.mind2web": ("awm.pipeline", "awm.traces", "awm.evaluation", "awm.induction", "awm.webarena"),
    "awm.memory": ("awm.webarena", "awm.mind2web", "awm.pipeline", "awm.llm", "awm.induction"),
    # The sites are what the consumer opens (each instance a BrowserGym task): what drives a browser over
    # them (`awm sites check`'s replay) lives above, in `awm.pipeline.sites_check`.
    "awm.sites": ("awm.webarena", "awm.mind2web", "awm.pipeline", "awm.traces", "awm.evaluation", "awm.induction"),
}

# The web application sits on top of the driver, the traces and memory; only these sit above it. `awm.cli`
# is the `awm` command, which mounts every area's commands (`awm serve`, and `awm traces export`, whose
# --html renders the app's pages). No other module assembles commands across areas: `demo` and `doctor`
# are commands that cli mounts, and each area's own `commands` module stays inside its area.
APP = "awm.app"
ABOVE_THE_APP = ("awm.app", "awm.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The awm module an imported name lives in (`awm.a.b.func` -> `awm.a.b`)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                prefix = f"{base}.{node.module}" if node.module else base
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{a.name}" for a in node.names] or [prefix]
        for name in names:
            if name == "awm" or name.startswith("awm."):
                target = _resolve(name, known)
                if target is not None and target != module:
                    found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles between awm modules: " + "; ".join(" <-> ".join(c) for c in found)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def arrows_up(graph: dict[str, set[str]], package: str) -> list[str]:
    """`module -> target` for every import by a module of `package` of what `FORBIDDEN` keeps above it."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if _within(module, package)
        for target in sorted(targets)
        if any(_within(target, above) for above in FORBIDDEN[package])
    ]


@pytest.mark.parametrize("consumer", sorted(FORBIDDEN))
def test_no_arrow_runs_up_from_a_consumer(consumer: str) -> None:
    bad = arrows_up(import_graph(), consumer)
    assert not bad, f"{consumer} must not import these: " + ", ".join(bad)


def test_the_sites_rule_sees_the_old_arrow_up() -> None:
    """The rule fails on what the template check once did from inside the sites package
    (`awm/sites/validate.py`'s function-local imports of the harness, the replay policy and the session)."""
    graph = import_graph()
    assert "awm.sites.validate" not in graph and "awm.pipeline.sites_check" in graph
    old = {
        **graph,
        "awm.sites.validate": {"awm.sites.checks", "awm.webarena.harness", "awm.webarena.policies", "awm.webarena.env"},
    }
    assert arrows_up(old, "awm.sites") == [
        "awm.sites.validate -> awm.webarena.env",
        "awm.sites.validate -> awm.webarena.harness",
        "awm.sites.validate -> awm.webarena.policies",
    ]
    assert "awm.webarena.harness" in graph["awm.pipeline.sites_check"]
    assert "awm.pipeline.sites_check_cli" in graph["awm.cli"]


def arrows_into_the_app(graph: dict[str, set[str]]) -> list[str]:
    """`module -> target` for every import of `awm.app` by a module that is not above the app."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if not any(_within(module, top) for top in ABOVE_THE_APP)
        for target in sorted(targets)
        if _within(target, APP)
    ]


def test_nothing_below_the_app_imports_it() -> None:
    bad = arrows_into_the_app(import_graph())
    assert not bad, "only awm.cli may import awm.app from outside it: " + ", ".join(bad)


def test_the_app_rule_sees_the_old_arrow_up() -> None:
    """The rule fails on what the traces CLI once did (a function-local `from awm.app.export import ...`)."""
    graph = import_graph()
    assert "awm.app.export" in graph and "awm.traces.commands" in graph and "awm.cli" in graph
    old = {**graph, "awm.traces.commands": graph["awm.traces.commands"] | {"awm.app.export"}}
    assert arrows_into_the_app(old) == ["awm.traces.commands -> awm.app.export"]
    assert "awm.app.serve_cli" in graph["awm.cli"] and "awm.app.export_cli" in graph["awm.cli"]


def test_the_checker_sees_a_cycle_and_a_relative_import(tmp_path: Path) -> None:
    # The checker itself must be able to fail: a two-module cycle is found, a chain is not.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()
    assert "awm.webarena.outcomes" in graph["awm.webarena.env"]  # `from awm.webarena.outcomes import ...`
    assert "awm.pipeline.parallel" in graph["awm.pipeline.driver"]  # a function-local import counts too
