"""The Gluon warp-specialized kernel (steps g2-g7, g11-g15, g19, g23-g27 and g30-g42): a persistent program of one
producer warp and two or three consumer warpgroups. gluon.py launches it (its grid, walk and constexprs come from
the step's record in gluon_versions.py); the pieces it shares with the tile kernel (gluon_tile.py) are in
gluon_parts.py.

A tile is 64 query rows a consumer warpgroup (128 or 192 in all) of one head. The producer and the consumers
walk the same list of tiles (program p takes tiles p, p + P, ..., or the host's table for a causal walk) and the
same key tiles in the same order, so ring positions and mbarrier phases follow from one counter.

Shared memory: Q as consumers x 2 slots of [64, head_dim] (slot = tile parity, so the producer loads the next
tile's Q during this one; the output goes out through the Q slot it came in), and K and V rings of STAGES
[BLOCK_N, head_dim] buffers. Barriers: *_ready (the producer's copy landed, count 1) and *_empty (released:
count 1 for a Q slot, one arrival per consumer for K and V, or two with g41's counted arrives), and `turn`
(g4's ping-pong by mbarriers; from g11 the turns pass by hardware named barriers). mbarriers start in phase 0
with parity 1 counted as complete, so a first wait on parity 1 passes: that is how every buffer starts out empty.

The steps' additions, each a compile-time switch of _ws_kernel: softmax/GEMM overlap inside a consumer (g3),
turns between consumers (g4, g11), a head of 72-96 columns in two chunks (g15, SPLIT), three consumers on a
192-row tile (g12, g31), P rounded in pairs before the wait for the previous P V (g27, PACK_P), row sums kept
per lane (g30, LANE_SUM in the softmax), each tile's output store left in flight (g32, LATE_RELEASE), each
tile's last P V run beside the next tile's first scores (g34, CHAINED) and K/V slots released by counted arrives
(g41, RELEASE).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from ..gluon_compat import async_load, thread_barrier
from .gluon_parts import (EMPTY_BARRIER, RELEASE_ARRIVE, RELEASE_COUNT, RELEASE_COUNTED, TURN_BARRIER, as_4d,
                          await_empty, key_tiles, mma_layout, named_barrier, p_operand, release, rescale,
                          row_sums_start, softmax_update, store_output, tile_coords)


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
                 CONSUMERS: gl.constexpr, RELEASE: gl.constexpr, SPLIT: gl.constexpr):
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
            await_empty(k_empty, slot, phase, kv, EMPTY_BARRIER + slot, RELEASE, CONSUMERS, STAGES)
            mbarrier.expect(k_ready.index(slot), K_BYTES)
            async_load(k_desc, [b, h, j * BLOCK_N, 0], k_ready.index(slot),
                                            as_4d(k_smem.index(slot), BLOCK_N, HEAD_DIM))
            if SPLIT:
                async_load(kb_desc, [b, h, j * BLOCK_N, HEAD_DIM], k_ready.index(slot),
                           as_4d(kb_smem.index(slot), BLOCK_N, HEAD_B))
            await_empty(v_empty, slot, phase, kv, EMPTY_BARRIER + STAGES + slot, RELEASE, CONSUMERS, STAGES)
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
        if j < n_full:
            p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, j * BLOCK_N, seq_len, False, CAUSAL)
        else:
            p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, j * BLOCK_N, seq_len, True, CAUSAL)
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
                     RELEASE: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                     LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr, NEW_TILE: gl.constexpr = False,
                     DEFER_RESCALE: gl.constexpr = False, alpha_prev=None):
    """Key tile j (>= 1) of the overlapped loop: issue Q K_jᵀ and P_{j-1} V_{j-1} back to back,
    then compute the softmax of tile j while P_{j-1} V_{j-1} runs on the tensor cores. SPLIT: each
    matmul is two, one per chunk of the head (acc_b and pb are the second chunk's output and P).
    NEW_TILE (g34, g35, j = 0): the hand-over between query tiles. q, m_i and l_i are the new tile's (its
    statistics fresh), p, acc and acc_b the tile before's: its last P V finishes acc, which is returned as it is,
    not rescaled by the new tile's statistics.
    DEFER_RESCALE (g43): the accumulators are brought to the previous tile's row max (alpha_prev) here, between
    issuing Q K_jᵀ and P_{j-1} V_{j-1}, while the tensor cores run the scores, instead of at the step's end, after
    the softmax and on the way to the next turn. Every step returns its own alpha last (used only there)."""
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
    if DEFER_RESCALE:
        acc = rescale(acc, alpha_prev, o_layout)
        if SPLIT:
            acc_b = rescale(acc_b, alpha_prev, ob_layout)
    acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
    if SPLIT:
        acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
    if PINGPONG == 1:
        mbarrier.arrive(turn.index(1 - WG))
    if PINGPONG == 2:
        named_barrier(TURN_BARRIER + (WG + 1) % CONSUMERS, False)
    # wgmma groups retire in order: with the P V groups (one, or two with SPLIT) still out, Q K_jᵀ is done.
    s = warpgroup_mma_wait(1 + SPLIT, deps=(s, ))
    release(k_empty, slot, EMPTY_BARRIER + slot, RELEASE, CONSUMERS)
    p_new, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, j * BLOCK_N, seq_len, MASK, CAUSAL, EX2_EMU,
                                            TREE, LEAN_MASK)
    if PACK_P == 2:  # g27: the next P, packed, into registers of its own while P_{j-1} V_{j-1} still runs
        p_next = p_operand(p_new, q.dtype, o_layout, True)
        if SPLIT:
            pb_next = p_operand(p_new, q.dtype, ob_layout, True)
    # P's registers are an operand of the matmul in flight: keep them alive (and unwritten) until it retires.
    if SPLIT:
        acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
    else:
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, RELEASE, CONSUMERS)
    if not NEW_TILE and not DEFER_RESCALE:
        acc = rescale(acc, alpha, o_layout)
    if PACK_P == 2:
        p = p_next
    else:
        p = p_operand(p_new, q.dtype, o_layout, PACK_P == 1)
    if SPLIT:
        if not NEW_TILE and not DEFER_RESCALE:
            acc_b = rescale(acc_b, alpha, ob_layout)
        if PACK_P == 2:
            pb = pb_next
        else:
            pb = p_operand(p_new, q.dtype, ob_layout, PACK_P == 1)
    return kv + 1, p, pb, slot, (kv // STAGES) & 1, m_i, l_i, acc, acc_b, turns + 1, alpha


@gluon.jit
def _ws_key_steps(q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot,
                  prev_phase, m_i, l_i, acc, acc_b, qk_scale, rows, seq_len, WG: gl.constexpr, s_layout: gl.constexpr,
                  o_layout: gl.constexpr, ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                  PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, RELEASE: gl.constexpr, SPLIT: gl.constexpr,
                  EX2_EMU: gl.constexpr, TREE: gl.constexpr, LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr,
                  DEFER_RESCALE: gl.constexpr = False):
    """Key tiles 1 to n_total - 1 of a query tile whose tile 0 has been scored: the unmasked ones, then those the
    mask or the sequence's end cuts. Also returns alpha, the last scored tile's rescale factor, carried from step to
    step for the last P V to apply; only DEFER_RESCALE (g43) reads it, and without it the compiler drops the carried
    value (every other step's PTX is what it was before g43)."""
    # The accumulators are still zero: tile 0's factor is 1 (DEFER_RESCALE applies it before the first P V).
    alpha = gl.full([q.shape[0]], 1.0, gl.float32, gl.SliceLayout(1, s_layout))
    for j in range(1, gl.maximum(n_full, 1)):
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, alpha = _ws_overlap_step(
            j, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b,
            turns, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, False, CAUSAL, STAGES, PINGPONG,
            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, False, DEFER_RESCALE, alpha)
    for j in range(gl.maximum(n_full, 1), n_total):
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, alpha = _ws_overlap_step(
            j, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b,
            turns, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, True, CAUSAL, STAGES, PINGPONG,
            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, False, DEFER_RESCALE, alpha)
    return kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, alpha


@gluon.jit
def _ws_first_scores(q, k_smem, qb, kb_smem, bars, kv, m_i, l_i, qk_scale, rows, seq_len, s_layout: gl.constexpr,
                     o_layout: gl.constexpr, ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                     CONSUMERS: gl.constexpr, RELEASE: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr,
                     TREE: gl.constexpr, LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr, stored_q=-1):
    """A query tile's key tile 0 alone: its scores, waited on, and their softmax, masked always (cheap on one tile,
    and right whether or not it is whole). Returns the tile's (kv, P operands, slot, phase, m_i, l_i).
    stored_q >= 0 (g32, g33): the Q slot whose output store the tile before left in flight, waited on and handed
    back to the producer once these scores are in."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    s, slot = _ws_scores_split(q, k_smem, qb, kb_smem, k_ready, kv, s_layout, STAGES, SPLIT)
    s = warpgroup_mma_wait(0, deps=(s, ))
    release(k_empty, slot, EMPTY_BARRIER + slot, RELEASE, CONSUMERS)
    p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, 0, seq_len, True, CAUSAL, EX2_EMU, TREE,
                                        LEAN_MASK)
    if stored_q >= 0:
        tma.store_wait(0)
        mbarrier.arrive(q_empty.index(stored_q))
    pb = p_operand(p, q.dtype, ob_layout, PACK_P > 0)
    p = p_operand(p, q.dtype, o_layout, PACK_P > 0)
    return kv + 1, p, pb, slot, (kv // STAGES) & 1, m_i, l_i


@gluon.jit
def _ws_last_pv(v_smem, vb_smem, bars, p, pb, prev_slot, prev_phase, acc, acc_b, STAGES: gl.constexpr,
                CONSUMERS: gl.constexpr, RELEASE: gl.constexpr, SPLIT: gl.constexpr, DEFER_RESCALE: gl.constexpr = False,
                alpha=None, o_layout: gl.constexpr = None, ob_layout: gl.constexpr = None):
    """A query tile's last P V, waited on, and its V slot released: the tile's accumulators, finished. DEFER_RESCALE
    (g43): the accumulators are first brought to the last tile's row max (alpha), which the key steps left undone."""
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    mbarrier.wait(v_ready.index(prev_slot), prev_phase)
    if DEFER_RESCALE:
        acc = rescale(acc, alpha, o_layout)
        if SPLIT:
            acc_b = rescale(acc_b, alpha, ob_layout)
    acc = warpgroup_mma(p, v_smem.index(prev_slot), acc, is_async=True)
    if SPLIT:
        acc_b = warpgroup_mma(pb, vb_smem.index(prev_slot), acc_b, is_async=True)
        acc, p, acc_b, pb = warpgroup_mma_wait(0, deps=(acc, p, acc_b, pb))
    else:
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    release(v_empty, prev_slot, EMPTY_BARRIER + STAGES + prev_slot, RELEASE, CONSUMERS)
    return acc, acc_b


@gluon.jit
def _ws_consumer_overlap(q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, m_i, l_i, acc,
                         acc_b, qk_scale, rows, seq_len, WG: gl.constexpr, s_layout: gl.constexpr,
                         o_layout: gl.constexpr, ob_layout: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                         PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, RELEASE: gl.constexpr,
                         SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                         LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr, stored_q=-1,
                         DEFER_RESCALE: gl.constexpr = False):
    """One query tile of the overlapped loop: key tile 0 alone (_ws_first_scores, which hands back stored_q, the
    slot of a store the tile before left in flight), then the overlapped key steps, then the last P V."""
    kv, p, pb, prev_slot, prev_phase, m_i, l_i = _ws_first_scores(
        q, k_smem, qb, kb_smem, bars, kv, m_i, l_i, qk_scale, rows, seq_len, s_layout, o_layout, ob_layout, CAUSAL,
        STAGES, CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, stored_q)
    kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, alpha = _ws_key_steps(
        q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot, prev_phase, m_i,
        l_i, acc, acc_b, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, CAUSAL, STAGES, PINGPONG,
        CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, DEFER_RESCALE)
    acc, acc_b = _ws_last_pv(v_smem, vb_smem, bars, p, pb, prev_slot, prev_phase, acc, acc_b, STAGES, CONSUMERS,
                             RELEASE, SPLIT, DEFER_RESCALE, alpha, o_layout, ob_layout)
    return kv, turns, m_i, l_i, acc, acc_b


@gluon.jit
def _ws_consumer(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                 OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr, CONSUMERS: gl.constexpr,
                 RELEASE: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                 LEAN_MASK: gl.constexpr,
                 PACK_P: gl.constexpr, LANE_SUM: gl.constexpr, LATE_RELEASE: gl.constexpr, CHAINED: gl.constexpr,
                 DEFER_RESCALE: gl.constexpr = False):
    """One consumer warpgroup's walk: its query tiles one after another, or (CHAINED, g34 and g35) each tile's last
    P V issued beside the next tile's first Q Kᵀ."""
    gl.static_assert(not (CHAINED and DEFER_RESCALE), "the deferred rescale (g43) runs on the unchained walk only")
    if CHAINED:
        _ws_consumer_chained(descs, smem, bars, walk, qk_scale, WG, CAUSAL, STAGES, PINGPONG, SCHEDULED, CONSUMERS,
                             SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM, CHAINED)
    else:
        _ws_consumer_tiles(descs, smem, bars, walk, qk_scale, WG, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                           CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM, LATE_RELEASE,
                           DEFER_RESCALE)


@gluon.jit
def _store_tile(acc, acc_b, l_i, q, qb, o_desc, ob_desc, b, h, row0, o_layout: gl.constexpr,
                ob_layout: gl.constexpr, SPLIT: gl.constexpr, WAIT: gl.constexpr = True):
    """A finished tile's output through its Q slot (store_output), and with SPLIT the head's second chunk through
    the slot's second buffer."""
    HALF: gl.constexpr = acc.shape[0]
    HEAD_DIM: gl.constexpr = acc.shape[1]
    HEAD_B: gl.constexpr = acc_b.shape[1]
    store_output(acc, l_i, q, o_desc, b, h, row0, o_layout, HALF, HEAD_DIM, WAIT=WAIT)
    if SPLIT:
        store_output(acc_b, l_i, qb, ob_desc, b, h, row0, ob_layout, HALF, HEAD_B, HEAD_DIM, WAIT=WAIT)


@gluon.jit
def _ws_chained_pass(t, b, h, row0, i, l_i, acc, acc_b, p, pb, prev_slot, prev_phase, kv, turns, descs, smem, bars,
                     walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                     PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr, CONSUMERS: gl.constexpr, SPLIT: gl.constexpr,
                     EX2_EMU: gl.constexpr, TREE: gl.constexpr, LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr,
                     LANE_SUM: gl.constexpr):
    """Tile t of a chained walk (_ws_consumer_chained): the hand-over from tile t - 1 (its last P V beside this
    tile's first scores, then its output), or this tile's first scores alone at t = 0, then this tile's key steps.
    Takes and returns what one tile hands the next: its place (b, h, row0, Q slot i), row sums, accumulators, the P
    of its last key tile, and the ring's counters."""
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
        m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        kv, p, pb, prev_slot, prev_phase, m_i, l_i = _ws_first_scores(
            q, k_smem, qb, kb_smem, bars, kv, m_i, row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM), qk_scale,
            rows, seq_len, s_layout, o_layout, ob_layout, CAUSAL, STAGES, CONSUMERS, False, SPLIT, EX2_EMU, TREE,
            LEAN_MASK, PACK_P)
    else:
        # The new tile's Q K_0ᵀ beside the tile before's last P V, with no turn: as each tile's first scores.
        m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, _step_alpha = _ws_overlap_step(
            0, q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, p, pb, prev_slot, prev_phase, m_i,
            row_sums_start(HALF, BLOCK_N, s_layout, LANE_SUM), acc, acc_b, turns, qk_scale, rows, seq_len, WG,
            s_layout, o_layout, ob_layout, True, CAUSAL, STAGES, 0, CONSUMERS, False, SPLIT, EX2_EMU, TREE,
            LEAN_MASK, PACK_P, NEW_TILE=True)
        # The tile before is done: its output leaves through its Q slot, which then goes back to the producer.
        _store_tile(acc, acc_b, l_o, q_smem.index(i_o), qb_smem.index(i_o), o_desc, ob_desc, b_o, h_o, row0_o,
                    o_layout, ob_layout, SPLIT)
        mbarrier.arrive(q_empty.index(i_o))
    acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
    acc_b = gl.zeros([HALF, HEAD_B], gl.float32, ob_layout)
    kv, p, pb, prev_slot, prev_phase, m_i, l_i, acc, acc_b, turns, _alpha = _ws_key_steps(
        q, k_smem, v_smem, qb, kb_smem, vb_smem, bars, kv, turns, n_full, n_total, p, pb, prev_slot, prev_phase,
        m_i, l_i, acc, acc_b, qk_scale, rows, seq_len, WG, s_layout, o_layout, ob_layout, CAUSAL, STAGES,
        PINGPONG, CONSUMERS, False, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P)
    return b, h, row0, i, l_i, acc, acc_b, p, pb, prev_slot, prev_phase, kv, turns


