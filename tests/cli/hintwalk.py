"""Every hint the CLI can print, and the commands that can print it: a static walk of the package.

A *hint* is the text of a ``hint=`` (or ``*_hint=``) argument, of a positional argument in a parameter of
that name (``Rejection(host, check, reason, HINT)``), of a default value of such a parameter, of an
assignment to such a name or attribute (``hint = ...``, ``err.hint = ...``), or of a module constant whose
name ends in ``HINT``.
Its text is read from the literal as written: a string, an f-string (a placeholder reads ``{}``), both
sides of ``a if c else b`` and ``a or b``, ``"a" + "b"``, ``"a".format(...)`` and a module constant the
hint names.

The commands that can print it are those whose callback reaches the code holding it in the call graph.
A function calls what its body names — a function, a class (its ``__init__``, ``__post_init__``,
``__call__`` and class body), a module constant — resolved through the package's imports and re-exports.
A method call ``x.m()`` is resolved by ``x``'s type where the annotations tell it (a parameter's or
field's annotation, a constructor, a function's return annotation: every package class an annotation
mentions): that class's ``m`` or a base's, and any subclass's; a Protocol's or a delegating
(``__getattr__``) class's ``m`` may be any package method of that name, as may ``m`` on an object of
unknown type. The graph so errs towards more commands, never fewer.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.cli.hinttypes import Module, Node, TypeReader, Types

PACKAGE = Path(__file__).resolve().parents[2] / "vnuma"
MAX_TEXTS = 64


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


class Graph(TypeReader):
    """The package's call graph and hints."""

    def __init__(self) -> None:
        self.modules: dict[str, Module] = {}
        for path in sorted(PACKAGE.rglob("*.py")):
            name, is_package = _module_name(path)
            self.modules[name] = Module(name, ast.parse(path.read_text(), str(path)), is_package)
        self.nodes: dict[str, Node] = {}
        self.methods: dict[str, set[str]] = {}
        self.functions: dict[str, list[str]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.fields: dict[str, dict[str, list[ast.expr]]] = {}
        for mod in self.modules.values():
            self._define(mod)
        for mod in self.modules.values():
            self._import(mod)
        self.subclasses: dict[str, set[str]] = {}
        for key in self.classes:
            for base in self._bases(key):
                self.subclasses.setdefault(base, set()).add(key)
        for node in self.nodes.values():
            self._link(node)

    # -- definitions -------------------------------------------------------------------------------------

    def _define(self, mod: Module) -> None:
        top = Node(f"{mod.name}:", [], mod.name, None)
        self.nodes[top.key] = top
        for stmt in mod.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(mod, stmt, None)
            elif isinstance(stmt, ast.ClassDef):
                self._class(mod, stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
                for target in targets:
                    if isinstance(target, ast.Name):
                        key = f"{mod.name}:{target.id}"
                        self.nodes[key] = Node(key, [stmt.value], mod.name, None, annotation=annotation)
                        mod.names[target.id] = key
            else:
                top.body.append(stmt)

    def _function(self, mod: Module, fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        qual = f"{cls}.{fn.name}" if cls else fn.name
        key = f"{mod.name}:{qual}"
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        self.nodes[key] = Node(key, [fn], mod.name, cls, params, fn.returns)
        self.functions.setdefault(mod.name, []).append(key)
        if cls is None:
            mod.names[fn.name] = key
        else:
            self.methods.setdefault(fn.name, set()).add(key)

    def _class(self, mod: Module, cls: ast.ClassDef) -> None:
        key = f"{mod.name}:{cls.name}"
        body: list[ast.AST] = [*cls.bases, *cls.decorator_list]
        fields: dict[str, list[ast.expr]] = {}
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(mod, stmt, cls.name)
                for sub in ast.walk(stmt):  # self.x: T = ... in a method
                    if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Attribute):
                        fields.setdefault(sub.target.attr, []).append(sub.annotation)
            else:
                body.append(stmt)
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    fields.setdefault(stmt.target.id, []).append(stmt.annotation)
        init = self.nodes.get(f"{key}.__init__")
        params = init.params[1:] if init else tuple(fields)
        self.nodes[key] = Node(key, body, mod.name, cls.name, params)
        self.classes[key] = cls
        self.fields[key] = fields
        mod.names[cls.name] = key

    # -- imports -----------------------------------------------------------------------------------------

    def _import(self, mod: Module) -> None:
        for stmt in ast.walk(mod.tree):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name, target in self._imported(mod, stmt):
                    mod.names.setdefault(name, target)
        for key in self.functions.get(mod.name, ()):
            for stmt in ast.walk(self.nodes[key].body[0]):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    self.nodes[key].imports.update(self._imported(mod, stmt))

    def _imported(self, mod: Module, stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
        if isinstance(stmt, ast.Import):
            return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                    for a in stmt.names]
        base = self._absolute(mod, stmt)
        return [(a.asname or a.name, f"{base}.{a.name}" if f"{base}.{a.name}" in self.modules else
                 f"{base}::{a.name}") for a in stmt.names]

    def _absolute(self, mod: Module, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        parts = mod.name.split(".")[: None if mod.is_package else -1]
        parts = parts[: len(parts) - (stmt.level - 1)]
        return ".".join([*parts, *([stmt.module] if stmt.module else [])])

    def lookup(
        self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset(),
        local: dict[str, str] | None = None,
    ) -> str | None:
        """What ``name`` means in ``module``'s namespace (or first in ``local`` imports): a node key, a module,
        or None (outside the package)."""
        mod = self.modules.get(module)
        if mod is None or (module, name) in seen:
            return None
        target = (local or {}).get(name) or mod.names.get(name)
        if target is None:
            return f"{module}.{name}" if f"{module}.{name}" in self.modules else None
        if "::" in target:
            home, attr = target.split("::")
            return self.lookup(home, attr, seen | {(module, name)})
        return target if target in self.modules or target in self.nodes else None

    def _bases(self, cls_key: str) -> list[str]:
        module = cls_key.split(":")[0]
        found = [self.lookup(module, b.id) for b in self.classes[cls_key].bases if isinstance(b, ast.Name)]
        return [f for f in found if f in self.classes]

    def _open(self, cls_key: str) -> bool:
        """A Protocol, or a class delegating unknown attributes: any method of a name may be meant."""
        cls = self.classes[cls_key]
        protocol = any(isinstance(b, ast.Name) and b.id == "Protocol" for b in cls.bases)
        return protocol or f"{cls_key}.__getattr__" in self.nodes or any(self._open(b) for b in self._bases(cls_key))

    # -- edges and hints ---------------------------------------------------------------------------------

    def _resolve_static(self, module: str, expr: ast.expr, local: dict[str, str] | None = None) -> list[str]:
        """What a dotted name means through imports alone (no types)."""
        if isinstance(expr, ast.Name):
            found = self.lookup(module, expr.id, local=local)
            return [found] if found else []
        if isinstance(expr, ast.Attribute):
            for base in self._resolve_static(module, expr.value, local):
                if base in self.modules:
                    found = self.lookup(base, expr.attr)
                    return [found] if found else []
                if base in self.classes:
                    return self._method(base, expr.attr)
        return []

    def _targets(self, node: Node, env: dict[str, Types], expr: ast.expr) -> list[str]:
        """The node keys a name or attribute may refer to (``None`` for an unknown-type method: by name)."""
        if isinstance(expr, ast.Name):
            return [] if expr.id in env else self._resolve_static(node.module, expr, node.imports)
        if not isinstance(expr, ast.Attribute):
            return []
        cls_key = f"{node.module}:{node.cls}" if node.cls else None
        if isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls") and cls_key in self.classes:
            return self._method(cls_key, expr.attr, subclasses=True)  # type: ignore[arg-type]
        if _is_super(expr.value) and cls_key in self.classes:
            return [hit for base in self._bases(cls_key) for hit in self._method(base, expr.attr)]  # type: ignore
        local = isinstance(expr.value, ast.Name) and expr.value.id in env
        static = [] if local else self._resolve_static(node.module, expr, node.imports)
        if static:
            return static
        owners = self.type_of(node, env, expr.value)
        if owners is None:
            return sorted(self.methods.get(expr.attr, ())) if not _is_dunder(expr.attr) else []
        return [hit for owner in owners for hit in self._method(owner, expr.attr, subclasses=True)]

    def _method(self, cls_key: str, name: str, *, subclasses: bool = False) -> list[str]:
        """``name`` on the class or its first base having it (and, with ``subclasses``, their overrides;
        on an open class, any package method of that name)."""
        found: list[str] = []
        if f"{cls_key}.{name}" in self.nodes:
            found.append(f"{cls_key}.{name}")
        else:
            for base in self._bases(cls_key):
                found = self._method(base, name)
                if found:
                    break
        if subclasses:
            todo = list(self.subclasses.get(cls_key, ()))
            while todo:
                sub = todo.pop()
                found += [f"{sub}.{name}"] if f"{sub}.{name}" in self.nodes else []
                todo += self.subclasses.get(sub, ())
            if self._open(cls_key) and not _is_dunder(name):
                found += sorted(self.methods.get(name, ()))
        return found

    def _link(self, node: Node) -> None:
        env = self._env(node)
        for root in node.body:
            for expr in ast.walk(root):
                if isinstance(expr, (ast.Name, ast.Attribute)) and isinstance(expr.ctx, ast.Load):
                    for target in self._targets(node, env, expr):
                        if target in self.nodes:
                            node.calls.add(target)
                        if target in self.classes:
                            for dunder in ("__init__", "__post_init__", "__call__"):
                                node.calls.update(self._method(target, dunder))
                self._hints(node, env, expr)

    def _hints(self, node: Node, env: dict[str, Types], expr: ast.AST) -> None:
        if isinstance(expr, ast.Call):
            for kw in expr.keywords:
                if kw.arg and _is_hint(kw.arg):
                    self._take(node, kw.value)
            for target in self._targets(node, env, expr.func):
                names = self.nodes[target].params if target in self.nodes else ()
                if target in self.nodes and self.nodes[target].cls and target not in self.classes:
                    names = names[1:]  # a method: self
                for name, arg in zip(names, expr.args, strict=False):
                    if _is_hint(name):
                        self._take(node, arg)
        elif isinstance(expr, ast.Assign):  # err.hint = ..., hint = ...
            if any(_is_hint(t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else "")
                   for t in expr.targets):
                self._take(node, expr.value)
        elif isinstance(expr, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = expr.args
            positional = [*args.posonlyargs, *args.args]
            defaults = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
            defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in defaults:
                if _is_hint(arg.arg):
                    self._take(node, default)
        if node.key.rsplit(":", 1)[1].upper().endswith("HINT") and node.body and expr is node.body[0]:
            self._take(node, expr)  # type: ignore[arg-type]

    def _take(self, node: Node, value: ast.expr) -> None:
        for text in self.texts(node, value):
            if text.strip():
                node.hints.append((text, getattr(value, "lineno", 0)))

    def texts(self, node: Node, value: ast.expr) -> list[str]:
        """The texts a hint expression can have (placeholders read ``{}``)."""
        if isinstance(value, ast.Constant):
            return [value.value] if isinstance(value.value, str) else []
        if isinstance(value, ast.JoinedStr):
            return ["".join(p.value if isinstance(p, ast.Constant) else "{}" for p in value.values)]
        if isinstance(value, ast.IfExp):
            return self.texts(node, value.body) + self.texts(node, value.orelse)
        if isinstance(value, ast.BoolOp):
            return [t for v in value.values for t in self.texts(node, v)]
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            left = self.texts(node, value.left) or ["{}"]
            right = self.texts(node, value.right) or ["{}"]
            return [a + b for a, b in itertools.product(left, right)][:MAX_TEXTS]
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format":
            return self.texts(node, value.func.value)
        if isinstance(value, ast.Name):
            const = self.nodes.get(self.lookup(node.module, value.id) or "")
            if const and const.body and isinstance(const.body[0], ast.expr):
                return self.texts(const, const.body[0])
        return []

    # -- queries -----------------------------------------------------------------------------------------

    def reach(self, start: str) -> set[str]:
        """Every node ``start`` can reach (itself included)."""
        seen = {start}
        todo = [start]
        while todo:
            for nxt in self.nodes[todo.pop()].calls:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def hints(self) -> Iterator[tuple[Node, str, int]]:
        """Every hint text, with the node that holds it."""
        for node in self.nodes.values():
            for text, line in node.hints:
                yield node, text, line


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_super(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"


def _is_hint(name: str) -> bool:
    return name == "hint" or name.endswith("_hint")


def key_of(function: object) -> str:
    """The graph key of a function object (``module:qualname``)."""
    return f"{function.__module__}:{function.__qualname__}"  # type: ignore[attr-defined]


def reached_by(graph: Graph, starts: Iterable[tuple[tuple[str, ...], str]]) -> dict[str, set[tuple[str, ...]]]:
    """Node key -> the command paths whose callback reaches it."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for path, start in starts:
        for key in graph.reach(start):
            out.setdefault(key, set()).add(path)
    return out
