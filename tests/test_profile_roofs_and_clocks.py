"""The Profiling page judges each call against the compute roof of the pipes it used, says which clock and which
FLOP count each rate stands on, and reports the SM clocks under the profiler as measured; the Reproduce page's
sentences about clocks follow the same data."""
from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path

import pytest

import synthetic_report as S
from collect.schema.manifest import MeasuredCeiling
from render import fmt
from render.pages.home import HomePage
from render.pages.profile import ProfilePage
from render.runs import load_run
from render.site import Report

DOCS = Path(__file__).parent.parent / "docs"
FM = 4.0 * 2 * 8 * 2048 * 2048 * 64  # the synthetic profile's analytical FLOPs per call


def text(s: str) -> str:
    return html.unescape(s)


def page(tmp_path, fp32: float | None = None, bench=None, clocks=None, **kw) -> ProfilePage:
    """The synthetic profile (naive, sdpa-math with FP32 GEMMs, our kernel); fp32: a measured FP32 matmul rate;
    clocks: (SM clock of every profiled kernel, SM clock of our timing of every call)."""
    pf = S.profile_file("rep-1", **kw)
    if clocks is not None:
        for k in pf.kernels:
            k.sm_clock_mhz = clocks[0]
        for c in pf.clock_check:
            c.sm_clock_mhz = clocks[1]
    run = S.make(tmp_path, profile=pf, bench=bench)
    if fp32 is not None:
        m = json.loads((run.path / "manifest.json").read_text())
        m["measured_ceilings"] = [c for c in m["measured_ceilings"] if c["name"] != "matmul_fp32"]
        m["measured_ceilings"].append(dataclasses.asdict(MeasuredCeiling(
            name="matmul_fp32", quantity="flops", status="ok", problem="M=N=K=8192 fp32", repeats=10,
            per_s_median=fp32, per_s_p10=fp32 * 0.99, per_s_p90=fp32 * 1.01)))
        (run.path / "manifest.json").write_text(json.dumps(m))
        run = load_run(run.path)
    return ProfilePage(run, [run])


# ---- the compute roof follows the pipes the call used ---------------------------------------------

def test_a_call_without_tensor_cores_is_judged_against_the_fp32_roof(tmp_path):
    # sdpa-math: 2.0 GB of DRAM for FM FLOPs in 1 ms. Its DRAM roof (4 TB/s x 8.6 FLOP/B = 34 TFLOP/s) lies above
    # a 20 TFLOP/s FP32 roof, so FP32 compute binds it; against the tensor roof, DRAM would.
    p = page(tmp_path / "a", fp32=2.0e13)
    level, share = p.binding_roofs()["sdpa-math"]
    assert level == "FP32 compute" and abs(share - (FM / 1e-3) / 2.0e13) < 1e-9
    assert p.binding_roofs()["triton"][0].startswith("tensor fp16")  # tensor cores ran: the tensor roof
    t = text(p.roofline_finding())
    assert "SDPA math, whose matrix multiplies ran without tensor cores, is judged against the FP32 roof" in t
    assert f"measured ridge with the DRAM roof sits at {fmt.num(2.0e13 / 4.0e12)} FLOP per byte" in t
    # 8.6 FLOP/B is past the FP32 ridge
    assert "Right of the DRAM ridge (DRAM bandwidth does not bind them): SDPA math and Triton (ours)." in t
    assert "FP32 compute for SDPA math" in p.findings_first()


def test_a_call_that_ran_tensor_cores_keeps_the_tensor_roof(tmp_path):
    p = page(tmp_path, fp32=2.0e13, math_tensor_flops=1e10)
    assert p.binding_roofs()["sdpa-math"][0] == "DRAM bandwidth"
    t = text(p.roofline_finding())
    assert "judged against the FP32 roof" not in t
    assert "Left of the DRAM ridge (DRAM bandwidth caps them below their compute roof): naive PyTorch and SDPA math." in t


