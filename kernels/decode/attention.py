"""Split-KV decode attention in Triton: one query token per (batch, head) against a long KV cache.

Decode attention reads the whole cache to produce a single row of output, so it is a bandwidth
problem, and at small batch it is also a parallelism problem: batch x heads programs are too few
to fill a large GPU. Following flash-decoding, each (batch, head) splits its cache into chunks
handled by separate programs; each program writes a partial output and its log-sum-exp. The last
split of each (batch, head) to finish, counted with an atomic, reads the others' partials from L2
and merges them exactly, so a step pays for one kernel per layer's attention instead of two. Where
the batch alone fills the GPU (one split), each program stores its output directly.

In a decode step the kernel can also start as a programmatic dependent of the launch before it
(`AttentionLaunch`): only the query and the newest cache row come from that launch, so the lengths
are read and the first keys asked of L2 while it drains.

The same kernel reads a bf16/fp16 cache or an int8 cache with one fp32 scale per token per head.
For int8 the scale factors out of both products: score_j = scale_k[j] * (q . k_int8[j]) and
out = sum_j (p_j * scale_v[j]) * v_int8[j]. No dequantized copy of the cache ever exists in memory: on
the CUDA cores the keys stay integers, multiplied four bytes at a time by a 16-bit fixed-point copy
of q (`_dot_words`, two dp2a instructions a word), and the values are widened in registers right after
their load (`_i8_as_f32_plus_1`); for the tensor cores both are widened (`_i8_as_f16_plus_1152`).

Layout: q (B, H, D); k, v (B, H, L, D) with L the cache capacity; scales (B, H, L); seq_lens (B,)
or (1,) int32 on the device, the number of valid keys per batch element. Reading the length from
device memory keeps one launch valid for every step, which is what lets a CUDA graph replay it.

Which configs the autotuner tries, how many splits a cache is cut into and which launches a step
measures are settings with measurements behind them: split_kv_config.py.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .arrival import arrive, reset
from ..common import LOG2E, capability, device_index, has_pdl, interpreting, quick_bench
from .kv_quant import SCALE_DTYPE, quantize_vector
from .prefetch import prefetch_l2, prefetch_rows
from .split_kv_config import (AUTOTUNE_CONFIGS, INTERPRET_CONFIG, PLAIN_LAUNCH, AttentionLaunch, as_launch_config,
                              compiled_launches, config_label, default_num_splits, len_bucket, prune_configs,
                              tunable_configs)



# --- kernels ----------------------------------------------------------------------------------

@triton.jit
def _i8_as_f32_plus_1(x):
    """int8 x -> the fp32 number 1 + (x + 128) / 32768, exactly: five instructions for four values.

    The fp32 bits of 1.0 are 0x3F800000; its second byte is mantissa bits 8-15, worth 2^-15 each.
    One XOR turns four packed signed bytes into x + 128 (0..255), and one byte permute per value
    drops that byte into the second byte of 1.0. Placing x by an integer multiply-add needs the byte unpacked
    into its own register first, which is two instructions per value before the multiply-add; the
    permute ran the int8 cache 1.06-1.09x faster on the H200. The caller removes the offset once per
    row: sum_j p_j y_j = (1 + 2^-8) * sum_j p_j + sum_j p_j x_j / 32768. The offset is about 2^8 times
    the signal, so the fp32 sums keep about 16 bits of it: coarser than fp32's 24, far finer than int8's 7.
    """
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 t;
        xor.b32 t, $4, 0x80808080;
        prmt.b32 $0, t, 0x3F800000, 0x7604;
        prmt.b32 $1, t, 0x3F800000, 0x7614;
        prmt.b32 $2, t, 0x3F800000, 0x7624;
        prmt.b32 $3, t, 0x3F800000, 0x7634;
        }""",
        constraints="=r,=r,=r,=r,r", args=[x], dtype=tl.float32, is_pure=True, pack=4)


@triton.jit
def _i8_as_f16_plus_1152(x):
    """int8 x -> the fp16 number 1152 + x, exactly, four values for three instructions.

    The fp16 bits of 1152 + x are 0x6480 + x = 0x64 followed by the byte x ^ 0x80: one XOR flips the
    sign bit of four packed bytes, and two byte permutes interleave them with the constant 0x64.
    Converting int8 to fp16 proper costs an integer-to-float instruction per value, which runs at a
    fraction of the ALU rate; on an int8 cache that conversion, not the memory, would set the pace.
    The caller removes the 1152 once per row (1152 times the sum of the other operand).
    """
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 t;
        xor.b32 t, $2, 0x80808080;
        prmt.b32 $0, t, 0x64646464, 0x4140;
        prmt.b32 $1, t, 0x64646464, 0x4342;
        }""",
        constraints="=r,=r,r", args=[x], dtype=tl.float16, is_pure=True, pack=4)


@triton.jit
def _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0, end, stride_kn, stride_vn, mask_kd, mask_d,
               BLOCK_N: tl.constexpr, IS_INT8: tl.constexpr, MASKED: tl.constexpr):
    """Keys, values (and their scales) of rows [n0, n0 + BLOCK_N). A MASKED tile does not read rows at
    or past `end`; every other tile lies wholly inside the chunk and needs no per-row predicates.
    `mask_kd` masks a key row's columns, `mask_d` a value row's (keys may be read as 4-byte words)."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    if MASKED:
        mask_n = offs_n < end
        k = tl.load(k_ptrs + offs_n[:, None] * stride_kn, mask=mask_n[:, None] & mask_kd[None, :], other=0)
        v = tl.load(v_ptrs + offs_n[:, None] * stride_vn, mask=mask_n[:, None] & mask_d[None, :], other=0)
        if IS_INT8:
            ks = tl.load(ks_ptrs + offs_n, mask=mask_n, other=0.0)
            vs = tl.load(vs_ptrs + offs_n, mask=mask_n, other=0.0)
        else:
            ks = tl.zeros([BLOCK_N], tl.float32)
            vs = tl.zeros([BLOCK_N], tl.float32)
    else:
        k = tl.load(k_ptrs + offs_n[:, None] * stride_kn, mask=mask_kd[None, :], other=0)
        v = tl.load(v_ptrs + offs_n[:, None] * stride_vn, mask=mask_d[None, :], other=0)
        if IS_INT8:
            ks = tl.load(ks_ptrs + offs_n)
            vs = tl.load(vs_ptrs + offs_n)
        else:
            ks = tl.zeros([BLOCK_N], tl.float32)
            vs = tl.zeros([BLOCK_N], tl.float32)
    return k, v, ks, vs


