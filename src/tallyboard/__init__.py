"""tallyboard: log deep-learning runs to one reproducible result table and browse them offline.

The public API is re-exported here. Names are resolved lazily so that ``import tallyboard`` stays
cheap (no numpy, pandas, matplotlib or PIL) even inside a short-lived worker process.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tallyboard import monitor

__version__ = "0.1.0"

_LAZY = {
    "ResultTable": "tallyboard.table",
    "NoCommitAction": "tallyboard.table",
    "DuplicateRunError": "tallyboard.store",
    "ReadOnlyTableError": "tallyboard.store",
    "LogWriter": "tallyboard.writer",
    "RunView": "tallyboard.run_view",
    "ResultTableEventHandler": "tallyboard.handlers",
    "Histogram": "tallyboard.histogram",
    "HistogramRecord": "tallyboard.histogram",
}

__all__ = ["__version__", "monitor", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover; `X as X` marks a re-export for type checkers and linters
    from tallyboard.handlers import ResultTableEventHandler as ResultTableEventHandler
    from tallyboard.histogram import Histogram as Histogram
    from tallyboard.histogram import HistogramRecord as HistogramRecord
    from tallyboard.run_view import RunView as RunView
    from tallyboard.store import DuplicateRunError as DuplicateRunError
    from tallyboard.store import ReadOnlyTableError as ReadOnlyTableError
    from tallyboard.table import NoCommitAction as NoCommitAction
    from tallyboard.table import ResultTable as ResultTable
    from tallyboard.writer import LogWriter as LogWriter


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tallyboard' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
