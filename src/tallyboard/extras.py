"""Which pip extra of tallyboard brings which third-party module, for the hints of missing ones.

The core installs nothing (the logging path is standard library only), so a command that needs more
fails with ModuleNotFoundError; the hint must name the extra that really provides the module, not a
catch-all, and say how to install it from a clone too, since that is how most users get tallyboard.
Keep this table in step with `[project.optional-dependencies]` in pyproject.toml (a test checks it).
"""

from __future__ import annotations

EXTRA_OF_MODULE: dict[str, str] = {
    "starlette": "dashboard",
    "uvicorn": "dashboard",
    "markdown_it": "dashboard",
    "nh3": "dashboard",
    "scipy": "dashboard",
    "psycopg": "postgres",
    "numpy": "media",
    "PIL": "media",
    "sklearn": "demo",
    "matplotlib": "demo",
    "pyarrow": "export",
    "pandas": "export",
    "tensorboard": "tensorboard",
    "fsspec": "artifacts",
    "s3fs": "artifacts",
    "psutil": "integrations",
    "pynvml": "integrations",
    "lightning": "integrations",
    "transformers": "integrations",
    "keras": "integrations",
}


def install_hint(module: str) -> str:
    """One line telling how to install the extra that provides `module` (its top-level package)."""
    package = module.partition(".")[0]
    extra = EXTRA_OF_MODULE.get(package, "all")
    return (
        f"{package} is not installed; it comes with the [{extra}] extra: pip install 'tallyboard[{extra}]'"
        f" (from a clone: pip install -e '.[{extra}]')"
    )


def missing_framework(error: ImportError, purpose: str) -> ImportError:
    """The error to raise when a framework import fails: it names the pip extra that installs it."""
    return ImportError(
        f"{purpose} needs {error.name or 'a package'!r}, which is not installed: "
        "pip install 'tallyboard[integrations]'",
        name=error.name,
    )
