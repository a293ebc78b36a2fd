"""A run's console: the process's stdout and stderr, and its `logging` records, teed into the run.

Why at the file-descriptor level: replacing `sys.stdout` sees only what Python code prints. Child
processes (a DataLoader worker, a `subprocess.run`) and C extensions write to descriptors 1 and 2
directly. So `ConsoleCapture.start` points both descriptors at pipes (`os.dup2`) and one reader
thread per pipe copies every byte to the original descriptor (the terminal still shows all of
it) and cuts it into lines for the run. The training thread's `print` costs one pipe write; the
lines go through the run's sink like every other record (queued, committed in batches).

Lines: a line ends at a newline. A carriage return rewrites the line in a terminal (tqdm redraws
its bar that way), so only the text after the last non-empty `\\r` segment is kept: a progress bar
becomes its last state. Text without a newline is kept until one comes, `MAX_LINE_BYTES` fill up,
or the capture stops. Bytes are decoded as UTF-8 (invalid bytes and NUL become U+FFFD).

Loss window: a line is handed to the sink as soon as its newline is read, so a SIGKILL loses what
the sink loses (the last commit interval, see sink.py) plus a line still without its newline.
Only one capture runs at a time in a process (two would nest their pipes); `stop` restores
both descriptors and removes the logging handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable

MAX_LINE_BYTES = 64 * 1024  # a "line" this long without a newline is cut and kept as it is
STREAMS = ((1, "stdout"), (2, "stderr"))
JOIN_TIMEOUT = 2.0  # a child process still holding a pipe open must not hang the end of the run

Emit = Callable[[str, str], None]  # (stream, line)

_active: ConsoleCapture | None = None
_active_lock = threading.Lock()


def last_state(raw: bytes) -> str:
    """One line as a terminal would show it at the end: the last non-blank carriage-return segment,
    decoded (invalid UTF-8 and NUL replaced)."""
    segments = [segment for segment in raw.split(b"\r") if segment.strip()]
    text = segments[-1] if segments else b""
    return text.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


class _LogHandler(logging.Handler):
    """Python `logging` records as lines of the 'log' stream ("LEVEL logger: message").

    A root logger without handlers prints warnings through `logging.lastResort`, which our handler
    would silence (logging falls back only when no handler exists); so in that case the handler
    prints what the fallback would have, straight to the terminal (`terminal`), not into the pipe,
    where it would come back as a second, 'stderr' copy of the record."""

    def __init__(self, emit: Emit) -> None:
        super().__init__()
        self._emit = emit
        self.terminal: int | None = None  # set by start() when the root logger had no handlers
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for line in self.format(record).splitlines() or [""]:
                self._emit("log", last_state(line.encode("utf-8", errors="replace")))
            fallback = logging.lastResort
            if self.terminal is not None and fallback is not None and record.levelno >= fallback.level:
                _write_all(self.terminal, (fallback.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)


def require_free() -> None:
    """Raise RuntimeError if a capture is running in this process (checked before a run starts,
    so a refused capture leaves no run behind)."""
    if _active is not None:
        raise RuntimeError("another run is already capturing this process's console")


class ConsoleCapture:
    """Tees descriptors 1 and 2 and the root logger into `emit(stream, line)` until `stop()`."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._saved: dict[int, int] = {}  # fd -> a duplicate of what it was before
        self._readers: list[threading.Thread] = []
        self._handler = _LogHandler(self._safe_emit)

    def _safe_emit(self, stream: str, line: str) -> None:
        with contextlib.suppress(Exception):  # the run ended (a child kept the pipe open): drop it
            self._emit(stream, line)

    def start(self) -> ConsoleCapture:
        global _active
        with _active_lock:
            require_free()
            _active = self
        _flush_python_streams()
        for fd, name in STREAMS:
            read_end, write_end = os.pipe()
            self._saved[fd] = os.dup(fd)
            os.dup2(write_end, fd)
            os.close(write_end)
            pump = (read_end, self._saved[fd], name)
            reader = threading.Thread(target=self._pump, args=pump, name=f"tallyboard-{name}", daemon=True)
            reader.start()
            self._readers.append(reader)
        root = logging.getLogger()
        self._handler.terminal = None if root.handlers else self._saved[2]
        self._handler.setLevel(root.getEffectiveLevel())
        root.addHandler(self._handler)
        return self

    def _pump(self, read_end: int, terminal: int, stream: str) -> None:
        pending = b""
        while True:
            try:
                data = os.read(read_end, 65536)
            except OSError:
                data = b""
            if not data:
                break
            _write_all(terminal, data)
            pending += data
            *lines, pending = pending.split(b"\n")
            while len(pending) > MAX_LINE_BYTES:
                lines.append(pending[:MAX_LINE_BYTES])
                pending = pending[MAX_LINE_BYTES:]
            for line in lines:
                self._safe_emit(stream, last_state(line))
        if pending.strip(b"\r "):
            self._safe_emit(stream, last_state(pending))
        os.close(read_end)

    def stop(self) -> None:
        """Restore the descriptors and the root logger; flush the last lines into the run."""
        global _active
        logging.getLogger().removeHandler(self._handler)
        _flush_python_streams()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # the pipe's last write end in this process closes: EOF for the reader
        for reader in self._readers:
            reader.join(JOIN_TIMEOUT)
        for reader, saved in zip(self._readers, self._saved.values(), strict=True):
            if not reader.is_alive():  # else a child still writes: the reader keeps the duplicate
                os.close(saved)
        self._saved.clear()
        self._readers.clear()
        with _active_lock:
            _active = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # the terminal went away; the run keeps capturing
        pass


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or replaced stream: nothing buffered to lose
            stream.flush()
