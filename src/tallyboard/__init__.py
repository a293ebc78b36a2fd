"""tallyboard: log deep-learning runs to one reproducible result table and browse them offline.

The public API is re-exported here. Names are resolved lazily so that ``import tallyboard`` stays
cheap (no numpy, pandas, matplotlib or PIL) even inside a short-lived worker process.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tallyboard import monitor

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "DamagedTableError",
    "DatabaseUnreachable",
    "DatabaseUnwritable",
    "DuplicateRunError",
    "FilterError",
    "Histogram",
    "HistogramRecord",
    "LogWriter",
    "NoCommitAction",
    "NotAResultTable",
    "NotDurableError",
    "NotFoundError",
    "OutsideSourceError",
    "ReadOnlyTableError",
    "ResultTable",
    "ResultTableEventHandler",
    "RunView",
    "ScalarValueError",
    "StoreError",
    "TallyboardError",
    "__version__",
    "alerts",
    "monitor",
    "register_alert_handler",
]

# Where each name of `__all__` resolved on first use is defined (`import tallyboard.monitor` loads none).
_LAZY = {
    "ResultTable": "tallyboard.table",
    "NoCommitAction": "tallyboard.run.start",
    "LogWriter": "tallyboard.run.writer",
    "RunView": "tallyboard.run.view",
    "ResultTableEventHandler": "tallyboard.run.event_handler",
    "Histogram": "tallyboard.histogram",
    "alerts": "tallyboard.alerts",
    "register_alert_handler": "tallyboard.alerts.delivery",
    "HistogramRecord": "tallyboard.histogram",
    **{
        name: "tallyboard.errors"
        for name in (
            "ArtifactError",
            "DamagedTableError",
            "DatabaseUnreachable",
            "DatabaseUnwritable",
            "DuplicateRunError",
            "FilterError",
            "NotAResultTable",
            "NotDurableError",
            "NotFoundError",
            "OutsideSourceError",
            "ReadOnlyTableError",
            "ScalarValueError",
            "StoreError",
            "TallyboardError",
        )
    },
}

if TYPE_CHECKING:  # pragma: no cover; `X as X` marks a re-export for type checkers and linters
    from tallyboard import alerts as alerts
    from tallyboard.alerts.delivery import register_alert_handler as register_alert_handler
    from tallyboard.errors import ArtifactError as ArtifactError
    from tallyboard.errors import DamagedTableError as DamagedTableError
    from tallyboard.errors import DatabaseUnreachable as DatabaseUnreachable
    from tallyboard.errors import DatabaseUnwritable as DatabaseUnwritable
    from tallyboard.errors import DuplicateRunError as DuplicateRunError
    from tallyboard.errors import FilterError as FilterError
    from tallyboard.errors import NotAResultTable as NotAResultTable
    from tallyboard.errors import NotDurableError as NotDurableError
    from tallyboard.errors import NotFoundError as NotFoundError
    from tallyboard.errors import OutsideSourceError as OutsideSourceError
    from tallyboard.errors import ReadOnlyTableError as ReadOnlyTableError
    from tallyboard.errors import ScalarValueError as ScalarValueError
    from tallyboard.errors import StoreError as StoreError
    from tallyboard.errors import TallyboardError as TallyboardError
    from tallyboard.histogram import Histogram as Histogram
    from tallyboard.histogram import HistogramRecord as HistogramRecord
    from tallyboard.run.event_handler import ResultTableEventHandler as ResultTableEventHandler
    from tallyboard.run.start import NoCommitAction as NoCommitAction
    from tallyboard.run.view import RunView as RunView
    from tallyboard.run.writer import LogWriter as LogWriter
    from tallyboard.table import ResultTable as ResultTable


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tallyboard' has no attribute {name!r}")
    found = import_module(module)
    value = found if module == f"tallyboard.{name}" else getattr(found, name)  # a subpackage itself
    globals()[name] = value
    return value
