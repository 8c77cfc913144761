"""Timing statistics on fake timings (speed itself is measured by `make collect`, not tested)."""
import pytest

from collect.timing import is_oom, percentile, summarize


def test_summarize_known_samples():
    t = summarize([float(x) for x in range(1, 101)])  # 1..100 ms
    assert t.n == 100
    assert t.median_ms == pytest.approx(50.5)
    assert t.p10_ms == pytest.approx(10.9)
    assert t.p90_ms == pytest.approx(90.1)
    assert t.mean_ms == pytest.approx(50.5)


def test_summarize_is_order_independent_and_robust_to_one_outlier():
    xs = [1.0] * 60 + [500.0]
    t = summarize(list(reversed(xs)))
    assert t.median_ms == 1.0 and t.p90_ms == 1.0 and t.mean_ms > 9


def test_percentile_interpolates():
    assert percentile([0.0, 10.0], 25) == pytest.approx(2.5)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, -2.0], [float("inf")]])
def test_summarize_rejects_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_is_oom():
    class OutOfMemoryError(RuntimeError):
        pass

    assert is_oom(OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("CUDA error: out of memory"))
    assert not is_oom(RuntimeError("illegal memory access"))


# --- the one clock's sizing rules (the GPU parts are exercised by `make collect`) ------------

from collect import timing  # noqa: E402


def test_minimum_sample_counts_follow_the_call_length():
    assert timing.min_reps(0.05) == timing.timed_calls(19.9) == 50
    assert timing.min_reps(20.0) == timing.timed_calls(30.0) == 10
    assert timing.timed_calls(0.01) > 50  # short calls get more samples
    assert timing.timed_calls(1e-6, flush_ms=0.0) == timing.MAX_REPS


def test_input_pool_is_larger_than_twice_the_l2_and_respects_the_memory_budget():
    l2 = 60 * 2**20
    small = 4 * 2**20
    n = timing.pool_size(small, l2)
    assert n * small > 2 * l2 and (n - 1) * small <= 2 * l2 + small
    # a set bigger than twice the L2 still gets a second, distinct set for host time
    assert timing.pool_size(2**30, l2) == 2
    # a tight budget caps the pool, but never below the sets the caller already needs
    assert timing.pool_size(small, l2, budget_bytes=10 * small) == 10
    assert timing.pool_size(small, l2, budget_bytes=0) == 2
    # an unknown L2 assumes a large one rather than a pool too small to leave the cache
    assert timing.pool_size(small, None) * small > 2 * 64 * 2**20


def test_spin_covers_the_host_time_and_the_clock_follows_from_it():
    cycles = timing.spin_cycles(host_us=100.0, clock_mhz=2000.0)
    assert cycles >= 2 * 100 * 2000  # at least twice the host time at the highest clock
    # a spin of 2e6 cycles that took 1 ms ran at 2000 MHz
    assert timing.clock_mhz(2_000_000, 1.0) == pytest.approx(2000.0)
    assert timing.clock_mhz(1000, 0.0) is None


def test_the_rest_before_a_timed_call_covers_its_host_time_and_half_its_length():
    # a host-bound call: twice its wall time (which bounds its host time) plus the floor
    assert timing.rest_us(0.2) == pytest.approx(2 * 200 + timing.SPIN_FLOOR_US)
    # a 2 ms call: the GPU rests half as long as it works, so heavy calls do not run at the power limit
    assert timing.rest_us(2.0) == pytest.approx(2 * 1000 + timing.SPIN_FLOOR_US)
    assert timing.rest_us(10.0) == pytest.approx(5000.0)
    assert timing.rest_us(1000.0) == timing.SPIN_MAX_US


def test_loop_and_host_call_counts():
    assert timing.loop_calls(0.01) == timing.LOOP_MAX_CALLS  # host time would make more calls slow
    assert timing.loop_calls(1.0) == 5  # about 5 ms of device work per loop
    assert timing.loop_calls(10.0) == timing.LOOP_MIN_CALLS
    # a long call hides its launch: shorter loops, each still back to back
    assert timing.loop_calls(30.0) == timing.LONG_LOOP_CALLS >= 2
    # host time: every sample's device work runs afterwards, so device-bound calls take fewer
    assert timing.host_calls(0.1) == timing.HOST_CALLS
    assert timing.host_calls(0.5) == 30  # about HOST_TARGET_MS of queued work
    assert timing.host_calls(5.0) == timing.host_calls(500.0) == timing.HOST_MIN_CALLS


def test_the_samples_behind_a_timing_are_kept_in_order_and_stored_to_a_tenth_of_a_microsecond():
    from collect.timing import compact_samples

    t = summarize([0.3, 0.1, 0.123456, 0.00001])
    assert t.samples_ms == (0.3, 0.1, 0.123456, 0.00001)  # as taken, not sorted
    assert compact_samples(t) == [0.3, 0.1, 0.1235, 0.0001]  # never below the schema's clock tick
    from collect.timing import Timing
    assert compact_samples(Timing(1.0, 1.0, 1.0, 1.0, 1)) is None  # a timing built without its samples


def test_record_stores_the_device_samples_on_the_row():
    from collect.schema.bench import BenchRow
    from collect.timing import CallTimes, DeviceTiming, record

    row = BenchRow(impl="naive", backend_requested=None, backend_used=None, dtype="float16", causal=False, batch=1,
                   heads=1, seq_len=128, head_dim=64, status="ok")
    dev = summarize([1.0 + i * 1e-3 for i in range(60)])
    record(row, CallTimes(device=DeviceTiming(dev), host=summarize([0.01] * 5), loop=None), 1e9)
    assert row.latency_samples_ms == [round(1.0 + i * 1e-3, 4) for i in range(60)]
    assert len(row.latency_samples_ms) == row.n_timed_runs


def test_the_spins_clock_is_its_cycles_over_the_timers_nanoseconds():
    from collect.spin_clock import clock_from_stamps

    # 3,950,000 cycles in 2 ms of the GPU timer: 1975 MHz, whatever the events around the spin say
    assert clock_from_stamps(10, 10 + 3_950_000, 5_000, 5_000 + 2_000_000) == 1975.0
    # a timer that did not move, or a slot never written (zeros): no reading rather than an infinite or zero one
    assert clock_from_stamps(10, 4_000, 7, 7) is None
    assert clock_from_stamps(0, 0, 0, 0) is None


def test_without_a_gpu_the_stamped_spin_is_unavailable_and_device_time_falls_back(monkeypatch):
    """Where the kernel cannot run, stamped_spins says so (None) rather than raising, and device_time then spins with
    torch.cuda._sleep and reads the clock from its events as before."""
    import torch

    from collect import spin_clock

    spin_clock._works.cache_clear()
    if torch.cuda.is_available():
        import pytest
        pytest.skip("a GPU is here: the stamped spin may run")
    assert spin_clock.stamped_spins(4) is None
    spin_clock._works.cache_clear()
