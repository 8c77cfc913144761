"""Findings, not number dumps: the built site's prose keeps to four measured figures a sentence, and every
outcome word flips when synthetic data flips the fact behind it."""
from __future__ import annotations

import html

import pytest

import prose
import synthetic_report as S
from collect.schema import site_pages
from collect.schema.common import tflops
from render import escape, model
from render.pages.bench import BenchPage
from render.pages.bench.words import describe_gap
from render.pages.byte_arithmetic.causal_verdicts import causal_verdict
from render.pages.hardware import HardwarePage
from render.pages.home import HomePage
from render.pages.profile import ProfilePage
from test_bench_phase import bench_run

LIMIT = 4


def text(s: str) -> str:
    """Page output as a reader sees it (entities decoded)."""
    return html.unescape(s)


# ---- the prose reader ----------------------------------------------------------------------------

def test_prose_reader_skips_tables_figures_and_code_and_counts_figures():
    page = ("<html><article><h1>T</h1><p>It took 1.50 ms, 3 GiB and 2.00× the floor; 40% of it. Next one "
            "at N=512 had 4.88×10⁻⁴ error.</p><table><tr><td>9 ms 9 ms 9 ms 9 ms 9 ms</td></tr></table>"
            "<figure><figcaption>5 ms 5 ms 5 ms 5 ms 5 ms</figcaption></figure><pre><code>1 ms 2 ms 3 ms 4 ms 5 ms"
            "</code></pre><p>Inline <code>7 ms</code> is code.</p></article></html>")
    ss = prose.page_sentences(page)
    assert ss == ["T", "It took 1.50 ms, 3 GiB and 2.00× the floor; 40% of it.",
                  "Next one at N=512 had 4.88×10⁻⁴ error.", "Inline is code."]
    assert prose.figures(ss[1]) == ["1.50 ms", "3 GiB", "2.00×", "40%"]
    assert prose.figures(ss[2]) == ["4.88×10⁻⁴"]  # N=512 is a shape, not a measured figure
    assert prose.figures("at 4.24 TB/s and 656 TFLOP/s, 155 FLOP per byte") == ["4.24 TB/s", "656 TFLOP/s",
                                                                                  "155 FLOP per byte"]


@pytest.mark.parametrize("page", [p.doc for p in site_pages()])
def test_no_sentence_carries_more_than_four_measured_figures(built_site, page):
    rel = "index.html" if page == "index.md" else page.replace(".md", "/index.html")
    sentences = prose.page_sentences((built_site / rel).read_text(encoding="utf-8"))
    assert sentences, f"{page}: no prose found"
    over = [(len(prose.figures(s)), s) for s in sentences if len(prose.figures(s)) > LIMIT]
    assert over == []


# ---- Benchmarks ----------------------------------------------------------------------------------

def test_gap_words_flip_with_the_speedups():
    ns = [512, 1024, 2048]
    assert "faster than X at every N" in describe_gap(ns, [2.0, 3.0, 5.0], "X")
    assert "the gap grows with N" in describe_gap(ns, [2.0, 3.0, 5.0], "X")
    assert "the gap grows up to N=1024, then narrows" in describe_gap(ns, [2.0, 5.0, 3.0], "X")
    assert "slower than X at every N" in describe_gap(ns, [0.5, 0.5, 0.5], "X")
    assert "holds roughly steady" in describe_gap(ns, [0.5, 0.5, 0.5], "X")
    assert "on par with X at every N" in describe_gap(ns, [1.0, 0.99, 1.02], "X")
    assert "pulls ahead of X between N=512 and N=1024" in describe_gap(ns, [0.5, 2.0, 3.0], "X")
    assert "falls behind X between N=1024 and N=2048" in describe_gap(ns, [2.0, 2.0, 0.5], "X")
    mixed = describe_gap(ns, [2.0, 0.5, 2.0], "X")
    assert "changes back and forth" in mixed and "faster at N=512 and 2048" in mixed
    for s in (describe_gap(ns + [4096, 8192, 16384], [0.5, 2, 0.5, 2, 0.5, 2], "X"),):
        assert len(prose.figures(s)) <= LIMIT


def test_small_sizes_read_host_bound_or_gpu_bound_from_loop_time(tmp_path):
    host_bound = BenchPage(*_one(S.make(tmp_path / "a", bench=S.bench_rows(loop_factor=lambda i, n: 3.0 if n <= 1024
                                                                                    else 1.0))))
    t = text(host_bound.small_n_finding())
    assert "Host-bound cases:" in t and "up to N=1024" in t and "From N=2048 on" in t
    assert "host-bound" in host_bound.small_n_table() and "GPU-bound" in host_bound.small_n_table()
    assert "Up to N=1024, some calls are host-bound" in host_bound.findings_more()
    gpu_bound = BenchPage(*_one(S.make(tmp_path / "b", bench=S.bench_rows(loop_factor=lambda i, n: 1.05))))
    t = text(gpu_bound.small_n_finding())
    assert "No case is host-bound" in t and "Host-bound cases" not in t
    assert "the GPU, not the host, sets the pace" in gpu_bound.findings_more()
    assert 'id="fig-bench-loop-over-device-2x8x64"' in gpu_bound.small_n_figure()


def test_small_sizes_say_what_is_missing_without_host_and_loop_time(tmp_path):
    page = BenchPage(*_one(S.make(tmp_path, bench=S.bench_rows(host_us=None, sm_clock=False))))
    assert "device time only" in page.small_n_finding() and "cannot say whether" in page.small_n_finding()
    assert page.small_n_table() == "" and page.small_n_figure() == ""
    assert "SM clock during the timing was not recorded" in page.summary()
    with_clock = BenchPage(*_one(S.make(tmp_path / "c", bench=S.bench_rows())))
    # every synthetic case's median is 1,960 MHz; single samples 1,890 to 1,980
    assert "median SM clock was 1,960 MHz, and single calls saw 1,890 to 1,980 MHz" in with_clock.summary()


