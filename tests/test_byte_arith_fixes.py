"""The Byte arithmetic and Correctness pages say only what their data carry: no ratio taken to one clock, a memory
model of the code as written, counts beside each predicted ratio, checks named as they are made, and tiles and causes
as the run records them."""
from __future__ import annotations

import html
from pathlib import Path

from collect.jsonio import write_json_atomic
from collect.schema.correctness import CorrectnessFile
from collect.schema.common import tflops
from render import model
from render.pages.correctness import CorrectnessPage
from render.runs import load_run
from render.site import Report
from render.validate import load_validated

from _synthetic_correctness import make_correctness_run
from test_bench_phase import bench_run, render
from test_report_findings import _bench_edited, _rows_at

ROOT = Path(__file__).resolve().parents[1]


def text(s: str) -> str:
    return html.unescape(s)


def _committed(run_id: str):
    return Report.load(ROOT / "data", run_id).context()


# ---- 1. the causal section names a clock gap, never rescales by it ---------------------------------------------

def _past_two(tmp_path, masked_mhz: float, masked_max_mhz: float | None = None):
    """The N=16384 bf16 pair at B=4, H=32, d=128, 2.03x apart, unmasked read at 1,800 MHz."""
    def edit(rows):
        pair = _rows_at(rows, "triton", 16384)
        pair[True].latency_ms_median = pair[False].latency_ms_median / 2.03
        pair[True].latency_ms_p10, pair[True].latency_ms_p90 = (pair[True].latency_ms_median * x for x in (0.97, 1.05))
        pair[True].tflops = tflops(pair[True].flops, pair[True].latency_ms_median)
        pair[False].sm_clock_mhz, pair[True].sm_clock_mhz = 1800.0, masked_mhz
        for r in rows:  # the single samples' highest, where the test sets one
            r.sm_clock_max_mhz = masked_max_mhz if masked_max_mhz else min(r.sm_clock_max_mhz or 1980.0, 1980.0)
    return _bench_edited(tmp_path, edit)


def test_readings_past_the_devices_maximum_qualify_the_clock_discussion(tmp_path):
    # Readings at or under the device's 1,980 MHz: no clause. One at 2,060: the shared clause, beside the clock words.
    under = text(_past_two(tmp_path / "a", 1900.0).causal_finding())
    assert "may account for the excess" in under and "reported maximum" not in under
    over = text(_past_two(tmp_path / "b", 1900.0, masked_max_mhz=2060.0).causal_finding())
    assert ("The clock readings are of the rest before each call, not of the call: the highest, 2,060 MHz, lies 4.0% "
            "above the device's reported maximum of 1,980 MHz") in over
    assert over.index("(clocks are read, never set; the table marks them)") < over.index("reported maximum")


def test_no_committed_run_takes_a_causal_ratio_to_one_clock():
    for run_id in ("h100-20261205b", "h200-20261205f"):
        page = _committed(run_id)["bytes"]
        said = text(page.causal_finding()) + text(page.causal_table())
        assert "one clock" not in said and "not the mask, put" not in said, run_id
    # The H200 cell that read "within 3.0%; about 1.99× at one clock: the clocks, not the mask, put the ratio above 2×"
    h200 = text(_committed("h200-20261205f")["bytes"].causal_table())
    assert "within 3.0%; the readings do not account for the ratio above 2×" in h200


# ---- 2. the naive memory model is the code's, and the committed peaks match it -------------------------------------

def test_the_committed_naive_peaks_are_the_models_four_and_five_score_tensors():
    page = _committed("h100-20261205b")["bytes"]
    lim = {r["shape"]: r for r in page.limits}[(4, 32, 128)]
    assert lim["modelled"] == {"float16": 4.0, "bfloat16": 5.0}
    assert {dt: round(v, 6) for dt, v in lim["live_by_dtype"].items()} == {"float16": 4.0, "bfloat16": 5.0}
    limit = model.max_n_before_oom(page.device.memory_bytes, 128, 2, 5.0)
    said = text(page.limits_finding())
    assert (f"with the model's 5 score-sized tensors (bf16's, the most) it fits up to N={limit:,}, so this is "
            "consistent with the model, and so are naive's measured peaks (4.00 in fp16 and 5.00 in bf16)") in said
    assert "two live score tensors" not in said and "two live S tensors" not in text(page.limits_table())


# ---- 3. the predicted cell prints the counts it divides --------------------------------------------------------

