"""Importers of other tools' logs, found by name: the `tallyboard.importers` entry points.

Why a registry: `ResultTable.import_tensorboard` and `import_deepboard` belong to the table, but
their code lives in `integrations/`, which depends on the core and never the other way round (not
even lazily: tests/test_layering.py). The package declares its importers as entry points in
pyproject.toml, and the table looks them up by name here, so the core names no integration module.
Another package registers its own importer the same way and `ResultTable.import_from` runs it
(docs/integrations.md, "Importers of your own").

An importer is called as `importer(source, into, progress=False, **options)`: `into` is the location
of the table, a `tallyboard.store.Location` (its `str()` shows it without a password), that it opens
for writing itself (`exchange.target.open_target`, or `open_store`, take it as it is).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from tallyboard.extras import install_hint

GROUP = "tallyboard.importers"

Importer = Callable[..., Any]


def registered() -> dict[str, EntryPoint]:
    """{name: entry point} of every importer installed in this environment."""
    return {point.name: point for point in entry_points(group=GROUP)}


def load(name: str) -> Importer:
    """The importer registered as `name`. A name nobody registered is a LookupError listing the
    installed ones; an importer whose third-party module is missing is a ModuleNotFoundError whose
    message names the pip extra that brings it."""
    points = registered()
    point = points.get(name)
    if point is None:
        installed = ", ".join(sorted(points)) or "none (reinstall tallyboard: pip install -e .)"
        raise LookupError(
            f"no importer named {name!r} is installed; installed importers: {installed}. "
            f"A package adds one as an entry point in the {GROUP!r} group"
        )
    try:
        importer: Importer = point.load()
    except ModuleNotFoundError as error:
        if (error.name or "tallyboard").startswith("tallyboard"):
            raise
        raise ModuleNotFoundError(
            f"the {name} importer cannot load: {install_hint(error.name or 'a module')}", name=error.name
        ) from error
    return importer
