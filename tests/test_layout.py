"""The package's import graph has no circles, and a request's way through it runs downhill.

Each module can be read after what it imports, and each package sits in a
layer (``LAYERS``, top to bottom) that imports only from the layers below it:
the inbound HTTP boundary above the verbs it calls, the verbs above the
framework, the outbound client and the leaf modules at the bottom.

Imports inside functions count too: a lazy import (to keep a cold start short)
that closes a circle or climbs a layer only hides it, and the modules still
cannot be understood, or moved, one without the other. Imports under
``TYPE_CHECKING`` are for annotations and never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "extender"

# Top to bottom; a module belongs to the first entry that is its name or a package above it. Packages in one layer
# do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("extender.__main__", "extender.cli"),
    ("extender.startup",),
    ("extender.logs",),
    ("extender.http",),
    ("extender.decision_log",),
    ("extender.verbs",),
    ("extender.policy",),
    ("extender.plugins", "extender.nodesource", "extender.proxy"),
    ("extender.kube",),
    ("extender.wire",),
    ("extender.framework",),
    ("extender.outbound",),
    ("extender.settings", "extender.urls", "extender.read_deadline"),
    ("extender.background", "extender.duration", "extender.errors", "extender.protocol", "extender"),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, modules: set[str]) -> set[str]:
    """The package's modules this one imports, anywhere but under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    nodes: list[ast.AST] = [tree]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            nodes += node.orelse
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        nodes += ast.iter_child_nodes(node)
    return found & modules


def _import_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(ast.parse(path.read_text()), modules) for name, path in paths.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm), and modules importing
    themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or module in graph[module]:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circles() -> None:
    graph = _import_graph()
    assert graph.get("extender.http.handler"), "the graph was not read"
    assert _circles(graph) == []


def _place(module: str) -> tuple[int, str]:
    """(layer, entry) of a module: the longest entry naming it or a package above it."""
    places = [
        (len(entry), index, entry)
        for index, layer in enumerate(LAYERS)
        for entry in layer
        if module == entry or module.startswith(entry + ".")
    ]
    assert places, f"{module} is in no layer of LAYERS"
    _, index, entry = max(places)
    return index, entry


def _uphill(graph: dict[str, set[str]]) -> list[str]:
    """Every import that does not go down a layer (within one entry of LAYERS, anything goes)."""
    found = []
    for module in sorted(graph):
        layer, entry = _place(module)
        for imported in sorted(graph[module]):
            imported_layer, imported_entry = _place(imported)
            if imported_entry != entry and imported_layer <= layer:
                found.append(f"{module} ({entry}) imports {imported} ({imported_entry})")
    return found


def test_imports_run_downhill() -> None:
    assert _uphill(_import_graph()) == []


def test_the_layer_check_finds_imports_that_climb_or_cross() -> None:
    graph = {
        "extender.http.handler": {"extender.verbs.filtering", "extender.http.routing"},
        "extender.http.routing": set(),
        "extender.verbs.filtering": {"extender.http.routing", "extender.errors"},
        "extender.errors": set(),
        "extender.plugins.nodeload": {"extender.nodesource.base"},
        "extender.nodesource.base": set(),
    }
    assert _uphill(graph) == [
        "extender.plugins.nodeload (extender.plugins) imports extender.nodesource.base (extender.nodesource)",
        "extender.verbs.filtering (extender.verbs) imports extender.http.routing (extender.http)",
    ]


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(_circles(graph)) == [["a", "b", "c"], ["e"]]


def test_lazy_imports_count_and_type_checking_ones_do_not() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from extender.a import x\n"
        "if TYPE_CHECKING:\n    from extender.b import y\n"
        "def f():\n    from extender.c import z\n"
        "try:\n    import extender.d\nexcept ImportError:\n    pass\n"
    )
    modules = {"extender.a", "extender.b", "extender.c", "extender.d"}
    assert _imports(tree, modules) == {"extender.a", "extender.c", "extender.d"}
