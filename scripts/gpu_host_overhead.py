"""Host time per call of flash_attention's Hopper path, and where it goes (H200 check).

The GPU is kept busy first (a long torch.cuda._sleep), so no call ever waits for the device and the
host's own work is what is timed. Prints microseconds per call for flash_attention as shipped, the
portable path and SDPA at a small shape, then a cProfile of the Hopper path's calls.
Run: PYTHONPATH=$PWD python3 scripts/gpu_host_overhead.py
"""
import cProfile
import pstats
import time

import torch

from kernels import attention as A


def per_call_us(fn, n=200):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # ~1 s of queued GPU work: the host never waits below
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / n * 1e6


def main():
    q, k, v = (torch.randn(2, 8, 1024, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    calls = {
        "flash_attention (hopper), non-causal": lambda: A.flash_attention(q, k, v),
        "flash_attention (hopper), causal": lambda: A.flash_attention(q, k, v, True),
        "flash_attention (portable), non-causal": lambda: A.flash_attention(q, k, v, path="portable"),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
        "torch.empty_like": lambda: torch.empty_like(q),
    }
    for name, fn in calls.items():
        print(f"{name:42s} {per_call_us(fn):8.1f} us/call", flush=True)
    fn = calls["flash_attention (hopper), causal"]
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
