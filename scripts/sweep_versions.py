"""Gluon versions timed beside FlashAttention-4 and SDPA at chosen shapes, on one GPU, in one process.

A version here is a record of kernels/attention/gluon_versions.py (g3, g11, ...), launched as
gluon_attention(version=...) launches it. Every output is first checked against SDPA's (the
iterations phase's limits) at the sweep's shapes and at a ragged length; a wrong one is not timed.
Device time is the project's one clock (collect/timing.py: L2 flushed, the GPU spinning while the
host issues the call), as the bench phase takes it. Rows go to --out after each one, so a timeout
loses nothing; --budget-s turns the cases left after it into `skipped` rows, and a step that has not returned
after --hang-s (a kernel stuck on a barrier) ends the process with its name in the results. Each candidate's row
prints FlashAttention-4's time over its own and, the goal's measure, the fastest yardstick's (> 1: ours faster).

    python3 scripts/sweep_versions.py --out $OUT/sweep.json            # on the H200
    python3 scripts/sweep_versions.py --check-cpu                      # no GPU: compile the versions for sm90
"""
from __future__ import annotations

import time

T0 = time.monotonic()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")  # FA4 compiles once per variant

import torch  # noqa: E402
import triton  # noqa: E402

WRONG_OUTPUT = {"float16": 1e-2, "bfloat16": 5e-2}  # max abs error against SDPA (collect/iterations.py's limits)
YARDSTICKS = ("fa4", "sdpa-cudnn")
# (head_dim, causal, batch, heads, seq_len) -> the versions to time there; the largest gaps first. "steps": the
# second sweep of 2026-12-03 (g11-g14); "routes": which existing step serves the weakest classes best;
# "split": g15 at d=72-96; "split3": g24-g25; "pack": g26; "pack2": g27; "overlap": g16 at d=64; "exp2": g17-g20;
# "tree": g21-g23; "lanes", "lanes2": g28-g31; "late", "late2": g32-g33; "chain": g34-g35;
# "lean": g36-g38; "unroll": g39-g40; "defer": g43; "energy": power at the limit (with --energy-s).
PLANS = {}
PLANS["steps"] = (
    ((128, False, 4, 32, 16384), ("g3", "g11", "g13")),
    ((128, False, 4, 32, 4096), ("g3", "g11", "g13")),
    ((64, True, 2, 8, 16384), ("g10", "g12", "g14", "g13")),
    ((64, True, 2, 8, 8192), ("g10", "g12", "g14", "g13")),
    ((64, False, 2, 8, 16384), ("g8", "g14", "g13")),
    ((128, True, 4, 32, 16384), ("g7", "g11", "g13")),
    ((128, True, 4, 32, 4096), ("g7", "g11", "g13")),
    ((64, True, 2, 8, 4096), ("g10", "g14", "g13")),
    ((64, True, 2, 8, 2048), ("g10", "g14", "g13")),
    ((64, False, 2, 8, 4096), ("g8", "g14", "g13")),
    ((64, False, 2, 8, 2048), ("g8", "g14", "g13")),
    ((64, True, 8, 16, 2048), ("g10", "g14", "g13")),
    ((128, False, 4, 32, 1024), ("g3", "g13")),
    ((128, True, 4, 32, 1024), ("g7", "g13")),
    ((128, False, 1, 32, 32768), ("g3", "g13")),
    # Inference shapes below N=2048, where flash_attention leaves the Gluon kernels ("shipped": its own choice).
    ((64, False, 2, 8, 512), ("shipped", "g8", "g10")),
    ((64, False, 2, 8, 1024), ("shipped", "g8", "g10")),
    ((64, True, 2, 8, 1024), ("shipped", "g10")),
    ((64, True, 2, 8, 512), ("shipped", "g10")),
    ((128, False, 4, 32, 512), ("shipped", "g3", "g13")),
)
PLANS["routes"] = (
    ((64, True, 2, 8, 16384), ("shipped", "g9", "g10")),
    ((64, False, 2, 8, 16384), ("shipped", "g8", "g10", "g1")),
    ((64, True, 2, 8, 8192), ("shipped", "g9", "g10")),
    ((64, False, 2, 8, 8192), ("shipped", "g10")),
    ((64, False, 2, 8, 4096), ("shipped", "g10")),
    ((64, False, 2, 8, 2048), ("shipped", "g10")),
    ((64, False, 8, 16, 2048), ("shipped", "g10")),
    ((128, False, 4, 32, 512), ("shipped", "g3")),
    ((128, False, 1, 16, 8192), ("shipped", "g3")),
    ((128, True, 4, 32, 16384), ("shipped", "g7")),
    ((128, False, 4, 32, 16384), ("shipped", "g3")),
)
PLANS["split"] = (
    ((80, False, 4, 32, 4096), ("g11", "g15")),
    ((96, False, 4, 32, 4096), ("g11", "g15")),
    ((80, True, 4, 32, 4096), ("g11", "g15")),
    ((96, True, 4, 32, 4096), ("g11", "g15")),
    ((72, False, 4, 32, 4096), ("g11", "g15")),
    ((88, False, 4, 32, 4096), ("g11", "g15")),
    ((96, False, 1, 32, 16384), ("g11", "g15")),
    ((128, False, 4, 32, 4096), ("g11", "g15")),
)
PLANS["split3"] = (  # g24-g25: three consumer warpgroups at a split head
    ((80, False, 4, 32, 4096), ("g15", "g24", "g25")),
    ((96, False, 4, 32, 4096), ("g15", "g24", "g25")),
    ((80, True, 4, 32, 4096), ("g15", "g24", "g25")),
    ((96, True, 4, 32, 4096), ("g15", "g24", "g25")),
    ((72, False, 4, 32, 4096), ("g15", "g24")),
    ((88, False, 4, 32, 4096), ("g15", "g24")),
)
PLANS["pack"] = (  # g26: P packed in pairs (no PRMT before each P V); the largest gaps to FlashAttention-4 first
    ((128, False, 4, 32, 16384), ("g15", "g26")),
    ((128, False, 4, 32, 4096), ("g15", "g26")),
    ((128, False, 1, 32, 32768), ("g15", "g26")),
    ((80, False, 4, 32, 4096), ("g15", "g26")),
    ((96, False, 4, 32, 4096), ("g15", "g26")),
    ((128, True, 4, 32, 16384), ("g15", "g26")),
    ((128, True, 4, 32, 4096), ("g15", "g26")),
    ((80, True, 4, 32, 4096), ("g15", "g26")),
    ((128, False, 4, 32, 512), ("g15", "g26")),
    ((128, False, 1, 16, 8192), ("g15", "g26")),
)
PLANS["pack2"] = tuple((shape, ("g15", "g27")) for shape, _ in PLANS["pack"])  # g27: P packed before the wait
PLANS["overlap"] = (
    ((64, True, 2, 8, 16384), ("g10", "g16")),
    ((64, True, 2, 8, 8192), ("g10", "g16")),
    ((64, False, 2, 8, 16384), ("g8", "g10", "g16")),
    ((64, True, 2, 8, 4096), ("g10", "g16")),
    ((64, False, 2, 8, 8192), ("g8", "g10", "g16")),
    ((64, False, 2, 8, 4096), ("g8", "g10", "g16")),
    ((64, True, 2, 8, 2048), ("g10", "g16")),
    ((64, False, 2, 8, 2048), ("g8", "g10", "g16")),
    ((64, True, 8, 16, 2048), ("g10", "g16")),
    ((64, False, 8, 16, 2048), ("g8", "g10", "g16")),
    ((64, False, 2, 8, 1024), ("g10", "g16")),
    ((64, True, 2, 8, 1024), ("g10", "g16")),
)
PLANS["exp2"] = (  # g17-g20: exponentials on the FMA pipes; the largest gaps to FlashAttention-4 first
    ((64, True, 2, 8, 16384), ("g10", "g17", "g20")),
    ((64, False, 2, 8, 16384), ("g8", "g18", "g17")),
    ((64, True, 2, 8, 8192), ("g10", "g17", "g20")),
    ((80, False, 4, 32, 4096), ("g15", "g19")),
    ((96, False, 4, 32, 4096), ("g15", "g19")),
    ((64, False, 2, 8, 4096), ("g8", "g18")),
    ((64, True, 2, 8, 4096), ("g10", "g17")),
    ((64, True, 8, 16, 2048), ("g10", "g17")),
    ((64, False, 8, 16, 2048), ("g8", "g18")),
    ((64, True, 2, 8, 2048), ("g10", "g17")),
    ((64, False, 2, 8, 2048), ("g8", "g18")),
    ((80, True, 4, 32, 4096), ("g15", "g19")),
    ((64, False, 2, 8, 8192), ("g8", "g18")),
    ((64, True, 2, 8, 1024), ("g10", "g17")),
    ((64, False, 2, 8, 1024), ("g10", "g17")),
)
PLANS["tree"] = (  # g21-g23: the softmax's row reductions as trees
    ((64, True, 2, 8, 16384), ("g10", "g21")),
    ((64, False, 2, 8, 16384), ("g8", "g22")),
    ((128, False, 4, 32, 16384), ("g15", "g23")),
    ((64, True, 2, 8, 8192), ("g10", "g21")),
    ((128, False, 4, 32, 4096), ("g15", "g23")),
    ((80, False, 4, 32, 4096), ("g15", "g23")),
    ((64, False, 2, 8, 8192), ("g8", "g22")),
    ((128, True, 4, 32, 16384), ("g15", "g23")),
    ((64, True, 2, 8, 4096), ("g10", "g21")),
    ((64, False, 2, 8, 4096), ("g8", "g22")),
    ((64, True, 8, 16, 2048), ("g10", "g21")),
    ((64, False, 8, 16, 2048), ("g8", "g22")),
    ((96, False, 4, 32, 4096), ("g15", "g23")),
    ((64, True, 2, 8, 2048), ("g10", "g21")),
    ((64, False, 2, 8, 1024), ("g10", "g21")),
    ((128, False, 4, 32, 512), ("g15", "g23")),
)
PLANS["lanes"] = (  # g28-g31: row sums kept per lane; three consumers at d=64 with P packed
    ((64, True, 2, 8, 16384), ("g10", "g28", "g31")),
    ((64, True, 2, 8, 8192), ("g10", "g28", "g31")),
    ((64, False, 2, 8, 16384), ("g8", "g29", "g31")),
    ((128, False, 4, 32, 16384), ("g15", "g30")),
    ((128, False, 4, 32, 4096), ("g15", "g30")),
    ((80, False, 4, 32, 4096), ("g27", "g30")),
    ((128, True, 4, 32, 16384), ("g27", "g30")),
    ((64, True, 2, 8, 4096), ("g10", "g28", "g31")),
    ((64, True, 8, 16, 2048), ("g10", "g28", "g31")),
    ((128, False, 4, 32, 512), ("g15", "g30")),
    ((64, False, 2, 8, 4096), ("g8", "g29", "g31")),
)
PLANS["lanes2"] = (  # g28-g31 again, where the first sweep left a route open
    ((64, True, 2, 8, 16384), ("g10", "g28", "g31")),
    ((64, False, 2, 8, 8192), ("g8", "g31")),
    ((64, True, 2, 8, 8192), ("g28", "g31")),
    ((64, False, 2, 8, 16384), ("g8", "g31")),
    ((96, False, 4, 32, 4096), ("g27", "g30")),
    ((128, False, 1, 32, 32768), ("g15", "g30")),
    ((128, False, 1, 16, 8192), ("g15", "g30")),
    ((128, True, 4, 32, 16384), ("g27", "g30")),
    ((128, True, 4, 32, 4096), ("g27", "g30")),
    ((80, True, 4, 32, 4096), ("g27", "g30")),
    ((96, True, 4, 32, 4096), ("g27", "g30")),
    ((64, False, 8, 16, 2048), ("g8", "g31")),
    ((64, False, 2, 8, 2048), ("g8", "g31")),
    ((128, False, 4, 32, 1024), ("g15", "g30")),
)
PLANS["late"] = (  # g32-g33: each tile's output store left in flight until the next tile's first scores
    ((128, False, 4, 32, 512), ("g30", "g32")),
    ((64, True, 2, 8, 16384), ("g31", "g33")),
    ((128, False, 4, 32, 1024), ("g30", "g32")),
    ((64, True, 2, 8, 8192), ("g28", "g31", "g33")),
    ((128, False, 4, 32, 4096), ("g30", "g32")),
    ((64, False, 2, 8, 16384), ("g31", "g33")),
    ((128, True, 4, 32, 4096), ("g27", "g32")),
    ((128, False, 1, 32, 32768), ("g30", "g32")),
    ((80, False, 4, 32, 4096), ("g30", "g32")),
)
PLANS["late2"] = (  # g32-g33 where the first sweep left a route open
    ((64, True, 2, 8, 4096), ("g28", "g33")),
    ((64, True, 8, 16, 2048), ("g28", "g33")),
    ((128, True, 4, 32, 16384), ("g27", "g32")),
    ((96, False, 4, 32, 4096), ("g27", "g32")),
    ((80, True, 4, 32, 4096), ("g30", "g32")),
    ((96, True, 4, 32, 4096), ("g27", "g32")),
    ((128, False, 1, 16, 8192), ("g30", "g32")),
    ((128, False, 4, 32, 16384), ("g30", "g32")),
    ((64, False, 8, 16, 2048), ("g31", "g33")),
    ((64, True, 2, 8, 2048), ("g28", "g33")),
)
PLANS["chain"] = (  # g34-g35: each tile's last P V beside the next tile's first scores
    ((128, False, 4, 32, 512), ("g32", "g34")),
    ((64, True, 2, 8, 8192), ("g33", "g35")),
    ((64, True, 2, 8, 16384), ("g33", "g35")),
    ((128, False, 4, 32, 1024), ("g32", "g34")),
    ((64, True, 2, 8, 4096), ("g28", "g33", "g35")),
    ((64, True, 8, 16, 2048), ("g28", "g33", "g35")),
    ((128, False, 4, 32, 4096), ("g32", "g34")),
    ((128, True, 4, 32, 4096), ("g32", "g34")),
    ((128, False, 4, 32, 16384), ("g32", "g34")),
    ((64, False, 2, 8, 16384), ("g33", "g35")),
    ((128, True, 4, 32, 16384), ("g32", "g34")),
    ((80, False, 4, 32, 4096), ("g30", "g34")),
)
PLANS["lean"] = (  # g36-g38: the lean mask, where ours trails the most first
    ((64, True, 2, 8, 8192), ("g33", "g36")),
    ((128, False, 4, 32, 512), ("g32", "g37")),
    ((64, True, 2, 8, 16384), ("g33", "g36")),
    ((128, False, 4, 32, 16384), ("g32", "g37")),
    ((64, True, 2, 8, 4096), ("g28", "g38")),
    ((64, True, 8, 16, 2048), ("g28", "g38")),
    ((128, True, 4, 32, 4096), ("g32", "g37")),
    ((128, False, 4, 32, 1024), ("g32", "g37")),
    ((128, True, 4, 32, 16384), ("g32", "g37")),
    ((64, True, 2, 8, 2048), ("g28", "g38")),
    ((80, True, 4, 32, 4096), ("g32", "g37")),
    ((64, False, 2, 8, 16384), ("g33", "g36")),
    ((128, False, 1, 32, 32768), ("g32", "g37")),
)
PLANS["unroll"] = (  # g39-g40: g34 and g35's walk two tiles a pass; checked first, timed only where right
    ((128, False, 4, 32, 512), ("g32", "g37", "g39")),
    ((64, True, 2, 8, 8192), ("g36", "g40")),
    ((128, False, 4, 32, 1024), ("g32", "g37", "g39")),
    ((128, True, 4, 32, 4096), ("g37", "g39")),
)
PLANS["counted"] = (  # g41-g42: K/V slots released by counted arrives; the goal shape ours trails at first
    ((128, False, 4, 32, 16384), ("g32", "g41")),
    ((128, False, 4, 32, 4096), ("g32", "g41")),
    ((80, False, 4, 32, 4096), ("g30", "g32", "g41")),
    ((96, False, 4, 32, 4096), ("g27", "g32", "g41")),
    ((128, True, 4, 32, 4096), ("g37", "g42")),
    ((128, True, 4, 32, 16384), ("g37", "g42")),
    ((128, False, 4, 32, 512), ("g37", "g42")),
    ((128, False, 1, 32, 32768), ("g32", "g41")),
    ((80, True, 4, 32, 4096), ("g37", "g42")),
)
# Shapes every new version must get right before anything is timed: ragged ones, and (the last) a walk of six to
# eight query tiles per program on a 132-SM GPU, so that a hand-over between a program's tiles runs at odd and even
# places in its walk (g34 and g35 passed the first three, where no program takes a second tile, and were wrong at
# every odd place of a longer walk).
CHECKS = ((1, 2, 1000), (2, 3, 333), (1, 1, 4096 + 77), (4, 32, 1024 - 31))
NEW = ("g43",)
PLANS["counted_order"] = (  # each new kernel timed before and after its baseline: how much the order moves a ratio
    ((128, False, 4, 32, 16384), ("g41", "g32", "g41", "g32")),
    ((128, False, 4, 32, 4096), ("g41", "g32", "g41", "g32")),
    ((96, False, 4, 32, 4096), ("g41", "g27", "g41", "g27")),
    ((128, True, 4, 32, 16384), ("g42", "g37", "g42", "g37")),
    ((80, True, 4, 32, 4096), ("g42", "g37", "g42", "g37")),
)

