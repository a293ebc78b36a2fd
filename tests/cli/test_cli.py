"""The `tallyboard` command itself: help with examples, one-line errors, `runs`, `copy`, `serve`.

Every test runs the real command in a subprocess on real files (`python -m tallyboard`, and the
installed console script once), the way a user's shell would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tallyboard
from cli_runner import CLI_TIMEOUT_S, assert_one_line_error, run_cli
from sample_tables import sample_table_in
from tallyboard.store import open_store

COMMANDS = ("serve", "demo", "runs", "export", "import", "copy", "watch")


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_table_in(tmp_path_factory.mktemp("sample"))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.stdout.startswith(f"usage: tallyboard {command}")
    assert "examples:\n  tallyboard " in result.stdout


def test_top_level_help_lists_the_commands_and_the_script_is_installed() -> None:
    help_text = run_cli("--help").stdout
    for command in COMMANDS:
        assert command in help_text
    script = shutil.which("tallyboard")
    assert script is not None, "pip install -e . installs the `tallyboard` console script"
    version = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"tallyboard {tallyboard.__version__}"


def test_usage_errors_exit_2_with_usage() -> None:
    result = run_cli(check=False)
    assert result.returncode == 2
    assert "usage: tallyboard" in result.stderr and "Traceback" not in result.stderr
    for command in COMMANDS:  # a bare `tallyboard` lists what it can do
        assert f"\n    {command} " in result.stderr, result.stderr
    assert run_cli("export", "x.db", "--format", "xml", "--out", "o", check=False).returncode == 2


def test_runs_prints_the_table_in_layout_order_with_aliases(sample_db: str) -> None:
    lines = run_cli("runs", sample_db).stdout.splitlines()
    header = lines[0].split()
    assert header[:3] == ["Run", "ID", "Experiment"]
    assert "Accuracy" in header and "optimizer" not in header  # renamed column shown, hidden one not
    assert len(lines) == 1 + 3  # the hidden run is left out
    assert "baseline" in lines[2] and "0.97" in lines[2] and "finished" in lines[2]
    assert len(run_cli("runs", sample_db, "--all").stdout.splitlines()) == 1 + 4


def test_runs_json_and_filter(sample_db: str) -> None:
    runs = json.loads(run_cli("runs", sample_db, "--json", "--all").stdout)
    by_id = {run["run_id"]: run for run in runs}
    assert sorted(by_id) == [-1, 1, 2, 3]
    assert by_id[1]["hparams"] == {"lr": 0.1, "optimizer": "sgd", "nesterov": True, "layers": 2}
    assert by_id[1]["results"]["loss"] == "NaN"  # valid JSON, not a bare NaN token (json_numbers.py)
    assert by_id[2]["hidden"] is True
    filtered = run_cli("runs", sample_db, "--json", "--all", "--filter", 'lr < 0.5 and status == "finished"')
    assert [run["run_id"] for run in json.loads(filtered.stdout)] == [1]
    by_alias = run_cli("runs", sample_db, "--json", "--filter", "`Accuracy (val)` > 0.5")
    assert [run["run_id"] for run in json.loads(by_alias.stdout)] == [1]
    assert_one_line_error(
        run_cli("runs", sample_db, "--filter", "lr <", check=False), "tallyboard runs: error:"
    )
    assert_one_line_error(run_cli("runs", sample_db, "--filter", "nope == 1", check=False), "nope")


# `tallyboard runs` where the dashboard extra is not installed: starlette cannot be imported.
WITHOUT_STARLETTE = """
import sys
sys.modules["starlette"] = None  # `import starlette` now raises ImportError
from tallyboard.cli import main
status = main(sys.argv[1:])
print("dashboard imported:", "tallyboard.dashboard" in sys.modules, file=sys.stderr)
sys.exit(status)
"""


def test_runs_filter_needs_neither_starlette_nor_the_dashboard(sample_db: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_STARLETTE, "runs", sample_db, "--json", "--filter", "lr < 0.5"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    assert [run["run_id"] for run in json.loads(result.stdout)] == [1]
    assert result.stderr.strip() == "dashboard imported: False"


def test_reading_commands_never_create_a_missing_table(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for args in (("runs", missing), ("serve", missing), ("copy", missing, tmp_path / "b.db")):
        assert_one_line_error(run_cli(*args, check=False), "missing.db")
    assert not missing.exists() and not (tmp_path / "b.db").exists()


def test_a_directory_is_called_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for command in ("serve", "runs", "copy"):
        args = (command, folder, tmp_path / "b.db") if command == "copy" else (command, folder)
        assert_one_line_error(run_cli(*args, check=False), "it is a directory")


# A command whose extra is missing: the hint names the extra that brings the module, and no other.
WITHOUT_MODULE = """
import sys
sys.modules[sys.argv[1]] = None  # importing it now raises ModuleNotFoundError
from tallyboard.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("module", "extra", "args"),
    [("starlette", "dashboard", ("serve",)), ("sklearn", "demo", ("demo", "--no-serve"))],
)
def test_a_missing_module_names_its_extra(tmp_path: Path, module: str, extra: str, args: tuple) -> None:
    target = sample_table_in(tmp_path) if args[0] == "serve" else "--db=" + str(tmp_path / "d.db")
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULE, module, *args, target],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert_one_line_error(result, f"{module} is not installed", f"pip install 'tallyboard[{extra}]'")
    assert f"pip install -e '.[{extra}]'" in result.stderr


def test_every_extra_named_in_a_hint_exists() -> None:
    import tomllib

    from tallyboard.extras import EXTRA_OF_MODULE

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_OF_MODULE.values()) <= set(extras)


def test_copy_copies_every_run(sample_db: str, db_url: str) -> None:
    assert "copied 4 runs" in run_cli("copy", sample_db, db_url, "--quiet").stdout
    run_cli("copy", sample_db, db_url, "--quiet")  # twice changes nothing
    source, copied = open_store(sample_db), open_store(db_url)
    try:
        strip = lambda runs: [run._replace(updated_at=None) for run in runs]  # noqa: E731
        assert strip(copied.runs(show_hidden=True)) == strip(source.runs(show_hidden=True))
        assert copied.scalars(1, "train/loss") == source.scalars(1, "train/loss")
    finally:
        source.close()
        copied.close()


@pytest.mark.parametrize(
    "arguments",
    [
        ["compare", "{db}", "--metric", "acc", "--runs", "1", "999"],
        ["export", "{db}", "--out", "{out}", "--runs", "999"],
        ["artifacts", "list", "999", "--table", "{db}"],
        ["artifacts", "get", "999", "model.pt", "--table", "{db}"],
    ],
    ids=["compare", "export", "artifacts-list", "artifacts-get"],
)
def test_a_run_id_not_in_the_table_is_one_plain_line_and_exit_1(sample_db: str, tmp_path: Path, arguments):
    """`compare` said `error: KeyError: 'no run with id 8'`: the message alone, as every command
    that takes run ids says it, and never an empty success (`artifacts list` printed "no artefacts")."""
    filled = [part.format(db=sample_db, out=tmp_path / "out") for part in arguments]
    result = run_cli(*filled, check=False)
    assert_one_line_error(result, f"tallyboard {filled[0]}: error: no run with id 999")
    assert result.returncode == 1 and "Error" not in result.stderr and "'no run" not in result.stderr


def test_a_metric_no_run_logged_is_one_plain_line(sample_db: str):
    result = run_cli("compare", sample_db, "--metric", "no/such", check=False)
    assert_one_line_error(result, "error: none of these runs logged a scalar or result named 'no/such'")
    assert "KeyError" not in result.stderr
