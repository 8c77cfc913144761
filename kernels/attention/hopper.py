"""
Fused attention forward for Hopper (sm90): tensor descriptors and warp specialization
======================================================================================

The same online-softmax algorithm as :mod:`kernels.attention` (read that file first), rebuilt
around what a Hopper SM offers and the portable kernel cannot assume:

- **TMA loads.** A tensor descriptor describes a whole tensor once; each K or V tile is then one
  bulk copy issued by a single thread and waited on through an mbarrier, instead of a thousand
  16-byte ``cp.async`` copies whose addresses every thread computes. Rows past ``seq_len`` are
  zero-filled by the copy engine and clipped on store, so no load or store needs a mask.
- **Wider key tiles** (``BLOCK_N = 128``): the score matmul ``Q Kᵀ`` reads both operands from
  shared memory; at 64 keys per step it asks for about as many shared-memory bytes per cycle as
  the SM can serve (128), at 128 keys for three quarters of that. This is the "fewer, wider
  loads" fix the published T4 study left open, in its Hopper form.
- **Warp specialization:** Triton (3.5+) can split the key loop into a producer warpgroup that
  only issues TMA copies and two consumer warpgroups of 64 query rows each, which hand buffers
  back and forth through mbarriers and take the producer's registers (``setmaxnreg``). Without
  it every warpgroup meets the others at CTA-wide barriers each step, so all of them run their
  softmax at the same time while the tensor cores idle.
- **A persistent grid:** one program per SM walks the (head, query tile) list, so no last partial
  wave of programs leaves SMs idle, descriptors are built once per program, and a program's
  producer can fetch its next tile while its consumers finish the last one.
- **Causal attention split at the diagonal:** key tiles wholly below the diagonal run without any
  mask; only the tiles on the diagonal compute one. The descriptor kernel does it in two loops;
  the warp-specialized one, whose compiler pass accepts a single plain loop, either masks every
  tile or (``causal_split``) runs the unmasked tiles in one launch and finishes the diagonal in a
  second, merging the two partial results through their log-sum-exp. Where it masks every tile,
  the mask can be arithmetic (``lean_mask``: a min() against a bound, no boolean tile), and the
  persistent grid can deal out query tiles in pairs i, n-1-i (``causal_pairs``) so that every
  program does the same work.

The file reads top to bottom: the kernels, availability and tile configs, then the wrapper
(:func:`hopper_attention`). Every version tried on the way here, with its prediction and
outcome, is recorded beside it in kernels/attention/versions.py. No file I/O and no plotting
live here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
import triton.testing

from . import dispatch
from ..common import (HALF_DTYPES, HEAD_DIM_TILES, LOG2E, PADDED_HEAD_DIMS, capability, check_inputs, check_tile,
                     device_index, head_dim_tile, interpreting, quick_bench, device_sm_count, softmax_scale)
from .launcher import PLAIN, LaunchCache, Recorder, TensorDescriptor, config_key, replay_allowed


# ---------------------------------------------------------------------------------------------
# 1. The kernels
# ---------------------------------------------------------------------------------------------


@triton.jit
def _tile(desc, b, h, row, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, PER_HEAD: tl.constexpr):
    """The [BLOCK, HEAD_DIM] tile of head (b, h) starting at sequence position `row`.

    PER_HEAD: `desc` is a 2-D descriptor of this head alone (built on the device); otherwise a
    4-D descriptor of the whole (batch, heads, seq_len, head_dim) tensor (built on the host).
    Either way rows past seq_len read as zeros.
    """
    if PER_HEAD:
        return desc.load([row, 0])
    else:
        return desc.load([b, h, row, 0]).reshape(BLOCK, HEAD_DIM)


@triton.jit
def _softmax_step(qk, m_i, l_i, acc, qk_scale, offs_m, cols, seq_len, MASK: tl.constexpr):
    """Fold one tile of raw scores into the running max m_i, denominator l_i and accumulator.

    MASK: 0 none (the hot path), 1 causal, 2 keys at or past seq_len. Returns p in fp32.
    """
    if MASK == 0:
        # Scale after the row max, so scale-and-subtract is one FMA per score (needs scale > 0).
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        s = qk * qk_scale - m_new[:, None]
    else:
        if MASK == 1:
            visible = offs_m[:, None] >= cols[None, :]
        else:
            visible = (cols < seq_len)[None, :]
        # A zero-filled key past seq_len scores 0, not -inf: it must be masked like a future one.
        s = tl.where(visible, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        s = s - m_new[:, None]
    p = tl.math.exp2(s)
    # On a row's first tile m_i is -inf and alpha = exp2(-inf) = 0.
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    return p, m_new, l_i, acc


@triton.jit
def _scores(q, desc_k, b, h, start_n, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
            PER_HEAD: tl.constexpr, UPCAST: tl.constexpr):
    k = _tile(desc_k, b, h, start_n, BLOCK_N, HEAD_DIM, PER_HEAD)
    if UPCAST:
        k = k.to(tl.float32)
    return tl.dot(q, k.T)


@triton.jit
def _accumulate(acc, p, desc_v, b, h, start_n, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                PER_HEAD: tl.constexpr, UPCAST: tl.constexpr):
    v = _tile(desc_v, b, h, start_n, BLOCK_N, HEAD_DIM, PER_HEAD)
    # P is rounded to the input dtype before the second matmul, as the tensor cores need.
    p = p.to(v.dtype)
    if UPCAST:
        p = p.to(tl.float32)
        v = v.to(tl.float32)
    return tl.dot(p, v, acc)


@triton.jit
def _attend(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, lo, hi, seq_len, qk_scale,
            BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, UPCAST: tl.constexpr):
    """Key tiles [lo, hi) one after the other: scores, softmax, P @ V. Triton pipelines the TMA
    copies num_stages deep and leaves each P @ V in flight until the next scores need the
    accumulator."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        qk = _scores(q, desc_k, b, h, start_n, BLOCK_N, HEAD_DIM, False, UPCAST)
        p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale, offs_m, start_n + offs_n, seq_len, MASK)
        acc = _accumulate(acc, p, desc_v, b, h, start_n, BLOCK_N, HEAD_DIM, False, UPCAST)
    return acc, l_i, m_i


