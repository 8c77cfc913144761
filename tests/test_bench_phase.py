"""The bench phase's harness on the CPU: statistics, OOM rows, refusals, checkpoints, bad input.

Speed is measured by `make collect`; these tests only check that whatever is measured is recorded
faithfully and that one case's failure never costs the others.
"""
import dataclasses
import html
import json
import re

import pytest

from collect.schema import SCHEMA_VERSION
import torch

import prose
import synthetic
from collect import bench
from collect.bench import Case, Measurement, measure_cases
from collect.context import RunContext
from collect.schema.bench import BenchFile
from collect import timing
from collect.timing import CallTimes, DeviceTiming, summarize
from render.runs import load_run

SHAPE = dict(batch=2, heads=8, seq_len=1024, head_dim=64)


def case(impl="triton", dtype="float16", causal=False, **kw):
    return Case(impl=impl, dtype=dtype, causal=causal, **{**SHAPE, **kw})


def call_times(times, host_us=(40.0, 50.0, 60.0), loop=(1.5, 2.0, 2.5), clock=(1900.0, 1980.0, 1950.0)):
    dev = summarize(times)
    return CallTimes(device=DeviceTiming(dev, sorted(clock)[1], min(clock), max(clock)),
                     host=summarize([h / 1e3 for h in host_us]), loop=summarize(loop))


def fake_measure(times=(1.0, 2.0, 3.0) * 20, peak=1000, log=None):
    def measure(c):
        if log is not None:
            log.append(c)
        return Measurement(times=call_times(times), peak_mem_bytes=peak, kernel_config={"BLOCK_M": 128})
    return measure


def collect_rows(cases, measure, **kw):
    seen = []
    rows = measure_cases(cases, measure, seen.append, free=lambda: None, **kw)
    assert seen == rows  # every row is handed over as soon as it exists
    return rows


# --- the plan and bad input ------------------------------------------------------------------


def test_profiles_cover_the_issue_sweep_and_quick_is_a_subset():
    hopper_full = bench.PLANS["full"].cases()
    full = bench.plan_for_device(bench.PLANS["full"], hopper=False).cases()
    quick = bench.plan_for_device(bench.PLANS["quick"], hopper=False).cases()
    # 11 sweep points (the d=128 sweep without N=8192), 3 inference points and 2 head-size points, each in 2
    # dtypes x 2 masks, by the 5 fused implementations; SDPA's math and memory-efficient backends at the study
    # shape's 6 lengths only; naive on both sweeps, not at the single shapes.
    assert len(full) == (6 + 5 + 3 + 2) * 2 * 2 * 5 + 2 * 6 * 2 * 2 + 11 * 2 * 2 == 412
    assert {c.seq_len for c in full if (c.batch, c.heads, c.head_dim) == (4, 32, 128)} == {512, 1024, 2048, 4096,
                                                                                            16384}
    assert {(c.batch, c.heads, c.head_dim) for c in full if c.impl == "sdpa-efficient"} == {(2, 8, 64)}
    assert {(c.batch, c.heads, c.head_dim) for c in full if c.impl == "naive"} == {(2, 8, 64), (4, 32, 128)}
    assert len(quick) == 48 and set(quick) <= set(full)
    assert {c.seq_len for c in full} == {512, 1024, 2048, 4096, 8192, 16384, 32768}
    assert {(c.batch, c.heads, c.head_dim) for c in full} == {(2, 8, 64), (4, 32, 128), (8, 16, 64), (1, 16, 128),
                                                              (1, 32, 128), (4, 32, 80), (4, 32, 96)}
    assert {(c.batch, c.heads, c.head_dim) for c in full if c.impl == "sdpa-math"} == {(2, 8, 64)}
    assert {c.impl for c in full} == {"naive", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "sdpa",
                                      "fa4", "triton"}
    # On a Hopper GPU the portable path is timed too, at the study shape's sweep.
    assert set(hopper_full) - set(full) == {dataclasses.replace(c, impl="triton-portable") for c in full
                                            if c.impl == "triton" and (c.batch, c.heads, c.head_dim) == (2, 8, 64)}
    bench.validate_cases(hopper_full)
    # a time-budget cut takes SDPA's slow context backends first
    tiers = [c.impl in bench.CONTEXT_IMPLS for c in full]
    assert tiers == sorted(tiers) and any(tiers)


