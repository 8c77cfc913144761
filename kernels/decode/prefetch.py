"""Asking L2 for bytes a program will read, before it may read them.

Under programmatic dependent launch a decode product starts while the previous kernel drains, then
waits (`gdc_wait`) until that kernel's results are visible. Its weights do not depend on the previous
kernel, so they can be requested during the wait: the DRAM then stays busy across the boundary
between kernels, instead of idling while one kernel's last programs finish and the next one's first
loads travel. A prefetch holds no register and returns nothing, so the program waits no longer for
having issued it. How much to request is a measured choice (kernels/decode/fused_linear.py, Tuning).

The other direction lost. Each product, once its own weights were requested, asked L2 for its share
of the next product's weights, so that they would stream during its handshake and the next launch
(H200, 2026-12-01, CUDA graph, side by side in one session, identical logits). Per step, with one
request per line: gpt2 batch 4 0.371 -> 0.379 ms, gpt2-xl 2.328 -> 2.429, gpt2 batch 64 0.819 ->
0.836 (int8 cache 0.677 -> 0.697). With sm90's bulk requests (cp.async.bulk.prefetch), capped at 6,
16 or 48 MiB of the next weights: 0.415-0.418, 2.51-2.56, 0.859-0.868. A program that has issued
them seems to finish later, and the next kernel waits for the whole grid.

A separate stream of requests lost too. One kernel, launched beside the chain on a second stream of
the same graph, walked every weight and each layer's cache in the chain's order, one request per line
from 16 or 32 programs, waiting on a counter the products raised as each passed its wait, so that at
most 30% or 50% of L2 was requested ahead of the chain (H200, 2026-12-01, CUDA graph, side by side in
one session, identical logits). Per step: gpt2 batch 4 0.370 -> 0.404-0.431 ms, gpt2-xl 2.26 ->
2.59-2.92, gpt2 batch 64 with the int8 cache 0.650 -> 0.711-0.730. Sixteen programs lost more than 32
at batch 4. Its first form deadlocked in warm-up: a kernel loaded while the stream waited for it
waited for the stream (a bounded wait fixed that).
"""
import triton
import triton.language as tl

LINE_BYTES = tl.constexpr(128)  # an L2 line: one prefetch brings in this many bytes


@triton.jit
def prefetch_l2(ptrs):
    """Ask L2 for the line holding each address in `ptrs` (every address must be valid)."""
    tl.inline_asm_elementwise(
        asm="prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;",
        constraints="=r,l", args=[ptrs], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_rows(base, row_start, row_end, stride_row, width, ROW: tl.constexpr):
    """Ask L2 for rows [row_start, row_end) of a 2-D block at `base`: ROW elements of each (a power of
    two), of which only the first `width` exist, so no request passes a row's end. One request per
    line; a row shorter than a line gets one."""
    PER_LINE: tl.constexpr = LINE_BYTES * 8 // base.dtype.element_ty.primitive_bitwidth
    LINES: tl.constexpr = max(1, ROW // PER_LINE)
    ROWS: tl.constexpr = 64
    cols = tl.minimum(tl.arange(0, LINES) * PER_LINE, width - 1)
    for r0 in range(row_start, row_end, ROWS):
        rows = tl.minimum(r0 + tl.arange(0, ROWS), row_end - 1)
        prefetch_l2(base + rows[:, None].to(tl.int64) * stride_row + cols[None, :])
