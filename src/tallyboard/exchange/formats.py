"""Row files of an export: one file per table, as CSV, Parquet or JSON lines.

Every file is described by a `Layout` (column names and Python types), so reading gives back the
same typed values that were written: integers stay integers, floats round-trip exactly (CSV holds
`repr(float)`, the shortest text that reads back to the same double), and None stays None.
Conventions, chosen so that pandas, DuckDB, spreadsheets and `jq` read the files without help:
- a missing value (SQL NULL) is an empty CSV cell, a JSON `null`, a Parquet null. A scalar is never
  missing: a NaN scalar (which the table keeps as NULL) is written as NaN;
- NaN and +-infinity are `nan`/`inf`/`-inf` in CSV, the strings "NaN"/"Infinity"/"-Infinity" in
  JSON lines (the rule of every JSON we emit, json_numbers.py; `float()` reads them back), native
  in Parquet;
- CSV cannot tell an empty text from a missing one: in a column that may be NULL, an empty cell
  reads back as NULL (Parquet and JSON lines keep the difference).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

from tallyboard.json_numbers import dumps

FORMATS = ("csv", "parquet", "jsonl")
PARQUET_ROWS_PER_GROUP = 65_536
MAX_CSV_FIELD = 2**31 - 1
ROWS_PER_WRITE = 10_000


@dataclass(frozen=True)
class Layout:
    """The columns of one exported table: (name, type, nullable) with type int, float or str."""

    name: str
    columns: tuple[tuple[str, type, bool], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.columns]

    def path(self, directory: Path, file_format: str) -> Path:
        return directory / f"{self.name}.{file_format}"


class RowWriter:
    """Appends rows (tuples in the layout's column order) to one file; use as a context manager."""

    def __init__(self, path: Path, layout: Layout, file_format: str) -> None:
        if file_format not in FORMATS:
            raise ValueError(f"unknown format {file_format!r}; use one of {', '.join(FORMATS)}")
        self.layout, self.format, self.count = layout, file_format, 0
        self._buffer: list[tuple[Any, ...]] = []
        self._parquet: Any = None
        self._file: IO[str] | None = None
        if file_format == "parquet":
            import pyarrow.parquet as pq

            self._parquet = pq.ParquetWriter(path, _arrow_schema(layout))
        else:
            self._file = path.open("w", encoding="utf-8", newline="")
            if file_format == "csv":
                self._csv = csv.writer(self._file)
                self._csv.writerow(layout.names)

    def write(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Append rows, consumed a bounded chunk at a time (a series may hold millions)."""
        iterator = iter(rows)
        while chunk := list(islice(iterator, ROWS_PER_WRITE)):
            self._write_chunk(chunk)

    def _write_chunk(self, rows: list[tuple[Any, ...]]) -> None:
        self.count += len(rows)
        if self.format == "csv":
            self._csv.writerows([[_csv_cell(value) for value in row] for row in rows])
        elif self.format == "jsonl":
            assert self._file is not None
            names = self.layout.names
            self._file.writelines(
                dumps(dict(zip(names, row, strict=True)), ensure_ascii=False) + "\n" for row in rows
            )
        else:
            self._buffer.extend(rows)
            if len(self._buffer) >= PARQUET_ROWS_PER_GROUP:
                self._flush_parquet()

    def _flush_parquet(self) -> None:
        import pyarrow as pa

        if self._buffer:
            columns = list(zip(*self._buffer, strict=True))
            self._parquet.write_table(pa.Table.from_arrays(columns, schema=self._parquet.schema))
            self._buffer = []

    def close(self) -> None:
        if self._parquet is not None:
            self._flush_parquet()
            self._parquet.close()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def read_rows(
    path: Path, layout: Layout, file_format: str, batch: int = 50_000
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of one file as typed tuples in the layout's column order, `batch` rows at a time.
    A layout grows at its end only (never reordered): an older export that lacks its last columns,
    all nullable, reads them as NULL (`runs.error` and `runs.rerun_of` came with schema v13,
    `runs.window_tags` with v15)."""
    if not path.is_file():
        raise FileNotFoundError(f"the export has no {path.name}")
    if file_format == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        present = [name for name in layout.names if name in parquet.schema_arrow.names]
        _check_columns(path, present, layout)
        missing = [None] * (len(layout.names) - len(present))
        for record_batch in parquet.iter_batches(batch_size=batch, columns=present):
            columns = [column.to_pylist() for column in record_batch.columns]
            yield [(*row, *missing) for row in zip(*columns, strict=True)]
        return
    with path.open(encoding="utf-8", newline="") as file:
        if file_format == "csv":
            csv.field_size_limit(MAX_CSV_FIELD)  # a git diff or an HTML fragment may be megabytes
            rows: Iterator[list[Any]] = csv.reader(file)
            header = next(rows, None) or []
            _check_columns(path, header, layout)
            padding = [""] * (len(layout.names) - len(header))
            rows = (row + padding for row in rows)
            parse: Callable[[Any, type, bool], Any] = _csv_value
        else:
            rows = ([record.get(name) for name in layout.names] for record in map(json.loads, file))
            parse = _json_value
        types = layout.columns
        chunk: list[tuple[Any, ...]] = []
        for row in rows:
            chunk.append(
                tuple(
                    parse(value, kind, nullable)
                    for value, (_, kind, nullable) in zip(row, types, strict=True)
                )
            )
            if len(chunk) >= batch:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _check_columns(path: Path, found: list[str], layout: Layout) -> None:
    """Raise ValueError unless `found` is the layout's columns, or a start of them that leaves out
    only nullable ones (an older export)."""
    left_out = layout.columns[len(found) :]
    if found != layout.names[: len(found)] or not all(nullable for _, _, nullable in left_out):
        raise ValueError(f"{path.name} has columns {found}, expected {layout.names}")


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else value


def _csv_value(text: str, kind: type, nullable: bool) -> Any:
    if text == "" and (nullable or kind is not str):
        return None
    return kind(text)


def _json_value(value: Any, kind: type, nullable: bool) -> Any:
    if value is None:
        return None
    return float(value) if kind is float else value


def _arrow_schema(layout: Layout) -> Any:
    import pyarrow as pa

    types = {int: pa.int64(), float: pa.float64(), str: pa.string()}
    return pa.schema([pa.field(name, types[kind], nullable=True) for name, kind, _ in layout.columns])
