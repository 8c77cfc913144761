"""How much host time each piece of the flash_attention wrapper costs per call (H200 check)."""
import time

import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from anywhere

import torch

import kernels.attention as A


def per_call_us(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


q, k, v = (torch.randn(2, 8, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
A.flash_attention(q, k, v)
tuner = A._autotuned_kernel(torch.cuda.get_device_capability(q.device), A._smem_limit(q.device))
print("full wrapper            ", round(per_call_us(lambda: A.flash_attention(q, k, v)), 1), "us")
print("check_inputs            ", round(per_call_us(lambda: A._check_inputs(q, k, v, None)), 1), "us")
print("get_device_capability   ", round(per_call_us(lambda: torch.cuda.get_device_capability(q.device)), 1), "us")
print("smem_limit              ", round(per_call_us(lambda: A._smem_limit(q.device)), 1), "us")
print("precompile check        ", round(per_call_us(lambda: A._precompile_candidates(tuner, q, k, v, o, False, 0.125)), 1), "us")
print("autotuner launch only   ", round(per_call_us(lambda: A._launch(tuner, q, k, v, o, False, 0.125)), 1), "us")
cfg = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
print("fixed-config launch     ", round(per_call_us(lambda: A._launch(A._attn_fwd, q, k, v, o, False, 0.125, **cfg)), 1), "us")
print("sdpa                    ", round(per_call_us(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)), 1), "us")
print("torch.cuda.device ctx   ", round(per_call_us(lambda: torch.cuda.device(q.device).__enter__()), 1), "us")