@pytest.mark.parametrize("bad, words", [
    (case(impl="cuda-magic"), ["unknown implementation", "cuda-magic", "naive"]),
    (case(impl="sdpa-turbo"), ["unknown SDPA backend", "turbo", "flash"]),
    (case(dtype="float8"), ["unknown dtype", "float8"]),
    (case(head_dim=100), ["head_dim", "multiple of 8", "100"]),
])
def test_bad_input_is_a_clear_error_before_any_measurement(bad, words):
    log = []
    with pytest.raises(ValueError) as err:
        collect_rows([case(), bad], fake_measure(log=log))
    assert log == []
    assert all(w in str(err.value) for w in words), str(err.value)


def test_head_dim_the_kernel_lacks_is_fine_for_pytorch_implementations():
    bench.validate_cases([case(impl="naive", head_dim=100), case(impl="sdpa", head_dim=100)])


def test_the_full_profile_times_d80_and_d96_at_the_large_shape():
    points = [c for c in bench.PLANS["full"].cases() if c.head_dim in (80, 96)]
    assert {(c.batch, c.heads, c.seq_len, c.head_dim) for c in points} == {(4, 32, 4096, 80), (4, 32, 4096, 96)}
    assert {(c.dtype, c.causal) for c in points} == {(dt, m) for dt in bench.BENCH_DTYPES for m in (False, True)}
    # the fused implementations: naive, SDPA's math and memory-efficient backends and the portable path are
    # timed at the sweeps' shapes only
    assert {c.impl for c in points} == set(bench.IMPLS) - {"naive", "sdpa-math", "sdpa-efficient", "triton-portable"}
    bench.validate_cases(points)
    assert not [c for c in bench.PLANS["quick"].cases() if c.head_dim in (80, 96)]  # quick stays cheap


# --- statistics -------------------------------------------------------------------------------


def test_ok_row_carries_the_timing_statistics_and_flop_rate():
    times = [float(x) for x in range(1, 101)]  # 1..100 ms
    [full, causal] = collect_rows([case(), case(causal=True)], fake_measure(times, peak=12345))
    assert full.status == "ok" and full.reason is None
    assert (full.latency_ms_median, full.n_timed_runs) == (50.5, 100)
    assert full.latency_ms_p10 == pytest.approx(10.9) and full.latency_ms_p90 == pytest.approx(90.1)
    flops = 4 * 2 * 8 * 1024**2 * 64
    assert full.flops == flops and causal.flops == flops / 2
    assert full.tflops == pytest.approx(flops / 50.5e-3 / 1e12)
    assert causal.tflops == pytest.approx(full.tflops / 2)
    assert full.peak_mem_bytes == 12345 and full.input_bytes == 3 * 2 * 8 * 1024 * 64 * 2
    assert full.kernel_config == {"BLOCK_M": 128}
    # host time is kept in microseconds, loop time in milliseconds, and the clock seen beside them
    assert full.host_us_median == pytest.approx(50.0) and full.host_us_p10 == pytest.approx(42.0)
    assert full.loop_ms_median == 2.0 and full.loop_ms_p90 == pytest.approx(2.4)
    assert (full.sm_clock_mhz, full.sm_clock_min_mhz, full.sm_clock_max_mhz) == (1950.0, 1900.0, 1980.0)


def test_too_few_timed_runs_is_said_in_the_row():
    [row] = collect_rows([case()], fake_measure(times=[1.0] * 10))
    assert row.status == "ok" and row.n_timed_runs == 10 and "only 10 timed calls" in row.reason
    # ten calls are enough for a call longer than 20 ms
    [long] = collect_rows([case()], fake_measure(times=[30.0] * 10))
    assert long.status == "ok" and long.reason is None


def test_forced_backend_is_recorded_as_used():
    [row] = collect_rows([case(impl="sdpa-efficient")], fake_measure())
    assert (row.backend_requested, row.backend_used) == ("efficient", "efficient")


def test_timed_run_count_is_the_minimum_for_long_calls_and_more_for_short_ones():
    assert timing.timed_calls(80.0) == timing.LONG_MIN_REPS == 10
    assert timing.timed_calls(19.0) == timing.MIN_REPS == 50
    assert timing.timed_calls(0.2) == timing.MIN_REPS  # 15 ms / (0.2 + 0.1 flush) ms = 50
    assert timing.timed_calls(0.05) == 100  # 15 ms / 0.15 ms
    assert timing.timed_calls(0.001, flush_ms=0.0) == timing.MAX_REPS


