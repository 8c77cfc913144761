"""Symmetric int8 quantization of KV-cache vectors, one fp32 scale per token per head.

A cached key or value is a vector of head_dim numbers. Each gets its own scale, absmax / 127, so one
outlier token cannot flatten every other token's precision; the scale is stored in fp32 (4 bytes
beside head_dim int8 bytes) so dequantization adds no rounding of its own.

Round trip bound: |x - dequantize(quantize(x))| <= scale / 2 = absmax / 254 per element.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

QMAX = 127  # symmetric: -128 is never produced, so negation is exact
SCALE_DTYPE = torch.float32
SCALE_BYTES = 4
# An all-zero vector still gets a positive scale, so quantization never divides by zero.
MIN_SCALE = 1e-12


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., head_dim) float -> (int8 values of the same shape, fp32 scales of shape x.shape[:-1])."""
    if not x.is_floating_point():
        raise ValueError(f"quantize expects a floating tensor, got {x.dtype}; pass the bf16/fp32 keys or values.")
    xf = x.float()
    scale = (xf.abs().amax(dim=-1) / QMAX).clamp_min(MIN_SCALE)
    q = torch.round(xf / scale.unsqueeze(-1)).clamp_(-QMAX, QMAX).to(torch.int8)
    return q, scale.to(SCALE_DTYPE)


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """Inverse of `quantize`: a full-size floating copy (this is the copy the int8 kernel avoids)."""
    if q.dtype != torch.int8:
        raise ValueError(f"dequantize expects int8 values, got {q.dtype}.")
    if scale.shape != q.shape[:-1]:
        raise ValueError(f"scale shape {tuple(scale.shape)} must equal the values' shape without the last dim, "
                         f"{tuple(q.shape[:-1])}.")
    # Written straight into the target dtype: no fp32 temporary twice the copy's size inflates the peak.
    out = torch.empty(q.shape, dtype=dtype, device=q.device)
    return torch.mul(q, scale.unsqueeze(-1), out=out)


def error_bound(x: torch.Tensor) -> torch.Tensor:
    """Largest round-trip error `quantize` allows for each vector of x: half a quantization step."""
    return (x.float().abs().amax(dim=-1) / QMAX).clamp_min(MIN_SCALE) / 2


# --- fused quantize-and-store for one decode step ---------------------------------------------
# A decode step writes one key and one value per (batch, head). Done with torch ops that is about
# a dozen small launches per layer; this kernel does both tensors in one, reading the position
# from the device so it can sit inside a CUDA graph.


@triton.jit
def quantize_vector(x, mask):
    """One fp32 vector (masked lanes ignored) as `quantize` makes it: (int8 values, fp32 scale). Also
    what the split-KV attention runs on the newest row when the step leaves its write to it."""
    scale = tl.maximum(tl.max(tl.where(mask, tl.abs(x), 0.0), axis=0) / 127.0, 1e-12)
    y = tl.math.div_rn(x, scale)  # IEEE division, as torch divides; `/` on fp32 may round differently
    # Round half to even, like torch.round: adding 1.5 * 2^23 leaves no fraction bits (|y| <= 127).
    y = (y + 12582912.0) - 12582912.0
    y = tl.minimum(tl.maximum(y, -127.0), 127.0)
    return y.to(tl.int8), scale


@triton.jit
def _quantize_row(X, Q, S, x_off, q_off, s_off, offs_d, mask_d):
    x = tl.load(X + x_off + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    y, scale = quantize_vector(x, mask_d)
    tl.store(Q + q_off + offs_d, y, mask=mask_d)
    tl.store(S + s_off, scale)


@triton.jit(do_not_specialize=["H"])
def _quantize_store_kernel(
    K, V, KQ, VQ, KS, VS, Pos,
    stride_kb, stride_kh, stride_vb, stride_vh,
    stride_qb, stride_qh, stride_qn,
    stride_sb, stride_sh,
    H, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
):
    bh = tl.program_id(0)
    b = (bh // H).to(tl.int64)  # 64-bit offsets: a large cache passes 2^31 elements
    h = (bh % H).to(tl.int64)
    pos = tl.load(Pos)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    q_off = b * stride_qb + h * stride_qh + pos * stride_qn
    s_off = b * stride_sb + h * stride_sh + pos
    _quantize_row(K, KQ, KS, b * stride_kb + h * stride_kh, q_off, s_off, offs_d, mask_d)
    _quantize_row(V, VQ, VS, b * stride_vb + h * stride_vh, q_off, s_off, offs_d, mask_d)


def quantize_store_(k, v, k_cache, v_cache, k_scale, v_scale, pos) -> None:
    """Quantize k, v (B, H, D) and write them at position `pos` ((1,) int64 on the device) of an int8
    cache (B, H, L, D) and its scales (B, H, L). Same numbers as `quantize`, in one launch."""
    B, H, D = k.shape
    if v.shape != k.shape or k_cache.shape[:2] != (B, H) or k_cache.shape[3] != D or v_cache.shape != k_cache.shape:
        raise ValueError(f"k, v {tuple(k.shape)} must be (B, H, D) matching caches {tuple(k_cache.shape)} (B, H, L, D).")
    if k_cache.dtype != torch.int8 or k_scale.dtype != SCALE_DTYPE or k_scale.shape != k_cache.shape[:3]:
        raise ValueError("caches must be int8 (B, H, L, D) with fp32 scales (B, H, L).")
    if k_cache.stride() != v_cache.stride() or k_scale.stride() != v_scale.stride():
        raise ValueError("the key and value caches (and their scales) must share one layout.")
    if k.stride(-1) != 1 or v.stride(-1) != 1 or k_cache.stride(-1) != 1 or k_scale.stride(-1) != 1:
        raise ValueError("head_dim (and the scales' last dim) must be contiguous.")
    if k.device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        p = int(pos.reshape(-1)[0])
        for x, vals, scales in ((k, k_cache, k_scale), (v, v_cache, v_scale)):
            q, s = quantize(x)
            vals[:, :, p] = q
            scales[:, :, p] = s
        return
    _quantize_store_kernel[(B * H,)](
        k, v, k_cache, v_cache, k_scale, v_scale, pos,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        k_scale.stride(0), k_scale.stride(1),
        H, HEAD_DIM=D, BLOCK_D=triton.next_power_of_2(D), num_warps=1,
    )


def compile_specs(target):
    """The int8 cache's store kernel as the decode phase launches it (kernels/aot.py), from the
    model's dtype: bfloat16, or float16 where the GPU has no bfloat16 (T4)."""
    from ..aot import CompileSpec, meta

    dtype = torch.bfloat16 if target.capability >= (8, 0) else torch.float16

    def launch(d):
        k = meta(4, 12, d, dtype=dtype)
        cache, scale = meta(4, 12, 2048, d, dtype=torch.int8), meta(4, 12, 2048, dtype=SCALE_DTYPE)
        _quantize_store_kernel[(4 * 12,)](
            k, k, cache, cache, scale, scale, meta(1, dtype=torch.int64),
            k.stride(0), k.stride(1), k.stride(0), k.stride(1),
            cache.stride(0), cache.stride(1), cache.stride(2), scale.stride(0), scale.stride(1),
            12, HEAD_DIM=d, BLOCK_D=triton.next_power_of_2(d), num_warps=1)

    return [CompileSpec(f"{str(dtype).removeprefix('torch.')} d={d}", lambda d=d: launch(d), tensor_cores=False,
                        core=d == 64) for d in (64, 128)]
