"""Hardware & ceilings: each figure in the prose is named for what it is, and the tables print readings at the
precision they were taken."""
from __future__ import annotations

import html
import re

from committed import latest_run
from render import fmt
from render.pages.hardware import HardwarePage


def _page():
    run = latest_run(prefix="h200")
    return HardwarePage(run, [run])


def test_the_opening_puts_each_measured_rate_before_its_share_of_the_datasheet():
    page = _page()
    t = html.unescape(page.findings_first())
    bw, sheet_bw = page.measured_rate("copy_bandwidth"), page.ceilings.sheet_rate("dram")
    fp16, sheet16 = page.measured_rate("matmul_fp16"), page.ceilings.sheet_rate("fp16")
    # A measured figure in brackets after "the datasheet's peak" reads as the datasheet's own figure.
    assert f"peak ({fmt.flops(fp16)})" not in t and f"bandwidth on a large copy ({fmt.bandwidth(bw)})" not in t
    assert f"sustained {fmt.bandwidth(bw)} on a large copy, {fmt.pct(100 * bw / sheet_bw)} of the datasheet" in t
    assert (f"reached {fmt.flops(fp16)}, {fmt.pct(100 * fp16 / sheet16)} of the datasheet's dense tensor-core peak "
            f"of {fmt.flops(sheet16)}") in t


def test_device_memory_is_given_in_binary_units_beside_the_vendors_figure():
    page = _page()
    row = re.search(r"<td>Memory</td><td>([^<]*)</td><td>([^<]*)</td>", page.device_table())
    assert row, page.device_table()
    mine, vendor = row.groups()
    # An H200 reports 150 GB (decimal) where its vendor says 141 GB: printed alone, the decimal figure would claim
    # more memory than the vendor's. The binary figure leads.
    assert mine.startswith(fmt.bytes_(page.device.memory_bytes) + " (")
    assert "GiB" in mine and vendor.startswith(fmt.bytes_(page.sheet.memory_bytes, binary=False))


def test_clock_readings_print_at_the_precision_nvidia_smi_reads_them():
    page = _page()
    readings = page.run.frame("env", "clocks").iloc[0]  # nvidia-smi's: whole MHz, whole degrees, watts to 0.01
    cells = re.findall(r"<td>([^<]*)</td>", page.clocks_table())
    clock, temp = int(readings["sm_clock_mhz"]), int(readings["temperature_c"])
    assert f"{clock:,}" in cells and f"{clock}.0" not in cells  # a clock in whole MHz
    assert str(temp) in cells and f"{temp}.00" not in cells  # a temperature in whole degrees
    assert fmt.num(readings["power_w"], 3) in cells and len(fmt.num(readings["power_w"], 3).replace(".", "")) == 3


def test_the_t4_prediction_names_the_masking_its_flop_count_assumes():
    assert "fp16, non-causal" in _page().t4_prediction()


def test_the_read_only_sentence_gives_the_margin_as_measured_not_as_a_word():
    page = _page()
    t = html.unescape(page.bandwidth_sentence())
    # How far above the copy a read-only stream went is the ratio printed beside it; "a little" was typed in.
    assert "A stream that only reads can go faster" in t and "a little" not in t


# ---- clocks: nvidia-smi's samples, the readings before each timed call, and how this run took them -----------------

def _narrated():
    """The H100 run the report narrates: its bench calls read the SM clock up to 2,082 MHz on a 1,980 MHz device."""
    run = latest_run(prefix="h100")
    return HardwarePage(run, [run])


def test_the_per_call_clock_readings_are_counted_per_phase_and_their_overshoot_said():
    page = _narrated()
    bench = page.run.frame("bench")
    top = page.device.sm_clock_max_mhz
    got = page.clock_readings().set_index("source")
    b = got.loc["Benchmarks"]
    assert b["n"] == bench["sm_clock_mhz"].notna().sum()
    assert b["hi"] == bench["sm_clock_mhz"].max() and b["top"] == bench["sm_clock_max_mhz"].max()
    # counted as printed: a median that prints as the maximum is not above it
    assert b["above"] == (bench["sm_clock_mhz"].dropna().round() > round(top)).sum() > 0
    # the profile phase's kernels carry Nsight Compute's clock, read over the kernel: not a reading before a call
    assert len(got.loc["Profiling: the clock check"]) and got.loc["Profiling: the clock check", "n"] == len(
        page.run.frame("profile", "clock_check").dropna(subset=["sm_clock_mhz"]))
    table = html.unescape(page.readings_table())
    assert f"<td>Benchmarks</td><td>{fmt.count(b['n'])}</td>" in table
    said = html.unescape(page.overshoot_sentence())
    assert f"the highest, {fmt.num(bench['sm_clock_max_mhz'].max(), 4)} MHz" in said
    assert f"reported maximum of {fmt.num(top, 4)} MHz" in said and "the rest's own clock" in said


