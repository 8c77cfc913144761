"""What every section of the Byte arithmetic page reads: the run's bench rows, its ceilings and device, and the
ridge point of each matmul."""
from __future__ import annotations

from functools import cached_property

from ... import fmt, model
from ...bench_data import BenchData
from ...ceilings import Ceilings
from ..base import Page

E = 2  # bytes per element: every dtype the bench phase sweeps (fp16, bf16) is two bytes wide
# The naive code as written hands its softmax output to the next kernel in fp32 (model.naive_as_written_bytes):
# the widest tensor one of its kernels writes and the next reads back, so it decides where those passes
# can still be served from L2.
E_P_FP32 = 4
# What each L2 limit of the page counts, with the bytes an element and whether all heads share the cache.
L2_LIMITS = {"l2_one": ("S of one head", E, False), "l2_all": ("S of all heads", E, True),
             "l2_p32": ("fp32 P of all heads", E_P_FP32, True)}


def l2_fits(l2: int | None, heads: int) -> dict:
    """The largest N under each of L2_LIMITS for a cache of `l2` bytes (None where the size is unknown)."""
    return {k: model.max_n_s_fits(l2, e, heads if shared else 1) if l2 else None
            for k, (_, e, shared) in L2_LIMITS.items()}


def matmul_ceiling(dtype: str) -> str:
    return {"bfloat16": "bf16"}.get(dtype, "fp16")


class BytesSection(Page):
    """The bench rows, ceilings and device facts; each section of the page is a subclass."""

    slug = "bytes"
    phase = "bench"

    @cached_property
    def bench(self) -> BenchData:
        return BenchData(self.run)

    @cached_property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.run.manifest)

    @property
    def available(self) -> bool:
        return self.run.has("bench") and self.run.manifest.device is not None

    @property
    def device(self):
        return self.run.manifest.device

    @property
    def l2_bytes(self) -> int | None:
        """The L2 size every limit on the page uses: the device's own report, else the datasheet's."""
        return self.device.l2_bytes or self.l2_sheet_bytes

    @property
    def l2_sheet_bytes(self) -> int | None:
        sheet = self.run.manifest.datasheet
        return sheet.l2_bytes if sheet else None

    @property
    def l2_figures_differ(self) -> bool:
        """Whether the device's and the datasheet's L2 sizes disagree as the page prints them: a difference too
        small to print is not one a reader could be told about."""
        d, sheet = self.device.l2_bytes, self.l2_sheet_bytes
        return bool(d and sheet) and fmt.bytes_(d) != fmt.bytes_(sheet)

    def l2_side_changes(self) -> list[tuple]:
        """(shape, N, limit label) for every swept length that falls on the other side of an L2 limit when the
        datasheet's L2 size replaces the device's: where the two figures disagree, the page's L2 conclusions hold
        for both only where this is empty."""
        if not self.l2_figures_differ:
            return []
        out = []
        for shape in self.shapes():
            heads = shape[0] * shape[1]
            used, other = l2_fits(self.l2_bytes, heads), l2_fits(self.l2_sheet_bytes, heads)
            for k, (label, _, _) in L2_LIMITS.items():
                out += [(shape, n, label) for n in self.seq_lens(shape) if (n <= used[k]) != (n <= other[k])]
        return out

    def shapes(self) -> list[tuple]:
        return self.bench.shapes()

    def seq_lens(self, shape) -> list[int]:
        return self.bench.seq_lens(shape)

    def bandwidth(self) -> float | None:
        return self.ceilings.measured_rate("copy_bandwidth")

    def ridge(self, dtype: str = "float16") -> float | None:
        return self.ceilings.ridge(matmul_ceiling(dtype))
