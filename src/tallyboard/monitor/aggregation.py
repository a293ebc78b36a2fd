"""The summary statistics a Stat can report for each window."""

from enum import Enum


class Aggregation(Enum):
    """One summary statistic of a Stat window.

    The values match ``torch.monitor.Aggregation`` (1 is torch's internal ``NONE``), and a member
    is an index as torch's is (``int()``, ``float()``, ``operator.index()``, a list subscript), so
    code that stores them as integers keeps working after switching from torch.
    """

    VALUE = 0  # the last value added in the window
    MEAN = 2
    COUNT = 3
    SUM = 4
    MAX = 5
    MIN = 6

    def __index__(self) -> int:
        return self.value


VALUE = Aggregation.VALUE
MEAN = Aggregation.MEAN
COUNT = Aggregation.COUNT
SUM = Aggregation.SUM
MAX = Aggregation.MAX
MIN = Aggregation.MIN
