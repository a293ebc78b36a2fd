"""Scalar points as rows, for users who query the database with SQL (docs/result-table.md).

Why: since schema v14 a series is stored as blocks of packed points, which no SQL reads as they
are. On PostgreSQL the integer columns are stored raw (TOAST compresses them on the server), so
SQL can decode them: two SQL functions read an int64 and a float64 out of a BYTEA, and the view
`scalar_points` unnests every block into rows (run_id, tag_id, tag, rep, step, epoch,
walltime_ms, value), NaN as NULL like the old `scalars` table. SQLite has no such functions (and
its files keep the columns zlib'd), so `materialise` fills a TEMP table of the same name and shape
on a connection the user holds, from Python.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from tallyboard.store import block_reads

POINT_COLUMNS = ("run_id", "tag_id", "tag", "rep", "step", "epoch", "walltime_ms", "value")

# Created with the v14 schema on PostgreSQL (migrations.scalars_as_blocks). `|` and `<<` share one
# precedence in PostgreSQL, hence every shift in its parentheses.
_BYTE = "(get_byte(data, at + {k})::bigint << {shift})"
# The i-th number of an integer column: the running sum of its deltas, or itself where the column
# holds the numbers as they are (an upper-case first byte: block_codec.pack_deltas).
_NUMBER = """CASE WHEN get_byte({column}, 0) = ascii('R') THEN tallyboard_int8_at({column}, 1 + 8 * i)
        ELSE CAST(SUM(tallyboard_int8_at({column}, 1 + 8 * i)) OVER w AS BIGINT) END"""
POSTGRES_POINTS = f"""
CREATE OR REPLACE FUNCTION tallyboard_int8_at(data bytea, at integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT {" | ".join(_BYTE.format(k=k, shift=8 * k) for k in range(8))}
$$;
CREATE OR REPLACE FUNCTION tallyboard_float8_at(data bytea, at integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN e = 2047 AND m = 0 THEN CASE WHEN bits < 0 THEN '-Infinity' ELSE 'Infinity' END::float8
    WHEN e = 2047 THEN 'NaN'::float8
    WHEN e = 0 THEN sign * m::float8 * power(2::float8, -1074)
    ELSE sign * (1 + m::float8 / 4503599627370496::float8) * power(2::float8, e - 1023)
END
FROM (SELECT bits, (bits >> 52) & 2047 AS e, bits & 4503599627370495 AS m,
             CASE WHEN bits < 0 THEN -1::float8 ELSE 1::float8 END AS sign
      FROM (SELECT tallyboard_int8_at(data, at) AS bits) AS raw) AS parts
$$;
CREATE VIEW scalar_points AS
SELECT b.run_id, b.tag_id, t.name AS tag, b.rep, p.step, p.epoch, p.walltime_ms, p.value
FROM scalar_blocks b JOIN tags t ON t.tag_id = b.tag_id
CROSS JOIN LATERAL (
    SELECT {_NUMBER.format(column="b.step_data")} AS step,
           NULLIF(tallyboard_int8_at(b.epoch_data, 1 + 8 * i), -9223372036854775807 - 1) AS epoch,
           {_NUMBER.format(column="b.walltime_data")} AS walltime_ms,
           NULLIF(tallyboard_float8_at(b.value_data, 8 * i), 'NaN') AS value
    FROM generate_series(0, b.n - 1) AS i
    WINDOW w AS (ORDER BY i)
) p"""


def postgres_statements() -> list[str]:
    """The statements that create the view and its functions (each function is one statement)."""
    return [
        part.strip() + ("\n$$" if part.count("$$") == 1 else "") for part in POSTGRES_POINTS.split("\n$$;")
    ]


def materialise(conn: sqlite3.Connection, table: str = "scalar_points") -> int:
    """Fill TEMP TABLE `table` (POINT_COLUMNS) with every scalar point of the SQLite file `conn`
    has open, replacing what it held; returns the number of points. A snapshot: points logged
    later are not in it until it is filled again. A page of blocks is decoded at a time."""
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({', '.join(POINT_COLUMNS)})")
    conn.execute(f"DELETE FROM temp.{table}")
    series = conn.execute(
        "SELECT DISTINCT b.run_id, b.tag_id, t.name, b.rep FROM scalar_blocks b"
        " JOIN tags t ON t.tag_id = b.tag_id ORDER BY b.run_id, t.name, b.rep"
    ).fetchall()
    marks = ", ".join("?" * len(POINT_COLUMNS))
    count = 0

    def read(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return conn.execute(sql, params).fetchall()

    for run_id, tag_id, tag, rep in series:
        for points in block_reads.blocks(read, (run_id, tag_id, rep)):
            rows = [(run_id, tag_id, tag, rep, *row) for row in block_reads.rows(points)]
            conn.executemany(f"INSERT INTO temp.{table} VALUES ({marks})", rows)
            count += len(rows)
    return count
