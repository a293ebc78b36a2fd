"""The layering rules of docs/architecture.md, checked on every import of the package.

The import rules are one table, `RULES`: each row is a part of the package (a folder, or top-level
modules) and the rows its modules may import (besides each other); a row that is in no other
row's list is imported by nobody outside it. `test_every_import_follows_the_rules` walks it. The
rules hold for imports inside functions too, which is where a shortcut hides, and for imports
under `if TYPE_CHECKING:` (an annotation that names the layer above is a dependency on it too).
Every module belongs to exactly one row, so a new folder must be placed before its first test run.

Besides the table:
- only `store/` speaks SQL: nothing outside it imports a database driver or holds an SQL statement;
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


class Rule(NamedTuple):
    members: tuple[str, ...]  # paths under src/tallyboard: "run/" a folder and all below, "table.py" a module
    may_import: frozenset[str]  # the rows whose modules these may import, besides their own row
    why: str


# DESIGN.md's arrows. Below the facade: `run` (the write path) and `analysis` (the read path's
# logic) both stand on `store`, which stands on the vocabulary floor; the skins (cli, dashboard,
# integrations, the peers' APIs) stand on the core. A row may always import its own modules.
FLOOR = frozenset({"floor", "errors"})
CORE = FLOOR | {"package", "table", "run", "alerts", "analysis", "exchange", "store", "monitor"}
RULES: dict[str, Rule] = {
    "errors": Rule(("errors.py",), frozenset(), "every error a user catches: the very bottom"),
    "floor": Rule(
        ("values.py", "media.py", "histogram.py", "filter.py", "json_numbers.py", "extras.py", "progress.py"),
        frozenset({"errors"}),
        "the vocabulary floor: what every layer shares, so it imports nothing of ours but itself and errors",
    ),
    "monitor": Rule(("monitor/",), frozenset(), "the torch.monitor port: usable without the rest of us"),
    "store": Rule(("store/",), FLOOR, "the only package that speaks SQL, beneath both paths"),
    "alerts": Rule(
        ("alerts/",),
        FLOOR | {"store"},
        "the rules and where alerts go: pure evaluation; alerts are texts (store/alert_content.py)",
    ),
    "run": Rule(
        ("run/",),
        FLOOR | {"store", "monitor", "alerts"},
        "the write path: writes through the store; the monitor feeds its event handler and system "
        "metrics; its rules are evaluated off the training thread (run/alerting.py)",
    ),
    "analysis": Rule(
        ("analysis/", "query.py"),
        FLOOR | {"store"},
        "the read path's logic, and query.py its public query API: reads through the store, never `run`",
    ),
    "exchange": Rule(("exchange/",), FLOOR | {"store"}, "our own format in and out, through the store"),
    "table": Rule(
        ("table.py",),
        FLOOR | {"run", "alerts", "analysis", "exchange", "store", "monitor"},
        "the facade: hands out the write path and the read path over one store",
    ),
    "package": Rule(("__init__.py",), CORE - {"package"}, "the public API: re-exports the core, lazily"),
    "dashboard": Rule(
        ("dashboard/",),
        FLOOR | {"table", "analysis", "store"},
        "the web app reads (and edits rows) through the store and the read path; no write path",
    ),
    "integrations": Rule(("integrations/",), CORE, "adapters of other tools: the core, never the reverse"),
    "skins": Rule(
        ("wandb.py", "tensorboard.py", "mlflow.py", "skins/"),
        CORE,
        "the peers' APIs (W&B, TensorBoard, MLflow) over the core; nothing of ours imports them",
    ),
    "cli": Rule(
        ("cli/",), CORE | {"dashboard", "integrations"}, "the outermost skin: it alone imports the dashboard"
    ),
    "main": Rule(("__main__.py",), frozenset({"cli"}), "`python -m tallyboard` is the command"),
}
# The imports that break a row's rule, each allowed here with why; one no longer made fails too.
ALLOWED: dict[tuple[str, str], str] = {
    # The API's version in /api/openapi.json is the package's `__version__` (the package runs before
    # any of its modules anyway); no other name of the public API is read there.
    ("dashboard/openapi.py", "__init__.py"): "the dashboard reads `tallyboard.__version__`",
}


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


def relative_path(name: str, modules: dict[str, Path], root: Path = PACKAGE_ROOT) -> str:
    """`tallyboard.run.sink` -> "run/sink.py"; `tallyboard` -> "__init__.py"."""
    return modules[name].relative_to(root / "tallyboard").as_posix()


def rows_of(path: str, rules: dict[str, Rule] = RULES) -> list[str]:
    """The rows of `rules` a module (by its path under src/tallyboard) belongs to."""
    return [
        row
        for row, rule in rules.items()
        if any(path == m or (m.endswith("/") and path.startswith(m)) for m in rule.members)
    ]


def rule_breaks(
    imports: list[Import], modules: dict[str, Path], rules: dict[str, Rule] = RULES, root: Path = PACKAGE_ROOT
) -> list[tuple[str, str, Import]]:
    """(importer's path, imported module's path, the import) for every import of ours that its
    importer's row does not allow (ALLOWED not applied)."""
    breaks = []
    for i in imports:
        if not within(i.imported, "tallyboard") or i.imported not in modules:
            continue
        importer = relative_path(i.importer, modules, root)
        imported = relative_path(i.imported, modules, root)
        rows, targets = rows_of(importer, rules), rows_of(imported, rules)
        if len(rows) != 1 or len(targets) != 1:
            continue  # unplaced: test_every_module_belongs_to_exactly_one_row says so
        if targets[0] != rows[0] and targets[0] not in rules[rows[0]].may_import:
            breaks.append((importer, imported, i))
    return breaks


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