def test_readings_under_the_maximum_are_said_to_stay_under_it():
    page = _narrated()
    page.device.sm_clock_max_mhz = 2500.0  # no reading of this run comes near
    assert page.overshoot_sentence() == "No reading passed the device's reported maximum of 2,500 MHz."
    assert set(page.clock_readings()["above"]) == {0}


def test_the_clock_method_is_the_one_each_phase_recorded():
    page = _narrated()
    phases = page.run.manifest.phases
    # the committed runs were collected before the spin stamped its own counters: their phases say events
    assert {p.sm_clock_method for p in phases if p.name in ("env", "bench", "decode")} == {"events"}
    before = page.clock_method()
    assert "requested" not in before and "asked to wait over its time between two CUDA events" in before
    assert "before that change, or on a GPU where the spin could not be built" in before
    for p in phases:
        p.sm_clock_method = "counters" if p.sm_clock_method else None
    after = page.clock_method()
    assert after.startswith("This run read it from the spin's own cycle counter (`clock64`)") and "events" not in after
    next(p for p in phases if p.name == "bench").sm_clock_method = "both"
    mixed = page.clock_method()
    assert "bench partly from each (a phase resumed after the change)" in mixed and "from the spin's own counters" in mixed
    for p in phases:
        p.sm_clock_method = None
    assert page.clock_method() == "This run does not record how its timed calls read the SM clock."


def test_what_the_profiler_did_with_the_clocks_comes_from_its_recorded_flags():
    page = _narrated()
    assert page.clocks_lead() == ("Clocks were read, never set: nothing in `collect/` changes clocks or power limits, "
                                  "and Nsight Compute ran with `--clock-control none`, which leaves them as they are.")
    page.run.manifest.profiler_flags = []  # no profile phase: nothing to say for the profiler
    assert page.clocks_lead() == "Clocks were read, never set: nothing in `collect/` changes clocks or power limits."
    page.run.manifest.profiler_flags = ["--clock-control", "base", "--nvtx"]
    lead = html.unescape(page.clocks_lead())
    assert "never set" not in lead and "Nsight Compute set them while it profiled" in lead and "--clock-control base" in lead
    page.run.manifest.profiler_flags = ["--nvtx"]
    assert "never set" not in page.clocks_lead() and "locked them at base" in page.clocks_lead()


def test_the_clock_table_is_introduced_as_nvidia_smis_samples_not_the_calls_clocks():
    page = _narrated()
    n = len(page.run.frame("env", "clocks"))
    assert page.smi_sentence().startswith(f"The table lists what nvidia-smi reported at {n} moments of the run, "
                                          "outside any timed call")


def test_compute_ceilings_read_well_under_the_maximum_say_so():
    page = _narrated()
    fp16, bf16 = page.measured("matmul_fp16").sm_clock_mhz, page.measured("matmul_bf16").sm_clock_mhz
    top = page.device.sm_clock_max_mhz
    assert fp16 < 0.97 * top and bf16 < 0.97 * top  # run h100-20261205b: 1,795 and 1,841 against 1,980 MHz
    t = html.unescape(page.ceilings_clock_sentence())
    assert "median of the readings taken in the short spin before each of its timed calls" in t
    assert (f"The tensor fp16 and tensor bf16 ceilings were read at {fmt.num(fp16, 4)} and {fmt.num(bf16, 4)} MHz, "
            f"more than 3% below the device's reported maximum of {fmt.num(top, 4)} MHz") in t
    page.device.sm_clock_max_mhz = fp16  # now none lies far under it
    assert "below the device's reported maximum" not in page.ceilings_clock_sentence()