PLANS["energy"] = (  # power and energy per call at the power limit (--energy-s), d=128 non-causal and the d=64 gap
    ((128, False, 4, 32, 16384), ("g32", "g43", "g41")),
    ((128, False, 4, 32, 4096), ("g32", "g43")),
    ((64, False, 2, 8, 16384), ("g33",)),
)
PLANS["defer"] = (  # g43: the output's rescale between the next step's two matmuls; each timed before and after g32
    ((128, False, 4, 32, 16384), ("g43", "g32", "g43", "g32")),
    ((128, False, 4, 32, 4096), ("g43", "g32", "g43", "g32")),
    ((128, False, 1, 32, 32768), ("g43", "g32")),
    ((128, True, 4, 32, 4096), ("g43", "g32", "g42")),
    ((80, False, 4, 32, 4096), ("g43", "g32", "g30")),
)


def label(dtype, head_dim, causal, b, h, n):
    return f"d{head_dim} {'causal' if causal else 'full'} {'bf16' if dtype == 'bfloat16' else 'fp16'} B{b} H{h} N{n}"


class Results:
    """Every row so far, rewritten to `path` after each (collect/jsonio.py's atomic write: a kill leaves the last
    whole file)."""

    def __init__(self, path, meta):
        import threading

        self.path = Path(path) if path else None
        self.doc = dict(meta, rows=[], checks=[], done=False)
        self.lock = threading.Lock()  # the Watchdog writes from its own thread

    def add(self, key, row):
        self.doc[key].append(row)
        self.write()

    def write(self):
        if self.path is not None:
            from collect.jsonio import write_json_atomic

            with self.lock:
                write_json_atomic(self.path, self.doc)


