"""The bench phase's power case (collect/bench_power.py) on the CPU, with a fake meter."""
import dataclasses
import json

import pytest

from collect import bench_power
from collect.bench import Case, _base_row
from collect.energy import EnergyReading, EnergyUnavailable
from collect.jsonio import to_jsonable
from collect.schema import SCHEMA_VERSION
from collect.schema.bench import BenchFile
from render.validate import load_validated

LONG = dict(batch=4, heads=32, seq_len=16384, head_dim=128)


def row(impl="triton", dtype="float16", causal=False, status="ok", **shape):
    return _base_row(Case(impl=impl, dtype=dtype, causal=causal, **{**LONG, **shape}), status)


def reading(watts=695.0, ms=27.0):
    return EnergyReading(watts=watts, ms_per_call=ms, mj_per_call=watts * ms, sm_clock_mhz=1445.0,
                         power_limit_w=700.0, window_s=2.5, calls=90)


def test_the_power_case_is_our_heaviest_non_causal_float16_call():
    rows = [row(seq_len=4096), row(), row(causal=True, seq_len=32768), row(dtype="bfloat16", seq_len=32768),
            row(impl="fa4", seq_len=32768), row(status="error", seq_len=65536), row(head_dim=64)]
    assert bench_power.power_case(rows) is rows[1]
    assert bench_power.power_case([row(causal=True)]) is None


def test_each_power_impl_with_an_ok_row_at_the_case_is_measured_and_filled():
    rows = [row(), row("fa4"), row("sdpa-cudnn", status="unsupported"), row("sdpa-flash"), row("naive"),
            row("fa4", seq_len=4096)]
    asked, updates = [], []

    def measure(case):
        asked.append(case.impl)
        assert case.shape == (4, 32, 16384, 128) and not case.causal and case.dtype == "float16"
        return reading(watts={"triton": 696.0, "fa4": 695.0}.get(case.impl, 690.0))

    notes = bench_power.measure_power(rows, measure, lambda: updates.append(1))
    assert asked == ["triton", "fa4", "sdpa-flash"] and len(updates) == 3
    assert rows[0].board_power_w == 696.0 and rows[0].energy_mj_per_call == pytest.approx(696.0 * 27.0)
    assert rows[0].power_limit_w == 700.0 and rows[0].power_sm_clock_mhz == 1445.0 and rows[0].power_loop_ms == 27.0
    assert rows[2].board_power_w is None and rows[4].board_power_w is None and rows[5].board_power_w is None
    assert notes == ["Power at the limit: triton, fa4, sdpa-flash at B=4 H=32 N=16384 d=128 non-causal float16, each "
                     "run back to back for about 2.5 s after a warm-up; the board's power from the driver's energy "
                     "counter (collect/energy.py)."]


def test_no_meter_is_one_note_and_no_row_changes():
    rows = [row(), row("fa4")]

    def measure(case):
        raise EnergyUnavailable("NVML (libnvidia-ml) is not on this machine's library path")

    notes = bench_power.measure_power(rows, measure, lambda: None)
    assert notes == ["Power at the limit: not measured, NVML (libnvidia-ml) is not on this machine's library path."]
    assert all(r.board_power_w is None for r in rows)


def test_one_failure_stays_with_its_implementation():
    rows = [row(), row("fa4")]

    def measure(case):
        if case.impl == "triton":
            raise RuntimeError("CUDA error: unspecified launch failure")
        return reading()

    notes = bench_power.measure_power(rows, measure, lambda: None)
    assert rows[0].board_power_w is None and rows[1].board_power_w == 695.0
    assert notes[0].startswith("Power at the limit: fa4 at")
    assert "triton failed, RuntimeError: CUDA error: unspecified launch failure" in notes[1]


def test_the_phase_deadline_ends_the_pass_with_a_note():
    rows = [row(), row("fa4"), row("sdpa-cudnn")]
    now = iter([0.0, 5.0, 20.0])
    notes = bench_power.measure_power(rows, lambda case: reading(), lambda: None, deadline=10.0,
                                      clock=lambda: next(now))
    assert [r.board_power_w is not None for r in rows] == [True, True, False]
    assert "sdpa-cudnn and the implementations after it not measured" in notes[1]


def test_no_case_for_it_is_said():
    assert bench_power.measure_power([row(causal=True)], lambda c: reading(), lambda: None) == [
        "Power at the limit: not measured, no non-causal float16 case of our kernel ran."]


def test_filled_rows_validate_and_a_power_beyond_the_bounds_is_refused(tmp_path):
    rows = [row()]
    rows[0].latency_ms_median = 24.0
    bench_power.measure_power(rows, lambda c: reading(), lambda: None)
    doc = BenchFile(schema_version=SCHEMA_VERSION, run_id="h100-20261205a", profile="full", timing_method="t",
                    backend_choice_method="b", min_timed_runs=10, rows=rows)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(to_jsonable(doc)))
    assert load_validated(path, BenchFile).rows[0].energy_mj_per_call == pytest.approx(695.0 * 27.0)
    bad = to_jsonable(dataclasses.replace(doc, rows=[dataclasses.replace(rows[0], board_power_w=-1.0)]))
    path.write_text(json.dumps(bad))
    with pytest.raises(Exception, match="board_power_w"):
        load_validated(path, BenchFile)


def test_where_none_of_the_usual_others_ran_the_memory_efficient_backend_stands_in():
    # a T4: no FlashAttention-4, no FlashAttention-2 build, no cuDNN fused kernel; ours is not left alone
    rows = [row(), row("fa4", status="unsupported"), row("sdpa-flash", status="unsupported"), row("sdpa-efficient")]
    asked = []
    bench_power.measure_power(rows, lambda case: asked.append(case.impl) or reading(), lambda: None)
    assert asked == ["triton", "sdpa-efficient"]
    # where one of them ran, it does not
    rows = [row(), row("sdpa-cudnn"), row("sdpa-efficient")]
    asked.clear()
    bench_power.measure_power(rows, lambda case: asked.append(case.impl) or reading(), lambda: None)
    assert asked == ["triton", "sdpa-cudnn"]