def test_the_predicted_cell_prints_all_and_visited_key_blocks(tmp_path):
    # 64-row query tiles on 128-column key tiles: at N=512, 8 query tiles visit 20 of 32 key tiles (1.60x, where
    # 2T/(T+1) of T=8 gives 1.78x).
    tall = _bench_edited(tmp_path / "a", lambda rows: [r.kernel_config.update(BLOCK_M=64, BLOCK_N=128)
                                                     for r in rows if r.impl == "triton" and r.kernel_config])
    table = text(tall.causal_table())
    assert "<td>1.60× (32 / 20)</td>" in table
    assert "where BLOCK_M and BLOCK_N differ, it is not 2T/(T+1) for the row's T" in table
    square = _bench_edited(tmp_path / "b", lambda rows: [r.kernel_config.update(BLOCK_M=128, BLOCK_N=128)
                                                       for r in rows if r.impl == "triton" and r.kernel_config])
    table = text(square.causal_table())
    assert "<td>1.60× (16 / 10)</td>" in table and "differ" not in table  # N=512: T=4, 2T/(T+1) = 1.60


# ---- 4. the page says what is checked for FlashAttention-2 -------------------------------------------------------

def test_the_causal_introduction_says_flash_is_checked_only_against_what_any_tiling_allows(tmp_path):
    out = text(render(bench_run(tmp_path / "a"), "byte-arithmetic.md"))
    assert "for Triton and for FlashAttention-2 (SDPA) alike" not in out
    assert "For Triton, whose tiles the run records, each row is\nchecked against its own block count" in out
    assert ("FlashAttention-2 (SDPA) records no tiles, so no count is set\nagainst it: its column checks only what "
            "holds for any tiling, whether the mask made it slower") in out


# ---- 5. ragged tiles: the lengths are chosen against tiles that are multiples of 16 ----------------------------

def _correctness_with_tile(tmp_path, n: int) -> CorrectnessPage:
    """The synthetic correctness run with its causal fp16 d=64 kernel cases at length `n` on Gluon's 192-row tile."""
    run_dir = make_correctness_run(tmp_path)
    data = load_validated(run_dir / "correctness.json", CorrectnessFile)
    at = [r for r in data.rows if r.impl == "triton" and r.layout == "contiguous" and r.seq_len == n]
    assert at
    for r in at:
        r.kernel_path, r.kernel_step = "gluon", "g33"
        r.config = "gluon path, BLOCK_M=192 BLOCK_N=128 num_warps=4 num_stages=3 (fixed)"
    write_json_atomic(run_dir / "correctness.json", data)
    run = load_run(run_dir)
    return CorrectnessPage(run, [run])


def test_a_tile_that_is_not_a_power_of_two_is_named_with_the_lengths_it_leaves_ragged(tmp_path):
    plain = CorrectnessPage(*(lambda r: (r, [r]))(load_run(make_correctness_run(tmp_path / "a"))))
    assert "not a power of two" not in plain.ragged_lengths()  # every synthetic tile is 128 rows
    on_2048 = text(_correctness_with_tile(tmp_path / "b", 2048).ragged_lengths())
    assert ("The 192-row query tile of the Gluon warp-specialized kernel (step g33) is not a power of two, so it "
            "leaves a ragged last tile at power-of-two lengths too; in this run's cases it ran at N=2048, and at "
            "N=2048 only it leaves one.") in on_2048
    on_17 = text(_correctness_with_tile(tmp_path / "c", 17).ragged_lengths())
    assert "in this run's cases it ran only at N=17, which no tile divides." in on_17


def test_the_correctness_page_no_longer_says_powers_of_two_divide_every_tile():
    out = text(Report.load(ROOT / "data", "h100-20261205b").render_markdown(
        (ROOT / "docs" / "correctness.md").read_text(), "correctness.md"))
    assert "divides evenly into every tile the autotuner might choose" not in out
    assert "splits evenly into tiles of any power-of-two size up to its own" in out
    assert "The 192-row query tile of the Gluon warp-specialized kernel (steps g33 and g36) is not a power of two" in out


# ---- 6. where the largest causal error sits, and a cause said as likely --------------------------------------------

def test_the_worst_query_cause_is_said_as_likely_not_as_measured(tmp_path):
    run = load_run(make_correctness_run(tmp_path, causal_worst=38))
    said = CorrectnessPage(run, [run]).row0_finding()
    assert "never later than query 38" in said
    assert "where the largest outputs are, since an early query averages only a few V rows" not in said
    assert ("The run records where, not why; a likely reason is that a causal query q averages only q + 1 V rows "
            "(query 38 averages 39)") in said
