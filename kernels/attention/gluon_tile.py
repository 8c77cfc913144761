"""The Gluon tile kernel (steps g1, g8-g10, g16-g18 and g20-g22): one program per query tile, no warp specialization.
Its warpgroups load their tile's Q once, stream the key tiles through a ring of K/V buffers that thread
0 refills by TMA, and run both matmuls and the online softmax themselves. gluon.py launches it (its
grid, order and constexprs come from the step's record in gluon_versions.py); the pieces it shares
with the warp-specialized kernel are in gluon_parts.py."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma, \
    warpgroup_mma_wait

from ..gluon_compat import async_load, thread_barrier
from .gluon_parts import as_4d, key_tiles, mma_layout, p_operand, rescale, row_sums_start, softmax_update, store_output, \
    tile_coords


@gluon.jit
def _g1_load(desc, buf, bar, b, h, tile, pred, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Thread 0 loads key tile `tile` of K or V into `buf`; the caller has made sure every warp is done
    with it (a thread_barrier, or a buffer never used)."""
    mbarrier.expect(bar, desc.block_type.nbytes, pred)
    async_load(desc, [b, h, tile * BLOCK_N, 0], bar, as_4d(buf, BLOCK_N, HEAD_DIM), pred)


@gluon.jit
def _g1_issue_kv(k_desc, v_desc, k_buf, v_buf, k_bar, v_bar, b, h, tile, pred,
                 BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    _g1_load(k_desc, k_buf, k_bar, b, h, tile, pred, BLOCK_N, HEAD_DIM)
    _g1_load(v_desc, v_buf, v_bar, b, h, tile, pred, BLOCK_N, HEAD_DIM)


@gluon.jit
def _g1_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, h,
             m_i, l_i, acc, qk_scale, rows, seq_len,
             s_layout: gl.constexpr, o_layout: gl.constexpr, MASK: gl.constexpr, CAUSAL: gl.constexpr,
             STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
             EX2_EMU: gl.constexpr, TREE: gl.constexpr, LEAN_MASK: gl.constexpr):
    """Key tile j: wait for it, Q Kᵀ, softmax, P V (both matmuls waited on at once), then refill
    its buffers with tile j + STAGES."""
    slot = j % STAGES
    phase = (j // STAGES) & 1
    k_buf = k_smem.index(slot)
    v_buf = v_smem.index(slot)
    mbarrier.wait(k_bars.index(slot), phase)
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    s = warpgroup_mma(q_smem, k_buf.permute((1, 0)), zero, use_acc=False)
    p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, j * BLOCK_N, seq_len, MASK, CAUSAL, EX2_EMU, TREE,
                                        LEAN_MASK)
    acc = rescale(acc, alpha, o_layout)
    p = p_operand(p, q_smem.dtype, o_layout)
    mbarrier.wait(v_bars.index(slot), phase)
    acc = warpgroup_mma(p, v_buf, acc)
    # Thread 0 issues the refill: every warp must be done with this slot first.
    thread_barrier()
    nxt = j + STAGES
    _g1_issue_kv(k_desc, v_desc, k_buf, v_buf, k_bars.index(slot), v_bars.index(slot), b, h, nxt, nxt < n_total,
                 BLOCK_N, HEAD_DIM)
    return m_i, l_i, acc


@gluon.jit
def _g1_overlap_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, h, p, m_i, l_i, acc,
                     qk_scale, rows, seq_len, s_layout: gl.constexpr, o_layout: gl.constexpr, MASK: gl.constexpr,
                     CAUSAL: gl.constexpr, STAGES: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                     EX2_EMU: gl.constexpr, TREE: gl.constexpr, LEAN_MASK: gl.constexpr):
    """g16's key tile j >= 1: Q K_jᵀ and P_{j-1} V_{j-1} issued back to back, the softmax of tile j
    computed while P_{j-1} V_{j-1} runs. K and V buffers are refilled apart, each as soon as its matmul
    has retired: K_j's slot takes K_{j+STAGES} after the scores, V_{j-1}'s takes V_{j-1+STAGES} after P V."""
    slot = j % STAGES
    prev = (j - 1) % STAGES
    mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
    mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s, ))  # groups retire in order: P V is the one left out
    thread_barrier()
    _g1_load(k_desc, k_smem.index(slot), k_bars.index(slot), b, h, j + STAGES, j + STAGES < n_total, BLOCK_N,
             HEAD_DIM)
    p_new, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, j * BLOCK_N, seq_len, MASK, CAUSAL, EX2_EMU,
                                            TREE, LEAN_MASK)
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))  # P's registers stay unwritten until its matmul retires
    thread_barrier()
    _g1_load(v_desc, v_smem.index(prev), v_bars.index(prev), b, h, j - 1 + STAGES, j - 1 + STAGES < n_total,
             BLOCK_N, HEAD_DIM)
    acc = rescale(acc, alpha, o_layout)
    return p_operand(p_new, q_smem.dtype, o_layout), m_i, l_i, acc