class Watchdog:
    """Ends the process when one step (a check, a case's first call and its timing) has run `hang_s` seconds: a
    kernel that deadlocks (a wrong barrier phase) never returns to Python, and would otherwise spend the rest of
    the device call. Before it exits it records the step that hung in the results (`hung`) and says which; the rows
    before it are already written. The GPU call it leaves blocked ends with the process."""

    def __init__(self, results, hang_s, exit=os._exit):
        import threading

        self.results, self.hang_s, self.exit = results, hang_s, exit
        self.step_name, self.since = "start", time.monotonic()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        if hang_s:
            self.thread.start()

    def step(self, name):
        self.step_name, self.since = name, time.monotonic()

    def stop(self):
        self.stopped.set()

    def _watch(self):
        while not self.stopped.wait(min(1.0, self.hang_s / 4)):
            ran = time.monotonic() - self.since
            if ran > self.hang_s:
                self.results.doc["hung"] = dict(step=self.step_name, after_s=round(ran, 1))
                self.results.write()
                print(f"sweep_versions: '{self.step_name}' has not returned after {ran:.0f} s (--hang-s "
                      f"{self.hang_s:g}); a kernel that waits on a barrier forever looks like this. Ending the "
                      f"process; the rows before it are in the results.", file=sys.stderr, flush=True)
                self.exit(3)
                return


