"""system_metrics: real psutil (and NVML where a GPU exists) readings, logged to a real table."""

import statistics
import warnings

import psutil
import pytest

import tallyboard as tb
from live_runs import FakeClock, series
from tallyboard import monitor
from tallyboard.run import system_metrics


@pytest.fixture
def run(table):
    with table.new_run("system") as writer:
        yield writer


@pytest.fixture
def sampler_for():
    """``sampler_for(run, **options)``: a Sampler that is stopped after the test even if it fails, so
    that no handler of it outlives the test."""
    samplers = []

    def make(writer, **options):
        samplers.append(system_metrics.Sampler(writer, **options))
        return samplers[-1]

    yield make
    for sampler in samplers:
        sampler.stop()


def sample_two_windows(sampler, clock):
    """Samples at 0, 2, 4, 6, 8 s (window 0) and 10, 12 s (window 1); returns the readings per window."""
    windows = [[], []]
    for second in range(0, 14, 2):
        clock.at(second)
        windows[second // 10].append(sampler.sample())
    sampler.stop()
    return windows


def test_each_window_logs_the_mean_of_its_readings(run, tmp_path, sampler_for):
    clock = FakeClock()
    sampler = sampler_for(run, interval_s=10.0, clock=clock, gpus=False, disk_path=tmp_path)
    windows = sample_two_windows(sampler, clock)
    for name in ("sys/cpu_percent", "sys/memory_used_gb", "sys/process/memory_rss_gb", "sys/disk_percent"):
        logged = series(run, f"{name}.mean")
        assert [step for step, _ in logged] == list(range(len(windows))), name
        expected = [statistics.fmean(r[name] for r in readings) for readings in windows]
        assert [value for _, value in logged] == pytest.approx(expected), name


def test_readings_are_plausible(run, sampler_for):
    clock = FakeClock()
    sampler = sampler_for(run, clock=clock, gpus=False)
    clock.at(1.0)
    reading = sampler.sample()
    sampler.stop()
    assert 0.0 <= reading["sys/cpu_percent"] <= 100.0
    assert 0.0 < reading["sys/memory_percent"] <= 100.0
    assert 0.0 < reading["sys/memory_used_gb"] <= psutil.virtual_memory().total / 1e9
    assert reading["sys/process/memory_rss_gb"] > 0.001  # this interpreter holds more than 1 MB
    assert reading["sys/process/threads"] >= 1
    assert 0.0 < reading["sys/disk_percent"] <= 100.0
    assert not any(name.startswith("sys/gpu") for name in reading)


def test_io_rates_use_the_clock_between_readings(run, sampler_for):
    clock = FakeClock()
    sampler = sampler_for(run, clock=clock, gpus=False)
    first = sampler.sample()  # no interval yet: no rate
    clock.at(2.0)
    second = sampler.sample()
    sampler.stop()
    rates = [name for name in second if name.endswith("_mb_s")]
    assert not any(name.endswith("_mb_s") for name in first)
    if psutil.net_io_counters() is not None:
        assert {"sys/net_sent_mb_s", "sys/net_recv_mb_s"} <= set(rates)
    assert all(second[name] >= 0.0 for name in rates)


def test_system_windows_reach_their_run_once_even_with_a_user_handler(table, run, sampler_for):
    other_run = table.new_run("another run")
    handles = [
        monitor.register_event_handler(tb.ResultTableEventHandler(run)),
        monitor.register_event_handler(tb.ResultTableEventHandler(other_run)),
    ]
    try:
        clock = FakeClock()
        sample_two_windows(sampler_for(run, clock=clock, gpus=False), clock)
    finally:
        for handle in handles:
            monitor.unregister_event_handler(handle)
    assert [step for step, _ in series(run, "sys/cpu_percent.mean")] == [0, 1]
    assert series(other_run, "sys/cpu_percent.mean") == []
    other_run.close()


def test_thread_samples_at_start_and_stop_logs_the_open_window(run):
    sampler = system_metrics.start(run, interval_s=3600.0, gpus=False)
    try:
        assert sampler.thread.daemon and sampler.thread.is_alive()
    finally:
        sampler.stop()
    sampler.stop()  # harmless
    assert not sampler.thread.is_alive()
    [(step, value)] = series(run, "sys/process/memory_rss_gb.mean")
    assert step == 0 and value > 0.001
    with pytest.raises(RuntimeError, match="already started"):
        sampler.start()


def test_new_run_with_system_metrics_logs_until_the_run_ends(table):
    writer = table.new_run("with system metrics", system_metrics=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        writer.write_result(accuracy=1.0)
    reader = table.load_run(writer.run_id)
    assert reader.get_scalar("sys/cpu_percent.mean"), reader.scalars
    assert reader.get_scalar("sys/process/memory_rss_gb.mean")[0].value > 0.001


def test_sampling_stops_with_a_warning_when_the_run_is_finished_under_it(run, sampler_for):
    sampler = sampler_for(run, interval_s=0.01, samples_per_interval=1, gpus=False)
    run.write_result(accuracy=1.0)  # the sampler was not told: its next window cannot be logged
    with pytest.warns(RuntimeWarning, match="stopped sampling system metrics"):
        sampler.start()
        sampler.thread.join(timeout=60)
    assert not sampler.thread.is_alive()


def test_bad_intervals_are_rejected(run):
    with pytest.raises(ValueError, match="interval_s"):
        system_metrics.Sampler(run, interval_s=0)
    with pytest.raises(ValueError, match="samples_per_interval"):
        system_metrics.Sampler(run, samples_per_interval=0)


def nvml_device_count():
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


@pytest.mark.skipif(nvml_device_count() == 0, reason="NVML finds no GPU on this machine")
def test_gpu_metrics_per_device(run, sampler_for):
    clock = FakeClock()
    sampler = sampler_for(run, clock=clock)
    assert sampler.gpu_count == nvml_device_count()
    reading = sampler.sample()
    clock.at(10.0)
    sampler.sample()
    sampler.stop()
    for index in range(sampler.gpu_count):
        prefix = f"sys/gpu{index}/"
        assert 0.0 <= reading[prefix + "utilization_percent"] <= 100.0
        assert reading[prefix + "memory_used_gb"] > 0.0
        assert 0.0 < reading[prefix + "memory_percent"] <= 100.0
        assert 0.0 < reading[prefix + "temperature_c"] < 120.0
        assert 0.0 < reading[prefix + "power_w"] < 2000.0
        assert [step for step, _ in series(run, prefix + "utilization_percent.mean")] == [0, 1]


@pytest.mark.skipif(nvml_device_count() > 0, reason="this machine has a GPU: the test above covers it")
def test_without_a_gpu_the_gpu_probe_is_left_out(run, sampler_for):
    sampler = sampler_for(run, gpus=True)
    assert sampler.gpu_count == 0
    assert not any(name.startswith("sys/gpu") for name in sampler.sample())
    sampler.stop()