def test_tensor_pipe_instructions_of_an_idle_gemm_are_not_put_elsewhere(tmp_path):
    # The synthetic call's GEMMs issue no tensor-pipe instructions: only its softmax does.
    assert "come from softmax_warp_forward, not from a matrix multiply" in text(page(tmp_path / "a").tensor_core_sentence())
    # The same call, its two FP32 GEMMs now issuing some tensor-pipe instructions, as on the H200.
    pf = S.profile_file("rep-1")
    gemms = [k for k in pf.kernels if k.impl == "sdpa-math" and "gemm" in k.kernel_name]
    gemms[0].tensor_inst, gemms[1].tensor_inst = 16384.0, 1024.0
    run = S.make(tmp_path / "b", profile=pf)
    t = text(ProfilePage(run, [run]).tensor_core_sentence())
    assert "not from a matrix multiply" not in t
    assert ("its GEMM kernels issued 17,408 of those instructions, and softmax_warp_forward the rest, yet the tensor "
            "FLOP counters counted no tensor-core operation in any of them") in t


# ---- each rate names its clock and FLOP count ------------------------------------------------------

def test_the_table_shows_the_device_time_rate_beside_nsight_computes(tmp_path):
    p = page(tmp_path, bench=S.bench_rows(), clock_ratio=1.1)
    table = text(p.impl_table())
    assert "Kernel time (Nsight Compute)" in table and "Achieved: counted FLOPs / Nsight Compute time" in table
    assert "Analytical FLOPs / our device time" in table
    # our kernel: 0.05 ms under Nsight Compute, 0.055 ms on our clock
    assert fmt.flops(FM / 0.05e-3) in table and fmt.flops(FM / 0.055e-3) in table
    note = text(p.rates_note())
    assert (f"our device time is {fmt.ratio(1.1)} Nsight Compute's kernel time, which takes {fmt.flops(FM / 0.05e-3)} "
            f"to {fmt.flops(FM / 0.055e-3)}") in note
    bench = [r for r in S.bench_rows() if r.impl == "triton" and r.seq_len == 2048][0]
    assert f"shows {fmt.flops(bench.tflops * 1e12)} for it" in note
    assert "shows" not in text(page(tmp_path / "nobench").rates_note())  # no bench phase, no bench figure


def test_the_pages_say_which_clock_their_times_come_from(tmp_path):
    page(tmp_path, bench=S.bench_rows())
    report = Report.load(tmp_path)
    prof = text(report.render_markdown((DOCS / "profiling.md").read_text(), "profiling.md"))
    repro = text(report.render_markdown((DOCS / "reproduce.md").read_text(), "reproduce.md"))
    # Neither page claims one clock for every time: this page's achieved rates are Nsight Compute's.
    assert "Every time on the other pages" not in prof and "Every speed in this report" not in repro
    assert "kernel times on this page, and the achieved rates\ncomputed from them, are Nsight Compute's" in prof
    assert "The two rates differ in clock and in FLOP count" in prof
    # Reproduce points to the one place the clocks are checked against each other, not a second copy of it
    assert "Every page times with one clock, CUDA events around each call" in repro  # said before it is named
    assert "page sets it against Nsight Compute's kernel time" in repro
    assert "kernel times on this page" not in repro
    # A row's SM clock is the spin's before the call, not the call's, and may pass the reported maximum (the schema
    # bounds a reading, not by the device's maximum); the Hardware page's table of clocks is nvidia-smi's.
    flat = " ".join(repro.split())
    assert ("read in the short spin that rests the GPU just before each call, never during it: it is the clock of "
            "that rest, not of the call, and it can read above the device's reported maximum") in flat
    assert "lists the clocks nvidia-smi reported at moments of the run" in flat
    assert "the clocks the GPU ran at" not in flat
    assert {c.source for c in report.run.manifest.clocks} <= {"nvidia-smi"}
    from collect.schema.common import CLOCK_MHZ
    assert CLOCK_MHZ["hi"] > 2 * report.run.manifest.device.sm_clock_max_mhz


# ---- the SM clocks under the profiler, as measured ---------------------------------------------------