def test_triton_against_naive_flips_in_the_opening(tmp_path):
    fast = BenchPage(*_one(S.make(tmp_path / "a", bench=S.bench_rows(triton_ms=0.002))))
    slow = BenchPage(*_one(S.make(tmp_path / "b", bench=S.bench_rows(triton_ms=0.2))))
    assert "Triton is faster in 4 of 4 cases" in fast.findings_first()
    assert "Triton is faster in 0 of 4 cases" in slow.findings_first()
    assert "it is slower only at N=512, 1024, 2048 and 4096" in slow.findings_first()


# ---- Byte arithmetic: the block count checked row by row -----------------------------------------

def test_causal_verdicts_cover_every_kind_of_row():
    assert causal_verdict(1.80, 1.88, False) == "as predicted"
    assert causal_verdict(1.40, 1.88, False) == "short of the block count"
    assert causal_verdict(2.34, 1.88, False) == "beats the block count"
    assert causal_verdict(0.90, 1.88, False) == "slower with the mask"
    assert causal_verdict(0.90, 1.88, True) == "within the timing spread"
    assert causal_verdict(1.5, None, False) is None


def test_causal_finding_names_rows_the_model_does_not_explain(tmp_path):
    slower = bench_run(tmp_path / "a", causal_efficiency=0.4).context()["bytes"]  # causal 0.8x: slower
    t = slower.causal_finding()
    assert "Doing less work cannot by itself make a run slower" in t and "does not explain" in t
    assert "against it (named in the causal section below)" in slower.findings_first()
    short = bench_run(tmp_path / "b", causal_efficiency=0.6).context()["bytes"]
    assert "Doing less work" not in short.causal_finding() and "against it" not in short.findings_first()
    # The verb follows the outcome: a count that fell short in every tested row overestimates, not predicts.
    first = short.findings_first()
    assert "overestimates Triton's causal speedup in all 32 rows" in first and "predicts" not in first
    assert "0 as predicted" not in first
    assert "was put to the test against Triton's causal speedup" in slower.findings_first()


def test_the_causal_count_is_said_to_apply_only_where_one_kernel_ran_both_ways(tmp_path):
    route = lambda c: "gluon" if c.causal and c.seq_len == 2048 else "portable"  # noqa: E731
    page = bench_run(tmp_path, path=route).context()["bytes"]
    mixed = int((page.causal["n"] == 2048).sum())
    first = page.findings_first()
    assert f"in the other {mixed} they ran different kernels, so the count does not apply" in first
    assert (f"in all {len(page.causal) - mixed} rows where the masked and unmasked calls ran one kernel at comparable "
            "SM clocks") in first


def test_the_causal_tally_counts_rows_not_kernels_and_tiles_per_head(tmp_path):
    route = lambda c: "gluon" if c.causal and c.seq_len == 2048 else "portable"  # noqa: E731
    page = bench_run(tmp_path, path=route, causal_efficiency=0.6).context()["bytes"]
    mixed = int((page.causal["n"] == 2048).sum())
    t = text(page.causal_finding())
    # "28 different kernels with and without the mask" counted kernels; the tally counts rows.
    assert f"{mixed} that ran different kernels with and without the mask" in t
    assert f"{mixed} different kernels" not in t
    # The visited tiles are one head's (T query tiles' walks), not the launch's: the sentence says whose.
    short = page.causal[page.causal["verdict"] == "short of the block count"]
    worst = short.loc[(short["measured"] / short["predicted"]).idxmin()]
    assert f"{int(worst['diag'])} of the {int(worst['visited'])} key tiles each head visits straddle the diagonal" in t


def _bench_edited(tmp_path, edit, **kw):
    """The synthetic sweep of test_bench_phase with `edit(rows)` applied before it is written: the Byte arithmetic
    page of that run."""
    from collect.jsonio import write_json_atomic
    from collect.schema import SCHEMA_VERSION
    from collect.schema.bench import BenchFile
    from render.site import Report
    from synthetic import make_run
    from test_bench_phase import synthetic_rows
    rows = synthetic_rows(**kw)
    for r in rows:
        if r.status == "ok":
            r.sm_clock_mhz = 1950.0
    edit(rows)
    run_dir = make_run(tmp_path, "synth-1")
    write_json_atomic(run_dir / "bench.json", BenchFile(
        schema_version=SCHEMA_VERSION, run_id="synth-1", profile="full", timing_method="fake",
        backend_choice_method="fake", min_timed_runs=50, rows=rows))
    return Report.load(tmp_path, "synth-1").context()["bytes"]


def _rows_at(rows, impl, n, shape=(4, 32, 128), dtype="bfloat16"):
    return {r.causal: r for r in rows if r.impl == impl and r.seq_len == n and (r.batch, r.heads, r.head_dim) == shape
            and r.dtype == dtype and r.status == "ok"}


def test_the_two_tested_rows_of_one_shape_are_named_as_one_shape_in_two_dtypes(tmp_path):
    # Only N=16384 runs one kernel both ways (others mix paths), and only at B=2, H=8, d=64.
    route = lambda c: "gluon" if (c.seq_len == 16384 and c.heads == 8) or c.causal else "portable"  # noqa: E731
    page = bench_run(tmp_path, causal_efficiency=0.6, path=route).context()["bytes"]
    first = page.findings_first()
    assert ("overestimates Triton's causal speedup in both rows where the masked and unmasked calls ran one "
            "kernel at comparable SM clocks, one shape in two dtypes (B=2, H=8, d=64, N=16384, fp16 and bf16)") in first
    assert "in the other 30 they ran different kernels, so the count does not apply" in first


