"""The house rules of docs/ARCHITECTURE.md that a test can check (issue 16, item 2): no module
outside the tests over 400 lines, no import circle among first-party modules (imports at any
level of a file count, so a function-level import that dodges a circle is still one), and no
Prefect in the domain core ``swarm_evo/``."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
SIZED = ("swarm_evo", "flows", "tasks", "blocks", "deployments", "benchmarks")
FIRST_PARTY = ("swarm_evo", "flows", "tasks", "blocks")


def _python_files(top: str) -> list[Path]:
    return sorted(p for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in FIRST_PARTY for p in _python_files(top)}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import statement of the file, at any depth, except under ``if TYPE_CHECKING:``
    (never executed, so no circle at run time)."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from walk(child)
    yield from walk(tree)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """First-party modules ``name`` imports: ``import a.b`` → a.b; ``from a import b`` → a.b
    when it is a module, else a; relative imports resolved against the module's package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_no_module_outside_the_tests_is_over_400_lines():
    over = {str(p.relative_to(ROOT)): n for top in SIZED for p in _python_files(top)
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: " + ", ".join(f"{k} ({v})" for k, v in sorted(over.items()))


def test_no_import_circle_among_first_party_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_the_domain_core_never_imports_prefect():
    offenders = []
    for path in _python_files("swarm_evo"):
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "prefect" or n.startswith("prefect.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"swarm_evo/ imports prefect: {offenders}"
