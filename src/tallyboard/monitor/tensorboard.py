"""Forwards Stat events to a TensorBoard SummaryWriter as scalars."""

from typing import Any

from tallyboard.monitor.events import Event
from tallyboard.monitor.stat import STAT_EVENT


class TensorboardEventHandler:
    """An event handler that writes each ``STAT_EVENT`` value as a scalar to a SummaryWriter.

    Any writer with ``add_scalar(tag, value, walltime=...)`` works: ``torch.utils.tensorboard`` and
    ``tensorboardX`` both do. It is typed loosely so this module needs neither. Other events are ignored.

        register_event_handler(TensorboardEventHandler(SummaryWriter("runs/x")))
    """

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def __call__(self, event: Event) -> None:
        if event.name == STAT_EVENT:
            walltime = event.timestamp.timestamp()
            for key, value in event.data.items():
                self._writer.add_scalar(key, value, walltime=walltime)