def test_a_ratio_past_what_a_mask_gives_names_a_higher_masked_reading_but_never_rescales_by_it(tmp_path):
    # The unmasked call read 1714 MHz against 1919 masked: the ratio passes 2x. A reading is the rest's clock, not the
    # call's, so the page names the gap as a possible cause and takes no ratio to "one clock".
    def throttle(rows):
        pair = _rows_at(rows, "triton", 16384)
        pair[True].latency_ms_median = pair[False].latency_ms_median / 2.03
        pair[True].latency_ms_p10, pair[True].latency_ms_p90 = (pair[True].latency_ms_median * x for x in (0.97, 1.05))
        pair[True].tflops = tflops(pair[True].flops, pair[True].latency_ms_median)
        pair[False].sm_clock_mhz, pair[True].sm_clock_mhz = 1714.0, 1919.0
    page = _bench_edited(tmp_path, throttle)
    row = page.causal[(page.causal["shape"] == (4, 32, 128)) & (page.causal["dtype"] == "bfloat16")
                      & (page.causal["n"] == 16384)].iloc[0]
    # one kernel both ways, so only the clock gap keeps it from reading as beating the block count
    assert row["measured"] > 2 and row["verdict"] == "at SM clocks too far apart to compare"
    t = text(page.causal_finding())
    assert "In 1 of 32 rows the unmasked and masked Triton calls had median SM clock readings more than 3.0% apart" in t
    assert "1,714 MHz unmasked against 1,919 MHz masked" in t
    assert ("The masked call's clock reading was the higher, 1,919 MHz against 1,714 MHz unmasked (12.0% apart): "
            "that may account for the excess, but the readings cannot say by how much, since they are of the rest "
            "before each call, not of the call.") in t
    table = text(page.causal_table())
    assert ("1,714 / 1,919 MHz, 12.0% apart; the masked call's reading is the higher, which may account for the ratio "
            "above 2×, by how much the readings cannot say") in table
    for said in (t, table):
        assert "one clock" not in said and "1.81" not in said and "accounts for the excess" not in said
    assert "within 3.0%" in table
    assert "1 run at SM clocks too far apart to compare" in page.causal_finding()


def _past_two_between_kernels(tmp_path, unmasked_mhz, masked_mhz):
    """The causal finding where the N=16384 bf16 pair at B=4, H=32, d=128 ran two kernels, 2.03x apart, at the
    given clocks (None: not recorded)."""
    def edit(rows):
        pair = _rows_at(rows, "triton", 16384)
        pair[True].latency_ms_median = pair[False].latency_ms_median / 2.03
        pair[True].latency_ms_p10, pair[True].latency_ms_p90 = (pair[True].latency_ms_median * x for x in (0.97, 1.05))
        pair[True].tflops = tflops(pair[True].flops, pair[True].latency_ms_median)
        pair[False].kernel_path, pair[True].kernel_path = "portable", "gluon"
        pair[False].sm_clock_mhz, pair[True].sm_clock_mhz = unmasked_mhz, masked_mhz
    page = _bench_edited(tmp_path, edit)
    row = page.causal[(page.causal["shape"] == (4, 32, 128)) & (page.causal["dtype"] == "bfloat16")
                      & (page.causal["n"] == 16384)].iloc[0]
    assert row["verdict"] == "different kernels with and without the mask" and row["measured"] > 2
    t = text(page.causal_finding())
    # "At N=16384 (...)", or "In that row" where the pair's readings are the widest apart
    return t[t.index("the measured ratio of 2.030×"):], text(page.causal_table())


def test_a_ratio_past_two_is_put_down_to_the_readings_only_where_the_masked_one_is_more_than_the_gap_higher(tmp_path):
    # The committed H200 run's N=32768 row: 2.030x at 1818.2 MHz unmasked against 1858.6 masked, 2.2% apart (inside
    # CLOCK_GAP). Rescaled, it read "1.99x at one clock: the clocks, not the mask, put the ratio above 2x"; the readings
    # cannot carry that, and a gap under the page's own threshold is not one it names.
    close, table = _past_two_between_kernels(tmp_path / "a", 1818.2, 1858.6)
    assert ("The two calls ran different kernels, and the clock readings do not account for it: the masked call's "
            "reading (1,859 MHz) was not more than 3.0% above the unmasked call's (1,818 MHz).") in close
    assert "within 3.0%; the readings do not account for the ratio above 2×" in table
    # The same gap the other way round: the masked reading is the lower, and they do not account for it either.
    reversed_, table = _past_two_between_kernels(tmp_path / "b", 1858.6, 1818.2)
    assert "the clock readings do not account for it: the masked call's reading (1,818 MHz)" in reversed_
    # Masked more than CLOCK_GAP higher: named with both readings and the gap, and no more than "may".
    higher, table_h = _past_two_between_kernels(tmp_path / "d", 1800.0, 1900.0)
    assert ("The two calls ran different kernels, and the masked call's clock reading was the higher, 1,900 MHz "
            "against 1,800 MHz unmasked (5.56% apart): that may account for the excess, but the readings cannot say "
            "by how much") in higher
    assert "the masked call's reading is the higher, which may account for the ratio above 2×" in table_h
    for said in (close, table, reversed_, higher, table_h):
        assert "one clock" not in said
    for said in (close, reversed_, higher):  # the rescaled ratios the old rule printed
        assert "1.99×" not in said and "2.08×" not in said
    # Without both clocks the page cannot tell, and says so rather than guessing either way.
    unknown, table = _past_two_between_kernels(tmp_path / "c", None, 1858.6)
    assert "their SM clocks were not both recorded, so whether the clocks account for it is unknown" in unknown
    assert "may account" not in unknown and "do not account" not in unknown


def test_sdpa_flash_slower_with_the_mask_is_flagged_in_the_table_and_the_prose(tmp_path):
    def slow_flash(rows):
        pair = _rows_at(rows, "sdpa-flash", 512, shape=(2, 8, 64), dtype="float16")
        pair[True].latency_ms_median = pair[False].latency_ms_median / 0.906
        pair[True].latency_ms_p10, pair[True].latency_ms_p90 = (pair[True].latency_ms_median * x for x in (0.98, 1.02))
        pair[True].tflops = tflops(pair[True].flops, pair[True].latency_ms_median)
        pair[False].latency_ms_p10, pair[False].latency_ms_p90 = (pair[False].latency_ms_median * x for x in (0.98, 1.02))
    page = _bench_edited(tmp_path, slow_flash)
    table = text(page.causal_table())
    assert "<th>FlashAttention-2 (SDPA): the mask</th>" in table and "<td>slower with the mask</td>" in table
    t = text(page.causal_finding())
    assert "FlashAttention-2 (SDPA) is slower with the mask at N=512 (B=2, H=8, d=64, fp16): 0.906×, outside the p10 to p90" in t
    quiet = _bench_edited(tmp_path / "q", lambda rows: None)
    assert "FlashAttention-2 (SDPA) is slower" not in quiet.causal_finding()
    assert "<td>slower with the mask</td>" not in quiet.causal_table()


