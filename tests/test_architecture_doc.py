"""docs/architecture.md held to the tree: it names every module of the package by its path under
src/tallyboard (`run/sink.py`), and no module that does not exist; and the top level stays small.

A module added without a line in the map, or a module moved or removed while the map still names
it, fails here, so the page a newcomer reads first is never stale about where things are.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "tallyboard"
DOC = REPO / "docs" / "architecture.md"
# A `.py` path as written in prose: `run/sink.py`, `__init__.py`, `src/tallyboard/table.py`; never
# the tail of a longer path (`../shared/x.py`) or of a dotted name.
PY_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
# Paths of the repository outside the package, named in the page as such.
OUTSIDE = ("tests/", "bench/", "scripts/", "examples/", "docs/")
# The peers' APIs as thin skins, under the names their users import (DESIGN.md), are not counted
# against the top level.
SKINS = {"wandb.py", "tensorboard.py", "mlflow.py"}
MAX_TOP_LEVEL = 12


def package_modules(package: Path = PACKAGE) -> set[str]:
    """Every module of the package by its path under it (the front end's folder holds none)."""
    return {path.relative_to(package).as_posix() for path in package.rglob("*.py")}


def named_modules(text: str) -> set[str]:
    """The package paths that `text` names: `.py` paths outside OUTSIDE, `src/tallyboard/` dropped."""
    names = set()
    for match in PY_PATH.finditer(text):
        path = match.group(1)
        for prefix in ("src/tallyboard/", "tallyboard/"):
            path = path.removeprefix(prefix)
        if not path.startswith(OUTSIDE) and not path.startswith("src/"):
            names.add(path)
    return names


def test_the_page_names_every_module():
    missing = sorted(package_modules() - named_modules(DOC.read_text(encoding="utf-8")))
    assert not missing, f"docs/architecture.md (Layout) should say what each of these is for: {missing}"


def test_the_page_names_no_module_that_does_not_exist():
    stale = sorted(named_modules(DOC.read_text(encoding="utf-8")) - package_modules())
    assert not stale, f"docs/architecture.md names modules that are not in src/tallyboard: {stale}"


def test_at_most_twelve_modules_sit_at_the_top_level():
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in SKINS)
    assert len(top) <= MAX_TOP_LEVEL, (
        f"{len(top)} modules directly under src/tallyboard/ (at most {MAX_TOP_LEVEL}): {top}; "
        "give the family a folder"
    )


def test_the_path_reader_tells_package_paths_from_others():
    text = (
        "`run/sink.py` and `__init__.py`, `src/tallyboard/table.py`, `tests/run/test_sink.py`,\n"
        "`../shared/x.py`, `bench/scalars.py`, `store/` (a folder), `values.py`; runs.pyc, run.sink\n"
    )
    assert named_modules(text) == {"run/sink.py", "__init__.py", "table.py", "values.py"}


def test_the_module_lister_sees_every_folder():
    modules = package_modules()
    assert {"__init__.py", "table.py", "run/sink.py", "store/__init__.py", "dashboard/app.py"} <= modules
    assert not any(path.startswith("dashboard/static/") for path in modules)
