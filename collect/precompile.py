"""Compile kernel variants in parallel worker processes before a phase times them.

Triton compiles single-threaded, a second or two per variant, and the correctness, iterations and
decode phases need dozens each: spawned workers fill Triton's on-disk cache, so the phases only
load. A phase alone uses `compile_in_pool`. A whole collect starts one `SharedCompilePool` with
every phase's work before the first phase after env: its workers start once (each imports torch),
and what the later phases need compiles while the correctness phase, which times nothing, runs.
The pool is closed before any phase that times speed, so no worker competes for the CPU then.
Everything here is best effort: a variant the workers miss is compiled by its case, untimed.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

DEFAULT_STALL_S = 120.0  # longest wait for one task's result (a crashed worker loses its task silently)


@dataclass(frozen=True)
class CompileWork:
    """One phase's kernels to compile ahead: `compile_one(task)` runs in a worker and returns None, or
    an error string (the phase's case will meet and record the same error)."""

    label: str
    compile_one: Callable[[tuple], str | None]
    tasks: tuple[tuple, ...]
    workers: int = 8  # the phase's own pool size when it compiles alone
    # Few tasks of several seconds each (a whole model's step, a CuTe DSL kernel): a shared pool queues them
    # first, so they do not start last and hold the pool open long after the many short tasks are done.
    heavy: bool = False


def _workers(wanted: int | None, default: int, tasks: int) -> int:
    if wanted is None:
        wanted = min(default, max(1, (os.cpu_count() or 1) - 1))
    return min(wanted, tasks)


def compile_in_pool(compile_one: Callable[[tuple], str | None], tasks: list[tuple], label: str,
                    workers: int | None, default_workers: int, stall_s: float) -> int | None:
    """Run `compile_one` over `tasks` in spawned processes. Returns how many tasks raised, or None
    when it did not finish (or had too few tasks to be worth a pool)."""
    import multiprocessing as mp

    workers = _workers(workers, default_workers, len(tasks))
    if workers < 2:
        return None
    t0 = time.perf_counter()
    pool = mp.get_context("spawn").Pool(workers)  # fork would copy this process's CUDA context
    failed = 0
    try:
        results = pool.imap_unordered(compile_one, tasks)
        for _ in tasks:
            failed += results.next(timeout=stall_s) is not None
        print(f"{label}: compiled {len(tasks)} kernel variants with {workers} processes in "
              f"{time.perf_counter() - t0:.1f} s ({failed} raised; their cases will record why)", file=sys.stderr)
        return failed
    except Exception as exc:  # noqa: BLE001 - best effort, see the module docstring
        print(f"{label}: parallel compilation stopped ({type(exc).__name__}: {exc}); "
              "the remaining variants compile as their cases run", file=sys.stderr)
        return None
    finally:
        pool.terminate()
        pool.join()


def _timed(compile_one: Callable[[tuple], str | None], task: tuple) -> tuple[str | None, float]:
    """A task's answer and the seconds its worker spent on it: what each phase's work costs the pool, which sets
    when the first timed phase may start."""
    t0 = time.perf_counter()
    return compile_one(task), time.perf_counter() - t0


class SharedCompilePool:
    """Several phases' compile work in one pool of spawned workers, queued in the phases' order, heavy work first."""

    def __init__(self, works: list[CompileWork], workers: int | None = None, stall_s: float = DEFAULT_STALL_S,
                 default_workers: int = 15):
        import multiprocessing as mp

        self.stall_s = stall_s
        self._t0 = time.perf_counter()
        self._done: dict[str, int | None] = {}
        n = sum(len(w.tasks) for w in works)
        self.workers = _workers(workers, default_workers, n)
        self._pool = mp.get_context("spawn").Pool(max(1, self.workers)) if n else None
        # Submitted heavy works first; each phase still waits for its own results only.
        self._pending = {w.label: [self._pool.apply_async(_timed, (w.compile_one, t)) for t in w.tasks] if n else []
                         for w in sorted(works, key=lambda w: not w.heavy)}

    def covers(self, label: str) -> bool:
        return label in self._pending or label in self._done

    def wait(self, label: str) -> int | None:
        """Block until `label`'s tasks are done. Returns how many raised, or None if the pool broke
        down (the phase's cases then compile for themselves)."""
        if label in self._done:
            return self._done[label]
        results = self._pending.pop(label, [])
        failed: int | None = 0
        seconds = []
        try:
            for r in results:
                answer, spent = r.get(timeout=self.stall_s)
                failed += answer is not None
                seconds.append(spent)
            self._report(label, len(results), failed, seconds=seconds)
        except Exception as exc:  # noqa: BLE001 - best effort, see the module docstring
            print(f"{label}: shared compilation stopped ({type(exc).__name__}: {exc}); the remaining variants "
                  "compile as their cases run", file=sys.stderr)
            failed = None
        self._done[label] = failed
        return failed

    def _report(self, label: str, n: int, failed: int, how: str = "", seconds: list[float] = ()) -> None:
        spent = (f"; {sum(seconds):.0f} s of worker time, the slowest variant {max(seconds):.1f} s" if seconds
                 else "")
        print(f"{label}: compiled {n} kernel variants in the shared pool of {self.workers} processes, done "
              f"{time.perf_counter() - self._t0:.1f} s after it started ({failed} raised; their cases will record "
              f"why){how}{spent}", file=sys.stderr)

    def as_done(self, label: str):
        """Yield the index of each of `label`'s tasks as it finishes, in the order they finish, so that a
        phase that times nothing (correctness) runs a case as soon as its variant is compiled instead of
        after the last one. Tasks still pending when the pool breaks down or no task finishes for stall_s
        are yielded at the end (their cases compile for themselves). Afterwards wait(label) answers as if
        it had waited."""
        if label not in self._pending:  # waited for already, or never queued here: nothing left to order
            return
        results = self._pending.pop(label)
        left = set(range(len(results)))
        failed: int | None = 0
        seconds = []
        last = time.perf_counter()
        while left:
            done = [i for i in sorted(left) if results[i].ready()]
            if not done:
                if time.perf_counter() - last > self.stall_s:
                    print(f"{label}: shared compilation stalled for {self.stall_s:.0f} s; the remaining "
                          f"{len(left)} variants compile as their cases run", file=sys.stderr)
                    failed = None
                    break
                time.sleep(0.02)
                continue
            last = time.perf_counter()
            for i in done:
                left.discard(i)
                try:
                    answer, spent = results[i].get(0)
                    failed = None if failed is None else failed + (answer is not None)
                    seconds.append(spent)
                except Exception:  # noqa: BLE001 - a worker that died: its case compiles for itself
                    failed = None
                yield i
        if failed is not None:
            self._report(label, len(results), failed, ", its cases running as each was ready", seconds)
        self._done[label] = failed
        yield from sorted(left)

    def close(self) -> None:
        """Finish every phase's work, then stop the workers."""
        for label in list(self._pending):
            self.wait(label)
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def compile_ahead(pool: SharedCompilePool | None, work: CompileWork | None, workers: int | None = None,
                  stall_s: float = DEFAULT_STALL_S) -> int | None:
    """A phase's precompile: wait for the shared pool where it holds this work, else compile alone."""
    if work is None or not work.tasks:
        return None
    if pool is not None and pool.covers(work.label):
        return pool.wait(work.label)
    return compile_in_pool(work.compile_one, list(work.tasks), work.label, workers, work.workers, stall_s)