def test_the_rendered_clock_section_carries_both_readings():
    from pathlib import Path

    from render.site import Report

    root = Path(__file__).resolve().parent.parent
    md = Report.load(root / "data").render_markdown((root / "docs" / "hardware.md").read_text(), "hardware.md")
    clocks = html.unescape(md.split("## Clocks seen", 1)[1])
    assert "The readings below say what the GPU was doing" not in clocks  # nvidia-smi's samples are not the calls'
    assert clocks.index("nvidia-smi reported") < clocks.index("<td>env-start</td>") < clocks.index("<td>Benchmarks</td>")
    assert "Every other page judges" not in md  # Correctness and Reproduce judge no kernel against a roof
    assert "<td>Registers per SM</td><td>65,536</td>" in md  # a count printed as every other table prints counts


def test_every_tensor_peak_clock_multiplies_out_to_its_datasheets_figure():
    from collect.schema import datasheets

    assert set(datasheets.TENSOR_PEAK) == set(datasheets.known_keys())
    for key, (mhz, per_sm) in datasheets.TENSOR_PEAK.items():
        sheet = datasheets.by_key(key)
        # The sheets print their peaks to two or three figures (65 TFLOP/s for the T4), so within 0.5%.
        assert abs(sheet.sm_count * per_sm * mhz * 1e6 / sheet.fp16_tensor_flops_per_s - 1) < 5e-3, key


def test_the_datasheets_peak_says_its_clock_and_what_the_same_sms_issue_at_the_devices_maximum():
    import dataclasses

    page = _page()
    note = html.unescape(page.datasheet_note())
    assert "132 SMs × 4,096 FLOP a clock each × 1,830 MHz = 989 TFLOP/s" in note
    assert "the same SMs would issue 1,070 TFLOP/s, 8.20% more than that figure, so a matmul" in note
    # A device whose maximum prints as the peak's clock has nothing to compare; a sheet the table lacks, no arithmetic.
    page.run.manifest.device = dataclasses.replace(page.device, sm_clock_max_mhz=1830.0)
    page.__dict__.pop("device", None)
    assert "would issue" not in page.datasheet_note()
    assert "= 989 TFLOP/s" in html.unescape(page.datasheet_note())
    page.run.manifest.datasheet = dataclasses.replace(page.sheet, key="unknown-gpu")
    page.__dict__.pop("sheet", None)
    assert page.peak_clock_note() == "" and "FLOP a clock" not in page.datasheet_note()


def test_how_far_times_follow_the_readings_is_read_from_the_widest_spread_of_readings(monkeypatch):
    import pandas as pd

    page = _narrated()
    said = html.unescape(page.readings_against_times())
    rows = page.run.frame("bench", "rows").copy()
    f = rows[(rows["status"] == "ok") & rows["sm_clock_min_mhz"].notna()]
    r = f.loc[(f["sm_clock_max_mhz"] / f["sm_clock_min_mhz"]).idxmax()]
    s = r["latency_samples_ms"]
    c, t = r["sm_clock_max_mhz"] / r["sm_clock_min_mhz"] - 1, max(s) / min(s) - 1
    assert (f"from {fmt.num(r['sm_clock_min_mhz'], 4)} to {fmt.num(r['sm_clock_max_mhz'], 4)} MHz, "
            f"{fmt.pct(100 * c)} apart. Its {len(s)} calls took {fmt.ms(min(s))} to {fmt.ms(max(s))}, the slowest "
            f"{fmt.pct(100 * t)} over the quickest") in said
    assert ("far less than" if t < c / 2 else "less than" if t < c else "as much as") in said
    # times that spread as widely as the readings are said so
    rows.at[r.name, "latency_samples_ms"] = [min(s)] * (len(s) - 1) + [min(s) * (1 + 2 * c)]
    real = page.run.frame
    monkeypatch.setattr(page.run, "frame", lambda phase, table: rows if (phase, table) == ("bench", "rows")
                        else real(phase, table))
    assert "as much as" in page.readings_against_times()
    monkeypatch.setattr(page.run, "frame", lambda phase, table: pd.DataFrame())
    assert page.readings_against_times() == ""
