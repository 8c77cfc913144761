"""Compile kernel variants in parallel worker processes before a phase times them."""
from __future__ import annotations

import os
import sys
import time
from typing import Callable


def compile_in_pool(compile_one: Callable[[tuple], str | None], tasks: list[tuple], label: str,
                    workers: int | None, default_workers: int, stall_s: float) -> int | None:
    """Run `compile_one` over `tasks` in spawned processes; each returns None or an error string.

    Triton compiles single-threaded, a second or two per variant, and a phase needs dozens: the
    workers fill Triton's on-disk cache so the cases only load. Best effort: on any failure or stall
    the cases compile for themselves. Returns how many tasks raised, or None when it did not finish.
    """
    import multiprocessing as mp

    if workers is None:
        workers = min(default_workers, max(1, (os.cpu_count() or 1) - 1))
    workers = min(workers, len(tasks))
    if workers < 2:
        return None
    t0 = time.perf_counter()
    pool = mp.get_context("spawn").Pool(workers)  # fork would copy this process's CUDA context
    failed = 0
    try:
        results = pool.imap_unordered(compile_one, tasks)
        for _ in tasks:
            # A crashed worker loses its task silently: a stall, not an exception, so bound each wait.
            failed += results.next(timeout=stall_s) is not None
        print(f"{label}: compiled {len(tasks)} kernel variants with {workers} processes in "
              f"{time.perf_counter() - t0:.1f} s ({failed} raised; their cases will record why)", file=sys.stderr)
        return failed
    except Exception as exc:  # noqa: BLE001 - best effort, see docstring
        print(f"{label}: parallel compilation stopped ({type(exc).__name__}: {exc}); "
              "the remaining variants compile as their cases run", file=sys.stderr)
        return None
    finally:
        pool.terminate()
        pool.join()