# ---- Profiling -----------------------------------------------------------------------------------

def _one(run):
    return run, [run]


def _profile(tmp_path, **kw) -> ProfilePage:
    return ProfilePage(*_one(S.make(tmp_path, profile=S.profile_file("rep-1", **kw))))


def test_tensor_cores_are_decided_by_the_tensor_flop_counters_first(tmp_path):
    page = _profile(tmp_path)
    t = text(page.tensor_core_sentence())
    assert "Tensor cores ran for naive PyTorch and Triton (ours), by the tensor FLOP counters" in t
    assert "They did **not** run for SDPA math" in t and "FP32 FMA" in t
    assert "come from softmax_warp_forward, not from a matrix multiply" in t  # its non-zero instruction count
    assert "Tensor cores did not run for SDPA math" in page.findings_first()
    ran = _profile(tmp_path / "b", math_tensor_flops=1e10)
    assert "did **not** run" not in ran.tensor_core_sentence()
    assert "Every profiled implementation ran its matrix multiplies on the tensor cores" in ran.findings_first()


def test_without_tensor_counters_only_the_gemm_kernels_instructions_count(tmp_path):
    page = _profile(tmp_path, tensor_flops_counted=False)
    t = text(page.tensor_core_sentence())
    # sdpa-math's softmax issues tensor-pipe instructions, but its GEMMs issue none: not tensor cores.
    assert "tensor-pipe instruction counts of the GEMM kernels" in t
    assert "did **not** run for SDPA math" in t
    verdicts = page.tensor_core_verdicts()
    assert verdicts["naive"] == (True, "gemm-instructions") and verdicts["sdpa-math"] == (False, "gemm-instructions")


def test_a_persistent_kernel_is_not_limited_by_registers(tmp_path):
    persistent = _profile(tmp_path / "a")
    t = text(persistent.occupancy_finding())
    assert "the kernel is persistent" in t and "not a shortage of any resource" in t and "limited by" not in t
    assert "warps=4, yet it launches 12 warps" in t
    grid = _profile(tmp_path / "b", triton_grid=4096)
    t = text(grid.occupancy_finding())
    assert "so 1 block fits" in t and "limited by registers" in t and "the kernel is persistent" not in t
    assert "limited by registers" in grid.occupancy_verdict()


def test_l1_and_shared_points_only_where_the_counters_see_the_traffic(tmp_path):
    tma = _profile(tmp_path / "a")  # our kernel's L1 and shared counts are a sliver of its L2 traffic
    pts = tma.level_points()
    ours = pts[pts["impl"] == "triton"].set_index("level")
    assert ours.loc["l1", "why"] == "bypassed" and ours.loc["shared", "why"] == "bypassed"
    assert ours.loc["dram", "ai"] > 0 and ours.loc["l2", "ai"] > 0
    math_pts = pts[pts["impl"] == "sdpa-math"].set_index("level")
    assert math_pts.loc["shared", "why"] == ""  # its softmax uses no shared memory, its FP32 GEMMs count theirs
    assert "no L1 point for Triton (ours)" in text(tma.roofline_finding())
    fig = tma.roofline_fig()
    traces = [t for t in fig.data if t.name == "Triton (ours)"]
    assert len(traces) == 1 and list(traces[0].marker.symbol) == ["circle", "square"]
    lsu = _profile(tmp_path / "b", triton_l1=3e8, triton_shared=5e8)  # loads through L1, operands read from shared
    ours = lsu.level_points().set_index(["impl", "level"]).loc["triton"]
    assert ours.loc["l1", "why"] == "" and ours.loc["shared", "why"] == ""
    assert "Triton (ours)" not in text(lsu.roofline_finding()).split("cannot place every call")[-1].split(".")[0]


def test_a_kernel_is_checked_for_hidden_shared_traffic_by_its_tensor_work_not_its_name(tmp_path):
    # Our Gluon kernels' names match no GEMM name; their tensor FLOPs still say they read operands from shared
    # memory out of the counter's sight (a shared count of 4% of their L2 traffic here).
    pf = S.profile_file("rep-1")
    ours = [k for k in pf.kernels if k.impl == "triton"][0]
    ours.kernel_name = "_g1_kernel"
    page = ProfilePage(*_one(S.make(tmp_path / "a", profile=pf)))
    pts = page.level_points().set_index(["impl", "level"])
    assert pts.loc[("triton", "shared"), "why"] == "bypassed"
    said = text(page.roofline_finding()).split("cannot place every call")[-1].split(".")[0]
    assert "no shared memory point for" in said and "Triton (ours)" in said.split("no shared memory point for")[-1]
    # Where the counters saw no tensor FLOPs in that kernel, it did no WGMMA work to hide: its shared count stands.
    ours.flops_tensor = 0.0
    idle = ProfilePage(*_one(S.make(tmp_path / "b", profile=pf)))
    assert idle.level_points().set_index(["impl", "level"]).loc[("triton", "shared"), "why"] == ""


def test_legend_has_one_entry_per_implementation_plus_the_level_key(tmp_path):
    fig = _profile(tmp_path).roofline_fig()
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend[:3] == ["naive PyTorch", "SDPA math", "Triton (ours)"]
    assert [n.split(" (")[0] for n in legend[3:]] == ["DRAM", "L2", "L1", "shared memory"]
    assert "lts__t_bytes.sum" in legend[4]


