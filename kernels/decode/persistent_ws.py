"""Issue 44's persistent decode step in Gluon, warp-specialized, for Hopper (sm90).

One block per SM, two roles. A producer warp walks the SM's list of tiles (the host's plan,
kernels/decode/persistent_plan.py) and copies each tile's bytes into a ring of shared-memory stages
by TMA: a product tile's slice of the weights (16 output columns, the whole inner dimension, in boxes
of 256), or an attention tile's keys and values (64 keys a box). None of that depends on the
operation before, so the producer never waits on a counter: it stays up to the ring's depth ahead of
the consumers, streaming the next operations' weights while they wait. A consumer warpgroup then runs
each tile: it waits on the counter of the operation before (a bounded spin, arrival.check_waits names
what timed out), reads its input rows from L2 once per operation (the LayerNorm done on the spot),
multiplies the boxes as they land, and raises its own operation's counter.

What the plain-Triton persistent step (persistent_step.py) taught, and what this one does instead:
- its tiles split the inner dimension, so a product needed partials, a second counter and a read-back on
  its tail; here a tile holds the whole inner dimension (the ring, not registers, holds the bytes), so
  only the attention's chunks meet by a last arriver;
- its next tile lived in registers, one tile ahead and spilling; here the ring is 168-192 KiB deep;
- its polls were atomics on one thread behind block barriers; here every consumer thread polls with a
  volatile load and one acquire follows;
- tiles of the same operation on one SM wait once and read their input rows once.

Batch up to 4, head size 64 (GPT-2's), a bf16 or fp16 model and cache of that dtype, GELU tanh. Measured with
scripts/sweep_persistent.py (kernels/decode/notes.md, "persistent_ws"): correct, faster than the plain-Triton
persistent step beside it (so the decode phase's `persistent` variant runs this one where it can:
session.persistent_step_for), not yet faster than the graph step.
"""
from __future__ import annotations

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier

from ..gluon_compat import async_load, reinterpret, thread_barrier
from .persistent_launch import (ATTN, FC, FC2, HEAD, ITEM_SHIFT, KINDS, PROJ, QKV, OneKernelStep,
                                check_traceable)

ROWS = gl.constexpr(4)  # sequences a tile multiplies (the batch, padded)
BOX_N = gl.constexpr(16)  # output columns of a product tile: the rows of its [16, 256] boxes of W^T
BOX_K = gl.constexpr(256)  # inner columns a box holds
KEYS = gl.constexpr(64)  # keys an attention box holds ([64, 64] of one head)
CHUNK_BOXES = gl.constexpr(4)  # key boxes an attention tile holds: 256 keys
CHUNK = 256
MAX_ROWS = 4
HEAD_DIM = 64


@gluon.jit
def _now():
    """The GPU's global nanosecond timer (one clock for every SM), for the trace."""
    return gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _op_of(code, N_LAYER: gl.constexpr):
    o = code // ITEM_SHIFT
    t = code % ITEM_SHIFT
    kind = gl.where(o == N_LAYER * KINDS, HEAD, o % KINDS)
    return o, t, kind, o // KINDS


@gluon.jit
def _inner(kind, C: gl.constexpr):
    return gl.where(kind == FC2, 4 * C, C)


@gluon.jit
def _width(kind, C: gl.constexpr, V: gl.constexpr):
    return gl.where(kind == QKV, 3 * C, gl.where(kind == FC, 4 * C, gl.where(kind == HEAD, V, C)))


@gluon.jit
def _past_boxes(past, c):
    """Key boxes of chunk c that hold cached keys (positions below `past`); the newest key, written by this very
    step's qkv tiles, is read from the qkv rows instead, since the producer may have copied its row before."""
    n = gl.minimum(gl.maximum(past - c * (CHUNK_BOXES * KEYS), 0), CHUNK_BOXES * KEYS)
    return (n + KEYS - 1) // KEYS


@gluon.jit
def _boxes(kind, past, t, C: gl.constexpr, NCH: gl.constexpr):
    """Ring stages an item takes: a product's boxes along its inner dimension, an attention tile's key and value
    boxes."""
    n = (_inner(kind, C) + BOX_K - 1) // BOX_K
    return gl.where(kind == ATTN, 2 * _past_boxes(past, t % NCH), n)


# --- the producer ---------------------------------------------------------------------------------

