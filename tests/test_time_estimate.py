"""The T4 time estimate's arithmetic (collect/time_estimate.py), on synthetic rows."""
import json

import pytest

from collect import time_estimate as te
from collect import timing


def row(impl, n, ms, causal=False, status="ok", backend=None):
    return dict(impl=impl, dtype="float16", causal=causal, batch=2, heads=8, head_dim=64, seq_len=n, status=status,
                latency_ms_median=ms, backend_used=backend)


def test_calls_follow_the_clocks_rules():
    # A long call: the floor of device-timed and host-timed calls, and the minimum loop.
    assert te.calls_for(100.0) == (te.EXTRA_CALLS + timing.LONG_MIN_REPS + timing.HOST_MIN_CALLS
                                   + (timing.LOOP_REPEATS + 1) * timing.LONG_LOOP_CALLS)
    # A short call is timed more often.
    assert te.calls_for(0.01) > te.calls_for(1.0) > te.calls_for(100.0)


def test_interpolation_is_log_log_and_clamped():
    pts = {512: 10.0, 8192: 1000.0}
    assert te.interpolate(pts, 2048) == pytest.approx(10.0 * 100 ** 0.5)
    assert te.interpolate(pts, 64) == 10.0 and te.interpolate(pts, 65536) == 1000.0


def test_slowdowns_match_the_backend_the_reference_used():
    run = [row("naive", 2048, 1.0), row("sdpa-efficient", 2048, 0.5), row("sdpa", 2048, 0.1), row("triton", 2048, 0.2)]
    ref = [row("naive", 2048, 10.0), row("sdpa", 2048, 5.0, backend="efficient"), row("triton", 2048, 20.0)]
    s = te.bench_slowdowns(run, ref)
    assert s == {"naive": {2048: 10.0}, "sdpa": {2048: 10.0}, "triton": {2048: 100.0}}


def test_bench_estimate_keeps_the_fixed_part_and_scales_the_calls():
    rows = [row("naive", 8192, 5.0), row("sdpa-flash", 8192, 1.0), row("triton", 8192, 1.0, status="oom")]
    s = {"naive": {8192: 20.0}, "sdpa": {8192: 10.0}}
    e = te.estimate_bench(rows, s, (7, 5), duration_s=60.0)
    here = te.calls_for(5.0) * 5.0 / 1e3 + te.calls_for(1.0) * 1.0 / 1e3
    assert e.device_s == pytest.approx(here)
    # On a T4 flash is refused at once; naive's calls are recounted at 100 ms.
    assert e.estimate_s == pytest.approx(60.0 - here + te.calls_for(100.0) * 0.1)
    ampere = te.estimate_bench(rows, s, (8, 0), duration_s=60.0)
    assert ampere.estimate_s > e.estimate_s


def _write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_a_phase_the_target_does_not_run_costs_nothing_and_the_rest_are_kept(tmp_path):
    phases = [dict(name="env", status="complete", duration_s=5.0),
              dict(name="iterations", status="unsupported", duration_s=0.1, reason="no Hopper path"),
              dict(name="bench", status="complete", duration_s=30.0)]
    _write(tmp_path / "run", "manifest.json", dict(phases=phases))
    _write(tmp_path / "run", "bench.json", dict(rows=[row("naive", 2048, 1.0)]))
    _write(tmp_path / "ref", "manifest.json", dict(device=dict(compute_capability="7.5")))
    _write(tmp_path / "ref", "bench.json", dict(rows=[row("naive", 2048, 8.0)]))
    est = {e.phase: e for e in te.estimate_run(tmp_path / "run", tmp_path / "ref")}
    assert est["env"].estimate_s == 5.0 and est["iterations"].estimate_s == 0.0
    assert est["bench"].estimate_s == pytest.approx(30.0 - te.calls_for(1.0) / 1e3 + te.calls_for(8.0) * 8.0 / 1e3)
    assert "| all |" in te.table(list(est.values()))


def test_a_folder_without_a_manifest_is_named(tmp_path):
    with pytest.raises(ValueError, match="manifest.json"):
        te.estimate_run(tmp_path, tmp_path)
