"""Issue 44's persistent decode step: the whole of a GPT-2 step after the embedding in one launch.

One block per SM walks its own list of tiles (kernels/decode/persistent_plan.py deals them) in
operation order: per layer the qkv product with the cache write, the attention, the projection with
the residual, the fc product with GELU, the second projection with the residual; then the logits.
A tile waits on the counter of the operation before it (arrival.wait_for, bounded) instead of on a
kernel boundary, and raises its own operation's counter when done.

What a tile streams does not depend on the operation before it (a product's weight slice; an
attention tile's chunk of the cache, except the newest row, which this very step writes), so each
block loads its next tile's bytes into registers before it waits and computes the current one: the
DRAM keeps streaming across the boundary between operations, where the graph step of today ends a
kernel and starts another. Every tile streams one register block of the same shape, [SLICE, BLOCK_N]:
a slice of a product's weights (packed per tile on the host, so the block is one contiguous read),
or a chunk of SLICE / 2 keys followed by as many values. This is the plain-Triton form of the design:
the block itself stands in for the producer warps and their shared-memory ring of a warp-specialized
kernel, one tile deep.

Products split along the inner dimension (a tile holds at most SLICE * CHUNKS rows: its streamed block,
then CHUNKS - 1 more loaded in a loop); the last of a column's splits to arrive adds them in a fixed order
and applies the epilogue. The attention splits each head's
cache into chunks the same way, merged by the last chunk to arrive. A LayerNorm's statistics come in
one load from what the writer of x left per column block (the fused step's RowStats layout), so no
tile passes over a whole row.

Blocks that wait on counters deadlock unless all are resident at once: the grid is the SM count times
blocks_per_sm, checked against what the compiled kernel leaves room for. A wait that times out
records which operation it waited for, the block stops, and `check` names it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ..common import interpreting
from . import fused_linear as fl
from .arrival import arrive, reset, wait_for
from .fused_linear import _combined_stats, _gelu, _store_tile_stats
from .gpt2_fused import embed
from .persistent_launch import ATTN, FC, FC2, HEAD, ITEM_SHIFT, KINDS, PROJ, QKV, OneKernelStep, check_traceable
from .persistent_plan import KernelOp, check_plan, plan_step

MAX_ROWS = 16  # sequences a tile multiplies at once (one row block of tl.dot)
# Partials a finishing split reads per round trip (unrolled): 8 [16, 64] fp32 tiles are 32 registers a thread
# at 8 warps; the fused step's products read theirs eight at a time too (kernels/decode/fused_linear.py).
SUMS = tl.constexpr(8)


@dataclass(frozen=True)
class PersistentTiling:
    """The shape of every tile's register block, and how long a wait may spin."""

    block_n: int = 64  # output columns of a product tile; also the widest head the attention takes
    # Inner rows of the register block a tile streams; an attention tile's chunk is slice_k // 2 keys.
    slice_k: int = 256
    # Register blocks of inner rows a product tile runs through in a loop: the first streamed ahead of the wait
    # like any tile's block, the rest loaded in the loop. A product splits along K only past slice_k * chunks
    # rows, so chunks=4 (1,024 rows) leaves gpt2's K=768 products unsplit: no partials, no column counter.
    chunks: int = 1
    num_warps: int = 4
    # Blocks (lists) per SM: more hide one another's chains of round trips, if registers leave room. Two
    # blocks of 4 warps ran gpt2's step in 0.61 ms against one block of 8 warps' 0.77 (H200, 2026-12-03).
    blocks_per_sm: int = 2
    # Reads of a counter before a wait gives up: about a microsecond each on an H200, so seconds in all,
    # far past any wait a working schedule makes.
    max_polls: int = 1 << 22

    @property
    def chunk(self) -> int:
        return self.slice_k // 2

    @property
    def tile_k(self) -> int:
        """Inner rows a product tile covers (its split of K)."""
        return self.slice_k * self.chunks