# --- failures are rows ------------------------------------------------------------------------


def test_out_of_memory_is_a_row_with_the_size_asked_for_and_the_sweep_goes_on():
    freed = []

    def measure(c):
        if c.impl == "naive":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total "
                                              "capacity of 15.7 GiB of which 1.2 GiB is free.")
        return fake_measure()(c)

    rows = measure_cases([case(impl="naive"), case(impl="triton")], measure, lambda r: None,
                         free=lambda: freed.append(1))
    assert [r.status for r in rows] == ["oom", "ok"]
    assert rows[0].requested_bytes == int(2.5 * 2**30) and "out of memory" in rows[0].reason
    assert rows[0].latency_ms_median is None and freed == [1]


def test_forced_backend_refusal_is_unsupported_with_pytorchs_reason():
    def measure(c):
        raise RuntimeError("No available kernel. Aborting execution.")

    flash, trit = collect_rows([case(impl="sdpa-flash"), case(impl="triton")], measure)
    assert flash.status == "unsupported" and "No available kernel" in flash.reason
    # the same words from something that forced nothing are an error, not a refusal
    assert trit.status == "error" and trit.reason.startswith("RuntimeError")


def test_any_other_exception_is_an_error_row_and_later_cases_still_run():
    def measure(c):
        if c.causal:
            raise ValueError("boom " * 500)
        return fake_measure()(c)

    rows = collect_rows([case(causal=True), case(causal=False)], measure)
    assert [r.status for r in rows] == ["error", "ok"]
    assert rows[0].reason.startswith("ValueError: boom") and len(rows[0].reason) <= 600


def test_a_case_that_cannot_fit_its_score_matrix_is_oom_without_trying():
    log = []
    small = 1 << 30  # 1 GiB; one fp16 score matrix at B=2, H=8, N=8192 is 2 GiB
    rows = collect_rows([case(impl="naive", seq_len=8192), case(impl="sdpa-math", seq_len=8192),
                         case(impl="triton", seq_len=8192)], fake_measure(log=log), memory_bytes=small)
    assert [r.status for r in rows] == ["oom", "oom", "ok"]
    assert rows[0].requested_bytes > small and "not attempted" in rows[0].reason
    assert [c.impl for c in log] == ["triton"]


def test_bf16_on_a_gpu_without_it_is_unsupported():
    rows = collect_rows([case(dtype="bfloat16"), case()], fake_measure(), supports_bf16=False)
    assert [r.status for r in rows] == ["unsupported", "ok"]


def test_time_budget_turns_the_rest_into_not_run_rows():
    now = iter([0.0, 5.0, 11.0, 12.0])
    rows = collect_rows([case(seq_len=n) for n in (512, 1024, 2048, 4096)], fake_measure(), deadline=10.0,
                        clock=lambda: next(now))
    assert [r.status for r in rows] == ["ok", "ok", "skipped", "skipped"]
    assert rows[2].reason.startswith("not run") and bench.BUDGET_ENV in rows[2].reason


def test_budget_env_var(monkeypatch):
    monkeypatch.setenv(bench.BUDGET_ENV, "0")
    assert bench.budget_seconds("full") is None
    monkeypatch.setenv(bench.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=bench.BUDGET_ENV):
        bench.budget_seconds("full")
    monkeypatch.delenv(bench.BUDGET_ENV)
    assert bench.budget_seconds("full") == bench.BUDGET_S["full"]


def test_requested_bytes_parses_pytorch_messages():
    assert bench.requested_bytes("Tried to allocate 20.00 MiB (GPU 0") == 20 * 2**20
    assert bench.requested_bytes("Tried to allocate 512 B") == 512
    assert bench.requested_bytes("illegal memory access") is None


# --- checkpoints and the data file ------------------------------------------------------------


