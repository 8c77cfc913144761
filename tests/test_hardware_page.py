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