def test_every_module_belongs_to_exactly_one_row():
    modules = module_names(PACKAGE_ROOT)
    placed = {relative_path(name, modules): rows_of(relative_path(name, modules)) for name in modules}
    wrong = {path: rows for path, rows in placed.items() if len(rows) != 1}
    assert not wrong, f"place each module in exactly one row of RULES (a new folder needs a row): {wrong}"
    members = [member for rule in RULES.values() for member in rule.members]
    alone = {member: {"": Rule((member,), frozenset(), "")} for member in members}
    stale = sorted(m for m in members if not any(rows_of(path, alone[m]) for path in placed))
    assert not stale, f"RULES names what is not in src/tallyboard: {stale}"


def test_every_import_follows_the_rules(imports):
    breaks = rule_breaks(imports, module_names(PACKAGE_ROOT))
    leaks = [i for importer, imported, i in breaks if (importer, imported) not in ALLOWED]
    assert not leaks, _report(leaks)
    unused = set(ALLOWED) - {(importer, imported) for importer, imported, _ in breaks}
    assert not unused, f"ALLOWED lets through imports the code no longer makes: {sorted(unused)}"


def test_the_rules_keep_the_arrows_of_the_design():
    """The table itself may grow, but never against DESIGN.md's arrows."""
    importers_of = {row: {other for other, rule in RULES.items() if row in rule.may_import} for row in RULES}
    assert RULES["monitor"].may_import == frozenset()  # monitor imports nothing of ours
    assert RULES["errors"].may_import == frozenset()
    assert RULES["floor"].may_import <= {"errors"}  # the floor: nothing but itself and errors
    assert importers_of["dashboard"] == {"cli"}  # nothing but the CLI imports the dashboard
    assert importers_of["integrations"] == {"cli"}  # the core never imports the integrations
    assert "analysis" not in RULES["run"].may_import  # run and analysis never import each other
    assert "run" not in RULES["analysis"].may_import
    assert RULES["run"].may_import <= {"store", "monitor", "alerts", "floor", "errors"}
    assert RULES["alerts"].may_import <= {"store", "floor", "errors"}  # DESIGN.md: alerts are run's
    assert RULES["analysis"].may_import <= {"store", "floor", "errors"}
    assert RULES["store"].may_import <= {"floor", "errors"}
    assert importers_of["skins"] == set()  # the peers' skins are for users' scripts only
    for skin in ("cli", "dashboard", "integrations", "skins"):
        assert skin not in RULES["table"].may_import | RULES["package"].may_import


def test_the_rule_check_finds_a_break_and_knows_its_rows():
    rules = {
        "low": Rule(("low.py",), frozenset(), ""),
        "high": Rule(("high/",), frozenset({"low"}), ""),
    }
    root = Path("/src")
    modules = {
        "tallyboard.low": root / "tallyboard/low.py",
        "tallyboard.high": root / "tallyboard/high/__init__.py",
        "tallyboard.high.part": root / "tallyboard/high/part.py",
    }
    imports = [
        Import("tallyboard.high.part", "tallyboard.low", 1, False),
        Import("tallyboard.high.part", "tallyboard.high", 2, False),
        Import("tallyboard.low", "tallyboard.high.part", 3, True),  # type-only counts too
        Import("tallyboard.low", "os", 4, False),
    ]
    assert rows_of("high/part.py", rules) == ["high"] and rows_of("other.py", rules) == []
    found = [(a, b, i.line) for a, b, i in rule_breaks(imports, modules, rules, root)]
    assert found == [("low.py", "high/part.py", 3)]


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
