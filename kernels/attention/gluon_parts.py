"""The jitted pieces both Gluon kernels (gluon.py) share: the MMA layout and box view, the key-tile
bounds, the online-softmax update and its rescale, the P operand, the output store, the walk's tile
order, and the named-barrier handoffs of the warp-specialized kernel. Split from gluon.py so that the
kernel file holds the two kernels and their launcher."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from ..gluon_compat import async_store
from .fma_exp2 import exp2_shared



@gluon.constexpr_function
def mma_layout(num_warps, n):
    """The wgmma accumulator layout: warps stacked along the rows (16 per warp), one instruction
    as wide as the whole tile (n <= 256). 16-bit inputs, so k = 16 per instruction."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, n, 16])


@gluon.jit
def as_4d(smem, BLOCK: gl.constexpr, HEAD_DIM: gl.constexpr):
    """A [BLOCK, HEAD_DIM] buffer seen as the [1, 1, BLOCK, HEAD_DIM] box of a 4-D descriptor.

    The descriptors are 4-D (batch, heads, seq_len, head_dim) so that any strides work,
    including a (batch, seq_len, heads, head_dim) tensor transposed; and a box never crosses
    into the next head, so the copy engine zero-fills past seq_len."""
    return smem.reshape([1, 1, BLOCK, HEAD_DIM])


# Hardware named barriers (16 per CTA; Triton's own barriers inside warp-specialized partitions take the
# low ids). TURN_BARRIER + w passes the matmul turn to consumer warpgroup w (g11 on). From g13 the
# consumers also release K/V ring slot s through EMPTY_BARRIER + s (K) and EMPTY_BARRIER + STAGES + s (V)
# where an mbarrier arrive did: Triton lowers an mbarrier arrive to one thread's, after a bar.sync of the
# whole warpgroup so that every warp is done with the buffer, three of them in each key step.
EMPTY_BARRIER = gl.constexpr(4)
TURN_BARRIER = gl.constexpr(10)


@gluon.jit
def named_barrier(bar_id, SYNC: gl.constexpr, THREADS: gl.constexpr = 256):
    """bar.sync (SYNC) or bar.arrive on named barrier `bar_id`, complete when THREADS threads have
    come: the calling warps and the ones they signal or wait for. An arrive does not wait, so a pair of
    warp groups, one arriving and one syncing, makes a one-way signal, the cheapest the hardware has
    (an mbarrier round trip costs several times more, g4's outcome). Each calling thread executes it
    once: the tensor has one element per thread of the calling partition."""
    warps: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [warps], [0])
    ids = gl.full([32 * warps], bar_id, gl.int32, layout)
    counts = gl.full([32 * warps], THREADS, gl.int32, layout)
    if SYNC:
        gl.inline_asm_elementwise("mov.b32 $0, $1;\n bar.sync $1, $2;", "=r,r,r", [ids, counts], gl.int32, False, 1)
    else:
        gl.inline_asm_elementwise("mov.b32 $0, $1;\n bar.arrive $1, $2;", "=r,r,r", [ids, counts], gl.int32, False,
                                  1)


# How a consumer warpgroup hands a K/V ring slot back (the kernels' RELEASE): an mbarrier arrive; (g13) an arrive
# on the slot's named barrier, which the producer syncs on; or (g41) an mbarrier arrive of count RELEASE_COUNT on a
# barrier that expects that many from each consumer. The counted arrive does the same work, but its PTX form
# (`mbarrier.arrive... [addr], 2;`) lets ptxas keep the wait for the previous P V after most of the softmax, as
# FlashAttention-4's counted arrive does; the count-less form draws the wait up into the row max (notes.md,
# "Static SASS of g32 beside FlashAttention-4's sm90 forward").
RELEASE_ARRIVE = gl.constexpr(0)
RELEASE_NAMED = gl.constexpr(1)
RELEASE_COUNTED = gl.constexpr(2)
RELEASE_COUNT = gl.constexpr(2)


