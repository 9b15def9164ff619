"""The house rules of docs/ARCHITECTURE.md that a test can check (issue 16, item 2; issue 33): no
module outside the tests over 400 lines, no import circle among the modules of swarm_evo/, flows/,
tasks/ and blocks/, nor among their packages (imports at any level of a file count, so a
function-level import that dodges a circle is still one; imports under ``if TYPE_CHECKING:``
never run and do not count, but may close no package circle beyond :data:`TYPE_ONLY_UPWARD`), no
Prefect in the domain core ``swarm_evo/``, and the core's layers: ``swarm_evo/__init__.py``
lists its units (packages and modules) lowest first, each unit's docstring says on its
``May import:`` line which earlier units it may import, and its modules import no others. One
home for each list: the operations, the backends (issue 43) and the grader kinds (issue 55)."""

from __future__ import annotations

import ast
import functools
import re
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


@functools.lru_cache(maxsize=None)
def _tree(path: Path, mtime_ns: int) -> ast.Module:
    """``path`` parsed once per version (the tests of this file read the same files)."""
    return ast.parse(path.read_text(), str(path))


def _parse(path: Path) -> ast.Module:
    return _tree(path, path.stat().st_mtime_ns)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, type_only: bool = False):
    """Every import statement of the file, at any depth (a function-level import counts), except
    under ``if TYPE_CHECKING:`` (never executed, so no circle at run time) unless ``type_only``."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test) and not type_only:
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from walk(child)
    yield from walk(tree)


def _imports(name: str, path: Path, modules: dict[str, Path], type_only: bool = False) -> set[str]:
    """First-party modules ``name`` imports: ``import a.b`` → a.b; ``from a import b`` → a.b
    when it is a module, else a; relative imports resolved against the module's package;
    ``type_only``: the imports under ``if TYPE_CHECKING:`` too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(_parse(path), type_only):
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph``: its strongly connected components of more than one
    module, each sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def _unit(module: str) -> str:
    """The package a module belongs to for the package graph: ``swarm_evo.<unit>``, or the top
    folder (``flows``, ``tasks``, ``blocks``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "swarm_evo" and len(parts) > 1 else parts[0]


@functools.lru_cache(maxsize=None)
def _module_graph(type_only: bool = False) -> dict[str, set[str]]:
    """``{module: first-party modules it imports}`` of swarm_evo/, flows/, tasks/ and blocks/."""
    modules = _modules()
    return {name: _imports(name, path, modules, type_only) for name, path in modules.items()}


def _unit_graph(type_only: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, targets in _module_graph(type_only).items():
        if name == "swarm_evo":  # the core's own __init__ imports nothing; it only lists the units
            continue
        graph.setdefault(_unit(name), set()).update(
            _unit(t) for t in targets if _unit(t) not in (_unit(name), "swarm_evo"))
    return graph


def test_no_import_circle_among_first_party_modules():
    """Modules of swarm_evo/, flows/, tasks/ and blocks/; every import at any level of a file
    counts, a function-level one too; imports under ``if TYPE_CHECKING:`` do not (they never
    run). Lists every circle at once."""
    circles = _circles(_module_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_no_import_circle_among_packages():
    """The same graph, each module counted as its package (``swarm_evo.<unit>``, ``flows``,
    ``tasks``, ``blocks``): a package never imports one that imports it back, by any module."""
    circles = _circles(_unit_graph())
    assert not circles, "package circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


TYPE_ONLY_UPWARD: set[tuple[str, str]] = set()
"""Type-only imports (under ``if TYPE_CHECKING:``) allowed to point up a layer: none (the sandbox's
builders annotate :class:`swarm_evo.sandbox.base.RunSettings`, not the config above them)."""


def test_type_only_imports_close_no_other_package_circle():
    graph = _unit_graph(type_only=True)
    for source, target in TYPE_ONLY_UPWARD:
        graph.get(source, set()).discard(target)
    circles = _circles(graph)
    assert not circles, ("a type-only import closes a package circle (import the type from a lower "
                         "package, or take what it needs as data):\n" + "\n".join(" <-> ".join(c) for c in circles))


def test_a_function_level_circle_would_be_caught(tmp_path):
    """A circle through an import inside a function is one; through ``if TYPE_CHECKING:`` not."""
    def graph(files: dict[str, str], type_only: bool = False) -> dict[str, set[str]]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a new folder: no parse cached for it
        folder.mkdir()
        modules = {name: folder / f"{name}.py" for name in files}
        for name, text in files.items():
            modules[name].write_text(text)
        return {name: _imports(name, path, modules, type_only) for name, path in modules.items()}

    type_only = {"c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n", "d": "import c\n"}
    assert _circles(graph({"a": "def f():\n    import b\n", "b": "import a\n", **type_only})) == [["a", "b"]]
    assert _circles(graph({"a": "import d\n", **type_only})) == []
    assert _circles(graph({"a": "import d\n", **type_only}, type_only=True)) == [["a", "c", "d"]]


def test_the_domain_core_never_imports_prefect():
    offenders = []
    for path in _python_files("swarm_evo"):
        for node in _import_nodes(_parse(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "prefect" or n.startswith("prefect.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"swarm_evo/ imports prefect: {offenders}"


# ----------------------------------------------------------------------------- the core's layers
CORE = ROOT / "swarm_evo"
DATA_PACKAGES = {"problems"}  # folders of data read by path (swarm_evo/problems/__init__.py)
_UNIT_LINE = re.compile(r"^- (\w+)(?:/|\.py):", re.M)
_MAY_IMPORT = re.compile(r"^May import: (.+?)(?:\n\n|\Z)", re.M | re.S)


def _docstring(path: Path) -> str:
    return ast.get_docstring(_parse(path)) or ""


def _layers() -> list[str]:
    """The core's units, lowest layer first, as ``swarm_evo/__init__.py`` lists them."""
    return _UNIT_LINE.findall(_docstring(CORE / "__init__.py"))


