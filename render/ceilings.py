"""The roofs a kernel is judged against: measured by the env phase where it could, else the datasheet's.

Bandwidth roofs: DRAM (a large device-to-device copy, bytes read plus written), L2 (reads served by
L2) and shared memory / L1 (shared-memory reads over the whole GPU). Compute roofs: the tensor cores
in fp16 and bf16, and plain FP32. A roof the run did not measure falls back to the datasheet figure,
and the page says so; the datasheet prints no L2 figure, and the shared-memory fallback is the
architectural rate (32 banks of 4 bytes per SM per clock, at the maximum SM clock), not a measurement.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import fmt

# Shared memory serves 32 banks x 4 bytes per SM per clock on every GPU this report targets (CUDA C++
# Programming Guide, "Shared Memory" for compute capability 5.x and newer).
SMEM_BYTES_PER_CLOCK_PER_SM = 128


@dataclass(frozen=True)
class Roof:
    key: str
    label: str
    unit: str  # 'B/s' or 'FLOP/s'
    value: float | None
    source: str  # 'measured', 'datasheet', 'architectural' or 'missing'
    what: str  # how it was obtained, in words ('a 1.00 GiB device-to-device copy', ...)

    @property
    def ok(self) -> bool:
        return self.value is not None and self.value > 0

    def text(self) -> str:
        return fmt.rate(self.value, self.unit)


# key -> (measured ceiling name, datasheet field, label, unit)
ROOFS = {
    "dram": ("copy_bandwidth", "memory_bandwidth_bytes_per_s", "DRAM", "B/s"),
    "l2": ("l2_bandwidth", None, "L2", "B/s"),
    "smem": ("smem_bandwidth", None, "shared memory / L1", "B/s"),
    "fp16": ("matmul_fp16", "fp16_tensor_flops_per_s", "tensor fp16", "FLOP/s"),
    "bf16": ("matmul_bf16", "bf16_tensor_flops_per_s", "tensor bf16", "FLOP/s"),
    "fp32": ("matmul_fp32", "fp32_flops_per_s", "FP32", "FLOP/s"),
}
BANDWIDTH_KEYS = ("dram", "l2", "smem")
COMPUTE_KEYS = ("fp16", "bf16", "fp32")
TENSOR_KEY = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


class Ceilings:
    """The measured and datasheet ceilings of one run's manifest."""

    def __init__(self, manifest):
        self.manifest = manifest

    @property
    def sheet(self):
        return self.manifest.datasheet

    def measured(self, name: str):
        return next((c for c in self.manifest.measured_ceilings if c.name == name), None)

    def measured_rate(self, name: str) -> float | None:
        c = self.measured(name)
        return c.per_s_median if c is not None and c.status == "ok" and c.per_s_median else None

    def sheet_rate(self, key: str) -> float | None:
        field = ROOFS[key][1]
        if key == "smem":
            return self.architectural_smem()
        return getattr(self.sheet, field, None) if self.sheet is not None and field else None

    def architectural_smem(self) -> float | None:
        d = self.manifest.device
        if d is None or not d.sm_count or not d.sm_clock_max_mhz:
            return None
        return SMEM_BYTES_PER_CLOCK_PER_SM * d.sm_count * d.sm_clock_max_mhz * 1e6

    def roof(self, key: str, prefer: str = "measured") -> Roof:
        """The roof `key`: measured where the env phase measured it (unless prefer='datasheet'), else the
        datasheet's (for shared memory, the architectural rate), else missing."""
        name, _, label, unit = ROOFS[key]
        meas = self.measured_rate(name)
        if meas and prefer == "measured":
            c = self.measured(name)
            return Roof(key, label, unit, meas, "measured", c.problem or name)
        sheet = self.sheet_rate(key)
        if sheet:
            if key == "smem":
                d = self.manifest.device
                what = (f"{SMEM_BYTES_PER_CLOCK_PER_SM} bytes per SM per clock × {d.sm_count} SMs × "
                        f"{fmt.num(d.sm_clock_max_mhz, 4)} MHz")
                return Roof(key, label, unit, sheet, "architectural", what)
            return Roof(key, label, unit, sheet, "datasheet", self.sheet.marketing_name)
        return Roof(key, label, unit, None, "missing", "")

    def ridge(self, compute: str = "fp16", memory: str = "dram", which: str = "measured") -> float | None:
        """FLOP per byte where the bandwidth roof meets the compute roof; which: 'measured' (both measured)
        or 'datasheet' (both from the datasheet)."""
        if which == "measured":
            f, b = self.measured_rate(ROOFS[compute][0]), self.measured_rate(ROOFS[memory][0])
        else:
            f, b = self.sheet_rate(compute), self.sheet_rate(memory)
        return f / b if f and b else None
