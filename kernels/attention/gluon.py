"""
Fused attention forward for Hopper (sm90), written in Gluon
===========================================================

The online-softmax algorithm of :mod:`kernels.attention.portable` once more, this time in Gluon
(``triton.experimental.gluon``), Triton's lower-level dialect. Where ``tl.dot`` leaves the
schedule to the compiler, Gluon states it: which warps run which code, which shared-memory
buffer holds which tile, when a TMA copy is issued, and which mbarrier says it has landed.
That is what FlashAttention-3's recipe for Hopper needs and Triton 3.6's automatic warp
specialization cannot express (it pipelines one inner loop, so the pipeline drains and refills
at every query tile):

- **TMA copies, mbarriers and warpgroup MMA.** Every tile moves by one bulk copy (rows past
  ``seq_len`` arrive as zeros, stores past it are clipped); the copy signals an mbarrier; the
  score matmul ``Q Kᵀ`` reads both operands from shared memory and ``P V`` reads ``P`` from
  registers (``wgmma``).
- **A producer warp with cross-tile prefetch** (``g2`` on): a persistent program walks its list
  of query tiles; one warp only issues copies into a ring of K/V buffers (and a pair of Q
  buffers), so it fetches the next query tile's first keys while the consumers finish the last.
- **Two consumer warpgroups**, each owning 64 of a tile's 128 query rows, in separate
  partitions: each releases a buffer as soon as its own matmul has read it.
- **Softmax/GEMM overlap** (``g3`` on): a consumer issues ``Q K_{j+1}ᵀ`` and ``P_j V_j``
  back to back and computes the softmax of tile j+1 while ``P_j V_j`` runs.
- **Ping-pong** (``g4``): the two consumers take turns issuing their matmuls (a pair of
  mbarriers passes the turn), so one runs its softmax while the other's matmuls occupy the
  tensor cores.
- **A balanced causal walk** (``g5``-``g7``): causal query tiles carry unequal work, so the host
  plans which program takes which tile; ``g7`` list-schedules them and hands the kernel a table.
- **One warpgroup per tile at d=64** (``g8``): ``g1``'s non-persistent kernel with its 128-row tile
  on 4 warps, two programs to an SM.
- **Longest first across heads** (``g9``, causal): ``g8`` on a one-dimensional grid whose programs
  take the query tiles longest first across the heads of a group that fits the L2, so the
  hardware, handing out programs in index order, list-schedules the whole grid; ``g10`` does the
  same on a 64-row tile, three programs to an SM; ``g16`` adds the softmax/GEMM overlap inside its
  one warpgroup (slower than ``g10``: the notes say why).
- **Masks only where needed:** key tiles wholly visible to every query row of the tile run
  without a mask; only the diagonal tile (causal) or the ragged last tile computes one.

The file reads top to bottom: the jitted helpers, the kernels, availability and input checks,
the launcher and the public :func:`gluon_attention`, a compile-only entry point for machines
without a GPU (:func:`compile_for_target`; :func:`compile_specs` for the compile matrix), and the
path flash_attention takes here. Each step of the journey (``GLUON_VERSIONS``) and the tiles each
kernel runs with are in gluon_versions.py, its notes (the change, the prediction written before it
was measured, the outcome) in kernels/attention/notes.md. Gluon's Hopper operations do not run
under Triton's CPU interpreter: on the CPU these kernels can only be compiled.
"""

from __future__ import annotations

import functools
import math

import torch
import triton

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..common import (HALF_DTYPES, HEAD_DIMS as ANY_HEAD_DIMS, LOG2E, PADDED_HEAD_DIMS, capability, device_index,
                     device_sm_count, head_dim_tile, interpreting, l2_bytes)
from ..gluon_compat import async_load, thread_barrier
from .gluon_parts import (EMPTY_BARRIER, TURN_BARRIER, as_4d, await_empty, key_tiles, mma_layout, named_barrier,
                          p_operand, release, rescale, row_sums_start, softmax_update, store_output, tile_coords)
# The tile kernel keeps its private name: the profiler and the report know it as _g1_kernel.
from .gluon_tile import _g1_kernel
from .gluon_schedule import ListSchedule, lpt_head_group, plan_list_schedule, plan_schedule
from .gluon_versions import DEFAULT_VERSION, GLUON_VERSIONS, HEAD_DIMS, get_version, version_plan
from .launcher import PLAIN

DTYPES = HALF_DTYPES
_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
_SIG_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


# The tile kernel (g1, g8-g10, g16-g18, g20-g22) is in gluon_tile.py; gluon.py launches it.

# ---------------------------------------------------------------------------------------------
# 2b. g2-g4: a persistent, warp-specialized kernel: one producer warp, two consumer warpgroups
# ---------------------------------------------------------------------------------------------
#
# A tile is 128 query rows of one head; consumer warpgroup w owns rows [64 w, 64 w + 64). The
# producer and both consumers walk the same list of tiles (program p takes tiles p, p + P, ...,
# head-major so the programs running together share a few heads' K and V in L2) and the same
# key tiles in the same order, so ring positions and mbarrier phases follow from one counter.
#
# Shared memory: Q as 2 warpgroups x 2 slots of [64, head_dim] (slot = tile parity, so the
# producer loads the next tile's Q during this one; the output goes out through the Q slot it
# came in), and K and V rings of STAGES [BLOCK_N, head_dim] buffers. Barriers: *_ready (the
# producer's copy landed, count 1) and *_empty (released: count 1 for a Q slot, 2 for K and V,
# one arrival per consumer), and `turn` (ping-pong: whose turn it is to issue matmuls).
# mbarriers start in phase 0 with parity 1 counted as complete, so a first wait on parity 1
# passes: that is how every buffer starts out empty.


@gluon.jit
def _walk_length(sched, total_tiles, SCHEDULED: gl.constexpr):
    """How many query tiles this program works on: its count in the host's table (g7), else every
    num_programs-th tile of the walk from its own index."""
    if SCHEDULED:
        n = gl.load(sched + gl.program_id(0))
    else:
        n = gl.cdiv(total_tiles - gl.program_id(0), gl.num_programs(0))
    return n


