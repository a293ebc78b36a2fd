"""Filtering runs: the filter language (a tiny parser, never `eval`) and how it sees a run's columns.

The dashboard's runs table and `tallyboard runs --filter` both filter with this module, so one
expression selects the same runs in both, and the command line needs no web framework.

    lr < 1e-3 and status == "finished"
    not hidden and (tag ~ "base" or note == null)
    `train/acc` >= 0.9 and batch_size in [64, 128]
    "baseline" in tags and not "ablation-3" in tags

Names are column names (or their aliases, case-insensitively); names with spaces or operators go in
backticks. A run's cell under a name is its run field, else its hparam, else its result.
Hparams and results have a namespace of their own: `hparams.NAME` is always the hparam NAME and
`results.NAME` the result (`hparams.lr > 0.01`), and an hparam or result named like a run column
(`tag`, `status`, `note`, `command`, `hidden`, ...) is only that: `hparams.tag == 3` (the prefix
rule, `qualified`; the bare `tag` is the run's tag).
`~` is a case-insensitive "contains". `null` matches empty cells. Comparing values of different
types is simply false (a string is never < a number), so mixed columns never raise.
A cell can hold several values (a run's `tags`): `x in tags` holds when one of them equals x,
`tags ~ "abl"` and `tags == "baseline"` when one of them matches, `tags != "x"` when none equals
x, and `tags == null` (or `not tags`) when there are none.
The grammar is small enough to read in one go:

    expr  := and ("or" and)*
    and   := not ("and" not)*
    not   := "not" not | cmp
    cmp   := value (OP value | "in" (list | NAME))?
    value := NAME | NUMBER | STRING | true | false | null | "(" expr ")" | "-" value
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from tallyboard.errors import FilterError
from tallyboard.values import check_text

Row = Callable[[str], Any]  # column name -> cell value (None when empty)
Predicate = Callable[[Row], Any]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<quoted>`[^`]*`)
    | (?P<op>==|!=|<=|>=|<|>|=|~|\(|\)|\[|\]|,|-)
    | (?P<name>[A-Za-z_][A-Za-z0-9_./:]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "none"}
MAX_LENGTH = 2000
MAX_DEPTH = 32  # nested parentheses, `not`s and minus signs


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise FilterError(f"unexpected {text[pos:].strip()[:20]!r} at position {pos}")
        kind = str(match.lastgroup)  # every alternative of _TOKEN is a named group
        raw = match.group(kind)
        if kind == "number":
            out.append(("lit", _number_literal(raw)))
        elif kind == "string":
            out.append(("lit", re.sub(r"\\(.)", r"\1", raw[1:-1])))
        elif kind == "quoted":
            out.append(("name", raw[1:-1]))
        elif kind == "name" and raw.lower() in _KEYWORDS:
            word = raw.lower()
            literal = {"true": True, "false": False, "null": None, "none": None}
            out.append(("lit", literal[word]) if word in literal else ("kw", word))
        else:
            out.append((kind, raw))
        pos = match.end()
    return out


VALUE_TABLES = ("hparams", "results")


def qualified(key: str) -> tuple[str | None, str]:
    """A column key in the namespace of hparams or results: ('hparams', 'tag') for 'hparams.tag',
    (None, key) for any other key (a run field, or an hparam or result by its bare name)."""
    table, dot, name = key.partition(".")
    return (table, name) if dot and name and table in VALUE_TABLES else (None, key)


def _number_literal(raw: str) -> int | float:
    """An integer literal as an int while a 64-bit integer holds it, else (like `1.5`, `1e9`) as
    the nearest float (inf past 1.8e308): no stored value is an integer beyond 64 bits, so each
    compares with it as with the exact integer, and the database can bind it (SQLite's INTEGER and
    PostgreSQL's BIGINT stop at 64 bits; a 90-digit `run_id < 999...` was a 500)."""
    if not any(c in raw for c in ".eE"):
        number = int(raw)
        if -(2**63) <= number < 2**63:
            return number
    return float(raw)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


def _compare(op: str, left: Any, right: Any) -> bool:
    if isinstance(left, (list, tuple)):  # several values (a run's tags): any of them matches
        if right is None and op in ("==", "=", "!="):
            return (not left) == (op != "!=")
        if op == "!=":
            return not any(_equal(item, right) for item in left)
        return any(_compare(op, item, right) for item in left)
    if op in ("==", "="):
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op == "~":
        return left is not None and right is not None and str(right).lower() in str(left).lower()
    a, b = _number(left), _number(right)
    if a is not None and b is not None:
        return _ORDER[op](a, b)
    if isinstance(left, str) and isinstance(right, str):
        return _ORDER[op](left.lower(), right.lower())
    return False


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if isinstance(value, float) and math.isnan(value) else value


def _equal(left: Any, right: Any) -> bool:
    if left is None or right is None:
        return left is None and right is None
    a, b = _number(left), _number(right)
    if a is not None and b is not None:
        return a == b
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    return bool(left == right)


# The parsed expression, shared by the Python predicate below and the SQL of the dashboard
# (dashboard/runs_sql.py): ("lit", value), ("name", column), ("neg", node), ("not", node),
# ("and", [nodes]), ("or", [nodes]), ("cmp", op, left, right), ("in_list", left, [literals]),
# ("in_name", item, container) for `x in tags`.
Node = tuple[Any, ...]


class _Parser:
    def __init__(self, text: str, resolve: Callable[[str], str]) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0
        self.resolve = resolve

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"the expression nests deeper than {MAX_DEPTH} levels")

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str, value: Any = None) -> bool:
        token = self.peek()
        if token and token[0] == kind and (value is None or token[1] == value):
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        if not self.take(kind, value):
            raise FilterError(f"expected {value!r} at token {self.pos + 1}")

    def parse(self) -> Node:
        if not self.tokens:
            return ("lit", True)
        expr = self.or_()
        extra = self.peek()
        if extra is not None:
            raise FilterError(f"unexpected {extra[1]!r} at token {self.pos + 1}")
        return expr

    def or_(self) -> Node:
        parts = [self.and_()]
        while self.take("kw", "or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else ("or", parts)

    def and_(self) -> Node:
        parts = [self.not_()]
        while self.take("kw", "and"):
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def not_(self) -> Node:
        if self.take("kw", "not"):
            self.nest()
            return ("not", self.not_())
        return self.comparison()

    def comparison(self) -> Node:
        left = self.value()
        token = self.peek()
        if token and token[0] == "op" and token[1] in ("==", "=", "!=", "<", "<=", ">", ">=", "~"):
            self.pos += 1
            return ("cmp", token[1], left, self.value())
        if self.take("kw", "in"):
            token = self.peek()
            if token is not None and token[0] == "name":  # a column of several values: `x in tags`
                return ("in_name", left, self.value())
            return ("in_list", left, self.list_())
        return left

    def list_(self) -> list[Any]:
        self.expect("op", "[")
        items: list[Any] = []
        while not self.take("op", "]"):
            if items:
                self.expect("op", ",")
            token = self.peek()
            negative = self.take("op", "-")
            token = self.peek()
            if token is None or token[0] != "lit":
                raise FilterError('lists hold literals only, e.g. [1, 2, "a"]')
            self.pos += 1
            items.append(-token[1] if negative else token[1])
        return items

    def value(self) -> Node:
        token = self.peek()
        if token is None:
            raise FilterError("the expression ends too early")
        self.pos += 1
        kind, raw = token
        if kind == "lit":
            return ("lit", raw)
        if kind == "name":
            return ("name", self.resolve(raw))
        if (kind, raw) == ("op", "("):
            self.nest()
            inner = self.or_()
            self.expect("op", ")")
            return inner
        if (kind, raw) == ("op", "-"):
            self.nest()
            return ("neg", self.value())
        raise FilterError(f"unexpected {raw!r} at token {self.pos}")


def _evaluator(node: Node) -> Predicate:
    """The Python function of a parsed expression: row -> the expression's value."""
    kind = node[0]
    if kind == "lit":
        raw = node[1]
        return lambda row: raw
    if kind == "name":
        column = node[1]
        return lambda row: row(column)
    if kind == "neg":
        inner = _evaluator(node[1])
        return lambda row: -n if (n := _number(inner(row))) is not None else None
    if kind == "not":
        inner = _evaluator(node[1])
        return lambda row: not truthy(inner(row))
    if kind in ("and", "or"):
        parts = [_evaluator(part) for part in node[1]]
        combine = all if kind == "and" else any
        return lambda row: combine(p(row) for p in parts)
    if kind == "cmp":
        op, left, right = node[1], _evaluator(node[2]), _evaluator(node[3])
        return lambda row: _compare(op, left(row), right(row))
    if kind == "in_name":
        item, container = _evaluator(node[1]), _evaluator(node[2])
        return lambda row: _contains(container(row), item(row))
    left, options = _evaluator(node[1]), node[2]  # in_list
    return lambda row: any(_equal(left(row), option) for option in options)


def _contains(container: Any, item: Any) -> bool:
    """`item in NAME`: one of the cell's values equals it (a cell of one value: that value does)."""
    values = container if isinstance(container, (list, tuple)) else [container]
    return any(_equal(value, item) for value in values)


def truthy(value: Any) -> bool:
    """Whether a filter's value selects a run: empty text and NaN do not."""
    return bool(value) and value != "" and not (isinstance(value, float) and math.isnan(value))


def parse_filter(text: str, resolve: Callable[[str], str]) -> Predicate:
    """Compile filter text to a predicate over rows; `resolve` maps a typed name to a column key
    (and raises FilterError for an unknown one)."""
    predicate = _evaluator(parse_tree(text, resolve))
    return lambda row: truthy(predicate(row))


def constant(node: Node) -> Any:
    """The value of an expression that names no column."""
    return _evaluator(node)(lambda name: None)


def parse_tree(text: str, resolve: Callable[[str], str]) -> Node:
    """Parse filter text into its expression (see `Node`); raises FilterError on bad text."""
    if len(text) > MAX_LENGTH:
        raise FilterError(f"filters are limited to {MAX_LENGTH} characters")
    try:  # a value no store holds matches nothing, and a database driver would raise on it
        check_text("the filter", text)
    except (TypeError, ValueError) as error:
        raise FilterError(str(error)) from None
    return _Parser(text, resolve).parse()


class NamedColumn(Protocol):
    """A column of the result table as far as filtering cares (store and dashboard columns both are)."""

    @property
    def name(self) -> str: ...

    @property
    def alias(self) -> str | None: ...


def column_resolver(columns: Iterable[NamedColumn]) -> Callable[[str], str]:
    """Map a typed name to a column name: an exact name first, else an alias in any case; raise
    FilterError naming an unknown one."""
    columns = list(columns)
    by_name = {c.name: c.name for c in columns}
    by_alias = {c.alias.lower(): c.name for c in columns if c.alias}

    def resolve(name: str) -> str:
        found = by_name.get(name) or by_alias.get(name.lower())
        if found is None and qualified(name)[0] is not None:
            return name  # `hparams.x` of a run that has none matches as an empty cell
        if found is None:
            raise FilterError(f"unknown column {name!r}")
        return found

    return resolve


def run_cell(run: Mapping[str, Any], name: str) -> Any:
    """The cell of column `name` in a run (its fields plus `hparams` and `results` dicts): the run
    field, else the hparam, else the result, unless `name` says which (`hparams.tag`, see
    `qualified`); None when the run has none of them."""
    table, bare = qualified(name)
    if table is not None:
        return run[table].get(bare)
    if name in run and name not in ("hparams", "results"):
        return run[name]
    if name in run["hparams"]:
        return run["hparams"][name]
    return run["results"].get(name)


def run_filter(text: str, columns: Iterable[NamedColumn]) -> Callable[[Mapping[str, Any]], bool]:
    """Compile filter text over `columns` to a test of one run; raises FilterError on bad text."""
    predicate = parse_filter(text, column_resolver(columns))
    return lambda run: predicate(lambda name: run_cell(run, name))