@gluon.jit
def _ws_consumer_chained(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr,
                         STAGES: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr,
                         CONSUMERS: gl.constexpr, SPLIT: gl.constexpr, EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                         LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr, LANE_SUM: gl.constexpr,
                         UNROLL: gl.constexpr = 1):
    """g34, g35: the overlapped loop with no gap between query tiles. Every consumer warpgroup of a program ends
    a tile at the same key step (they share its keys), so in _ws_consumer_tiles the tensor cores wait, at every
    tile's end, for each warpgroup's last P V, its output and its next tile's first scores and softmax, one after
    another. Here a tile's last P V runs beside the next tile's first Q Kᵀ and softmax (_ws_overlap_step's
    NEW_TILE step), and its output leaves after them. UNROLL=2 (g39, g40): two tiles a pass of the walk's loop,
    so that a tile at an odd place hands over inside a pass and one at an even place across the loop's back edge
    (g34 and g35 were wrong at every odd place)."""
    q_desc, o_desc, ob_desc = descs[0], descs[3], descs[7]
    q_smem, k_smem, v_smem, qb_smem, vb_smem = smem[0], smem[1], smem[2], smem[3], smem[5]
    sched, total_tiles = walk[0], walk[4]
    HALF: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    HEAD_B: gl.constexpr = qb_smem.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = mma_layout(4, BLOCK_N)
    o_layout: gl.constexpr = mma_layout(4, HEAD_DIM)
    ob_layout: gl.constexpr = mma_layout(4, HEAD_B)
    gl.static_assert(PINGPONG == 2, "the chained walk passes turns by named barriers")
    gl.static_assert(UNROLL == 1 or UNROLL == 2, "the chained walk takes one or two tiles a pass")
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
    for t0 in range(0, n_tiles, UNROLL):
        for u in gl.static_range(UNROLL):
            t = t0 + u
            # The first tile of a pass always exists; only the second may fall past the walk's end.
            if u == 0 or t < n_tiles:
                b, h, row0, i, l_i, acc, acc_b, p, pb, prev_slot, prev_phase, kv, turns = _ws_chained_pass(
                    t, b, h, row0, i, l_i, acc, acc_b, p, pb, prev_slot, prev_phase, kv, turns, descs, smem, bars,
                    walk, qk_scale, WG, CAUSAL, STAGES, PINGPONG, SCHEDULED, CONSUMERS, SPLIT, EX2_EMU, TREE,
                    LEAN_MASK, PACK_P, LANE_SUM)
    if n_tiles > 0:  # the last tile's last P V and its output
        acc, acc_b = _ws_last_pv(v_smem, vb_smem, bars, p, pb, prev_slot, prev_phase, acc, acc_b, STAGES, CONSUMERS,
                                 False, SPLIT)
        _store_tile(acc, acc_b, l_i, q_smem.index(i), qb_smem.index(i), o_desc, ob_desc, b, h, row0, o_layout,
                    ob_layout, SPLIT)


