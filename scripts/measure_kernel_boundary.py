"""What one boundary between dependent kernels costs inside a CUDA graph, plain and under
programmatic dependent launch, against a software grid barrier inside one persistent kernel.

A measurement on a GPU, not a test. It asks whether a decode step would gain from running its
phases in one persistent kernel instead of one kernel each: every phase here does trivial work
that depends on the phase before (each program reads what its neighbour wrote), so the time per
phase is what the hand-over itself costs.

    python3 scripts/measure_kernel_boundary.py                 # 60 phases, 1 and 2 programs per SM
    python3 scripts/measure_kernel_boundary.py --phases 120 --out boundary.json

On the H200 (2026-12-01, 60 phases, best of 5 rounds of 50 graph replays) a phase took 1.23 us as
its own kernel, 0.93 us as a programmatic dependent, and 1.17 us behind a grid barrier (an atomic
arrival and a spin on it) in one cooperative kernel, with one program per SM; with two, 1.45, 0.97
and 1.44 us. So a launch boundary under PDL is no dearer than a barrier: the microseconds a fused
decode kernel spends above a plain read of its bytes are inside the kernel, not in its launch.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _chain_kernel(buf, row, n, PDL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    r = tl.load(row)
    x = tl.load(buf + r * n + ((pid + 1) % nprog) * BLOCK + tl.arange(0, BLOCK))
    tl.store(buf + (r + 1) * n + pid * BLOCK + tl.arange(0, BLOCK), x + 1.0)
    if pid == 0:  # the next kernel reads the next row: the dependency runs through memory
        tl.debug_barrier()
        tl.store(row, r + 1)


@triton.jit
def _persistent_kernel(buf, counter, n, phases, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for p in range(phases):
        # .cg: past L1, which is not coherent across SMs
        x = tl.load(buf + p * n + ((pid + 1) % nprog) * BLOCK + tl.arange(0, BLOCK), cache_modifier=".cg")
        tl.store(buf + (p + 1) * n + pid * BLOCK + tl.arange(0, BLOCK), x + 1.0)
        tl.debug_barrier()
        tl.atomic_add(counter, 1, sem="release", scope="gpu")
        seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
        while seen < (p + 1) * nprog:
            seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()


def graph_ms(fn, reps: int, rounds: int) -> float:
    """Best over `rounds` of the mean time of `reps` back-to-back replays of fn captured in a graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # compile and warm before capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def measure(phases: int, programs: int, reps: int, rounds: int) -> dict:
    n = programs * BLOCK
    buf = torch.zeros((phases + 1, n), device="cuda")
    row = torch.zeros(1, dtype=torch.int32, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = {}
    for pdl in (False, True):
        def chain():
            row.zero_()
            for _ in range(phases):
                _chain_kernel[(programs,)](buf, row, n, PDL=pdl, BLOCK=BLOCK, num_warps=4,
                                           **({"launch_pdl": True} if pdl else {}))
        out["pdl kernels" if pdl else "kernels"] = graph_ms(chain, reps, rounds)
        if not torch.equal(buf[phases], torch.full_like(buf[phases], float(phases))):
            raise RuntimeError("the chain of kernels computed the wrong result")
    buf.zero_()

    def persistent():
        counter.zero_()
        _persistent_kernel[(programs,)](buf, counter, n, phases, BLOCK=BLOCK, num_warps=4,
                                        launch_cooperative_grid=True)
    out["grid barriers"] = graph_ms(persistent, reps, rounds)
    if not torch.equal(buf[phases], torch.full_like(buf[phases], float(phases))):
        raise RuntimeError("the persistent kernel computed the wrong result")
    return {k: 1000 * ms / phases for k, ms in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", type=int, default=60, help="dependent phases per graph (default 60)")
    ap.add_argument("--reps", type=int, default=50, help="graph replays per timed round (default 50)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds; the best is kept (default 5)")
    ap.add_argument("--out", help="also write the results to this JSON file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_kernel_boundary needs a CUDA GPU: it times kernels, and the interpreter cannot run "
                 "a persistent kernel's grid barrier (its programs run one after another).")
    if args.phases < 1:
        sys.exit(f"--phases must be at least 1, got {args.phases}.")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = {}
    for programs in (sms, 2 * sms):
        us = measure(args.phases, programs, args.reps, args.rounds)
        results[f"{programs} programs"] = us
        print(f"{programs} programs: " + ", ".join(f"{k} {v:.2f} us a phase" for k, v in us.items()), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "phases": args.phases, "us_per_phase": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