@gluon.jit
def _g1_overlap_loop(n_full, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, h, m_i, l_i, acc,
                     qk_scale, rows, seq_len, s_layout: gl.constexpr, o_layout: gl.constexpr, CAUSAL: gl.constexpr,
                     STAGES: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, EX2_EMU: gl.constexpr,
                     TREE: gl.constexpr, LEAN_MASK: gl.constexpr):
    """g16's key loop: tile 0's scores alone (masked: cheap on one tile, right whether or not it is
    whole), then _g1_overlap_step over the rest, then the last P V."""
    mbarrier.wait(k_bars.index(0), 0)
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), zero, use_acc=False)
    thread_barrier()
    _g1_load(k_desc, k_smem.index(0), k_bars.index(0), b, h, STAGES, STAGES < n_total, BLOCK_N, HEAD_DIM)
    p, alpha, m_i, l_i = softmax_update(s, m_i, l_i, qk_scale, rows, 0, seq_len, True, CAUSAL, EX2_EMU, TREE,
                                        LEAN_MASK)
    p = p_operand(p, q_smem.dtype, o_layout)
    for j in range(1, gl.maximum(n_full, 1)):
        p, m_i, l_i, acc = _g1_overlap_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b,
                                            h, p, m_i, l_i, acc, qk_scale, rows, seq_len, s_layout, o_layout, False,
                                            CAUSAL, STAGES, BLOCK_N, HEAD_DIM, EX2_EMU, TREE, LEAN_MASK)
    for j in range(gl.maximum(n_full, 1), n_total):
        p, m_i, l_i, acc = _g1_overlap_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b,
                                            h, p, m_i, l_i, acc, qk_scale, rows, seq_len, s_layout, o_layout, True,
                                            CAUSAL, STAGES, BLOCK_N, HEAD_DIM, EX2_EMU, TREE, LEAN_MASK)
    last = (n_total - 1) % STAGES
    mbarrier.wait(v_bars.index(last), ((n_total - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last), acc)
    return m_i, l_i, acc


# Sizes stay plain i32 arguments (no specialization on their divisibility, nor on a head group of
# 1): one compile per dtype, head size, masking and grid order serves every shape.
@gluon.jit(do_not_specialize=["num_heads", "seq_len", "head_group"])
def _g1_kernel(q_desc, k_desc, v_desc, o_desc, num_heads, seq_len, head_group, qk_scale,
               CAUSAL: gl.constexpr, STAGES: gl.constexpr, LPT: gl.constexpr, OVERLAP: gl.constexpr = False,
               EX2_EMU: gl.constexpr = 0, TREE: gl.constexpr = False, LEAN_MASK: gl.constexpr = False,
               LANE_SUM: gl.constexpr = False):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[2]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    dtype: gl.constexpr = q_desc.dtype
    num_warps: gl.constexpr = gl.num_warps()
    s_layout: gl.constexpr = mma_layout(num_warps, BLOCK_N)
    o_layout: gl.constexpr = mma_layout(num_warps, HEAD_DIM)
    tile_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)

    if LPT:
        # g9: a one-dimensional grid, program t on the t-th tile of tile_coords' walk (heads in groups
        # of head_group, a group's query tiles longest first across its heads). The hardware starts
        # programs in index order as slots free up, so this is a longest-first list schedule over the
        # whole grid, where the two-dimensional grid below goes longest first head by head.
        b, h, pid_m = tile_coords(gl.program_id(0), gl.cdiv(seq_len, BLOCK_M), num_heads, gl.num_programs(0),
                                   head_group, 0, CAUSAL)
    else:
        pid_m = gl.program_id(0)
        if CAUSAL:
            # The last query tiles see the most keys: start them first, so the short ones fill the tail.
            pid_m = gl.num_programs(0) - 1 - pid_m
        bh = gl.program_id(1)
        b = bh // num_heads
        h = bh % num_heads
    start_m = pid_m * BLOCK_M

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
    fence_async_shared()
    thread_barrier()

    n_full, n_total = key_tiles(start_m, seq_len, BLOCK_M, BLOCK_N, CAUSAL)
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    async_load(q_desc, [b, h, start_m, 0], q_bar, as_4d(q_smem, BLOCK_M, HEAD_DIM))
    for i in gl.static_range(STAGES):
        _g1_issue_kv(k_desc, v_desc, k_smem.index(i), v_smem.index(i), k_bars.index(i), v_bars.index(i),
                     b, h, i, i < n_total, BLOCK_N, HEAD_DIM)

    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = row_sums_start(BLOCK_M, BLOCK_N, s_layout, LANE_SUM)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    mbarrier.wait(q_bar, 0)
    if OVERLAP:
        m_i, l_i, acc = _g1_overlap_loop(n_full, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc,
                                         b, h, m_i, l_i, acc, qk_scale, rows, seq_len, s_layout, o_layout, CAUSAL,
                                         STAGES, BLOCK_N, HEAD_DIM, EX2_EMU, TREE, LEAN_MASK)
    else:
        for j in range(0, n_full):
            m_i, l_i, acc = _g1_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, h,
                                     m_i, l_i, acc, qk_scale, rows, seq_len, s_layout, o_layout, False, CAUSAL,
                                     STAGES, BLOCK_M, BLOCK_N, HEAD_DIM, EX2_EMU, TREE, LEAN_MASK)
        for j in range(n_full, n_total):
            m_i, l_i, acc = _g1_step(j, n_total, q_smem, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, h,
                                     m_i, l_i, acc, qk_scale, rows, seq_len, s_layout, o_layout, True, CAUSAL,
                                     STAGES, BLOCK_M, BLOCK_N, HEAD_DIM, EX2_EMU, TREE, LEAN_MASK)
    store_output(acc, l_i, q_smem, o_desc, b, h, start_m, o_layout, BLOCK_M, HEAD_DIM)