@gluon.jit
def _ws_consumer_tiles(descs, smem, bars, walk, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr,
                       STAGES: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr,
                       CONSUMERS: gl.constexpr, RELEASE: gl.constexpr, SPLIT: gl.constexpr,
                       EX2_EMU: gl.constexpr, TREE: gl.constexpr,
                       LEAN_MASK: gl.constexpr, PACK_P: gl.constexpr, LANE_SUM: gl.constexpr,
                       LATE_RELEASE: gl.constexpr, DEFER_RESCALE: gl.constexpr = False):
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
    gl.static_assert(OVERLAP or RELEASE == RELEASE_ARRIVE, "g2's plain loop releases its slots by plain arrives")
    gl.static_assert(OVERLAP or not DEFER_RESCALE, "the deferred rescale (g43) runs on the overlapped loop only")
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
                RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, stored_q, DEFER_RESCALE)
        else:
            kv, m_i, l_i, acc = _ws_consumer_plain(q, k_smem, v_smem, bars, kv, n_full, n_total, m_i, l_i, acc,
                                                   qk_scale, rows, seq_len, s_layout, o_layout, CAUSAL, STAGES)
        # Q is dead: the output leaves through its slot, which is then handed back: at once, or (LATE_RELEASE, g32
        # and g33, overlapped loop only) with the store still in flight, once the next tile's first scores are in.
        late: gl.constexpr = LATE_RELEASE and OVERLAP
        _store_tile(acc, acc_b, l_i, q, qb, o_desc, ob_desc, b, h, row0, o_layout, ob_layout, SPLIT, WAIT=not late)
        if not late:
            mbarrier.arrive(q_empty.index(i))
        it += 1
    if LATE_RELEASE:
        tma.store_wait(0)  # the last tile's store reads shared memory the block is about to give up


