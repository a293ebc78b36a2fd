"""Progress of long commands: tqdm when installed, a plain text bar on stderr when it is not."""

import io
import subprocess
import sys

import pytest

from tallyboard.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` raises ImportError


def test_in_a_log_a_line_every_tenth_and_a_final_line(without_tqdm):
    log = io.StringIO()
    with progress_bar(1000, "copying", unit="row", stream=log) as bar:
        for _ in range(1000):
            bar.update()
    assert log.getvalue().splitlines() == [
        *(f"copying: {done:,}/1,000 rows ({done // 10}%)" for done in range(100, 1000, 100)),
        "copying: 1,000/1,000 rows (100%)",
    ]
    assert "\r" not in log.getvalue()


def test_a_jump_past_several_tenths_writes_one_line(without_tqdm):
    log = io.StringIO()
    with progress_bar(10, "importing", unit="run", stream=log) as bar:
        bar.update(7)
        bar.update(3)
    assert log.getvalue() == "importing: 7/10 runs (70%)\nimporting: 10/10 runs (100%)\n"


def test_on_a_terminal_one_line_redrawn_when_the_percentage_changes(without_tqdm):
    terminal = Terminal()
    with progress_bar(1000, "demo sweep", stream=terminal) as bar:
        for _ in range(1000):
            bar.update()
    drawn = terminal.getvalue()
    assert drawn.endswith("\rdemo sweep: 1,000/1,000 (100%)\n") and drawn.count("\n") == 1
    frames = drawn[1:-1].split("\r")
    assert len(frames) == 102  # each percentage 0..100 once, then the final line drawn over them
    assert frames[50] == "demo sweep: 500/1,000 (50%)"


def test_a_command_stopped_early_still_ends_with_where_it_got_to(without_tqdm):
    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt), progress_bar(None, "reading", unit="run", stream=log) as bar:
        bar.update(3)
        raise KeyboardInterrupt
    assert log.getvalue() == "reading: 3 runs\n"


def test_disabled_draws_nothing(without_tqdm):
    log = Terminal()
    with progress_bar(10, "quiet", enabled=False, stream=log) as bar:
        bar.update(10)
    assert log.getvalue() == ""


def test_copy_without_tqdm_shows_progress_on_stderr(tmp_path, demo_table):
    source = demo_table  # read only: the copy goes to tmp_path
    script = (
        "import sys; sys.modules['tqdm'] = None; from tallyboard.cli import main;"
        " sys.exit(main(['copy', sys.argv[1], sys.argv[2]]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, source, str(tmp_path / "copy.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("copying to ") and lines[-1].endswith("rows (100%)"), result.stderr
