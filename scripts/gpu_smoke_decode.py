"""GPU smoke test for the decode phase (< 90 s on an H200): correctness first, then rough timings.

    python scripts/gpu_smoke_decode.py

Checks the split-KV kernel (bf16 and int8) against a float64 reference, our GPT-2 against
transformers' logits on gpt2-size random weights, one CUDA-graph decode, every decode variant at
batch 4 / context 1000, the gpt2-xl shape's init time, the microbenchmark at a few shapes, and
the decode phase's own code path on a tiny plan.
Exits non-zero if a correctness check fails; timings are printed, never judged.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kernels import decode_attention as da  # noqa: E402
from kernels.gpt2 import PRESETS, GPT2, generate, generate_hf, random_hf_model, teacher_forced_logits  # noqa: E402
from kernels.kv_quant import quantize, quantize_store_  # noqa: E402

T0 = time.perf_counter()
FAILURES: list[str] = []


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def expect(ok: bool, what: str) -> None:
    log(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)


def kernel_checks() -> None:
    torch.manual_seed(0)
    for B, H, L, D, lens in [(2, 12, 1000, 64, [1000, 37]), (1, 32, 16384, 128, [16384]), (3, 25, 300, 64, [1, 129, 300])]:
        q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
        sl = torch.tensor(lens, device="cuda", dtype=torch.int32)
        t = time.perf_counter()
        out = da.decode_attention(q, k, v, sl)
        torch.cuda.synchronize()
        ref = da.reference_decode_attention(q, k, v, sl)
        err = (out.double() - ref).abs().max().item()
        expect(err < 2e-2, f"bf16 kernel B={B} H={H} L={L} D={D} lens={lens}: max err {err:.2e} "
                           f"(first call incl. compile+autotune {time.perf_counter() - t:.1f}s, {da.last_config()})")
        kq, ks = quantize(k)
        vq, vs = quantize(v)
        t = time.perf_counter()
        out8 = da.decode_attention(q, kq, vq, sl, k_scale=ks, v_scale=vs)
        torch.cuda.synchronize()
        ref8 = da.reference_decode_attention(q, kq, vq, sl, k_scale=ks, v_scale=vs)
        err8 = (out8.double() - ref8).abs().max().item()
        vs_bf16 = (out8.double() - ref).abs().max().item()
        expect(err8 < 2e-2, f"int8 kernel same shape: max err vs dequantized reference {err8:.2e}, vs bf16 "
                            f"reference {vs_bf16:.2e} (first call {time.perf_counter() - t:.1f}s, {da.last_config()})")
        sdpa = F.scaled_dot_product_attention(q[:, :, None], k, v).squeeze(2) if lens == [L] * B else None
        if sdpa is not None:
            log(f"      SDPA vs reference at full length: {(sdpa.double() - ref).abs().max().item():.2e}")


def model_checks() -> None:
    t = time.perf_counter()
    hf = random_hf_model(PRESETS["gpt2"], seed=0)
    torch.cuda.synchronize()
    log(f"gpt2 random init on GPU in bf16: {time.perf_counter() - t:.1f}s; attn impl "
        f"{getattr(hf.config, '_attn_implementation', None)}")
    model = GPT2.from_hf(hf)
    torch.manual_seed(1)
    seq = torch.randint(0, 50257, (2, 160))
    with torch.inference_mode():
        ref = hf(input_ids=seq.cuda()).logits[:, 127:159].float()
    for kind in ("bf16", "int8", "int8-dequant"):
        ours = teacher_forced_logits(model, seq, 128, kind)
        diff = (ours - ref).abs().max().item()
        top1 = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
        # int8 may flip near-ties of random weights' logits, so only bf16 must agree on the argmax.
        expect(diff < 0.5 and (kind != "bf16" or top1 > 0.9), f"teacher-forced logits {kind} vs transformers bf16: max |diff| {diff:.3f} "
                                          f"(logit scale {ref.abs().max().item():.2f}), top-1 agreement {top1:.3f}")

    prompt = torch.randint(0, 50257, (4, 1000))
    base = None
    for name, fn in [
        ("hf", lambda bt: generate_hf(hf, prompt, 24, before_timed=bt)),
        ("eager", lambda bt: generate(model, prompt, 24, before_timed=bt)),
        ("graph", lambda bt: generate(model, prompt, 24, cuda_graph=True, before_timed=bt)),
        ("int8-dequant", lambda bt: generate(model, prompt, 24, "int8-dequant", before_timed=bt)),
        ("int8", lambda bt: generate(model, prompt, 24, "int8", before_timed=bt)),
    ]:
        torch.cuda.empty_cache()
        t = time.perf_counter()
        res, peak = _run_with_peak(fn)
        if name == "eager":
            base = res
        match = (res.tokens == base.tokens).float().mean().item() if base is not None else float("nan")
        log(f"{name:13s} B=4 T=1000: median step {statistics.median(res.step_ms):.3f} ms over {len(res.step_ms)} steps, "
            f"peak {peak / 2**20:.1f} MiB, cache {res.cache_bytes / 2**20:.1f} MiB, "
            f"match vs eager {match:.3f}, distinct tokens {res.tokens.unique().numel()}, wall {time.perf_counter() - t:.1f}s")
    expect(True, "all five decode variants ran")

    t = time.perf_counter()
    del model, hf
    torch.cuda.empty_cache()
    hfx = random_hf_model(PRESETS["gpt2-xl"], seed=0)
    torch.cuda.synchronize()
    log(f"gpt2-xl random init on GPU in bf16: {time.perf_counter() - t:.1f}s")
    mx = GPT2.from_hf(hfx)
    for name, fn in [("graph", lambda bt: generate(mx, prompt, 24, cuda_graph=True, before_timed=bt)),
                     ("eager", lambda bt: generate(mx, prompt, 24, before_timed=bt)),
                     ("hf", lambda bt: generate_hf(hfx, prompt, 24, before_timed=bt))]:
        t = time.perf_counter()
        res, _ = _run_with_peak(fn)
        floor_ms = (mx.weight_bytes_per_step() + 1012 * 2 * 48 * 4 * 1600 * 2) / 4.16e12 * 1e3
        log(f"gpt2-xl {name}: median step {statistics.median(res.step_ms):.3f} ms (floor at 4.16 TB/s ~{floor_ms:.3f} ms), "
            f"wall {time.perf_counter() - t:.1f}s")


def _run_with_peak(fn):
    """Peak allocated memory over the timed steps only (reset after prefill and warm-up)."""
    res = fn(torch.cuda.reset_peak_memory_stats)
    return res, torch.cuda.max_memory_allocated()


def quant_check() -> None:
    torch.manual_seed(2)
    qkv = torch.randn(4, 3, 25, 64, device="cuda", dtype=torch.bfloat16) * 3
    _, k, v = qkv.unbind(1)
    kc = torch.zeros(4, 25, 9, 64, device="cuda", dtype=torch.int8)
    vc = torch.zeros_like(kc)
    ks = torch.zeros(4, 25, 9, device="cuda")
    vs = torch.zeros_like(ks)
    quantize_store_(k, v, kc, vc, ks, vs, torch.tensor([5], device="cuda"))
    (qk, sk), (qv, sv) = quantize(k), quantize(v)
    same = bool((kc[:, :, 5] == qk).all() and (vc[:, :, 5] == qv).all() and torch.equal(ks[:, :, 5], sk)
                and torch.equal(vs[:, :, 5], sv) and kc[:, :, 4].abs().sum() == 0)
    expect(same, "fused quantize-store kernel writes exactly what kv_quant.quantize computes, at the given position")


def microbench() -> None:
    from triton.testing import do_bench

    H, D = 32, 128
    # (16, 65536): batch x heads x length x head_dim passes 2^31 elements, so 32-bit offsets would fail.
    for B, L in [(4, 8192), (1, 8192), (16, 16384), (1, 65536), (4, 1024), (16, 65536)]:
        q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        kq, vq = torch.empty(k.shape, device="cuda", dtype=torch.int8), torch.empty(k.shape, device="cuda", dtype=torch.int8)
        ks, vs = torch.empty(k.shape[:3], device="cuda"), torch.empty(k.shape[:3], device="cuda")
        for b in range(B):  # per sequence: quantize's fp32 temporaries stay small
            kq[b], ks[b] = quantize(k[b])
            vq[b], vs[b] = quantize(v[b])
        ref = F.scaled_dot_product_attention(q[:, :, None], k, v).squeeze(2).float()
        sl = torch.tensor([L], device="cuda", dtype=torch.int32)
        cases = {
            "triton-bf16": (lambda: da.decode_attention(q, k, v, sl), 2 * k.numel() * 2),
            "triton-int8": (lambda: da.decode_attention(q, kq, vq, sl, k_scale=ks, v_scale=vs), 2 * (kq.numel() + ks.numel() * 4)),
            "sdpa": (lambda: F.scaled_dot_product_attention(q[:, :, None], k, v), 2 * k.numel() * 2),
        }
        for name, (fn, nbytes) in cases.items():
            diff = (fn().reshape(ref.shape).float() - ref).abs().max().item()
            expect(diff < (0.05 if "int8" in name else 0.01), f"{name} B={B} L={L}: max |out - SDPA| {diff:.2e}")
            tuned = {("dot" if c.kwargs.get("USE_DOT") else "rows") + f"/{c.kwargs.get('BLOCK_N')}/{c.num_warps}/"
                     f"{c.num_stages}": round(t[0], 4)
                     for c, t in getattr(da._split_kv_tuned, "configs_timings", {}).items()} if "triton" in name else {}
            eager_ms = do_bench(fn, warmup=10, rep=50, return_mode="median")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            ms = do_bench(g.replay, warmup=10, rep=50, return_mode="median")
            bw = nbytes / (ms * 1e-3)
            log(f"micro {name:12s} B={B} H={H} D={D} L={L}: graph {ms:.4f} ms (eager call {eager_ms:.4f} ms), "
                f"{bw / 1e12:.2f} TB/s ({100 * bw / 4.16e12:.0f}% of 4.16 TB/s copy) "
                f"{da.last_config() if 'triton' in name else ''} splits={da.default_num_splits(B, H, L, q.device)} "
                f"last tuning (kind/BLOCK_N/warps/stages: ms) {tuned}")
        del q, k, v, kq, vq, ks, vs, ref
        torch.cuda.empty_cache()


def phase_dry_run() -> None:
    """The decode phase's own path on a tiny plan: rows come out, and they serialize."""
    import json

    from collect.decode import ModelPlan, Plan, collect_decode
    from collect.jsonio import to_jsonable

    plan = Plan(models=(ModelPlan("gpt2", ((4, 256),), check_shape=(4, 256)),), micro_contexts=(2048,),
                micro_batches=(2,), new_tokens=17)
    t = time.perf_counter()
    res = collect_decode("smoke", plan, "cuda", 4.16e12, "smoke constant")
    text = json.dumps(to_jsonable(res), allow_nan=False)
    bad = [(r.variant, r.status, r.reason) for r in res.rows if r.status != "ok"]
    bad += [(c.cache, c.status, c.reason) for c in res.checks if c.status != "ok"]
    bad += [(m.impl, m.status, m.reason) for m in res.micro if m.status != "ok"]
    expect(not bad, f"phase dry run: {len(res.rows)} rows, {len(res.checks)} checks, {len(res.micro)} micro rows, "
                    f"{len(text)} bytes of JSON in {time.perf_counter() - t:.1f}s; not ok: {bad}")
    for r in res.rows:
        log(f"      {r.variant:13s} step {r.step_ms_median:.3f} ms, peak {r.peak_mem_bytes / 2**20:.1f} MiB "
            f"(at start {r.mem_at_start_bytes / 2**20:.1f}), cache {r.kv_cache_bytes / 2**20:.1f} MiB, "
            f"x floor {r.achieved_over_floor:.2f}, match {r.token_match}, wall {r.wall_s:.2f}s")
    for c in res.checks:
        log(f"      check {c.cache} vs {c.reference} ({c.sequence}): max diff {c.max_abs_diff}, top1 {c.top1_agreement}, "
            f"median margin {c.median_top2_margin}, max margin at disagreement {c.max_margin_at_disagreement}")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device; this smoke test is for the GPU box", file=sys.stderr)
        return 2
    log(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    import transformers
    import triton

    log(f"triton {triton.__version__} transformers {transformers.__version__}")
    for part in (kernel_checks, quant_check, model_checks, microbench, phase_dry_run):
        try:
            part()
        except Exception as exc:  # keep going: one broken part should not hide the others' output
            import traceback

            traceback.print_exc()
            FAILURES.append(f"{part.__name__}: {type(exc).__name__}: {exc}")
    log(f"done, {len(FAILURES)} failure(s)" + "".join(f"\n  - {f}" for f in FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