def test_roofs_measured_or_standing_in_say_so(tmp_path):
    measured = _profile(tmp_path / "a")
    t = text(measured.roofline_finding())
    assert "did not measure the FP32 roof" in t and "L2" not in t.split("did not measure")[-1]
    roofs = measured.roofs(measured.headline)
    assert roofs["l2"].source == "measured" and roofs["smem"].source == "measured"
    missing = ProfilePage(*_one(S.make(tmp_path / "b", profile=S.profile_file("rep-1"), ceilings=False)))
    t = text(missing.roofline_finding())
    assert "No L2 roof is drawn" in t and "shared memory / L1" in t.split("did not measure")[-1]
    assert missing.roofs(missing.headline)["smem"].source == "architectural"
    hw_meas, hw_missing = HardwarePage(*_one(measured.run)), HardwarePage(*_one(missing.run))
    assert "L2: measured" in hw_meas.roofs_sentence() and "L2: not known" in hw_missing.roofs_sentence()
    # Byte arithmetic draws measured and datasheet roofs side by side: the best-source sentence is Profiling's alone.
    assert "[Profiling](profiling.md) page's hierarchical rooflines" in hw_meas.roofs_sentence()
    assert "Byte arithmetic" not in hw_meas.roofs_sentence()
    assert "bandwidth were not measured" in hw_missing.unmeasured_roofs() and not hw_meas.unmeasured_roofs()
    assert "not measured in this run" not in hw_meas.findings_first()
    assert "best of 2 shapes" in hw_meas.ceilings_table()
    for row in hw_meas.ceilings_table().split("<tr>"):
        assert row.count("best of") <= 1  # said once, whether the problem text or the sweep says it


def test_the_ridge_section_says_which_roofs_each_pages_rooflines_draw(tmp_path):
    # Profiling draws one roof per level, the best source's: with every ceiling measured it shows no datasheet
    # roof, so "every roofline draws both" would be false there.
    from committed import latest_run
    run = latest_run(prefix="h200")
    page = HardwarePage(*_one(run))
    t = text(page.ridge_sentence())
    assert "draws both" not in t
    assert "[Byte arithmetic](byte-arithmetic.md) page draw the measured and the datasheet roofs side by side" in t
    all_measured = all(page.ceilings.roof(k).source == "measured" for k in ("dram", "l2", "smem", "fp16", "bf16", "fp32"))
    assert ("from the best source (here every one measured" in t) == all_measured
    mixed = text(HardwarePage(*_one(_profile(tmp_path / "a").run)).rooflines_drawn())  # no FP32 roof measured
    assert "measured where this run measured it and the datasheet's or the architectural figure elsewhere" in mixed


LEFT = "Left of the DRAM ridge (DRAM bandwidth caps them below their compute roof): "
RIGHT = "Right of the DRAM ridge (DRAM bandwidth does not bind them): "


def test_memory_and_compute_side_of_the_ridge_flip(tmp_path):
    page = _profile(tmp_path / "a")
    t = text(page.roofline_finding())
    assert LEFT + "naive PyTorch and SDPA math." in t
    assert RIGHT + "Triton (ours)." in t
    # naive moving a hundredth of the bytes is far past the ridge
    flipped = _profile(tmp_path / "b", naive_dram=1.2e7)
    t = text(flipped.roofline_finding())
    assert LEFT + "SDPA math." in t and RIGHT + "naive PyTorch and Triton" in t


def test_the_two_clocks_agree_or_the_page_says_they_do_not(tmp_path):
    agree = _profile(tmp_path / "a")
    t = agree.clock_check_finding()
    assert "1.02× Nsight Compute's kernel time, within 10% in 1 of 1" in t and "disagree" not in t
    # Our 0.05 ms call reads 1 us longer on our clock: the offset, and what the several-kernel calls add beyond it
    # (20 us each) is time between kernels.
    assert "Of the single-kernel calls under 0.1 ms, one read 1.0 µs longer on our clock than under Nsight Compute" in t
    assert ("Calls of several kernels take longer on our clock than their kernels add up to, by up to 0.0200 ms "
            "(naive PyTorch at N=2048, d=64, 3 kernels): beyond the offset above, the time between kernels") in t
    # No short single-kernel call, no offset to go beyond
    pf = S.profile_file("rep-1")
    for c in pf.clock_check:
        if c.kernels == 1:
            c.ncu_ms, c.device_ms = 0.5, 0.5 + c.gap_ms
            c.device_over_ncu = c.device_ms / c.ncu_ms
    t = text(ProfilePage(*_one(S.make(tmp_path / "e", profile=pf))).clock_check_finding())
    assert "single-kernel calls under" not in t and "beyond the offset" not in t
    assert "In the one longer single-kernel call the gap mixes the offset with the kernel's own time" in t
    assert ": the time between kernels, which per-kernel durations leave out." in t
    apart = _profile(tmp_path / "b", clock_ratio=1.5)
    assert "disagree most for Triton (ours)" in apart.clock_check_finding()
    none = _profile(tmp_path / "c", with_clock_check=False)
    assert "holds no cross-check" in none.clock_check_finding() and none.clock_check_table() == ""


def test_a_call_of_several_kernels_that_reads_shorter_on_our_clock_is_named_not_swept_into_the_range(tmp_path):
    pf = S.profile_file("rep-1")
    math = next(c for c in pf.clock_check if c.impl == "sdpa-math")
    math.device_ms = math.ncu_ms - 0.01  # its kernels took longer under the profiler than the whole call on ours
    math.device_over_ncu, math.gap_ms = math.device_ms / math.ncu_ms, math.device_ms - math.ncu_ms
    t = text(ProfilePage(*_one(S.make(tmp_path, profile=pf))).clock_check_finding())
    assert "Calls of several kernels take longer" not in t  # no longer said of every such call
    assert ("Of the 2 calls of several kernels, one takes longer on our clock than its kernels add up to, by 0.0200 ms "
            "(naive PyTorch at N=2048, d=64, 3 kernels)") in t
    assert ("The other, SDPA math at N=2048, d=64 (3 kernels), reads 0.0100 ms shorter on our clock: its kernels took "
            "longer under the profiler than the whole call did on our clock.") in t
    # both shorter: no range of time between kernels is given at all
    naive = next(c for c in pf.clock_check if c.impl == "naive")
    naive.device_ms = naive.ncu_ms - 0.005
    naive.device_over_ncu, naive.gap_ms = naive.device_ms / naive.ncu_ms, naive.device_ms - naive.ncu_ms
    t = text(ProfilePage(*_one(S.make(tmp_path / "b", profile=pf))).clock_check_finding())
    assert "take longer on our clock" not in t and "time between kernels" not in t
    assert ("Both calls of several kernels read up to 0.0100 ms shorter on our clock, the most SDPA math at N=2048, "
            "d=64 with 3 kernels: in each the kernels took longer under the profiler") in t