def test_rows_checkpointed_before_a_crash_survive_and_validate(tmp_path):
    run_dir = synthetic.make_run(tmp_path, "crash-1")
    ctx = RunContext(run_id="crash-1", out_dir=run_dir, profile="quick", manifest=synthetic.manifest("crash-1"),
                     phase="bench", filename="bench.json")
    result = BenchFile(schema_version=SCHEMA_VERSION, run_id="crash-1", profile="quick", timing_method="fake",
                       backend_choice_method="fake", min_timed_runs=50)

    def on_row(row):
        result.rows.append(row)
        ctx.checkpoint(result)

    def measure(c):
        if c.seq_len == 4096:
            raise KeyboardInterrupt  # not a case failure: it ends the phase
        if c.impl == "naive":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB.")
        return fake_measure()(c)

    cases = [case(impl=i, seq_len=n) for n in (512, 4096) for i in ("naive", "sdpa-flash", "triton")]
    with pytest.raises(KeyboardInterrupt):
        try:
            measure_cases(cases, measure, on_row, free=lambda: None)
        finally:
            ctx.flush_checkpoint()  # what the runner does when a phase stops: rows since the last write land
    saved = json.loads((run_dir / "bench.json").read_text())
    assert [(r["impl"], r["status"]) for r in saved["rows"]] == [("naive", "oom"), ("sdpa-flash", "ok"),
                                                                  ("triton", "ok")]
    run = load_run(run_dir)  # pydantic, strict: the rows satisfy the contract
    assert len(run.phase("bench").rows) == 3


def test_run_needs_a_gpu_and_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    ctx = RunContext(run_id="r", out_dir=tmp_path, profile="quick", manifest=synthetic.manifest("r"),
                     phase="bench", filename="bench.json")
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        bench.run(ctx)
    assert not (tmp_path / "bench.json").exists()


# --- the real measurer, on the CPU ------------------------------------------------------------


def cpu_times(calls, wall_ms):
    import time

    assert wall_ms > 0 and calls  # the measurer times one warm call to size the run count
    times = []
    for _ in range(timing.MIN_REPS):
        t0 = time.perf_counter()
        calls[0]()
        times.append((time.perf_counter() - t0) * 1e3)
    t = summarize(times)
    return CallTimes(device=DeviceTiming(t), host=t, loop=t)


def test_device_measurer_end_to_end_on_the_cpu():
    """Real PyTorch implementations, a CPU timer: SDPA's choice is read, a refused backend is unsupported."""
    cases = [Case(impl, "float16", causal, 1, 2, 32, 16)
             for causal in (False, True) for impl in ("naive", "sdpa-math", "sdpa", "sdpa-cudnn")]
    measurer = bench.DeviceMeasurer(device="cpu", times=cpu_times)
    rows = collect_rows(cases, measurer)
    by = {(r.impl, r.causal): r for r in rows}
    for causal in (False, True):
        assert by[("naive", causal)].status == "ok" and by[("naive", causal)].n_timed_runs == timing.MIN_REPS
        assert by[("sdpa-math", causal)].backend_used == "math"
        auto = by[("sdpa", causal)]
        assert auto.status == "ok" and auto.backend_requested is None
        assert auto.backend_used in ("flash", "efficient", "cudnn", "math")
        refused = by[("sdpa-cudnn", causal)]
        assert refused.status == "unsupported" and refused.reason
        assert refused.latency_ms_median is None


# --- the pages, on synthetic runs -------------------------------------------------------------

from collect.jsonio import write_json_atomic  # noqa: E402
from collect.schema.bench import BenchRow  # noqa: E402
from render import fmt, model  # noqa: E402
from render.site import Report  # noqa: E402
from conftest import ROOT  # noqa: E402

FUSED_RATE = {"sdpa-flash": 400e12, "sdpa-cudnn": 450e12, "sdpa-efficient": 250e12, "sdpa": 400e12, "fa4": 420e12}