@gluon.jit
def _box_origin(kind, layer, t, j, C: gl.constexpr, V: gl.constexpr, B: gl.constexpr, N_HEAD: gl.constexpr,
                NCH: gl.constexpr):
    """Where box j of a tile starts, for the producer's copy: a product's row of its stacked transposed weight and
    its column; an attention tile's row of the cache seen as (layers x B x H, CAP, D) and its
    first key (its boxes alternate keys and values)."""
    if kind == ATTN:
        bh = t // NCH
        r = (layer * B + bh // N_HEAD) * N_HEAD + bh % N_HEAD
        c = (t % NCH) * (CHUNK_BOXES * KEYS) + (j // 2) * KEYS
    else:
        r = gl.where(kind == HEAD, 0, layer * _width(kind, C, V)) + t * BOX_N
        c = j * BOX_K
    return r, c


@gluon.jit
def _producer(descs, ring, ready, empty, Work, Count, work_stride, Lens, N_LAYER: gl.constexpr, N_HEAD: gl.constexpr,
              C: gl.constexpr, V: gl.constexpr, B: gl.constexpr, NCH: gl.constexpr, STAGES: gl.constexpr):
    """The copies, item by item in the list's order, into the ring. (Asking L2 for the boxes ahead of the copies,
    so that the DRAM streams while the ring is full, made the step slower: kernels/decode/notes.md.)"""
    d_qkv, d_proj, d_fc, d_out, d_head, d_k, d_v = descs
    NBYTES: gl.constexpr = d_qkv.block_type.nbytes
    KV_LAYOUT: gl.constexpr = d_k.layout
    KV_DTYPE: gl.constexpr = d_k.dtype
    past = gl.load(Lens) - 1
    base = Work + gl.program_id(0) * work_stride
    count = gl.load(Count + gl.program_id(0))
    it = 0
    for i in range(count):
        o, t, kind, layer = _op_of(gl.load(base + i), N_LAYER)
        for j in range(_boxes(kind, past, t, C, NCH)):
            slot = it % STAGES
            mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(slot), NBYTES)
            dest = ring.index(slot)
            r, c = _box_origin(kind, layer, t, j, C, V, B, N_HEAD, NCH)
            if kind == QKV:
                async_load(d_qkv, [r, c], ready.index(slot), dest)
            elif kind == PROJ:
                async_load(d_proj, [r, c], ready.index(slot), dest)
            elif kind == FC:
                async_load(d_fc, [r, c], ready.index(slot), dest)
            elif kind == FC2:
                async_load(d_out, [r, c], ready.index(slot), dest)
            elif kind == HEAD:
                async_load(d_head, [r, c], ready.index(slot), dest)
            else:
                kv = reinterpret(dest, KV_DTYPE, [1, KEYS, KEYS], KV_LAYOUT)
                if j % 2 == 0:
                    async_load(d_k, [r, c, 0], ready.index(slot), kv)
                else:
                    async_load(d_v, [r, c, 0], ready.index(slot), kv)
            it += 1


# --- the consumers ---------------------------------------------------------------------------------

@gluon.jit
def _wait(OpCount, Targets, dep, Status, max_polls):
    """Spin until operation `dep`'s counter reaches its target (volatile loads on every thread, no barrier per
    poll), then one acquire. A wait that gives up records dep + 1 in Status and goes on, so the launch ends.
    (Polling with acquires instead, which saves the last round trip, measured the same: notes.md.)"""
    target = gl.load(Targets + dep)
    seen = gl.load(OpCount + dep, volatile=True)
    polls = 1
    while (seen < target) & (polls < max_polls):
        seen = gl.load(OpCount + dep, volatile=True)
        polls += 1
    if seen < target:
        gl.atomic_cas(Status, 0, dep + 1, sem="relaxed", scope="gpu")
    _acquire(OpCount + dep)


@gluon.jit
def _acquire(ptr):
    """An acquire load at GPU scope, after which the writes of every tile that raised the counter are visible (it
    drops the SM's L1 lines). Written as PTX: an atomic add of 0 whose result is unused, the Triton form, is removed
    by the compiler, and with it the acquire."""
    return gl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _rows_to_smem(Src, K: gl.constexpr, x_smem, B: gl.constexpr, layout: gl.constexpr):
    """An activation's rows [B, K] from global memory into x_smem's boxes, unchanged (zero past K and B)."""
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BOX_K, layout=gl.SliceLayout(0, layout))
    for j in gl.static_range((K + BOX_K - 1) // BOX_K):
        k = j * BOX_K + cols
        mask = (rows[:, None] < B) & (k[None, :] < K)
        v = gl.load(Src + rows[:, None] * K + k[None, :], mask=mask, other=0.0)
        x_smem.index(j).store(v)


@gluon.jit
def _layer_norm_to_smem(Src, K: gl.constexpr, W, Bias, eps, x_smem, B: gl.constexpr, layout: gl.constexpr):
    """LayerNorm of the rows [B, K] into x_smem (two passes over the raw rows kept there). The parameters are read
    after the statistics (reading them with the rows, as [4, 256] tiles, measured slower: notes.md)."""
    NB: gl.constexpr = (K + BOX_K - 1) // BOX_K
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BOX_K, layout=gl.SliceLayout(0, layout))
    _rows_to_smem(Src, K, x_smem, B, layout)
    total = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, layout))
    for j in gl.static_range(NB):
        total += gl.sum(x_smem.index(j).load(layout).to(gl.float32), axis=1)
    mean = total / K
    sq = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, layout))
    for j in gl.static_range(NB):
        k = j * BOX_K + cols
        d = gl.where((k < K)[None, :], x_smem.index(j).load(layout).to(gl.float32) - mean[:, None], 0.0)
        sq += gl.sum(d * d, axis=1)
    rstd = 1.0 / gl.sqrt(sq / K + eps)
    for j in gl.static_range(NB):
        k = j * BOX_K + cols
        w = gl.load(W + k, mask=k < K, other=0.0).to(gl.float32)[None, :]
        b = gl.load(Bias + k, mask=k < K, other=0.0).to(gl.float32)[None, :]
        x = x_smem.index(j).load(layout).to(gl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w + b
        x_smem.index(j).store(y.to(x_smem.dtype))


@gluon.jit
def _gelu_tanh(y):
    u = 0.7978845608028654 * (y + 0.044715 * y * y * y)
    t = 1.0 - 2.0 / (gl.exp(2.0 * u) + 1.0)
    return 0.5 * y * (1.0 + t)


@gluon.jit
def _product_tile(ring, ready, empty, it, x_smem, n_boxes: gl.constexpr, STAGES: gl.constexpr, L3: gl.constexpr):
    """out[b, n] = sum_k x[b, k] W^T[n, k] over the tile's boxes as they land; returns ([ROWS, BOX_N], it)."""
    acc = gl.zeros([ROWS, BOX_N, BOX_K], gl.float32, L3)
    for j in range(n_boxes):
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        w = ring.index(slot).load(gl.SliceLayout(0, L3)).to(gl.float32)
        mbarrier.arrive(empty.index(slot))
        x = x_smem.index(j).load(gl.SliceLayout(1, L3)).to(gl.float32)
        acc += gl.expand_dims(w, 0) * gl.expand_dims(x, 1)
        it += 1
    return gl.sum(acc, axis=2), it


@gluon.jit
def _raise(OpCount, o, n):
    """n finished tiles (or merged heads) of operation o: every thread's stores before the counter's release. Once
    an SM per operation, when its list moves on, so a tile's own tail holds no fence."""
    thread_barrier()
    gl.atomic_add(OpCount + o, n, sem="release", scope="gpu")


@gluon.jit
def _attention_tile(ring, ready, empty, it, t, past, QKVbuf, Attn, PartO, PartML, PairCount, qk_scale,
                    N_HEAD: gl.constexpr, C: gl.constexpr, NCH: gl.constexpr, NCH_P: gl.constexpr, STAGES: gl.constexpr,
                    LK: gl.constexpr):
    """One head of one sequence over one chunk of 256 cached keys (plus the newest key, in the chunk that holds
    its position), as a partial softmax; the last chunk of the head to arrive merges them (then 1 is returned
    beside the ring position, else 0)."""
    bh = t // NCH
    c = t % NCH
    b = bh // N_HEAD
    h = bh % N_HEAD
    d = gl.arange(0, KEYS, layout=gl.SliceLayout(0, LK))
    key = gl.arange(0, KEYS, layout=gl.SliceLayout(1, LK))
    row = QKVbuf + b * 3 * C + h * KEYS
    q = gl.load(row + d).to(gl.float32) * qk_scale
    newest = c == past // (CHUNK_BOXES * KEYS)
    kn = gl.load(row + C + d, mask=(d < KEYS) & newest, other=0.0).to(gl.float32)
    vn = gl.load(row + 2 * C + d, mask=(d < KEYS) & newest, other=0.0).to(gl.float32)
    # A running maximum, sum and output per key row of the box: every update is elementwise, and the rows meet
    # once, after the last box (a softmax over the whole box per box took a reduction across the warps each).
    RING_LAYOUT: gl.constexpr = ring.layout
    RING_DTYPE: gl.constexpr = ring.dtype
    m_r = gl.full([KEYS], -1.0e30, gl.float32, gl.SliceLayout(1, LK))
    l_r = gl.zeros([KEYS], gl.float32, gl.SliceLayout(1, LK))
    acc_r = gl.zeros([KEYS, KEYS], gl.float32, LK)
    for j in range(_past_boxes(past, c)):
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        k = reinterpret(ring.index(slot), RING_DTYPE, [KEYS, KEYS], RING_LAYOUT).load(LK).to(gl.float32)
        mbarrier.arrive(empty.index(slot))
        s = gl.sum(k * q[None, :], axis=1)
        s = gl.where(c * (CHUNK_BOXES * KEYS) + j * KEYS + key < past, s, float("-inf"))
        m_new = gl.maximum(m_r, s)
        alpha = gl.exp2(m_r - m_new)
        p = gl.exp2(s - m_new)
        l_r = l_r * alpha + p
        it += 1
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        v = reinterpret(ring.index(slot), RING_DTYPE, [KEYS, KEYS], RING_LAYOUT).load(LK).to(gl.float32)
        mbarrier.arrive(empty.index(slot))
        acc_r = acc_r * alpha[:, None] + v * p[:, None]
        m_r = m_new
        it += 1
    m = gl.max(m_r, axis=0)
    w_r = gl.exp2(m_r - m)
    l = gl.sum(l_r * w_r, axis=0)
    acc = gl.sum(acc_r * w_r[:, None], axis=0)
    if newest:
        s_new = gl.sum(kn * q, axis=0)
        m_new = gl.maximum(m, s_new)
        alpha = gl.exp2(m - m_new)
        p_new = gl.exp2(s_new - m_new)
        l = l * alpha + p_new
        acc = acc * alpha + p_new * vn
        m = m_new
    part = bh * NCH + c
    gl.store(PartO + part * KEYS + d, acc)
    gl.store(PartML + 2 * part, m)
    gl.store(PartML + 2 * part + 1, l)
    thread_barrier()
    if gl.atomic_add(PairCount + bh, 1, sem="acq_rel", scope="gpu") == NCH - 1:
        chunks = gl.arange(0, NCH_P, layout=gl.SliceLayout(1, LK))
        mask_c = chunks < NCH
        at = bh * NCH + chunks
        ms = gl.load(PartML + 2 * at, mask=mask_c, other=-1.0e30, cache_modifier=".cg")
        ls = gl.load(PartML + 2 * at + 1, mask=mask_c, other=0.0, cache_modifier=".cg")
        os = gl.load(PartO + at[:, None] * KEYS + d[None, :], mask=mask_c[:, None], other=0.0, cache_modifier=".cg")
        top = gl.max(ms, axis=0)
        wgt = gl.exp2(ms - top)
        out = gl.sum(os * wgt[:, None], axis=0) / gl.sum(ls * wgt, axis=0)
        gl.store(Attn + b * C + h * KEYS + d, out.to(Attn.dtype.element_ty))
        gl.store(PairCount + bh, 0)
        merged = 1
    else:
        merged = 0
    return it, merged


@gluon.jit
def _consumer(ring, ready, empty, x_smem, Work, Count, work_stride, Targets, OpCount, PairCount, Status,
              max_polls, LnP, BiasP, X, QKVbuf, Attn, Hbuf, CacheK, CacheV, Logits, Lens, PartO, PartML, Trace, eps,
              qk_scale, N_LAYER: gl.constexpr, N_HEAD: gl.constexpr, C: gl.constexpr, V: gl.constexpr,
              B: gl.constexpr, CAP: gl.constexpr, NCH: gl.constexpr, NCH_P: gl.constexpr, STAGES: gl.constexpr,
              TRACE: gl.constexpr):
    W: gl.constexpr = gl.num_warps()  # 4 or 8
    # [rows, output columns, inner columns]: a warp holds 16 / W of a box's rows, its lanes 8 columns each.
    L3: gl.constexpr = gl.BlockedLayout([ROWS, 1, 8], [1, 1, 32], [1, W, 1], [2, 1, 0])
    LX: gl.constexpr = gl.SliceLayout(1, L3)
    LO: gl.constexpr = gl.SliceLayout(2, L3)
    LK: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [W, 1], [1, 0])
    # The LayerNorm's rows: one owner per element (LX holds every row in every warp, and a warp that wrote its
    # normalized values back while another still read the raw ones made the result depend on timing).
    LR: gl.constexpr = gl.BlockedLayout([1, 32 // W], [1, 32], [4, W // 4], [1, 0])
    past = gl.load(Lens) - 1
    base = Work + gl.program_id(0) * work_stride
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, LO))
    cols = gl.arange(0, BOX_N, layout=gl.SliceLayout(0, LO))
    it = 0
    prev = -1
    done = 0  # tiles (merged heads) of operation prev finished here and not yet counted
    stamps = Trace + (gl.program_id(0) * work_stride) * 3
    for i in range(gl.load(Count + gl.program_id(0))):
        o, t, kind, layer = _op_of(gl.load(base + i), N_LAYER)
        if TRACE:
            gl.store(stamps + 3 * i, _now())
        if o != prev:
            if done > 0:
                _raise(OpCount, prev, done)
            done = 0
            if o > 0:
                _wait(OpCount, Targets, o - 1, Status, max_polls)
            # A product's input rows, read once for the operation's tiles on this SM, once no warp still reads the
            # last operation's.
            thread_barrier()
            if (kind == QKV) | (kind == FC) | (kind == HEAD):
                # LnP holds each layer's (ln1 weight, ln1 bias, ln2 weight, ln2 bias), then the final pair.
                ln = LnP + gl.where(kind == HEAD, N_LAYER * 4 * C, layer * 4 * C + gl.where(kind == FC, 2 * C, 0))
                _layer_norm_to_smem(X, C, ln, ln + C, eps, x_smem, B, LR)
            elif kind == PROJ:
                _rows_to_smem(Attn, C, x_smem, B, LR)
            elif kind == FC2:
                _rows_to_smem(Hbuf, 4 * C, x_smem, B, LR)
            thread_barrier()
        prev = o
        if TRACE:
            gl.store(stamps + 3 * i + 1, _now())
        if kind == ATTN:
            it, merged = _attention_tile(ring, ready, empty, it, t, past, QKVbuf, Attn, PartO, PartML, PairCount,
                                         qk_scale, N_HEAD, C, NCH, NCH_P, STAGES, LK)
            done += merged
        else:
            # The epilogue's loads first, so that their round trips overlap the boxes' arrival.
            n = t * BOX_N + cols
            N = _width(kind, C, V)
            mask = (rows[:, None] < B) & (n[None, :] < N)
            bias_at = gl.where(kind == QKV, 0, gl.where(kind == PROJ, 3 * C, gl.where(kind == FC, 4 * C, 8 * C)))
            bias = gl.load(BiasP + layer * 9 * C + bias_at + n, mask=(n < N) & (kind != HEAD), other=0.0)
            residual = (kind == PROJ) | (kind == FC2)
            x_at = X + rows[:, None] * C + n[None, :]
            res = gl.load(x_at, mask=mask & residual, other=0.0).to(gl.float32)
            if kind == FC2:
                y, it = _product_tile(ring, ready, empty, it, x_smem, (4 * C + BOX_K - 1) // BOX_K, STAGES, L3)
            else:
                y, it = _product_tile(ring, ready, empty, it, x_smem, (C + BOX_K - 1) // BOX_K, STAGES, L3)
            y = y + bias.to(gl.float32)[None, :]
            if kind == HEAD:
                gl.store(Logits + rows[:, None] * V + n[None, :], y, mask=mask)
            elif kind == QKV:
                gl.store(QKVbuf + rows[:, None] * 3 * C + n[None, :], y.to(QKVbuf.dtype.element_ty), mask=mask)
                part = n // C
                hd = n % C
                at = ((layer * B + rows[:, None]) * N_HEAD + (hd // KEYS)[None, :]) * CAP + past
                at = at * KEYS + (hd % KEYS)[None, :]
                gl.store(CacheK + at, y.to(CacheK.dtype.element_ty), mask=mask & (part == 1)[None, :])
                gl.store(CacheV + at, y.to(CacheV.dtype.element_ty), mask=mask & (part == 2)[None, :])
            # The product's output is rounded to the model's dtype before the GELU and before the residual add, as
            # the graph step and the unfused model round it: without it this step drifted from the graph step over
            # gpt2-xl's 48 layers (98.79% agreement outside near-ties on the H200, run h200-20261206a).
            elif kind == FC:
                y = y.to(Hbuf.dtype.element_ty).to(gl.float32)
                gl.store(Hbuf + rows[:, None] * 4 * C + n[None, :], _gelu_tanh(y).to(Hbuf.dtype.element_ty), mask=mask)
            else:
                y = y.to(X.dtype.element_ty).to(gl.float32)
                gl.store(x_at, (res + y).to(X.dtype.element_ty), mask=mask)
            done += 1
        if TRACE:
            gl.store(stamps + 3 * i + 2, _now())
    if done > 0:
        _raise(OpCount, prev, done)


@gluon.jit
def _persistent_ws_kernel(d_qkv, d_proj, d_fc, d_out, d_head, d_k, d_v, Work, Count, work_stride, Targets, OpCount,
                          PairCount, Status, max_polls, LnP, BiasP, X, QKVbuf, Attn, Hbuf, CacheK, CacheV, Logits,
                          Lens, PartO, PartML, Trace, eps, qk_scale,
                          N_LAYER: gl.constexpr, N_HEAD: gl.constexpr, C: gl.constexpr, V: gl.constexpr,
                          B: gl.constexpr, CAP: gl.constexpr, NCH: gl.constexpr, NCH_P: gl.constexpr,
                          STAGES: gl.constexpr, TRACE: gl.constexpr = False, PRODUCER_REGS: gl.constexpr = 40):
    dtype: gl.constexpr = d_qkv.dtype
    ring = gl.allocate_shared_memory(dtype, [STAGES, BOX_N, BOX_K], d_qkv.layout)
    x_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
    x_smem = gl.allocate_shared_memory(dtype, [(4 * C + BOX_K - 1) // BOX_K, ROWS, BOX_K], x_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    thread_barrier()
    descs = (d_qkv, d_proj, d_fc, d_out, d_head, d_k, d_v)
    gl.warp_specialize([
        (_consumer, (ring, ready, empty, x_smem, Work, Count, work_stride, Targets, OpCount, PairCount,
                     Status, max_polls, LnP, BiasP, X, QKVbuf, Attn, Hbuf, CacheK, CacheV, Logits, Lens, PartO,
                     PartML, Trace, eps, qk_scale, N_LAYER, N_HEAD, C, V, B, CAP, NCH, NCH_P, STAGES, TRACE)),
        (_producer, (descs, ring, ready, empty, Work, Count, work_stride, Lens, N_LAYER, N_HEAD, C, V, B, NCH,
                     STAGES)),
    ], [1], [PRODUCER_REGS])


# --- the host side ------------------------------------------------------------------------------

SMEM_SLACK = 2048  # bytes past the ring and the rows: the mbarriers and what the compiler adds
MAX_STAGES = 24


def stages_for(n_embd: int, smem_per_block: int) -> int:
    """Ring stages that fit an SM beside the input rows (4 x 4C values): 24 at gpt2, 21 at gpt2-xl on an H100."""
    box = BOX_N.value * BOX_K.value * 2
    rows = math.ceil(4 * n_embd / BOX_K.value) * MAX_ROWS * BOX_K.value * 2
    return max(2, min(MAX_STAGES, (smem_per_block - rows - SMEM_SLACK) // box))


def tile_operations(args, batch: int, capacity: int, elem_bytes: int):
    """The step's operations as this kernel tiles them (16 output columns of a product over its whole inner
    dimension; 256 keys of one head of one sequence), with the bytes each tile streams, for plan_step. An
    operation's counter target (`finishers`) is its tiles, or for the attention its heads (each head's merge
    raises it)."""
    from .persistent_plan import KernelOp

    C = args.n_embd
    chunks = math.ceil(capacity / CHUNK)

    def product(name, k, n, role):
        tiles = math.ceil(n / BOX_N.value)
        return KernelOp(name, tiles, math.ceil(k / BOX_K.value) * BOX_N.value * BOX_K.value * elem_bytes, tiles, role)

    ops = []
    for layer in range(args.n_layer):
        heads = batch * args.n_head
        ops += [product(f"layer {layer} qkv", C, 3 * C, "qkv"),
                KernelOp(f"layer {layer} attention", heads * chunks, 2 * CHUNK * args.head_dim * elem_bytes, heads,
                         "attention"),
                product(f"layer {layer} projection", C, C, "proj"),
                product(f"layer {layer} fc", C, 4 * C, "fc"),
                product(f"layer {layer} second projection", 4 * C, C, "out")]
    return ops + [product("logits", C, args.vocab_size, "head")]


def unsupported_reason(batch: int | None, device) -> str | None:
    """Why this step cannot run `batch` sequences on `device`, or None. The meta device passes: it is how the
    kernel is compiled for sm90 without a GPU (kernels/aot.py)."""
    device = torch.device(device)
    if device.type == "cuda":
        from . import fused_linear as fl

        major, minor = fl.device_facts(device).capability
        if major != 9:
            return (f"the warp-specialized persistent step is written for compute capability 9.0 (TMA, Gluon; this "
                    f"GPU has {major}.{minor}); the graph step runs here")
    elif device.type != "meta":
        return "the warp-specialized persistent step needs an NVIDIA GPU of compute capability 9.0 (TMA, Gluon)"
    if batch is not None and batch > MAX_ROWS:
        return (f"the warp-specialized persistent step multiplies at most {MAX_ROWS} sequences; batch {batch} needs "
                "the graph step")
    return None


def _descriptor(t: torch.Tensor, block: list[int]):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=t.element_size() * 8, rank=len(block))
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


class WarpSpecializedStep(OneKernelStep):
    """GPT-2's decode step as the embedding, one warp-specialized persistent kernel and (the loop's) argmax.
    Packs a transposed copy of the block weights (the logits read the model's own [V, C] matrix)."""

    impl = "persistent-ws"
    unsupported_reason = staticmethod(unsupported_reason)
    # Its roles are operations inside one kernel: the decode phase reads them from a traced step.
    roles_by_trace = True

    def __init__(self, model, cache, batch: int, stages: int | None = None, max_polls: int = 1 << 22,
                 trace: bool = False, consumer_warps: int = 4, per_op_cap: bool = True):
        """consumer_warps: one warpgroup of consumers or two (two measured no faster). per_op_cap: no SM takes more
        than its even share of an operation's tiles (persistent_plan.plan_step)."""
        from . import fused_linear as fl
        from .persistent_plan import check_plan, plan_step

        a = model.args
        why = unsupported_reason(batch, model.device)
        if why:
            raise ValueError(why + ".")
        if a.head_dim != HEAD_DIM:
            raise ValueError(f"the warp-specialized step's attention boxes are {HEAD_DIM} wide; head_dim {a.head_dim}.")
        if model.dtype not in (torch.bfloat16, torch.float16) or cache.k.dtype != model.dtype:
            raise ValueError(f"the warp-specialized step reads a 16-bit model and a cache of its dtype; got "
                             f"{model.dtype} and a {cache.k.dtype} cache.")
        if a.n_embd % 8:
            raise ValueError(f"the copy engine reads rows of a 16-byte multiple: n_embd {a.n_embd} must be a multiple "
                             "of 8 for the warp-specialized step.")
        if model.gelu_approx != "tanh":
            raise ValueError(f"the warp-specialized step implements GELU tanh only, not {model.gelu_approx!r}.")
        if trace:
            check_traceable(model.device)
        gpu = fl.device_facts(model.device)
        dev, C, L = model.device, a.n_embd, a.n_layer
        self.model, self.cache, self.batch = model, cache, batch
        self.capacity = cache.k.shape[3]
        self.stages = stages or stages_for(C, gpu.smem_per_block)
        self.max_polls = max_polls
        if consumer_warps not in (4, 8):
            raise ValueError(f"the consumer is one or two warpgroups: consumer_warps 4 or 8, not {consumer_warps}.")
        self.consumer_warps = consumer_warps
        ops = tile_operations(a, batch, self.capacity, model.dtype.itemsize)
        self.set_lists(ops, plan_step(ops, gpu.sm_count, per_op_cap=per_op_cap), trace, dev)
        check_plan(self.plan)
        blocks = model.blocks
        self.w_qkv = torch.cat([b.attn_w.t() for b in blocks]).contiguous()
        self.w_proj = torch.cat([b.proj_w.t() for b in blocks]).contiguous()
        self.w_fc = torch.cat([b.fc_w.t() for b in blocks]).contiguous()
        self.w_out = torch.cat([b.out_w.t() for b in blocks]).contiguous()
        self.ln = torch.cat([p for b in blocks for p in (b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b)]
                            + [model.lnf_w, model.lnf_b]).contiguous()
        self.bias = torch.cat([p for b in blocks for p in (b.attn_b, b.proj_b, b.fc_b, b.out_b)]).contiguous()
        box = [BOX_N.value, BOX_K.value]
        H = a.n_head
        kv = [1, KEYS.value, KEYS.value]
        self.descs = [_descriptor(w, box) for w in (self.w_qkv, self.w_proj, self.w_fc, self.w_out, model.lm_head)]
        self.descs += [_descriptor(cache.k.view(L * batch * H, self.capacity, a.head_dim), kv),
                       _descriptor(cache.v.view(L * batch * H, self.capacity, a.head_dim), kv)]
        dt = model.dtype
        self.x = torch.empty((batch, C), device=dev, dtype=dt)
        self.qkv = torch.empty((batch, 3 * C), device=dev, dtype=dt)
        self.attn = torch.empty((batch, C), device=dev, dtype=dt)
        self.h = torch.empty((batch, 4 * C), device=dev, dtype=dt)
        self.logits = torch.empty((batch, a.vocab_size), device=dev, dtype=torch.float32)
        self.chunks = math.ceil(self.capacity / CHUNK)
        self.part_o = torch.empty((batch * H * self.chunks * KEYS.value,), device=dev, dtype=torch.float32)
        self.part_ml = torch.empty((batch * H * self.chunks * 2,), device=dev, dtype=torch.float32)
        self.op_count = torch.zeros((len(ops),), device=dev, dtype=torch.int32)
        self.pair_count = torch.zeros((batch * H,), device=dev, dtype=torch.int32)
        self.status = torch.zeros((1,), device=dev, dtype=torch.int32)
        self.stats = fl.RowStats.buffer(batch, 1, dev)  # the embedding kernel leaves statistics nobody reads here
        self.gpu = gpu
        self._resident_checked = False

    def handshake_counters(self) -> tuple:
        return (self.pair_count,)

    def _args(self, lens):
        a = self.model.args
        return (*self.descs, self.work, self.count, self.work.stride(0), self.targets, self.op_count, self.pair_count,
                self.status, self.max_polls, self.ln, self.bias, self.x, self.qkv, self.attn, self.h, self.cache.k,
                self.cache.v, self.logits, lens, self.part_o, self.part_ml, self.trace, a.layer_norm_epsilon,
                1.4426950408889634 / math.sqrt(a.head_dim))

    def _meta(self) -> dict:
        a = self.model.args
        return dict(N_LAYER=a.n_layer, N_HEAD=a.n_head, C=a.n_embd, V=a.vocab_size, B=self.batch, CAP=self.capacity,
                    NCH=self.chunks, NCH_P=triton.next_power_of_2(self.chunks), STAGES=self.stages,
                    TRACE=self.trace.dim() == 3, num_warps=self.consumer_warps)

    def _check_resident(self, lens) -> None:
        """Compile first and refuse a grid the GPU cannot hold at once (its blocks wait on one another)."""
        kernel = _persistent_ws_kernel.warmup(*self._args(lens), grid=(self.gpu.sm_count,), **self._meta())
        self.check_resident_kernel(kernel, self.gpu.sm_count, self.consumer_warps + 1)  # and the producer warp

    def __call__(self, history, pos, lens):
        from .gpt2_fused import embed

        m = self.model
        embed(history, pos, m.wte, m.wpe, self.x, self.stats)
        self.op_count.zero_()
        if self.x.is_cuda and not self._resident_checked:
            self._check_resident(lens)
        _persistent_ws_kernel[(self.gpu.sm_count,)](*self._args(lens), **self._meta())
        return self.logits


# --- the compile matrix (kernels/aot.py) ------------------------------------------------------

def compile_specs(target):
    """The kernel as the sweep launches it, on meta tensors: each model at batch 4 over a 1024-position bf16
    cache, one and two consumer warpgroups, gpt2 traced; sm90 only. Core: gpt2, one warpgroup."""
    from ..aot import CompileSpec
    from .gpt2 import CACHES, GPT2, PRESETS

    if target.capability != (9, 0):
        return []
    rows = [(name, dict(consumer_warps=w)) for name in ("gpt2", "gpt2-xl") for w in (4, 8)]
    rows += [("gpt2", dict(trace=True))]
    specs = []
    for name, options in rows:
        def launch(a=PRESETS[name], options=options):
            model = GPT2.zeros(a, "meta", torch.bfloat16)
            cache = CACHES["bf16"](a, 4, a.n_positions, "meta", torch.bfloat16)
            step = WarpSpecializedStep(model, cache, 4, **options)
            history = torch.empty((4, a.n_positions + 1), device="meta", dtype=torch.int64)
            step(history, torch.empty((1,), device="meta", dtype=torch.int64),
                 torch.empty((1,), device="meta", dtype=torch.int32))

        label = " ".join(f"{k}={v}" for k, v in options.items())
        specs.append(CompileSpec(f"bf16 {name} B=4 {label}", launch, tensor_cores=False,
                                 core=name == "gpt2" and options == dict(consumer_warps=4)))
    return specs
