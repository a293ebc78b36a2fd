"""A hostile result table: a payload in every field a user (or a logged program) controls.

Shared by tests/dashboard (API: no 5xx) and tests/e2e (every page opened in Chromium: no script
of ours runs, nothing navigates away, no console errors). Logged through the public API, with the
git diff taken from a real repository holding a hostile uncommitted change.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import tallyboard as tb
from dashboard.sample_table import tiny_png

# Markup, attribute breakouts, URL schemes, template and formula syntax, bidi and control text.
PAYLOAD = (
    "<img src=x onerror=\"window.pwned=1;document.title='pwned'\"><script>window.pwned=2</script>"
    "\"'><svg onload=window.pwned=3>javascript:window.pwned=4 {{csrf}} ${window.pwned=5} "
    '=HYPERLINK("http://evil.example") \u202e\u0007'
)  # no NUL: the store refuses it at the call (values.check_text), so it never reaches a page
SHORT = "<b onmouseover=window.pwned=6>x</b>'\"`;=--{}"  # for names, which get their own limits
FRAGMENT = (
    "<p id='frag'>fragment</p><meta http-equiv='refresh' content='0;url=http://evil.example/meta'>"
    "<script>try { top.location = 'http://evil.example/top' } catch (e) {}"
    "try { parent.pwned = 7 } catch (e) {}"
    "fetch('http://evil.example/fetch').catch(() => {});"
    "try { new RTCPeerConnection() } catch (e) {}"
    "document.body.append(Object.assign(document.createElement('iframe'), {srcdoc: 'x'}));"
    "</script>"
)
NAMES = ("constructor", "toString", "valueOf", "__proto__", "hasOwnProperty", SHORT)


def _hostile_repository(folder: Path) -> Path:
    """A git repository with a committed file and a hostile uncommitted change to it."""
    repo = folder / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", PAYLOAD[:60]]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    (repo / f"{SHORT[:8].replace('/', '_')}.py").write_text(f"x = {PAYLOAD!r}\n", encoding="utf-8")
    return repo


def log_hostile(folder: Path) -> Path:
    """The hostile table in `folder`/hostile.db; returns its path."""
    path = folder / "hostile.db"
    config = folder / "config.yaml"
    config.write_text(f"name: {PAYLOAD!r}\n", encoding="utf-8")
    repo = _hostile_repository(folder)
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    table.show_column("note", 1)
    table.show_column("status", 2)
    here = Path.cwd()
    os.chdir(repo)
    try:
        for index in range(2):
            run = table.new_run(PAYLOAD, configfile=str(config), cli={SHORT: PAYLOAD, "i": index},
                                comment=PAYLOAD, tag=SHORT, auto_log_plt=False)  # fmt: skip
            run.add_hparams(**{name: f"{PAYLOAD}{index}" for name in NAMES[index::2]}, lr=index)
            run.add_scalar(f"{SHORT}/{PAYLOAD}", 1.0, step=0)
            for step in range(1, 5):
                run.add_scalar(f"{SHORT}/{PAYLOAD}", float("inf") if step == 2 else step, step=step)
            run.add_image(tiny_png(), tag=PAYLOAD, step=0)
            run.add_text(PAYLOAD, tag=PAYLOAD, step=0)
            run.add_fragment(FRAGMENT, tag=PAYLOAD, step=0)
            run.set_note(PAYLOAD)
            run.write_result(**{f"{SHORT}{index}": PAYLOAD, "constructor": index})
    finally:
        os.chdir(here)
    table.close()
    return path


@pytest.fixture(scope="session")
def hostile_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return log_hostile(tmp_path_factory.mktemp("hostile"))