def test_a_disagreement_says_when_the_two_clocks_ran_different_tile_configs(tmp_path):
    profiled = "BLOCK_M=128 BLOCK_N=128 warps=4 stages=2 maxnreg=none"  # what the synthetic profiled call ran

    def page(path, **kw):
        return ProfilePage(*_one(S.make(path, bench=S.bench_rows(ns=(2048,)),
                                        profile=S.profile_file("rep-1", clock_ratio=1.5, **kw))))
    # recorded: our clock ran the profiled config, so the disagreement is not about configs
    same = page(tmp_path / "a", our_clock_config=profiled).clock_check_finding()
    assert "disagree most for Triton (ours)" in same and "tile config" not in same
    other = page(tmp_path / "b", our_clock_config="BLOCK_M=64 BLOCK_N=64 warps=4 stages=3 maxnreg=none")
    assert "the two timed different kernels" in other.clock_check_finding()
    # not recorded (older runs): the bench phase tuned another config (128x64, 8 warps) at that case
    unknown = page(tmp_path / "c").clock_check_finding()
    assert "autotuned its own tile config there (BLOCK_M=128 BLOCK_N=128" in unknown
    assert "BLOCK_M=128 BLOCK_N=64 warps=8 stages=3" in unknown and "may have timed different kernels" in unknown
    # agreeing clocks need no explanation
    assert "tile config" not in _profile(tmp_path / "d").clock_check_finding()


def test_reread_text_reconciles_each_level(tmp_path):
    tma = text(_profile(tmp_path / "a").bytes_gap_explained())
    assert "loads bypass L1" in tma and "a TMA copy reaches shared memory through L2 alone" in tma
    assert "in L1 and L2" not in tma and "as TMA copies do" in tma
    # a kernel whose name says nothing of TMA (the Turing kernel: a T4 has no TMA) is not said to copy by it
    turing = text(_profile(tmp_path / "t", triton_kernel="_attn_fwd_turing").bytes_gap_explained())
    assert "loads bypass L1" in turing and "TMA copies do" not in turing
    lsu = text(_profile(tmp_path / "b", triton_l1=1.5e8).bytes_gap_explained())
    assert "The L1 counter saw" in lsu and "L1 served the rest" in lsu


# ---- Home ----------------------------------------------------------------------------------------

def test_home_occupancy_headline_flips_between_design_and_a_resource(tmp_path):
    persistent = HomePage(*_one(S.make(tmp_path / "a", profile=S.profile_file("rep-1"))))
    assert "persistent" in persistent.occupancy_headline() and "by design" in persistent.occupancy_headline()
    grid = HomePage(*_one(S.make(tmp_path / "b", profile=S.profile_file("rep-1", triton_grid=4096))))
    assert "limited by registers" in grid.occupancy_headline() and "is persistent" not in grid.occupancy_headline()


def test_home_headline_figure_uses_counters_or_says_it_used_the_model(tmp_path):
    with_profile = HomePage(*_one(S.make(tmp_path / "a", bench=S.bench_rows(ns=(2048,)),
                                         profile=S.profile_file("rep-1"))))
    fig = with_profile.headline_figure()
    assert 'id="fig-home-headline-figure"' in fig
    sources = {impl: src for impl, _, src, _ in with_profile._headline_rows()}
    assert sources == {"naive": "Nsight Compute", "triton": "Nsight Compute", "sdpa-flash": "model"}
    bench_only = HomePage(*_one(S.make(tmp_path / "b", bench=S.bench_rows(ns=(2048,)))))
    assert "else from the byte-arithmetic model" in bench_only.headline_figure()
    assert HomePage(*_one(S.make(tmp_path / "c"))).headline_figure() == ""


# ---- Kernel iterations ---------------------------------------------------------------------------

def test_each_versions_story_is_told_once():
    from render.site import Report
    from conftest import ROOT
    report = Report.load()
    out = report.render_markdown((ROOT / "docs" / "iterations.md").read_text(), "iterations.md")
    page = report.context()["iterations"]
    for v in page.versions:
        assert out.count(escape.text(v.change)) == 1, v.name  # table cells are escape.text's output
        assert out.count(escape.text(v.prediction)) == 1, v.name


def test_home_opening_flips_with_bytes_and_speed(tmp_path):
    good = HomePage(*_one(S.make(tmp_path / "a", bench=S.bench_rows(triton_ms=0.002), profile=S.profile_file("rep-1"))))
    t = text(good.findings_first())
    assert "fusing attention cut the DRAM bytes of one call" in t and "faster than naive PyTorch" in t
    bad = HomePage(*_one(S.make(tmp_path / "b", bench=S.bench_rows(triton_ms=0.2),
                                profile=S.profile_file("rep-1", naive_dram=1e7))))
    t = text(bad.findings_first())
    assert "did not cut DRAM bytes" in t and "slower than naive PyTorch" in t
    assert "holds no phase" in HomePage(*_one(S.make(tmp_path / "c"))).findings_first()