def synthetic_rows(triton_rate=300e12, triton_overhead_ms=0.0, naive_oom_from=16384, shapes=bench.PLANS["full"],
                   causal_efficiency=1.0, path=None):
    """A plausible sweep: fused kernels at a fixed FLOP rate, naive at a fixed bandwidth, flash refused for bf16."""
    rows = []
    for c in shapes.cases():
        b, h, n, d = c.batch, c.heads, c.seq_len, c.head_dim
        s_bytes = b * h * n * n * 2
        base = dict(impl=c.impl, backend_requested=c.backend_requested, backend_used=None, dtype=c.dtype,
                    causal=c.causal, batch=b, heads=h, seq_len=n, head_dim=d, flops=c.flops, input_bytes=c.input_bytes)
        if c.impl == "sdpa-flash" and c.dtype == "bfloat16":
            rows.append(BenchRow(**base, status="unsupported", reason="No available kernel. | Flash wants <script>"))
            continue
        if c.impl in ("naive", "sdpa-math") and n >= naive_oom_from and h == 32:
            rows.append(BenchRow(**base, status="oom", reason="OutOfMemoryError: CUDA out of memory.",
                                 requested_bytes=3 * s_bytes))
            continue
        if c.impl in ("naive", "sdpa-math"):
            ms = (4 * s_bytes + c.input_bytes * 4 / 3) / 3e12 * 1e3 * (1.3 if c.causal else 1.0)
            peak, used = 3 * s_bytes, "math" if c.impl == "sdpa-math" else None
        elif c.impl in ("triton", "triton-portable"):
            eff = (causal_efficiency if c.causal else 1.0) * (0.85 if c.impl == "triton-portable" else 1.0)
            ms = c.flops / (triton_rate * eff) * 1e3 + triton_overhead_ms
            peak, used = c.input_bytes // 3, None
        else:
            ms = c.flops / FUSED_RATE[c.impl] * 1e3 + 0.01
            peak, used = c.input_bytes // 3 + 4096, c.backend_requested or ("flash" if c.impl == "sdpa" else None)
        cfg = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3} if c.impl == "triton" else {}
        rows.append(BenchRow(**{**base, "backend_used": used}, status="ok", latency_ms_median=ms, latency_ms_p10=ms * 0.97,
                             latency_ms_p90=ms * 1.05, n_timed_runs=60, tflops=c.flops / ms / 1e9,
                             peak_mem_bytes=int(peak), kernel_config=cfg, warmup_s=2.0 if c.impl == "triton" else 0.01,
                             kernel_path=path(c) if path and c.impl == "triton" else None))
    return rows


def bench_run(tmp_path, run_id="synth-1", **kw):
    run_dir = synthetic.make_run(tmp_path, run_id)
    write_json_atomic(run_dir / "bench.json", BenchFile(
        schema_version=SCHEMA_VERSION, run_id=run_id, profile="full", timing_method="fake <timing>",
        backend_choice_method="fake", min_timed_runs=50, rows=synthetic_rows(**kw)))
    return Report.load(tmp_path, run_id)


def render(report, page):
    return report.render_markdown((ROOT / "docs" / page).read_text(), page)


def test_benchmarks_page_renders_every_figure_and_stays_small(tmp_path):
    report = bench_run(tmp_path)
    out = render(report, "benchmarks.md")
    for kind in ("latency", "tflops", "memory"):
        for shape in ("2x8x64", "4x32x128"):
            assert f'id="fig-bench-{kind}-{shape}"' in out
    assert len(out.encode()) < 1_000_000, len(out.encode())
    assert "wants <script>" not in out and "wants &lt;script&gt;" in out  # tool strings are escaped
    assert "out of memory" in out and "unsupported" in out
    assert "{{" not in out and "{%" not in out


def test_what_was_measured_follows_the_runs_shapes_and_implementations(tmp_path):
    # The quick profile sweeps one shape and has no single shapes; a GPU without the Hopper path drops the portable
    # row (it would time the very kernel `triton` does): the page's list and its count must follow, as on a T4.
    t4 = render(bench_run(tmp_path / "a", shapes=bench.plan_for_device(bench.PLANS["quick"], False)), "benchmarks.md")
    assert "as the sequence grows, over one sweep of N (B=2, H=8, d=64). Five kinds of implementation" in t4
    assert "our kernel held to its portable path" not in t4 and "two sweeps" not in t4
    full = render(bench_run(tmp_path / "b"), "benchmarks.md")
    assert ("over two sweeps of N (B=2, H=8, d=64 and B=4, H=32, d=128) and five single shapes, each at one "
            "length") in full
    assert "Six kinds of implementation" in full and "our kernel held to its portable path" in full


def test_findings_follow_the_data(tmp_path):
    fast = bench_run(tmp_path / "a", triton_rate=900e12).context()["bench"]
    slow = bench_run(tmp_path / "b", triton_rate=2e12).context()["bench"]
    shape = (2, 8, 64)
    f, s = fast.findings(shape), slow.findings(shape)
    assert "Triton is faster than naive PyTorch at every N measured" in f
    assert "Triton is faster than the fastest other implementation" in f
    assert "Triton is slower than naive PyTorch" not in f
    assert "Triton is slower than naive PyTorch at every N measured" in s
    assert "Triton is slower than the fastest other implementation" in s
    # naive's cost grows like N^2 bytes, a fused kernel's like N^2 d FLOP: the ratio is constant in N
    assert "holds roughly steady" in s
    # a fixed overhead makes the kernel lose at short N and win at long N: a crossover
    cross = bench_run(tmp_path / "c", triton_rate=900e12, triton_overhead_ms=0.5).context()["bench"]
    text = cross.findings(shape)
    assert "Triton pulls ahead of naive PyTorch between N=2048 and N=4096" in text
    assert re.search(r"pulls ahead of the fastest other implementation \(SDPA cuDNN at every N\) between N=8192 and N=16384", text)


