"""Find the decode-attention launch that faults (run with CUDA_LAUNCH_BLOCKING=1), in < 60 s.

    CUDA_LAUNCH_BLOCKING=1 python scripts/gpu_debug_decode_micro.py

Every pinned config of the split-KV kernel, eager and replayed from a CUDA graph, on the shapes where
the decode phase's microbenchmark failed; each launch is announced before it runs and checked against
SDPA after. Then the phase's own microbenchmark loop on the same shapes. The first FAULT line names it.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kernels import decode_attention as da  # noqa: E402
from kernels.kv_quant import quantize  # noqa: E402

T0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def inputs(B, L, H=32, D=128):
    q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kq, ks = quantize(k)
    vq, vs = quantize(v)
    lens = torch.full((1,), L, device="cuda", dtype=torch.int32)
    ref = F.scaled_dot_product_attention(q[:, :, None], k, v).squeeze(2).float()
    return q, k, v, kq, ks, vq, vs, lens, ref


def main():
    log(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    for B, L in [(16, 1024), (1, 1024), (4, 1024), (16, 4096)]:
        q, k, v, kq, ks, vq, vs, lens, ref = inputs(B, L)
        for cfg in da.AUTOTUNE_CONFIGS:
            pinned = {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
            for int8 in (False, True):
                name = f"B={B} L={L} int8={int8} {pinned}"
                args = (q, kq, vq, lens) if int8 else (q, k, v, lens)
                kw = {"k_scale": ks, "v_scale": vs} if int8 else {}
                log(f"launch eager {name}")
                out = da.decode_attention(*args, config=pinned, **kw)
                torch.cuda.synchronize()
                err = (out.float() - ref).abs().max().item()
                log(f"   eager ok, max |out - SDPA| {err:.2e}")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    gout = da.decode_attention(*args, config=pinned, **kw)
                g.replay()
                torch.cuda.synchronize()
                log(f"   graph ok, max |out - SDPA| {(gout.float() - ref).abs().max().item():.2e}")
                del g, gout
        del q, k, v, kq, ks, vq, vs, lens, ref
        torch.cuda.empty_cache()
    log("pinned configs all ran; now the phase's microbenchmark loop")
    from collect.decode import Plan, collect_decode

    plan = Plan(models=(), micro_contexts=(1024, 4096, 8192, 16384, 65536), micro_batches=(4, 1, 16))
    res = collect_decode("debug", plan, "cuda", 4.16e12, "debug constant",
                         progress=lambda it, total=None, desc=None: it)
    for m in res.micro:
        log(f"   {m.impl:12s} B={m.batch:2d} L={m.context:6d} {m.status} {m.reason or ''} "
            f"{(m.bandwidth_fraction or 0) * 100:.0f}% {m.kernel_config} diff {m.max_abs_diff_vs_sdpa}")
    log("done")


if __name__ == "__main__":
    main()
