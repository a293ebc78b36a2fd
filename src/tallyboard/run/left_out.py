"""What a run's capture leaves out, and how it says so.

A run stores the text of its config file and of the untracked files of its repository (in the git
diff) so that it can be run again. A dataset, a checkpoint or a log lying untracked in the
repository would make every run carry megabytes (a 69 MB CSV once added 135 MB per run), and a
binary file is no use in a text diff. So a file enters the capture only when it is text (no NUL
byte, git's own test) and small: at most `MAX_FILE_BYTES` each, and the untracked files of one
diff at most `MAX_TOTAL_BYTES` together (taken in path order). Anything else is listed instead, by
path, size and sha256, in a line that starts with `MARKER` followed by a JSON object:

    # tallyboard left out: {"path": "data/train.csv", "size": 69000000, "sha256": "...", "reason": "..."}

The git diff itself is capped (capture.py): the changed files whose part of it does not fit are
listed the same way, as they are in the working tree, with the reason `past_the_cap` gives.

In the git diff these lines come before the first ``diff --git``, where ``git apply`` ignores
them; a left-out config file is stored as its one line. `parse` reads them back, so a reader (the
dashboard, an export) needs nothing but the stored text to say what was left out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Protocol

MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024
# Files larger than this are listed without a sha256: hashing gigabytes would delay the run's start.
MAX_HASHED_BYTES = 256 * 1024 * 1024
MARKER = "# tallyboard left out: "
_CHUNK = 1 << 16
_TEXT_PROBE = 8000  # git decides text/binary from the first 8000 bytes


@dataclass(frozen=True)
class LeftOut:
    """A file that a run's capture lists instead of storing. `sha256` is None above `MAX_HASHED_BYTES`."""

    path: str
    size: int
    sha256: str | None
    reason: str

    def line(self) -> str:
        return MARKER + json.dumps(asdict(self), ensure_ascii=False)


TOO_LARGE = f"larger than {MAX_FILE_BYTES // 1024} kB"
BINARY = "binary"
OVER_TOTAL = f"untracked files over {MAX_TOTAL_BYTES // (1024 * 1024)} MB in all"


def past_the_cap(max_bytes: int) -> str:
    """Why a changed file is listed instead of its diff: the stored diff's cap of `max_bytes`."""
    size = f"{max_bytes >> 20} MB" if max_bytes and not max_bytes % (1 << 20) else f"{max_bytes:,}-byte"
    return f"its changes are past the {size} cap on the stored git diff"


def is_binary(head: bytes) -> bool:
    """Git's test: a NUL byte in the first 8000 bytes."""
    return b"\0" in head[:_TEXT_PROBE]


class Readable(Protocol):
    """What reading a file's head and digest needs: an open binary file, or capture's wrapper of a
    text one."""

    def read(self, size: int = -1, /) -> bytes: ...


def read_head(file: Readable) -> tuple[bytes, str | None]:
    """The first bytes of a file, up to one more than `MAX_FILE_BYTES`, and why it must be left out
    (`TOO_LARGE`, `BINARY`) or None."""
    head = file.read(MAX_FILE_BYTES + 1)
    if len(head) > MAX_FILE_BYTES:
        return head, TOO_LARGE
    return head, BINARY if is_binary(head) else None


def rest_digest(file: Readable, head: bytes) -> tuple[int, str]:
    """(size, sha256) of `head` followed by what is left of `file`, read in chunks."""
    digest, size = hashlib.sha256(head), len(head)
    while chunk := file.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def parse(text: str | None) -> list[LeftOut]:
    """The files listed as left out in a stored git diff or config text (empty if none)."""
    if not text or MARKER not in text:
        return []
    found = []
    for line in text.splitlines():
        if line.startswith(MARKER):
            try:
                found.append(LeftOut(**json.loads(line[len(MARKER) :])))
            except (TypeError, ValueError):
                continue  # a line of the user's own that merely starts like ours
    return found


def listed_config(content: str | None) -> LeftOut | None:
    """The left-out config file a stored config text stands for, or None when it is the file's text."""
    if not content or not content.startswith(MARKER) or "\n" in content:
        return None
    found = parse(content)
    return found[0] if found else None