def test_memory_and_oom_findings(tmp_path):
    page = bench_run(tmp_path).context()["bench"]
    text = page.memory_finding((2, 8, 64))
    assert "N<sup>2.00</sup> for naive PyTorch" in text  # 3 S-sized tensors: exactly quadratic
    assert "N<sup>1.00</sup> for Triton" in text
    # one oom length: the time Triton took there is not tagged with the same N twice
    assert re.search(r"Naive PyTorch ran out of memory at N=16384, where Triton ran \(in [\d.]+ ms there\)\.",
                     page.findings((4, 32, 128)))
    table = page.failures_table()
    # requested_bytes is the allocation that failed, not the call's whole need: said so, since it can be below the
    # device's memory
    assert "one allocation of up to" in table and "failed, on top of what the call already held" in table
    assert "FlashAttention-2 (SDPA)" in table and "&lt;script&gt;" in table
    assert "FlashAttention-2 (SDPA)" in page.backend_choice()


def test_byte_arithmetic_page_uses_the_runs_device_and_data(tmp_path):
    report = bench_run(tmp_path)
    out = render(report, "byte-arithmetic.md")
    assert "{{" not in out and 'id="fig-bytes-roofline-4x32x128"' in out
    page = report.context()["bytes"]
    # H200 (synthetic): 60 MiB L2; 256 heads... here B*H = 16 and 128. One head: sqrt(60 MiB / 2) = 5608
    limits = {r["shape"]: r for r in page.limits}
    assert limits[(2, 8, 64)]["l2_one"] == 5608
    assert limits[(4, 32, 128)]["l2_all"] == 495  # sqrt(62914560 / (128 * 2)) = 495.7
    # the synthetic naive holds 3 score tensors: measured multiple 3, limit sqrt(150e9 / (3*128*2)) = 13975
    assert limits[(4, 32, 128)]["live"] == pytest.approx(3.0)
    assert limits[(4, 32, 128)]["oom_live"] == 13975
    assert "Naive first ran out of memory at N=16,384" in page.limits_finding()
    # The code as written hands an fp32 P between kernels: sqrt(62914560 / (16 * 4)) = 991, so N=1024 is past
    # the L2 although the two-byte S of all 16 heads would fit up to N=1402.
    assert limits[(2, 8, 64)]["l2_all"] == 1402 and limits[(2, 8, 64)]["l2_p32"] == 991
    assert ("up to N=512 both could stay in the cache; at N=1,024 S still fits but the fp32 P does not; from "
            "N=2,048 on both go to DRAM") in page.limits_finding()
    # measured ridge 7.5e14 / 4e12 = 187.5: naive (limit 32 or 64) is memory-bound, fused crosses at N=375
    f = page.intensity_finding()
    assert "bound by memory at every N" in f and "every length swept" in f
    # d/2 is a limit no length reaches: given as limits, and the table's values at the lengths swept apart from them
    assert "the limits are 32.0 to 64.0 FLOP/byte for d=64, 80, 96 and 128, all below the ridge" in f
    values = [model.naive_intensity(n, s[2], 2) for s in page.shapes() for n in page.seq_lens(s)]
    assert max(values) < 64 and min(values) < 32
    assert f"At the lengths swept its intensity is {fmt.num(min(values))} to {fmt.num(max(values))} FLOP/byte" in f
    # one head dim: one limit, said as one
    one = bench_run(tmp_path / "q", shapes=bench.plan_for_device(bench.PLANS["quick"], False)).context()["bytes"]
    f1 = one.intensity_finding()
    assert "the limit is 32.0 FLOP/byte for d=64, below the ridge" in f1 and "the limits are" not in f1
    v1 = [model.naive_intensity(n, 64, 2) for n in one.seq_lens((2, 8, 64))]
    assert f"its intensity is {fmt.num(min(v1))} to {fmt.num(max(v1))} FLOP/byte" in f1 and max(v1) < 32


