"""The one case type every attention phase measures: an implementation at one shape, dtype and mask."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from .schema.common import attention_flops

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class AttentionCase:
    """`impl` on q, k, v of shape (batch, heads, seq_len, head_dim) in `dtype`, causal or not.

    `impl` names an entry of kernels.attention.IMPLEMENTATIONS ('naive', 'sdpa', 'sdpa-<backend>',
    'triton', 'triton-portable') or, in the iterations phase, a recorded kernel version."""

    impl: str
    dtype: str
    causal: bool
    batch: int
    heads: int
    seq_len: int
    head_dim: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq_len, self.head_dim)

    @property
    def flops(self) -> float:
        return attention_flops(self.batch, self.heads, self.seq_len, self.head_dim, self.causal)

    @property
    def is_sdpa(self) -> bool:
        return self.impl == "sdpa" or self.impl.startswith("sdpa-")

    @property
    def backend_requested(self) -> str | None:
        """The SDPA backend this case forces, or None (plain SDPA, or not SDPA at all)."""
        return self.impl.removeprefix("sdpa-") if self.impl.startswith("sdpa-") else None

    @property
    def elem_bytes(self) -> int:
        if self.dtype not in ELEMENT_BYTES:
            raise ValueError(f"unknown dtype {self.dtype!r}; valid: {', '.join(ELEMENT_BYTES)}")
        return ELEMENT_BYTES[self.dtype]

    @property
    def input_bytes(self) -> int:
        """Q, K and V together."""
        return 3 * self.batch * self.heads * self.seq_len * self.head_dim * self.elem_bytes

    def least_bytes(self) -> int:
        """Memory the call cannot run without: inputs, output and, where the implementation
        materialises it, one score matrix."""
        need = self.input_bytes * 4 // 3
        if self.impl in ("naive", "sdpa-math"):
            need += self.batch * self.heads * self.seq_len**2 * self.elem_bytes
        return need

    @property
    def seed(self) -> int:
        """The same inputs for every dtype and implementation of one shape and mask, so results compare."""
        return zlib.crc32(f"{self.batch}x{self.heads}x{self.seq_len}x{self.head_dim}:{self.causal}".encode())

    def label(self) -> str:
        return (f"{self.impl} {self.dtype} {'causal' if self.causal else 'full'} "
                f"B={self.batch} H={self.heads} N={self.seq_len} d={self.head_dim}")
