#!/usr/bin/env python3
"""GPU smoke test for kernels/attention.py: is the Triton kernel right, and how fast is it?

1. Correctness: flash_attention against the float64 reference for fp16/bf16, causal or not, on
   (1,2,1000,64), (2,8,2048,64), (4,32,4096,128), (1,2,17,256). The large shape runs the
   autotuner (it is timed below anyway); the others rotate through the autotuner's candidate
   configs as fixed configs, so every candidate is checked without tuning every shape.
2. A register-capped fixed config (maxnreg) runs, seq_len 1 and head_dim 16 work, and
   path="hopper" is refused.
3. Speed at (4,32,4096,128): flash_attention vs SDPA (default, cudnn, flash, efficient),
   median of triton.testing.do_bench, TFLOP/s = 4*B*H*N^2*d (halved when causal).

One failing case prints its error and the script goes on. Usage:
    python3 scripts/gpu_smoke_attention.py [--full-autotune]
"""
import argparse
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import triton  # noqa: E402

from kernels import attention as A  # noqa: E402

SHAPES = [(1, 2, 1000, 64), (2, 8, 2048, 64), (4, 32, 4096, 128), (1, 2, 17, 256)]
BENCH_SHAPE = (4, 32, 4096, 128)
DTYPES = [torch.float16, torch.bfloat16]
# Max |error| vs float64: a few output ulps at |o| ~ 4 (the causal row 0 copies v[0]).
ATOL = {torch.float16: 4e-3, torch.bfloat16: 3e-2}
SDPA_IMPLS = ["sdpa", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient"]

results = {"pass": 0, "fail": 0}


def log(msg=""):
    print(msg, flush=True)


def short(dtype):
    return str(dtype).replace("torch.", "")


def cfg_text(cfg):
    if not cfg:
        return "-"
    text = f"BM={cfg['BLOCK_M']} BN={cfg['BLOCK_N']} warps={cfg['num_warps']} stages={cfg['num_stages']}"
    if cfg.get("maxnreg"):
        text += f" maxnreg={cfg['maxnreg']}"
    return text + (" (autotuned)" if cfg.get("autotuned") else " (fixed)")


def record(ok, line):
    results["pass" if ok else "fail"] += 1
    log(f"[{'PASS' if ok else 'FAIL'}] {line}")


def fail(what, exc):
    results["fail"] += 1
    log(f"[FAIL] {what}: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
    log("       " + traceback.format_exc(limit=3).strip().replace("\n", "\n       "))


def inputs(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(shape, device="cuda", dtype=dtype, generator=g) for _ in range(3))


def max_err(o, q, k, v, causal):
    """Max |o - reference|, the float64 reference computed one batch element at a time."""
    err = 0.0
    for b in range(q.shape[0]):
        ref = A.reference_attention(q[b:b + 1], k[b:b + 1], v[b:b + 1], causal)
        err = max(err, (o[b:b + 1].double() - ref).abs().max().item())
    return err


def header():
    dev = torch.cuda.current_device()
    cap = torch.cuda.get_device_capability(dev)
    smem = A._smem_limit(torch.device("cuda", dev))
    log(f"device: {torch.cuda.get_device_name(dev)}  capability {cap[0]}.{cap[1]}  "
        f"smem/block opt-in {smem} B  arch family {A.arch_of(cap)}")
    log(f"torch {torch.__version__}  triton {triton.__version__}  cuda {torch.version.cuda}  "
        f"parallel precompile {'on' if A._PARALLEL_COMPILE else 'off'} ({os.cpu_count()} cpus)")
    for d in (64, 128, 256):
        cands = A.candidate_configs(cap, d, torch.float16, smem)
        log(f"candidates d={d} fp16: " + ", ".join(
            f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']}/w{c.num_warps}/s{c.num_stages}" for c in cands))
    return cap, smem


def correctness(cap, smem, full_autotune):
    log("\n== 1. correctness vs float64 reference ==")
    turn = 0
    for shape in SHAPES:
        d = shape[-1]
        for dtype in DTYPES:
            for causal in (False, True):
                what = f"{str(shape):18s} {short(dtype):8s} causal={int(causal)}"
                try:
                    config = None
                    if shape != BENCH_SHAPE and not full_autotune:
                        cands = A.candidate_configs(cap, d, dtype, smem)
                        c = cands[turn % len(cands)]
                        turn += 1
                        config = dict(BLOCK_M=c.kwargs["BLOCK_M"], BLOCK_N=c.kwargs["BLOCK_N"],
                                      num_warps=c.num_warps, num_stages=c.num_stages)
                    q, k, v = inputs(shape, dtype)
                    t0 = time.perf_counter()
                    o = A.flash_attention(q, k, v, causal, config=config)
                    torch.cuda.synchronize()
                    first_s = time.perf_counter() - t0
                    used = A.kernel_config_of_last_call()
                    err = max_err(o, q, k, v, causal)
                    ok = o.dtype == dtype and torch.isfinite(o).all().item() and err <= ATOL[dtype]
                    record(ok, f"{what} max_abs_err={err:.3e} (tol {ATOL[dtype]:.0e})  "
                               f"first call {first_s:5.1f}s  {cfg_text(used)}")
                    del q, k, v, o
                except Exception as exc:  # noqa: BLE001 - one case must not end the run
                    fail(what, exc)


def extras(cap):
    log("\n== 2. register cap, edge shapes, refusals ==")
    what = "maxnreg=128 fixed config (2,8,2048,64) fp16 causal"
    try:
        q, k, v = inputs((2, 8, 2048, 64), torch.float16, seed=1)
        cfg = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3, maxnreg=128)
        o = A.flash_attention(q, k, v, True, config=cfg)
        err = max_err(o, q, k, v, True)
        record(err <= ATOL[torch.float16], f"{what}: max_abs_err={err:.3e}  {cfg_text(A.kernel_config_of_last_call())}")
    except Exception as exc:  # noqa: BLE001
        fail(what, exc)
    # Edge shapes: seq_len 1 (Triton specialises an int argument equal to 1), the smallest head_dim.
    for shape, dtype, causal in [((1, 1, 1, 64), torch.float16, False), ((1, 1, 1, 64), torch.float16, True),
                                 ((2, 3, 33, 16), torch.bfloat16, True)]:
        what = f"{str(shape):18s} {short(dtype):8s} causal={int(causal)}"
        try:
            q, k, v = inputs(shape, dtype, seed=3)
            o = A.flash_attention(q, k, v, causal)
            err = max_err(o, q, k, v, causal)
            record(err <= ATOL[dtype], f"{what} max_abs_err={err:.3e}  {cfg_text(A.kernel_config_of_last_call())}")
        except Exception as exc:  # noqa: BLE001
            fail(what, exc)
    try:
        q, k, v = inputs((1, 1, 64, 64), torch.float16)
        A.flash_attention(q, k, v, path="hopper")
        record(False, "path='hopper' should raise ValueError but ran")
    except ValueError as exc:
        record(True, f"path='hopper' refused: {exc}")
    except Exception as exc:  # noqa: BLE001
        fail("path='hopper'", exc)


def bench():
    log(f"\n== 3. speed at {BENCH_SHAPE} (median of do_bench, ms; TFLOP/s) ==")
    b, h, n, d = BENCH_SHAPE
    for dtype in DTYPES:
        for causal in (False, True):
            flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            try:
                q, k, v = inputs(BENCH_SHAPE, dtype, seed=2)
            except Exception as exc:  # noqa: BLE001
                fail(f"inputs {short(dtype)}", exc)
                continue
            times = {}
            for name in ["triton"] + SDPA_IMPLS:
                fn = A.get_impl(name)
                try:
                    t0 = time.perf_counter()
                    fn(q, k, v, causal)  # warm-up; for triton this is the autotuning
                    torch.cuda.synchronize()
                    warm_s = time.perf_counter() - t0
                    ms = triton.testing.do_bench(lambda: fn(q, k, v, causal), warmup=25, rep=100,
                                                 quantiles=[0.5, 0.2, 0.8])
                    times[name] = ms[0]
                    extra = (f"  {cfg_text(A.kernel_config_of_last_call())}, tuned in {warm_s:.1f}s"
                             if name == "triton" else "")
                    log(f"  {short(dtype):8s} causal={int(causal)} {name:15s} {ms[0]:8.3f} ms "
                        f"[p20 {ms[1]:.3f}, p80 {ms[2]:.3f}]  {flops / ms[0] * 1e-9:7.1f} TFLOP/s{extra}")
                except Exception as exc:  # noqa: BLE001
                    log(f"  {short(dtype):8s} causal={int(causal)} {name:15s} unavailable: "
                        f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            if "triton" in times:
                for ref in ("sdpa-cudnn", "sdpa-flash", "sdpa"):
                    if ref in times:
                        log(f"  -> triton speed relative to {ref}: {times[ref] / times['triton']:.2f}x")
            del q, k, v


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-autotune", action="store_true",
                        help="autotune every correctness case instead of rotating fixed configs (slow)")
    parser.add_argument("--skip-bench", action="store_true", help="correctness only")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU visible: this script is for the GPU machine")
    t0 = time.perf_counter()
    cap, smem = header()
    for section in (lambda: correctness(cap, smem, args.full_autotune), lambda: extras(cap),
                    None if args.skip_bench else bench):
        if section is None:
            continue
        t = time.perf_counter()
        try:
            section()
        except Exception as exc:  # noqa: BLE001
            fail("section", exc)
        log(f"   (section took {time.perf_counter() - t:.1f}s)")
    log(f"\nSUMMARY: {results['pass']} pass, {results['fail']} fail, {time.perf_counter() - t0:.1f}s total")
    sys.exit(1 if results["fail"] else 0)


if __name__ == "__main__":
    main()