@triton.jit
def _attend_overlapped(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, lo, hi, seq_len, qk_scale,
                       BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr):
    """Unmasked key tiles [lo, hi), software-pipelined by hand: the scores of tile j+1 are issued
    to the tensor cores before the softmax of tile j, hoping the exponentials run while the next
    matmul does. Costs a second score tile of registers."""
    offs_n = tl.arange(0, BLOCK_N)
    if hi > lo:
        qk = _scores(q, desc_k, b, h, lo, BLOCK_N, HEAD_DIM, False, UPCAST)
        for start_n in tl.range(lo, hi - BLOCK_N, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            qk_next = _scores(q, desc_k, b, h, start_n + BLOCK_N, BLOCK_N, HEAD_DIM, False, UPCAST)
            p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale, offs_m, start_n + offs_n, seq_len, 0)
            acc = _accumulate(acc, p, desc_v, b, h, start_n, BLOCK_N, HEAD_DIM, False, UPCAST)
            qk = qk_next
        last = hi - BLOCK_N
        p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale, offs_m, last + offs_n, seq_len, 0)
        acc = _accumulate(acc, p, desc_v, b, h, last, BLOCK_N, HEAD_DIM, False, UPCAST)
    return acc, l_i, m_i


@triton.jit
def _attend_unmasked(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, lo, hi, seq_len, qk_scale,
                     BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, OVERLAP: tl.constexpr, UPCAST: tl.constexpr):
    """Unmasked key tiles [lo, hi): one after the other, or with OVERLAP hand-pipelined (the
    recorded version v3-overlap, kernels/attention/versions.py, which the iterations phase still times)."""
    if OVERLAP:
        acc, l_i, m_i = _attend_overlapped(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, lo, hi, seq_len,
                                           qk_scale, BLOCK_N, HEAD_DIM, UPCAST)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, lo, hi, seq_len, qk_scale,
                                BLOCK_N, HEAD_DIM, 0, UPCAST)
    return acc, l_i, m_i


@triton.jit
def _program_coords(num_heads, CAUSAL: tl.constexpr):
    """(batch, head, query tile) of this program: head by head, each head's query tiles in order,
    except that causal launches the last first. Those see the most keys, so the short ones fill
    the gaps at the tail of the grid."""
    tile_m = tl.program_id(0)
    if CAUSAL:
        tile_m = tl.num_programs(0) - 1 - tile_m
    bh = tl.program_id(1)
    return bh // num_heads, bh % num_heads, tile_m


@triton.jit
def _start_tile(q, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr):
    """The prologue every kernel shares: the query tile as the dots take it, and the online
    softmax's state before the first key (running max -inf, denominator 0, accumulator 0)."""
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    return q, m_i, l_i, acc


@triton.jit
def _head_descs(Q, K, V, O, b, h, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on, seq_len,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """2-D descriptors over head (b, h) of Q, K, V and O, built on the device."""
    desc_q = tl.make_tensor_descriptor(Q + b * stride_qb + h * stride_qh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_qn, 1], block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = tl.make_tensor_descriptor(K + b * stride_kb + h * stride_kh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = tl.make_tensor_descriptor(V + b * stride_vb + h * stride_vh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = tl.make_tensor_descriptor(O + b * stride_ob + h * stride_oh, shape=[seq_len, HEAD_DIM],
                                       strides=[stride_on, 1], block_shape=[BLOCK_M, HEAD_DIM])
    return desc_q, desc_k, desc_v, desc_o


@triton.jit
def _ws_step(acc, l_i, m_i, q, desc_k, desc_v, row0, start_n, rows, offs_n, seq_len, qk_scale,
             BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, LEAN: tl.constexpr,
             UPCAST: tl.constexpr):
    """One key tile of the warp-specialized kernels (per-head or flat descriptors; `row0` is the
    head's first row in the latter). LEAN with the causal mask: the mask as arithmetic on the raw
    scores, after which the unmasked step runs."""
    start_n = tl.multiple_of(start_n, BLOCK_N)
    qk = _scores(q, desc_k, 0, 0, row0 + start_n, BLOCK_N, HEAD_DIM, True, UPCAST)
    if MASK == 1 and LEAN:
        # The mask as arithmetic, no boolean tile: each score is capped by a bound that is huge for
        # a visible key and -5e19 for a future one, so a future score's exp2 underflows to 0. The
        # row term is clamped to [-1, BLOCK_N] so the bound stays exact in fp32 at any length.
        # (A row never meets a tile whose keys are all in its future before its first visible key.)
        ahead = tl.minimum(tl.maximum(rows - start_n, -1), BLOCK_N).to(tl.float32)
        bound = (ahead * 1e20 + 5e19)[:, None] - (offs_n.to(tl.float32) * 1e20)[None, :]
        qk = tl.minimum(qk, bound)
        p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale, rows, start_n + offs_n, seq_len, 0)
    else:
        p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale, rows, start_n + offs_n, seq_len, MASK)
    acc = _accumulate(acc, p, desc_v, 0, 0, row0 + start_n, BLOCK_N, HEAD_DIM, True, UPCAST)
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["num_heads", "seq_len"])
def _hopper_fwd(desc_q, desc_k, desc_v, desc_o, num_heads, seq_len, qk_scale,
                HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, OVERLAP: tl.constexpr, UPCAST: tl.constexpr):
    """Descriptors built on the host, 4-D over the whole tensors. Grid: (query tiles, B*H).

    num_heads and seq_len are not specialised on: with descriptors the kernel does no address
    arithmetic with them, and specialising on their divisibility by 16 would compile another
    kernel for every ragged length or odd head count.
    """
    b, h, tile_m = _program_coords(num_heads, CAUSAL)
    start_m = tile_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q, m_i, l_i, acc = _start_tile(_tile(desc_q, b, h, start_m, BLOCK_M, HEAD_DIM, False), BLOCK_M, HEAD_DIM, UPCAST)

    if CAUSAL:
        # Stage 1: key tiles wholly below the diagonal, all visible, no mask. (BLOCK_M is a
        # multiple of BLOCK_N, so the diagonal block starts on a key tile boundary.)
        acc, l_i, m_i = _attend_unmasked(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, 0, start_m, seq_len,
                                         qk_scale, BLOCK_N, HEAD_DIM, OVERLAP, UPCAST)
        # Stage 2: the diagonal block, masked; tiles above it are never visited. Keys past
        # seq_len lie above the diagonal of every real row, so the causal mask covers them.
        diag_hi = tl.minimum(start_m + BLOCK_M, seq_len)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, start_m, diag_hi, seq_len,
                                qk_scale, BLOCK_N, HEAD_DIM, 1, UPCAST)
    else:
        # Every full key tile without a mask, then the ragged tail, if any, with one.
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_unmasked(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, 0, full_hi, seq_len,
                                         qk_scale, BLOCK_N, HEAD_DIM, OVERLAP, UPCAST)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, full_hi, seq_len, seq_len,
                                qk_scale, BLOCK_N, HEAD_DIM, 2, UPCAST)

    # Every real row saw at least key 0, so l_i > 0 there; rows past seq_len are clipped on store.
    o = (acc / l_i[:, None]).to(desc_o.dtype)
    desc_o.store([b, h, start_m, 0], o.reshape(1, 1, BLOCK_M, HEAD_DIM))


