"""A damaged SQLite file told apart: checked when opened, and named by any statement that meets it.

Why: SQLite reads a page only when a statement needs it, so a table whose middle pages were
overwritten (a disk error, a copy cut short, two hosts writing one file over a network file system)
opens, takes new runs, and fails later with a bare "database disk image is malformed" in whichever
read or commit meets the damage: a traceback in a script, a 500 in the dashboard.

Opening runs `PRAGMA quick_check` on a file of up to `WHOLE_CHECK_PAGES` pages (512 KiB at the
default page size: every new table and many a small one), which adds at most 2-4 ms to
`ResultTable(...)` (0.6-1 ms without it; an empty table: +0.1-0.3 ms). The check reads every
page, some 25 us each (0.5 s warm, 2.4 s cold on a 110 MB table), so a larger file is not read at
open and opens as fast as before.
Damage there is named by the statement that meets it, as the same `DamagedTableError`, which says
how to recover what is readable.
"""

from __future__ import annotations

import sqlite3

from tallyboard.errors import DamagedTableError

WHOLE_CHECK_PAGES = 128
SQLITE_CORRUPT = 11  # the primary result code; extended ones (SQLITE_CORRUPT_VTAB, ...) share its low byte
MAX_DETAIL = 200


def is_damage(error: BaseException) -> bool:
    """Whether SQLite raised `error` because the file's pages are not what they must be."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11 and later
    if code is not None:
        return bool(code & 0xFF == SQLITE_CORRUPT)
    return "malformed" in str(error)


def damaged(path: str, detail: object, changed: str = "nothing was changed") -> DamagedTableError:
    """The error naming the damaged file at `path`, what SQLite said (`detail`), and the way out."""
    said = " ".join(str(detail).replace("*** in database main ***", "").split())[:MAX_DETAIL]
    return DamagedTableError(
        f"{path!r} is damaged: SQLite cannot read some of its pages ({said}; {changed}). Recover what "
        f"is readable into a new file with `sqlite3 {path} .recover | sqlite3 recovered.db`, or use a backup"
    )


def check_when_small(conn: sqlite3.Connection, path: str) -> None:
    """Raise `DamagedTableError` when `PRAGMA quick_check` finds damage in the file of `conn`, a file
    of at most `WHOLE_CHECK_PAGES` pages (see the module docstring for why not a larger one)."""
    if conn.execute("PRAGMA page_count").fetchone()[0] > WHOLE_CHECK_PAGES:
        return
    try:
        verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as error:
        if not is_damage(error):
            raise
        verdict = str(error)
    if verdict != "ok":
        raise damaged(path, verdict)
