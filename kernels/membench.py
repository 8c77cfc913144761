"""
Memory-hierarchy microbenchmarks: how fast the L2 and the shared memory serve reads
==================================================================================

A roofline with one memory roof (DRAM) cannot say whether a kernel that misses it is limited by
the L2 or by shared memory. These two kernels measure those roofs on whatever GPU runs them; the
env phase times them with the one clock and records the rates beside the DRAM copy.

- :func:`l2_read`: every program reads 4 KiB chunks of a buffer a quarter the size of the L2,
  striding across the whole buffer so that no SM re-reads what its own L1 could hold, and loads
  with ``.cg`` (cache at L2 only). After one warm-up pass the buffer is resident in L2, so the
  rate is the L2's.
- :func:`smem_read`: every program writes a tile to shared memory once, then reads it back
  ``reps`` times with 16-byte loads (Gluon makes the shared-memory buffer explicit); the loads
  alternate between two tiles, so the compiler cannot hoist them out of the loop.

Both accumulate what they read and store one number per program, so no load is dead code.
No file I/O and no timing live here.
"""

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .gluon_compat import thread_barrier

L2_CHUNK = 1024  # float32 elements a program reads per step: 4 KiB
SMEM_ROWS, SMEM_COLS, SMEM_BUFFERS = 32, 128, 2  # two 16 KiB float32 tiles per program


@triton.jit
def _l2_read(src, out, n_chunks, reps, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, CHUNK)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for i in range(reps):
        chunk = (pid + i * nprog) % n_chunks
        acc += tl.load(src + chunk * CHUNK + offs, cache_modifier=".cg")
    tl.store(out + pid, tl.sum(acc, axis=0))


@gluon.jit
def _smem_read(out, reps, ROWS: gl.constexpr, COLS: gl.constexpr, BUFFERS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [gl.num_warps(), 1], [1, 0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    tile = (rows[:, None] * COLS + cols[None, :]).to(gl.float32)
    buf = gl.allocate_shared_memory(gl.float32, [BUFFERS, ROWS, COLS], shared)
    for i in gl.static_range(BUFFERS):
        buf.index(i).store(tile + i)
    thread_barrier()
    acc = gl.zeros([ROWS, COLS], gl.float32, layout)
    for r in range(reps):
        acc += buf.index(r % BUFFERS).load(layout)
    gl.store(out + gl.program_id(0), gl.sum(gl.sum(acc, axis=1), axis=0))


def l2_read(buffer: torch.Tensor, out: torch.Tensor, reps: int) -> int:
    """One launch reading `buffer` (float32, a multiple of 4 KiB, resident in L2) `reps` chunks
    per program, one program per element of `out`. Returns the bytes it reads."""
    n_chunks = buffer.numel() // L2_CHUNK
    if buffer.dtype != torch.float32 or n_chunks < 1 or buffer.numel() % L2_CHUNK:
        raise ValueError(f"buffer must be float32 with a multiple of {L2_CHUNK} elements, "
                         f"got {buffer.dtype} x {buffer.numel()}")
    _l2_read[(out.numel(),)](buffer, out, n_chunks, reps, CHUNK=L2_CHUNK, num_warps=4)
    return out.numel() * reps * L2_CHUNK * 4


def smem_read(out: torch.Tensor, reps: int) -> int:
    """One launch of one program per element of `out`, each reading its shared-memory tile
    `reps` times. Returns the bytes read from shared memory."""
    _smem_read[(out.numel(),)](out, reps, SMEM_ROWS, SMEM_COLS, SMEM_BUFFERS, num_warps=4)
    return out.numel() * reps * SMEM_ROWS * SMEM_COLS * 4


def compile_specs(target):
    """Both kernels on every target, as the env phase launches them (kernels/aot.py): the L2
    read over a quarter of a T4's 4 MiB L2 (every L2 size the phase meets gives a chunk count
    divisible by 16, the one property of it the compiler specialises on), 16 programs per SM
    of a T4's 40; the shared-memory read with 4 per SM. Neither multiplies: no tensor cores."""
    from .aot import CompileSpec, meta

    l2_elems = 4 * 2**20 // 4 // 4
    return [
        CompileSpec(f"float32 {l2_elems * 4 // 2**20} MiB x {L2_CHUNK * 4 // 1024} KiB chunks",
                    lambda: l2_read(meta(l2_elems, dtype=torch.float32), meta(16 * 40, dtype=torch.float32), 256),
                    tensor_cores=False),
        CompileSpec(f"float32 {SMEM_BUFFERS} x {SMEM_ROWS}x{SMEM_COLS} tiles",
                    lambda: smem_read(meta(4 * 40, dtype=torch.float32), 2048), tensor_cores=False),
    ]