@gluon.jit
def release(empty, slot, bar_id, RELEASE: gl.constexpr, CONSUMERS: gl.constexpr):
    """A consumer warpgroup is done with ring slot `slot`, handed back as RELEASE says."""
    if RELEASE == RELEASE_NAMED:
        named_barrier(bar_id, False, CONSUMERS * 128 + 32)
    elif RELEASE == RELEASE_COUNTED:
        mbarrier.arrive(empty.index(slot), count=RELEASE_COUNT)
    else:
        mbarrier.arrive(empty.index(slot))


@gluon.jit
def await_empty(empty, slot, phase, kv, bar_id, RELEASE: gl.constexpr, CONSUMERS: gl.constexpr,
                STAGES: gl.constexpr):
    """The producer waits until every consumer has released ring slot `slot` (a fresh slot is empty).
    A named barrier has no phases, so the producer meets the consumers at each refill after the
    first: their arrivals for one fill cannot come before the fill, which follows this sync."""
    if RELEASE == RELEASE_NAMED:
        if kv >= STAGES:
            named_barrier(bar_id, True, CONSUMERS * 128 + 32)
    else:
        mbarrier.wait(empty.index(slot), phase ^ 1)


@gluon.jit
def key_tiles(start_m, seq_len, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """(n_full, n_total): the query rows [start_m, start_m + BLOCK_M) see key tiles [0, n_total);
    the first n_full of them are visible in full to every row (no mask), the rest need one
    (the diagonal when causal, and the ragged last tile)."""
    if CAUSAL:
        hi = gl.minimum(start_m + BLOCK_M, seq_len)
        # A key tile is whole if its last key is at or before the tile's first query row.
        n_full = gl.minimum((start_m + 1) // BLOCK_N, seq_len // BLOCK_N)
    else:
        hi = seq_len
        n_full = seq_len // BLOCK_N
    return n_full, gl.cdiv(hi, BLOCK_N)


@gluon.constexpr_function
def _register_column_bits(n):
    """How many of a wgmma accumulator's column bits above the lowest are a thread's registers: column
    8 j + 2 (lane % 4) + r holds j (n / 8 values) and r in registers, the lane bits in between."""
    return (n // 8).bit_length() - 1


@gluon.jit
def _fold(x, lo_bit: gl.constexpr, MAX: gl.constexpr):
    """Combine the two halves of x's columns that differ in the top column bit (lo_bit: the lowest bit)
    elementwise: both halves are in each thread's registers, so this is independent work, no shuffle."""
    M: gl.constexpr = x.shape[0]
    N: gl.constexpr = x.shape[1]
    if lo_bit:
        a, b = gl.split(gl.reshape(x, [M, N // 2, 2]))
    else:
        a, b = gl.split(gl.permute(gl.reshape(x, [M, 2, N // 2]), [0, 2, 1]))
    if MAX:
        y = gl.maximum(a, b)
    else:
        y = a + b
    return y


@gluon.jit
def row_reduce(x, MAX: gl.constexpr):
    """The max (MAX) or sum of each row of a wgmma accumulator tile, as a tree: the register-held column
    bits are folded pairwise (each level independent instructions), then the four lanes of a row by
    shuffles. gl.max and gl.sum walk a thread's 2 x n / 8 elements of a row as one dependent chain."""
    for _ in gl.static_range(_register_column_bits(x.shape[1])):
        x = _fold(x, False, MAX)
    x = _fold(x, True, MAX)
    if MAX:
        r = gl.max(x, 1)
    else:
        r = gl.sum(x, 1)
    return r


@gluon.jit
def softmax_update(s, m_i, l_i, qk_scale, rows, col0, seq_len, MASK: gl.constexpr, CAUSAL: gl.constexpr,
                   EX2_EMU: gl.constexpr = 0, TREE: gl.constexpr = False, LEAN_MASK: gl.constexpr = False):
    """Fold one tile of raw scores, whose first column is key col0, into the running row max m_i and denominator l_i.

    Returns (p, alpha, m_i, l_i): p = exp2 of the scaled, max-shifted scores in fp32, and alpha
    the factor the accumulator must be multiplied by. On a row's first tile m_i is -inf and
    alpha = exp2(-inf) = 0. Every row sees at least one key in its first tile, so a fully masked
    row (and -inf - -inf) never happens. EX2_EMU of every four exponentials of p run on the FMA pipes
    (fma_exp2.py), the rest on the special-function unit; TREE takes the row max and sum by row_reduce.
    LEAN_MASK (g36-g38): a masked tile costs two instructions a score.
    """
    SCALE_FIRST: gl.constexpr = MASK and not LEAN_MASK
    offset = gl.arange(0, s.shape[1], layout=gl.SliceLayout(0, s.type.layout))  # each column's place in the tile
    cols = col0 + offset
    if MASK and LEAN_MASK:
        # How many of this tile's columns each row sees, one subtraction a row; each score is then kept or not by
        # a single compare of its offset in the tile with its row's count, which takes in the sequence's end as
        # well; the scores are then scaled after the row max, in one FMA, as on unmasked tiles (-inf stays -inf).
        # In a wgmma accumulator, column 8 j + 2 (lane % 4) + r sits in register (j, r) of a lane: the bits of
        # `lane` (offset & 6) are the same in all of a thread's registers, so taking them off the row's count
        # instead leaves each register a constant to compare with (true of any layout, cheap only in this one).
        lane = offset & 6
        seen = seq_len - col0
        if CAUSAL:
            seen = gl.expand_dims(gl.minimum(rows + 1 - col0, seen), 1)
        visible = gl.expand_dims(offset & -7, 0) < seen - gl.expand_dims(lane, 0)
        s = gl.where(visible, s, float("-inf"))
    if SCALE_FIRST:
        # A zero-filled key past seq_len scores 0, not -inf: it is masked like a future key.
        visible = gl.expand_dims(cols, 0) < seq_len
        if CAUSAL:
            visible = visible & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        s = gl.where(visible, s * qk_scale, float("-inf"))
    # Written out, not through a shared jitted helper: an inlined call leaves debug labels in the PTX, and
    # ptxas then allocates registers differently (it spilled g14 8 more bytes).
    if TREE:  # the tree's rows come out in a layout of its own, the same registers as m_i's
        s_max = gl.convert_layout(row_reduce(s, True), m_i.type.layout)
    else:
        s_max = gl.max(s, 1)
    if SCALE_FIRST:
        m_new = gl.maximum(m_i, s_max)
        s = s - gl.expand_dims(m_new, 1)
    else:
        # Scale after the row max (valid for scale > 0): scale and shift become one FMA.
        m_new = gl.maximum(m_i, s_max * qk_scale)
        s = s * qk_scale - gl.expand_dims(m_new, 1)
    if EX2_EMU:
        p = exp2_shared(s, EX2_EMU)
    else:
        p = gl.exp2(s)
    alpha = gl.exp2(m_i - m_new)
    if len(l_i.shape) == 2:  # lane sums (row_sums_start): no shuffle until the tile's end
        l_i = l_i * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, l_i.type.layout)), 1) + lane_row_sums(p)
    elif TREE:
        l_i = l_i * alpha + gl.convert_layout(row_reduce(p, False), m_i.type.layout)
    else:
        l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def lane_row_sums(p):
    """Each row's sum over the columns this thread holds, one partial per lane of the row's four: a
    [rows, 4] tile. Column 8 j + 2 (lane % 4) + r of a wgmma accumulator is register (j, r) of a lane, so
    summing over j and r adds a thread's own registers; gl.sum(p, 1) also shuffles the four lanes together."""
    M: gl.constexpr = p.shape[0]
    N: gl.constexpr = p.shape[1]
    return gl.sum(gl.sum(gl.reshape(p, [M, N // 8, 4, 2]), 3), 1)


@gluon.jit
def row_sums_start(M: gl.constexpr, N: gl.constexpr, s_layout: gl.constexpr, LANE_SUM: gl.constexpr):
    """The softmax denominators before the first key tile: one per row, or with LANE_SUM (g28) one per row
    and lane, which softmax_update then keeps apart until row_sums_total (FlashAttention-4's sm90 forward
    keeps its row sums this way)."""
    if LANE_SUM:
        l_i = lane_row_sums(gl.zeros([M, N], gl.float32, s_layout))
    else:
        l_i = gl.full([M], 0.0, gl.float32, gl.SliceLayout(1, s_layout))
    return l_i


@gluon.jit
def row_sums_total(l_i):
    """Each row's denominator: the lanes' partials added once, after the last key tile."""
    if len(l_i.shape) == 2:
        l_i = gl.sum(l_i, 1)
    return l_i


@gluon.jit
def rescale(acc, alpha, o_layout: gl.constexpr):
    alpha = gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))
    return acc * gl.expand_dims(alpha, 1)


@gluon.jit
def p_operand(p, dtype: gl.constexpr, o_layout: gl.constexpr, PACK: gl.constexpr = False):
    """P rounded to the input dtype, in the register layout wgmma takes its A operand in.

    PACK (g26): round each pair of a thread's neighbouring values into one 32-bit register with one
    cvt.rn.{bf16,f16}x2 of inline assembly, the pair's first value in the low half, as the A operand holds
    them. Rounded one value at a time (p.to(dtype)), the values reach the overlapped loop's last
    wgmma wait as separate 16-bit registers, and ptxas then swaps the halves of every P register with a
    PRMT before each P V: one PRMT per P register per key step, 2 per HGMMA at d=128 (ncu, 2026-12-04)."""
    if PACK:
        if dtype == gl.bfloat16:
            p = gl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [p], gl.bfloat16, True, 2)
        else:
            p = gl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [p], gl.float16, True, 2)
    else:
        p = p.to(dtype)
    return gl.convert_layout(p, gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2))


@gluon.jit
def store_output(acc, l_i, smem, o_desc, b, h, row, o_layout: gl.constexpr,
                  BLOCK: gl.constexpr, HEAD_DIM: gl.constexpr, COL: gl.constexpr = 0, WAIT: gl.constexpr = True):
    """acc / l through shared memory `smem` (free by now) to global memory by one TMA store,
    which clips rows past seq_len. Returns once the store has read `smem`; WAIT=False returns at once, and the
    caller waits (tma.store_wait) before `smem` is written again."""
    l_o = gl.convert_layout(row_sums_total(l_i), gl.SliceLayout(1, o_layout))
    o = acc / gl.expand_dims(l_o, 1)
    smem.store(o.to(o_desc.dtype))
    fence_async_shared()  # order the generic-proxy stores before the async-proxy (TMA) read
    async_store(o_desc, [b, h, row, COL], as_4d(smem, BLOCK, HEAD_DIM))
    if WAIT:
        tma.store_wait(0)


@gluon.jit
def tile_coords(t, tiles_m, num_heads, total_tiles, head_group, snake, CAUSAL: gl.constexpr):
    """Tile t of a walk -> (batch, head, query tile): the t-th tile of the persistent programs' strided
    walk (g2-g7), or program t's one tile on g9's one-dimensional grid. The walk's order is a rank:
    heads in groups of `head_group`, and within a group its query tiles interleaved across the
    group's heads, the longest (causal) first; programs working on one group at once share its key
    and value tiles in L2. snake=1 reverses every other round of the walk, so the program that took a
    round's longest tile takes the next round's shortest. head_group=1, snake=0 is head by head. Both
    are run-time values, so every walk runs one compiled kernel."""
    rank = t
    if snake != 0:
        p = gl.num_programs(0)
        r = t // p
        pos = t - r * p
        if r % 2 == 1:
            pos = gl.minimum(p, total_tiles - r * p) - 1 - pos
        rank = r * p + pos
    span = head_group * tiles_m
    g = rank // span
    base = g * head_group
    size = gl.minimum(head_group, total_tiles // tiles_m - base)
    i = rank - g * span
    bh = base + i % size
    m = i // size
    if CAUSAL:
        m = tiles_m - 1 - m  # longest query tiles first
    return bh // num_heads, bh % num_heads, m