@triton.jit(do_not_specialize=["num_heads", "seq_len"])
def _hopper_fwd_ws(Q, K, V, O, ROWS, LSE, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                   stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                   num_heads, seq_len, rows_len, qk_scale,
                   HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, UPCAST: tl.constexpr,
                   WARP_SPEC: tl.constexpr, OFFDIAG: tl.constexpr, LEAN: tl.constexpr = False):
    """Warp-specialized. Triton splits the key loop into a producer warpgroup that issues the TMA
    copies and BLOCK_M/64 consumer warpgroups (64 query rows each) that compute.

    Triton 3.6's Hopper pass only handles a plain single loop over descriptors built on the
    device (host descriptors, reductions before or after the loop, or a branch inside it make
    the sm90 compile fail): so one 2-D descriptor per head, written to global scratch by each
    program, and one loop over every key tile this query tile sees, masked inside when needed
    (causal: every tile pays for the mask, not only the diagonal ones; or an uneven seq_len,
    EVEN_N=False).

    The query positions for the causal mask are loaded from ROWS (0, 1, 2, ...) through a
    descriptor rather than made with tl.arange: the pass splits a descriptor load's rows between
    the consumers correctly, but on the H200 a tl.arange along the split dimension gave both
    consumers the first warpgroup's positions (causal outputs were wrong).

    OFFDIAG (causal, first half of the split schedule): only the key tiles wholly below the
    diagonal, unmasked; O gets their normalised partial output and LSE (fp32, one row of
    rows_len per head) their log2-sum-exp2, for _diag_merge to finish. LEAN: the arithmetic
    causal mask (see _ws_step).
    """
    b, h, tile_m = _program_coords(num_heads, CAUSAL)
    b = b.to(tl.int64)  # batch*heads*seq_len*head_dim can pass 2^31
    h = h.to(tl.int64)
    desc_q, desc_k, desc_v, desc_o = _head_descs(
        Q, K, V, O, b, h, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
        stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on, seq_len, HEAD_DIM, BLOCK_M, BLOCK_N)
    start_m = tile_m * BLOCK_M
    offs_n = tl.arange(0, BLOCK_N)
    q, m_i, l_i, acc = _start_tile(desc_q.load([start_m, 0]), BLOCK_M, HEAD_DIM, UPCAST)
    if CAUSAL and not OFFDIAG:
        desc_rows = tl.make_tensor_descriptor(ROWS, shape=[rows_len], strides=[1], block_shape=[BLOCK_M])
        rows = desc_rows.load([start_m])
        hi = tl.minimum(start_m + BLOCK_M, seq_len)
    else:
        rows = start_m + tl.arange(0, BLOCK_M)  # unused: only the in-loop causal mask reads rows
        hi = start_m if OFFDIAG else seq_len
    MASK: tl.constexpr = 0 if OFFDIAG else (1 if CAUSAL else (0 if EVEN_N else 2))
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        acc, l_i, m_i = _ws_step(acc, l_i, m_i, q, desc_k, desc_v, 0, start_n, rows, offs_n, seq_len,
                                 qk_scale, BLOCK_N, HEAD_DIM, MASK, LEAN, UPCAST)
    if OFFDIAG:
        # The first query tile has no key below the diagonal: l_i = 0, acc = 0, and its partial
        # result must weigh nothing in the merge (log2 0 = -inf), not be 0/0.
        desc_o.store([start_m, 0], (acc / tl.where(l_i > 0, l_i, 1.0)[:, None]).to(desc_o.dtype))
        desc_lse = tl.make_tensor_descriptor(LSE + (b * num_heads + h) * rows_len, shape=[rows_len], strides=[1],
                                             block_shape=[BLOCK_M])
        desc_lse.store([start_m], m_i + tl.math.log2(l_i))
    else:
        desc_o.store([start_m, 0], (acc / l_i[:, None]).to(desc_o.dtype))


