"""Why does a GPU spin before each timed call change attention timings? (H200 check)

For cuDNN and our kernel at B=4 H=32 N=4096 d=128 fp16 causal, time the same call four ways:
  a. CUDA events, L2 flushed before each call, calls back to back (the bench phase's method);
  b. as a, with ~0.5 ms of GPU spin before each call (the iterations phase's method);
  c. as a, but the host waits for the GPU and sleeps 1 ms after each call: the GPU idles between
     calls as in b, yet the host is never behind the GPU;
  d. as a, without the L2 flush.
and the host time per call with the GPU kept busy. If c matches b, the spin's effect is the idle
time (clocks and power), not launch overhead; if c matches a, it is the host.
Run: PYTHONPATH=$PWD python3 scripts/gpu_timing_check.py (prints a table; ~40 s).
"""
import statistics
import time

import torch
from triton import runtime

from kernels import attention as A

REPS = 40


def timed(fn, mode):
    drv = runtime.driver.active
    cache = drv.get_empty_cache_for_benchmark()
    ts = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if mode == "spin":
            torch.cuda._sleep(1_000_000)
        if mode != "noflush":
            drv.clear_cache(cache)
        s.record()
        fn()
        e.record()
        if mode == "idle":
            torch.cuda.synchronize()
            time.sleep(0.001)
        ts.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ts)


def host_us(fn, n=100):
    torch.cuda._sleep(400_000_000)  # ~0.2 s of GPU work queued first: the host never waits
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    impls = {"sdpa-cudnn": lambda: A.get_impl("sdpa-cudnn")(q, k, v, True),
             "triton": lambda: A.flash_attention(q, k, v, True),
             "triton-portable": lambda: A.flash_attention(q, k, v, True, path="portable")}
    for fn in impls.values():
        fn(); fn()
    torch.cuda.synchronize()
    print(f"{'impl':16} {'a: bench':>10} {'b: spin':>10} {'c: idle':>10} {'d: no flush':>12} {'host us/call':>13}")
    for rnd in range(2):
        for name, fn in impls.items():
            r = {m: timed(fn, m) for m in ("bench", "spin", "idle", "noflush")}
            print(f"{name:16} {r['bench']:10.3f} {r['spin']:10.3f} {r['idle']:10.3f} {r['noflush']:12.3f} "
                  f"{host_us(fn):13.1f}", flush=True)


if __name__ == "__main__":
    main()