def attention_case(impl, dtype, head_dim, causal, b, h, n):
    """The project's case record (collect/shapes.py): its FLOP count, its forced SDPA backend and its call."""
    from collect.shapes import AttentionCase

    return AttentionCase(impl, dtype, causal, b, h, n, head_dim)


def call_of(case, q, k, v):
    """A zero-argument call (collect/calls.py's call_for): a yardstick or flash_attention's own choice
    ("shipped", the bench's "triton") by name, a Gluon step through gluon_attention."""
    from collect.calls import call_for

    if case.impl == "shipped":
        return call_for(dataclasses.replace(case, impl="triton"), q, k, v)
    if case.impl == "fa4" or case.is_sdpa:
        return call_for(case, q, k, v)
    from kernels.attention.gluon import gluon_attention

    # A step measured wrong runs here too (allow_wrong): the checks below say whether it still is.
    return call_for(case, q, k, v, lambda q, k, v, causal: gluon_attention(q, k, v, causal, version=case.impl,
                                                                           allow_wrong=True))


def error_of(case, call, ref):
    """Max |output - ref| of the case's call, as a float (NaN, a broken output, as the string 'nan')."""
    from collect.calls import forced_backend

    with forced_backend(case):
        out = call()
    torch.cuda.synchronize()
    err = (out.float() - ref.float()).abs().max().item()
    return err if math.isfinite(err) else str(err)