def test_the_speedup_table_names_the_path_each_length_took(tmp_path):
    rows = S.bench_rows()
    for r in rows:
        if r.impl == "triton":
            r.kernel_path, r.kernel_step = ("gluon", "g1") if r.seq_len >= 2048 else ("portable", None)
    table = BenchPage(*_one(S.make(tmp_path, bench=rows))).speedup_table((2, 8, 64))
    assert "<th>Triton&#x27;s path</th>" in table
    assert "<td>Gluon tile kernel (g1)</td>" in table and "<td>portable kernel</td>" in table  # public names
    old = BenchPage(*_one(S.make(tmp_path / "old", bench=S.bench_rows()))).speedup_table((2, 8, 64))
    assert "<td>n/a</td>" in old  # a run that did not record the path says so


def test_the_datasheet_note_says_which_l2_the_pages_use_where_the_two_differ():
    from committed import latest_run
    page = HardwarePage(*_one(latest_run(prefix="h200")))
    d, sheet = page.run.manifest.device, page.sheet
    note = text(page.datasheet_note())
    differs = abs(d.l2_bytes / sheet.l2_bytes - 1) > 0.05
    assert ("every page that asks what fits in L2 uses the device's figure" in note) == differs
    assert differs  # the H200 reports 60 MiB against the whitepaper's 50 MB: the case this note is for


def test_each_kernel_has_one_public_name_whatever_names_it():
    from render.vocab import kernel_function_name, kernel_name, path_label, version_kernel

    # the dispatcher's path and Gluon step, the compiled function, and the recorded version all name one kernel
    assert kernel_name("gluon", "g8") == kernel_function_name("_g1_kernel") == version_kernel("gluon", "gluon g8") \
        == "Gluon tile kernel"
    assert kernel_name("gluon", "g7") == kernel_function_name("_ws_kernel") == "Gluon warp-specialized kernel"
    assert kernel_function_name("_hopper_fwd_ws_persistent") == kernel_name("hopper") == "Hopper TMA kernel"
    assert path_label("gluon g7") == "Gluon warp-specialized kernel (g7)" and path_label("portable") == "portable kernel"
    assert kernel_name("gluon") == "Gluon kernel"  # a run that did not record the step: no guess at which
    assert version_kernel("per-shape") == "per-shape choice" and kernel_function_name("flash_fwd_kernel") is None


def test_every_gluon_step_is_named_by_the_kernel_it_runs():
    from kernels.attention.gluon_versions import GLUON_VERSIONS
    from render.vocab import GLUON_STEP_KERNEL, kernel_function_name, kernel_name

    functions = {"g1": "_g1_kernel", "ws": "_ws_kernel"}
    assert set(GLUON_STEP_KERNEL) == {v.name for v in GLUON_VERSIONS}
    for v in GLUON_VERSIONS:
        assert kernel_name("gluon", v.name) == kernel_function_name(functions[v.kernel]), v.name


def test_a_shape_naive_did_not_run_at_borrows_its_measured_peak_and_says_it_did_not_run(tmp_path):
    page = _bench_edited(tmp_path, lambda rows: rows.__setitem__(slice(None), [
        r for r in rows if not (r.impl == "naive" and r.heads == 32)]))
    limits = {r["shape"]: r for r in page.limits}
    # The synthetic naive holds 3 score tensors at (2, 8, 64); (4, 32, 128) borrows that count.
    assert limits[(4, 32, 128)]["longest_ran"] is None and limits[(4, 32, 128)]["live"] == pytest.approx(3.0)
    assert limits[(4, 32, 128)]["oom_live"] == 13975
    finding = page.limits_finding()
    absent = finding[finding.index("Naive PyTorch did not run at"):]
    assert "B=4, H=32, d=128" in absent and "the table gives where it would fit" in absent
    assert "Naive first ran out of memory" not in finding
    assert "not run at this shape" in page.limits_table() and "measured at another shape" in page.limits_table()
    assert "not run at this shape" in page.traffic_table((4, 32, 128))
    assert "did not run at B=4, H=32, d=128 in this run" in page.traffic_finding((4, 32, 128))


def _scaled_naive(by: dict):
    """A bench edit that multiplies each dtype's naive peaks by by[dtype]."""
    def edit(rows):
        for r in rows:
            if r.impl == "naive" and r.dtype in by and r.status == "ok":
                r.peak_mem_bytes = int(r.peak_mem_bytes * by[r.dtype])
    return edit


def test_the_memory_verdict_holds_the_measured_peaks_to_the_model_of_the_code(tmp_path):
    # The synthetic naive holds 3 score tensors in both dtypes; the code as written holds 4 in fp16 and 5 in bf16.
    same = _bench_edited(tmp_path / "a", lambda rows: None)
    lim = {r["shape"]: r for r in same.limits}[(4, 32, 128)]
    heads, memory = 128, same.device.memory_bytes
    assert lim["live"] == pytest.approx(3.0) and lim["modelled"] == {"float16": 4.0, "bfloat16": 5.0}
    # The model's limit is the most it holds (bf16's 5), not two live tensors.
    assert lim["oom_model"] == model.max_n_before_oom(memory, heads, 2, 5.0) != model.max_n_before_oom(memory, heads)
    said = text(same.limits_finding())
    assert ("with the model's 5 score-sized tensors (bf16's, the most) it fits up to "
            f"N={lim['oom_model']:,}, so this is not consistent with the model: naive's measured peak held 3.00 in "
            "fp16 and 3.00 in bf16 score-sized tensors, against the model's 4 in fp16 and 5 in bf16") in said
    assert "two live" not in said and "<td>3.00</td>" in same.limits_table()
    assert "model: live S tensors, 4 in fp16 and 5 in bf16; the most of them" in text(same.limits_table())
    # Peaks that hold the model's counts are consistent with it.
    match = _bench_edited(tmp_path / "b", _scaled_naive({"float16": 4 / 3, "bfloat16": 5 / 3}))
    said = text(match.limits_finding())
    assert ("so this is consistent with the model, and so are naive's measured peaks (4.00 in fp16 and 5.00 in "
            "bf16)") in said and "not consistent" not in said
    # One dtype off: only it is named, and the limit does not move where the most held is the model's most.
    one = _bench_edited(tmp_path / "c", _scaled_naive({"bfloat16": 5 / 3}))
    said = text(one.limits_finding())
    assert ("not consistent with the model: naive's measured peak held 3.00 in fp16 score-sized tensors, against the "
            "model's 4 in fp16.") in said
    assert "<td>5.00 in bf16 (3.00 in fp16)</td>" in one.limits_table()


