"""The locks of the test environment agree with pyproject.toml: every requirement that the `test`
extra pulls in (through `tallyboard[...]` too) is locked, at a version its range admits, for each
Python version there is a lock for. A changed range or a new dependency without `bash
scripts/lock.sh` fails here, before a fresh machine installs something else than CI tested."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCKS = sorted((ROOT / "requirements").glob("test-py*.lock"))
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def locked(lock: Path) -> dict[str, Version]:
    """{canonical name: version} of a lock written by `uv pip compile`."""
    found = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = PINNED.match(line)
        if match:
            found[canonicalize_name(match[1])] = Version(match[2])
    return found


def requirements_of(
    extra: str, extras: dict[str, list[str]], seen: set[str] | None = None
) -> list[Requirement]:
    """The requirements of one extra of ours, the extras it names (`tallyboard[a,b]`) expanded."""
    seen = set() if seen is None else seen
    if extra in seen:
        return []
    seen.add(extra)
    out = []
    for text in extras[extra]:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == "tallyboard":
            for inner in sorted(requirement.extras):
                out += requirements_of(inner, extras, seen)
        else:
            out.append(requirement)
    return out


def test_a_lock_for_each_supported_python():
    assert [lock.name for lock in LOCKS] == [f"test-py3.{minor}.lock" for minor in (10, 11, 12)]


@pytest.mark.parametrize("lock", LOCKS, ids=lambda lock: lock.name)
def test_every_requirement_of_the_test_extra_is_locked_within_its_range(lock: Path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [Requirement(text) for text in project["dependencies"]]
    wanted += requirements_of("test", project["optional-dependencies"])
    torch_pins = (ROOT / "requirements" / "torch.txt").read_text(encoding="utf-8").splitlines()
    wanted += [Requirement(line) for line in torch_pins if line.strip() and not line.startswith("#")]
    python = lock.stem.removeprefix("test-py")
    where = {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
    }
    versions = locked(lock)
    wrong = []
    for requirement in wanted:
        if requirement.marker is not None and not requirement.marker.evaluate({**where, "extra": ""}):
            continue
        version = versions.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} (locked: {version})")
    assert not wrong, f"{lock.name} disagrees with pyproject.toml; run `bash scripts/lock.sh`: {wrong}"


def test_the_check_catches_a_range_the_lock_does_not_meet():
    extras = {"test": ["tallyboard[dashboard]", "pytest>=8"], "dashboard": ["starlette>=99"]}
    found = requirements_of("test", extras)
    assert [str(r) for r in found] == ["starlette>=99", "pytest>=8"]
    assert not found[0].specifier.contains(Version("1.10.0"))
