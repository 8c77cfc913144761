"""q, k, v for the attention tests: plain, and in the odd layouts real callers hand over."""
import torch

LAYOUTS = ("bnhd", "d-strided", "misaligned")


def qkv(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(dtype) for _ in range(3))


def odd_layout(kind, batch, heads, seq_len, head_dim, dtype, seed=0):
    """q, k, v of shape (batch, heads, seq_len, head_dim), laid out as `kind` says:
    "bnhd" a (B, N, H, d) projection viewed as (B, H, N, d), not contiguous; "d-strided" head_dim
    not the unit-stride dimension; "misaligned" a view one element into its storage, so its
    address is not 16-byte aligned."""
    g = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    if kind == "bnhd":
        return tuple(draw(batch, seq_len, heads, head_dim).transpose(1, 2) for _ in range(3))
    if kind == "d-strided":
        return tuple(draw(batch, heads, head_dim, seq_len).transpose(-1, -2) for _ in range(3))
    if kind == "misaligned":
        n = batch * heads * seq_len * head_dim
        return tuple(draw(n + 1)[1:].view(batch, heads, seq_len, head_dim) for _ in range(3))
    raise ValueError(f"unknown layout {kind!r}; valid: {', '.join(LAYOUTS)}")
