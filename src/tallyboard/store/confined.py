"""Files of an import source, confined to it: the one check every importer makes before it reads.

Why: an export bundle or a log directory may come from someone else, and what an import reads
ends up in the table, where the dashboard serves it and an export writes it out again. A name in
the source (`media.csv`'s `file`, an artefact's blob, an event file found by walking) must
therefore never reach a file outside the source: not by "..", not as an absolute path, not
through a symlink inside the source that points out of it. The path is resolved (every symlink
followed) and must still lie under the resolved root.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from tallyboard.errors import OutsideSourceError


def confined_path(root: str | os.PathLike[str], name: str | os.PathLike[str], entry: str) -> Path:
    """The file `name` (a path relative to `root`) resolved, when it lies inside `root`.

    Anything else is an `OutsideSourceError` whose message names `entry` (which row or file of the
    source gave the name) and the name itself: an absolute name, one whose ".." climbs out, and one
    that a symlink leads out of. A file that does not exist is not refused here: the caller says
    what is missing."""
    base = Path(root).resolve()
    if PurePath(name).is_absolute() or Path(name).drive:
        raise _outside(root, name, entry, "an absolute path")
    try:
        resolved = (base / name).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise _outside(root, name, entry, f"a path that does not resolve ({error})") from None
    if not resolved.is_relative_to(base):
        how = "a symlink" if ".." not in PurePath(name).parts else "a path"
        raise _outside(root, name, entry, f"{how} leading to {str(resolved)!r}")
    return resolved


def _outside(
    root: str | os.PathLike[str], name: str | os.PathLike[str], entry: str, what: str
) -> OutsideSourceError:
    return OutsideSourceError(
        f"{entry} names {os.fspath(name)!r}, {what}, outside {os.fspath(root)!r}: refused (an import"
        " reads only files inside the source it was given)"
    )
