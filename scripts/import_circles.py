"""Import circles in python/local_copilot, read from the source's ast: every import counts,
at module level and inside functions; `--runtime` leaves out those under `if TYPE_CHECKING:`
(never run). Importing a.b.c counts as importing a.b too (its __init__.py runs first).
Prints the circles (strongly connected components) between modules, then between the
top-level packages and modules, with the edges inside each.

    python scripts/import_circles.py --runtime
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python"


def modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in (ROOT / "local_copilot").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(node: ast.AST, under_type_checking: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import below `node`, and whether it sits under `if TYPE_CHECKING:` (never run)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append((child, under_type_checking))
        elif isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)):  # imports are statements
            typing_only = under_type_checking or (isinstance(child, ast.If)
                                                  and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.If) and typing_only and not under_type_checking:
                # the `if` branch is for type checking only; its `else` runs
                for each in child.body:
                    found += _imports_of(each, True)
                for each in child.orelse:
                    found += _imports_of(each, False)
            else:
                found += _imports(child, typing_only)
    return found


def _imports_of(stmt: ast.stmt, under_type_checking: bool) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(stmt, under_type_checking)]
    return _imports(stmt, under_type_checking)


def edges(mods: dict[str, tuple[Path, bool]], runtime: bool) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_package) in mods.items():
        tree = ast.parse(path.read_text())
        for node, typing_only in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _absolute(mod, is_package, node.level, node.module) if node.level else node.module or ""
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            if runtime and typing_only:
                continue
            for target in targets:
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # a.b.c runs a.b's __init__ first
                    name = ".".join(parts[:i])
                    if name in mods and name != mod and not mod.startswith(name + "."):
                        out[mod].add(name)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def main() -> None:
    graph = edges(modules(), "--runtime" in sys.argv)
    found = circles(graph)
    print("module-level circles:", len(found))
    for component in found:
        print("  ", component)
        for a in component:
            for b in sorted(graph[a] & set(component)):
                print("      ", a, "->", b)
    packages: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        packages.setdefault(top(mod), set()).update(top(t) for t in targets if top(t) != top(mod))
    for targets in list(packages.values()):
        for t in targets:
            packages.setdefault(t, set())
    found = circles(packages)
    print("package-level circles:", len(found))
    for component in found:
        print("  ", component)
        for mod, targets in sorted(graph.items()):
            for t in sorted(targets):
                if top(mod) in component and top(t) in component and top(t) != top(mod):
                    print("      ", mod, "->", t)


if __name__ == "__main__":
    main()