def test_profiler_clocks_lower_than_ours_are_reported_as_such(tmp_path):
    # Kernel times that grew with the lower reading (ours 1650/1970 of Nsight Compute's): measured at that clock.
    t = text(page(tmp_path, clocks=(1650.0, 1970.0), clock_ratio=1650 / 1970).profiler_clock_finding())
    assert "profiled calls at 1,650 MHz" in t and "our timing of the same calls at 1,970 MHz" in t
    assert "differed by more than 3.0% for 3 of 3 calls, the profiler's clock lower" in t
    assert "not at the timed calls'" in t and "does not describe" not in t


def test_a_lower_clock_reading_that_the_kernel_times_contradict_is_not_believed(tmp_path):
    # The same readings, but our kernel (bound by the tensor roof) took no longer under the profiler than on our
    # clock (ours 1.02x Nsight Compute's): it did not run at a clock 16% lower.
    p = page(tmp_path, clocks=(1650.0, 1970.0), clock_ratio=1.02)
    assert "compute" in p.binding_roofs()["triton"][0]
    t = text(p.profiler_clock_finding())
    assert "differed by more than 3.0% for 3 of 3 calls, the profiler's clock lower" in t
    assert "not at the timed calls'" not in t
    assert ("the one call bound by a compute roof, whose time would grow as the SM clock falls if that roof set it, "
            "took no longer under "
            "Nsight Compute than on our clock, where the clock reading would make it "
            f"{fmt.pct(100 * (1970 / 1650 - 1), 2)} longer") in t
    assert "Triton (ours) at N=2048, d=64, read at 1,650 MHz, took 0.0500 ms against 0.0510 ms on our clock" in t
    # Said of the one call it was tested on, not of every profiled call: the other two are not bound by a compute
    # roof, so their times staying put says nothing of the clock they ran at.
    assert ("So for that call, either its kernel ran under the profiler at a higher clock than it read, or it ran at "
            "about the clock it read in both runs") in t
    assert ("Either way the rates this page computes from its kernel time are not understated by a lower clock: the "
            "two times agree.") in t
    assert "the kernels ran at" not in t


def test_a_slowdown_far_short_of_the_clock_reading_is_printed_as_a_true_bound(tmp_path):
    """A call 1.54% slower under the profiler: the bound printed must hold for it (not 'no more than 1.5%')."""
    p = page(tmp_path, clocks=(1650.0, 1970.0), clock_ratio=1 / 1.0154)
    t = text(p.profiler_clock_finding())
    assert "took 1.54% longer under Nsight Compute than on our clock" in t, t
    assert "more than 1.5%" not in t


def test_profiler_clocks_that_match_ours_are_reported_as_such(tmp_path):
    t = text(page(tmp_path, clocks=(1960.0, 1970.0)).profiler_clock_finding())
    assert "within 3.0% of each other" in t and "differed" not in t


def test_unrecorded_clocks_are_not_guessed(tmp_path):
    t = text(page(tmp_path).profiler_clock_finding())
    assert "did not record the SM clock" in t and "MHz" not in t


def test_the_reproduce_page_reports_the_clocks_it_measured(tmp_path):
    p = page(tmp_path, clocks=(1650.0, 1970.0))
    m = json.loads((p.run.path / "manifest.json").read_text())
    m["profiler_flags"] = ["--clock-control", "none", "--nvtx"]
    (p.run.path / "manifest.json").write_text(json.dumps(m))
    report = Report.load(tmp_path)
    repro = text(report.render_markdown((DOCS / "reproduce.md").read_text(), "reproduce.md"))
    assert "same boost behaviour" not in repro
    assert "It left the clocks alone (`--clock-control none`)" in repro
    # the clocks the profiler saw are read on the Profiling page, once
    assert "the profiler's clock lower" not in repro
    assert "the profiler's clock lower" in text(report.render_markdown((DOCS / "profiling.md").read_text(),
                                                                        "profiling.md"))


def test_kernels_faster_than_the_measured_l2_roof_make_the_page_call_it_a_rate():
    from committed import latest_run
    run = latest_run("profile.json")
    page = ProfilePage(run, [run])
    for shape in page.shapes():
        roof = page.roofs(shape)["l2"].value
        k = page.kernels()
        k = k[k["case_id"].isin(set(page._rows(shape)["case_id"]))]  # the calls drawn at this shape, no others
        faster = int(((k["l2_bytes"] / (k["duration_ms"] * 1e-3)) > roof).sum())
        said = page._l2_roof_exceeded(shape)
        assert bool(said) == (faster > 0)
        if faster:
            assert f"{faster} profiled kernel" in said and said in page.roofline_finding(shape)


