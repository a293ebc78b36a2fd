"""Opening a table never writes by itself (issue 11), checked on real SQLite files.

Reading commands (`runs`, `export`, `serve` with or without `--read-only`) and `ResultTable(path)`
leave whatever they are pointed at byte for byte as it was -- the file and its `-wal`/`-shm`
siblings -- and say in one line what is there instead of a result table. Only writing opens create a
table, and an older table is migrated by the first write, not by being opened.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from store.schema_versions import downgrade
from tallyboard.dashboard import create_app
from tallyboard.run import sink as sink_module
from tallyboard.store import Access, NotAResultTable, open_store, schema

DEEPBOARD_WRITER = Path(__file__).parents[1] / "integrations" / "deepboard_writer.py"
SIBLINGS = ("", "-wal", "-shm", "-journal")


def fingerprint(path: Path) -> dict[str, str | None]:
    """The sha256 of the file and of each sibling SQLite may create (None: absent). The `-shm` of a
    database that another program has open in WAL mode is only said to exist: it is shared memory
    whose read marks every reader updates (the `sqlite3` shell too), never data."""
    live_wal = Path(f"{path}-wal").exists()
    return {
        suffix: ("exists" if suffix == "-shm" and live_wal else sha256(Path(f"{path}{suffix}")))
        if Path(f"{path}{suffix}").exists()
        else None
        for suffix in SIBLINGS
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plain_database(folder: Path) -> Path:
    path = folder / "plain.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
        conn.execute("INSERT INTO invoices (amount) VALUES (9.5)")
    conn.close()
    return path


OTHER_PROGRAMS: list[subprocess.Popen] = []  # processes keeping a database open during a test
WAL_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY)")
conn.execute("INSERT INTO events DEFAULT VALUES")
print("ready", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@pytest.fixture(autouse=True)
def _end_other_programs():
    yield
    while OTHER_PROGRAMS:
        program = OTHER_PROGRAMS.pop()
        program.communicate(timeout=30)


def wal_database(folder: Path) -> Path:
    """Another program's database in WAL mode, with rows still in its `-wal`: that program is
    running, its connection open (in a process of its own: POSIX locks belong to a process)."""
    path = folder / "app.db"
    program = subprocess.Popen(
        [sys.executable, "-c", WAL_WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    OTHER_PROGRAMS.append(program)
    assert program.stdout is not None and program.stdout.readline() == "ready\n"
    return path


def deepboard_table(folder: Path) -> Path:
    subprocess.run([sys.executable, str(DEEPBOARD_WRITER), "old.db"], cwd=folder, check=True, timeout=120)
    return folder / "old.db"


def text_file(folder: Path) -> Path:
    path = folder / "notes.db"
    path.write_text("not a database\n")
    return path


def empty_file(folder: Path) -> Path:
    path = folder / "empty.db"
    path.touch()
    return path


# (what is there, what the error must say)
def closed_wal_database(folder: Path) -> Path:
    """Another program's database in WAL mode that nobody has open (no `-wal`, no `-shm`)."""
    path = wal_database(folder)
    OTHER_PROGRAMS.pop().communicate(timeout=30)
    assert not Path(f"{path}-wal").exists()
    return path


NOT_TABLES: list[tuple[Callable[[Path], Path], str]] = [
    (plain_database, "another SQLite database (tables: invoices)"),
    (wal_database, "another SQLite database (tables: events)"),
    (closed_wal_database, "another SQLite database (tables: events)"),
    (deepboard_table, "import it with `tallyboard import deepboard"),
    (text_file, "not a SQLite database"),
]
READERS = [("runs",), ("export", "--out", "{out}"), ("serve", "--port", "1")]


@pytest.mark.parametrize(
    ("make", "said"), [*NOT_TABLES, (empty_file, "holds no result table (an empty file")]
)
@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_reading_commands_leave_what_is_not_a_table_as_it_was(make, said, command, tmp_path: Path) -> None:
    path = make(tmp_path)
    before = fingerprint(path)
    args = [part.format(out=tmp_path / "out") for part in command]
    assert_one_line_error(run_cli(args[0], path, *args[1:], check=False), said, "nothing was")
    assert fingerprint(path) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("make", "said"), NOT_TABLES)
