"""One stderr line per stage of a phase, with its wall time: where a collect's minutes go."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager


@contextmanager
def stage(phase: str, what: str):
    t0 = time.perf_counter()
    try:
        yield
    finally:
        print(f"collect: {phase}: {what} took {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