def test_only_the_kernels_of_the_calls_drawn_can_make_the_l2_roof_a_rate(tmp_path):
    # A register-cap kernel spilling at 20 TB/s through L2 (roof 12 TB/s) is in no roofline: no sentence.
    pf = S.profile_file("rep-1")
    pf.kernels.append(S.kernel("regcap-triton-r80", "triton", 0, "_attn_fwd", 0.05, l2_bytes=1e9))
    spill = page_of(tmp_path / "a", pf)
    assert spill._l2_roof_exceeded() == "" and "rate, not a ceiling" not in text(spill.roofline_finding())
    # Our drawn kernel doing the same: the sentence names it.
    [k for k in pf.kernels if k.case_id == "main-triton"][0].l2_bytes = 1e9
    ours = page_of(tmp_path / "b", pf)
    said = text(ours.roofline_finding())
    assert "The L2 roof is a rate, not a ceiling: 1 profiled kernel moved L2 traffic faster" in said
    assert "(<code>_hopper_fwd_ws_persistent</code>)" in said


def page_of(path, pf) -> ProfilePage:
    run = S.make(path, profile=pf)
    return ProfilePage(run, [run])


# ---- a ranking within one call's noise is not a ranking --------------------------------------------

def test_calls_within_a_few_percent_of_each_others_roof_share_are_not_ranked():
    from render.pages.profile.roofline import RANK_NOISE
    lead = "Measured"
    # As in run h200-20261201f at N=2048: naive at 58.6% of its L2 roof, ours at 58.0% of the tensor roof.
    tie = ProfilePage._closest_and_furthest({"naive": ("L2 bandwidth", 0.586), "triton": ("tensor fp16 compute", 0.580),
                                             "sdpa-math": ("DRAM bandwidth", 0.40)}, lead)
    assert "comes closest" not in tie
    assert ("naive PyTorch, at 58.6% of its L2 bandwidth roof, and Triton (ours), at 58.0% of its tensor fp16 "
            "compute roof, come equally close.") in tie
    assert "SDPA math stays furthest, at 40.0% of its DRAM bandwidth roof." in tie
    apart = ProfilePage._closest_and_furthest({"naive": ("L2 bandwidth", 0.586),
                                               "triton": ("tensor fp16 compute", 0.586 * (1 - 2 * RANK_NOISE)),
                                               "sdpa-math": ("DRAM bandwidth", 0.40)}, lead)
    assert "naive PyTorch comes closest, at 58.6% of its L2 bandwidth roof, and SDPA math stays furthest" in apart
    bottom = ProfilePage._closest_and_furthest({"naive": ("L2 bandwidth", 0.586), "triton": ("tensor fp16 compute", 0.40),
                                                "sdpa-math": ("DRAM bandwidth", 0.405)}, lead)
    assert "naive PyTorch comes closest" in bottom and "stays furthest" not in bottom and "stay equally far" in bottom


