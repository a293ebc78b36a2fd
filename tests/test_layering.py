"""The layering rules of docs/architecture.md, checked on every import of the package.

The rules (they hold for imports inside functions too, which is where a shortcut hides):
- `monitor` imports nothing of ours;
- only `store/` speaks SQL: nothing outside it imports a database driver or holds an SQL statement;
- nothing but the CLI imports `dashboard`;
- `integrations/` depend on the core, never the reverse: only the CLI (the outermost skin, like the
  dashboard) and the integrations themselves import them;
- no import cycle among modules. An import under `if TYPE_CHECKING:` runs in no process, so it
  counts for the rules above but not for cycles (annotations may name a type both ways).
Imports are read with `ast`, so a module is never run to be checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src"
SQL_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg2", "psycopg_pool", "asyncpg"})
# A string that starts like an SQL statement (upper case, as every statement of ours is written).
SQL_STATEMENT = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX|UNIQUE)\s"
    r"|ALTER\s+TABLE\s|DROP\s+(TABLE|INDEX)\s|PRAGMA\s|WITH\s+\w+\s+AS\s*\()"
)


class Import(NamedTuple):
    importer: str  # dotted module name
    imported: str  # dotted name as written (a module of ours resolved to the deepest module that exists)
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`


def module_names(root: Path) -> dict[str, Path]:
    """{dotted name: file} for every module of the `tallyboard` package under `root`."""
    names = {}
    for path in sorted((root / "tallyboard").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def imports_of(name: str, source: str, is_package: bool, modules: set[str]) -> Iterator[Import]:
    """Every import in `source` (module `name`): statements anywhere in the file, relative ones
    resolved, and `import_module("...")` calls with a literal name."""
    tree = ast.parse(source)
    type_only = _type_checking_nodes(tree)
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            ]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        for target in targets:
            if target.split(".")[0] == "tallyboard":
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
            yield Import(name, target, node.lineno, id(node) in type_only)


def all_imports(root: Path = PACKAGE_ROOT) -> list[Import]:
    modules = module_names(root)
    return [
        found
        for name, path in modules.items()
        for found in imports_of(
            name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(modules)
        )
    ]


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
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


def _report(imports: list[Import]) -> str:
    return "\n".join(f"{i.importer}:{i.line} imports {i.imported}" for i in imports)


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_the_walker_sees_lazy_relative_and_dynamic_imports():
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from tallyboard.table import ResultTable\n"
        "def later():\n"
        "    from ..store.base import Store\n"
        "    return import_module('tallyboard.dashboard.app')\n"
    )
    modules = {
        "tallyboard.pkg.sibling",
        "tallyboard.store.base",
        "tallyboard.table",
        "tallyboard.dashboard.app",
    }
    found = {(i.imported, i.type_only) for i in imports_of("tallyboard.pkg.mod", source, False, modules)}
    assert found == {
        ("typing", False),
        ("tallyboard.pkg.sibling", False),
        ("tallyboard.table", True),
        ("tallyboard.store.base", False),
        ("tallyboard.dashboard.app", False),
    }


def test_the_walker_reads_the_whole_package(imports):
    modules = module_names(PACKAGE_ROOT)
    assert {"tallyboard.table", "tallyboard.store.base", "tallyboard.monitor.stat"} <= set(modules)
    lazy = {(i.importer, i.imported) for i in imports}
    assert ("tallyboard.table", "tallyboard.run.system_metrics") in lazy  # an import inside a function


def test_monitor_imports_nothing_of_ours(imports):
    leaks = [
        i
        for i in imports
        if within(i.importer, "tallyboard.monitor")
        and within(i.imported, "tallyboard")
        and not within(i.imported, "tallyboard.monitor")
    ]
    assert not leaks, _report(leaks)


def test_only_the_store_imports_a_database_driver(imports):
    leaks = [
        i
        for i in imports
        if i.imported.split(".")[0] in SQL_DRIVERS and not within(i.importer, "tallyboard.store")
    ]
    assert not leaks, _report(leaks)


def test_only_the_store_holds_sql_statements():
    leaks = []
    for name, path in module_names(PACKAGE_ROOT).items():
        if within(name, "tallyboard.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL_STATEMENT.match(node.value)
            ):
                leaks.append(f"{name}:{node.lineno}: {node.value.strip()[:60]!r}")
    assert not leaks, "\n".join(leaks)


def test_the_sql_check_knows_a_statement_from_prose():
    assert SQL_STATEMENT.match("SELECT run_id FROM runs")
    assert SQL_STATEMENT.match("\n  INSERT INTO runs (x) VALUES (?)")
    assert SQL_STATEMENT.match("UPDATE runs SET note = ?")
    assert not SQL_STATEMENT.match("Select the runs you want to compare")
    assert not SQL_STATEMENT.match("update the table")


def test_nothing_but_the_cli_imports_the_dashboard(imports):
    leaks = [
        i
        for i in imports
        if within(i.imported, "tallyboard.dashboard")
        and not within(i.importer, "tallyboard.dashboard")
        and not within(i.importer, "tallyboard.cli")
    ]
    assert not leaks, _report(leaks)


def test_the_core_never_imports_the_integrations(imports):
    leaks = [
        i
        for i in imports
        if within(i.imported, "tallyboard.integrations")
        and not within(i.importer, "tallyboard.integrations")
        and not within(i.importer, "tallyboard.cli")
    ]
    assert not leaks, _report(leaks)


def test_no_import_cycle(imports):
    edges: dict[str, set[str]] = {}
    for i in imports:
        if not i.type_only and within(i.imported, "tallyboard") and i.imported != i.importer:
            edges.setdefault(i.importer, set()).add(i.imported)
    found = cycles(edges)
    detail = [
        f"{' <-> '.join(group)}:\n"
        + _report([i for i in imports if {i.importer, i.imported} <= set(group) and not i.type_only])
        for group in found
    ]
    assert not found, "\n".join(detail)


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