@triton.jit(do_not_specialize=["num_heads", "seq_len", "num_bh"])
def _hopper_fwd_ws_persistent(Q, K, V, O, ROWS, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                              stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                              num_heads, num_bh, seq_len, rows_len, qk_scale,
                              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, UPCAST: tl.constexpr,
                              WARP_SPEC: tl.constexpr, FLAT: tl.constexpr, LEAN: tl.constexpr = False,
                              PAIRS: tl.constexpr = False):
    """_hopper_fwd_ws as a persistent kernel: one program per SM walks the (head, query tile)
    list with a stride of the grid size, so no last partial wave of programs idles most SMs, and
    a program's next tile starts while the SM is still warm.

    FLAT (contiguous tensors, seq_len a multiple of both tiles): the descriptors cover all heads
    as one (batch*heads*seq_len, head_dim) matrix and are built once per program rather than
    once per tile; a tile never straddles two heads, so nothing reads across a head's end.
    Tiles are ordered head by head (the heads in flight share their K and V in L2); causal takes
    each head's query tiles longest first.
    """
    n_tiles_m = tl.cdiv(seq_len, BLOCK_M)
    n_tiles = n_tiles_m * num_bh
    offs_n = tl.arange(0, BLOCK_N)
    if FLAT:
        rows_all = num_bh * seq_len
        desc_q = tl.make_tensor_descriptor(Q, shape=[rows_all, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
        desc_k = tl.make_tensor_descriptor(K, shape=[rows_all, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
        desc_v = tl.make_tensor_descriptor(V, shape=[rows_all, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
        desc_o = tl.make_tensor_descriptor(O, shape=[rows_all, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
    if CAUSAL:
        desc_rows = tl.make_tensor_descriptor(ROWS, shape=[rows_len], strides=[1], block_shape=[BLOCK_M])
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if CAUSAL and PAIRS:
        # Work units of two query tiles, i and n-1-i, so every unit costs n+1 key tiles: the
        # programs finish together and stay on the same heads (their K and V shared in L2).
        # Units are dealt out with a stride of the grid; for an odd n the middle tile is its own
        # partner and is computed twice (same result, stored twice) rather than branched around.
        n_pairs = (n_tiles_m + 1) // 2
        lo = 0
        hi_t = 2 * tl.cdiv(n_pairs * num_bh - pid, nprog)
        step = 1
    else:
        lo = pid
        hi_t = n_tiles
        step = nprog
    for t in tl.range(lo, hi_t, step):
        if CAUSAL and PAIRS:
            u = pid + (t // 2) * nprog
            bh = u // n_pairs
            i = u % n_pairs
            tile_m = tl.where(t % 2 == 0, n_tiles_m - 1 - i, i)
        else:
            bh = t // n_tiles_m
            tile_m = t % n_tiles_m
            if CAUSAL:
                tile_m = n_tiles_m - 1 - tile_m
        b = (bh // num_heads).to(tl.int64)
        h = (bh % num_heads).to(tl.int64)
        if FLAT:
            row0 = bh * seq_len
        else:
            row0 = 0
            desc_q, desc_k, desc_v, desc_o = _head_descs(
                Q, K, V, O, b, h, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on, seq_len, HEAD_DIM, BLOCK_M, BLOCK_N)
        start_m = tile_m * BLOCK_M
        q, m_i, l_i, acc = _start_tile(desc_q.load([row0 + start_m, 0]), BLOCK_M, HEAD_DIM, UPCAST)
        if CAUSAL:
            rows = desc_rows.load([start_m])
            hi = tl.minimum(start_m + BLOCK_M, seq_len)
        else:
            rows = start_m + tl.arange(0, BLOCK_M)  # unused without the causal mask
            hi = seq_len
        MASK: tl.constexpr = 1 if CAUSAL else (0 if EVEN_N else 2)
        for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WARP_SPEC):
            acc, l_i, m_i = _ws_step(acc, l_i, m_i, q, desc_k, desc_v, row0, start_n, rows, offs_n, seq_len,
                                     qk_scale, BLOCK_N, HEAD_DIM, MASK, LEAN, UPCAST)
        desc_o.store([row0 + start_m, 0], (acc / l_i[:, None]).to(desc_o.dtype))


@triton.jit(do_not_specialize=["num_heads", "seq_len"])
def _diag_merge(desc_q, desc_k, desc_v, desc_o, LSE, num_heads, seq_len, rows_len, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """Second half of the split causal schedule: the masked diagonal block of each query tile,
    merged with the partial result _hopper_fwd_ws(OFFDIAG=True) left in O and LSE. With log2-
    sum-exp2 values a (partial) and b (diagonal) and m = max(a, b): o = (o_a 2^(a-m) + acc_b
    2^(m_b-m)) / (2^(a-m) + l_b 2^(m_b-m))."""
    b, h, tile_m = _program_coords(num_heads, True)
    start_m = tile_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q, m_i, l_i, acc = _start_tile(_tile(desc_q, b, h, start_m, BLOCK_M, HEAD_DIM, False), BLOCK_M, HEAD_DIM, UPCAST)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, start_m,
                            tl.minimum(start_m + BLOCK_M, seq_len), seq_len, qk_scale, BLOCK_N, HEAD_DIM, 1, UPCAST)
    lse_a = tl.load(LSE + (b * num_heads + h).to(tl.int64) * rows_len + offs_m)
    o_a = _tile(desc_o, b, h, start_m, BLOCK_M, HEAD_DIM, False).to(tl.float32)
    m = tl.maximum(m_i, lse_a)  # m_i is finite: each row sees its own key on the diagonal
    w_a = tl.math.exp2(lse_a - m)
    w_b = tl.math.exp2(m_i - m)
    o = (o_a * w_a[:, None] + acc * w_b[:, None]) / (w_a + l_i * w_b)[:, None]
    desc_o.store([b, h, start_m, 0], o.to(desc_o.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))


# ---------------------------------------------------------------------------------------------
# 2. When the path is available, and its tile configurations
# ---------------------------------------------------------------------------------------------


def hopper_available(device=None):
    """(True, "") if the Hopper path can run on `device` (default: the current CUDA device),
    else (False, the reason). It needs compute capability 9.x (TMA and wgmma; Blackwell's
    tensor cores want a different kernel) and a Triton with tensor descriptors. The CPU
    interpreter is refused too: it runs the code but says nothing about TMA or warpgroups."""
    if interpreting():
        return False, "TRITON_INTERPRET=1: the CPU interpreter runs the portable kernel only"
    if TensorDescriptor is None or not hasattr(tl, "make_tensor_descriptor"):
        return False, f"Triton {triton.__version__} has no tensor descriptors (needs >= 3.3)"
    if not torch.cuda.is_available():
        return False, "no CUDA device is visible"
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        return False, f"device {device} is not a CUDA device"
    major, minor = capability(device_index(device))  # asked once per device: every call checks it
    if major != 9:
        return False, (f"compute capability {major}.{minor}; the Hopper path needs 9.x "
                       "(TMA tensor descriptors and wgmma)")
    return True, ""


@dataclass(frozen=True)
class TileConfig:
    """One launch configuration. For the warp-specialized kernel num_warps is per warpgroup
    role: 4 gives a 4-warp producer and two 4-warp consumers, 12 warps in all."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int

    def as_dict(self):
        return dict(BLOCK_M=self.BLOCK_M, BLOCK_N=self.BLOCK_N, num_warps=self.num_warps,
                    num_stages=self.num_stages)

    def label(self):
        return f"{self.BLOCK_M}x{self.BLOCK_N}/w{self.num_warps}/s{self.num_stages}"


@dataclass(frozen=True)
class Features:
    """The kernel switches that distinguish one Hopper version from another."""

    overlap: bool = False       # descriptor kernel: scores of tile j+1 issued before softmax of j
    warp_spec: bool = False     # the warp-specialized kernel (descriptors built on the device)
    causal_split: bool = False  # causal, warp-specialized: unmasked tiles in one launch, diagonal + merge in a second
    persistent: bool = False    # warp-specialized, one program per SM walking the tiles
    flat_descs: bool = True     # persistent: all heads under one descriptor set, built once, where valid
    lean_mask: bool = False     # warp-specialized causal: the mask as a min() against an arithmetic bound
    causal_pairs: bool = False  # warp-specialized causal: programs take query tiles i and n-1-i together

    def label(self):
        on = (("overlap", self.overlap), ("warp_spec", self.warp_spec), ("causal_split", self.causal_split),
              ("persistent", self.persistent), ("per-tile descriptors", self.persistent and not self.flat_descs),
              ("lean_mask", self.lean_mask), ("causal_pairs", self.causal_pairs))
        return "+".join(n for n, flag in on if flag) or "tma"


# Each warpgroup (4 warps) issues wgmma on 64 rows at a time. 128 query rows per program halve
# the K/V traffic from L2 compared with 64; they take two consumer warpgroups (8 warps, or 4 +
# a producer when warp-specialized). (BLOCK_M, BLOCK_N, num_warps, num_stages), best first.
_TMA_CONFIGS = {
    "small": [(128, 128, 8, 3), (128, 64, 8, 4), (64, 64, 4, 4)],
    "128": [(128, 128, 8, 2), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)],
    # head_dim 256: the fp32 accumulator alone is 128 registers a thread at 128 rows on 8 warps.
    "256": [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3)],
}
# Warp-specialized (num_warps per role, 12 warps in all). Only head_dim 64 and 128: below that a
# 128x128 score tile dwarfs the work per row, and at 256 two 64x256 fp32 accumulators leave the
# consumers too few registers; those head dims use the descriptor kernel.
# On the H200: three-stage warp-specialized kernels (128x64 at d=128, 128x128 at d=64) returned NaN,
# and 64-key tiles ran 11-16% slower than 128 (2026-11-29), so one config each: nothing to tune, which
# also spares the benchmarks a tuning pass per shape.
_WS_CONFIGS = {
    64: [(128, 128, 4, 2)],
    128: [(128, 128, 4, 2)],
}

SMEM_LIMIT_SM90 = 227 * 1024  # opt-in shared memory per block on H100/H200
MAX_ACC_REGS = 160  # fp32 accumulator + score tile registers a thread beyond which ptxas spills


def _family(head_dim):
    tile = head_dim_tile(head_dim)
    return "small" if tile <= 64 else str(tile)


def smem_bytes(cfg: TileConfig, head_dim: int, elem_bytes: int) -> int:
    """Shared memory the kernel needs at least: the Q tile, a K and a V buffer per pipeline stage,
    and the output tile staged for its TMA store. Barriers and layout padding add a little; the
    exact figure is the compiled kernel's metadata.shared."""
    return elem_bytes * head_dim * (2 * cfg.BLOCK_M + 2 * cfg.num_stages * cfg.BLOCK_N)


def acc_regs_per_thread(cfg: TileConfig, head_dim: int, warp_spec: bool) -> int:
    """fp32 registers each computing thread needs for the output accumulator and one score tile
    (warp-specialized: only the consumer warpgroups, BLOCK_M/64 of them, hold them)."""
    threads = 32 * (4 * max(1, cfg.BLOCK_M // 64) if warp_spec else cfg.num_warps)
    return (cfg.BLOCK_M * head_dim + cfg.BLOCK_M * cfg.BLOCK_N) // threads


def ws_capable(cfg: TileConfig, head_dim: int) -> bool:
    """Whether Triton 3.6 warp-specializes this config: four warps per role and 128 rows, so the
    data split gives each consumer warpgroup one 64-row wgmma tile (checked by compiling for
    sm90: other shapes compile without specialization or fail the pass). Only at a head size that
    is its own tile: the warp-specialized kernels build their descriptors on the device with the
    tile as the tensor's width, so a padded head size takes the descriptor kernel, whose host-built
    descriptors span the true width and zero-fill the rest."""
    return cfg.num_warps == 4 and cfg.BLOCK_M == 128 and head_dim in _WS_CONFIGS


def candidate_configs(head_dim, dtype, causal, seq_len, features=None, smem_limit=SMEM_LIMIT_SM90):
    """The TileConfigs worth timing for one shape, best guess first. Pruned: tiles that cannot fit
    in shared memory or would spill their accumulators; query tiles taller than the sequence
    rounded up to 64 (they compute only padding); key tiles wider than the sequence rounded up
    to 64; and, when causal, query tiles that are not a whole number of key tiles (the diagonal
    split needs that)."""
    feats = features or BEST
    family = _family(head_dim)
    ws_ok = head_dim in _WS_CONFIGS  # the true size: a padded one never warp-specializes (ws_capable)
    head_dim = head_dim_tile(head_dim)  # tiles, shared memory and registers are the padded size's
    elem = torch.tensor([], dtype=dtype).element_size()
    cap = max(64, triton.next_power_of_2(max(1, int(seq_len))))

    def fitting(table, ws):
        return [c for c in (TileConfig(*t) for t in table)
                if smem_bytes(c, head_dim, elem) <= smem_limit
                and acc_regs_per_thread(c, head_dim, ws) <= MAX_ACC_REGS
                and c.BLOCK_M <= cap and c.BLOCK_N <= cap
                and not (causal and c.BLOCK_M % c.BLOCK_N)]

    # Warp-specialized tiles are 128 rows tall; a shorter sequence, or another head_dim, gets the
    # descriptor kernel's configs.
    out = fitting(_WS_CONFIGS[head_dim], True) if feats.warp_spec and ws_ok else []
    out = out or fitting(_TMA_CONFIGS[family], False)
    if not out:  # keep the smallest tile rather than nothing; compiling it will say if it fails
        out = [min((TileConfig(*t) for t in _TMA_CONFIGS[family]),
                   key=lambda c: (c.BLOCK_M * c.BLOCK_N, smem_bytes(c, head_dim, elem)))]
    return out


BEST = Features(warp_spec=True)  # the kernel family hopper_attention uses (see best_features)

# Causal from this length on: the split schedule (v5) won on the H200 at N=16384 (1.04-1.06x of v4)
# and lost at 4096 (0.93-0.94x); its extra pass over O is linear in N, the masks it saves quadratic.
SPLIT_FROM_SEQ_LEN = 8192


def best_features(causal, seq_len):
    """What hopper_attention runs for this masking and length when not told, from the H200
    measurements: non-causal, the persistent kernel (v6: 1.13-1.14x of v4 at N=4096 and 16384);
    causal, persistent over pairs of query tiles with the arithmetic mask (v9: 1.09-1.10x of v4
    at N=4096, H200, 2026-11-29) below SPLIT_FROM_SEQ_LEN, and the split schedule (v5) from there."""
    if not causal:
        return Features(warp_spec=True, persistent=True)
    if seq_len >= SPLIT_FROM_SEQ_LEN:
        return Features(warp_spec=True, causal_split=True)
    return Features(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=True)


# ---------------------------------------------------------------------------------------------
# 3. The wrapper
# ---------------------------------------------------------------------------------------------


def hopper_attention(q, k, v, causal=False, sm_scale=None, *, config=None, features=None):
    """softmax(q kᵀ * sm_scale [+ causal mask]) v with the Hopper kernel.

    q, k, v: (batch, heads, seq_len, head_dim) float16/bfloat16 CUDA tensors on a compute
    capability 9.x GPU (see :func:`hopper_available`). config: None to choose among the pruned
    candidates (timed once per shape bucket), or a fixed dict(BLOCK_M=, BLOCK_N=, num_warps=,
    num_stages=). features: a :class:`Features`; None means :func:`best_features` for the shape.
    A repeated call replays the launches of the first call with the same key (kernels/attention/launcher.py).
    """
    return _cached_call(q, k, v, causal, sm_scale, config, features, for_test=False)


def run_for_test(q, k, v, causal=False, sm_scale=None, *, config=None, features=None):
    """hopper_attention without the availability check, for the CPU interpreter in tests."""
    if not interpreting():
        raise RuntimeError("run_for_test is for TRITON_INTERPRET=1 only; call hopper_attention")
    return _cached_call(q, k, v, causal, sm_scale, config or _INTERPRETER_CONFIG, features, for_test=True)


_CACHE = LaunchCache()


def _cached_call(q, k, v, causal, sm_scale, config, features, for_test):
    key, _, o = _CACHE.try_replay(q, k, v, (causal, sm_scale, config_key(config), features, for_test))
    if o is not None:
        return o
    check_inputs(q, k, v)
    scale = _hopper_scale(q, sm_scale)
    if not for_test:
        ok, why = hopper_available(q.device)
        if not ok:
            raise ValueError(f"the Hopper path cannot run here: {why}; use path='portable'")
    feats = best_features(causal, q.shape[2]) if features is None else features
    recorder = Recorder() if key is not None and replay_allowed() else PLAIN
    o = _run(q, k, v, causal, scale, config, feats, recorder)
    if recorder is not PLAIN:
        _CACHE.put(key, recorder.replay(o, None, q.device))
    return o


def _for_dispatch(q, k, v, causal, sm_scale, config, launcher):
    """The Hopper path of flash_attention (kernels/attention/dispatch.py): inputs checked, path available."""
    scale = _hopper_scale(q, sm_scale)
    o = _run(q, k, v, causal, scale, config, best_features(causal, q.shape[2]), launcher)
    last = _last_launch
    return o, dict(last["config"], maxnreg=None, autotuned=last["autotuned"], features=last["features"].label())


dispatch.register_path(dispatch.KernelPath(
    name="hopper", title="Hopper", dtypes=HALF_DTYPES, available=hopper_available, run=_for_dispatch,
    targets=("sm90",)))


def _hopper_scale(q, sm_scale):
    """The checks only this path needs (dtype, a positive scale); returns the softmax scale."""
    if q.dtype not in HALF_DTYPES:
        raise ValueError(f"the Hopper path runs float16 or bfloat16, got {q.dtype} "
                         "(use path='portable' for float32)")
    return softmax_scale(q.shape[-1], sm_scale)


# Under TRITON_INTERPRET=1 (tests only): small tiles keep the CPU fast. The interpreter has no
# warpgroups, so the 64-row minimum of a real wgmma does not apply there.
_INTERPRETER_CONFIG = TileConfig(16, 16, 4, 1)

_last_launch = None


def last_launch():
    """What the last Hopper launch ran: dict(config, features, kernel, autotuned, warp_specialized),
    or None before the first. `kernel` is Triton's CompiledKernel (None under the interpreter):
    the iterations phase reads registers (.n_regs) and shared memory (.metadata.shared) there."""
    return None if _last_launch is None else dict(_last_launch)


def _remember(record):
    global _last_launch
    _last_launch = record


def _run(q, k, v, causal, scale, config, feats, launcher):
    """Choose the tile config, get the inputs ready and launch; returns o."""
    q, k, v = (launcher.input(name, t, copy=not _tma_compatible(t)) for name, t in (("q", q), ("k", k), ("v", v)))
    o = launcher.empty("o", q.shape, q.dtype, q.device)
    if config is not None:
        cfg, autotuned = _config_from(config, causal), False
    elif interpreting():
        cfg, autotuned = _INTERPRETER_CONFIG, False
    else:
        cfg, autotuned = _choose_config(q, k, v, causal, scale, feats), True
    if q.is_cuda and q.device.index != torch.cuda.current_device():
        with torch.cuda.device(q.device):
            kernel, ws = _launch(q, k, v, o, causal, scale, cfg, feats, launcher)
    else:  # the common case: no device context to enter
        kernel, ws = _launch(q, k, v, o, causal, scale, cfg, feats, launcher)
    record = dict(config=cfg.as_dict(), features=feats, autotuned=autotuned, warp_specialized=ws,
                  kernel=None if interpreting() else kernel)
    _remember(record)
    launcher.on_replay(_remember, record)
    return o


def _tma_compatible(t):
    """A TMA descriptor needs unit stride along head_dim, a 16-byte aligned base and 16-byte
    multiples for the other strides."""
    e = t.element_size()
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all((s * e) % 16 == 0 for s in t.stride()[:-1])


def _config_from(config, causal):
    """A TileConfig from the dict a caller passed (or a TileConfig); ValueError if unusable."""
    if isinstance(config, TileConfig):
        cfg = config
    else:
        if not isinstance(config, dict):
            raise ValueError(f"config must be a dict or TileConfig, got {type(config).__name__}")
        keys = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
        unknown = set(config) - keys - {"maxnreg"}
        if unknown:
            raise ValueError(f"config keys must be among {sorted(keys)}, got {sorted(unknown)}")
        if config.get("maxnreg") is not None:
            raise ValueError("maxnreg is not supported on the Hopper path: the wgmma accumulators "
                             "must stay in registers")
        if "BLOCK_M" not in config or "BLOCK_N" not in config:
            raise ValueError("config needs BLOCK_M and BLOCK_N")
        cfg = TileConfig(config["BLOCK_M"], config["BLOCK_N"], config.get("num_warps", 4),
                         config.get("num_stages", 2))
    check_tile("BLOCK_M", cfg.BLOCK_M)
    check_tile("BLOCK_N", cfg.BLOCK_N)
    if not interpreting() and cfg.BLOCK_M < 16 * cfg.num_warps:
        raise ValueError(f"BLOCK_M={cfg.BLOCK_M} is too small for {cfg.num_warps} warps: wgmma gives "
                         "each warp 16 rows (use BLOCK_M >= 16 * num_warps)")
    if causal and cfg.BLOCK_M % cfg.BLOCK_N:
        raise ValueError(f"causal needs BLOCK_M to be a multiple of BLOCK_N, got {cfg.BLOCK_M} and {cfg.BLOCK_N}")
    return cfg


def _alloc_scratch(size, alignment, stream):
    """Global scratch for the descriptors each program builds on the device."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _launch(q, k, v, o, causal, scale, cfg: TileConfig, feats: Features, launcher=PLAIN):
    """Launch the kernel(s) writing o; returns (the main kernel's CompiledKernel, warp-specialized?).
    A config the warp-specialized kernel cannot split (see ws_capable) runs the descriptor kernel."""
    interp = interpreting()
    batch, heads, seq_len, head_dim = q.shape
    grid = (triton.cdiv(seq_len, cfg.BLOCK_M), batch * heads)
    common = dict(HEAD_DIM=head_dim_tile(head_dim), CAUSAL=bool(causal), BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N,
                  UPCAST=interp, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    # Under the interpreter (tests) the warp-specialized kernel runs at any tile size, unsplit.
    if feats.warp_spec and (ws_capable(cfg, head_dim) or (interp and head_dim in HEAD_DIM_TILES)):
        triton.set_allocator(_alloc_scratch)
        # EVEN_N only matters without a causal mask (which covers the tail too): fixing it when
        # causal saves a compilation per ragged length.
        even = bool(causal) or seq_len % cfg.BLOCK_N == 0
        pairs = bool(causal) and feats.causal_pairs
        if (feats.persistent or pairs) and not (causal and feats.causal_split):
            rows = _row_positions(q.device, grid[0] * cfg.BLOCK_M)
            flat = feats.flat_descs and _flat_ok(q, k, v, o, cfg)
            units = (grid[0] + 1) // 2 * grid[1] if pairs else grid[0] * grid[1]
            # Not persistent (pairs only): one program per unit, the hardware deals them out.
            n_prog = min(units, device_sm_count(q.device)) if feats.persistent else units
            kernel = launcher.launch(
                _hopper_fwd_ws_persistent, (n_prog,),
                q, k, v, o, rows, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                heads, batch * heads, seq_len, rows.numel(), scale * LOG2E, EVEN_N=even,
                WARP_SPEC=not interp, FLAT=flat, LEAN=feats.lean_mask, PAIRS=pairs, **common)
            return kernel, not interp
        split = bool(causal) and feats.causal_split
        rows = _row_positions(q.device, grid[0] * cfg.BLOCK_M)
        rows_len = grid[0] * cfg.BLOCK_M  # LSE row stride: a multiple of BLOCK_M keeps TMA aligned
        lse = launcher.empty("lse", (batch * heads, rows_len), torch.float32, q.device) if split else rows
        kernel = launcher.launch(
            _hopper_fwd_ws, grid,
            q, k, v, o, rows, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
            heads, seq_len, rows_len if split else rows.numel(), scale * LOG2E, EVEN_N=even,
            WARP_SPEC=not interp, OFFDIAG=split, LEAN=feats.lean_mask, **common)
        if split:
            launcher.launch(_diag_merge, grid, *_host_descs(q, k, v, o, cfg), lse, heads, seq_len, rows_len,
                            scale * LOG2E, HEAD_DIM=head_dim, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N,
                            UPCAST=interp, num_warps=8, num_stages=2)
        return kernel, not interp
    kernel = launcher.launch(_hopper_fwd, grid, *_host_descs(q, k, v, o, cfg), heads, seq_len, scale * LOG2E,
                             OVERLAP=feats.overlap, **common)
    return kernel, False


_ROWS: dict = {}


def _row_positions(device, n):
    """int32 0, 1, 2, ... (at least n of them, a power of two) on `device`: the query positions
    the warp-specialized kernel's causal mask loads through a descriptor. Kept per device."""
    key = (device.type, device.index)
    rows = _ROWS.get(key)
    if rows is None or rows.numel() < n:
        rows = torch.arange(triton.next_power_of_2(max(n, 1024)), dtype=torch.int32, device=device)
        _ROWS[key] = rows
    return rows


def _flat_ok(q, k, v, o, cfg):
    """Whether the persistent kernel may treat all heads as one (B*H*N, d) matrix: contiguous
    tensors, and no tile crossing the end of a head."""
    n = q.shape[2]
    return (all(t.is_contiguous() for t in (q, k, v, o)) and n % cfg.BLOCK_M == 0 and n % cfg.BLOCK_N == 0)


def _host_descs(q, k, v, o, cfg):
    """4-D descriptors over the whole tensors, one (1, 1, rows, head tile) box each. The tensor's
    width is the true head size: a box reads zeros past it and a store stops there (every multiple
    of 8 keeps a half-precision row a multiple of 16 bytes, as TMA needs)."""
    d = head_dim_tile(q.shape[-1])
    return [TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, d])
            for t, rows in ((q, cfg.BLOCK_M), (k, cfg.BLOCK_N), (v, cfg.BLOCK_N), (o, cfg.BLOCK_M))]


_tuned: dict = {}


def _choose_config(q, k, v, causal, scale, feats):
    """The pruned candidates timed once per (head_dim, dtype, causal, seq_len bucket, features,
    device); the fastest is kept. A candidate that does not compile or fit is skipped."""
    batch, heads, seq_len, head_dim = q.shape
    key = (head_dim, q.dtype, bool(causal), triton.next_power_of_2(seq_len), feats, q.device.index)
    if key not in _tuned:
        cands = candidate_configs(head_dim, q.dtype, causal, seq_len, feats)
        if len(cands) == 1:
            _tuned[key] = cands[0]
        else:
            o = torch.empty_like(q)
            timed = []
            for cfg in cands:
                try:
                    _launch(q, k, v, o, causal, scale, cfg, feats)  # compile outside the timing
                    ms = quick_bench(lambda: _launch(q, k, v, o, causal, scale, cfg, feats), return_mode="median")
                    timed.append((ms, cfg))
                except (triton.runtime.errors.OutOfResources, triton.CompilationError):
                    continue  # this config does not fit or compile here; the next one may
            if not timed:
                raise RuntimeError(f"no Hopper tile config could run {tuple(q.shape)} {q.dtype} causal={causal}")
            _tuned[key] = min(timed, key=lambda t: t[0])[1]
    return _tuned[key]


# ---------------------------------------------------------------------------------------------
# 5. What the compile matrix builds (kernels/aot.py): the Hopper variants a phase may launch
# ---------------------------------------------------------------------------------------------
def compile_spec(dtype, head_dim, causal, seq_len, cfg, feats, what, core):
    """One compile-matrix entry (kernels/aot.py): this path's launch on meta inputs of (2, 8, seq_len,
    head_dim), with a fixed config and features; `what` names it ("shipped", or a version)."""
    from ..aot import CompileSpec, meta

    q = meta(2, 8, seq_len, head_dim, dtype=dtype)
    label = (f"{what} {str(dtype).removeprefix('torch.')} d={head_dim} {'causal' if causal else 'full'} "
             f"N={seq_len} {cfg.label()} {feats.label()}")
    return CompileSpec(label, lambda: _launch(q, q, q, torch.empty_like(q), causal, head_dim ** -0.5, cfg, feats),
                       tensor_cores=True, core=core)


def configs_for(fixed, head_dim, dtype, causal, seq_len, feats, smem_limit=None):
    """The configs a launch may run: `fixed` (a version's recorded config, or None) or the pruned candidates."""
    return ([_config_from(fixed, causal)] if fixed is not None
            else candidate_configs(head_dim, dtype, causal, seq_len, feats, smem_limit))


def compile_specs(target):
    """Compute capability 9.x only. The shipped path as bench, correctness and profile run it
    (best_features per masking and length, every pruned candidate config, at every tile size and
    the padded sizes of PADDED_HEAD_DIMS, with the ragged and length-1 specialisations of seq_len);
    the recorded versions the iterations phase times are kernels/attention/versions.py's own specs. Core (the default test, which must
    stay short): float16 with the first candidate at head_dims 64, 128 and 192 (a padded size),
    bfloat16 at 128."""
    if target.capability[0] != 9:
        return []
    out = []
    for dtype in HALF_DTYPES:
        half = dtype == torch.float16
        for head_dim in HEAD_DIM_TILES + PADDED_HEAD_DIMS:
            for causal in (False, True):
                for n in (2048, SPLIT_FROM_SEQ_LEN) + ((1, 17) if head_dim == 64 else ()):
                    feats = best_features(causal, n)
                    cands = candidate_configs(head_dim, dtype, causal, n, feats, target.smem_per_block)
                    i_core = head_dim == 128 or (half and head_dim in (64, 192) and n > 17)
                    out += [compile_spec(dtype, head_dim, causal, n, c, feats, "shipped", i_core and i == 0)
                            for i, c in enumerate(cands)]
    return out
