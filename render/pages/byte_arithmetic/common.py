"""What every section of the Byte arithmetic page reads: the run's bench rows, its ceilings and device, and the
ridge point of each matmul."""
from __future__ import annotations

from functools import cached_property

from ...bench_data import BenchData
from ...ceilings import Ceilings
from ..base import Page

E = 2  # bytes per element: every dtype the bench phase sweeps (fp16, bf16) is two bytes wide


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
        sheet = self.run.manifest.datasheet
        return self.device.l2_bytes or (sheet.l2_bytes if sheet else None)

    def shapes(self) -> list[tuple]:
        return self.bench.shapes()

    def seq_lens(self, shape) -> list[int]:
        return self.bench.seq_lens(shape)

    def bandwidth(self) -> float | None:
        return self.ceilings.measured_rate("copy_bandwidth")

    def ridge(self, dtype: str = "float16") -> float | None:
        return self.ceilings.ridge(matmul_ceiling(dtype))