def _unit_file(unit: str) -> Path:
    return CORE / unit / "__init__.py" if (CORE / unit).is_dir() else CORE / f"{unit}.py"


def _may_import(unit: str) -> set[str]:
    """The units named on the ``May import:`` line of ``unit``'s docstring (a line may wrap;
    "nothing else of swarm_evo" is the empty set; words in parentheses are comments)."""
    found = _MAY_IMPORT.search(_docstring(_unit_file(unit)))
    assert found, f"{_unit_file(unit).relative_to(ROOT)}: its docstring has no 'May import:' line"
    text = re.sub(r"\(.*?\)", "", found.group(1)).replace("\n", " ").strip().rstrip(".")
    if text.strip().startswith("nothing else"):
        return set()
    return {name.strip() for name in text.split(",") if name.strip()}


def _unit_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "swarm_evo" and len(parts) > 1 else None


def test_every_unit_of_the_core_is_listed_in_its_layer_order():
    units = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} - DATA_PACKAGES
    modules = {p.stem for p in CORE.glob("*.py") if p.name != "__init__.py"}
    listed = _layers()
    assert len(listed) == len(set(listed)), f"a unit listed twice: {listed}"
    assert set(listed) == units | modules, (
        f"swarm_evo/__init__.py lists {sorted(set(listed))}, the folder holds {sorted(units | modules)}")


def test_each_unit_may_import_only_units_below_it():
    layers = _layers()
    for i, unit in enumerate(layers):
        allowed = _may_import(unit)
        unknown = allowed - set(layers)
        assert not unknown, f"{unit}: 'May import:' names {sorted(unknown)}, not units of swarm_evo"
        upward = allowed - set(layers[:i])
        assert not upward, f"{unit} may import {sorted(upward)}, listed after it in swarm_evo/__init__.py"


def test_each_unit_imports_only_what_its_docstring_allows():
    modules = _modules()
    layers = set(_layers())
    offenders = []
    for name, path in modules.items():
        unit = _unit_of(name)
        if unit not in layers:
            continue
        allowed = _may_import(unit) | {unit}
        for target in sorted(_imports(name, path, modules)):
            other = _unit_of(target)
            if other is not None and other in layers and other not in allowed:
                offenders.append(f"{path.relative_to(ROOT)} imports {target} ({unit} may import "
                                 f"{', '.join(sorted(allowed - {unit})) or 'nothing else'})")
    assert not offenders, "imports a unit's docstring does not allow:\n" + "\n".join(offenders)


# ----------------------------------------------------------------------------- one home for each list
REGISTRIES = {"swarm_evo/operators/builtin.py", "swarm_evo/sandbox/backends.py"}
"""Where the lists of operations and of sandbox backends are written (issue 43)."""


def _lists() -> dict[str, set[str]]:
    from swarm_evo.operators import registry
    from swarm_evo.sandbox import backends

    return {"operations": set(registry.names()), "backends": set(backends.NAMES)}