@gluon.jit
def _walk_tile(i, sched, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL: gl.constexpr,
               SCHEDULED: gl.constexpr):
    """(batch, head, query tile) of this program's i-th tile. The table (g7) holds the programs'
    counts, then round by round one code per program: batch-head x tiles_m + query tile."""
    p = gl.num_programs(0)
    if SCHEDULED:
        code = gl.load(sched + (i + 1) * p + gl.program_id(0))
        bh = code // tiles_m
        b, h, m = bh // num_heads, bh % num_heads, code - bh * tiles_m
    else:
        b, h, m = tile_coords(gl.program_id(0) + i * p, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL)
    return b, h, m


@gluon.jit
def _ws_producer(descs, smem, bars, walk, CAUSAL: gl.constexpr, STAGES: gl.constexpr, SCHEDULED: gl.constexpr,
                 CONSUMERS: gl.constexpr, NAMED_RELEASE: gl.constexpr, SPLIT: gl.constexpr):
    """The copies: each tile's Q, then its key tiles' K and V through the ring. SPLIT (g15): every box
    comes in two, the head's first 64 columns (q_desc...) and the rest (qb_desc..., a narrower box from
    column 64), both counted on one mbarrier. The tuples are _ws_kernel's: descs the eight descriptors,
    smem the six buffers, walk the tile walk's arguments."""
    q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc = descs
    q_smem, k_smem, v_smem, qb_smem, kb_smem, vb_smem = smem
    sched, num_heads, seq_len, tiles_m, total_tiles, head_group, snake = walk
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    HALF: gl.constexpr = q_desc.block_type.shape[2]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
    HEAD_B: gl.constexpr = qb_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    Q_BYTES: gl.constexpr = q_desc.block_type.nbytes + SPLIT * qb_desc.block_type.nbytes
    K_BYTES: gl.constexpr = k_desc.block_type.nbytes + SPLIT * kb_desc.block_type.nbytes
    V_BYTES: gl.constexpr = v_desc.block_type.nbytes + SPLIT * vb_desc.block_type.nbytes
    kv = 0
    it = 0
    for t in range(_walk_length(sched, total_tiles, SCHEDULED)):
        b, h, m = _walk_tile(t, sched, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL, SCHEDULED)
        start_m = m * (CONSUMERS * HALF)
        n_full, n_total = key_tiles(start_m, seq_len, CONSUMERS * HALF, BLOCK_N, CAUSAL)
        q_slot = it % 2
        q_phase = (it // 2) & 1
        for w in gl.static_range(CONSUMERS):
            i = 2 * w + q_slot
            mbarrier.wait(q_empty.index(i), q_phase ^ 1)
            mbarrier.expect(q_ready.index(i), Q_BYTES)
            async_load(q_desc, [b, h, start_m + w * HALF, 0], q_ready.index(i),
                                            as_4d(q_smem.index(i), HALF, HEAD_DIM))
            if SPLIT:
                async_load(qb_desc, [b, h, start_m + w * HALF, HEAD_DIM], q_ready.index(i),
                           as_4d(qb_smem.index(i), HALF, HEAD_B))
        for j in range(n_total):
            slot = kv % STAGES
            phase = (kv // STAGES) & 1
            await_empty(k_empty, slot, phase, kv, EMPTY_BARRIER + slot, NAMED_RELEASE, CONSUMERS, STAGES)
            mbarrier.expect(k_ready.index(slot), K_BYTES)
            async_load(k_desc, [b, h, j * BLOCK_N, 0], k_ready.index(slot),
                                            as_4d(k_smem.index(slot), BLOCK_N, HEAD_DIM))
            if SPLIT:
                async_load(kb_desc, [b, h, j * BLOCK_N, HEAD_DIM], k_ready.index(slot),
                           as_4d(kb_smem.index(slot), BLOCK_N, HEAD_B))
            await_empty(v_empty, slot, phase, kv, EMPTY_BARRIER + STAGES + slot, NAMED_RELEASE, CONSUMERS, STAGES)
            mbarrier.expect(v_ready.index(slot), V_BYTES)
            async_load(v_desc, [b, h, j * BLOCK_N, 0], v_ready.index(slot),
                                            as_4d(v_smem.index(slot), BLOCK_N, HEAD_DIM))
            if SPLIT:
                async_load(vb_desc, [b, h, j * BLOCK_N, HEAD_DIM], v_ready.index(slot),
                           as_4d(vb_smem.index(slot), BLOCK_N, HEAD_B))
            kv += 1
        it += 1


@gluon.jit
def _ws_scores(q, k_smem, k_ready, kv, s_layout: gl.constexpr, STAGES: gl.constexpr):
    """Issue Q K_kvᵀ once its copy has landed; returns the async token and the slot."""
    slot = kv % STAGES
    mbarrier.wait(k_ready.index(slot), (kv // STAGES) & 1)
    HALF: gl.constexpr = q.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    zero = gl.zeros([HALF, BLOCK_N], gl.float32, s_layout)
    return warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True), slot


@gluon.jit
def _ws_consumer_plain(q, k_smem, v_smem, bars, kv, n_full, n_total, m_i, l_i, acc, qk_scale, rows, seq_len,
                       s_layout: gl.constexpr, o_layout: gl.constexpr, CAUSAL: gl.constexpr,
                       STAGES: gl.constexpr):
    """g2's key loop: each matmul waited on before the next step, buffers released at once."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    for j in range(n_total):
        s, slot = _ws_scores(q, k_smem, k_ready, kv, s_layout, STAGES)
        s = warpgroup_mma_wait(0, deps=(s, ))
        mbarrier.arrive(k_empty.index(slot))
        cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if j < n_full:
            p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, cols, seq_len, False, CAUSAL)
        else:
            p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, cols, seq_len, True, CAUSAL)
        acc = rescale(acc, alpha, o_layout)
        p = p_operand(p, q.dtype, o_layout)
        mbarrier.wait(v_ready.index(slot), (kv // STAGES) & 1)
        acc = warpgroup_mma(p, v_smem.index(slot), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc, ))
        mbarrier.arrive(v_empty.index(slot))
        kv += 1
    return kv, m_i, l_i, acc


@gluon.jit
def _ws_scores_split(q, k_smem, qb, kb_smem, k_ready, kv, s_layout: gl.constexpr, STAGES: gl.constexpr,
                     SPLIT: gl.constexpr):
    """_ws_scores, and with SPLIT the head's second chunk accumulated onto the same scores."""
    s, slot = _ws_scores(q, k_smem, k_ready, kv, s_layout, STAGES)
    if SPLIT:
        s = warpgroup_mma(qb, kb_smem.index(slot).permute((1, 0)), s, is_async=True)
    return s, slot


@gluon.jit
def _ws_overlap_step(j, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i, l_i,
                     acc, acc_b, turns, qk_scale, rows, seq_len, WG: gl.constexpr, s_layout: gl.constexpr,
                     o_layout: gl.constexpr, ob_layout: gl.constexpr, MASK: gl.constexpr, CAUSAL: gl.constexpr,
                     STAGES: gl.constexpr, PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr,
                     NAMED_RELEASE: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                     PACK_P: gl.constexpr):
    """Key tile j (>= 1) of the overlapped loop: issue Q K_jᵀ and P_{j-1} V_{j-1} back to back,
    then compute the softmax of tile j while P_{j-1} V_{j-1} runs on the tensor cores. SPLIT: each
    matmul is two, one per chunk of the head (acc_b and pb are the second chunk's output and P)."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    HALF: gl.constexpr = q.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    slot = kv % STAGES
    mbarrier.wait(k_ready.index(slot), (kv // STAGES) & 1)
    mbarrier.wait(v_ready.index(prev_slot), prev_phase)
    if PINGPONG == 1:
        # Warpgroup 0 goes first: its first wait is on parity 1, which a fresh barrier passes.
        mbarrier.wait(turn.index(WG), (turns & 1) ^ (1 - WG))
    if PINGPONG == 2:
        named_barrier(TURN_BARRIER + WG, True)
    zero = gl.zeros([HALF, BLOCK_N], gl.float32, s_layout)
    s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    if SPLIT:
        s = warpgroup_mma(qb, kb_smem.index(slot).permute((1, 0)), s, is_async=True)
    acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
    if SPLIT:
        acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
    if PINGPONG == 1:
        mbarrier.arrive(turn.index(1 - WG))
    if PINGPONG == 2:
        named_barrier(TURN_BARRIER + (WG + 1) % CONSUMERS, False)
    # wgmma groups retire in order: with the P V groups (one, or two with SPLIT) still out, Q K_jᵀ is done.
    s = warpgroup_mma_wait(1 + SPLIT, deps=(s, ))
    release(k_empty, slot, EMPTY_BARRIER + slot, NAMED_RELEASE, CONSUMERS)
    cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    p_new, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, cols, seq_len, MASK, CAUSAL, EX2_EMU, TREE)
    if PACK_P == 2:  # g27: the next P, packed, into registers of its own while P_{j-1} V_{j-1} still runs
        p_next = p_operand(p_new, q.dtype, o_layout, True)
        if SPLIT:
            pb_next = p_operand(p_new, q.dtype, ob_layout, True)
    # P's registers are an operand of the matmul in flight: keep them alive (and unwritten) until it retires.
    if SPLIT:
        acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
    else:
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, NAMED_RELEASE, CONSUMERS)
    acc = rescale(acc, alpha, o_layout)
    if PACK_P == 2:
        p = p_next
    else:
        p = p_operand(p_new, q.dtype, o_layout, PACK_P == 1)
    if SPLIT:
        acc_b = rescale(acc_b, alpha, ob_layout)
        if PACK_P == 2:
            pb = pb_next
        else:
            pb = p_operand(p_new, q.dtype, ob_layout, PACK_P == 1)
    return kv + 1, p, pb, slot, (kv // STAGES) & 1, m_i, l_i, acc, acc_b, turns + 1


@gluon.jit
def _ws_key_steps(q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot,
                  prev_phase, m_i, l_i, acc, acc_b, qk_scale, rows, seq_len, WG: gl.constexpr, s_layout: gl.constexpr,
                  o_layout: gl.constexpr, ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                  PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, NAMED_RELEASE: gl.constexpr, SPLIT: gl.constexpr,
                  EX2_EMU: gl.constexpr, TREE: gl.constexpr, PACK_P: gl.constexpr):
    """Key tiles 1 to n_total - 1 of a query tile whose tile 0 has been scored: the unmasked ones, then those the
    mask or the sequence's end cuts."""
    for j in range(1, gl.maximum(n_full, 1)):
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns = _ws_overlap_step(
            j, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b,
            turns, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, False, CAUSAL, STAGES, PINGPONG,
            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P)
    for j in range(gl.maximum(n_full, 1), n_total):
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns = _ws_overlap_step(
            j, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b,
            turns, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, True, CAUSAL, STAGES, PINGPONG,
            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P)
    return kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns


@gluon.jit
def _ws_consumer_overlap(q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, m_i, l_i, acc,
                         acc_b, qk_scale, rows, seq_len, WG: gl.constexpr, s_layout: gl.constexpr,
                         o_layout: gl.constexpr, ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                         PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, NAMED_RELEASE: gl.constexpr,
                         SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr, PACK_P: gl.constexpr,
                         stored_q=-1):
    """stored_q >= 0 (g32, g33): the Q slot whose output store the previous tile left in flight; it is waited on
    and handed back to the producer once this tile's first scores are in, not before the tile starts."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    # Tile 0 alone: its scores, waited on; masked always (cheap on one tile, and right whether or
    # not it is whole).
    s, slot = _ws_scores_split(q, k_smem, qb, kb_smem, k_ready, kv, s_layout, STAGES, SPLIT)
    s = warpgroup_mma_wait(0, deps=(s, ))
    release(k_empty, slot, EMPTY_BARRIER + slot, NAMED_RELEASE, CONSUMERS)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, cols, seq_len, True, CAUSAL, EX2_EMU, TREE)
    if stored_q >= 0:
        tma.store_wait(0)
        mbarrier.arrive(q_empty.index(stored_q))
    pb = p_operand(p, q.dtype, ob_layout, PACK_P > 0)
    p = p_operand(p, q.dtype, o_layout, PACK_P > 0)
    prev_slot = slot
    prev_phase = (kv // STAGES) & 1
    kv += 1
    kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns = _ws_key_steps(
        q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot, prev_phase, m_i,
        l_i, acc, acc_b, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, CAUSAL, STAGES, PINGPONG,
        CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P)
    # The last P V.
    mbarrier.wait(v_ready.index(prev_slot), prev_phase)
    acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
    if SPLIT:
        acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
        acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
    else:
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, NAMED_RELEASE, CONSUMERS)
    return kv, turns, m_i, l_i, acc, acc_b


@gluon.jit
def _ws_consumer(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                 OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr, CONSUMERS: gl.constexpr,
                 NAMED_RELEASE: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                 PACK_P: gl.constexpr, LANE_SUM: gl.constexpr, LATE_RELEASE: gl.constexpr, CHAINED: gl.constexpr):
    """One consumer warpgroup's walk: its query tiles one after another, or (CHAINED, g34 and g35) each tile's last
    P V issued beside the next tile's first Q Kᵀ."""
    if CHAINED:
        _ws_consumer_chained(descs, smem, bars, walk, qk_scale, WG, CAUSAL, STAGES, PINGPONG, SCHEDULED, CONSUMERS,
                             SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM)
    else:
        _ws_consumer_tiles(descs, smem, bars, walk, qk_scale, WG, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                           CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM, LATE_RELEASE)


@gluon.jit
def _ws_chain_step(q, k_smem, qb, kb_smem, v_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, acc, acc_b,
                   l_i, qk_scale, rows, seq_len, s_layout: gl.constexpr, o_layout: gl.constexpr,
                   ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                   SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr, PACK_P: gl.constexpr):
    """The hand-over between two query tiles (g34, g35): the new tile's Q K_0ᵀ (q, kv) and the old tile's last
    P V (p, prev_slot, into acc) issued back to back, the new tile's first softmax computed while that P V runs.
    Returns the new tile's (kv, P operands, slot, phase, m_i, l_i) and the old tile's finished acc and acc_b."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    HALF: gl.constexpr = q.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    slot = kv % STAGES
    mbarrier.wait(k_ready.index(slot), (kv // STAGES) & 1)
    mbarrier.wait(v_ready.index(prev_slot), prev_phase)
    zero = gl.zeros([HALF, BLOCK_N], gl.float32, s_layout)
    s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    if SPLIT:
        s = warpgroup_mma(qb, kb_smem.index(slot).permute((1, 0)), s, is_async=True)
    acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
    if SPLIT:
        acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
    s = warpgroup_mma_wait(1 + SPLIT, deps=(s, ))
    release(k_empty, slot, EMPTY_BARRIER + slot, False, CONSUMERS)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    p_new, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, cols, seq_len, True, CAUSAL, EX2_EMU, TREE)
    # The old P's registers are an operand of the P V in flight: the new P goes to registers of its own.
    p_next = p_operand(p_new, q.dtype, o_layout, PACK_P > 0)
    pb_next = p_operand(p_new, q.dtype, ob_layout, PACK_P > 0)
    if SPLIT:
        acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
    else:
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, False, CONSUMERS)
    return kv + 1, p_next, pb_next, slot, (kv // STAGES) & 1, m_i, l_i, acc, acc_b


@gluon.jit
def _ws_consumer_chained(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr,
                         STAGES: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr,
                         CONSUMERS: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                         PACK_P: gl.constexpr, LANE_SUM: gl.constexpr):
    """g34, g35: the overlapped loop with no gap between query tiles. Every consumer warpgroup of a program ends
    a tile at the same key step (they share its keys), so in _ws_consumer_tiles the tensor cores wait, at every
    tile's end, for each warpgroup's last P V, its output and its next tile's first scores and softmax, one after
    another. Here a tile's last P V runs beside the next tile's first Q Kᵀ and softmax (_ws_chain_step), and its
    output leaves after them."""
    q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc = descs
    q_smem, k_smem, v_smem, qb_smem, kb_smem, vb_smem = smem
    sched, num_heads, seq_len, tiles_m, total_tiles, head_group, snake = walk
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    HALF: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    HEAD_B: gl.constexpr = qb_smem.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = mma_layout(4, BLOCK_N)
    o_layout: gl.constexpr = mma_layout(4, HEAD_DIM)
    ob_layout: gl.constexpr = mma_layout(4, HEAD_B)
    gl.static_assert(PINGPONG == 2, "the chained walk passes turns by named barriers")
    if WG == 0:
        named_barrier(TURN_BARRIER, False)  # warpgroup 0 goes first (see _ws_consumer_tiles)
    kv = 0
    turns = 0
    # What the loop carries from one tile to the next: the tile's place, its row sums and accumulators, and the
    # P of its last key tile, whose P V the next tile's first step runs.
    b = 0
    h = 0
    row0 = 0
    i = 0
    l_i = row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM)
    acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
    acc_b = gl.zeros([HALF, HEAD_B], gl.float32, ob_layout)
    p = p_operand(gl.zeros([HALF, BLOCK_N], gl.float32, s_layout), q_desc.dtype, o_layout, PACK_P > 0)
    pb = p_operand(gl.zeros([HALF, BLOCK_N], gl.float32, s_layout), q_desc.dtype, ob_layout, PACK_P > 0)
    prev_slot = 0
    prev_phase = 0
    n_tiles = _walk_length(sched, total_tiles, SCHEDULED)
    for t in range(n_tiles):
        b_o = b
        h_o = h
        row0_o = row0
        i_o = i
        l_o = l_i
        b, h, m = _walk_tile(t, sched, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL, SCHEDULED)
        start_m = m * (CONSUMERS * HALF)
        n_full, n_total = key_tiles(start_m, seq_len, CONSUMERS * HALF, BLOCK_N, CAUSAL)
        row0 = start_m + WG * HALF
        rows = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
        i = 2 * WG + t % 2
        q = q_smem.index(i)
        qb = qb_smem.index(i)
        mbarrier.wait(q_ready.index(i), (t // 2) & 1)
        if t == 0:
            # The walk's first tile: its first scores alone, as in _ws_consumer_overlap.
            s, slot = _ws_scores_split(q, k_smem, qb, kb_smem, k_ready, kv, s_layout, STAGES, SPLIT)
            s = warpgroup_mma_wait(0, deps=(s, ))
            release(k_empty, slot, EMPTY_BARRIER + slot, False, CONSUMERS)
            cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
            p_new, alpha, m_i, l_i = softmax_update(s, m_i, row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM),
                                                    qk_scale, rows, cols, seq_len, True, CAUSAL, EX2_EMU, TREE)
            pb = p_operand(p_new, q.dtype, ob_layout, PACK_P > 0)
            p = p_operand(p_new, q.dtype, o_layout, PACK_P > 0)
            prev_slot = slot
            prev_phase = (kv // STAGES) & 1
            kv += 1
        else:
            kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b = _ws_chain_step(
                q, k_smem, qb, kb_smem, v_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, acc, acc_b,
                row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM), qk_scale, rows, seq_len, s_layout, o_layout,
                ob_layout, CAUSAL, STAGES, CONSUMERS, SPLIT, EX2_EMU, TREE, PACK_P)
            # The tile before is done: its output leaves through its Q slot, which then goes back to the producer.
            store_output(acc, l_o, q_smem.index(i_o), o_desc, b_o, h_o, row0_o, o_layout, HALF, HEAD_DIM)
            if SPLIT:
                store_output(acc_b, l_o, qb_smem.index(i_o), ob_desc, b_o, h_o, row0_o, ob_layout, HALF, HEAD_B,
                             HEAD_DIM)
            mbarrier.arrive(q_empty.index(i_o))
        acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
        acc_b = gl.zeros([HALF, HEAD_B], gl.float32, ob_layout)
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns = _ws_key_steps(
            q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot, prev_phase,
            m_i, l_i, acc, acc_b, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, CAUSAL, STAGES,
            PINGPONG, CONSUMERS, False, SPLIT, EX2_EMU, TREE, PACK_P)
    if n_tiles > 0:  # the last tile's last P V and its output
        mbarrier.wait(v_ready.index(prev_slot), prev_phase)
        acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
        if SPLIT:
            acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
            acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
        else:
            acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, False, CONSUMERS)
        store_output(acc, l_i, q_smem.index(i), o_desc, b, h, row0, o_layout, HALF, HEAD_DIM)
        if SPLIT:
            store_output(acc_b, l_i, qb_smem.index(i), ob_desc, b, h, row0, ob_layout, HALF, HEAD_B, HEAD_DIM)


@gluon.jit
def _ws_consumer_tiles(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr,
                       STAGES: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr,
                       CONSUMERS: gl.constexpr, NAMED_RELEASE: gl.constexpr, SPLIT: gl.constexpr,
                       EX2_EMU: gl.constexpr, TREE: gl.constexpr, PACK_P: gl.constexpr, LANE_SUM: gl.constexpr,
                       LATE_RELEASE: gl.constexpr):
    q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc = descs
    q_smem, k_smem, v_smem, qb_smem, kb_smem, vb_smem = smem
    sched, num_heads, seq_len, tiles_m, total_tiles, head_group, snake = walk
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    HALF: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    HEAD_B: gl.constexpr = qb_smem.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = mma_layout(4, BLOCK_N)
    o_layout: gl.constexpr = mma_layout(4, HEAD_DIM)
    ob_layout: gl.constexpr = mma_layout(4, HEAD_B)
    gl.static_assert(OVERLAP or not SPLIT, "a split head runs on the overlapped loop only")
    kv = 0
    it = 0
    turns = 0
    if PINGPONG == 2:
        if WG == 0:
            # Warpgroup 0 goes first: it arrives at its own barrier, so its first sync finds the 256.
            named_barrier(TURN_BARRIER, False)
    for t in range(_walk_length(sched, total_tiles, SCHEDULED)):
        b, h, m = _walk_tile(t, sched, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL, SCHEDULED)
        start_m = m * (CONSUMERS * HALF)
        n_full, n_total = key_tiles(start_m, seq_len, CONSUMERS * HALF, BLOCK_N, CAUSAL)
        row0 = start_m + WG * HALF
        rows = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
        i = 2 * WG + it % 2
        q = q_smem.index(i)
        qb = qb_smem.index(i)
        mbarrier.wait(q_ready.index(i), (it // 2) & 1)
        m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        l_i = row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM)
        acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
        acc_b = gl.zeros([HALF, HEAD_B], gl.float32, ob_layout)
        if OVERLAP:
            stored_q = -1
            if LATE_RELEASE and it > 0:
                stored_q = 2 * WG + (it - 1) % 2
            kv, turns, m_i, l_i, acc, acc_b = _ws_consumer_overlap(
                q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, m_i, l_i, acc, acc_b,
                qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, CAUSAL, STAGES, PINGPONG, CONSUMERS,
                NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, stored_q)
        else:
            kv, m_i, l_i, acc = _ws_consumer_plain(q, k_smem, v_smem, bars, kv, n_full, n_total, m_i, l_i, acc,
                                                   qk_scale, rows, seq_len, s_layout, o_layout, CAUSAL, STAGES)
        # Q is dead: the output leaves through its slot, which is then handed back: at once, or (LATE_RELEASE, g32
        # and g33, overlapped loop only) with the store still in flight, once the next tile's first scores are in.
        late: gl.constexpr = LATE_RELEASE and OVERLAP
        store_output(acc, l_i, q, o_desc, b, h, row0, o_layout, HALF, HEAD_DIM, WAIT=not late)
        if SPLIT:
            store_output(acc_b, l_i, qb, ob_desc, b, h, row0, ob_layout, HALF, HEAD_B, HEAD_DIM, WAIT=not late)
        if not late:
            mbarrier.arrive(q_empty.index(i))
        it += 1
    if LATE_RELEASE:
        tma.store_wait(0)  # the last tile's store reads shared memory the block is about to give up


@gluon.jit(do_not_specialize=["num_heads", "seq_len", "tiles_m", "total_tiles", "head_group", "snake"])
def _ws_kernel(q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc, sched, num_heads, seq_len, tiles_m,
               total_tiles, head_group, snake, qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
               OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr, SCHEDULED: gl.constexpr,
               CONSUMERS: gl.constexpr = 2, PRODUCER_REGS: gl.constexpr = 24, NAMED_RELEASE: gl.constexpr = False,
               SPLIT: gl.constexpr = 0, EX2_EMU: gl.constexpr = 0, TREE: gl.constexpr = False,
               PACK_P: gl.constexpr = 0, LANE_SUM: gl.constexpr = False, LATE_RELEASE: gl.constexpr = False,
               CHAINED: gl.constexpr = False):
    """SPLIT=1 (g15): the head in two chunks, columns 0-63 through q_desc... and the rest through qb_desc...
    (boxes of 16 or 32 columns from column 64, over the same tensors), so a d=80 or d=96 head multiplies
    no zero columns; SPLIT=0 passes the first four descriptors again as the last four, unused."""
    HALF: gl.constexpr = q_desc.block_type.shape[2]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
    HEAD_B: gl.constexpr = qb_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    dtype: gl.constexpr = q_desc.dtype
    gl.static_assert(gl.num_warps() == 4, "the default partition is consumer warpgroup 0")
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF, HEAD_DIM], dtype)
    tile_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [2 * CONSUMERS, HALF, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    if SPLIT:
        qb_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF, HEAD_B], dtype)
        tile_b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_B], dtype)
        qb_smem = gl.allocate_shared_memory(dtype, [2 * CONSUMERS, HALF, HEAD_B], qb_layout)
        kb_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_B], tile_b_layout)
        vb_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_B], tile_b_layout)
    else:
        qb_smem = q_smem
        kb_smem = k_smem
        vb_smem = v_smem
    q_ready = gl.allocate_shared_memory(gl.int64, [2 * CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2 * CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * CONSUMERS):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=CONSUMERS)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=CONSUMERS)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    fence_async_shared()
    thread_barrier()
    bars = (q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn)
    descs = (q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc)
    smem = (q_smem, k_smem, v_smem, qb_smem, kb_smem, vb_smem)
    walk = (sched, num_heads, seq_len, tiles_m, total_tiles, head_group, snake)
    if CONSUMERS == 3:
        # g12 (d=64) and g24 (d=72-96): three 64-row consumer warpgroups on a 192-row tile, as FlashAttention-4 runs it.
        gl.warp_specialize([
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 0, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 1, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 2, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED)),
            (_ws_producer, (descs, smem, bars, walk, CAUSAL, STAGES, SCHEDULED, CONSUMERS, NAMED_RELEASE, SPLIT)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 0, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 1, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, NAMED_RELEASE, SPLIT, EX2_EMU, TREE, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED)),
            (_ws_producer, (descs, smem, bars, walk, CAUSAL, STAGES, SCHEDULED, CONSUMERS, NAMED_RELEASE, SPLIT)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# ---------------------------------------------------------------------------------------------
# 3. Availability and input checks
# ---------------------------------------------------------------------------------------------


def gluon_available(device=None):
    """(True, "") if these kernels can run on `device` (default: the current CUDA device), else
    (False, the reason). They need an sm90 GPU: wgmma exists on Hopper only."""
    if interpreting():
        return False, "Gluon's Hopper operations do not run under Triton's CPU interpreter (TRITON_INTERPRET=1)"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible to torch"
    device = torch.device("cuda") if device is None else torch.device(device)
    if device.type != "cuda":
        return False, f"needs a CUDA device, got {device.type}"
    major, minor = capability(device_index(device))  # asked once per device: flash_attention asks every call
    if (major, minor) != (9, 0):
        return False, f"needs an sm90 (Hopper) GPU for wgmma; {torch.cuda.get_device_name(device)} is sm{major}{minor}"
    return True, ""


def _check_inputs(q, k, v, sm_scale):
    """Everything that can be checked without a GPU, each with what to do about it."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"gluon_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"gluon_attention: {name} must be 4-D (batch, heads, seq_len, head_dim), "
                             f"got shape {tuple(t.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("gluon_attention: q, k and v must have the same shape (self-attention, as many key as "
                         f"query heads), got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError("gluon_attention: q, k and v must all be float16 or all bfloat16, got "
                         f"{q.dtype}, {k.dtype}, {v.dtype}; cast them with .to(torch.float16)")
    batch, heads, seq_len, head_dim = q.shape
    if not takes_head_dim(head_dim):
        raise ValueError(f"gluon_attention: head_dim must be a multiple of 8 from 40 to 128 (the sizes its 64 and "
                         f"128 tiles hold), got {head_dim}; use kernels.attention.flash_attention for other head sizes")
    if min(batch, heads, seq_len) < 1:
        raise ValueError(f"gluon_attention: batch, heads and seq_len must be at least 1, got {tuple(q.shape)}")
    if max(batch * heads, seq_len) >= 2**31:
        raise ValueError(f"gluon_attention: batch * heads and seq_len must be below 2**31, got {tuple(q.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"gluon_attention: q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if sm_scale is not None and not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"gluon_attention: sm_scale must be a finite number > 0 (or None for 1/sqrt(head_dim)), "
                         f"got {sm_scale!r}")
    if q.device.type != "cuda":
        raise ValueError(f"gluon_attention: runs on an sm90 CUDA GPU only, got tensors on {q.device}; "
                         "kernels.attention.flash_attention runs elsewhere")


def takes_head_dim(head_dim) -> bool:
    """Whether these kernels run a head size: one of their tiles, or a multiple of 8 whose next tile
    is one of them. The descriptors span the tensor's true width and their boxes the tile, so TMA
    reads zeros into the columns past it (they add nothing to a score or to P V) and the output's
    store stops at it; the kernels are the tile's, unchanged. (Below 40 the 64 tile would be mostly
    padding; the other paths' smaller tiles take those sizes.)"""
    return head_dim in ANY_HEAD_DIMS and head_dim_tile(head_dim) in HEAD_DIMS


# ---------------------------------------------------------------------------------------------
# 4. The launcher and the public entry point
# ---------------------------------------------------------------------------------------------


def _tma_ready(t):
    """A TMA descriptor needs a 16-byte aligned base, unit last stride, 16-byte multiple strides."""
    es = t.element_size()
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(s > 0 and (s * es) % 16 == 0 for s in t.stride()[:-1]))


def _tma_operand(t, name="q", launcher=PLAIN):
    """`t` itself if TMA can address it, else a copy with canonical strides (the launcher's copy;
    torch's .contiguous() would keep odd strides on size-1 dimensions, which TMA still refuses)."""
    return launcher.input(name, t, copy=not _tma_ready(t))


def _descriptor(t, rows, cols=None):
    """A 4-D descriptor over `t` at its true width whose box is `cols` columns wide, by default the
    head-size tile (see takes_head_dim)."""
    block = [1, 1, rows, cols or head_dim_tile(t.shape[-1])]
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def _l2_bytes(device):
    return l2_bytes(device_index(torch.device(device))) or H200_L2_BYTES


H200_L2_BYTES = 60 * 2**20  # for compiling without a GPU


@functools.lru_cache(maxsize=64)
def _schedule_table(plan: ListSchedule, device) -> torch.Tensor:
    """The plan's table on `device`, made once per shape and kept (a replayed launch reads its address)."""
    return torch.tensor(plan.table(), dtype=torch.int32, device=device)


def _on_device(scalars, device):
    """The launch's scalar arguments with a ListSchedule replaced by its table on `device`."""
    sched = scalars.get("sched")
    return {**scalars, "sched": _schedule_table(sched, torch.device(device))} if isinstance(sched, ListSchedule) \
        else scalars


def _launch_args(version, shape, causal, scale, sm_count, l2_bytes=H200_L2_BYTES):
    """(jit function, grid, scalar arguments, constexpr arguments, launch options) of one call."""
    batch, heads, seq_len, head_dim = shape
    plan = version_plan(version, head_dim)
    qk_scale = scale * LOG2E
    kv_head_bytes = 2 * seq_len * head_dim * 2  # one head's keys and values (fp16 or bf16)
    if plan.kernel == "g1":
        tiles_m = triton.cdiv(seq_len, plan.q_rows)
        lpt = version.lpt and causal and version.changes(head_dim)
        if lpt:  # g9: one program per (query tile, head), longest first across L2-sized head groups
            grid, head_group = (tiles_m * batch * heads, ), lpt_head_group(batch * heads, kv_head_bytes, l2_bytes)
        elif batch * heads > 65535:  # the grid's second axis; the first stays the query tiles, for L2
            raise ValueError(f"gluon_attention: version {version.name} runs at most 65535 batch x heads, "
                             f"got {batch * heads}; use a later version or split the batch")
        else:
            grid, head_group = (tiles_m, batch * heads), 1
        return (_g1_kernel, grid, dict(num_heads=heads, seq_len=seq_len, head_group=head_group, qk_scale=qk_scale),
                dict(CAUSAL=bool(causal), STAGES=plan.stages, LPT=lpt,
                     OVERLAP=version.overlap and version.changes(head_dim), **version.softmax_constexprs(head_dim)),
                dict(num_warps=plan.num_warps), plan)
    tiles_m = triton.cdiv(seq_len, plan.block_m)
    total = tiles_m * batch * heads
    grid = (min(sm_count, total), )
    head_group, snake, sched = 1, False, None
    if version.scheduled and causal:
        sched = plan_list_schedule(batch * heads, tiles_m, grid[0], kv_head_bytes, l2_bytes,
                                   plan.block_m / plan.kv_rows, version.l2_weight)
    elif version.balanced and causal:
        head_group, snake = plan_schedule(batch * heads, tiles_m, grid[0], kv_head_bytes, l2_bytes,
                                          version.l2_weight)
    return (_ws_kernel, grid, dict(sched=sched, num_heads=heads, seq_len=seq_len, tiles_m=tiles_m,
                                   total_tiles=total, head_group=head_group, snake=int(snake), qk_scale=qk_scale),
            dict(CAUSAL=bool(causal), STAGES=plan.stages, OVERLAP=version.overlap,
                 PINGPONG=2 if version.named_turns else int(version.pingpong), CONSUMER_REGS=plan.consumer_regs,
                 SCHEDULED=sched is not None, CONSUMERS=plan.consumers, PRODUCER_REGS=plan.producer_regs,
                 NAMED_RELEASE=version.named_release, SPLIT=int(bool(plan.head_b)),
                 PACK_P=version.packed_p if version.changes(head_dim) else 0,
                 LATE_RELEASE=version.late_release and version.changes(head_dim),
                 CHAINED=version.chained and version.changes(head_dim), **version.softmax_constexprs(head_dim)),
            dict(num_warps=plan.num_warps), plan)


def gluon_attention(q, k, v, causal=False, sm_scale=None, *, version=None):
    """softmax(q kᵀ * sm_scale [+ causal mask]) v for (batch, heads, seq_len, head_dim) fp16/bf16
    CUDA tensors, head_dim a multiple of 8 from 40 to 128 (takes_head_dim), on an sm90 GPU. `version`: a name in GLUON_VERSIONS (default
    DEFAULT_VERSION). Raises ValueError for anything it cannot run. Inputs TMA cannot address
    (misaligned, zero or odd strides) are copied to contiguous memory first."""
    return _run(q, k, v, causal, sm_scale, version or DEFAULT_VERSION, PLAIN)


def _run(q, k, v, causal, sm_scale, version, launcher):
    """gluon_attention through `launcher` (kernels/attention/launcher.py): the plain one, or flash_attention's
    recorder, which keeps the launch for replay."""
    _check_inputs(q, k, v, sm_scale)
    ok, reason = gluon_available(q.device)
    if not ok:
        raise ValueError(f"gluon_attention: {reason}")
    ver = get_version(version)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    q, k, v = (_tma_operand(t, name, launcher) for name, t in (("q", q), ("k", k), ("v", v)))
    o = launcher.empty("o", q.shape, q.dtype, q.device)
    with torch.cuda.device(q.device):
        _launch(ver, q, k, v, o, causal, scale, device_sm_count(q.device), _l2_bytes(q.device), launcher)
    return o


def _boxes(plan):
    """(operand index into q, k, v, o; box rows; box columns) of each TMA descriptor a launch takes, in the
    kernel's argument order: Q and O boxes of a query tile, K and V boxes of a key tile; for the ws kernel a
    second four, the boxes of a split head's second chunk (g15), else the first four again. Columns 0: the
    head-size tile."""
    rows = (plan.q_rows, plan.kv_rows, plan.kv_rows, plan.q_rows)
    first = [(i, r, plan.head_a) for i, r in enumerate(rows)]
    if plan.kernel == "g1":
        return first
    return first + [(i, r, plan.head_b or plan.head_a) for i, r in enumerate(rows)]


def _descriptors(plan, q, k, v, o):
    """The TMA descriptors a launch takes (_boxes); an unsplit ws launch passes the first four twice."""
    made = {}
    operands = (q, k, v, o)
    for box in _boxes(plan):
        if box not in made:
            made[box] = _descriptor(operands[box[0]], box[1], box[2])
    return [made[box] for box in _boxes(plan)]


def _launch(ver, q, k, v, o, causal, scale, sm_count, l2_bytes=H200_L2_BYTES, launcher=PLAIN):
    """One launch of `ver` writing o, over tensors TMA can address (checked by the caller), through
    `launcher` (kernels/attention/launcher.py)."""
    fn, grid, scalars, consts, options, plan = _launch_args(ver, tuple(q.shape), causal, scale, sm_count, l2_bytes)
    scalars = _on_device(scalars, q.device)
    return launcher.launch(fn, grid, *_descriptors(plan, q, k, v, o), *scalars.values(), **consts, **options)


def precompile(version, dtype, head_dim, causal, device=None):
    """Compile one version for this GPU without launching it (a compile cannot hang; a launch of
    a kernel with a deadlock can), so a caller can keep compiling out of what it times."""
    ok, reason = gluon_available(device)
    if not ok:
        raise ValueError(f"gluon_attention: {reason}")
    device = torch.device("cuda") if device is None else torch.device(device)
    ver = get_version(version)
    t = torch.zeros((1, 1, 16, head_dim), dtype=dtype, device=device)
    fn, grid, scalars, consts, options, plan = _launch_args(ver, tuple(t.shape), causal, 1.0, device_sm_count(device),
                                                            _l2_bytes(device))
    descs = _descriptors(plan, t, t, t, t)
    with torch.cuda.device(device):
        fn.warmup(*descs, *_on_device(scalars, device).values(), grid=grid, **consts, **options)


# ---------------------------------------------------------------------------------------------
# 5. Compiling without a GPU
# ---------------------------------------------------------------------------------------------


def _desc_signature(dtype, rows, head_dim, cols=None):
    block = [1, 1, rows, cols or head_dim_tile(head_dim)]
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[dtype])
    return f"tensordesc<{_SIG_DTYPES[dtype]}{block},{layout!r}>"


def compile_for_target(version, dtype, head_dim, causal, target=None, seq_len=4096, batch=2, heads=4):
    """Compile one version for `target` (default sm90) with the arguments a call at that shape
    would pass, without a GPU (ptxas ships with Triton). Returns Triton's CompiledKernel, whose
    .asm holds 'ttgir', 'ptx' and 'cubin'."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    ver = get_version(version)
    target = target or GPUTarget("cuda", 90, 32)
    fn, _, scalars, consts, options, plan = _launch_args(ver, (batch, heads, seq_len, head_dim), causal,
                                                        1.0 / math.sqrt(head_dim), sm_count=132)
    names = ["q_desc", "k_desc", "v_desc", "o_desc", "qb_desc", "kb_desc", "vb_desc", "ob_desc"]
    signature = {name: _desc_signature(dtype, rows, head_dim, cols) for name, (_, rows, cols) in zip(names, _boxes(plan))}
    types = {float: "fp32", int: "i32", ListSchedule: "*i32", type(None): "constexpr"}
    signature.update({name: types[type(value)] for name, value in scalars.items()})
    signature.update({name: "constexpr" for name in consts})
    consts = {**consts, **{name: None for name, value in scalars.items() if value is None}}
    return triton.compile(GluonASTSource(fn, signature, consts), target=target, options=options)


def compile_specs(target):
    """Compute capability 9.0 only (wgmma exists on Hopper alone; gluon_available refuses the
    rest): every version at both dtypes, both head sizes and both maskings, through the launcher
    on meta tensors (kernels/aot.py). The sizes are plain arguments, so one shape stands for
    all. Core (the default test, which must stay short): g1, and g4 which carries every feature
    of the warp-specialized kernel, g7 and g8 at padded head sizes, and g9 (g1's kernel on its
    one-dimensional grid) and g10 (the same on a 64-row tile); the rest compile with COMPILE_MATRIX=full (and in
    tests/test_attention_gluon.py)."""
    if target.capability != (9, 0):
        return []
    from ..aot import CompileSpec, meta

    def launch(ver, dtype, head_dim, causal):
        q = meta(2, 4, 4096, head_dim, dtype=dtype)
        # The grid is min(SMs, tiles): an H100/H200's 132 SMs; the compiled code does not depend on it.
        _launch(ver, q, q, q, torch.empty_like(q), causal, 1.0 / math.sqrt(head_dim), sm_count=132)

    core = {("g1", torch.float16, 64, False), ("g4", torch.bfloat16, 128, True),
            ("g8", torch.float16, 48, False), ("g7", torch.bfloat16, 96, True), ("g9", torch.float16, 64, True),
            ("g10", torch.bfloat16, 64, True)}
    # The padded head sizes compile to their tile's kernel; built here for the host code's descriptors.
    head_dims = HEAD_DIMS + tuple(d for d in PADDED_HEAD_DIMS + (48,) if takes_head_dim(d))
    return [CompileSpec(f"{ver.name} {str(dtype).removeprefix('torch.')} d={head_dim} "
                        f"{'causal' if causal else 'full'}",
                        lambda ver=ver, dtype=dtype, head_dim=head_dim, causal=causal: launch(ver, dtype, head_dim,
                                                                                                 causal),
                        tensor_cores=True, core=(ver.name, dtype, head_dim, causal) in core)
            for ver in GLUON_VERSIONS for dtype in DTYPES for head_dim in head_dims for causal in (False, True)]


# ---------------------------------------------------------------------------------------------
# 6. The Gluon path of flash_attention (kernels/attention/dispatch.py)
# ---------------------------------------------------------------------------------------------


def _for_dispatch(q, k, v, causal, sm_scale, config, launcher):
    """flash_attention(path="gluon"): config may name a version, {"version": "g4"}. Launched through
    `launcher`, so a repeated call replays the compiled kernel with fresh descriptors (kernels/attention/launcher.py)."""
    version = config.get("version", DEFAULT_VERSION) if isinstance(config, dict) else DEFAULT_VERSION
    o = _run(q, k, v, causal, sm_scale, version, launcher)
    ver = get_version(version)
    plan = version_plan(ver, q.shape[-1])
    return o, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.kv_rows, num_warps=plan.num_warps, num_stages=plan.stages,
                   maxnreg=None, autotuned=False, version=version)


def _register():
    from . import dispatch

    dispatch.register_path(dispatch.KernelPath(name="gluon", title="Gluon", dtypes=DTYPES,
                                               available=gluon_available, run=_for_dispatch, targets=("sm90",)))


_register()