def within(err, dtype):
    return isinstance(err, float) and err <= WRONG_OUTPUT[dtype]


def sdpa_reference(q, k, v, causal):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def against_yardsticks(impl, median_ms, yard_ms):
    """A timed row's ratios: every row after FlashAttention-4's gets its time over the row's own (a yardstick's time is
    kept in `yard_ms` for the rows after it), and a candidate, the goal's measure, the fastest yardstick's (> 1: the
    candidate is faster)."""
    out = {"fa4_over_ours": yard_ms["fa4"] / median_ms} if "fa4" in yard_ms and impl != "fa4" else {}
    if impl in YARDSTICKS:
        yard_ms[impl] = median_ms
        return out
    if yard_ms:
        fastest = min(yard_ms, key=yard_ms.get)
        out.update(fastest_other=fastest, fastest_other_over_ours=yard_ms[fastest] / median_ms)
    return out


def sweep(args):
    from collect import timing
    from collect.calls import forced_backend
    from kernels.attention import flash_attn4

    dev = torch.device("cuda")
    fa4_why = flash_attn4.unavailable_reason(dev)
    deadline = T0 + args.budget_s if args.budget_s else None
    res = Results(args.out, dict(script="scripts/sweep_versions.py", device=torch.cuda.get_device_name(dev),
                                 started=datetime.datetime.now().isoformat(timespec="seconds"),
                                 torch=torch.__version__, triton=triton.__version__,
                                 fa4_version=flash_attn4.version(), fa4_unavailable=fa4_why,
                                 timing="collect/timing.py device_time (L2 flushed), median"))

    def say(msg):
        print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)

    watchdog = Watchdog(res, args.hang_s)
    meter = None
    if args.energy_s:
        from collect.energy import EnergyUnavailable, Meter

        try:
            meter = Meter(dev.index or 0)
        except EnergyUnavailable as exc:
            res.doc["energy_unavailable"] = str(exc)
            say(f"no energy readings: {exc}")

    def inputs(dtype, head_dim, b, h, n):
        return tuple(torch.randn((b, h, n, head_dim), device=dev, dtype=getattr(torch, dtype)) for _ in range(3))

    wrong = set()
    for head_dim in args.check_dims:
        for causal in (False, True):
            for dtype in args.dtypes:
                for b, h, n in CHECKS:
                    q, k, v = inputs(dtype, head_dim, b, h, n)
                    ref = sdpa_reference(q, k, v, causal)
                    for version in args.new:
                        case = attention_case(version, dtype, head_dim, causal, b, h, n)
                        watchdog.step(f"check {version} {label(dtype, head_dim, causal, b, h, n)}")
                        try:
                            err = error_of(case, call_of(case, q, k, v), ref)
                        except Exception as exc:  # noqa: BLE001 - recorded; the version is not timed
                            err = f"{type(exc).__name__}: {exc}"[:300]
                        ok = within(err, dtype)
                        where = label(dtype, head_dim, causal, b, h, n)
                        res.add("checks", dict(version=version, case=where, max_abs_err=err, ok=ok))
                        if not ok:
                            wrong.add(version)
                            say(f"WRONG {version} {where}: {err}")
    say(f"checked {', '.join(args.new)}: {'all right' if not wrong else 'wrong: ' + ', '.join(sorted(wrong))}")

    for (head_dim, causal, b, h, n), versions in PLANS[args.plan]:
        for dtype in args.dtypes:
            where = label(dtype, head_dim, causal, b, h, n)
            q, k, v = inputs(dtype, head_dim, b, h, n)
            ref = sdpa_reference(q, k, v, causal)
            yard_ms = {}
            for impl in (*YARDSTICKS, *versions):
                case = attention_case(impl, dtype, head_dim, causal, b, h, n)
                row = dict(case=where, impl=impl, head_dim=head_dim, causal=causal, batch=b, heads=h, seq_len=n,
                           dtype=dtype)
                if deadline and time.monotonic() > deadline:
                    res.add("rows", dict(row, status="skipped"))
                    continue
                if impl == "fa4" and fa4_why:
                    res.add("rows", dict(row, status="unavailable", reason=fa4_why))
                    continue
                if impl in wrong:
                    res.add("rows", dict(row, status="wrong"))
                    continue
                watchdog.step(f"{impl} {where}")
                try:
                    call = call_of(case, q, k, v)
                    err = error_of(case, call, ref)
                    if not within(err, dtype):
                        res.add("rows", dict(row, status="wrong", max_abs_err=err))
                        say(f"{where:34s} {impl:10s} WRONG {err}")
                        continue
                    with forced_backend(case):
                        dt = timing.device_time(call, timing.wall_ms(call))
                        reading = meter.measure(call, args.energy_s) if meter else None
                        energy = dict(reading.fields(), energy_window_s=reading.window_s,
                                      energy_calls=reading.calls) if reading else {}
                except Exception as exc:  # noqa: BLE001 - a case fails alone
                    res.add("rows", dict(row, status="error", reason=f"{type(exc).__name__}: {exc}"[:400]))
                    say(f"{where:34s} {impl:10s} error {exc}"[:300])
                    continue
                t = dt.timing
                row.update(status="ok", max_abs_err=err, median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
                           n=t.n, tflops=case.flops / (t.median_ms * 1e-3) / 1e12, sm_clock_mhz=dt.sm_clock_mhz)
                row.update(against_yardsticks(impl, t.median_ms, yard_ms), **energy)
                res.add("rows", row)
                say(f"{where:34s} {impl:10s} {t.median_ms:8.4f} ms {row['tflops']:6.1f} TFLOP/s"
                    + (f"  {energy['board_power_w']:5.0f} W {energy['power_sm_clock_mhz'] or float('nan'):5.0f} MHz "
                       f"{energy['energy_mj_per_call']:8.1f} mJ/call" if energy else "")
                    + (f"  fa4/this {row['fa4_over_ours']:.3f}" if "fa4_over_ours" in row else "")
                    + (f"  fastest other ({row['fastest_other']})/this {row['fastest_other_over_ours']:.3f}"
                       if "fastest_other" in row else ""))
            del q, k, v, ref
    watchdog.stop()
    res.doc["done"] = True
    res.write()
    say("done")


