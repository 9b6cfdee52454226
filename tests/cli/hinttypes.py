"""The data of :mod:`tests.cli.hintwalk` and what it reads of types: a package's modules and nodes, and the
package classes an expression's value may be an instance of, as far as names and annotations tell."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

UNKNOWN_TYPES = {"Any", "object"}
LITERALS = (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
            ast.SetComp, ast.GeneratorExp)
Types = frozenset[str] | None
"""Package class keys an expression's value may be an instance of; None: unknown."""


@dataclass
class Module:
    name: str
    tree: ast.Module
    is_package: bool
    names: dict[str, str] = field(default_factory=dict)
    """Module-level name -> a node key (``mod:qual``), a module (``mod``), or ``mod::name`` (imported)."""


@dataclass
class Node:
    key: str
    body: list[ast.AST]
    module: str
    cls: str | None
    params: tuple[str, ...] = ()
    annotation: ast.expr | None = None
    """A function's return annotation, a module constant's annotation."""
    imports: dict[str, str] = field(default_factory=dict)
    """Names a function imports in its body (they shadow the module's)."""
    calls: set[str] = field(default_factory=set)
    hints: list[tuple[str, int]] = field(default_factory=list)
    """(text, line)."""


class TypeReader:
    """Types from annotations, for :class:`tests.cli.hintwalk.Graph` (which holds what these read)."""

    modules: dict[str, Module]
    nodes: dict[str, Node]
    classes: dict[str, ast.ClassDef]
    fields: dict[str, dict[str, list[ast.expr]]]

    def lookup(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset(),
               local: dict[str, str] | None = None) -> str | None:
        raise NotImplementedError

    def _bases(self, cls_key: str) -> list[str]:
        raise NotImplementedError

    def _resolve_static(self, module: str, expr: ast.expr, local: dict[str, str] | None = None) -> list[str]:
        raise NotImplementedError

    def _targets(self, node: Node, env: dict[str, Types], expr: ast.expr) -> list[str]:
        raise NotImplementedError

    def annotated(self, module: str, annotation: ast.expr | None) -> Types:
        """The package classes an annotation mentions (None: no annotation, or Any)."""
        if annotation is None:
            return None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        found: set[str] = set()
        for sub in ast.walk(annotation):
            if isinstance(sub, ast.Name) and sub.id in UNKNOWN_TYPES:
                return None
            if isinstance(sub, (ast.Name, ast.Attribute)):
                found.update(k for k in self._resolve_static(module, sub) if k in self.classes)
        return frozenset(found)

    def _field(self, cls_key: str, name: str) -> Types:
        for key in [cls_key, *self._bases(cls_key)]:
            if name in self.fields.get(key, {}):
                out: set[str] = set()
                for annotation in self.fields[key][name]:
                    types = self.annotated(key.split(":")[0], annotation)
                    if types is None:
                        return None
                    out |= types
                return frozenset(out)
        return None

    def type_of(self, node: Node, env: dict[str, Types], expr: ast.expr) -> Types:
        """The classes ``expr``'s value may be an instance of, as far as names and annotations tell."""
        if isinstance(expr, LITERALS):
            return frozenset()
        if isinstance(expr, ast.Name):
            if expr.id in env:
                return env[expr.id]
            key = self.lookup(node.module, expr.id, local=node.imports)
            if key is None:  # imported from outside the package: none of its classes
                known = expr.id in self.modules[node.module].names or expr.id in node.imports
                return frozenset() if known else None
            if key in self.modules or key in self.classes:
                return frozenset()  # a module's or a class's own attribute is resolved statically
            const = self.nodes[key]
            return self.annotated(const.module, const.annotation) if not const.params else None
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self" and node.cls:
                return self._field(f"{node.module}:{node.cls}", expr.attr)
            owners = self.type_of(node, env, expr.value)
            if not owners:
                return None
            found: set[str] = set()
            for owner in owners:
                types = self._field(owner, expr.attr)
                if types is None:
                    return None
                found |= types
            return frozenset(found)
        if isinstance(expr, ast.Subscript):
            return self.type_of(node, env, expr.value)
        if isinstance(expr, ast.Call):
            out: set[str] = set()
            for target in self._targets(node, env, expr.func):
                if target in self.classes:
                    out.add(target)
                elif target in self.nodes:
                    types = self.annotated(self.nodes[target].module, self.nodes[target].annotation)
                    if types is None:
                        return None
                    out |= types
            return frozenset(out) if out else None
        return None

    def _env(self, node: Node) -> dict[str, Types]:
        """A function's parameters and local names with their types (a name bound twice: both)."""
        env: dict[str, Types] = {}
        fn = node.body[0] if node.body and isinstance(node.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        if fn is None:
            return env
        args = fn.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            env[arg.arg] = self.annotated(node.module, arg.annotation)
        for sub in ast.walk(fn):
            bound: list[tuple[ast.expr, Types]] = []
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                bound.append((sub.targets[0], self.type_of(node, env, sub.value)))
            elif isinstance(sub, ast.AnnAssign):
                bound.append((sub.target, self.annotated(node.module, sub.annotation)))
            elif isinstance(sub, (ast.With, ast.AsyncWith)):
                bound += [(i.optional_vars, self.type_of(node, env, i.context_expr)) for i in sub.items
                          if i.optional_vars is not None]
            elif isinstance(sub, (ast.For, ast.comprehension)):
                bound.append((sub.target, self.type_of(node, env, sub.iter)))
            for target, types in bound:
                if isinstance(target, ast.Name):
                    known = env.get(target.id, frozenset()) if target.id in env else frozenset()
                    env[target.id] = None if types is None or known is None else known | types
        return env