def test_the_memory_verdict_says_where_a_dtype_ran_out_within_or_ran_past_its_modelled_limit(tmp_path):
    def oom_early(rows):
        _scaled_naive({"float16": 4 / 3, "bfloat16": 5 / 3})(rows)
        for r in rows:
            if r.impl == "naive" and r.dtype == "float16" and r.heads == 32 and r.seq_len == 4096:
                r.status, r.peak_mem_bytes = "oom", None
    page = _bench_edited(tmp_path / "a", oom_early)
    own = model.max_n_before_oom(page.device.memory_bytes, 128, 2, 4.0)
    said = text(page.limits_finding())
    assert ("Naive first ran out of memory at N=4,096; with the model's 5 score-sized tensors (bf16's, the most) it "
            "fits up to") in said
    assert f"not consistent with the model: in fp16 it ran out at N=4,096, within the N={own:,} the model allows" in said

    def ran_long(rows):
        _scaled_naive({"float16": 4 / 3, "bfloat16": 5 / 3})(rows)
        for r in rows:
            if r.impl == "naive" and r.dtype == "float16" and r.heads == 32 and r.seq_len == 16384:
                r.status, r.reason, r.peak_mem_bytes = "ok", None, 4 * 128 * 2 * 16384 ** 2
    said = text(_bench_edited(tmp_path / "b", ran_long).limits_finding())
    assert f"in fp16 it ran at N=16,384, past the N={own:,} the model allows" in said


def test_the_model_sentence_names_only_the_dtypes_naive_ran_in(tmp_path):
    both = text(_bench_edited(tmp_path / "a", lambda rows: None).limits_finding())
    assert ("As naive's code is written, its peak holds the scores beside the fp32 softmax output and one more tensor: "
            "in fp16 the cast of that output back to fp16, 4 score-sized tensors in all; in bf16 an fp32 copy of the "
            "scores, which PyTorch's softmax makes first") in both
    fp16 = _bench_edited(tmp_path / "b", lambda rows: rows.__setitem__(slice(None), [
        r for r in rows if not (r.impl == "naive" and r.dtype == "bfloat16")]))
    said = text(fp16.limits_finding())
    assert "4 score-sized tensors in all." in said and "in bf16 an fp32 copy" not in said
    assert "with the model's 4 score-sized tensors it fits up to" in said
    assert "model: live S tensors, 4 in fp16)" in text(fp16.limits_table())


def test_the_l2_size_says_whose_it_is_and_whether_the_datasheets_moves_a_length(tmp_path):
    page = _bench_edited(tmp_path, lambda rows: None)
    d = page.device
    # The synthetic H200 reports 60 MiB against its datasheet's 50: no swept length crosses an L2 limit between them.
    assert d.l2_bytes != page.l2_sheet_bytes and page.l2_side_changes() == []
    said = text(page.device_sentence())
    assert "The L2 size is the one the device reports; its datasheet gives 50.0 MiB" in said
    assert "no length swept falls on the other side of any L2 limit below" in said
    # 80 MiB puts the fp32 P of B=2, H=8 at N=1024 in L2 (sqrt(80 MiB / 64) = 1144), where 50 MiB does not (905).
    d.l2_bytes = 80 * 2**20
    moved = page.l2_side_changes()
    assert ((2, 8, 64), 1024, "fp32 P of all heads") in moved
    said = text(page.device_sentence())
    assert "N=1,024 at B=2, H=8, d=64 (fp32 P of all heads)" in said and "depends on which figure is right" in said
    assert "no length swept falls" not in said
    # Figures that agree need no word; a device that reported none is said to take the datasheet's.
    d.l2_bytes = page.l2_sheet_bytes
    assert "The L2 size" not in page.device_sentence()
    d.l2_bytes = None
    assert "The L2 size is the datasheet's: the device did not report one." in page.device_sentence()


def test_the_traffic_finding_gives_one_factor_where_the_lengths_agree_on_it(tmp_path):
    # Naive at one length only: one factor over the model's bytes, not a pair of ends.
    page = _bench_edited(tmp_path, lambda rows: rows.__setitem__(slice(None), [
        r for r in rows if not (r.impl == "naive" and r.heads == 8 and r.seq_len != 2048)]))
    said = text(page.traffic_finding((2, 8, 64)))
    assert "the model's bytes at every length it ran." in said and " and 2." not in said
    both = text(_bench_edited(tmp_path / "b", lambda rows: None).traffic_finding((2, 8, 64)))
    assert "the model's bytes at N=512 and " in both and "at every length it ran" not in both


def test_an_out_of_memory_naive_call_is_named_in_the_traffic_table(tmp_path):
    page = bench_run(tmp_path).context()["bytes"]
    assert "out of memory" in page.traffic_table((4, 32, 128))  # the synthetic naive runs out at N=16384


def test_the_longest_query_tile_is_counted_in_key_tiles_of_its_own_size(tmp_path):
    # 64-row query tiles against 128-column key tiles: at N=512 the last query tile visits all 4 key tiles, and the
    # 8 query tiles visit 20 key tiles in all, 2.5 on average.
    page = _bench_edited(tmp_path, lambda rows: [r.kernel_config.update(BLOCK_M=64, BLOCK_N=128)
                                                 for r in rows if r.impl == "triton" and r.kernel_config],
                         causal_efficiency=0.6)
    finding = page.causal_finding()
    short = page.causal[page.causal["verdict"] == "short of the block count"]
    assert len(short)
    worst = short.loc[(short["measured"] / short["predicted"]).idxmin()]
    n = int(worst["n"])
    assert f"The last query tile visits all {-(-n // 128)} key tiles" in finding
    assert "query tiles share" in finding and "programs share" not in finding