# int8 on the CUDA cores: `_i8_as_f32_plus_1` (or its fp32 twin in the interpreter) widens a value to
# 1 + (x + 128) / 2^15 = WIDE_OFFSET + x / WIDE_SCALE.
WIDE_OFFSET = tl.constexpr(1.00390625)
WIDE_SCALE = tl.constexpr(32768.0)
# Lazy rescaling: a row's running max moves only when a score passes it by more than this (log2
# units), so most tiles skip rescaling the accumulator; p stays below 2^RESCALE_SLACK in fp32. On the
# H200 it ran the int8 cache 1.16-1.20x faster (B=4-16, H=32, d=128, 16k-32k keys).
RESCALE_SLACK = tl.constexpr(8.0)


@triton.jit
def _widen_rows(x, IS_INT8: tl.constexpr, UPCAST: tl.constexpr):
    if IS_INT8:
        if UPCAST:  # the interpreter has no inline assembly: the same numbers in fp32
            return WIDE_OFFSET + x.to(tl.float32) * (1.0 / WIDE_SCALE)
        else:
            return _i8_as_f32_plus_1(x)
    else:
        return x.to(tl.float32)


# Query entries as 16-bit fixed point against their largest magnitude, for the integer dot products.
QUERY_STEPS = tl.constexpr(32767.0)