@gluon.jit(do_not_specialize=["num_heads", "seq_len", "tiles_m", "total_tiles", "head_group", "snake"])
def _ws_kernel(q_desc, k_desc, v_desc, o_desc, qb_desc, kb_desc, vb_desc, ob_desc, sched, num_heads, seq_len, tiles_m,
               total_tiles, head_group, snake, qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
               OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr, SCHEDULED: gl.constexpr,
               CONSUMERS: gl.constexpr = 2, PRODUCER_REGS: gl.constexpr = 24, RELEASE: gl.constexpr = 0,
               SPLIT: gl.constexpr = 0, EX2_EMU: gl.constexpr = 0, TREE: gl.constexpr = False,
               LEAN_MASK: gl.constexpr = False,
               PACK_P: gl.constexpr = 0, LANE_SUM: gl.constexpr = False, LATE_RELEASE: gl.constexpr = False,
               CHAINED: gl.constexpr = False, DEFER_RESCALE: gl.constexpr = False):
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
    # The arrivals an empty slot waits for: RELEASE_COUNT from each consumer when they arrive counted (g41), else one.
    # A constexpr in the kernel's own body: Triton 3.6 passes a jit helper's result to mbarrier.init as a tensor.
    empty_count: gl.constexpr = CONSUMERS * (RELEASE_COUNT if RELEASE == RELEASE_COUNTED else 1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=empty_count)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=empty_count)
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
                            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED, DEFER_RESCALE)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 1, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED, DEFER_RESCALE)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 2, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED, DEFER_RESCALE)),
            (_ws_producer, (descs, smem, bars, walk, CAUSAL, STAGES, SCHEDULED, CONSUMERS, RELEASE, SPLIT)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 0, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED, DEFER_RESCALE)),
            (_ws_consumer, (descs, smem, bars, walk, qk_scale, 1, CAUSAL, STAGES, OVERLAP, PINGPONG, SCHEDULED,
                            CONSUMERS, RELEASE, SPLIT, EX2_EMU, TREE, LEAN_MASK, PACK_P, LANE_SUM,
                            LATE_RELEASE, CHAINED, DEFER_RESCALE)),
            (_ws_producer, (descs, smem, bars, walk, CAUSAL, STAGES, SCHEDULED, CONSUMERS, RELEASE, SPLIT)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