def _spelled_lists(source: str, lists: dict[str, set[str]]) -> list[tuple[int, str, list[str]]]:
    """``(line, list name, strings)`` for every tuple, list or set literal, every dict literal's
    keys and every ``Literal[...]`` that spells out a list: at least three of its names, or two
    and nothing else (``("local", "docker")``; greedy's ``Literal["draft", "improve", "debug"]``
    names actions, not the list)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        strings = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        for what, names in lists.items():
            hits = set(strings) & names
            if len(hits) >= 3 or (len(hits) >= 2 and len(strings) == len(items) and set(strings) <= names):
                found.append((node.lineno, what, strings))
    return found


def test_no_module_outside_the_registries_spells_out_the_operations_or_backends():
    """The code that runs (swarm_evo/, flows/, tasks/, blocks/); a benchmark comparing two named
    backends (benchmarks/sandbox_overhead.py: docker minus local) is no list of them."""
    lists = _lists()
    offenders = [f"{path.relative_to(ROOT)}:{line}: the {what} {strings}"
                 for top in FIRST_PARTY for path in _python_files(top)
                 if str(path.relative_to(ROOT)) not in REGISTRIES
                 for line, what, strings in _spelled_lists(path.read_text(), lists)]
    assert not offenders, ("read swarm_evo/operators/registry.py or swarm_evo/sandbox/backends.py instead of "
                           "writing the list again:\n" + "\n".join(offenders))


@pytest.mark.parametrize("source, caught", [
    ('OPERATIONS = ("draft", "merge", "mutate")', True),
    ('COLOURS = {"draft": "#1e88e5", "merge": "#8e24aa", "debug": "#f4511e"}', True),
    ('def f() -> Literal["merge", "mutate"]: ...', True),
    ('p.add_argument("--executor", choices=("local", "docker"))', True),
    ('if executor not in ["local", "docker"]: ...', True),
    ('ActionKind = Literal["draft", "improve", "debug"]', False),
    ('POOL_TYPES = ("process", "docker")', False),
    ('if node.operation == "merge": ...', False),
])
def test_a_spelled_out_list_would_be_caught(source, caught):
    assert bool(_spelled_lists(source, _lists())) is caught


# ----------------------------------------------------------------------------- grader kinds
GRADERS_MODULE = "swarm_evo/competition/graders.py"
"""Where the grader kinds and their traits are written (``KINDS``; issue 55, item 4)."""


def _kind_comparisons(source: str | ast.AST, kinds: set[str]) -> list[tuple[int, list[str]]]:
    """``(line, kinds)`` of every comparison of something named ``*kind`` with a grader kind's
    name (``grader.kind == "regression"``, ``kind in ("probability", ...)``)."""
    found = []
    for node in ast.walk(ast.parse(source) if isinstance(source, str) else source):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        flat = [e for o in operands for e in (o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o])]
        names = [e.value for e in flat if isinstance(e, ast.Constant) and e.value in kinds]
        subject = any((isinstance(o, ast.Attribute) and o.attr.endswith("kind"))
                      or (isinstance(o, ast.Name) and o.id.endswith("kind")) for o in operands)
        if names and subject:
            found.append((node.lineno, names))
    return found


def test_only_the_graders_module_reads_a_grader_kinds_name():
    """Other modules ask a grader's traits (``grader.traits.classification``), so a new kind is
    one module's change."""
    from swarm_evo.competition.graders import KINDS

    offenders = [f"{path.relative_to(ROOT)}:{line}: {names}"
                 for top in FIRST_PARTY for path in _python_files(top) if str(path.relative_to(ROOT)) != GRADERS_MODULE
                 for line, names in _kind_comparisons(_parse(path), set(KINDS))]
    assert not offenders, ("read Grader.traits (swarm_evo/competition/graders.py::KINDS) instead of a kind's "
                           "name:\n" + "\n".join(offenders))


@pytest.mark.parametrize("source, caught", [
    ('if grader.kind != "probability": ...', True),
    ('x = kind in ("probability", "multiclass_probability")', True),
    ('if relation.kind == "group": ...', False),
    ('if grader.traits.classification: ...', False),
])
def test_a_kind_comparison_would_be_caught(source, caught):
    from swarm_evo.competition.graders import KINDS

    assert bool(_kind_comparisons(source, set(KINDS))) is caught