@pytest.mark.parametrize("read_only", [False, True])
def test_the_dashboard_and_result_table_leave_what_is_not_a_table_as_it_was(
    make, said, read_only: bool, tmp_path: Path
) -> None:
    path = make(tmp_path)
    before = fingerprint(path)
    with pytest.raises(NotAResultTable, match=said.replace("(", r"\(").replace(")", r"\)")):
        create_app(str(path), read_only=read_only)
    with pytest.raises(NotAResultTable):
        tb.ResultTable(path)
    assert fingerprint(path) == before


def test_a_missing_path_is_created_by_no_reading_command(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    for command in READERS:
        args = [part.format(out=tmp_path / "out") for part in command]
        result = run_cli(args[0], path, *args[1:], check=False)
        assert_one_line_error(result, "does not exist", "nothing was created")
    with pytest.raises(FileNotFoundError):
        create_app(str(path), read_only=True)
    assert sorted(tmp_path.iterdir()) == []


def test_result_table_creates_a_table_where_there_is_nothing(tmp_path: Path) -> None:
    """A new path, an empty file (what `mktemp` leaves), a database without tables: nothing to damage."""
    without_tables = tmp_path / "vacuumed.db"
    sqlite3.connect(without_tables).execute("VACUUM").connection.close()
    for path in (tmp_path / "new.db", empty_file(tmp_path), without_tables):
        table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
        with table.new_run("first") as run:
            run.add_scalar("loss", 1.0)
        assert table.runs == [run.run_id]
        table.close()


def version_1_table(folder: Path) -> Path:
    """A table as tallyboard 1 left it: schema version 1, no `scalar_blocks`, fully checkpointed."""
    path = folder / "v1.db"
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("old", comment="from v1") as run:
        run.add_scalar("loss", 2.0)
        run.add_scalar("loss", 1.0)
    table.close()
    for sink in list(sink_module._all_sinks):  # its writer's last close checkpoints the file: let it
        if getattr(sink, "key", None) == os.path.realpath(path):  # happen now, not after `before` was taken
            sink._thread.join(timeout=30)
    downgrade(str(path), 1)
    with sqlite3.connect(path) as conn:  # the last connection: SQLite folds the WAL back in
        pass
    conn.close()
    return path


def test_an_older_table_is_read_as_it_is_by_reading_commands(tmp_path: Path) -> None:
    path = version_1_table(tmp_path)
    before = fingerprint(path)
    assert "from v1" in run_cli("runs", path).stdout
    run_cli("export", path, "--out", tmp_path / "out", "--quiet")
    assert (tmp_path / "out" / "scalars.csv").read_text().count("\n") == 3  # header and two points
    table = tb.ResultTable(path)  # opened by a program that only reads
    assert [point.value for point in table.load_run(1).get_scalar("loss")] == [2.0, 1.0]
    table.close()
    assert fingerprint(path)[""] == before[""]
    assert open_store(path).meta("schema_version") == "1"


def test_the_dashboard_names_the_command_that_migrates_an_older_table(tmp_path: Path) -> None:
    path = version_1_table(tmp_path)
    before = fingerprint(path)
    for read_only in (False, True):
        with pytest.raises(NotAResultTable, match=f"tallyboard migrate {path}"):
            create_app(str(path), read_only=read_only)
    result = run_cli("serve", path, "--read-only", check=False)
    assert_one_line_error(result, "schema version 1", f"`tallyboard migrate {path}`")
    assert fingerprint(path)[""] == before[""]
    assert f"from schema version 1 to {schema.SCHEMA_VERSION}" in run_cli("migrate", path).stdout
    assert f"already at version {schema.SCHEMA_VERSION}" in run_cli("migrate", path).stdout
    create_app(str(path), read_only=True)


def test_an_older_table_is_migrated_by_the_first_write(tmp_path: Path) -> None:
    path = version_1_table(tmp_path)
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    assert open_store(path).meta("schema_version") == "1"
    with table.new_run("new") as run:
        run.add_scalar("loss", 3.0)
    table.close()
    store = open_store(path)
    assert store.meta("schema_version") == str(schema.SCHEMA_VERSION)
    assert store.execute("SELECT run_id, lowest, highest FROM scalar_blocks ORDER BY run_id") == [
        (1, 1.0, 2.0),
        (run.run_id, 3.0, 3.0),
    ]
    store.close()


def test_a_newer_table_is_refused_by_every_open(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    open_store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    before = fingerprint(path)
    assert_one_line_error(run_cli("runs", path, check=False), "schema version 99", "upgrade tallyboard")
    with pytest.raises(NotAResultTable, match="upgrade tallyboard"):
        tb.ResultTable(path)
    assert fingerprint(path) == before


# ---- one file: the WAL is checkpointed when the last writer closes ----------------------------------
def wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_the_last_writer_of_a_file_to_close_checkpoints_it(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    first, second = open_store(path), open_store(path)
    second.create_run({"experiment": "e", "start_time": 0.0})
    reader = sqlite3.connect(path)  # someone else keeps the file open: SQLite alone would not fold the WAL
    second.close()
    assert wal_size(path) > 0  # `first` still writes: its WAL is left alone
    first.close()
    assert wal_size(path) == 0
    reader.close()
    copied = tmp_path / "alone" / "results.db"
    copied.parent.mkdir()
    shutil.copy(path, copied)  # the .db alone, as a user mails it
    assert [run.experiment for run in open_store(copied).runs()] == ["e"]


def test_a_process_that_exits_without_closing_leaves_everything_in_the_db(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    script = (
        "import tallyboard as tb\n"
        f"table = tb.ResultTable({str(path)!r}, nocommit_action=tb.NoCommitAction.NOP)\n"
        "run = table.new_run('quickstart')\n"
        "for step in range(2000):\n"
        "    run.add_scalar('train/loss', 1 / (step + 1))\n"
        "run.write_result(accuracy=0.9)\n"
        "table.close()\n"  # the sink's connection stays open until the process ends
    )
    holder = sqlite3.connect(path)  # keeps SQLite from deleting the WAL when the child exits
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert wal_size(path) == 0
    holder.close()
    copied = tmp_path / "mailed.db"
    shutil.copy(path, copied)
    store = open_store(copied, access=Access.READ)
    assert len(store.scalars(1, "train/loss")) == 2000
    store.close()


def test_copy_of_a_live_table_uses_the_backup_api_and_misses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    writer = open_store(path)
    run_id = writer.create_run({"experiment": "live", "start_time": 0.0})
    reader = sqlite3.connect(path)  # rows stay in the -wal while both are open
    assert wal_size(path) > 0
    run_cli("copy", path, tmp_path / "backup.db", "--quiet")
    assert not Path(f"{tmp_path / 'backup.db'}-wal").exists()  # the copy is one file
    backup = open_store(tmp_path / "backup.db", access=Access.READ)
    assert [run.run_id for run in backup.runs()] == [run_id]
    backup.close()
    reader.close()
    writer.close()


def test_opening_a_table_again_keeps_this_process_s_locks_on_it(tmp_path: Path) -> None:
    """Reading a file's bytes from Python would drop every POSIX lock this process holds on it;
    another process closing its connection would then delete the WAL the writer still uses."""
    path = tmp_path / "results.db"
    writer = open_store(path)
    run_id = writer.create_run({"experiment": "e", "start_time": 0.0})
    open_store(path, access=Access.READ).close()
    tb.ResultTable(path).close()
    other = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT 1 FROM runs'); c.close()"
    )
    subprocess.run([sys.executable, "-c", other, str(path)], check=True, timeout=60)
    writer.update_run(run_id, note="still in the same file")
    fresh = sqlite3.connect(path)
    assert fresh.execute("SELECT note FROM runs").fetchall() == [("still in the same file",)]
    fresh.close()
    writer.close()