@triton.jit
def _query_words(q, BLOCK_D: tl.constexpr):
    """q (fp32) as 16-bit integers packed two to a word, for `_dot_words`: (qa, qb, unit), where word w
    of qa holds entries 4w and 4w+1, qb entries 4w+2 and 4w+3, and q ~ unit * integer. An entry is off
    by at most unit / 2, 2^-16 of the largest; the int8 keys it multiplies are 2^8 times coarser."""
    unit = tl.maximum(tl.max(tl.abs(q), axis=0), 1e-30) / QUERY_STEPS
    qi = (q / unit + 12582912.0) - 12582912.0  # round half to even; |q / unit| <= 32767
    qi = tl.minimum(tl.maximum(qi, -QUERY_STEPS), QUERY_STEPS).to(tl.int32) & 0xFFFF
    lo, hi = tl.split(tl.reshape(qi, [BLOCK_D // 2, 2]))
    qa, qb = tl.split(tl.reshape(lo | (hi << 16), [BLOCK_D // 4, 2]))
    return qa, qb, unit


@triton.jit
def _dot_words(kw, qa, qb, UPCAST: tl.constexpr):
    """Per 4-byte word of int8 keys, its four bytes times the four 16-bit query entries of qa and qb,
    exactly, in int32: two dp2a instructions. Widening the bytes to fp32 first and multiplying there
    took about nine instructions per word."""
    if UPCAST:  # the interpreter has no inline assembly: the same integers by shifts
        return (((kw << 24) >> 24) * ((qa << 16) >> 16) + ((kw << 16) >> 24) * (qa >> 16)
                + ((kw << 8) >> 24) * ((qb << 16) >> 16) + (kw >> 24) * (qb >> 16))
    else:
        return tl.inline_asm_elementwise(
            asm="""{
            .reg .s32 t;
            dp2a.lo.s32.s32 t, $2, $1, 0;
            dp2a.hi.s32.s32 $0, $3, $1, t;
            }""",
            constraints="=r,r,r,r", args=[kw, tl.broadcast_to(qa[None, :], kw.shape),
                                          tl.broadcast_to(qb[None, :], kw.shape)],
            dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _rows_update(q, qa, qb, q_unit, m_r, l_r, w_r, acc, k, v, ks, vs, n0, end, BLOCK_N: tl.constexpr,
                 IS_INT8: tl.constexpr, MASKED: tl.constexpr, UPCAST: tl.constexpr):
    """Fold one loaded tile of keys and values into the row streams. int8 keys arrive as words (q as
    `_query_words` packs it)."""
    if IS_INT8:
        s = tl.sum(_dot_words(k, qa, qb, UPCAST), axis=1).to(tl.float32) * (q_unit * ks)
    else:
        s = tl.sum(q[None, :] * _widen_rows(k, IS_INT8, UPCAST), axis=1)
    if MASKED:
        s = tl.where((n0 + tl.arange(0, BLOCK_N)) < end, s, float("-inf"))
    # Move the maxima only when some row's score passes its max by more than the slack: one decision
    # for the whole tile, so the accumulator is rescaled on few tiles instead of on every one.
    if tl.max((s > m_r + RESCALE_SLACK).to(tl.int32), axis=0) > 0:
        m_new = tl.maximum(m_r, s)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet must not make NaN
        alpha = tl.exp2(m_r - m_safe)
        l_r = l_r * alpha
        w_r = w_r * alpha
        acc = acc * alpha[:, None]
        m_r = m_new
    p = tl.exp2(s - tl.where(m_r == float("-inf"), 0.0, m_r))
    l_r = l_r + p
    if IS_INT8:
        p *= WIDE_SCALE * vs
        w_r = w_r + p
    acc = acc + p[:, None] * _widen_rows(v, IS_INT8, UPCAST)
    return m_r, l_r, w_r, acc


@triton.jit
def _prefetch_rows_ahead(k_base, v_base, ks_ptrs, vs_ptrs, n0, stop, stride_kn, stride_vn,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, IS_INT8: tl.constexpr):
    """Ask L2 for the keys and values (and their scales) of rows [n0, stop), at most ROWS of them, so
    that the loop's loads of them later wait on L2 instead of DRAM. `stop` must be a valid row + 1."""
    prefetch_rows(k_base, n0, stop, stride_kn, HEAD_DIM, BLOCK_D)
    prefetch_rows(v_base, n0, stop, stride_vn, HEAD_DIM, BLOCK_D)
    if IS_INT8:
        if n0 < stop:  # one request per 128-byte line of fp32 scales, the row's start unaligned
            offs = tl.minimum(n0 + tl.arange(0, 2 * max(1, ROWS // 32)) * 32, stop - 1)
            prefetch_l2(ks_ptrs + offs)
            prefetch_l2(vs_ptrs + offs)


@triton.jit
def _prefetch_iteration(k_base, v_base, ks_ptrs, vs_ptrs, n0, end, stride_kn, stride_vn, HEAD_DIM: tl.constexpr,
                        BLOCK_D: tl.constexpr, IS_INT8: tl.constexpr, STEP: tl.constexpr, AHEAD: tl.constexpr):
    """Inside the loop: ask L2 for the STEP rows the iteration AHEAD iterations after n0's will read."""
    _prefetch_rows_ahead(k_base, v_base, ks_ptrs, vs_ptrs, n0 + AHEAD * STEP, tl.minimum(n0 + (AHEAD + 1) * STEP, end),
                         stride_kn, stride_vn, HEAD_DIM, BLOCK_D, STEP, IS_INT8)


@triton.jit
def _rows_loop(q, k_base, v_base, ks_ptrs, vs_ptrs, start, end, stride_kn, stride_vn, mask_d,
               HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, IS_INT8: tl.constexpr,
               UPCAST: tl.constexpr, UNROLL: tl.constexpr, AHEAD: tl.constexpr):
    """CUDA-core schedule. Each of the BLOCK_N rows of a tile is its own online-softmax stream (row r
    sees keys r, r + BLOCK_N, ...), so the loop is elementwise apart from q.k; the streams are merged
    once after the loop. A single running max would need a reduction across warps on every tile.
    `k_base` and `v_base` point at this (batch, head)'s first key and value. int8 keys are read as
    4-byte words and multiplied by integer dot products (`_dot_words`); int8 values are widened in
    registers.

    The loop is latency-bound: a program waits out one memory latency per tile. UNROLL=2 loads two
    tiles per iteration before using either, which ran the int8 cache up to 1.08x faster on the H200
    at batch 16. Four tiles helped only at batch 4 with more splits, and spill before Hopper; carrying
    a prefetched tile across iterations held it in registers, spilled, and ran about 1.5x slower.
    The unrolled loop on 2 warps spills registers at head_dim 128: no config asks for it.
    AHEAD > 0 asks L2 for the rows that many iterations ahead, so the loads wait on L2, not DRAM, with
    no register held for them."""
    offs_d = tl.arange(0, BLOCK_D)
    v_ptrs = v_base + offs_d[None, :]
    if IS_INT8:
        offs_w = tl.arange(0, BLOCK_D // 4)
        mask_kd = offs_w < HEAD_DIM // 4
        k_ptrs = k_base.to(tl.pointer_type(tl.int32)) + offs_w[None, :]
        stride_kw = stride_kn // 4
    else:
        mask_kd = mask_d
        k_ptrs = k_base + offs_d[None, :]
        stride_kw = stride_kn
    STEP: tl.constexpr = UNROLL * BLOCK_N
    PREFETCH: tl.constexpr = AHEAD > 0 and not UPCAST  # the interpreter has no prefetch instruction
    if PREFETCH:
        _prefetch_rows_ahead(k_base, v_base, ks_ptrs, vs_ptrs, start + STEP, tl.minimum(start + AHEAD * STEP, end),
                             stride_kn, stride_vn, HEAD_DIM, BLOCK_D, AHEAD * STEP, IS_INT8)
    if IS_INT8:
        qa, qb, q_unit = _query_words(q, BLOCK_D)
    else:
        qa, qb, q_unit = q, q, 1.0
    m_r = tl.full([BLOCK_N], float("-inf"), tl.float32)
    l_r = tl.zeros([BLOCK_N], tl.float32)
    w_r = tl.zeros([BLOCK_N], tl.float32)  # int8: sum of the value weights, to remove the offset
    acc = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    tl.static_assert(UNROLL == 1 or UNROLL == 2, "UNROLL is 1 or 2 tiles per iteration")
    full_end = start + (end - start) // BLOCK_N * BLOCK_N
    single_from = start
    if UNROLL == 2:
        # Two tiles per iteration, both loaded before either is used: a warp keeps two tiles' loads
        # in flight instead of waiting out one memory latency per tile.
        single_from = start + (end - start) // (2 * BLOCK_N) * (2 * BLOCK_N)
        for n0 in range(start, single_from, 2 * BLOCK_N):
            if PREFETCH:
                _prefetch_iteration(k_base, v_base, ks_ptrs, vs_ptrs, n0, end, stride_kn, stride_vn, HEAD_DIM, BLOCK_D,
                                    IS_INT8, STEP, AHEAD)
            k0, v0, ks0, vs0 = _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0, end, stride_kw, stride_vn, mask_kd,
                                          mask_d, BLOCK_N, IS_INT8, False)
            k1, v1, ks1, vs1 = _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0 + BLOCK_N, end, stride_kw, stride_vn,
                                          mask_kd, mask_d, BLOCK_N, IS_INT8, False)
            m_r, l_r, w_r, acc = _rows_update(q, qa, qb, q_unit, m_r, l_r, w_r, acc, k0, v0, ks0, vs0, n0, end,
                                              BLOCK_N, IS_INT8, False, UPCAST)
            m_r, l_r, w_r, acc = _rows_update(q, qa, qb, q_unit, m_r, l_r, w_r, acc, k1, v1, ks1, vs1, n0 + BLOCK_N,
                                              end, BLOCK_N, IS_INT8, False, UPCAST)
    for n0 in range(single_from, full_end, BLOCK_N):  # every whole tile (UNROLL=1), or the one left over
        if PREFETCH:
            _prefetch_iteration(k_base, v_base, ks_ptrs, vs_ptrs, n0, end, stride_kn, stride_vn, HEAD_DIM, BLOCK_D,
                                IS_INT8, BLOCK_N, AHEAD)
        k, v, ks, vs = _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0, end, stride_kw, stride_vn, mask_kd, mask_d,
                                  BLOCK_N, IS_INT8, False)
        m_r, l_r, w_r, acc = _rows_update(q, qa, qb, q_unit, m_r, l_r, w_r, acc, k, v, ks, vs, n0, end, BLOCK_N,
                                          IS_INT8, False, UPCAST)
    if full_end < end:
        k, v, ks, vs = _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, full_end, end, stride_kw, stride_vn, mask_kd,
                                  mask_d, BLOCK_N, IS_INT8, True)
        m_r, l_r, w_r, acc = _rows_update(q, qa, qb, q_unit, m_r, l_r, w_r, acc, k, v, ks, vs, full_end, end,
                                          BLOCK_N, IS_INT8, True, UPCAST)
    m_i = tl.max(m_r, axis=0)
    m_i = tl.where(m_i == float("-inf"), 0.0, m_i)
    w = tl.exp2(m_r - m_i)
    l_i = tl.sum(l_r * w, axis=0)
    if IS_INT8:
        acc = acc - WIDE_OFFSET * w_r[:, None]
    return m_i, l_i, tl.sum(acc * w[:, None], axis=0)


@triton.jit
def _dot_step(qm, q_offset, qk_scale_log2, m_i, l_i, acc, k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0, end, stride_kn,
              stride_vn, mask_d, BLOCK_N: tl.constexpr, IS_INT8: tl.constexpr, UPCAST: tl.constexpr,
              MASKED: tl.constexpr):
    k, v, ks, vs = _load_tile(k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0, end, stride_kn, stride_vn, mask_d, mask_d,
                              BLOCK_N, IS_INT8, MASKED)
    # int8 tiles are widened to 1152 + x (see _i8_as_f16_plus_1152); the 1152 comes off once per row.
    if IS_INT8:
        if UPCAST:  # the interpreter has no inline assembly: the same numbers in fp32
            kd = k.to(tl.float32) + 1152.0
            vd = v.to(tl.float32) + 1152.0
        else:
            kd = _i8_as_f16_plus_1152(k)
            vd = _i8_as_f16_plus_1152(v)
        s = (tl.dot(qm, tl.trans(kd)) - q_offset) * (qk_scale_log2 * ks[None, :])
    else:
        if UPCAST:
            s = tl.dot(qm, tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(qm, tl.trans(k))
        s = s * qk_scale_log2
    if MASKED:
        s = tl.where(((n0 + tl.arange(0, BLOCK_N)) < end)[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: every tile has a key below `end`
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if IS_INT8:
        # fp16 keeps the value weights to 2^-11, far finer than int8's steps.
        pv = p * vs[None, :]
        if UPCAST:
            o = tl.dot(pv, vd) - 1152.0 * tl.sum(pv, axis=1)[:, None]
        else:
            pv = pv.to(tl.float16)
            o = tl.dot(pv, vd) - 1152.0 * tl.sum(pv.to(tl.float32), axis=1)[:, None]
    elif UPCAST:
        o = tl.dot(p, v.to(tl.float32))
    else:
        o = tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc * alpha[:, None] + o


@triton.jit
def _dot_loop(q, qk_scale_log2, k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, start, end, stride_kn, stride_vn, mask_d,
              BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, IS_INT8: tl.constexpr, UPCAST: tl.constexpr):
    """Tensor-core schedule: the one query is repeated on 16 rows (the smallest dot), so q.k and p.v run
    on tensor cores and the CUDA cores only widen the int8 tiles. Each iteration's loads feed dots, so
    Triton's pipeliner keeps the next tiles in flight. Every row computes the same answer.

    `q` arrives unscaled in its own dtype (bf16 q is exact as a dot operand; for an int8 cache it is
    converted to fp16, the type the widened tiles have, which holds every bf16 value of a query's
    range exactly); the softmax scale is applied to the fp32 scores. UPCAST (the interpreter, which
    mishandles bf16 dots and has no inline assembly) does the same maths in fp32.
    """
    BLOCK_M: tl.constexpr = 16
    qm = tl.broadcast_to(q[None, :], [BLOCK_M, BLOCK_D])
    if UPCAST:
        qm = qm.to(tl.float32)
    elif IS_INT8:
        qm = qm.to(tl.float16)
    # int8: every score carries 1152 * sum(q) from the widening offset (summed as the dot sums it).
    q_offset = 1152.0 * tl.sum(qm.to(tl.float32), axis=1)[:, None]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    full_end = start + (end - start) // BLOCK_N * BLOCK_N
    for n0 in range(start, full_end, BLOCK_N):
        m_i, l_i, acc = _dot_step(qm, q_offset, qk_scale_log2, m_i, l_i, acc, k_ptrs, v_ptrs, ks_ptrs, vs_ptrs, n0,
                                  end, stride_kn, stride_vn, mask_d, BLOCK_N, IS_INT8, UPCAST, False)
    if full_end < end:
        m_i, l_i, acc = _dot_step(qm, q_offset, qk_scale_log2, m_i, l_i, acc, k_ptrs, v_ptrs, ks_ptrs, vs_ptrs,
                                  full_end, end, stride_kn, stride_vn, mask_d, BLOCK_N, IS_INT8, UPCAST, True)
    # All rows agree; reduce them to one.
    m = tl.max(m_i, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(l_i, axis=0) / BLOCK_M, tl.sum(acc, axis=0) / BLOCK_M


@triton.jit(do_not_specialize=["H", "num_splits", "stride_lens", "len_bucket", "prefetch_keys", "early_trigger"])
def _split_kv_kernel(
    Q, K, V, KScale, VScale, Lens, OPart, LsePart, Out, Counter, NewKV,
    stride_qb, stride_qh, stride_ob, stride_oh,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_sb, stride_sh,
    stride_lens,
    H, num_splits, qk_scale_log2,
    len_bucket,  # autotuning key only: the best tile differs between small and large problems
    prefetch_keys, early_trigger,  # how a programmatic dependent launch is used (AttentionLaunch)
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, IS_INT8: tl.constexpr,
    USE_DOT: tl.constexpr, UPCAST: tl.constexpr, UNROLL: tl.constexpr = 1, PDL: tl.constexpr = False,
    AHEAD: tl.constexpr = 0, NEW_ROW: tl.constexpr = False,
):
    split = tl.program_id(0)
    bh = tl.program_id(1)
    # 64-bit: batch x (heads x length x head_dim) passes 2^31 elements for a 64k cache at batch 16.
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)

    # Under PDL this runs while the previous launch drains: the lengths and every cache row but the
    # newest were written launches earlier (see AttentionLaunch), so only q and the newest row wait.
    seq_len = tl.load(Lens + b * stride_lens)
    # Chunks are sized from the live length, not the capacity, so every split gets work as the cache fills.
    chunk = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = tl.maximum(tl.minimum(start + chunk, seq_len), start)  # a split past the length gets [start, start)
    # NEW_ROW: the newest row is not in the cache yet: its split reads the others, then folds it in.
    loop_end = tl.minimum(end, seq_len - 1) if NEW_ROW else end

    offs_d = tl.arange(0, BLOCK_D)
    if BLOCK_D == HEAD_DIM:
        mask_d = tl.full([BLOCK_D], 1, tl.int1)  # constant: the compiler drops the column predicates
    else:
        mask_d = offs_d < HEAD_DIM
    k_base = K + b * stride_kb + h * stride_kh  # this (batch, head)'s first key and value
    v_base = V + b * stride_vb + h * stride_vh
    if PDL:
        # L2 is coherent: a line asked for here that the previous launch then rewrites is not stale.
        pf_end = tl.minimum(end, start + prefetch_keys)
        prefetch_rows(k_base, start, pf_end, stride_kn, HEAD_DIM, BLOCK_D)
        prefetch_rows(v_base, start, pf_end, stride_vn, HEAD_DIM, BLOCK_D)
        tl.extra.cuda.gdc_wait()
        if early_trigger != 0:
            tl.extra.cuda.gdc_launch_dependents()
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_d, mask=mask_d, other=0.0)
    ks_ptrs = KScale + b * stride_sb + h * stride_sh
    vs_ptrs = VScale + b * stride_sb + h * stride_sh
    if USE_DOT:
        m_i, l_i, acc_d = _dot_loop(q, qk_scale_log2, k_base + offs_d[None, :], v_base + offs_d[None, :], ks_ptrs,
                                    vs_ptrs, start, loop_end, stride_kn, stride_vn, mask_d, BLOCK_N, BLOCK_D, IS_INT8,
                                    UPCAST)
    else:
        # Scores live in the log2 domain (exp2 is the fast instruction); the softmax scale is folded into q.
        m_i, l_i, acc_d = _rows_loop(q.to(tl.float32) * qk_scale_log2, k_base, v_base, ks_ptrs, vs_ptrs, start,
                                     loop_end, stride_kn, stride_vn, mask_d, HEAD_DIM, BLOCK_N, BLOCK_D, IS_INT8, UPCAST,
                                     UNROLL, AHEAD)

    if NEW_ROW:
        # Loaded only now (the qkv product just wrote them, so from L2): held through the loop they
        # spilled registers at 8 warps (sm80 and sm90, bf16). Predicated rather than branched on: the
        # branch left ptxas short of registers for the tensor-core loop at 8 warps (sm90).
        last = seq_len - 1
        holds_new = (start <= last) & (last < end)
        new_k = tl.load(NewKV + bh * HEAD_DIM + offs_d, mask=mask_d & holds_new, other=0.0).to(tl.float32)
        new_v = tl.load(NewKV + (tl.num_programs(1) + bh) * HEAD_DIM + offs_d, mask=mask_d & holds_new,
                        other=0.0).to(tl.float32)
        # The row's addresses from the arguments again, one sum each: kept from before the loop they
        # held registers through it.
        m_i, l_i, acc_d = _fold_new_row(q.to(tl.float32) * qk_scale_log2, new_k, new_v,
                                        K + (b * stride_kb + h * stride_kh + last * stride_kn),
                                        V + (b * stride_vb + h * stride_vh + last * stride_vn),
                                        KScale + (b * stride_sb + h * stride_sh + last),
                                        VScale + (b * stride_sb + h * stride_sh + last), holds_new, m_i, l_i,
                                        acc_d, offs_d, mask_d, IS_INT8)
    if PDL:
        if early_trigger == 0:
            tl.extra.cuda.gdc_launch_dependents()

    # A split past the live length did no work: weight -inf, so the merge ignores it.
    has_work = l_i > 0
    l_safe = tl.where(has_work, l_i, 1.0)
    out = acc_d / l_safe
    out_row = Out + b * stride_ob + h * stride_oh
    if BLOCK_D <= ONE_PASS_MAX_D:  # (at head_dim 128 the extra path spilled registers on an A100)
        if num_splits == 1:  # nothing to merge: no partial, no handshake, no second round trip through L2
            tl.store(out_row + offs_d, out.to(Out.dtype.element_ty), mask=mask_d)
        else:
            _park_and_merge(out, m_i, l_safe, has_work, OPart, LsePart, out_row, Counter, bh, split, num_splits,
                            offs_d, mask_d, HEAD_DIM, BLOCK_D)
    else:
        _park_and_merge(out, m_i, l_safe, has_work, OPart, LsePart, out_row, Counter, bh, split, num_splits, offs_d,
                        mask_d, HEAD_DIM, BLOCK_D)


@triton.jit
def _fold_new_row(q_log2, k, v, k_row, v_row, ks_at, vs_at, holds, m_i, l_i, acc, offs_d, mask_d,
                  IS_INT8: tl.constexpr):
    """The newest key and value, which the step's qkv product left in a buffer instead of the cache:
    written into the cache at their row (quantized there for an int8 cache, as kv_quant.quantize
    would) and added to this split's softmax as the cache would have given them. Only the split that
    `holds` that row does either; for the others the row weighs nothing."""
    mask = mask_d & holds
    if IS_INT8:
        kq, k_scale = quantize_vector(k, mask_d)
        vq, v_scale = quantize_vector(v, mask_d)
        tl.store(k_row + offs_d, kq, mask=mask)
        tl.store(v_row + offs_d, vq, mask=mask)
        tl.store(ks_at, k_scale, mask=holds)
        tl.store(vs_at, v_scale, mask=holds)
        k = kq.to(tl.float32) * k_scale
        v = vq.to(tl.float32) * v_scale
    else:
        tl.store(k_row + offs_d, k.to(k_row.dtype.element_ty), mask=mask)
        tl.store(v_row + offs_d, v.to(v_row.dtype.element_ty), mask=mask)
    s = tl.where(holds, tl.sum(tl.where(mask_d, q_log2 * k, 0.0), axis=0), float("-inf"))
    m_new = tl.maximum(m_i, s)  # m_i is finite (0 where the split saw no key)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new)
    return m_new, l_i * alpha + p, acc * alpha + p * v


@triton.jit
def _park_and_merge(out, m_i, l_safe, has_work, OPart, LsePart, out_row, Counter, bh, split, num_splits, offs_d,
                    mask_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """Leave this split's output and log2-sum-exp; the last split of this (batch, head) to finish
    merges them all, so no second kernel is launched. It counts arrivals with an atomic, and resets
    the counter for the next launch."""
    lse = tl.where(has_work, m_i + tl.log2(l_safe), float("-inf"))
    row = bh * num_splits + split
    tl.store(OPart + row * HEAD_DIM + offs_d, out, mask=mask_d)
    tl.store(LsePart + row, lse)
    if arrive(Counter + bh, num_splits):
        _merge_splits(OPart, LsePart, out_row, bh, num_splits, offs_d, mask_d, HEAD_DIM, BLOCK_D)
        reset(Counter + bh)


# Splits merged per load: the partial outputs of more would not fit in registers at head_dim 128.
# A fixed chunk, not one sized to the split count, so one compiled kernel serves every count.
MERGE_CHUNK = tl.constexpr(16)
# Up to this head_dim the merge reads all of up to MERGE_CHUNK splits in one pass; at 128 holding
# them all at once spilled registers (A100 int8, H100 bf16), and there the merge is a sliver of a
# long-context call anyway.
ONE_PASS_MAX_D = tl.constexpr(64)


@triton.jit
def _merge_splits(OPart, LsePart, Out, bh, num_splits, offs_d, mask_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """out = sum_s 2^(lse_s - m) o_s / sum_s 2^(lse_s - m), from the partials in L2 (.cg: another SM
    wrote them). The splits are summed in a fixed order, so the result does not depend on which
    split finished last."""
    lse_row = LsePart + bh * num_splits
    o_rows = OPart + bh * num_splits * HEAD_DIM
    if BLOCK_D <= ONE_PASS_MAX_D:
        if num_splits <= MERGE_CHUNK:
            out = _merge_one_pass(o_rows, lse_row, num_splits, offs_d, mask_d, HEAD_DIM)
        else:
            out = _merge_two_pass(o_rows, lse_row, num_splits, offs_d, mask_d, HEAD_DIM, BLOCK_D)
    else:
        out = _merge_two_pass(o_rows, lse_row, num_splits, offs_d, mask_d, HEAD_DIM, BLOCK_D)
    tl.store(Out + offs_d, out.to(Out.dtype.element_ty), mask=mask_d)


@triton.jit
def _merge_one_pass(o_rows, lse_row, num_splits, offs_d, mask_d, HEAD_DIM: tl.constexpr):
    """Every split in one chunk: sizes and outputs load together, one round trip through L2 where
    two passes (the maximum first) take two."""
    offs_c = tl.arange(0, MERGE_CHUNK)
    mask_s = offs_c < num_splits
    lse = tl.load(lse_row + offs_c, mask=mask_s, other=float("-inf"), cache_modifier=".cg")
    o = tl.load(o_rows + offs_c[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_s[:, None] & mask_d[None, :],
                other=0.0, cache_modifier=".cg")
    w = tl.where(mask_s, tl.exp2(lse - tl.max(lse, axis=0)), 0.0)
    return tl.sum(w[:, None] * o, axis=0) / tl.sum(w, axis=0)


@triton.jit
def _merge_two_pass(o_rows, lse_row, num_splits, offs_d, mask_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    offs_c = tl.arange(0, MERGE_CHUNK)
    m = tl.full([MERGE_CHUNK], float("-inf"), tl.float32)
    for s0 in range(0, num_splits, MERGE_CHUNK):
        m = tl.maximum(m, tl.load(lse_row + s0 + offs_c, mask=s0 + offs_c < num_splits, other=float("-inf"),
                                  cache_modifier=".cg"))
    m_all = tl.max(m, axis=0)
    den = tl.zeros([MERGE_CHUNK], tl.float32)
    acc = tl.zeros([MERGE_CHUNK, BLOCK_D], tl.float32)
    for s0 in range(0, num_splits, MERGE_CHUNK):
        s = s0 + offs_c
        mask_s = s < num_splits
        w = tl.where(mask_s, tl.exp2(tl.load(lse_row + s, mask=mask_s, other=float("-inf"), cache_modifier=".cg")
                                     - m_all), 0.0)
        o = tl.load(o_rows + s[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_s[:, None] & mask_d[None, :],
                    other=0.0, cache_modifier=".cg")
        den += w
        acc += w[:, None] * o
    return tl.sum(acc, axis=0) / tl.sum(den, axis=0)


# The split count is part of the key: it sets how many keys each program reads (kernels/decode/notes.md,
# "attention autotune key").
_split_kv_tuned = triton.autotune(
    configs=AUTOTUNE_CONFIGS, key=["HEAD_DIM", "IS_INT8", "len_bucket", "num_splits"], do_bench=quick_bench,
    prune_configs_by={"early_config_prune": prune_configs},
)(_split_kv_kernel)


# --- wrapper ----------------------------------------------------------------------------------

def last_config() -> str | None:
    """The autotuner's choice for the most recent tuned launch, for the report."""
    cfg = getattr(_split_kv_tuned, "best_config", None)
    return None if cfg is None else config_label(as_launch_config(cfg))


def _check(q, k, v, seq_lens, k_scale, v_scale):
    if q.dim() != 3 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"expected q (B, H, D) and k, v (B, H, L, D); got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}.")
    B, H, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[1] != H or k.shape[3] != D:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must both be (B={B}, H={H}, L, D={D}).")
    if D > 256:
        raise ValueError(f"head_dim {D} is above the 256 this kernel keeps in registers.")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q must be fp16, bf16 or fp32, got {q.dtype}.")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} needs a contiguous last (head_dim) dimension; call .contiguous() first.")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}; keep everything on one device.")
    is_int8 = k.dtype == torch.int8
    if is_int8 != (v.dtype == torch.int8):
        raise ValueError(f"k is {k.dtype} but v is {v.dtype}; both int8 or both floating.")
    if is_int8:
        if k_scale is None or v_scale is None:
            raise ValueError("an int8 cache needs k_scale and v_scale (B, H, L) from kernels.decode.kv_quant.quantize.")
        for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            if s.shape != k.shape[:3] or s.dtype != SCALE_DTYPE or s.stride(-1) != 1:
                raise ValueError(f"{name} must be a (B, H, L) = {tuple(k.shape[:3])} {SCALE_DTYPE} tensor with a "
                                 f"contiguous last dim; got {tuple(s.shape)} {s.dtype}.")
        if k_scale.stride() != v_scale.stride():
            raise ValueError("k_scale and v_scale must share one layout (same strides).")
        if D % 4 or k.stride(2) % 4 or k.stride(1) % 4 or k.stride(0) % 4:
            raise ValueError(f"an int8 cache is read as 4-byte words: head_dim ({D}) and the key strides "
                             f"{k.stride()} must be multiples of 4.")
    elif k_scale is not None or v_scale is not None:
        raise ValueError(f"scales are only for an int8 cache; k is {k.dtype}.")
    elif k.dtype != q.dtype:
        raise ValueError(f"a floating cache must match q's dtype: k is {k.dtype}, q is {q.dtype}.")
    if seq_lens.dtype != torch.int32 or seq_lens.dim() != 1 or seq_lens.shape[0] not in (1, B):
        raise ValueError(f"seq_lens must be an int32 tensor of shape (B,) or (1,), got {seq_lens.dtype} "
                         f"{tuple(seq_lens.shape)}.")
    return is_int8


class SplitBuffers:
    """What one decode-attention launch writes besides its output: each split's partial output and
    log2-sum-exp, and one arrival counter per (batch, head). The counters must start at zero; the
    merging split sets them back. Owned by the caller, so a CUDA graph replays the same memory."""

    def __init__(self, batch: int, heads: int, head_dim: int, num_splits: int, device):
        n = batch * heads
        self.num_splits = num_splits
        self.o_part = torch.empty((n * num_splits, head_dim), device=device, dtype=torch.float32)
        self.lse_part = torch.empty((n * num_splits,), device=device, dtype=torch.float32)
        self.counter = torch.zeros((n,), device=device, dtype=torch.int32)

    def fits(self, batch: int, heads: int, head_dim: int) -> bool:
        n = batch * heads
        return self.o_part.shape == (n * self.num_splits, head_dim) and self.counter.numel() == n


def split_kv_attention(q, k, v, seq_lens, out, buffers: SplitBuffers, *, k_scale=None, v_scale=None,
                       sm_scale=None, config=None, launch: AttentionLaunch = PLAIN_LAUNCH,
                       target_capability: tuple[int, int] | None = None, new_kv=None) -> None:
    """Decode attention into `out` (B, H, D) in one launch: each split writes its partial output and
    log2-sum-exp into `buffers`, and the last split of each (batch, head) to finish merges them.
    `new_kv` (2, B, H, D) in q's dtype: the newest key and value (row seq_lens - 1), not yet in the
    cache; the kernel writes them there (quantized for an int8 cache) and attends to them."""
    is_int8 = _check(q, k, v, seq_lens, k_scale, v_scale)
    B, H, D = q.shape
    if new_kv is not None and (new_kv.shape != (2, B, H, D) or new_kv.dtype != q.dtype
                               or not new_kv.is_contiguous() or new_kv.device != q.device):
        raise ValueError(f"new_kv must be a contiguous (2, {B}, {H}, {D}) {q.dtype} tensor on {q.device}; got "
                         f"{tuple(new_kv.shape)} {new_kv.dtype} on {new_kv.device}.")
    L = k.shape[2]
    if not buffers.fits(B, H, D):
        raise ValueError(f"split buffers hold {tuple(buffers.o_part.shape)} partials and {buffers.counter.numel()} "
                         f"counters; B={B} H={H} D={D} with {buffers.num_splits} splits needs "
                         f"({B * H * buffers.num_splits}, {D}) and {B * H}.")
    if out.shape != q.shape or out.dtype != q.dtype or out.stride(-1) != 1:
        raise ValueError(f"out must be a {tuple(q.shape)} {q.dtype} tensor with a contiguous last dim; got "
                         f"{tuple(out.shape)} {out.dtype}.")
    num_splits = buffers.num_splits
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    ks = k_scale if is_int8 else k
    vs = v_scale if is_int8 else v
    s_strides = (k_scale.stride(0), k_scale.stride(1)) if is_int8 else (0, 0)
    args = (
        q, k, v, ks, vs, seq_lens, buffers.o_part, buffers.lse_part, out, buffers.counter,
        q if new_kv is None else new_kv, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        *s_strides,
        seq_lens.stride(0) if seq_lens.shape[0] == B else 0,
        H, num_splits, sm_scale * LOG2E, len_bucket(B * H, L), launch.prefetch_keys, int(launch.early_trigger),
    )
    grid = (num_splits, B * H)
    fixed = {"HEAD_DIM": D, "BLOCK_D": triton.next_power_of_2(D), "IS_INT8": is_int8, "NEW_ROW": new_kv is not None}
    if launch.pdl:  # one compiled variant for every PDL choice: what they differ in are runtime arguments
        if target_capability is None and q.is_cuda:
            target_capability = capability(device_index(q.device))
        if interpreting() or target_capability is None or not has_pdl(target_capability):
            raise ValueError("a PDL attention launch needs programmatic dependent launch (a GPU of compute "
                             "capability 9.0 or newer, not the interpreter); use PLAIN_LAUNCH here.")
        fixed.update(PDL=True, launch_pdl=True)
    if config is None and interpreting():
        config = INTERPRET_CONFIG
    if config is None:
        _split_kv_tuned[grid](*args, UPCAST=False, **fixed)
    else:
        config = {"USE_DOT": False, **config}
        _split_kv_kernel[grid](*args, UPCAST=interpreting(), **fixed, **config)


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    config: dict | None = None,
    buffers: SplitBuffers | None = None,
    launch: AttentionLaunch = PLAIN_LAUNCH,
    target_capability: tuple[int, int] | None = None,
    new_kv: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k[:len]^T * sm_scale) v[:len] for one query per (batch, head); returns (B, H, D) in q's dtype.

    The caller guarantees 1 <= seq_lens <= L (the lengths live on the device; checking them here
    would cost a synchronization every step). `config` pins {"BLOCK_N", "USE_DOT", "num_warps",
    "num_stages"} instead of autotuning. `buffers` (kept by a caller that calls again, such as a
    cache) saves allocating and zeroing them per call; they fix the split count.
    `target_capability`: the GPU's where the tensors cannot give it (the compile matrix's meta tensors).
    `new_kv`: the newest key and value, for the kernel to write into the cache (split_kv_attention).
    """
    B, H, D = q.shape
    if buffers is None:
        splits = num_splits or default_num_splits(B, H, k.shape[2], q.device)
        buffers = SplitBuffers(B, H, D, splits, q.device)
    elif num_splits is not None and num_splits != buffers.num_splits:
        raise ValueError(f"num_splits {num_splits} disagrees with the buffers' {buffers.num_splits}.")
    out = torch.empty_like(q)
    split_kv_attention(q, k, v, seq_lens, out, buffers, k_scale=k_scale, v_scale=v_scale, sm_scale=sm_scale,
                       config=config, launch=launch, target_capability=target_capability, new_kv=new_kv)
    return out


# --- reference --------------------------------------------------------------------------------

def reference_decode_attention(q, k, v, seq_lens, *, k_scale=None, v_scale=None, sm_scale=None) -> torch.Tensor:
    """The same maths in float64 on whatever device the inputs are on; int8 inputs are dequantized first."""
    B, H, D = q.shape
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    kf, vf = k.double(), v.double()
    if k.dtype == torch.int8:
        kf = kf * k_scale.double().unsqueeze(-1)
        vf = vf * v_scale.double().unsqueeze(-1)
    lens = seq_lens.to(torch.int64).expand(B).tolist()
    out = torch.empty((B, H, D), dtype=torch.float64, device=q.device)
    for b, n in enumerate(lens):
        s = torch.einsum("hd,hnd->hn", q[b].double(), kf[b, :, :n]) * sm_scale
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), vf[b, :, :n])
    return out


# --- the compile matrix (kernels/aot.py) -------------------------------------------------------

def compile_specs(target):
    """The split-KV kernel (its merge included) as the decode phase launches it on `target`: bfloat16
    where the GPU has it, float16 where it does not (T4), and the int8 cache; every autotuner
    config the autotuner may pick for that cache and GPU (no tensor-core dots before Ampere), at GPT-2's
    head_dim 64 and the microbenchmark's 128; at 64 also as the fused step may launch it, handed the
    newest key and value to write (new_kv)."""
    from ..aot import CompileSpec, meta

    dtype = torch.bfloat16 if target.bf16 else torch.float16
    # The fused step (head_dim 64) may launch attention as a programmatic dependent from Hopper on, and
    # hand it the newest row to write.
    launches = compiled_launches(has_pdl(target.capability))
    out = []
    for int8 in (False, True):
        for d in (64, 128):
            configs = tunable_configs(int8, target.capability, d)
            for cfg, how in ((c, h) for c in configs for h in (launches if d == 64 else (PLAIN_LAUNCH,))):
                new_row = how.new_kv

                def launch(d=d, int8=int8, cfg=cfg, how=how, new_row=new_row):
                    q = meta(4, 12, d, dtype=dtype)
                    cache = meta(4, 12, 2048, d, dtype=torch.int8 if int8 else dtype)
                    scale = meta(4, 12, 2048, dtype=SCALE_DTYPE) if int8 else None
                    lens = meta(1, dtype=torch.int32)
                    decode_attention(q, cache, cache, lens, k_scale=scale, v_scale=scale, launch=how,
                                     target_capability=target.capability, config=as_launch_config(cfg),
                                     new_kv=meta(2, 4, 12, d, dtype=dtype) if new_row else None)

                kind = "int8" if int8 else str(dtype).removeprefix("torch.")
                unroll, ahead = cfg.kwargs.get("UNROLL", 1), cfg.kwargs.get("AHEAD", 0)
                label = (f"{kind} d={d} BLOCK_N={cfg.kwargs['BLOCK_N']} "
                         f"{'dot' if cfg.kwargs['USE_DOT'] else 'fma'}/w{cfg.num_warps}/s{cfg.num_stages}"
                         + (f"/u{unroll}" if unroll > 1 else "") + (f"/a{ahead}" if ahead else "")
                         + (" pdl" if how.pdl else "") + (" new_kv" if new_row else ""))
                # Core: every config at GPT-2's head_dim for the float cache, the first of each kind for int8.
                first_of_kind = cfg is next(c for c in configs if c.kwargs["USE_DOT"] == cfg.kwargs["USE_DOT"])
                out.append(CompileSpec(label, launch, core=d == 64 and (not int8 or first_of_kind)))
    return out
