"""The decode-attention microbenchmark: our split-KV kernel over a float and an int8 cache against SDPA, and
the copy bandwidth that judges it."""
from __future__ import annotations

import time

from ..schema.decode import DecodeFile, MicroRow
from ..timing import free_cuda_memory, is_oom, summarize
from .plans import Plan, SEED
from .sessions import _clean, _Env, _error_reason


def _time_call(fn, env: _Env):
    """(device timing, host timing) of a warm call; on the CPU, host-clock times for both."""
    if env.cuda:
        from ..timing import measure_call, wall_ms

        times = measure_call([fn], wall_ms(fn), loop=False)
        return times.device, times.host
    samples = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    t = summarize(samples)
    return None, t


def _micro_rows(result: DecodeFile, plan: Plan, env: _Env) -> None:
    import torch
    import torch.nn.functional as F

    from kernels.decode import attention as da
    from kernels.decode.kv_quant import SCALE_BYTES, quantize
    from kernels.decode.split_kv_config import default_num_splits

    H, D = plan.micro_heads, plan.micro_head_dim
    dtype = env.dtype
    shapes = [(c, b) for c in plan.micro_contexts for b in plan.micro_batches]
    for L, B in env.progress(shapes, total=len(shapes), desc="decode micro"):
        rows = {impl: MicroRow(impl=impl, batch=B, heads=H, head_dim=D, context=L, status="ok")
                for impl in ("triton-bf16", "triton-int8", "sdpa")}
        if env.deadline.passed():
            reason = env.deadline.reason()
            for r in rows.values():
                r.status, r.reason = "skipped", reason
            result.micro.extend(rows.values())
            continue
        _clean(env)
        try:
            g = torch.Generator(device=env.device).manual_seed(SEED + L + B)
            q = torch.randn((B, H, D), device=env.device, dtype=dtype, generator=g)
            k = torch.randn((B, H, L, D), device=env.device, dtype=dtype, generator=g)
            v = torch.randn((B, H, L, D), device=env.device, dtype=dtype, generator=g)
            kq = torch.empty(k.shape, device=env.device, dtype=torch.int8)
            vq = torch.empty_like(kq)
            ks = torch.empty(k.shape[:3], device=env.device, dtype=torch.float32)
            vs = torch.empty_like(ks)
            for b in range(B):  # one sequence at a time keeps quantize's fp32 temporaries small
                kq[b], ks[b] = quantize(k[b])
                vq[b], vs[b] = quantize(v[b])
            lens = torch.full((1,), L, device=env.device, dtype=torch.int32)
            # Kept across calls, as a cache keeps them: a call then allocates and zeroes nothing but its output.
            split = da.SplitBuffers(B, H, D, default_num_splits(B, H, L, env.device), env.device)
            ref = F.scaled_dot_product_attention(q.unsqueeze(2), k, v).squeeze(2)
        except Exception as exc:
            status = "oom" if is_oom(exc) else "error"
            for r in rows.values():
                r.status, r.reason = status, _error_reason(exc)
            result.micro.extend(rows.values())
            free_cuda_memory()
            continue
        elem = k.element_size()
        calls = {
            "triton-bf16": (lambda: da.decode_attention(q, k, v, lens, buffers=split), 2 * k.numel() * elem),
            "triton-int8": (lambda: da.decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs, buffers=split),
                            2 * (kq.numel() + ks.numel() * SCALE_BYTES)),
            "sdpa": (lambda: F.scaled_dot_product_attention(q.unsqueeze(2), k, v), 2 * k.numel() * elem),
        }
        for impl, (fn, nbytes) in calls.items():
            r = rows[impl]
            r.bytes_read = int(nbytes)
            try:
                out = fn()  # warm-up: compilation and autotuning land here
                if impl.startswith("triton"):
                    r.num_splits = split.num_splits
                    r.kernel_config = da.last_config()
                r.max_abs_diff_vs_sdpa = float((out.reshape(ref.shape).float() - ref.float()).abs().max())
                dev, host = _time_call(fn, env)
            except Exception as exc:
                r.status = "oom" if is_oom(exc) else "error"
                r.reason = _error_reason(exc)
                free_cuda_memory()
                continue
            t = dev.timing if dev is not None else host
            r.latency_ms_median, r.latency_ms_p10, r.latency_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
            r.host_ms_median = host.median_ms
            r.sm_clock_mhz = dev.sm_clock_mhz if dev is not None else None
            r.achieved_bytes_per_s = nbytes / (t.median_ms * 1e-3)
            r.bandwidth_fraction = r.achieved_bytes_per_s / env.bandwidth if env.bandwidth else None
        result.micro.extend(rows.values())
        env.save()
        del q, k, v, kq, vq, ks, vs, ref, split


def measure_copy_bandwidth(device) -> float:
    """A 1 GiB device-to-device copy's device time, counted as bytes read plus written, like the env phase."""
    import torch

    from ..timing import measure_call, wall_ms

    src = torch.empty(2**28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def copy():
        dst.copy_(src)

    copy()
    t = measure_call([copy], wall_ms(copy), loop=False).device.timing
    return 2 * src.numel() * src.element_size() / (t.median_ms * 1e-3)


