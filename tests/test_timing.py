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