# What scripts/sweep_persistent.py compares, each measured on the H200 (2026-12-03, batch 4, context 1000;
# kernels/decode/notes.md): two blocks an SM of 4 warps with 256-row slices (the default: 255 registers and
# 208-240 bytes spilled a thread on sm90 with Triton 3.6.0; gpt2 0.57 ms, gpt2-xl 5.88), one block of 8 warps
# (about 250 registers, no spills; 0.75 and 7.91), two blocks with 128-row slices (about 240, no spills; 0.75 and
# 7.88), and product tiles that loop over their rows (chunks), so that gpt2's K=768 products do not split:
# 128-row blocks, eight a tile (241 registers, no spills; 1.23 and 7.10), and 256-row blocks, four a tile, one
# 8-warp block an SM (255, no spills; 1.02 and 7.34). Only a looped tile's first block streams ahead of its
# wait, so it lost by more than its saved round trips. Three blocks an SM do not fit even with 128-row slices
# (the launch is refused by check_resident).
CANDIDATE_TILINGS = (PersistentTiling(), PersistentTiling(num_warps=8, blocks_per_sm=1),
                     PersistentTiling(slice_k=128), PersistentTiling(slice_k=128, chunks=8),
                     PersistentTiling(chunks=4, num_warps=8, blocks_per_sm=1))


# --- the kernel -------------------------------------------------------------------------------

