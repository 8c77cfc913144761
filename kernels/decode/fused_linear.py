"""The matrix products of a decode step, each fused with what surrounds it, in Triton.

A decode step multiplies a few rows (the batch) by every weight matrix of the model. Each product
reads megabytes of weights and does almost no arithmetic per byte, so it is a bandwidth problem,
and at GPT-2's size it is also a launch problem: the unfused step issues about fourteen kernels per
layer (norm, product, bias, activation, residual add, cache writes, ...), and each costs a few
microseconds of launch and ramp however little it moves. These kernels fold the small ops into the
products around them, leaving four per layer besides attention:

  ln_qkv_store            LayerNorm -> x @ W_qkv + b -> q to a buffer, k and v into the cache at `pos`
                          (bf16, or quantized to int8 with a per-vector scale)
  linear_residual         attention output @ W_proj + b -> x += that
  ln_linear (GELU)        LayerNorm -> x @ W_fc + b -> GELU
  linear_residual         h @ W_out + b -> x += that
  ln_linear (no act.)     the final LayerNorm and the LM head, logits in fp32

Every product is one program per tile of output columns holding all the batch rows, so each
weight is read once per step. Where output columns are too few to fill the GPU, the inner
dimension is split across programs (split-K); the partial sums are added in a fixed order by
whichever program finishes last for its columns (it counts arrivals with an atomic), which then
runs the epilogue and resets the counter for the next launch. The sum is deterministic and no
extra kernel is launched. Rounding follows the unfused step: the product is rounded to the model's
dtype before an activation or a residual add, as cuBLAS's output would be.

An earlier form ran the H200's DRAM at 15-36% (Nsight Compute). What set its pace was not the
weight stream but loads issued one at a time, and chains of L2 round trips. So:
  - Weights load as 16-byte vectors: K and N stay specialized (see the entry points).
  - LayerNorm needs statistics over a whole row, which no output tile owns. The kernel that wrote
    the row leaves each tile's mean and sum of squared deviations (`RowStats`); the next LayerNorm
    combines them with one load (Chan et al.'s pairwise formula, exact where a plain sum of squares
    would cancel).
  - The split-K partials are read with unrolled loads, eight in flight at once.
  - Under programmatic dependent launch each kernel starts while the previous one drains, and asks
    L2 for its first weight tile before it waits (kernels/decode/prefetch.py).

What is left is not the launches. In a CUDA graph on the H200 (2026-12-01) a boundary between two
dependent kernels cost 0.92-0.97 us under PDL, and a software grid barrier inside one persistent
kernel 1.14-1.42 us (the finished script scripts/measure_kernel_boundary.py, removed since: `git show
9cf148390ba0:scripts/measure_kernel_boundary.py`), while these kernels take about 3 us more
than a plain read of their bytes (the decode page's read-only twin): the round trips after the wait
(statistics and rows, which the compiled code already requests together, then the split-K handshake) are where a
step's time above its floor goes, and one persistent kernel for the whole step would not remove them by itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
import triton
import triton.language as tl

from .arrival import arrive, reset
from ..common import capability, device_index, has_pdl, interpreting, sm_count, smem_per_block
from .prefetch import prefetch_rows

# Prologue: how the A operand (the activation rows) is produced tile by tile.
PRO_NONE = tl.constexpr(0)
PRO_LN = tl.constexpr(1)      # LayerNorm of x, statistics over the whole row
# Epilogue: what happens to acc + bias.
EPI_STORE = tl.constexpr(0)
EPI_GELU_TANH = tl.constexpr(1)
EPI_GELU_ERF = tl.constexpr(2)
EPI_RESIDUAL = tl.constexpr(3)
EPI_QKV = tl.constexpr(4)
# Where the qkv epilogue puts k and v: into the cache in the model's dtype, quantized into an int8
# cache, or into a (2, B, H, D) buffer for the attention to write into the cache (its new_kv).
KV_FLOAT = tl.constexpr(0)
KV_INT8 = tl.constexpr(1)
KV_STAGED = tl.constexpr(2)
# Programmatic dependent launch: off, or on, with the next grid let in at this one's start or only
# after each program's weight loop (Tuning.late_dependents_mib).
PDL_EARLY = tl.constexpr(1)
PDL_LATE = tl.constexpr(2)

# --- the shared program -----------------------------------------------------------------------

@triton.jit
def _combined_stats(Stats, stride_st, offs_b, mask_b, B, stat_tiles, stat_width, K, eps, STAT_P: tl.constexpr):
    """Mean and 1/std of each row from its tiles' (mean, sum of squared deviations), in one load:
    mean = sum n_t mean_t / K and M2 = sum M2_t + n_t (mean_t - mean)^2."""
    offs_t = tl.arange(0, STAT_P)
    mask_t = offs_t < stat_tiles
    mask = mask_b[:, None] & mask_t[None, :]
    ptrs = Stats + offs_b[:, None] * stride_st + offs_t[None, :]
    mean_t = tl.load(ptrs, mask=mask, other=0.0)
    m2_t = tl.load(ptrs + B * stride_st, mask=mask, other=0.0)
    n_t = tl.where(mask_t, tl.minimum(stat_width, K - offs_t * stat_width), 0).to(tl.float32)
    # Relative to the first tile's mean: the tiles' offsets from it are small, so a large common
    # mean does not swamp their weighted sum.
    pivot = tl.sum(tl.where(offs_t[None, :] == 0, mean_t, 0.0), axis=1)
    d = mean_t - pivot[:, None]
    mean = pivot + tl.sum(d * n_t[None, :], axis=1) / K
    d = mean_t - mean[:, None]
    m2 = tl.sum(m2_t + n_t[None, :] * d * d, axis=1)
    return mean, 1.0 / tl.sqrt_rn(m2 / K + eps)


@triton.jit
def tile_stats(y, mask, n_valid):
    """The mean and the sum of squared deviations of y's valid entries along its last axis: one
    tile's share of a row's statistics, as RowStats holds them."""
    mean = tl.sum(tl.where(mask, y, 0.0), axis=-1) / n_valid
    d = tl.where(mask, y - tl.expand_dims(mean, -1), 0.0)
    return mean, tl.sum(d * d, axis=-1)


@triton.jit
def _store_tile_stats(Stats, stride_st, y, mask, offs_b, mask_b, B, tile, n_valid):
    """This tile's share of each row's statistics, for the next LayerNorm, over the tile's valid
    columns (y as stored, after rounding)."""
    mean_t, m2_t = tile_stats(y, mask, n_valid)
    ptrs = Stats + offs_b * stride_st + tile
    tl.store(ptrs, mean_t, mask=mask_b)
    tl.store(ptrs + B * stride_st, m2_t, mask=mask_b)


@triton.jit
def _gelu(y, TANH: tl.constexpr):
    if TANH:
        # tanh(u) written with exp: 1 - 2 / (exp(2u) + 1) is exact at both ends (no inf/inf).
        u = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
        return 0.5 * y * (1.0 + t)
    else:
        return 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))


@triton.jit
def _quantize_rows(y, mask):
    """Symmetric int8 of each row, as kernels.decode.kv_quant.quantize does it: (values, scales). Each row's
    reciprocal is taken once and the values multiplied by it: an IEEE division per value sat on the
    qkv product's serial tail (the last split's epilogue). On the H200 (2026-12-01, gpt2 batch 64,
    CUDA graph) it took the int8 step from 0.671 to 0.666 ms. A value may then round to the int8
    step next to the one torch's division gives, as the fused product's own last bit already may.
    Even so the int8 qkv product costs about 0.7 us a layer more than the bf16 one at that shape
    (profiled step, 2026-12-01, attention launched plainly in both: 9.5 against 8.8 us from the
    previous kernel's end to its own): the row maxima and the int8 stores add layout changes through
    shared memory (25 barriers in the sm90 PTX against 15)."""
    scale = tl.maximum(tl.max(tl.where(mask, tl.abs(y), 0.0), axis=1) / 127.0, 1e-12)
    v = y * tl.math.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)[:, None]
    v = (v + 12582912.0) - 12582912.0  # round half to even, like torch.round (|v| <= 127)
    v = tl.minimum(tl.maximum(v, -127.0), 127.0)
    return v.to(tl.int8), scale


@triton.jit
def _prefetch_weights(W, stride_wk, stride_wn, K, N, n0, t_start, t_end, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, W_ROW_MAJOR: tl.constexpr):
    """Ask L2 for this program's weight tiles [t_start, t_end) of columns from n0: rows of BLOCK_N
    along a row-major weight, or columns of BLOCK_K down a transposed one (the LM head)."""
    if W_ROW_MAJOR:
        prefetch_rows(W + n0 * stride_wn, t_start * BLOCK_K, tl.minimum(t_end * BLOCK_K, K), stride_wk, N - n0,
                      BLOCK_N)
    else:
        for t in range(t_start, t_end):
            prefetch_rows(W + t * BLOCK_K * stride_wk, n0, tl.minimum(n0 + BLOCK_N, N), stride_wn, K - t * BLOCK_K,
                          BLOCK_K)


@triton.jit
def _linear_program(
    X, stride_xb, W, stride_wk, stride_wn, Bias, Y, stride_yb, Res, stride_rb,
    B, K, N, eps, LnW, LnB, StatIn, stat_tiles, stat_width, StatOut, stride_st,
    Q, KC, VC, KS, VS, Pos, H_QKV, stride_cb, stride_ch, stride_cn, stride_sb, stride_sh,
    Work, Counter, split_k,
    PROLOGUE: tl.constexpr, EPILOGUE: tl.constexpr, HAS_BIAS: tl.constexpr, KV_STORE: tl.constexpr,
    STATS_OUT: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, STAT_P: tl.constexpr, SPLIT_P: tl.constexpr, UPCAST: tl.constexpr, PDL: tl.constexpr,
    PREFETCH: tl.constexpr, W_ROW_MAJOR: tl.constexpr, RESET_STORE: tl.constexpr = False,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    dt = W.dtype.element_ty
    offs_b = tl.arange(0, BLOCK_B)
    mask_b = offs_b < B
    # Output columns: a tile of BLOCK_N, or for the qkv epilogue exactly one head of q, k or v.
    if EPILOGUE == EPI_QKV:
        offs_n = pid_n * HEAD_DIM + tl.arange(0, BLOCK_N)
        mask_n = tl.arange(0, BLOCK_N) < HEAD_DIM
    else:
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, split_k)
    t_start = pid_k * per_split
    t_end = tl.minimum(t_start + per_split, k_tiles)
    if PDL:
        # Programmatic dependent launch: this grid may start while the previous kernel drains;
        # wait for its results before reading anything it wrote, and let the next grid start early.
        if PREFETCH:  # the weights are not among them (kernels/decode/prefetch.py)
            n0 = pid_n * HEAD_DIM if EPILOGUE == EPI_QKV else pid_n * BLOCK_N
            _prefetch_weights(W, stride_wk, stride_wn, K, N, n0, t_start, tl.minimum(t_end, t_start + PREFETCH),
                              BLOCK_N, BLOCK_K, W_ROW_MAJOR)
        tl.extra.cuda.gdc_wait()
        if PDL == PDL_EARLY:
            tl.extra.cuda.gdc_launch_dependents()
    if PROLOGUE == PRO_LN:
        mean, rstd = _combined_stats(StatIn, stride_st, offs_b, mask_b, B, stat_tiles, stat_width, K, eps, STAT_P)

    acc = tl.zeros([BLOCK_B, BLOCK_N], tl.float32)
    for t in range(t_start, t_end):
        offs_k = t * BLOCK_K + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        a = tl.load(X + offs_b[:, None] * stride_xb + offs_k[None, :], mask=mask_b[:, None] & mask_k[None, :],
                    other=0.0)
        if PROLOGUE == PRO_LN:
            g = tl.load(LnW + offs_k, mask=mask_k, other=0.0).to(tl.float32)
            bb = tl.load(LnB + offs_k, mask=mask_k, other=0.0).to(tl.float32)
            a = (a.to(tl.float32) - mean[:, None]) * rstd[:, None] * g[None, :] + bb[None, :]
        a = a.to(dt)  # the unfused step rounds the norm's output too
        w = tl.load(W + offs_k[:, None].to(tl.int64) * stride_wk + offs_n[None, :] * stride_wn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if UPCAST:  # the interpreter multiplies bf16 dot operands wrongly; fp32 is exact for both
            acc += tl.dot(a.to(tl.float32), w.to(tl.float32))
        else:
            acc += tl.dot(a, w)
    if PDL == PDL_LATE:  # the next grid may launch once every program's weights are in
        tl.extra.cuda.gdc_launch_dependents()

    # The epilogue's inputs are requested before the split-K handshake, so the program that finishes
    # the tile does not wait another round trip for them. (Before the loop they would hold registers
    # through it, and spill on an A100.)
    mask_y = mask_b[:, None] & mask_n[None, :]
    if HAS_BIAS:
        bias = tl.load(Bias + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    if EPILOGUE == EPI_RESIDUAL:
        res = tl.load(Res + offs_b[:, None] * stride_rb + offs_n[None, :], mask=mask_y, other=0.0).to(tl.float32)

    # Split-K: park this split's sum; the last of the splits to arrive adds them all, in order.
    is_last = split_k == 1
    if split_k > 1:
        ws = Work + offs_b[:, None] * N + offs_n[None, :]
        tl.store(ws + pid_k * B * N, acc, mask=mask_y)
        is_last = arrive(Counter + pid_n, split_k)
        if is_last:
            # Unrolled by up to eight: those splits' loads are all issued before the first is added,
            # one L2 round trip per eight splits instead of one per split. (Sixteen at once spill
            # registers on an A100.)
            acc = tl.zeros([BLOCK_B, BLOCK_N], tl.float32)
            CHUNK: tl.constexpr = SPLIT_P if SPLIT_P < 8 else 8
            for s0 in range(0, split_k, CHUNK):
                for s in tl.static_range(CHUNK):
                    acc += tl.load(ws + (s0 + s) * B * N, mask=mask_y & (s0 + s < split_k), other=0.0,
                                   cache_modifier=".cg")
            reset(Counter + pid_n, RESET_STORE)

    if is_last:
        y = acc
        if HAS_BIAS:
            y += bias[None, :]
        if EPILOGUE == EPI_STORE:
            tl.store(Y + offs_b[:, None] * stride_yb + offs_n[None, :], y.to(Y.dtype.element_ty), mask=mask_y)
        elif EPILOGUE == EPI_GELU_TANH:
            y = _gelu(y.to(dt).to(tl.float32), True)
            tl.store(Y + offs_b[:, None] * stride_yb + offs_n[None, :], y.to(Y.dtype.element_ty), mask=mask_y)
        elif EPILOGUE == EPI_GELU_ERF:
            y = _gelu(y.to(dt).to(tl.float32), False)
            tl.store(Y + offs_b[:, None] * stride_yb + offs_n[None, :], y.to(Y.dtype.element_ty), mask=mask_y)
        elif EPILOGUE == EPI_RESIDUAL:
            y = (res + y.to(dt).to(tl.float32)).to(Y.dtype.element_ty)
            tl.store(Y + offs_b[:, None] * stride_yb + offs_n[None, :], y, mask=mask_y)
            if STATS_OUT:
                _store_tile_stats(StatOut, stride_st, y.to(tl.float32), mask_y, offs_b, mask_b, B, pid_n,
                                  tl.minimum(BLOCK_N, N - pid_n * BLOCK_N).to(tl.float32))
        else:  # EPI_QKV: this tile is head h of q (part 0), k (1) or v (2)
            y = y.to(dt)
            part = pid_n // H_QKV
            h = (pid_n % H_QKV).to(tl.int64)
            offs_d = tl.arange(0, BLOCK_N)
            b64 = offs_b.to(tl.int64)
            if part == 0:
                tl.store(Q + (b64[:, None] * H_QKV + h) * HEAD_DIM + offs_d[None, :], y, mask=mask_y)
            elif KV_STORE == KV_STAGED:  # KC is the (2, B, H, D) buffer
                tl.store(KC + (((part - 1) * B + b64[:, None]) * H_QKV + h) * HEAD_DIM + offs_d[None, :], y,
                         mask=mask_y)
            else:
                pos = tl.load(Pos)
                cell = b64 * stride_cb + h * stride_ch + pos * stride_cn
                scale_at = b64 * stride_sb + h * stride_sh + pos
                if KV_STORE == KV_INT8:
                    yq, scale = _quantize_rows(y.to(tl.float32), mask_y)
                    if part == 1:
                        tl.store(KC + cell[:, None] + offs_d[None, :], yq, mask=mask_y)
                        tl.store(KS + scale_at, scale, mask=mask_b)
                    else:
                        tl.store(VC + cell[:, None] + offs_d[None, :], yq, mask=mask_y)
                        tl.store(VS + scale_at, scale, mask=mask_b)
                else:
                    if part == 1:
                        tl.store(KC + cell[:, None] + offs_d[None, :], y, mask=mask_y)
                    else:
                        tl.store(VC + cell[:, None] + offs_d[None, :], y, mask=mask_y)


# Thin entry points: one kernel name per role, so a profile says which product a kernel was.
# K and N stay specialized: Triton then knows when they are multiples of 16, so the bounds masks
# are constant across 8 columns and a weight row loads as 16-byte vectors (cp.async, pipelined).
# Left as plain ints they cost nothing to compile but scalarize every load: on the H200 the fused
# products then ran at a quarter to a third of the DRAM rate (2026-11-30, gpt2-xl batch 4).

@triton.jit(do_not_specialize=["B", "H_QKV", "split_k", "stat_tiles", "stat_width", "stride_st"])
def _ln_qkv_kernel(X, stride_xb, W, stride_wk, stride_wn, Bias, B, K, N, eps, LnW, LnB,
                   StatIn, stat_tiles, stat_width, stride_st,
                   Q, KC, VC, KS, VS, Pos, H_QKV, stride_cb, stride_ch, stride_cn, stride_sb, stride_sh,
                   Work, Counter, split_k, KV_STORE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_B: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAT_P: tl.constexpr, SPLIT_P: tl.constexpr,
                   UPCAST: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
                   W_ROW_MAJOR: tl.constexpr, RESET_STORE: tl.constexpr = False):
    _linear_program(X, stride_xb, W, stride_wk, stride_wn, Bias, X, 0, X, 0, B, K, N, eps, LnW, LnB,
                    StatIn, stat_tiles, stat_width, StatIn, stride_st,
                    Q, KC, VC, KS, VS, Pos, H_QKV, stride_cb, stride_ch, stride_cn, stride_sb, stride_sh,
                    Work, Counter, split_k, PRO_LN, EPI_QKV, True, KV_STORE, False, HEAD_DIM, BLOCK_B, BLOCK_N,
                    BLOCK_K, STAT_P, SPLIT_P, UPCAST, PDL, PREFETCH, W_ROW_MAJOR, RESET_STORE)


@triton.jit(do_not_specialize=["B", "split_k", "stat_tiles", "stat_width", "stride_st"])
def _ln_linear_kernel(X, stride_xb, W, stride_wk, stride_wn, Bias, Y, stride_yb, B, K, N, eps, LnW, LnB,
                      StatIn, stat_tiles, stat_width, stride_st,
                      Work, Counter, split_k, EPILOGUE: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAT_P: tl.constexpr,
                      SPLIT_P: tl.constexpr, UPCAST: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
                      W_ROW_MAJOR: tl.constexpr, RESET_STORE: tl.constexpr = False):
    _linear_program(X, stride_xb, W, stride_wk, stride_wn, Bias, Y, stride_yb, X, 0, B, K, N, eps, LnW, LnB,
                    StatIn, stat_tiles, stat_width, StatIn, stride_st,
                    X, X, X, X, X, X, 1, 0, 0, 0, 0, 0,
                    Work, Counter, split_k, PRO_LN, EPILOGUE, HAS_BIAS, 0, False, 1, BLOCK_B, BLOCK_N, BLOCK_K,
                    STAT_P, SPLIT_P, UPCAST, PDL, PREFETCH, W_ROW_MAJOR, RESET_STORE)


@triton.jit(do_not_specialize=["B", "split_k", "stride_st"])
def _linear_residual_kernel(X, stride_xb, W, stride_wk, stride_wn, Bias, Y, stride_yb, B, K, N, StatOut, stride_st,
                            Work, Counter, split_k, STATS_OUT: tl.constexpr, BLOCK_B: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_P: tl.constexpr,
                            UPCAST: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
                            W_ROW_MAJOR: tl.constexpr, RESET_STORE: tl.constexpr = False):
    _linear_program(X, stride_xb, W, stride_wk, stride_wn, Bias, Y, stride_yb, Y, stride_yb, B, K, N, 0.0, X, X,
                    StatOut, 1, 1, StatOut, stride_st,
                    X, X, X, X, X, X, 1, 0, 0, 0, 0, 0,
                    Work, Counter, split_k, PRO_NONE, EPI_RESIDUAL, True, 0, STATS_OUT, 1, BLOCK_B, BLOCK_N,
                    BLOCK_K, 1, SPLIT_P, UPCAST, PDL, PREFETCH, W_ROW_MAJOR, RESET_STORE)


# --- launch configuration ---------------------------------------------------------------------

MAX_ROWS = 128  # rows (batch) one program holds; a larger batch takes the unfused step


@dataclass(frozen=True)
class Tiling:
    """How one product is cut into programs."""

    block_b: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4
    num_stages: int = 3


@dataclass
class RowTiles:
    """How the products are tiled for one class of batch sizes: what the GPU measurements choose."""

    programs_per_sm: float     # aim for this many programs per SM (tiles x splits)
    min_tiles_per_split: int   # never split K so finely that a program has fewer inner tiles
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    # Split K no further than leaves this many KiB of partial sums for the last program to add up:
    # that sum is one program's serial work, and it grows with the rows. None: no cap.
    max_partial_kib: float | None = None
    # ... except that a split never runs deeper than this many inner elements (None: no limit): the
    # other serial work, a deep product's loop, outweighs the partials' sum there.
    max_split_depth: int | None = None
    # The projection right after the attention splits K at most this far (None: as any product).
    # Launched early under PDL, its programs wait on SMs the attention's last programs still need.
    after_attention_split: int | None = None
    # Cap on the products' registers a thread, handed to ptxas (.maxnreg); None: ptxas's own choice. With 96
    # the last split issues its partials' loads together instead of one add at a time ("Tuning.max_registers").
    max_registers: int | None = None


@dataclass
class Tuning:
    """Module-level, so a benchmark can change the knobs in one place. The measurements behind each
    setting are in kernels/decode/notes.md, under the field's name."""

    # Up to 16 rows (16-row tiles). 64-deep inner tiles, four stages: more, smaller loads in flight per
    # program; partial sums capped at 32 KiB; 96 registers a thread (kernels/decode/notes.md, "Tuning.few_rows",
    # "Tuning.max_registers").
    few_rows: RowTiles = field(default_factory=lambda: RowTiles(2.0, 2, 64, 64, 4, 4, max_partial_kib=32,
                                                                max_registers=96))
    # More rows (32-128-row tiles; measured at 64): 128-deep tiles, partials capped at 32 KiB, the MLP's
    # output product in six splits, the projection after the attention unsplit ("Tuning.many_rows").
    many_rows: RowTiles = field(default_factory=lambda: RowTiles(2.0, 2, 64, 128, 4, 8, max_partial_kib=32,
                                                                 max_split_depth=512, after_attention_split=1))
    # Programmatic dependent launch where the GPU has it (sm90+): each grid is launched while the
    # previous one drains and waits for it on the device; the kernels then overlap ("Tuning.pdl").
    pdl: bool = True
    # With PDL: while a kernel waits for the previous one, each program asks L2 for up to this many of
    # its weight tiles (kernels/decode/prefetch.py); 0 for none. More than one lost ("Tuning.prefetch_tiles").
    prefetch_tiles: int = 1
    # A product that reads at least this many MiB of weights lets the next grid launch only after its
    # weight loop, not at its start (None: always at the start) ("Tuning.late_dependents_mib").
    late_dependents_mib: float | None = 8.0
    # A register cap for every product, over its row class's own (RowTiles.max_registers); None: each class's
    # own, 0: no cap. Uncapped, ptxas keeps the kernels at 48-64 registers and interleaves the last split's
    # partial loads with their adds; the cap that helps at 16 rows cost 4-5% at 64 ("Tuning.max_registers").
    max_registers: int | None = None
    # The last split resets its tile's arrival counter by a plain store instead of an atomic exchange, whose
    # return shares a scoreboard with the epilogue's bias and residual loads: one L2 round trip fewer before the
    # epilogue ("Tuning.reset_by_store").
    reset_by_store: bool = True

    def rows(self, rows: int) -> RowTiles:
        return self.few_rows if rows <= FEW_ROWS else self.many_rows


FEW_ROWS = 16    # the batch sizes Tuning.few_rows tiles
MIN_BLOCK_B = 16  # tl.dot takes at least 16 rows
TUNING = Tuning()
# Before Ampere, Triton lowers tl.dot to CUDA-core FMAs whose operands sit in registers: smaller
# inner tiles (and narrower output tiles for the projection) keep them from spilling.
PRE_AMPERE_BLOCK_K = 32
PRE_AMPERE_STAGES = 2
# Past this many output tiles per SM, the tiles double in width.
WIDE_TILES_PER_SM = 4


@dataclass(frozen=True)
class Device:
    sm_count: int
    capability: tuple[int, int]
    # Opt-in shared memory per block, bytes. The default is the H100's and H200's (227 KiB), for
    # callers that do not say (the interpreter, tests of other choices).
    smem_per_block: int = 227 * 1024

    @property
    def pre_ampere(self) -> bool:
        return self.capability < (8, 0)


def device_facts(device) -> Device:
    if isinstance(device, Device):
        return device
    device = torch.device(device)
    if device.type != "cuda":
        return Device(4, (9, 0))  # the interpreter: any numbers run
    i = device_index(device)
    return Device(sm_count(i), capability(i), smem_per_block(i))  # asked of the driver once per device


def smem_bytes(t: Tiling, capability: tuple[int, int]) -> int:
    """Shared memory one program of a product needs, as Triton 3.6 lays it out for sm80-sm90: an
    input-row tile and a weight tile per pipeline buffer (as many buffers as stages on Hopper, one
    fewer before), before Hopper a copy of the normalised rows (they reach the tensor cores through
    shared memory), and 2 KiB for the statistics and the pipeline's bookkeeping (Triton took 1.5 KiB
    at 64 rows and four stages on sm90). It is never below what Triton allocates
    (tests/test_fused_shared_memory.py)."""
    buffers = t.num_stages if capability >= (9, 0) else max(1, t.num_stages - 1)
    rows_copy = t.block_b * t.block_k * 2 if capability < (9, 0) else 0
    return buffers * (t.block_b * t.block_k + t.block_k * t.block_n) * 2 + rows_copy + 2048


def _fit_shared_memory(t: Tiling, d: Device) -> Tiling:
    """`t` with as many of its stages as fit the GPU's shared memory (two at the least: a GPU with
    less than that for these tiles is refused with the reason, not left to fail at launch)."""
    while smem_bytes(t, d.capability) > d.smem_per_block and t.num_stages > 2:
        t = replace(t, num_stages=t.num_stages - 1)
    if smem_bytes(t, d.capability) > d.smem_per_block:
        raise ValueError(f"a {t.block_b}x{t.block_k} by {t.block_k}x{t.block_n} product tile needs "
                         f"{smem_bytes(t, d.capability)} bytes of shared memory per block at two stages; this GPU "
                         f"gives {d.smem_per_block}. Set DECODE_GRAPH_STEP=torch to decode with cuBLAS products on it.")
    return t


def tiling(rows: int, k_tiles: int, n_tiles: int, sm_count: int, block_n: int, block_k: int,
           tuning: Tuning = TUNING, stages: int | None = None, after_attention: bool = False) -> Tiling:
    """Split K only as far as needed to give the GPU enough programs. `after_attention`: the product
    that reads the attention's output (RowTiles.after_attention_split)."""
    if rows > MAX_ROWS:
        raise ValueError(f"{rows} rows exceed the {MAX_ROWS} one program holds; use the unfused step for this batch.")
    r = tuning.rows(rows)
    block_b = max(MIN_BLOCK_B, triton.next_power_of_2(rows))
    want = math.ceil(r.programs_per_sm * sm_count / max(1, n_tiles))
    split = max(1, min(want, k_tiles // max(1, r.min_tiles_per_split)))
    if r.max_partial_kib is not None:
        capped = int(r.max_partial_kib * 1024) // (block_b * block_n * 4)
        if r.max_split_depth is not None:
            capped = max(capped, triton.cdiv(k_tiles, max(1, r.max_split_depth // block_k)))
        split = max(1, min(split, capped))
    if after_attention and r.after_attention_split is not None:
        split = min(split, r.after_attention_split)
    return Tiling(block_b, block_n, block_k, split, r.num_warps, r.num_stages if stages is None else stages)


class Workspace:
    """Split-K scratch: partial sums and per-tile arrival counters (zero between launches)."""

    def __init__(self, device, floats: int, tiles: int):
        self.partial = torch.empty(max(1, floats), device=device, dtype=torch.float32)
        self.counter = torch.zeros(max(1, tiles), device=device, dtype=torch.int32)

    def fits(self, floats: int, tiles: int) -> bool:
        return floats <= self.partial.numel() and tiles <= self.counter.numel()


def uses_pdl(gpu: Device | None, tuning: Tuning = TUNING) -> bool:
    """Whether the products launch as programmatic dependents on this GPU (None: no GPU). The decode
    phase may turn `tuning.pdl` off after a failure; whatever mimics the step's launches asks here."""
    return tuning.pdl and not interpreting() and gpu is not None and has_pdl(gpu.capability)


def _launch_options(t: Tiling, w: torch.Tensor, tuning: Tuning = TUNING, gpu: Device | None = None) -> dict:
    """`gpu`: the GPU's facts where the tensors' device cannot give them (the compile matrix's meta tensors)."""
    interp = interpreting()
    if gpu is None and w.device.type == "cuda":
        gpu = device_facts(w.device)
    pdl = uses_pdl(gpu, tuning)
    late_mib = tuning.late_dependents_mib
    late = late_mib is not None and w.numel() * w.element_size() >= late_mib * 2**20
    opts = {"UPCAST": interp, "PDL": (PDL_LATE if late else PDL_EARLY) if pdl else 0,
            "PREFETCH": tuning.prefetch_tiles if pdl else 0, "RESET_STORE": tuning.reset_by_store,
            "W_ROW_MAJOR": w.stride(1) == 1, "num_warps": 1 if interp else t.num_warps,
            "num_stages": 1 if interp else t.num_stages}
    if pdl:
        opts["launch_pdl"] = True
    cap = tuning.max_registers
    if cap is None:  # the row class's own cap, measured on Hopper alone: older GPUs keep ptxas's choice
        cap = tuning.rows(t.block_b).max_registers if gpu is not None and gpu.capability >= (9, 0) else None
    if cap and not interp:  # the interpreter allocates no registers
        opts["maxnreg"] = cap
    return opts


def _check_ws(ws: Workspace, t: Tiling, rows: int, n: int, tiles: int) -> None:
    if t.split_k > 1 and not ws.fits(t.split_k * rows * n, tiles):
        raise ValueError(f"split-K workspace too small: need {t.split_k * rows * n} floats and {tiles} counters, "
                         f"have {ws.partial.numel()} and {ws.counter.numel()}.")


def _gpu_tiling(rows: int, k: int, n_tiles: int, block_n: int, d: Device, after_attention: bool = False) -> Tiling:
    """`tiling` with the inner tile depth and stages this GPU generation takes (shallower before
    Ampere), not yet fitted to its shared memory."""
    bk = PRE_AMPERE_BLOCK_K if d.pre_ampere else TUNING.rows(rows).block_k
    return tiling(rows, triton.cdiv(k, bk), n_tiles, d.sm_count, block_n, bk,
                  stages=PRE_AMPERE_STAGES if d.pre_ampere else None, after_attention=after_attention)


def linear_tiling(rows: int, k: int, n: int, device, after_attention: bool = False) -> Tiling:
    """Tiles of a plain product (ln_linear, linear_residual). An output as wide as the LM head's gets
    wider tiles: fewer programs, each re-reading the input rows (and their norm) fewer times.
    `after_attention`: the product reads the attention's output (the step's projection).
    At 64 rows the LM head's 393 programs of 194 KiB run one per SM, in three waves. Tilings that
    fit in one or one and a half waves (64 or 32 deep, two to four stages, 4 or 8 warps, 128 or 256
    wide) were all slower in the step (H200, 2026-12-02, gpt2 batch 64, graphs side by side): bf16
    0.756 -> 0.764-0.780 ms, int8 cache 0.628 -> 0.632-0.656."""
    d = device_facts(device)
    bn = TUNING.rows(rows).block_n
    if triton.cdiv(n, bn) > WIDE_TILES_PER_SM * d.sm_count and not d.pre_ampere:  # FMA dots would spill
        wide = _gpu_tiling(rows, k, triton.cdiv(n, 2 * bn), 2 * bn, d, after_attention)
        # Only at full depth: 64-row tiles twice as wide need 116 KB or more on an sm86/sm89 GPU,
        # which gives 99 KB; there the narrow tile is taken, with the stages that fit.
        if smem_bytes(wide, d.capability) <= d.smem_per_block:
            return wide
    return _fit_shared_memory(_gpu_tiling(rows, k, triton.cdiv(n, bn), bn, d, after_attention), d)


def qkv_tiling(rows: int, k: int, heads: int, head_dim: int, device) -> Tiling:
    """One head of q, k or v per output tile."""
    d = device_facts(device)
    return _fit_shared_memory(_gpu_tiling(rows, k, 3 * heads, triton.next_power_of_2(head_dim), d), d)


def workspace_need(rows: int, products: list[tuple[Tiling, int]]) -> tuple[int, int]:
    """(floats, counters) a workspace needs for these (tiling, output columns) products."""
    floats = max([t.split_k * rows * n for t, n in products if t.split_k > 1], default=1)
    tiles = max([triton.cdiv(n, t.block_n) for t, n in products if t.split_k > 1], default=1)
    return floats, tiles


# --- wrappers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class RowStats:
    """Statistics of the rows of x as the kernel that wrote x left them: for each row and each of its
    `tiles` column tiles of `width` (the last may be narrower), the tile's mean in buf[0] and its sum
    of squared deviations in buf[1]. buf is (2, rows, capacity) fp32."""

    buf: torch.Tensor
    tiles: int
    width: int

    @staticmethod
    def buffer(rows: int, capacity: int, device) -> torch.Tensor:
        return torch.zeros((2, rows, max(1, capacity)), device=device, dtype=torch.float32)

    @classmethod
    def of(cls, x: torch.Tensor) -> "RowStats":
        """Whole-row statistics computed by PyTorch, for a product called on its own."""
        xf = x.float()
        mean = xf.mean(dim=1)
        m2 = (xf - mean[:, None]).square().sum(dim=1)
        return cls(torch.stack([mean, m2]).unsqueeze(-1).contiguous(), 1, x.shape[1])

    def check(self, rows: int, cols: int) -> None:
        two, r, cap = self.buf.shape
        if two != 2 or r != rows or self.buf.dtype != torch.float32 or not self.buf.is_contiguous():
            raise ValueError(f"row statistics must be a contiguous (2, {rows}, tiles) fp32 buffer; got "
                             f"{tuple(self.buf.shape)} {self.buf.dtype}.")
        if not (1 <= self.tiles <= cap) or self.width < 1 or triton.cdiv(cols, self.width) != self.tiles:
            raise ValueError(f"{self.tiles} statistics tiles of {self.width} columns do not cover a row of {cols} "
                             f"(buffer holds {cap}).")

    def args(self) -> tuple:
        return self.buf, self.tiles, self.width, self.buf.shape[2]


def stats_capacity(rows: int, width: int, device) -> int:
    """Statistics tiles a decode step's residual products (attention projection, MLP output) leave
    for a row of `width`: the buffer size, and what every LayerNorm of the step is compiled for."""
    return max(triton.cdiv(width, linear_tiling(rows, k, width, device).block_n) for k in (width, 4 * width))


def residual_stats(buf: torch.Tensor, t: Tiling, n: int) -> RowStats:
    """What linear_residual with tiling `t` leaves in `buf` for a row of n columns."""
    return RowStats(buf, triton.cdiv(n, t.block_n), t.block_n)


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(1, n))


def ln_linear(x, ln_w, ln_b, eps, w, bias, out, ws: Workspace, activation: str | None = None,
              tiles: Tiling | None = None, gpu: Device | None = None, stats: RowStats | None = None) -> Tiling:
    """out = act(LayerNorm(x) @ w + bias). `w` is (K, N), or (N, K) given as its transpose view (the LM head).
    `gpu` (here and below): the GPU's facts, when not the tensors' device's (the compile matrix), or
    already known (a step asks once, not per launch).
    `stats` (here and in ln_qkv_store): x's row statistics as the kernel that wrote x left them;
    without them PyTorch computes them first."""
    B, K = x.shape
    N = w.shape[1]
    epi = {None: 0, "gelu_tanh": 1, "gelu": 2}[activation]
    t = tiles or linear_tiling(B, K, N, gpu or x.device)
    n_tiles = triton.cdiv(N, t.block_n)
    _check_ws(ws, t, B, N, n_tiles)
    stats = stats or RowStats.of(x)
    stats.check(B, K)
    _ln_linear_kernel[(n_tiles, t.split_k)](
        x, x.stride(0), w, w.stride(0), w.stride(1), bias if bias is not None else w, out, out.stride(0),
        B, K, N, eps, ln_w, ln_b, *stats.args(), ws.partial, ws.counter, t.split_k,
        EPILOGUE=epi, HAS_BIAS=bias is not None, BLOCK_B=t.block_b, BLOCK_N=t.block_n, BLOCK_K=t.block_k,
        STAT_P=_pow2(stats.buf.shape[2]), SPLIT_P=_pow2(t.split_k), **_launch_options(t, w, gpu=gpu))
    return t


def ln_qkv_store(x, ln_w, ln_b, eps, w, bias, q_out, k_cache, v_cache, pos, ws: Workspace,
                 k_scale=None, v_scale=None, tiles: Tiling | None = None, gpu: Device | None = None,
                 stats: RowStats | None = None, new_kv: torch.Tensor | None = None) -> Tiling:
    """q_out (B, H, D) = q; k_cache/v_cache (B, H, L, D) at position pos[0] = k, v (int8 caches also get
    their scales (B, H, L)); where [q | k | v] = LayerNorm(x) @ w + bias, as GPT-2's c_attn lays them out.
    With `new_kv` (2, B, H, D) in q's dtype, k and v go there instead, and the caches are not touched:
    the attention writes them (decode_attention.split_kv_attention's new_kv)."""
    B, K = x.shape
    _, H, D = q_out.shape
    N = w.shape[1]
    if N != 3 * H * D or k_cache.shape[:2] != (B, H) or k_cache.shape[3] != D or v_cache.stride() != k_cache.stride():
        raise ValueError(f"qkv weight {tuple(w.shape)}, q {tuple(q_out.shape)} and caches {tuple(k_cache.shape)} "
                         "do not describe one (B, H, D) layout.")
    if new_kv is not None and (new_kv.shape != (2, B, H, D) or new_kv.dtype != q_out.dtype
                               or not new_kv.is_contiguous()):
        raise ValueError(f"new_kv must be a contiguous (2, {B}, {H}, {D}) {q_out.dtype} tensor; got "
                         f"{tuple(new_kv.shape)} {new_kv.dtype}.")
    int8 = k_cache.dtype == torch.int8 and new_kv is None
    if int8 and (k_scale is None or v_scale is None or k_scale.stride() != v_scale.stride()):
        raise ValueError("an int8 cache needs k_scale and v_scale (B, H, L) of one layout.")
    block_d = triton.next_power_of_2(D)
    t = tiles or qkv_tiling(B, K, H, D, gpu or x.device)
    if t.block_n != block_d:
        raise ValueError(f"the qkv product tiles one head per program: block_n must be {block_d}, got {t.block_n}.")
    _check_ws(ws, t, B, N, 3 * H)
    stats = stats or RowStats.of(x)
    stats.check(B, K)
    if new_kv is not None:  # the caches are not touched: one compiled kernel whatever their dtype and layout
        kv_to, kv_args = KV_STAGED, (new_kv,) * 4 + (pos, H, 0, 0, 0, 0, 0)
    else:
        ks, vs = (k_scale, v_scale) if int8 else (k_cache, v_cache)
        s_strides = (k_scale.stride(0), k_scale.stride(1)) if int8 else (0, 0)
        kv_to = KV_INT8 if int8 else KV_FLOAT
        kv_args = (k_cache, v_cache, ks, vs, pos, H, *k_cache.stride()[:3], *s_strides)
    _ln_qkv_kernel[(3 * H, t.split_k)](
        x, x.stride(0), w, w.stride(0), w.stride(1), bias, B, K, N, eps, ln_w, ln_b, *stats.args(),
        q_out, *kv_args, ws.partial, ws.counter, t.split_k, KV_STORE=kv_to, HEAD_DIM=D,
        BLOCK_B=t.block_b, BLOCK_N=t.block_n, BLOCK_K=t.block_k, STAT_P=_pow2(stats.buf.shape[2]),
        SPLIT_P=_pow2(t.split_k), **_launch_options(t, w, gpu=gpu))
    return t


def linear_residual(h, w, bias, x, ws: Workspace, tiles: Tiling | None = None,
                    gpu: Device | None = None, stats_out: torch.Tensor | None = None) -> Tiling:
    """x += h @ w + bias, in place. With `stats_out` (a RowStats.buffer), each output tile also leaves
    its share of x's new row statistics there (`residual_stats` describes them) for the next LayerNorm."""
    B, K = h.shape
    N = w.shape[1]
    t = tiles or linear_tiling(B, K, N, gpu or x.device)
    n_tiles = triton.cdiv(N, t.block_n)
    _check_ws(ws, t, B, N, n_tiles)
    if stats_out is not None:
        RowStats(stats_out, n_tiles, t.block_n).check(B, N)
    st = stats_out if stats_out is not None else ws.partial
    _linear_residual_kernel[(n_tiles, t.split_k)](
        h, h.stride(0), w, w.stride(0), w.stride(1), bias, x, x.stride(0), B, K, N,
        st, st.shape[-1] if stats_out is not None else 1, ws.partial, ws.counter, t.split_k,
        STATS_OUT=stats_out is not None, BLOCK_B=t.block_b, BLOCK_N=t.block_n, BLOCK_K=t.block_k,
        SPLIT_P=_pow2(t.split_k), **_launch_options(t, w, gpu=gpu))
    return t


# --- the compile matrix (kernels/aot.py) ------------------------------------------------------

# What the decode phase runs the fused step on: its models, and a batch of each row tiling (up to
# 16 sequences share 16-row tiles on 4 warps; its batch of 64 takes 64-row tiles on 8).
DECODE_MODELS = ("gpt2", "gpt2-xl")
DECODE_BATCHES = (4, 64)
# The fewest and the most SMs of a GPU these kernels target: between them lie every tile width the
# SM count can pick (the LM head's tiles widen on a GPU with few SMs for the vocabulary).
SM_RANGE = (16, 256)
# Cache capacities modulo 16 (0, 8, odd): the int8 cache's scale strides (capacity, heads x capacity)
# are specialised on their divisibility by 16, and these give every combination GPT-2's 12 and
# GPT-2 XL's 25 heads can.
CACHE_CAPACITIES = (1024, 1032, 1023)


def compile_specs(target):
    """The fused decode step's four products as kernels.decode.gpt2_fused.FusedStep launches them in the
    decode phase, through the wrappers above on meta tensors (kernels/aot.py): in bfloat16, or
    float16 where the GPU has no bfloat16 (T4); for each model and row tiling; the cache written in
    the model's dtype and in int8 at each capacity class; the LM head at each tile width the SM
    count may pick on this capability; with programmatic dependent launch where the code uses it.
    Tensor cores from Ampere on (Triton 3.6 lowers tl.dot to FMA on sm75). Core (the default test,
    which must stay short): GPT-2 at batch 4, each product once, the int8 cache at one capacity."""
    from ..aot import CompileSpec, meta
    from .gpt2 import PRESETS
    from .kv_quant import SCALE_DTYPE

    dt = torch.bfloat16 if target.bf16 else torch.float16
    f32 = torch.float32
    few, many = (Device(n, target.capability, target.smem_per_block) for n in SM_RANGE)
    pdl = uses_pdl(few)
    kind = f"{str(dt).removeprefix('torch.')}{' pdl' if pdl else ''}"
    specs = []

    def add(label, launch, core):
        specs.append(CompileSpec(f"{kind} {label}", launch, tensor_cores=target.capability >= (8, 0), core=core))

    def workspace():
        return Workspace("meta", 1 << 24, 1 << 16)  # meta: no memory, and larger than any product needs

    for name in DECODE_MODELS:
        a = PRESETS[name]
        C, H, D, V, eps = a.n_embd, a.n_head, a.head_dim, a.vocab_size, a.layer_norm_epsilon
        for batch in DECODE_BATCHES:
            at = f"{name} B={batch}"
            core = name == "gpt2" and batch == 4

            cap = stats_capacity(batch, C, few)

            def stats(batch=batch, cap=cap, C=C):
                # As a step hands them over: a buffer sized for the residual products' tiles.
                return residual_stats(meta(2, batch, cap, dtype=f32), linear_tiling(batch, C, C, few), C)

            def qkv(cache, capacity, batch=batch, C=C, H=H, D=D, eps=eps, stats=stats):
                kc = meta(batch, H, capacity, D, dtype=torch.int8 if cache == "int8" else dt)
                scales = ({"k_scale": meta(batch, H, capacity, dtype=SCALE_DTYPE),
                           "v_scale": meta(batch, H, capacity, dtype=SCALE_DTYPE)} if cache == "int8" else {})
                new_kv = meta(2, batch, H, D, dtype=dt) if cache == "new_kv" else None
                ln_qkv_store(meta(batch, C, dtype=dt), meta(C, dtype=dt), meta(C, dtype=dt), eps, meta(C, 3 * C, dtype=dt),
                             meta(3 * C, dtype=dt), meta(batch, H, D, dtype=dt), kc, torch.empty_like(kc),
                             meta(1, dtype=torch.int64), workspace(), gpu=few, stats=stats(), new_kv=new_kv, **scales)

            add(f"{at} qkv cache={kind.split()[0]}", lambda qkv=qkv: qkv("float", 1024), core)
            # k and v handed to the attention (split_kv_config.AttentionLaunch.new_kv), for either cache
            add(f"{at} qkv new_kv", lambda qkv=qkv: qkv("new_kv", 1024), core)
            for capacity in CACHE_CAPACITIES:
                add(f"{at} qkv cache=int8 L%16={capacity % 16}", lambda qkv=qkv, c=capacity: qkv("int8", c),
                    core and capacity == CACHE_CAPACITIES[0])

            def residual(k, batch=batch, C=C, cap=cap):
                linear_residual(meta(batch, k, dtype=dt), meta(k, C, dtype=dt), meta(C, dtype=dt),
                                meta(batch, C, dtype=dt), workspace(), gpu=few, stats_out=meta(2, batch, cap, dtype=f32))

            def fc(batch=batch, C=C, eps=eps, stats=stats):
                ln_linear(meta(batch, C, dtype=dt), meta(C, dtype=dt), meta(C, dtype=dt), eps, meta(C, 4 * C, dtype=dt),
                          meta(4 * C, dtype=dt), meta(batch, 4 * C, dtype=dt), workspace(), "gelu_tanh", gpu=few,
                          stats=stats())

            add(f"{at} proj+residual", lambda residual=residual, C=C: residual(C), core)
            add(f"{at} fc+gelu", fc, core)
            add(f"{at} out+residual", lambda residual=residual, C=C: residual(4 * C), core)
            # The LM head reads the (vocab, width) embedding table in place and writes fp32 logits.
            widths = sorted({linear_tiling(batch, C, V, g).block_n for g in (few, many)}, reverse=True)
            for bn in widths:
                gpu = few if bn == widths[0] else many

                def head(batch=batch, C=C, V=V, eps=eps, gpu=gpu, stats=stats):
                    ln_linear(meta(batch, C, dtype=dt), meta(C, dtype=dt), meta(C, dtype=dt), eps,
                              meta(V, C, dtype=dt).t(), None, meta(batch, V, dtype=f32), workspace(), gpu=gpu,
                              stats=stats())

                add(f"{at} lm_head BLOCK_N={bn}", head, core and bn == widths[0])
    return specs