def test_causal_finding_flips_with_the_measured_speedup(tmp_path):
    # BLOCK_M=128: T = N/128; a causal kernel that runs at full rate per FLOP matches 2T/(T+1) only if its
    # time halves exactly, i.e. the synthetic speedup is 2 and always exceeds the prediction
    over = bench_run(tmp_path / "a").context()["bytes"]
    n = int((over.causal["verdict"] == "beats the block count").sum())
    assert n > 1 and f"{n} beat the block count (of" in over.causal_finding()  # a count of rows agrees with it
    assert "same tile config ran both ways, so the block count does not explain" in over.causal_finding()
    # at 60% efficiency per causal FLOP the speedup is 1.2: short of the prediction everywhere
    short = bench_run(tmp_path / "b", causal_efficiency=0.6).context()["bytes"]
    text = short.causal_finding()
    assert "straddle the diagonal" in text and "beats the block count" not in text
    assert set(short.causal["verdict"]) == {"short of the block count"}
    df = short.causal
    assert (df["measured"] < df["predicted"]).all()
    row = df[(df["shape"] == (2, 8, 64)) & (df["n"] == 512) & (df["dtype"] == "float16")].iloc[0]
    assert row["t"] == 4 and row["predicted"] == pytest.approx(8 / 5)  # 2T/(T+1) with T = 512/128


def test_a_causal_ratio_between_two_kernels_is_not_read_as_the_mask_saving(tmp_path):
    # The rules send causal N=2048 to another path than non-causal: that row's ratio compares two kernels.
    route = lambda c: "gluon" if c.causal and c.seq_len == 2048 else "portable"  # noqa: E731
    page = bench_run(tmp_path, path=route).context()["bytes"]
    df = page.causal
    mixed = df[df["n"] == 2048]
    assert len(mixed) and set(mixed["verdict"]) == {"different kernels with and without the mask"}
    # public names, unmasked first as the ratio and the clocks column take them
    assert set(mixed["paths"]) == {"portable kernel / Gluon kernel"}
    assert "different kernels with and without the mask" in page.causal_finding()
    assert "<td>portable kernel / Gluon kernel</td>" in page.causal_table()
    assert "<th>path (unmasked / masked)</th>" in page.causal_table()
    assert "<td>portable kernel</td>" in page.causal_table()


def test_pages_show_the_missing_note_without_bench_data(tmp_path):
    synthetic.make_run(tmp_path, "nobench-1")
    report = Report.load(tmp_path, "nobench-1")
    for page in ("benchmarks.md", "byte-arithmetic.md"):
        out = render(report, page)
        assert "Not collected in this run" in out and "{{" not in out


def test_pages_survive_a_quick_run_where_our_kernel_failed_everywhere(tmp_path):
    rows = synthetic_rows(shapes=bench.PLANS["quick"])
    for r in rows:
        if r.impl == "triton":
            r.status, r.reason, r.latency_ms_median, r.tflops, r.kernel_config = "error", "CompilationError: x", None, None, {}
    run_dir = synthetic.make_run(tmp_path, "quick-1")
    write_json_atomic(run_dir / "bench.json", BenchFile(schema_version=SCHEMA_VERSION, run_id="quick-1", profile="quick",
                                                        timing_method="t", backend_choice_method="b",
                                                        min_timed_runs=50, rows=rows))
    report = Report.load(tmp_path, "quick-1")
    bench_out, bytes_out = render(report, "benchmarks.md"), render(report, "byte-arithmetic.md")
    assert bench_out.count("No Triton case ran (3 error)") == 2  # one per masking, three lengths each
    assert 'id="fig-bench-latency-2x8x64"' in bench_out and "4x32x128" not in bench_out
    assert "no length has both a causal and a non-causal Triton run" in bytes_out


