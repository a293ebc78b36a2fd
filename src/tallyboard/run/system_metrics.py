"""The machine's health next to the loss: CPU, memory, disk, network and GPUs, logged under ``sys/``.

A daemon thread samples a few times per window and feeds one ``monitor.Stat`` per metric, so each
logged point is the window's mean rather than whatever the load happened to be at one instant. The
Stats log through a ``ResultTableEventHandler`` that owns the sampler's events (``exclusive_events``):
they reach this sampler's run once, even when the user registered a handler of their own.

Metrics (units in the name; GB and MB are 10^9 and 10^6 bytes), each tag ending in ``.mean``:
``sys/cpu_percent``, ``sys/memory_percent``, ``sys/memory_used_gb``, ``sys/disk_percent``,
``sys/disk_read_mb_s``, ``sys/disk_write_mb_s``, ``sys/net_sent_mb_s``, ``sys/net_recv_mb_s``,
``sys/process/cpu_percent``, ``sys/process/memory_rss_gb``, ``sys/process/threads``, and per GPU
``sys/gpu<i>/utilization_percent``, ``memory_used_gb``, ``memory_percent``, ``temperature_c``,
``power_w`` (through NVML, when ``pynvml`` imports and finds a device).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tallyboard import monitor
from tallyboard.extras import missing_framework
from tallyboard.run.event_handler import ResultTableEventHandler, exclusive_events

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.run.writer import LogWriter

Reading = dict[str, float]
_NS_PER_S = 1e9
_GB = 1e9
_MB = 1e6


class Sampler:
    """Samples the system into Stats; ``start()`` runs it in a daemon thread, ``stop()`` ends it and
    logs the last, partial window.

    ``clock`` (monotonic nanoseconds) drives both the Stats' windows and the I/O rates, so a test can
    call ``sample()`` itself at chosen times, with no thread and no sleep.
    """

    def __init__(
        self,
        writer: LogWriter,
        interval_s: float = 10.0,
        *,
        samples_per_interval: int = 5,
        aggregations: Iterable[monitor.Aggregation] = (monitor.Aggregation.MEAN,),
        clock: Callable[[], int] = time.monotonic_ns,
        disk_path: str | os.PathLike[str] = ".",
        gpus: bool = True,
    ) -> None:
        if interval_s <= 0 or samples_per_interval < 1:
            raise ValueError("interval_s must be > 0 and samples_per_interval >= 1")
        self.interval_s = interval_s
        self.sample_every_s = interval_s / samples_per_interval
        self._aggregations = tuple(aggregations)
        self._clock = clock
        self._probes: list[Callable[[], Reading]] = [_PsutilProbe(clock, os.path.abspath(disk_path))]
        self._nvml = _NvmlProbe.open() if gpus else None
        if self._nvml is not None:
            self._probes.append(self._nvml.read)
        self._stats: dict[str, monitor.Stat] = {}
        self._handler = ResultTableEventHandler(writer)
        self._registration = monitor.register_event_handler(self._handler)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def thread(self) -> threading.Thread | None:
        """The sampling thread, once started."""
        return self._thread

    @property
    def gpu_count(self) -> int:
        return 0 if self._nvml is None else len(self._nvml.handles)

    def sample(self) -> Reading:
        """Take one reading of every metric and add it to its Stat; returns the reading."""
        reading: Reading = {}
        for probe in self._probes:
            reading.update(probe())
        with self._lock, exclusive_events(self._handler):
            if self._stopped.is_set():
                return reading
            for name, value in reading.items():
                stat = self._stats.get(name)
                if stat is None:
                    stat = monitor.Stat(name, self._aggregations, self.interval_s, clock=self._clock)
                    self._stats[name] = stat
                stat.add(value)
        return reading

    def start(self) -> Sampler:
        """Sample now, then every ``sample_every_s`` seconds in a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("this Sampler is already started")
        self.sample()
        self._thread = threading.Thread(target=self._run, name="tallyboard-system-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling, log every open window and release NVML; calling it again does nothing."""
        self._shutdown(log_open_windows=True)

    def _shutdown(self, log_open_windows: bool) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if not log_open_windows:
            monitor.unregister_event_handler(self._registration)
        with self._lock, exclusive_events(self._handler):
            for stat in self._stats.values():
                stat.close()
        monitor.unregister_event_handler(self._registration)  # a second unregister is a no-op
        if self._nvml is not None:
            self._nvml.close()

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stopped.wait(self.sample_every_s):
            try:
                self.sample()
            except Exception as error:  # e.g. the run was finished under us: stop, never crash
                warnings.warn(
                    f"tallyboard stopped sampling system metrics: {error!r}", RuntimeWarning, stacklevel=1
                )
                self._shutdown(log_open_windows=False)
                return


def start(writer: LogWriter, interval_s: float = 10.0, **options: Any) -> Sampler:
    """Log system metrics to ``writer`` every ``interval_s`` seconds until ``Sampler.stop()``.

    ``options`` are those of ``Sampler`` (``samples_per_interval``, ``aggregations``, ``clock``,
    ``disk_path``, ``gpus``).
    """
    return Sampler(writer, interval_s, **options).start()


class _PsutilProbe:
    """CPU, memory, disk and network of the machine and of this process, through psutil."""

    def __init__(self, clock: Callable[[], int], disk_path: str) -> None:
        try:
            import psutil
        except ImportError as error:
            raise missing_framework(error, "system metrics") from error
        self._psutil = psutil
        self._process = psutil.Process()
        self._clock = clock
        self._disk_path = disk_path
        self._process.cpu_percent(None)  # the first call only starts psutil's own interval
        psutil.cpu_percent(None)
        self._last_time = clock()
        self._last_io = self._io_counters()

    def __call__(self) -> Reading:
        psutil = self._psutil
        memory = psutil.virtual_memory()
        with self._process.oneshot():
            reading = {
                "sys/cpu_percent": psutil.cpu_percent(None),
                "sys/memory_percent": memory.percent,
                "sys/memory_used_gb": (memory.total - memory.available) / _GB,
                "sys/disk_percent": psutil.disk_usage(self._disk_path).percent,
                "sys/process/cpu_percent": self._process.cpu_percent(None),
                "sys/process/memory_rss_gb": self._process.memory_info().rss / _GB,
                "sys/process/threads": float(self._process.num_threads()),
            }
        now, io = self._clock(), self._io_counters()
        elapsed_s = (now - self._last_time) / _NS_PER_S
        if elapsed_s > 0:
            for name, total in io.items():
                if name in self._last_io:
                    reading[f"sys/{name}_mb_s"] = max(0.0, total - self._last_io[name]) / _MB / elapsed_s
        self._last_time, self._last_io = now, io
        return reading

    def _io_counters(self) -> Reading:
        """Cumulative bytes; either counter is None on machines (containers) that do not expose it."""
        counters: Reading = {}
        disk = self._psutil.disk_io_counters()
        if disk is not None:
            counters["disk_read"], counters["disk_write"] = disk.read_bytes, disk.write_bytes
        net = self._psutil.net_io_counters()
        if net is not None:
            counters["net_sent"], counters["net_recv"] = net.bytes_sent, net.bytes_recv
        return counters


class _NvmlProbe:
    """Per-GPU utilisation, memory, temperature and power through NVML (nvidia-ml-py)."""

    def __init__(self, pynvml: Any, handles: list[Any]) -> None:
        self._pynvml = pynvml
        self.handles = handles

    @classmethod
    def open(cls) -> _NvmlProbe | None:
        """The probe, or None without pynvml, without a driver, or without a device."""
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None
        try:
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(count)]
        except pynvml.NVMLError:
            handles = []
        if not handles:
            pynvml.nvmlShutdown()
            return None
        return cls(pynvml, handles)

    def read(self) -> Reading:
        nvml = self._pynvml
        queries: dict[str, Callable[[Any], float]] = {
            "utilization_percent": lambda handle: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            "memory_used_gb": lambda handle: nvml.nvmlDeviceGetMemoryInfo(handle).used / _GB,
            "memory_percent": lambda handle: _percent(nvml.nvmlDeviceGetMemoryInfo(handle)),
            "temperature_c": lambda handle: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda handle: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        }
        reading: Reading = {}
        for index, handle in enumerate(self.handles):
            for name, query in queries.items():
                try:
                    reading[f"sys/gpu{index}/{name}"] = float(query(handle))
                except nvml.NVMLError:  # e.g. power or temperature not supported on this device
                    continue
        return reading

    def close(self) -> None:
        self._pynvml.nvmlShutdown()


def _percent(memory: Any) -> float:
    return 100.0 * memory.used / memory.total if memory.total else 0.0
