"""FlashAttention-4's kernels compiled ahead, in the collect's compile pool, so the bench phase only loads them.

FA4 compiles each kernel variant with the CuTe DSL on its first call, 2-5 s each, single-threaded: at the bench
phase's 16 (dtype, head size, mask) classes that was about 37 s of a 9-minute collect (run h200-20261203b), and
every profiled FA4 case paid it again in its own process under Nsight Compute. FA4 has an on-disk cache, off by
default; the collect turns it on (`enable_persistent_cache`) before anything imports FA4, so the pool's workers,
the phases and the profiler's target processes share what any of them compiled.

Which variant a call compiles depends on the shape as well (FA4 splits the keys when a shape has too few tiles
to fill the GPU), so the tasks call FA4 at the exact shapes the bench phase times. Best effort, like every
precompile: a variant missed here compiles in its case's warm-up, untimed.
"""
from __future__ import annotations

import os
from collections import defaultdict

from .precompile import CompileWork

# flash_attn/cute/cache_utils.py reads these when it is first imported.
CACHE_ENV = "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"
CACHE_DIR_ENV = "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"
IMPL = "fa4"


def enable_persistent_cache() -> None:
    """Turn FA4's on-disk cache on for this process and the processes it starts, unless the caller chose
    (either variable already set). Its entries are keyed by a hash of FA4's own sources, so a stale one
    is never loaded."""
    os.environ.setdefault(CACHE_ENV, "1")


def compile_tasks(cases) -> list[tuple]:
    """One task per (dtype, head size, mask), holding every shape FA4 is timed at in that class: one worker
    compiles the class's first variant and reuses it in memory for the shapes that share it."""
    shapes: dict[tuple, list] = defaultdict(list)
    for c in cases:
        if c.impl == IMPL:
            key = (c.dtype, c.head_dim, c.causal)
            if (c.batch, c.heads, c.seq_len) not in shapes[key]:
                shapes[key].append((c.batch, c.heads, c.seq_len))
    return [(dtype, d, causal, tuple(s)) for (dtype, d, causal), s in sorted(shapes.items())]


def _compile_class(task: tuple) -> str | None:
    """In a spawned worker: one FA4 call per shape of the class, on zeros (FA4 compiles on the first call)."""
    try:
        import torch

        from kernels.attention.flash_attn4 import fa4_attention

        dtype_name, head_dim, causal, shapes = task
        dtype = getattr(torch, dtype_name)
        for b, h, n in shapes:
            q = torch.zeros((b, h, n, head_dim), device="cuda", dtype=dtype)
            fa4_attention(q, q, q, causal=causal)
            del q
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the case meets (and records) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def compile_work(cases, label: str) -> CompileWork | None:
    """The pool's work for FA4's cases among `cases`: None where FA4 cannot run here, or its cache is off
    (compiling in another process would then buy nothing)."""
    if os.environ.get(CACHE_ENV) != "1":
        return None
    from kernels.attention.flash_attn4 import unavailable_reason

    if unavailable_reason() is not None:
        return None
    tasks = compile_tasks(cases)
    return CompileWork(label, _compile_class, tuple(tasks), heavy=True) if tasks else None