def test_kernel_path_rule_and_tensor_core_use_are_recorded():
    m = Measurement(times=call_times([1.0] * 60), peak_mem_bytes=1, kernel_config={"BLOCK_M": 64},
                    kernel_path="portable", path_rule="measured rule: d=64 non-causal", tensor_cores=False)
    [row] = collect_rows([case()], lambda c: m)
    assert (row.kernel_path, row.tensor_cores) == ("portable", False) and row.path_rule.startswith("measured rule")
    [sdpa] = collect_rows([case(impl="sdpa")], fake_measure())
    assert sdpa.kernel_path is None and sdpa.tensor_cores is None  # unknown, not "no"
    g = Measurement(times=call_times([1.0] * 60), peak_mem_bytes=1, kernel_path="gluon", kernel_step="g5",
                    path_rule="measured rule: d=128 causal", tensor_cores=True)
    [row] = collect_rows([case()], lambda c: g)
    assert (row.kernel_path, row.kernel_step) == ("gluon", "g5")


def test_single_shapes_are_table_rows_not_curves(tmp_path):
    fast = bench_run(tmp_path / "a", triton_rate=900e12).context()["bench"]
    slow = bench_run(tmp_path / "b", triton_rate=2e12).context()["bench"]
    assert fast.shapes() == [(2, 8, 64), (4, 32, 128)]  # the sweeps get sections
    points = bench.PLANS["full"].points
    table = fast.points_table()
    # one row per single shape, dtype and mask; the d=80/96 points and the inference shapes alike
    assert table.count("<tr>") - 1 == len({(b, h, n, d) for b, h, n, d in points}) * 2 * 2
    assert "B=1, H=32, d=128, N=32768" in html.unescape(table) or "N=32768" in table
    assert "on par with or faster than the fastest other implementation in 20 of 20 cases" in fast.points_finding()
    said = slow.points_finding()
    assert "in 0 of 20 cases" in said and "its lowest speed ratio is" in said
    out = render(bench_run(tmp_path / "c"), "benchmarks.md")
    assert "Single shapes: what inference runs" in out and 'id="fig-bench-latency-8x16x64"' not in out
    # the summary lists every shape with its lengths, so no sentence of it carries them: four numbers at most
    summary = fast.summary().split("???")[0]
    assert "\n- B=2, H=8, d=64, over seq_len 512 to 16384\n" in summary
    assert "\n- B=1, H=32, d=128, at seq_len 32768 only\n" in summary
    words = " ".join(line for line in summary.splitlines() if not line.startswith("- "))
    for said in prose.sentences(words):
        assert len(re.findall(r"(?<![\w.=-])\d[\d,]*(?:\.\d+)?", said)) <= 4, said


def test_the_roofline_says_how_far_sdpa_maths_measured_bytes_put_it_left_of_its_drawn_intensity(tmp_path):
    """SDPA math is drawn at the model's intensity; where Nsight Compute measured it moving far more (its fp32
    matmuls and extra passes: run h100-20261205b, 4.33x at N=2048), the caption says how much lower its real
    intensity is. Drawn at its measured bytes, it would say nothing."""
    from committed import latest_run
    from hostile.corpus import copy_run

    run = latest_run("profile.json")
    prof = run.frame("profile", "impls")
    math = prof[(prof["impl"] == "sdpa-math") & (prof["status"] == "ok") & prof["dram_read_bytes"].notna()]
    if math.empty:
        pytest.skip("the newest committed profile has no SDPA math row with DRAM bytes")
    dst = copy_run(tmp_path, "roof-20261201", src=run.path)
    page = Report.load(tmp_path, "roof-20261201").context()["bytes"]
    captions = "".join(page.roofline_figure(s) for s in page.shapes())
    r = math.iloc[0]
    over = model.call_dram_bytes(r) / model.naive_traffic_bytes(int(r["seq_len"]), int(r["head_dim"]), 2,
                                                                  int(r["batch"] * r["heads"]))
    assert over >= 1.5  # the case the caption is for
    assert "Nsight Compute measured SDPA math moving" in captions and "its points belong that far to the left" in captions
    # the same profile with SDPA math's bytes at the model's: no sentence
    data = json.loads((dst / "profile.json").read_text())
    for row in data["impls"]:
        if row["impl"] == "sdpa-math" and row.get("dram_read_bytes"):
            n, d, bh = row["seq_len"], row["head_dim"], row["batch"] * row["heads"]
            row["dram_read_bytes"] = model.naive_traffic_bytes(n, d, 2, bh) - 2 * n * d * bh
            row["dram_write_bytes"] = 2 * n * d * bh
    (dst / "profile.json").write_text(json.dumps(data))
    page = Report.load(tmp_path, "roof-20261201").context()["bytes"]
    assert "Nsight Compute measured SDPA math" not in "".join(page.roofline_figure(s) for s in page.shapes())
