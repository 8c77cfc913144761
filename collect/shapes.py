"""What the phases' case records share: the FLOP count and a one-line label of an attention shape."""
from __future__ import annotations

from .schema.common import attention_flops


class AttentionCase:
    """Mixin for a phase's case dataclass with impl, dtype, causal, batch, heads, seq_len, head_dim."""

    @property
    def flops(self) -> float:
        return attention_flops(self.batch, self.heads, self.seq_len, self.head_dim, self.causal)

    def label(self) -> str:
        return (f"{self.impl} {self.dtype} {'causal' if self.causal else 'full'} "
                f"B={self.batch} H={self.heads} N={self.seq_len} d={self.head_dim}")