@pytest.mark.parametrize("ours, equal", [(0.893, False), (0.912, True)])
def test_calls_grouped_within_the_noise_are_equally_close_only_within_a_point(ours, equal):
    from render.pages.profile.roofline import EQUAL_PTS, RANK_NOISE

    # Run h200-20261205f at d=64 causal: FlashAttention-4 at 91.8% of its roof and ours at 89.3%, inside RANK_NOISE
    # of each other but 2.5 points apart: not "equally close"
    top = {"fa4": ("tensor fp16 compute", 0.918), "triton": ("tensor fp16 compute", ours)}
    assert ours >= 0.918 * (1 - RANK_NOISE) and (100 * (0.918 - ours) <= EQUAL_PTS) == equal
    for bind in (top, {**top, "sdpa-efficient": ("shared memory bandwidth", 0.46)}):
        said = ProfilePage._closest_and_furthest(bind, "Measured")
        assert ("equally close" in said) == equal
        if not equal:
            assert "FlashAttention-4 the closer" in said and "Triton (ours) the closer" not in said
    alone = ProfilePage._closest_and_furthest(top, "Measured")
    assert alone.endswith("come equally close." if equal else "come about as close, FlashAttention-4 the closer.")
    # three far calls: the range, then the furthest named where they are more than a point apart
    far = {"naive": ("L2 bandwidth", 0.63), "sdpa-flash": ("DRAM bandwidth", 0.40),
           "sdpa-math": ("DRAM bandwidth", 0.394), "sdpa-efficient": ("DRAM bandwidth", 0.405)}
    said = ProfilePage._closest_and_furthest(far, "M")
    assert "stay furthest, at 39.4% to 40.5% of their lowest roofs, SDPA math the furthest" in said
    said = ProfilePage._closest_and_furthest({**far, "sdpa-math": ("DRAM bandwidth", 0.398)}, "M")
    assert "stay equally far, at 39.8% to 40.5% of their lowest roofs." in said and "the furthest" not in said


def test_the_committed_runs_roofline_ranks_only_calls_apart_by_more_than_the_noise():
    from committed import latest_run
    from render.pages.profile.roofline import RANK_NOISE
    run = latest_run("profile.json")
    page = ProfilePage(run, [run])
    for shape in page.shapes():
        shares = sorted((v for _, v in page.binding_roofs(shape).values()), reverse=True)
        said = text(page.roofline_finding(shape))
        if len(shares) > 1:
            assert ("comes closest" in said) == (shares[1] < shares[0] * (1 - RANK_NOISE))


# ---- one basis for a call's DRAM bytes ---------------------------------------------------------------

def test_every_dram_figure_of_a_call_counts_its_writes_as_at_least_its_output(tmp_path):
    # Our kernel's counters: 11.7 MB read and 1.3 MB written, below its 4 MiB output (still in L2 at the stop).
    p = page(tmp_path)
    row = p._rows(p.headline).set_index("impl").loc["triton"]
    out = 2 * 8 * 2048 * 64 * 2
    assert row["dram_write_bytes"] < out
    moved = row["dram_read_bytes"] + out
    assert fmt.bytes_(moved) != fmt.bytes_(row["dram_read_bytes"] + row["dram_write_bytes"])
    assert fmt.bytes_(moved) in text(p.impl_table()) and fmt.bytes_(moved) in text(p.bytes_table())
    pts = p.level_points().set_index(["impl", "level"])
    assert pts.loc[("triton", "dram"), "bytes"] == moved
    assert p.bytes_frame().set_index("impl").loc["triton", "dram"] == moved
    assert f"({fmt.bytes_(moved)} against" in text(p.findings_first())
    home = HomePage(p.run, [p.run])
    assert home._dram(row) == moved and fmt.bytes_(moved) in text(home.bytes_headline())
    # said once on the page, beside the first table
    report = Report.load(tmp_path)
    prof = text(report.render_markdown((DOCS / "profiling.md").read_text(), "profiling.md"))
    assert prof.count("the writes counted as at least the call's output: L2 is a write-back cache") == 1


def test_a_second_roof_close_above_the_lowest_is_named_and_a_far_one_is_not(tmp_path):
    far = page(tmp_path / "far", fp32=2.0e13)
    assert "sdpa-math" not in far.close_roofs()  # its DRAM roof lies well above the 20 TFLOP/s FP32 roof
    dram = dict(far._roof_caps(far.headline)["sdpa-math"][1])["DRAM bandwidth"]
    close = page(tmp_path / "close", fp32=dram / 1.05)  # the FP32 roof 5% under the DRAM roof
    level, above = close.close_roofs()["sdpa-math"]
    assert level == "DRAM bandwidth" and abs(above - 1.05) < 1e-9
    t = text(close.roofline_finding())
    assert "SDPA math, its DRAM bandwidth roof 5.00% above its FP32 compute roof" in t
    assert "A second roof lies just above the lowest" in t
    assert "SDPA math, its" not in text(far.roofline_finding())
