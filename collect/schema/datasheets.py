"""Vendor datasheet figures (dense, no structured sparsity), each with its source.

Only facts printed in NVIDIA's public datasheets; the report always shows measured ceilings beside
them. A GPU missing here still collects: its datasheet fields stay empty and the report says so.
"""
from __future__ import annotations

import re

from .manifest import DatasheetCeilings

T, G, MB, GB = 1e12, 1e9, 1024**2, 1e9

_SHEETS = [
    # key, name pattern, marketing name, memory type, bandwidth B/s, fp16 tensor, bf16 tensor, fp32, L2, SMs, memory, source
    ("h200-sxm", r"H200", "NVIDIA H200 (SXM)", "HBM3e", 4.8e12, 989 * T, 989 * T, 67 * T, 50 * MB, 132, 141 * GB,
     "NVIDIA H200 Tensor Core GPU datasheet (dense figures are half the sparsity figures printed there); SM count and L2 from the Hopper architecture whitepaper"),
    ("h100-pcie", r"H100.*PCIe", "NVIDIA H100 PCIe", "HBM2e", 2.0e12, 756 * T, 756 * T, 51 * T, 50 * MB, 114, 80 * GB,
     "NVIDIA H100 Tensor Core GPU datasheet (dense = half of the sparsity figure); NVIDIA Hopper architecture whitepaper"),
    ("h100-sxm", r"H100", "NVIDIA H100 SXM", "HBM3", 3.35e12, 989 * T, 989 * T, 67 * T, 50 * MB, 132, 80 * GB,
     "NVIDIA H100 Tensor Core GPU datasheet (dense = half of the sparsity figure); NVIDIA Hopper architecture whitepaper"),
    ("a100-80gb", r"A100.*80\s?GB", "NVIDIA A100 80GB (SXM)", "HBM2e", 2.039e12, 312 * T, 312 * T, 19.5 * T, 40 * MB, 108, 80 * GB,
     "NVIDIA A100 Tensor Core GPU datasheet; NVIDIA Ampere GA100 whitepaper (PCIe 80GB: 1.935 TB/s)"),
    ("a100-40gb", r"A100", "NVIDIA A100 40GB", "HBM2", 1.555e12, 312 * T, 312 * T, 19.5 * T, 40 * MB, 108, 40 * GB,
     "NVIDIA A100 Tensor Core GPU datasheet; NVIDIA Ampere GA100 whitepaper"),
    ("a10", r"\bA10\b", "NVIDIA A10", "GDDR6", 600 * G, 125 * T, 125 * T, 31.2 * T, 6 * MB, 72, 24 * GB,
     "NVIDIA A10 Tensor Core GPU datasheet; NVIDIA Ampere GA102 whitepaper"),
    ("l4", r"\bL4\b", "NVIDIA L4", "GDDR6", 300 * G, 121 * T, 121 * T, 30.3 * T, 48 * MB, 58, 24 * GB,
     "NVIDIA L4 Tensor Core GPU datasheet (dense = half of the sparsity figure); NVIDIA Ada Lovelace whitepaper"),
    ("t4", r"\bT4\b", "NVIDIA T4", "GDDR6", 320 * G, 65 * T, None, 8.1 * T, 4 * MB, 40, 16 * GB,
     "NVIDIA T4 Tensor Core GPU datasheet; NVIDIA Turing architecture whitepaper (no bf16 tensor cores)"),
]


# The SM clock each datasheet's dense fp16 tensor-core peak is counted at, and the dense fp16 FLOP (fp32 accumulate)
# one SM's tensor cores issue a clock, from the architecture whitepapers: the peak is SMs x that x the clock (989 TFLOP/s
# = 132 x 4,096 x 1,830 MHz). The clock is the one at which the figures multiply out to the datasheet's peak. On the T4,
# A10, L4 and A100 it is the card's boost clock; on Hopper it is below the device's maximum SM clock (1,980 MHz on the
# SXM parts), so a matmul timed at that maximum can pass "the datasheet's peak" without passing its SMs' rate.
TENSOR_PEAK = {  # key: (MHz, FLOP per SM per clock)
    "h200-sxm": (1830.0, 4096), "h100-pcie": (1620.0, 4096), "h100-sxm": (1830.0, 4096),
    "a100-80gb": (1410.0, 2048), "a100-40gb": (1410.0, 2048), "a10": (1695.0, 1024), "l4": (2040.0, 1024),
    "t4": (1590.0, 1024),
}


def tensor_peak_clock(sheet: DatasheetCeilings | None) -> tuple[float, int] | None:
    """(the SM clock in MHz the sheet's dense fp16 tensor peak is counted at, dense FLOP per SM per clock), or None
    for a sheet this table does not know."""
    return TENSOR_PEAK.get(sheet.key) if sheet is not None else None


def lookup(device_name: str) -> DatasheetCeilings | None:
    """First matching entry; order matters (H100 PCIe before H100, A100 80GB before A100)."""
    for row in _SHEETS:
        if re.search(row[1], device_name, flags=re.I):
            return _entry(row)
    return None


def _entry(row: tuple) -> DatasheetCeilings:
    key, _, name, mem, bw, f16, bf16, f32, l2, sms, memsize, src = row
    return DatasheetCeilings(key=key, marketing_name=name, memory_type=mem, memory_bandwidth_bytes_per_s=bw,
                             fp16_tensor_flops_per_s=f16, bf16_tensor_flops_per_s=bf16, fp32_flops_per_s=f32,
                             l2_bytes=int(l2), sm_count=sms, memory_bytes=int(memsize), source=src)


def by_key(key: str) -> DatasheetCeilings | None:
    """The entry with this key (a manifest's datasheet.key), whatever device it was looked up for."""
    return next((s for s in (_entry(row) for row in _SHEETS) if s.key == key), None)


def known_keys() -> list[str]:
    return [s[0] for s in _SHEETS]
