"""The home page's headline findings: computed from the narrated run, worded by the data, linked to their pages.

The small phase-file builders here are shared with test_compare.py.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import synthetic
from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.bench import BenchFile, BenchRow
from collect.schema.decode import DecodeFile, DecodeRow
from collect.schema.profile import ImplRow, KernelRow, ProfileFile
from conftest import ROOT
from render import fmt
from render.pages.home import HomePage
from render.runs import load_run
from render.site import Report

B, H, D = 2, 8, 64


def bench_file(run_id: str, triton_ms=1.0, naive_ms=2.0, sdpa_ms=0.5, ns=(512, 2048), shape=(B, H, D)) -> BenchFile:
    rows = []
    for n in ns:
        flops = 4.0 * shape[0] * shape[1] * n * n * shape[2]
        for impl, ms, used in (("naive", naive_ms, None), ("triton", triton_ms, None), ("sdpa-flash", sdpa_ms, "flash"),
                               ("sdpa-math", 10 * max(naive_ms, triton_ms, sdpa_ms), "math")):
            t = ms * n / ns[0]
            rows.append(BenchRow(impl=impl, backend_requested=used, backend_used=used, dtype="float16", causal=False,
                                 batch=shape[0], heads=shape[1], seq_len=n, head_dim=shape[2], status="ok",
                                 latency_ms_median=t, latency_ms_p10=0.9 * t, latency_ms_p90=1.1 * t, n_timed_runs=50,
                                 flops=flops, tflops=flops / (t * 1e-3) / 1e12, peak_mem_bytes=n * n * (4 if impl == "naive" else 1)))
    return BenchFile(schema_version=SCHEMA_VERSION, run_id=run_id, profile="quick", timing_method="synthetic",
                     backend_choice_method="synthetic", min_timed_runs=50, rows=rows)


def profile_file(run_id: str, naive_dram=1e9, triton_dram=1e7, limits=(2, 3, 8, 32), regs=128, smem=65536,
                 theoretical=25.0, achieved=23.5) -> ProfileFile:
    impls, kernels = [], []
    for impl, dram in (("naive", naive_dram), ("triton", triton_dram)):
        case = f"main-b2h8n2048d64-{impl}"
        impls.append(ImplRow(case_id=case, group="main", impl=impl, batch=B, heads=H, seq_len=2048, head_dim=D,
                             dtype="float16", causal=False, status="ok", kernels=1, duration_ms=0.1,
                             dram_read_bytes=dram * 0.6, dram_write_bytes=dram * 0.4, flops_model=1.7e10))
        lr, ls, lw, lb = limits if impl == "triton" else (8, 8, 8, 32)
        kernels.append(KernelRow(case_id=case, impl=impl, launch=0, ncu_id=len(kernels), kernel_name=f"{impl}_kernel<T>",
                                 block_size=256, duration_ms=0.1, achieved_occupancy_pct=achieved,
                                 theoretical_occupancy_pct=theoretical, block_limit_registers=lr, block_limit_smem=ls,
                                 block_limit_warps=lw, block_limit_blocks=lb, registers_per_thread=regs,
                                 smem_per_block_bytes=smem))
    return ProfileFile(schema_version=SCHEMA_VERSION, run_id=run_id, impls=impls, kernels=kernels)


def decode_file(run_id: str, graph_over_floor=6.0, dequant_peak_extra=50e6, kernel_peak_extra=-20e6,
                contexts=(128, 1000)) -> DecodeFile:
    rows = []
    weights = 250e6
    for c in contexts:
        bf16_cache = 4 * (c + 64) * 36864
        base_peak = weights + bf16_cache + 10e6
        floor = (weights + bf16_cache) / 4e12 * 1e3
        steps = {"eager": 4.0, "graph": graph_over_floor * floor, "int8-dequant": 9.0, "int8-kernel": 6.0}
        peaks = {"eager": base_peak, "graph": base_peak, "int8-dequant": base_peak + dequant_peak_extra,
                 "int8-kernel": base_peak + kernel_peak_extra}
        for v, ms in steps.items():
            cache = bf16_cache if not v.startswith("int8") else bf16_cache * 0.53
            rows.append(DecodeRow(model="gpt2", variant=v, batch=4, context=c, new_tokens=65, status="ok",
                                  steps_timed=64, step_ms_median=ms, tokens_per_s=4e3 / ms,
                                  peak_mem_bytes=int(peaks[v]), kv_cache_bytes=int(cache), floor_ms=floor,
                                  achieved_over_floor=ms / floor, token_match=None if v == "eager" else 1.0))
    return DecodeFile(schema_version=SCHEMA_VERSION, run_id=run_id, floor_bandwidth_bytes_per_s=4e12, rows=rows)


def write_run(data_dir: Path, run_id: str, device="NVIDIA H200", created="2026-11-29T08:00:00+00:00",
              bench=None, profile=None, decode=None, phases=("bench", "profile", "decode")) -> Path:
    """A run with the given phase files (defaults for each phase in `phases` not given)."""
    run_dir = synthetic.make_run(data_dir, run_id, name=device, created=created)
    files = {"bench": bench or (bench_file(run_id) if "bench" in phases else None),
             "profile": profile or (profile_file(run_id) if "profile" in phases else None),
             "decode": decode or (decode_file(run_id) if "decode" in phases else None)}
    for phase, obj in files.items():
        if obj is not None:
            write_json_atomic(run_dir / f"{phase}.json", obj)
    return run_dir


def home(tmp_path, **kw) -> HomePage:
    run = load_run(write_run(tmp_path, "h-1", **kw))
    return HomePage(run, [run])


def test_headlines_follow_a_kernel_that_wins(tmp_path):
    page = home(tmp_path)
    text = page.headlines()
    # Triton's 4.0 MB written is under its 4.19 MB output (B2 H8 N2048 d64 fp16): counted as the output.
    assert "98.1× fewer bytes" in page.bytes_headline()
    speed = page.speed_headline()
    assert "2.00× faster than naive PyTorch at N=2048" in speed
    assert "2.00× slower than the fastest other implementation there (FlashAttention-2 (SDPA))" in speed
    occ = page.occupancy_headline()
    assert "limited by registers (128 registers per thread)" in occ and "2 blocks per SM" in occ
    assert "25.0%" in occ and "23.5%" in occ and "tied" not in occ
    floor = page.decode_floor_headline()
    assert "context 1000" in floor and "CUDA graph" in floor and "the kernels set the pace" in floor
    int8 = page.int8_headline()
    assert "53.0%" in int8 and "raises the peak by" in int8 and "lowers the peak by" in int8
    assert "against our eager loop" in int8 and "%" not in int8.split("53.0%")[1]  # bytes, not shares of a peak
    for link in ("(profiling.md)", "(benchmarks.md)", "(decode.md)"):
        assert link in text
    assert text.count("\n- **") == 4


def test_headlines_flip_with_the_data(tmp_path):
    page = home(tmp_path, bench=bench_file("h-1", triton_ms=3.0, naive_ms=1.0, sdpa_ms=6.0),
                profile=profile_file("h-1", naive_dram=1e7, triton_dram=5e7, limits=(3, 3, 8, 32)),
                decode=decode_file("h-1", graph_over_floor=1.2, dequant_peak_extra=-30e6, kernel_peak_extra=0))
    # naive's 4 MB written is under its 4.19 MB output: charged its output, 10.2 MB against 50 MB: 4.90x
    assert "4.90× more bytes" in page.bytes_headline() and "did not cut" in page.bytes_headline()
    speed = page.speed_headline()
    assert "3.00× slower than naive PyTorch" in speed and "2.00× faster than the fastest other" in speed
    occ = page.occupancy_headline()
    assert "registers" in occ and "shared memory (64.0 KiB of shared memory per block) (tied)" in occ
    assert "3 blocks per SM" in occ
    assert "moving bytes sets the pace" in page.decode_floor_headline()
    int8 = page.int8_headline()
    assert "lowers the peak by" in int8 and "leaves the peak as it is with our eager loop" in int8 and "raises" not in int8


def test_the_int8_headline_names_the_float_cache_the_run_decoded_with(tmp_path):
    assert "against the bf16 cache's" in home(tmp_path / "h200").int8_headline()
    t4 = decode_file("h-1")
    t4.dtype = "float16"  # a T4 decodes in fp16
    int8 = home(tmp_path / "t4", device="Tesla T4", decode=t4).int8_headline()
    assert "against the fp16 cache's" in int8 and "bf16" not in int8


def test_occupancy_falls_back_on_the_rules_without_ncu_block_limits(tmp_path):
    prof = profile_file("h-1")
    for k in prof.kernels:
        k.block_limit_registers = k.block_limit_smem = k.block_limit_warps = k.block_limit_blocks = None
        k.registers_per_thread, k.smem_per_block_bytes = 64, 200_000  # shared memory binds on an H200
    occ = home(tmp_path, profile=prof).occupancy_headline()
    assert "limited by shared memory" in occ and "occupancy rules" in occ and "1 block per SM" in occ


def test_missing_phases_say_so_and_bytes_fall_back_on_the_model(tmp_path):
    page = home(tmp_path, phases=())
    assert "Not measured in this run (no profile was collected)" in page.bytes_headline()
    assert "33.0× fewer" in page.bytes_headline() and "(byte-arithmetic.md)" in page.bytes_headline()
    for text in (page.speed_headline(), page.occupancy_headline(), page.decode_floor_headline(), page.int8_headline()):
        assert "was not collected in this run" in text
    assert "not collected" in page.speed_headline() and "NVIDIA H200" in page.speed_headline()


def test_a_failed_phase_is_called_failed(tmp_path):
    run_dir = write_run(tmp_path, "h-1", phases=("bench", "decode"))
    m = json.loads((run_dir / "manifest.json").read_text())
    m["phases"].append({"name": "profile", "status": "failed", "error": "RuntimeError: ncu missing"})
    (run_dir / "manifest.json").write_text(json.dumps(m))
    run = load_run(run_dir)
    page = HomePage(run, [run])
    assert "the profile phase failed" in page.bytes_headline()
    assert "The `profile` phase failed in this run" in page.occupancy_headline()


def test_index_keeps_the_phase_table_and_shows_the_headlines(tmp_path):
    write_run(tmp_path, "h-1")
    out = Report.load(tmp_path).render_markdown((ROOT / "docs" / "index.md").read_text(), "index.md")
    # the findings come straight after the title, the headline table after them
    assert out.startswith("# Attention on the GPU, measured\n\nOn NVIDIA H200, fusing attention cut")
    assert out.index("fusing attention cut") < out.index("<table>") < out.index("## About this report")
    assert "## Headline findings" in out and "fewer bytes" in out and "[Profiling](profiling.md)" in out
    assert "| `bench` | [Byte arithmetic](byte-arithmetic.md), [Benchmarks](benchmarks.md) |" in out
    assert "| `decode` | [Decode](decode.md) |" in out and "| `iterations` | [Kernel iterations](iterations.md) |" in out
    assert "(compare.md)" in out and "{{" not in out
    # The Decode page quotes how far a ratio moved over the other runs on the same GPU: not this run's numbers alone.
    assert "the Decode page's ranges of a ratio over the runs on the same GPU" in out


def test_even_timings_read_as_on_par(tmp_path):
    speed = home(tmp_path, bench=bench_file("h-1", triton_ms=1.0, naive_ms=1.02, sdpa_ms=0.99)).speed_headline()
    assert "on par with naive PyTorch (1.02×) at N=2048" in speed
    assert "on par with the fastest other implementation (0.990×) there" in speed


def test_the_fastest_other_is_placed_at_its_own_length_where_naive_stopped_short(tmp_path):
    # naive runs out of memory first: its longest length is not the rivals', so "there" would name the wrong N
    b = bench_file("h-1", ns=(512, 2048, 4096))
    for r in b.rows:
        if r.impl == "naive" and r.seq_len == 4096:
            r.status, r.reason, r.latency_ms_median, r.latency_ms_p10, r.latency_ms_p90, r.tflops = (
                "oom", "CUDA out of memory", None, None, None, None)
    speed = home(tmp_path, bench=b).speed_headline()
    assert "faster than naive PyTorch at N=2048" in speed
    assert "the fastest other implementation at N=4096 (FlashAttention-2 (SDPA))" in speed and "there" not in speed


def test_the_first_findings_name_the_model_whose_decode_loop_they_rank(tmp_path):
    # Only one model's rows are ranked, so the closest loop is that model's, not the run's.
    text = home(tmp_path).findings_first()
    assert "In decode, gpt2's loop closest to its bandwidth floor at batch 4 and context 1000 (our step in a CUDA graph)" in text


def test_a_call_whose_output_is_still_in_l2_is_charged_its_output(tmp_path):
    # Nsight Compute stops counting when the kernel ends: a fused call's output can still sit in L2.
    prof = profile_file("h-1")
    for r in prof.impls:
        if r.impl == "triton":
            r.dram_read_bytes, r.dram_write_bytes = 6e6, 1280.0
    text = home(tmp_path, profile=prof).bytes_headline()
    assert "9.72 MiB" in text and "at least its output" in text  # 6e6 read + 2*8*2048*64*2 written, not 1280


def test_the_first_findings_judge_the_headline_shape_even_where_another_comes_closer(tmp_path):
    # One shape off the sweep (batch 64) comes closer; the opening names the loop at the sweep's longest context,
    # as the Decode headline and the table below do, so the page calls one loop closest at one ratio.
    d = decode_file("h-1", graph_over_floor=6.0)
    extra = d.rows[0].__class__(model="gpt2", variant="graph", batch=64, context=512, new_tokens=65, status="ok",
                                steps_timed=64, step_ms_median=0.2, floor_ms=0.1, achieved_over_floor=2.0)
    d.rows.append(extra)
    page = home(tmp_path, decode=d)
    text = page.findings_first()
    assert "at batch 4 and context 1000 (our step in a CUDA graph) takes 6.00× the floor" in text
    assert "2.00× the floor" not in text and "6.00×" in page.decode_floor_headline() and "6.00×" in page.decode_table()


def test_the_pace_of_a_decode_step_is_read_from_its_idle_share(tmp_path):
    d = decode_file("h-1", graph_over_floor=6.0)
    for r in d.rows:
        r.kernel_ms_per_step = r.step_ms_median * 0.97
    text = home(tmp_path, decode=d).decode_floor_headline()
    assert "the GPU idles for only 3.00% of the step" in text and "idle gaps between them, or" not in text


def test_pytorchs_choice_of_a_forced_backend_is_not_a_second_sample_of_the_fastest(tmp_path):
    # 'sdpa' ran flash, which was also timed forced: its quicker sample must not stand for the fastest backend.
    b = bench_file("h-1", triton_ms=1.0, sdpa_ms=1.25)
    auto = [dataclasses.replace(r, impl="sdpa", backend_requested=None, latency_ms_median=r.latency_ms_median * 0.6,
                                latency_ms_p10=r.latency_ms_p10 * 0.6, latency_ms_p90=r.latency_ms_p90 * 0.6,
                                tflops=r.tflops / 0.6) for r in b.rows if r.impl == "sdpa-flash"]
    b.rows.extend(auto)
    speed = home(tmp_path, bench=b).speed_headline()
    assert "1.25× faster than the fastest other implementation there (FlashAttention-2 (SDPA))" in speed


def test_the_limiter_headline_comes_from_the_counters_and_falls_back_to_occupancy(tmp_path):
    import dataclasses as dc

    from collect.schema.profile import StallRow

    # no unit counters (an older profile): the headline says what sets occupancy, as before
    old = home(tmp_path / "old")
    assert old.limiter_headline() == old.occupancy_headline()

    def with_units(stalls=(("selected", 1.0), ("barrier", 2.0), ("long_scoreboard", 0.5)), **units):
        pf = profile_file("h-1")
        pf.kernels = [dc.replace(k, **units) if k.impl == "triton" else k for k in pf.kernels]
        pf.stalls = [StallRow(case_id="main-b2h8n2048d64-triton", launch=0, reason=r, warps_per_issue=v)
                     for r, v in stalls]
        return pf

    quiet = dict(pipe_tensor_pct=60.0, pipe_xu_pct=40.0, issue_slots_pct=35.0, sol_dram_pct=10.0)
    text = home(tmp_path / "a", profile=with_units(**quiet)).limiter_headline()
    # barrier is 80% of the stalls ('selected' left out): over half, so "chiefly"
    assert "limited by stalls, chiefly barrier" in text and "tensor pipe, 60.0%" in text
    # the largest share but not half (33% wait, 26% barrier, as the audited run had): never "mostly" or "chiefly"
    spread = (("selected", 1.0), ("wait", 0.33), ("barrier", 0.26), ("long_scoreboard", 0.21), ("gmma", 0.2))
    plural_ = home(tmp_path / "c", profile=with_units(spread, **quiet)).limiter_headline()
    assert "limited by stalls, led by wait (" in plural_
    assert "mostly" not in plural_ and "chiefly" not in plural_
    assert "Its theoretical occupancy is 25.0% of the warp slots: 4.0 warps per scheduler" in text
    assert "not the limit" not in text and "[Profiling](profiling.md)" in text
    busy = home(tmp_path / "b", profile=with_units(**dict(quiet, pipe_xu_pct=88.0))).limiter_headline()
    assert "limited by the exponential (XU) pipe: exponential (XU) pipe busy 88.0%" in busy


def test_the_table_gives_no_verdict_for_a_row_that_ran_another_kernel_than_the_profiled_call(tmp_path):
    b = bench_file("h-1", ns=(512, 2048, 4096))
    for r in b.rows:
        if r.impl == "triton":
            r.path, r.kernel_step = "gluon", ("g8" if r.seq_len == 2048 else "g33")
    pf = profile_file("h-1")
    pf.kernels = [dataclasses.replace(k, kernel_step="g8", pipe_tensor_pct=60.0, pipe_xu_pct=40.0,
                                      issue_slots_pct=35.0, sol_dram_pct=10.0) if k.impl == "triton" else k
                  for k in pf.kernels]
    table = home(tmp_path, bench=b, profile=pf).headline_table()
    assert "not profiled for this row&#x27;s kernel (g33; the profile ran g8 at B=2, H=8, N=2048)" in table


def test_a_byte_cut_beyond_fusions_own_is_put_down_to_naives_extra_passes(tmp_path):
    text = home(tmp_path).findings_first()  # 98.1x at N=2048, d=64: 1 + N/d = 33x of it
    # the two multiply (33.0 x 2.97 = 98.1): each said as a factor, the passes' computed from the data
    import re
    cut = float(re.search(r"cut the DRAM bytes of one call ([\d.]+)×", text).group(1))
    assert "keeping the scores on chip accounts for a factor of 33.0× of that (1 + N/d)" in text
    assert f"the remaining factor of {cut / 33.0:.2f}×" in text
    assert "for the rest" not in text
    modest = home(tmp_path / "b", profile=profile_file("h-1", naive_dram=1.4e8, triton_dram=1e7)).findings_first()
    assert "accounts for" not in modest and "remaining factor" not in modest


def test_a_complete_phase_that_skipped_rows_for_time_says_how_many(tmp_path):
    d = decode_file("h-1")
    d.rows[0].status, d.rows[0].reason = "skipped", "the decode phase's time budget was spent"
    d.rows[0].step_ms_median = d.rows[0].tokens_per_s = d.rows[0].achieved_over_floor = None
    page = home(tmp_path, decode=d)
    assert f"1 of its {len(d.rows)} rows skipped for time" in page.run.phase_summary("decode")


# ---- an equal-clock caveat where the Benchmarks page would give one; the decode floor as a yardstick --------

def _clocked(triton_ms: float, sdpa_ms: float, ours_mhz: float, theirs_mhz: float) -> BenchFile:
    b = bench_file("h-1", triton_ms=triton_ms, sdpa_ms=sdpa_ms)
    for r in b.rows:
        r.sm_clock_mhz = ours_mhz if r.impl == "triton" else theirs_mhz
    return b


def _flash_cell(page: HomePage) -> str:
    (case,) = page._headline_cases()
    return page._headline_cells(*case)["sdpa-flash"]


def test_a_headline_cell_whose_calls_read_clocks_apart_says_which_read_higher(tmp_path):
    from render.vocab import CLOCK_GAP
    # on par as timed; ours read 1900 MHz against 1800 (5.6% apart): the mark, and no verdict rescaled by the readings
    assert 1900 / 1800 - 1 > CLOCK_GAP
    ahead = home(tmp_path / "a", bench=_clocked(1.0, 1.0, 1900.0, 1800.0))
    assert _flash_cell(ahead) == "4.29 TFLOP/s; ours on par (1.00×) at a higher clock reading"
    table = ahead.headline_table()
    assert "at a higher (lower) clock reading: ours had a median SM clock reading more than 3% above (below)" in table
    assert "equal clocks" not in table
    behind = home(tmp_path / "b", bench=_clocked(1.0, 1.0, 1800.0, 1900.0))
    assert _flash_cell(behind).endswith("on par (1.00×) at a lower clock reading")
    slower = home(tmp_path / "c", bench=_clocked(1.0, 0.5, 1900.0, 1800.0))
    assert _flash_cell(slower).endswith("ours 2.00× slower at a higher clock reading")
    # clocks within CLOCK_GAP (or not recorded): no caveat, and the caption does not explain one
    close = home(tmp_path / "d", bench=_clocked(1.0, 1.0, 1900.0, 1890.0))
    assert _flash_cell(close).endswith("ours on par (1.00×)") and "clock" not in close.headline_table()
    assert _flash_cell(home(tmp_path / "e")).endswith("ours 2.00× slower")


def _micro(fraction: float) -> list:
    from collect.schema.decode import MicroRow
    rows = []
    for impl, share in (("triton-bf16", fraction), ("sdpa", 0.8)):
        read = 1 << 30
        ms = read / (share * 4e12) * 1e3
        rows.append(MicroRow(impl=impl, batch=4, heads=32, head_dim=128, context=4096, status="ok",
                             latency_ms_median=ms, latency_ms_p10=ms, latency_ms_p90=ms, bytes_read=read,
                             achieved_bytes_per_s=read / (ms * 1e-3), bandwidth_fraction=read / (ms * 1e-3) / 4e12))
    return rows


def test_the_decode_floor_is_called_a_yardstick_where_reading_alone_beat_the_copy_bandwidth(tmp_path):
    beaten = decode_file("h-1")
    beaten.micro = _micro(1.05)
    text = home(tmp_path / "a", decode=beaten).decode_floor_headline()
    assert "which reading alone beats: a yardstick, not a hard bound" in text
    assert "read its cache up to 5.00% faster than that copy bandwidth" in text
    held = decode_file("h-1")
    held.micro = _micro(0.97)
    for d, where in ((held, "b"), (decode_file("h-1"), "c")):  # reads below the copy rate, or no microbenchmark
        text = home(tmp_path / where, decode=d).decode_floor_headline()
        assert "its bandwidth floor of" in text and "yardstick" not in text and "faster than that" not in text


def test_the_headline_captions_clock_marks_with_the_readings_own_error_where_it_shows():
    """Run h100-20261205b: 'at a lower clock' marks rested on readings up to 5.2% above the device's maximum SM
    clock; the caption says how far the readings can be off wherever it marks a clock."""
    from committed import latest_run
    from render.clock_reading import overshoot

    run = latest_run("bench.json")
    page = HomePage(run, [run])
    table = page.headline_table()
    marked = "at a higher (lower) clock" in table
    shown = overshoot(page._bench[page._bench["status"] == "ok"], run.manifest.device) is not None
    assert ("The clock readings are of the rest before each call" in table) == (marked and shown)


def test_the_headline_caption_says_what_a_kernel_step_label_is_where_a_cell_uses_one():
    from committed import latest_run

    run = latest_run("profile.json")
    table = HomePage(run, [run]).headline_table()
    uses = "not profiled for this row&#x27;s kernel" in table or "not profiled for this row's kernel" in table
    assert ("g followed by a number: the step of the Gluon kernel that ran" in table) == uses


def test_the_tables_limiter_names_the_profilers_clock_where_it_lies_apart_from_the_timed_one(tmp_path):
    """Run h100-20261205b: the tensor pipe's 79.98% is a share of cycles at the 1,636 MHz Nsight Compute read, while
    the timed calls ran after a reading of 1,953 MHz. The cell says both; within CLOCK_GAP it says neither."""
    from collect.schema.profile import StallRow

    def cell(profiled_mhz, timed_mhz, where):
        b = bench_file("h-1")
        for r in b.rows:
            r.sm_clock_mhz = timed_mhz
        pf = profile_file("h-1")
        pf.kernels = [dataclasses.replace(k, pipe_tensor_pct=60.0, pipe_xu_pct=40.0, issue_slots_pct=35.0,
                                          sol_dram_pct=10.0, sm_clock_mhz=profiled_mhz) if k.impl == "triton" else k
                      for k in pf.kernels]
        pf.stalls = [StallRow(case_id="main-b2h8n2048d64-triton", launch=0, reason=r, warps_per_issue=v)
                     for r, v in (("selected", 1.0), ("barrier", 2.0))]
        return home(tmp_path / where, bench=b, profile=pf).headline_table()

    apart = cell(1636.0, 1953.0, "apart")
    assert ("(profiled at B=2, H=8, N=2048, a share of its cycles at the 1,636 MHz Nsight Compute read, against 1,953 "
            "MHz read before its timed calls)") in apart
    assert "Nsight Compute read" not in cell(1940.0, 1953.0, "close")


def test_the_decode_floor_headline_names_a_faster_loop_whose_floor_is_lower(tmp_path):
    """Run h100-20261205b: the bf16 graph came closest to its floor (0.377 ms, 2.85x) while the int8 cache's graph
    took less time (0.365 ms) against a lower floor; "closest to its floor" must not read as "fastest"."""
    d = decode_file("h-1")
    graph = next(r for r in d.rows if r.variant == "graph" and r.context == 1000)
    floor = 0.6 * graph.floor_ms
    step = 0.9 * graph.step_ms_median  # faster in time, yet further from its own floor
    d.rows.append(dataclasses.replace(graph, variant="int8-graph", step_ms_median=step, floor_ms=floor,
                                      tokens_per_s=4e3 / step, achieved_over_floor=step / floor))
    text = home(tmp_path / "a", decode=d).decode_floor_headline()
    assert "the loop closest to its floor (our step in a CUDA graph)" in text
    assert (f"The fastest step there in time is that of our int8 cache in a CUDA graph: {fmt.ms(step)}, against a "
            f"lower floor of its own, {fmt.ms(floor)}.") in text
    # where the loop closest to its floor is also the fastest, nothing more is said
    assert "fastest step there" not in home(tmp_path / "b").decode_floor_headline()
