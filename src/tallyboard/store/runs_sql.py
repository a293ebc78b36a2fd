"""A view of the runs table (filter, sort, one page) as SQL over the typed values (schema v10).

Why: at 100,000 runs, loading every run's 25 values into Python to filter and sort them took
seconds; here the database answers from its indexes and sends one page. The SQL must select and
order exactly the runs that the in-memory table (dashboard/runs_table.py, filter.py) does, so
each part of the filter language is translated only where its meaning is certain; anything else
raises `NotInSql` and the caller uses the in-memory table:
- comparisons of a column with a literal (`lr < 1e-3`, `1e-3 > lr`, `opt == "adam"`, `x == null`),
  `in [literals]` without null, a column alone (its truth), `not`, `and`, `or`, literal-only parts;
- columns: hparams and results (`store/indexed_values.py` holds what they compare by) and the run
  fields of `RUN_FIELD_KINDS`. Not translated: `~`, `x in tags`, the `tags` column, two columns
  compared, a minus before a column, search, sorting by a run field other than the run id, or by a
  name that is an hparam of some runs and a result of others.
A condition on values is said one of two ways (`Translator(per_run=...)`), because what is cheap
depends on how many runs a statement visits:
- per run (a page): "the run's value row passes a test", a scalar subquery on the key
  `(run_id, name)` evaluated for each run the page's walk visits, so a page costs the runs it
  walks, not the runs the filter selects. A scalar subquery rather than EXISTS: PostgreSQL turns
  EXISTS into a join whose plan follows its statistics, and never a scalar subquery;
- as a set (a count of every run a view holds): "the run is among those whose value row passes a
  test" (`IN`, read once per statement from the index `(name, rank, number, text)`).
On run fields, the run's own row. Either way a missing cell behaves as the filter's None, and
SQL's NULLs never reach a `not`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tallyboard.filter import Node, constant, qualified, truthy
from tallyboard.store.indexed_values import BOOL, EMPTY_TEXT, NAN, NUMBER, TEXT

# Run fields a filter may name, by how their cell compares ('tags', a list, is not translated).
RUN_FIELD_KINDS = {
    **dict.fromkeys(
        ("experiment", "tag", "config_path", "comment", "config_hash", "note", "color", "status"), "text"
    ),
    **dict.fromkeys(("run_id", "start_time", "end_time", "rerun_of"), "number"),
    "hidden": "bool",
}
FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "=": "==", "!=": "!="}
ORDERED = ("<", "<=", ">", ">=")


class NotInSql(Exception):
    """This view needs the in-memory table (a part of it has no exact translation)."""


@dataclass(frozen=True)
class Dialect:
    """What differs between the engines: the lower-casing function that equals Python's
    `str.lower` (SQLite's own `lower` folds ASCII only: the dashboard registers `py_lower`), the
    collation that orders text by code point, as Python does, and how "is among" is written.

    PostgreSQL turns `x IN (subquery)` and `EXISTS` into a join whose plan follows the planner's
    statistics; on a table never analysed (autovacuum off) it guessed 7 rows for 50,000 and nested
    the loops: 8 minutes for one page of 100,000 runs. `NOT (x NOT IN (subquery))` (the same for
    non-null ids) stays a hashed subplan, built once whatever the estimates."""

    lower: str
    by_code_point: str
    among: str  # "{run} is among the ids of (subquery)", with {run} and {ids} to fill in

    @classmethod
    def of(cls, postgres: bool) -> Dialect:
        if postgres:
            return cls("lower", ' COLLATE "C"', "NOT ({run} NOT IN ({ids}))")
        return cls("py_lower", "", "{run} IN ({ids})")


@dataclass
class Condition:
    """SQL that holds for the run whose id is `{run}` (formatted in by the caller), with its params.
    `driver` is a value condition every matching run satisfies, (table, name, sql, params) over the
    row alias `v`, which a count can scan from its index instead of visiting every run; `rest` is
    the rest of the condition then."""

    sql: str
    params: list[Any] = field(default_factory=list)
    driver: tuple[str, str, str, list[Any]] | None = None
    rest: Condition | None = None  # with a driver: what else must hold

    def at(self, run: str) -> str:
        return self.sql.replace("{run}", run)


TRUE = Condition("1 = 1")
FALSE = Condition("1 = 0")


class Translator:
    """Filter expressions (run_filter.Node) to `Condition`s for one table's names."""

    def __init__(self, hparams: set[str], results: set[str], dialect: Dialect, per_run: bool = False) -> None:
        self.hparams, self.results, self.dialect, self.per_run = hparams, results, dialect, per_run

    def condition(self, node: Node) -> Condition:
        """The whole filter: true where `truthy` of the expression is."""
        kind = node[0]
        if kind == "lit":
            return TRUE if truthy(node[1]) else FALSE
        if kind == "not":
            inner = self.condition(node[1])
            return Condition(f"NOT ({inner.sql})", inner.params)
        if kind in ("and", "or"):
            # all()/any() take a bare column's Python truth, where NaN is true (unlike `truthy`)
            parts = [self.cell(p[1], "bool", None) if p[0] == "name" else self.condition(p) for p in node[1]]
            joined = _joined(kind, parts)
            for i, part in enumerate(parts if kind == "and" else []):
                if part.driver is not None and part.rest is TRUE:
                    joined.driver, joined.rest = part.driver, _joined("and", parts[:i] + parts[i + 1 :])
                    break
            return joined
        if kind == "name":
            return self.cell(node[1], "truthy", None)
        if kind == "cmp":
            op, left, right = node[1], node[2], node[3]
            if left[0] != "name" and right[0] == "name":
                op, left, right = FLIPPED.get(op, "~"), right, left
            right = _folded(right)
            if left[0] == "lit" and right[0] == "lit":
                return TRUE if truthy(constant(node)) else FALSE
            if left[0] != "name" or right[0] != "lit" or op == "~":
                raise NotInSql(f"comparison {op!r} of {left[0]} with {right[0]}")
            return self.cell(left[1], op, right[1])
        if kind == "in_list":
            if node[1][0] != "name" or any(option is None for option in node[2]):
                raise NotInSql("`in` of something else than a column, or with null")
            return self.cell(node[1][1], "in", list(node[2]))
        raise NotInSql(kind)

    # -- one column against a literal ---------------------------------------------------------
    def cell(self, name: str, op: str, literal: Any) -> Condition:
        table, bare = qualified(name)
        if table is not None:  # `hparams.tag`: that table only
            return self.value_condition(bare, op, literal, table)
        if name in RUN_FIELD_KINDS:
            return self.run_field(name, RUN_FIELD_KINDS[name], op, literal)
        if name == "tags":
            raise NotInSql("the tags column")
        return self.value_condition(name, op, literal)

    def value_condition(self, name: str, op: str, literal: Any, table: str | None = None) -> Condition:
        """Runs whose hparam or result `name` (of `table` only, if given) compares so."""
        holds_for_none = (op in ("==", "=") and literal is None) or (op == "!=" and literal is not None)
        if holds_for_none:  # true for a missing cell: the negation of a condition on present ones
            inner = self.value_test("==" if op == "!=" else "!=", literal)
            assert inner is not None  # `!= null` and `== literal` always have a test
            return self.negated(self.value_cell(name, *inner, table))
        test = self.value_test(op, literal)
        return self.value_cell(name, *test, table) if test is not None else FALSE

    def value_test(self, op: str, literal: Any) -> tuple[str, list[Any]] | None:
        """SQL over the value row `v` for which `op literal` holds (None: it holds for none)."""
        if op in ("truthy", "bool"):
            nan = f" OR v.value_rank = {NAN}" if op == "bool" else ""
            return (f"(v.value_rank = {NUMBER} AND v.value_number <> 0) OR v.value_rank = {TEXT}"
                    f" OR (v.value_rank = {BOOL} AND v.value_number <> 0){nan}", [])  # fmt: skip
        if op == "in":  # one IN list per kind of option: an OR per option nests one level each,
            # and SQLite refuses an expression nested 1,000 deep (a filter may list that many)
            numbers = _distinct(float(option) for option in literal if not isinstance(option, str))
            texts = _distinct(option.lower() for option in literal if isinstance(option, str))
            tests = []
            if numbers:  # numbers and booleans, as `==` compares them (True == 1)
                tests.append((f"v.value_number IN ({_marks(numbers)})", numbers))
            if texts:
                text_test = f"v.value_rank IN ({TEXT}, {EMPTY_TEXT}) AND v.value_text IN ({_marks(texts)})"
                tests.append((text_test, texts))
            if not tests:
                return None
            return " OR ".join(f"({sql})" for sql, _ in tests), [x for _, params in tests for x in params]
        if literal is None:
            return ("v.value_rank IS NOT NULL", []) if op == "!=" else None  # `!= null`: present
        if op in ("==", "="):
            if isinstance(literal, str):
                return f"v.value_rank IN ({TEXT}, {EMPTY_TEXT}) AND v.value_text = ?", [literal.lower()]
            return "v.value_number = ?", [float(literal)]  # numbers and booleans (True == 1)
        if op in ORDERED:
            if isinstance(literal, str):
                return f"v.value_rank IN ({TEXT}, {EMPTY_TEXT}) AND v.value_text {op} ?", [literal.lower()]
            if isinstance(literal, bool):
                return None  # a boolean orders against nothing
            return f"v.value_rank = {NUMBER} AND v.value_number {op} ?", [float(literal)]
        raise NotInSql(op)

    def value_cell(self, name: str, test: str, params: list[Any], table: str | None = None) -> Condition:
        """Runs whose cell `name` (their hparam, else their result; of `table` only, if given)
        passes `test`."""

        def among(table: str, test: str = test, test_params: list[Any] = params) -> Condition:
            if self.per_run:  # the test comes before the name in this statement
                return Condition(f"{has(table, f'({test})')} IS NOT NULL", [*test_params, name])
            ids = f"SELECT v.run_id FROM {table} v WHERE v.name = ? AND ({test})"
            return Condition(self.dialect.among.replace("{ids}", ids), [name, *test_params])

        if table is None and name in self.hparams and name in self.results:  # an hparam hides a result
            parts = [among("hparams"), among("results"), self.negated(among("hparams", "1 = 1", []))]
            return _joined("or", [parts[0], _joined("and", parts[1:])])
        if table is None:
            table = "hparams" if name in self.hparams else "results" if name in self.results else None
        if table is None:
            return FALSE  # nobody has a value for it
        found = among(table)
        return Condition(found.sql, found.params, driver=(table, name, test, list(params)), rest=TRUE)

    @staticmethod
    def negated(inner: Condition) -> Condition:
        return Condition(f"NOT ({inner.sql})", inner.params)

    def run_field(self, name: str, kind: str, op: str, literal: Any) -> Condition:
        """A condition on a column of `runs` (its row always exists)."""
        params: list[Any]
        if op in ("truthy", "bool"):  # no run field holds NaN: both truths agree
            test, params = (f"r.{name} <> ''" if kind == "text" else f"r.{name} <> 0"), []
        elif op == "in":  # one IN list, as for values (see `value_test`)
            if kind == "text":  # a string never equals a number, nor a number a string
                params = _distinct(option.lower() for option in literal if isinstance(option, str))
                column = f"{self.dialect.lower}(r.{name}){self.dialect.by_code_point}"
            else:
                params = _distinct(
                    int(option) if isinstance(option, bool) else option
                    for option in literal
                    if not isinstance(option, str)
                )
                column = f"r.{name}"
            if not params:
                return FALSE
            test = f"{column} IN ({_marks(params)})"
        elif op == "!=":
            return self.negated(self.run_field(name, kind, "==", literal))
        elif literal is None:
            if op not in ("==", "="):
                return FALSE
            test, params = f"r.{name} IS NULL", []
        elif kind == "text":
            if not isinstance(literal, str):
                return FALSE  # a string never equals nor orders against a number
            compare = "=" if op in ("==", "=") else op
            test = f"{self.dialect.lower}(r.{name}){self.dialect.by_code_point} {compare} ?"
            params = [literal.lower()]
        elif isinstance(literal, str) or (op in ORDERED and (kind == "bool" or isinstance(literal, bool))):
            return FALSE
        else:
            number = int(literal) if isinstance(literal, bool) else literal  # True == 1
            test, params = f"r.{name} {'=' if op in ('==', '=') else op} ?", [number]
        return Condition(f"(SELECT 1 FROM runs r WHERE r.run_id = {{run}} AND {test}) IS NOT NULL", params)


def has(table: str, test: str) -> str:
    """A scalar subquery on a run's value row of a name (`?`): 1 when the row passes `test`, else
    NULL (also when there is no row). The test is in the SELECT list, not in the WHERE: the row is
    found by its key `(run_id, name)` whatever the planner believes. A PostgreSQL without
    statistics otherwise took the index `(name, rank, number, text, run_id)` for a test on the
    value and scanned 50,000 of its entries per run (8 s a page)."""
    return f"(SELECT CASE WHEN {test} THEN 1 END FROM {table} v WHERE v.run_id = {{run}} AND v.name = ?)"


def _distinct(values: Any) -> list[Any]:
    return list(dict.fromkeys(values))


def _marks(params: list[Any]) -> str:
    return ", ".join("?" * len(params))


def of_runs(run_ids: list[int], condition: Condition) -> Condition:
    """`condition`, and the run is one of `run_ids` (the compare page's runs)."""
    if not run_ids:
        return FALSE
    return _joined("and", [Condition(f"{{run}} IN ({_marks(run_ids)})", list(run_ids)), condition])


def _joined(kind: str, parts: list[Condition]) -> Condition:
    if not parts:
        return TRUE
    return Condition(
        f" {kind.upper()} ".join(f"({p.sql})" for p in parts), [x for p in parts for x in p.params]
    )


def _folded(node: Node) -> Node:
    """A minus before a literal is that literal negated (as the parser's lists do)."""
    if node[0] == "neg" and node[1][0] == "lit":
        return ("lit", constant(node))
    if node[0] == "neg":
        raise NotInSql("a minus before a column")
    return node


# -- the names of the value columns -----------------------------------------------------------
FIRST_RUN = "SELECT MIN(run_id) FROM {table} WHERE name = ?"  # the first run with a value of a name


def value_names_sql(table: str) -> str:
    """The distinct names of a value table: one index seek per name (a loose index scan), not a
    scan of its rows."""
    return f"""WITH RECURSIVE n(name) AS (
        SELECT MIN(name) FROM {table}
        UNION ALL SELECT (SELECT MIN(name) FROM {table} WHERE name > n.name) FROM n WHERE n.name IS NOT NULL)
        SELECT name FROM n WHERE name IS NOT NULL"""