def check_cpu(args):
    """Compile every version the sweep times for sm90, at each dtype and masking (no GPU)."""
    from kernels.attention import gluon as G

    bad = 0
    seen = set()
    for (head_dim, causal, *_), versions in PLANS[args.plan]:
        for version in versions:
            if version == "shipped":
                continue
            for dtype in args.dtypes:
                key = (version, head_dim, causal, dtype)
                if key in seen:
                    continue
                seen.add(key)
                try:
                    G.compile_for_target(version, getattr(torch, dtype), head_dim, causal)
                    print(f"ok   {version:4s} d{head_dim} {'causal' if causal else 'full'} {dtype}")
                except Exception as exc:  # noqa: BLE001 - counted in the exit status
                    bad += 1
                    print(f"FAIL {version:4s} d{head_dim} {'causal' if causal else 'full'} {dtype}: {exc}"[:400])
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="JSON file for the rows, rewritten after each (e.g. $OUT/sweep.json)")
    p.add_argument("--budget-s", type=float, default=150.0,
                   help="cases left this many seconds after the start become skipped rows (0: no limit)")
    p.add_argument("--dtypes", default="bfloat16", help="comma-separated torch dtype names")
    p.add_argument("--new", default=",".join(NEW), help="versions checked at ragged shapes before any timing "
                                                         "(an empty string: none)")
    p.add_argument("--plan", choices=sorted(PLANS), default="steps", help="which shapes and versions to time")
    p.add_argument("--check-dims", default="64,128", help="head sizes of the ragged checks, comma-separated")
    p.add_argument("--energy-s", type=float, default=0.0,
                   help="after timing each case, run it back to back this many seconds and record the board's "
                        "power, SM clock and energy per call (collect/energy.py; 0: off)")
    p.add_argument("--check-cpu", action="store_true", help="no GPU: compile the versions for sm90, then exit")
    p.add_argument("--hang-s", type=float, default=90.0,
                   help="end the sweep when one check or case has not returned after this many seconds (a kernel "
                        "that never leaves a barrier wait), recording which in the results; 0: wait forever")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.new = [v for v in args.new.split(",") if v]
    args.check_dims = [int(d) for d in args.check_dims.split(",") if d]
    if args.check_cpu:
        return check_cpu(args)
    if not torch.cuda.is_available():
        p.error("no CUDA GPU visible; --check-cpu compiles the versions without one")
    sweep(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