@triton.jit
def _now():
    """The GPU's global nanosecond timer, for the trace (one clock for every SM)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _kind_of(o, N_LAYER: tl.constexpr):
    return tl.where(o == N_LAYER * KINDS, HEAD, o % KINDS)


@triton.jit
def _product_shape(kind, C: tl.constexpr, V: tl.constexpr, SLICE: tl.constexpr):
    """(inner size K, output width N, splits of K) of a product kind."""
    K = tl.where(kind == FC2, 4 * C, C)
    N = tl.where(kind == QKV, 3 * C, tl.where(kind == FC, 4 * C, tl.where(kind == HEAD, V, C)))
    return K, N, (K + SLICE - 1) // SLICE


@triton.jit
def _kv_offsets(o, t, rows, cols, Lens, N_HEAD: tl.constexpr, D: tl.constexpr, CAP,
                NCH, CHUNK: tl.constexpr, B: tl.constexpr):
    """An attention tile's cache rows: element offsets into the (layers, B, H, CAP, D) key and value
    tensors of `rows` (keys, then values) and `cols`, which rows are values, and the keys' positions."""
    layer = (o // KINDS).to(tl.int64)
    bh = t // NCH
    key = (t % NCH) * CHUNK + rows % CHUNK
    off = (((layer * B + bh // N_HEAD) * N_HEAD + bh % N_HEAD) * CAP + key[:, None]) * D + cols[None, :]
    return off, rows >= CHUNK, key


@triton.jit
def _tile_weights(Wp, WOff, o, t, K, S, SLICE: tl.constexpr, KT: tl.constexpr, BLOCK_N: tl.constexpr):
    """Where product tile t's weights start: _pack lays a column block's rows out together, K padded to a
    multiple of SLICE, and tile t is split t % S (of KT rows) of column block t // S."""
    kp = (K + SLICE - 1) // SLICE * SLICE
    return Wp + tl.load(WOff + o) + ((t // S).to(tl.int64) * kp + (t % S) * KT) * BLOCK_N


@triton.jit
def _stream_block(item, Wp, WOff, Kc, Vc, Lens, N_LAYER: tl.constexpr, N_HEAD: tl.constexpr, C: tl.constexpr,
                  V: tl.constexpr, D: tl.constexpr, B: tl.constexpr, CAP, NCH,
                  SLICE: tl.constexpr, CHUNKS: tl.constexpr, BLOCK_N: tl.constexpr):
    """The bytes a list entry streams, loaded into registers; nothing for an entry below 0 (none). For a
    product, the first of its tile's CHUNKS register blocks."""
    CHUNK: tl.constexpr = SLICE // 2
    KT: tl.constexpr = SLICE * CHUNKS
    rows = tl.arange(0, SLICE)
    cols = tl.arange(0, BLOCK_N)
    o = tl.maximum(item, 0) // ITEM_SHIFT
    t = tl.maximum(item, 0) % ITEM_SHIFT
    kind = _kind_of(o, N_LAYER)
    K, N, S = _product_shape(kind, C, V, KT)
    w_ptrs = _tile_weights(Wp, WOff, o, t, K, S, SLICE, KT, BLOCK_N) + rows[:, None] * BLOCK_N + cols[None, :]
    w_mask = ((t % S) * KT + rows < K)[:, None] & ((t // S) * BLOCK_N + cols < N)[None, :]
    off, is_v, key = _kv_offsets(o, t, rows, cols, Lens, N_HEAD, D, CAP, NCH, CHUNK, B)
    kv_ptrs = tl.where(is_v[:, None], Vc + off, Kc + off)
    kv_mask = (key < tl.load(Lens))[:, None] & (cols < D)[None, :]
    is_attn = kind == ATTN
    ptrs = tl.where(is_attn, kv_ptrs, w_ptrs)
    # `!= 0`: Triton 3.9's interpreter widens a scalar truth broadcast over a block to int32, which its load
    # refuses as a mask; compiled, the compare costs nothing.
    mask = (tl.where(is_attn, kv_mask, w_mask) & (item >= 0)) != 0
    return tl.load(ptrs, mask=mask, other=0.0)


@triton.jit
def _normed_rows(src, offs_b, mask_b, kk, K, ln, Ln, C: tl.constexpr, mean, rstd):
    """Rows offs_b, columns kk of a product's input, through its LayerNorm where it has one (ln >= 0)."""
    mask_k = kk < K
    a = tl.load(src + offs_b[:, None] * K + kk[None, :], mask=mask_b[:, None] & mask_k[None, :], other=0.0,
                cache_modifier=".cg").to(tl.float32)
    if ln >= 0:
        g = tl.load(Ln + ln + kk, mask=mask_k, other=0.0).to(tl.float32)
        beta = tl.load(Ln + ln + C + kk, mask=mask_k, other=0.0).to(tl.float32)
        a = (a - mean[:, None]) * rstd[:, None] * g[None, :] + beta[None, :]
    return a


@triton.jit
def _product_tile(o, t, w, Wp, WOff, X, Attn, Hid, Q, Kc, Vc, Logits, Ln, LnOff, Bias, BOff, Part, ColCnt, Stats, pos,
                  eps, N_LAYER: tl.constexpr, N_HEAD: tl.constexpr, C: tl.constexpr, V: tl.constexpr, D: tl.constexpr,
                  B: tl.constexpr, CAP, SLICE: tl.constexpr, CHUNKS: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_M: tl.constexpr, STAT_P: tl.constexpr, GELU_TANH: tl.constexpr):
    """One tile of a product: its rows of the input (normed where a LayerNorm precedes it) times the
    streamed weight slice `w`; the last split of its column adds the splits and applies the epilogue.
    True for the tile that finished its column (the only one that raises the operation's counter).
    A LayerNorm's statistics come from what the writer of x left per column block (fused_linear's
    RowStats layout: the embedding one block of C, a residual product one per BLOCK_N columns), one
    load instead of a pass over the row."""
    dt = w.dtype
    KT: tl.constexpr = SLICE * CHUNKS
    kind = _kind_of(o, N_LAYER)
    K, N, S = _product_shape(kind, C, V, KT)
    j = t // S
    s = t % S
    offs_b = tl.arange(0, BLOCK_M)
    mask_b = offs_b < B
    src = tl.where(kind == PROJ, Attn, tl.where(kind == FC2, Hid, X))
    ln = tl.load(LnOff + o)
    mean = tl.zeros([BLOCK_M], dtype=tl.float32)
    rstd = tl.zeros([BLOCK_M], dtype=tl.float32)
    if ln >= 0:
        first = o == 0  # x as the embedding left it
        mean, rstd = _combined_stats(Stats, STAT_P, offs_b, mask_b, B, tl.where(first, 1, (C + BLOCK_N - 1) // BLOCK_N),
                                     tl.where(first, C, BLOCK_N), C, eps, STAT_P)
    krows = tl.arange(0, SLICE)
    offs_n = j * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    kk = s * KT + krows
    acc = tl.dot(_normed_rows(src, offs_b, mask_b, kk, K, ln, Ln, C, mean, rstd).to(dt), w)
    if CHUNKS > 1:  # the tile's other blocks of rows, after the one streamed ahead of the wait
        tile_w = _tile_weights(Wp, WOff, o, t, K, S, SLICE, KT, BLOCK_N)
        for c in tl.range(1, CHUNKS):
            kk = s * KT + c * SLICE + krows
            wc = tl.load(tile_w + (c * SLICE + krows)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :],
                         mask=(kk < K)[:, None] & mask_n[None, :], other=0.0)
            acc += tl.dot(_normed_rows(src, offs_b, mask_b, kk, K, ln, Ln, C, mean, rstd).to(dt), wc)
    mask_y = mask_b[:, None] & mask_n[None, :]
    tile = offs_b[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    last = S > 0
    if S > 1:
        tl.store(Part + (j * S + s).to(tl.int64) * (BLOCK_M * BLOCK_N) + tile, acc, mask=mask_b[:, None])
        last = arrive(ColCnt + j, S)
    if last:
        # The finisher's chain of round trips is the operation's critical path: what it reads besides the
        # partials (bias, the residual) is asked for first, and the partials SUMS at a time.
        rows = offs_b[:, None]
        boff = tl.load(BOff + o)  # `!= 0` on masks with a scalar in them: see _stream_block
        bias = tl.load(Bias + boff + offs_n, mask=(mask_n & (boff >= 0)) != 0, other=0.0).to(tl.float32)
        residual = (kind == PROJ) | (kind == FC2)
        at = X + rows * C + offs_n[None, :]
        res = tl.load(at, mask=(mask_y & residual) != 0, other=0.0, cache_modifier=".cg").to(tl.float32)
        if S > 1:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for i0 in range(0, S, SUMS):  # a fixed order: the same sum whichever split came last
                for u in tl.static_range(SUMS):
                    acc += tl.load(Part + (j * S + i0 + u).to(tl.int64) * (BLOCK_M * BLOCK_N) + tile,
                                   mask=(mask_b[:, None] & (i0 + u < S)) != 0, other=0.0, cache_modifier=".cg")
            reset(ColCnt + j)
        y = acc + bias[None, :]
        if kind == QKV:  # q into Q; k and v into this layer's cache at pos
            which = offs_n // C
            within = offs_n % C
            head = (within // D).to(tl.int64)
            layer = (o // KINDS).to(tl.int64)
            cache = (((layer * B + rows) * N_HEAD + head[None, :]) * CAP + pos) * D + (within % D)[None, :]
            yd = y.to(dt)
            tl.store(Q + rows * C + within[None, :], yd, mask=mask_y & (which == 0)[None, :])
            tl.store(Kc + cache, yd, mask=mask_y & (which == 1)[None, :])
            tl.store(Vc + cache, yd, mask=mask_y & (which == 2)[None, :])
        elif kind == FC:
            tl.store(Hid + rows * N + offs_n[None, :], _gelu(y.to(dt).to(tl.float32), GELU_TANH).to(dt), mask=mask_y)
        elif kind == HEAD:
            tl.store(Logits + rows * N + offs_n[None, :], y, mask=mask_y)
        else:  # the projections add into the residual stream
            x = (res + y.to(dt).to(tl.float32)).to(dt)
            tl.store(at, x, mask=mask_y)
            _store_tile_stats(Stats, STAT_P, x.to(tl.float32), mask_y, offs_b, mask_b, B, j,
                              tl.minimum(BLOCK_N, C - j * BLOCK_N).to(tl.float32))
    return last


@triton.jit
def _attention_tile(o, t, kv, Q, Kc, Vc, Lens, pos, Attn, PartO, PartML, HeadCnt, qk_scale_log2,
                    N_HEAD: tl.constexpr, C: tl.constexpr, D: tl.constexpr, B: tl.constexpr, CAP,
                    NCH, NCH_P: tl.constexpr, SLICE: tl.constexpr, BLOCK_N: tl.constexpr):
    """One chunk of one head's cache: softmax statistics and the weighted values over its keys; the
    last chunk of the head to arrive merges them all into the head's output (and returns True)."""
    CHUNK: tl.constexpr = SLICE // 2
    rows = tl.arange(0, SLICE)
    cols = tl.arange(0, BLOCK_N)
    mask_d = cols < D
    off, is_v, key = _kv_offsets(o, t, rows, cols, Lens, N_HEAD, D, CAP, NCH, CHUNK, B)
    # The newest key and value were written by this step's qkv product, after the block was streamed.
    fresh = (key == pos)[:, None] & mask_d[None, :]
    kv = tl.load(tl.where(is_v[:, None], Vc + off, Kc + off), mask=fresh, other=kv, cache_modifier=".cg")
    k, v = tl.split(tl.permute(tl.reshape(kv.to(tl.float32), [2, CHUNK, BLOCK_N]), (1, 2, 0)))
    bh = t // NCH
    ch = t % NCH
    head = bh % N_HEAD
    q = tl.load(Q + (bh // N_HEAD) * C + head * D + cols, mask=mask_d, other=0.0, cache_modifier=".cg")
    keys = ch * CHUNK + tl.arange(0, CHUNK)
    s = tl.sum(k * q.to(tl.float32)[None, :], axis=1) * qk_scale_log2
    s = tl.where(keys < tl.load(Lens), s, float("-inf"))
    m = tl.max(s, axis=0)
    p = tl.exp2(s - tl.where(m == float("-inf"), 0.0, m))
    part = bh * NCH + ch
    tl.store(PartO + part * BLOCK_N + cols, tl.sum(p[:, None] * v, axis=0))
    tl.store(PartML + 2 * part, m)
    tl.store(PartML + 2 * part + 1, tl.sum(p, axis=0))
    last = arrive(HeadCnt + bh, NCH)
    if last:
        chs = tl.arange(0, NCH_P)
        there = chs < NCH
        ms = tl.load(PartML + 2 * (bh * NCH + chs), mask=there, other=float("-inf"), cache_modifier=".cg")
        ls = tl.load(PartML + 2 * (bh * NCH + chs) + 1, mask=there, other=0.0, cache_modifier=".cg")
        os = tl.load(PartO + (bh * NCH + chs)[:, None] * BLOCK_N + cols[None, :], mask=there[:, None], other=0.0,
                     cache_modifier=".cg")
        top = tl.max(ms, axis=0)
        wgt = tl.where(ms == float("-inf"), 0.0, tl.exp2(ms - top))
        out = tl.sum(wgt[:, None] * os, axis=0) / tl.sum(wgt * ls, axis=0)
        tl.store(Attn + (bh // N_HEAD) * C + head * D + cols, out.to(Attn.dtype.element_ty), mask=mask_d)
        reset(HeadCnt + bh)
    return last


@triton.jit(do_not_specialize=["CAP", "NCH", "stride_work"])  # one compile serves every cache capacity
def _persistent_step_kernel(
        Work, Count, stride_work, Targets, OpCnt, ColCnt, HeadCnt, Status, max_polls,
        Wp, WOff, Ln, LnOff, Bias, BOff, X, Attn, Hid, Q, Kc, Vc, Logits, Lens, Pos, Part, PartO, PartML, Stats,
        Trace, eps, qk_scale_log2,
        N_LAYER: tl.constexpr, N_HEAD: tl.constexpr, C: tl.constexpr, V: tl.constexpr, D: tl.constexpr,
        B: tl.constexpr, CAP, NCH, NCH_P: tl.constexpr, N_OPS: tl.constexpr,
        N_OPS_P: tl.constexpr, SLICE: tl.constexpr, CHUNKS: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_M: tl.constexpr, STAT_P: tl.constexpr, GELU_TANH: tl.constexpr, TRACE: tl.constexpr):
    """Block i runs list i of the plan: for each entry it streams the next entry's bytes, waits for the
    operation before its own, and computes. A tile that finishes a column (a product's last split) or a
    head (the attention's last chunk) raises its operation's counter, so a counter's target is the
    operation's columns or heads, and a tile that only left a partial costs no second atomic. The tile
    that completes the last operation zeroes every counter for the next launch (a CUDA graph replays
    this one). With TRACE, each entry records three readings of the global timer: before it streams
    the next entry's bytes, once its wait is over, and once its counter is raised
    (kernels/decode/persistent_trace.py reads them)."""
    sm = tl.program_id(0)
    n = tl.load(Count + sm)
    entries = Work + sm * stride_work
    pos = tl.load(Pos)
    item = tl.load(entries, mask=n > 0, other=-1)
    blk = _stream_block(item, Wp, WOff, Kc, Vc, Lens, N_LAYER, N_HEAD, C, V, D, B, CAP, NCH, SLICE, CHUNKS, BLOCK_N)
    i = 0
    ok = n >= 0
    # The highest operation this block has seen complete: a list runs in operation order and a counter only
    # grows within a launch, so a run of tiles of one operation waits once, not once a tile (a poll is an
    # atomic round trip to L2, which 132 blocks polling one counter make slower still).
    ready = tl.full([], -1, tl.int32)
    while (i < n) & ok:
        if TRACE:
            stamps = Trace + (sm * stride_work + i) * 3
            tl.store(stamps, _now())
        nxt_item = tl.load(entries + i + 1, mask=i + 1 < n, other=-1)
        nxt = _stream_block(nxt_item, Wp, WOff, Kc, Vc, Lens, N_LAYER, N_HEAD, C, V, D, B, CAP, NCH, SLICE, CHUNKS,
                            BLOCK_N)
        o = item // ITEM_SHIFT
        t = item % ITEM_SHIFT
        if o - 1 > ready:
            ok = wait_for(OpCnt + o - 1, tl.load(Targets + o - 1), max_polls, Status, o)
            ready = (o - 1).to(tl.int32)
        if ok:
            if TRACE:
                tl.store(stamps + 1, _now())
            if _kind_of(o, N_LAYER) == ATTN:
                fin = _attention_tile(o, t, blk, Q, Kc, Vc, Lens, pos, Attn, PartO, PartML, HeadCnt, qk_scale_log2,
                                      N_HEAD, C, D, B, CAP, NCH, NCH_P, SLICE, BLOCK_N)
            else:
                fin = _product_tile(o, t, blk, Wp, WOff, X, Attn, Hid, Q, Kc, Vc, Logits, Ln, LnOff, Bias, BOff, Part,
                                    ColCnt, Stats, pos, eps, N_LAYER, N_HEAD, C, V, D, B, CAP, SLICE, CHUNKS, BLOCK_N,
                                    BLOCK_M, STAT_P, GELU_TANH)
            if fin:
                tl.debug_barrier()
                done = tl.atomic_add(OpCnt + o, 1, sem="acq_rel", scope="gpu")
                if (o == N_OPS - 1) & (done == tl.load(Targets + o) - 1):
                    ops = tl.arange(0, N_OPS_P)
                    tl.store(OpCnt + ops, tl.zeros([N_OPS_P], dtype=tl.int32), mask=ops < N_OPS)
            if TRACE:
                tl.debug_barrier()
                tl.store(stamps + 2, _now())
        item = nxt_item
        blk = nxt
        i += 1


# --- the host side ----------------------------------------------------------------------------

def kernel_operations(args, batch: int, capacity: int, tiling: PersistentTiling, elem_bytes: int) -> list[KernelOp]:
    """The step's operations as this kernel tiles them, with the bytes each tile streams (an attention
    tile's at a full cache), for plan_step to deal."""
    C, bn, sl = args.n_embd, tiling.block_n, tiling.tile_k

    def product(name, k, n, role):
        columns = math.ceil(n / bn)
        tiles = columns * math.ceil(k / sl)
        return KernelOp(name, tiles, math.ceil(k * n * elem_bytes / tiles), columns, role)

    chunks = math.ceil(capacity / tiling.chunk)
    heads = batch * args.n_head
    ops = []
    for layer in range(args.n_layer):
        ops += [product(f"layer {layer} qkv", C, 3 * C, "qkv"),
                KernelOp(f"layer {layer} attention", heads * chunks, 2 * tiling.chunk * args.head_dim * elem_bytes,
                         heads, "attention"),
                product(f"layer {layer} projection", C, C, "proj"),
                product(f"layer {layer} fc", C, 4 * C, "fc"),
                product(f"layer {layer} second projection", 4 * C, C, "out")]
    ops.append(product("logits", C, args.vocab_size, "head"))
    return ops


def _pack(w: torch.Tensor, slice_k: int, block_n: int) -> torch.Tensor:
    """A (K, N) weight as its column blocks one after another, each [K, block_n] contiguous with K padded to a
    multiple of slice_k (and N to one of block_n), so that any split of a column block into tiles of whole
    slices is contiguous too (_tile_weights; the kernel's masks never read the pad)."""
    K, N = w.shape
    S, NT = math.ceil(K / slice_k), math.ceil(N / block_n)
    padded = w.new_zeros(S * slice_k, NT * block_n)
    padded[:K, :N] = w
    return padded.view(S, slice_k, NT, block_n).permute(2, 0, 1, 3).reshape(-1)


def _flat(parts: list[torch.Tensor | None]) -> tuple[torch.Tensor, list[int]]:
    """The non-None parts concatenated, and each part's element offset (-1 for None)."""
    offsets, at = [], 0
    for p in parts:
        offsets.append(-1 if p is None else at)
        at += 0 if p is None else p.numel()
    return torch.cat([p.reshape(-1) for p in parts if p is not None]), offsets


def unsupported_reason(batch: int | None, device) -> str | None:
    """Why the persistent step cannot run `batch` sequences (None: any batch) on `device`, or None."""
    device = torch.device(device)
    if device.type == "cuda":
        major, minor = fl.device_facts(device).capability
        if (major, minor) < (8, 0):
            return (f"the persistent step needs compute capability 8.0 or newer (this GPU has {major}.{minor}); the "
                    "graph step runs here")
    if batch is not None and batch > MAX_ROWS:
        return f"the persistent step multiplies at most {MAX_ROWS} sequences at once; batch {batch} needs the graph step"
    return None


class PersistentStep(OneKernelStep):
    """GPT-2's decode step as three launches: the embedding, the persistent kernel, and (the loop's)
    argmax (and a memset of its counters). Built for one model, one cache in the model's dtype and one batch; it
    packs a copy of the weights. `lists` overrides how many blocks run (the SM count times blocks_per_sm on a GPU, one under
    the interpreter, which runs blocks one after another)."""

    impl = "persistent"
    # What the decode phase asks any of our steps before it builds one (collect/decode/sessions.py).
    unsupported_reason = staticmethod(unsupported_reason)
    # Its roles are operations inside one kernel, which a profiler cannot tell apart: the decode phase reads them
    # from a traced step instead (kernels/decode/persistent_trace.py).
    roles_by_trace = True

    def __init__(self, model, cache, batch: int, tiling: PersistentTiling = PersistentTiling(),
                 lists: int | None = None, trace: bool = False):
        a = model.args
        gpu = fl.device_facts(model.device)
        why = unsupported_reason(batch, model.device)
        if why:
            raise ValueError(why + ".")
        if cache.k.dtype != model.dtype:
            raise ValueError(f"the persistent step reads a cache in the model's dtype ({model.dtype}); a "
                             f"{cache.k.dtype} cache needs the fused step.")
        if a.head_dim > tiling.block_n:
            raise ValueError(f"head_dim {a.head_dim} is wider than the persistent step's tiles ({tiling.block_n} "
                             "columns); raise PersistentTiling.block_n.")
        if model.gelu_approx not in ("tanh", "none"):
            raise ValueError(f"GELU approximation {model.gelu_approx!r} is not one the persistent step implements.")
        if trace:
            check_traceable(model.device)
        self.model, self.cache, self.tiling = model, cache, tiling
        dev, dt = model.device, model.dtype
        C, H, L = a.n_embd, a.n_head, a.n_layer
        self.capacity = cache.k.shape[3]
        self.gpu = gpu
        # The interpreter runs one program after another: a second block would wait on tiles that only
        # run once the first has given up.
        on_gpu = dev.type == "cuda" and not interpreting()
        self.lists = lists or (gpu.sm_count * tiling.blocks_per_sm if on_gpu else 1)
        ops = kernel_operations(a, batch, self.capacity, tiling, model.dtype.itemsize)
        self.set_lists(ops, plan_step(ops, self.lists), trace, dev)
        check_plan(self.plan)

        sl, bn = tiling.slice_k, tiling.block_n
        weights, lns, biases = [], [], []
        for b in model.blocks:
            weights += [_pack(b.attn_w, sl, bn), None, _pack(b.proj_w, sl, bn), _pack(b.fc_w, sl, bn),
                        _pack(b.out_w, sl, bn)]
            lns += [torch.cat([b.ln1_w, b.ln1_b]), None, None, torch.cat([b.ln2_w, b.ln2_b]), None]
            biases += [b.attn_b, None, b.proj_b, b.fc_b, b.out_b]
        weights.append(_pack(model.lm_head.t(), sl, bn))
        lns.append(torch.cat([model.lnf_w, model.lnf_b]))
        biases.append(None)
        self.w, w_off = _flat(weights)
        self.ln, ln_off = _flat(lns)
        self.bias, b_off = _flat(biases)
        self.w_off = torch.tensor([max(0, x) for x in w_off], dtype=torch.int64, device=dev)
        self.ln_off = torch.tensor(ln_off, dtype=torch.int64, device=dev)
        self.b_off = torch.tensor(b_off, dtype=torch.int64, device=dev)

        self.chunks = math.ceil(self.capacity / tiling.chunk)
        # The merge's width is the model's, not the cache's: then every capacity runs one compiled kernel.
        self.chunks_p = triton.next_power_of_2(math.ceil(max(a.n_positions, self.capacity) / tiling.chunk))
        self.block_m = max(16, triton.next_power_of_2(batch))
        # A column counter per column of the widest product, and a partial per tile of the largest: the widest
        # (the logits) has few splits, the deepest (the second MLP product) few columns, so the product of the two
        # would be four times too much at gpt2, 3.6 at gpt2-xl. Both read from the plan's own tiling.
        products = [op for op in self.ops if op.role != "attention"]
        widest = max(op.finishers for op in products)
        partials = max(op.tiles for op in products)
        self.x = torch.empty((batch, C), device=dev, dtype=dt)
        self.attn = torch.empty((batch, C), device=dev, dtype=dt)
        self.h = torch.empty((batch, 4 * C), device=dev, dtype=dt)
        self.q = torch.empty((batch, C), device=dev, dtype=dt)
        self.logits = torch.empty((batch, a.vocab_size), device=dev, dtype=torch.float32)
        self.part = torch.empty((partials * self.block_m * bn,), device=dev, dtype=torch.float32)
        self.part_o = torch.empty((batch * H * self.chunks * bn,), device=dev, dtype=torch.float32)
        self.part_ml = torch.empty((batch * H * self.chunks * 2,), device=dev, dtype=torch.float32)
        self.op_count = torch.zeros((len(self.ops),), device=dev, dtype=torch.int32)
        self.col_count = torch.zeros((widest,), device=dev, dtype=torch.int32)
        self.head_count = torch.zeros((batch * H,), device=dev, dtype=torch.int32)
        self.status = torch.zeros((1,), device=dev, dtype=torch.int32)
        # Row statistics for each LayerNorm, left by the embedding (one block) and the residual products
        # (one per column block); the row stride is the kernel's STAT_P.
        self.stat_p = triton.next_power_of_2(math.ceil(C / bn))
        self.stats = fl.RowStats.buffer(batch, self.stat_p, dev)
        self._resident_checked = False

    def handshake_counters(self) -> tuple:
        return self.col_count, self.head_count

    def _args(self, lens, pos):
        a = self.model.args
        return (self.work, self.count, self.work.stride(0), self.targets, self.op_count, self.col_count,
                self.head_count, self.status, self.tiling.max_polls, self.w, self.w_off, self.ln, self.ln_off,
                self.bias, self.b_off, self.x, self.attn, self.h, self.q, self.cache.k, self.cache.v, self.logits,
                lens, pos, self.part, self.part_o, self.part_ml, self.stats, self.trace, a.layer_norm_epsilon,
                1.4426950408889634 / math.sqrt(a.head_dim))

    def _meta(self) -> dict:
        a = self.model.args
        return dict(N_LAYER=a.n_layer, N_HEAD=a.n_head, C=a.n_embd, V=a.vocab_size, D=a.head_dim,
                    B=self.x.shape[0], CAP=self.capacity, NCH=self.chunks, NCH_P=self.chunks_p,
                    N_OPS=len(self.ops), N_OPS_P=triton.next_power_of_2(len(self.ops)), SLICE=self.tiling.slice_k,
                    CHUNKS=self.tiling.chunks, BLOCK_N=self.tiling.block_n, BLOCK_M=self.block_m, STAT_P=self.stat_p,
                    GELU_TANH=self.model.gelu_approx == "tanh", TRACE=self.trace.dim() == 3,
                    num_warps=1 if interpreting() else self.tiling.num_warps)

    def _check_resident(self, lens, pos) -> None:
        """Compile first and refuse a grid the GPU cannot hold at once (it would wait for ever)."""
        kernel = _persistent_step_kernel.warmup(*self._args(lens, pos), grid=(self.lists,), **self._meta())
        self.check_resident_kernel(kernel, self.lists, self.tiling.num_warps)

    def __call__(self, history, pos, lens):
        m = self.model
        embed(history, pos, m.wte, m.wpe, self.x, self.stats)
        if self.x.is_cuda and not self._resident_checked:
            self._check_resident(lens, pos)
        _persistent_step_kernel[(self.lists,)](*self._args(lens, pos), **self._meta())
        return self.logits


# --- the compile matrix (kernels/aot.py) ------------------------------------------------------

def compile_specs(target):
    """The persistent kernel as the decode phase launches it, on meta tensors: each model at batch 4
    over a 1024-position bf16 cache, on Ampere and newer (the step refuses older GPUs). Its products
    run on the tensor cores (tl.dot of a 16-row block), its attention on the CUDA cores. Core: GPT-2."""
    from ..aot import CompileSpec
    from .gpt2 import CACHES, GPT2, PRESETS

    if target.capability < (8, 0):
        return []  # the step refuses pre-Ampere GPUs: the graph step runs there
    dt = torch.bfloat16
    specs = []
    for name in fl.DECODE_MODELS:
        for i, (tiling, trace) in enumerate([(t, False) for t in CANDIDATE_TILINGS] + [(CANDIDATE_TILINGS[0], True)]):
            def launch(a=PRESETS[name], tiling=tiling, trace=trace):
                model = GPT2.zeros(a, "meta", dt)
                step = PersistentStep(model, CACHES["bf16"](a, 4, a.n_positions, "meta", dt), 4, tiling=tiling,
                                      trace=trace)
                history = torch.empty((4, a.n_positions + 1), device="meta", dtype=torch.int64)
                step(history, torch.empty((1,), device="meta", dtype=torch.int64),
                     torch.empty((1,), device="meta", dtype=torch.int32))

            loop = f"x{tiling.chunks} " if tiling.chunks > 1 else ""
            specs.append(CompileSpec(f"bf16 {name} B=4 slice {tiling.slice_k} {loop}w{tiling.num_warps} "
                                     f"x{tiling.blocks_per_sm}{' traced' if trace else ''}", launch,
                                     core=name == fl.DECODE_MODELS[0] and i == 0))
    return specs
