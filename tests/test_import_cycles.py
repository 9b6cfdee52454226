"""No module of vnuma imports itself back through others, whatever the import's place.

import-linter's ``acyclic_siblings`` contract (pyproject.toml) compares the children of each package;
a cycle through a package's own ``__init__`` (``vnuma.topology`` <-> ``vnuma.topology.hmat``) is no cycle
between siblings, so it is checked here on the same graph import-linter reads (grimp's: imports inside
functions and under ``TYPE_CHECKING`` count, as they do for a reader).
"""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    cycles = _cycles(grimp.build_graph("vnuma", cache_dir=None))
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_check_sees_a_cycle_through_a_package_init() -> None:
    graph = grimp.build_graph("vnuma", cache_dir=None)
    graph.add_import(importer="vnuma.topology.hmat", imported="vnuma.topology")
    assert ["vnuma.topology", "vnuma.topology.hmat"] in _cycles(graph)
