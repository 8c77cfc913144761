"""Phase decode: KV-cache decode of GPT-2, five ways, plus a decode-attention bandwidth microbenchmark.

Variants (one row each per model, batch and context): transformers' own model and dynamic cache in a
greedy loop (the baseline a user would write); our loop with a bf16 cache, eager; the same loop
captured in a CUDA graph; an int8 cache dequantized in full every step; an int8 cache read by the
Triton split-KV kernel. Weights are transformers' random init with a fixed seed (nothing can be
downloaded), or a local checkpoint from `--model-path` / $DECODE_MODEL_PATH.

Each row: build the cache, prefill, a few warm-up steps, prefill again, reset the peak-memory
statistics, then time every decode step with CUDA events. The model's limits are checked on the
host before anything is launched.
"""
from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .budget import budget_seconds as shared_budget_seconds
from .context import RunContext
from .schema import SCHEMA_VERSION
from .schema.decode import (
    REFERENCE_VARIANT, VARIANTS, DecodeFile, DecodeModel, DecodeRow, LogitCheck, MicroRow,
)
from .timing import free_cuda_memory, is_oom, summarize

MODEL_PATH_ENV = "DECODE_MODEL_PATH"
BUDGET_ENV = "DECODE_BUDGET_S"
# The phase must leave room for the others in an 8-minute collect; past this the remaining rows are
# written as not run (DECODE_BUDGET_S=0: no limit).
BUDGET_S = {"quick": 60.0, "full": 115.0}
SEED = 0
# Measured first at every shape: the others' token match and logit difference are against it.
VARIANT_ORDER = (REFERENCE_VARIANT,) + tuple(v for v in VARIANTS if v != REFERENCE_VARIANT)
CACHE_OF = {"eager": "bf16", "graph": "bf16", "int8-dequant": "int8-dequant", "int8-kernel": "int8"}


@dataclass(frozen=True)
class ModelPlan:
    name: str                                  # a kernels.gpt2.PRESETS key
    shapes: tuple[tuple[int, int], ...]        # (batch, context)
    short: tuple[tuple[int, int], ...] = ()    # shapes that generate Plan.short_tokens instead of new_tokens
    args: object | None = None                 # a ModelArgs that overrides the preset (tests)
    check_shape: tuple[int, int] | None = None  # (batch, context) whose greedy path the logit checks follow


@dataclass(frozen=True)
class Plan:
    models: tuple[ModelPlan, ...]
    micro_contexts: tuple[int, ...]
    micro_batches: tuple[int, ...]
    micro_heads: int = 32
    micro_head_dim: int = 128
    new_tokens: int = 65          # 64 decode steps after the prefill's token: the token-match rows
    short_tokens: int = 25        # 24 timed steps: enough for a median where the budget is tight
    warmup_steps: int = 2
    check_prompt: int = 128
    check_positions: int = 32
    warmup_shape: tuple[int, int] = (4, 512)  # (batch, context) every kernel is compiled and tuned at


GPT2_CONTEXTS = (32, 128, 256, 512, 1000)  # the published study's sweep, at batch 4
PLANS = {
    "quick": Plan(
        models=(ModelPlan("gpt2", ((4, 128), (4, 1000)), check_shape=(4, 128)),),
        micro_contexts=(1024, 8192),
        micro_batches=(4,),
    ),
    "full": Plan(
        # Token-match rows (65 tokens) on the study's context sweep; the batch sweep and the large
        # shape time 24 steps, because transformers' loop costs tens of ms a step on a slow host.
        models=(
            ModelPlan("gpt2", tuple((4, c) for c in GPT2_CONTEXTS), short=((1, 512), (16, 512), (64, 512)),
                      check_shape=(4, 512)),
            ModelPlan("gpt2-xl", (), short=((4, 128), (4, 512), (4, 1000))),
        ),
        micro_contexts=(1024, 4096, 8192, 16384, 65536),
        # batch 4 first: the autotuner tunes each length class on the first shape it meets
        micro_batches=(4, 1, 16),
    ),
}


def budget_seconds(profile: str) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile)


# --- arithmetic the rows report (pure, tested on the CPU) -------------------------------------

def new_tokens_for(n_positions: int, context: int, wanted: int) -> int:
    """As many tokens as wanted, but never past the model's positions."""
    return max(0, min(wanted, n_positions - context))


def kv_bytes_per_step(bytes_per_token: int, context: int, steps: int) -> float:
    """Cache bytes a step reads, averaged over `steps` steps: step s attends over context + s + 1 keys."""
    return bytes_per_token * (context + (steps + 1) / 2)


def floor_ms(bytes_per_step: float, bandwidth: float | None) -> float | None:
    return None if not bandwidth else bytes_per_step / bandwidth * 1e3


def token_agreement(tokens, ref_tokens) -> tuple[float, int, int | None]:
    """(fraction equal, tokens compared, first index where any sequence differs or None)."""
    if tuple(tokens.shape) != tuple(ref_tokens.shape):
        raise ValueError(f"token tensors differ in shape: {tuple(tokens.shape)} vs {tuple(ref_tokens.shape)}")
    eq = tokens == ref_tokens
    bad = (~eq).any(0).nonzero()
    return float(eq.float().mean()), int(eq.numel()), (int(bad[0, 0]) if bad.numel() else None)


def logit_diff_where_matched(logits, ref_logits, tokens, ref_tokens) -> float | None:
    """Max |logit difference| at the final step over sequences whose every token matched (same inputs)."""
    same = (tokens == ref_tokens).all(1).to(logits.device)
    if not bool(same.any()):
        return None
    return float((logits[same] - ref_logits[same]).abs().max())


def compare_logits(test, ref) -> dict:
    """Fields of a LogitCheck from (B, P, V) logits."""
    agree = test.argmax(-1) == ref.argmax(-1)
    top2 = ref.topk(2, dim=-1).values
    margin = (top2[..., 0] - top2[..., 1]).float()
    dis = margin[~agree]
    return {
        "max_abs_diff": float((test.float() - ref.float()).abs().max()),
        "logit_scale": float(ref.float().abs().max()),
        "top1_agreement": float(agree.float().mean()),
        "median_top2_margin": float(margin.median()),
        "max_margin_at_disagreement": float(dis.max()) if dis.numel() else None,
    }


# --- the phase --------------------------------------------------------------------------------

@dataclass
class _Deadline:
    at: float | None
    budget: float | None
    skipped: int = 0

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() > self.at

    def reason(self) -> str:
        self.skipped += 1
        return (f"not run: the decode phase's time budget of {self.budget:.0f} s was spent before this row "
                f"(set {BUDGET_ENV}=0 for no limit)")


@dataclass
class _Env:
    """What rows share: device, floor bandwidth, the deadline, and how to save progress."""

    device: object
    bandwidth: float | None
    deadline: _Deadline
    save: Callable[[], None]
    progress: Callable = field(default=lambda it, **kw: it)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _clean(env: _Env) -> None:
    gc.collect()
    if env.cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # cuBLAS keeps a workspace per stream; clearing them makes every row pay for its own.
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()


def _prompt(batch: int, context: int, vocab: int):
    import torch

    g = torch.Generator().manual_seed(SEED * 1_000_003 + batch * 10_007 + context)
    return torch.randint(0, vocab, (batch, context), generator=g)


def _build_model(mp: ModelPlan, model_path: str | None, env: _Env):
    """(transformers model, our decoder, DecodeModel) for one plan entry."""
    import torch

    from kernels.gpt2 import GPT2, PRESETS, load_hf_model, random_hf_model

    t0 = time.perf_counter()
    dtype = torch.bfloat16 if env.cuda else torch.float32
    if model_path:
        hf = load_hf_model(model_path, env.device, dtype)
        name, weights, seed, ckpt = Path(model_path).name, "checkpoint", None, Path(model_path).name
    else:
        hf = random_hf_model(mp.args or PRESETS[mp.name], seed=SEED, device=env.device, dtype=dtype)
        name, weights, seed, ckpt = mp.name, "random-init", SEED, None
    ours = GPT2.from_hf(hf)
    if env.cuda:
        torch.cuda.synchronize()
    a = ours.args
    info = DecodeModel(
        name=name, weights=weights, seed=seed, checkpoint=ckpt, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
        head_dim=a.head_dim, vocab_size=a.vocab_size, n_positions=a.n_positions, parameters=ours.parameter_count(),
        weight_bytes_per_step=ours.weight_bytes_per_step(), dtype=str(dtype).removeprefix("torch."),
        hf_attn_implementation=getattr(hf.config, "_attn_implementation", None),
        init_s=time.perf_counter() - t0,
    )
    return hf, ours, info


def _warm_up(hf, ours, env: _Env, plan: Plan) -> None:
    """Compile and autotune every kernel at a mid-sweep shape, so no row pays for it (and autotuning
    never chooses on a toy problem)."""
    from kernels.gpt2 import generate, generate_hf

    B, T = plan.warmup_shape
    prompt = _prompt(B, min(T, ours.args.n_positions // 2), ours.args.vocab_size)
    for variant in VARIANT_ORDER:
        if variant == "graph" and not env.cuda:
            continue
        if variant == "hf":
            generate_hf(hf, prompt, 3, warmup_steps=1)
        else:
            generate(ours, prompt, 3, CACHE_OF[variant], cuda_graph=variant == "graph", warmup_steps=1)
    _clean(env)


def _decode_row(variant: str, hf, ours, info: DecodeModel, batch: int, context: int, plan: Plan, env: _Env,
                ref: dict | None, short: bool = False) -> tuple[DecodeRow, object | None]:
    """Measure one row; returns it and the raw result (the reference row's feeds the others)."""
    import torch

    from kernels.gpt2 import cache_bytes_per_token, check_limits, generate, generate_hf

    a = ours.args
    n_new = new_tokens_for(a.n_positions, context, plan.short_tokens if short else plan.new_tokens)
    row = DecodeRow(model=info.name, variant=variant, batch=batch, context=context, new_tokens=n_new, status="ok")
    if env.deadline.passed():
        row.status, row.reason = "error", env.deadline.reason()
        return row, None
    if n_new < 2:
        row.status = "unsupported"
        row.reason = (f"context {context} leaves room for {n_new} new token(s) within the model's {a.n_positions} "
                      "positions; a timed decode step needs at least 2")
        return row, None
    check_limits(a, context, n_new, batch)
    if variant == "graph" and not env.cuda:
        row.status, row.reason = "unsupported", "CUDA graphs need a CUDA device"
        return row, None

    _clean(env)
    mem: dict = {}

    def before():
        if env.cuda:
            torch.cuda.synchronize()
            mem["start"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()

    def after():
        if env.cuda:
            mem["peak"] = torch.cuda.max_memory_allocated()

    prompt = _prompt(batch, context, a.vocab_size)
    t0 = time.perf_counter()
    try:
        if variant == "hf":
            res = generate_hf(hf, prompt, n_new, warmup_steps=plan.warmup_steps, before_timed=before, after_timed=after)
        else:
            res = generate(ours, prompt, n_new, CACHE_OF[variant], cuda_graph=variant == "graph",
                           warmup_steps=plan.warmup_steps, before_timed=before, after_timed=after)
    except Exception as exc:  # one failed row is a row, not a failed phase
        row.status = "oom" if is_oom(exc) else "error"
        row.reason = _error_reason(exc)
        free_cuda_memory()
        return row, None
    row.wall_s = time.perf_counter() - t0

    t = summarize(res.step_ms)
    row.steps_timed = t.n
    row.step_ms_median, row.step_ms_p10, row.step_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
    row.tokens_per_s = batch / (t.median_ms * 1e-3) if t.median_ms > 0 else None
    row.peak_mem_bytes, row.mem_at_start_bytes = mem.get("peak"), mem.get("start")
    row.kv_cache_bytes = res.cache_bytes
    per_token = cache_bytes_per_token(a, batch, int8=variant.startswith("int8"), dtype_bytes=ours.wte.element_size())
    row.weight_bytes_per_step = info.weight_bytes_per_step
    row.kv_bytes_per_step = kv_bytes_per_step(per_token, context, t.n)
    row.bytes_per_step = row.weight_bytes_per_step + row.kv_bytes_per_step
    row.floor_ms = floor_ms(row.bytes_per_step, env.bandwidth)
    row.achieved_over_floor = t.median_ms / row.floor_ms if row.floor_ms else None
    row.distinct_tokens = int(res.tokens.unique().numel())
    if ref is not None:
        row.token_match, row.tokens_compared, row.first_mismatch_step = token_agreement(res.tokens, ref["tokens"])
        row.max_abs_logit_diff = logit_diff_where_matched(res.last_logits, ref["logits"], res.tokens, ref["tokens"])
        row.logit_scale = ref["scale"]
    elif variant == REFERENCE_VARIANT:
        row.logit_scale = float(res.last_logits.abs().max())
    return row, res


def _checks(hf, ours, info: DecodeModel, plan: Plan, mp: ModelPlan, greedy: dict | None, env: _Env) -> list[LogitCheck]:
    """Teacher-forced logits: ours vs transformers on random tokens, then every cache along the greedy path."""
    import torch

    from kernels.gpt2 import teacher_forced_logits

    out: list[LogitCheck] = []

    def check(cache, reference, sequence, batch, prompt_len, positions, fn):
        c = LogitCheck(model=info.name, cache=cache, reference=reference, sequence=sequence, batch=batch,
                       prompt_len=prompt_len, positions=positions, status="ok")
        if env.deadline.passed():
            c.status, c.reason = "error", env.deadline.reason()
        else:
            try:
                for k, v in compare_logits(*fn()).items():
                    setattr(c, k, v)
            except Exception as exc:
                c.status = "oom" if is_oom(exc) else "error"
                c.reason = _error_reason(exc)
                free_cuda_memory()
        out.append(c)

    P = min(plan.check_prompt, ours.args.n_positions - plan.check_positions)
    seq = _prompt(2, P + plan.check_positions, ours.args.vocab_size)

    def vs_transformers(tokens, prompt_len, cache="bf16"):
        with torch.inference_mode():
            ref = hf(input_ids=tokens.to(env.device)).logits[:, prompt_len - 1:-1].float()
        return teacher_forced_logits(ours, tokens, prompt_len, cache), ref

    check("bf16", "transformers", "random", 2, P, plan.check_positions, lambda: vs_transformers(seq, P))
    if greedy is not None:
        T = greedy["context"]
        path = torch.cat([greedy["prompt"], greedy["tokens"]], 1)
        B, n = greedy["tokens"].shape
        base = teacher_forced_logits(ours, path, T, "bf16")
        check("bf16", "transformers", "greedy", B, T, n, lambda: vs_transformers(path, T))
        for cache in ("int8", "int8-dequant"):
            check(cache, REFERENCE_VARIANT, "greedy", B, T, n, lambda cache=cache: (teacher_forced_logits(ours, path, T, cache), base))
        del base
    _clean(env)
    return out


def _model_rows(result: DecodeFile, mp: ModelPlan, plan: Plan, model_path: str | None, env: _Env) -> None:
    hf, ours, info = _build_model(mp, model_path, env)
    result.models.append(info)
    env.save()
    _warm_up(hf, ours, env, plan)
    greedy = None
    cases = [(b, c, v) for b, c in mp.shapes + mp.short for v in VARIANT_ORDER]
    ref = None
    for batch, context, variant in env.progress(cases, total=len(cases), desc=f"decode {info.name}"):
        if variant == REFERENCE_VARIANT:
            ref = None
        row, res = _decode_row(variant, hf, ours, info, batch, context, plan, env, ref, short=(batch, context) in mp.short)
        if variant == REFERENCE_VARIANT and res is not None:
            ref = {"tokens": res.tokens, "logits": res.last_logits, "scale": row.logit_scale}
            if (batch, context) == mp.check_shape:
                greedy = {"context": context, "prompt": _prompt(batch, context, ours.args.vocab_size),
                          "tokens": res.tokens}
        result.rows.append(row)
        env.save()
    result.checks.extend(_checks(hf, ours, info, plan, mp, greedy, env))
    env.save()
    del hf, ours
    _clean(env)


def _time_call(fn, env: _Env, graph: bool = False):
    """Device time of fn. With `graph`, one call is captured in a CUDA graph and the replays are timed:
    the Python wrapper's launch cost (tens of microseconds on a slow host) then drops out, and what is
    left is the kernels' own time, which is what a bandwidth figure is about."""
    if env.cuda:
        import torch

        from .timing import bench_gpu

        if graph:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            return bench_gpu(g.replay, min_time_ms=30.0)
        return bench_gpu(fn, min_time_ms=30.0)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return summarize(times)


def _micro_rows(result: DecodeFile, plan: Plan, env: _Env) -> None:
    import torch
    import torch.nn.functional as F

    from kernels import decode_attention as da
    from kernels.kv_quant import SCALE_BYTES, quantize

    H, D = plan.micro_heads, plan.micro_head_dim
    dtype = torch.bfloat16 if env.cuda else torch.float32
    shapes = [(c, b) for c in plan.micro_contexts for b in plan.micro_batches]
    for L, B in env.progress(shapes, total=len(shapes), desc="decode micro"):
        rows = {impl: MicroRow(impl=impl, batch=B, heads=H, head_dim=D, context=L, status="ok")
                for impl in ("triton-bf16", "triton-int8", "sdpa")}
        if env.deadline.passed():
            reason = env.deadline.reason()
            for r in rows.values():
                r.status, r.reason = "error", reason
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
            "triton-bf16": (lambda: da.decode_attention(q, k, v, lens), 2 * k.numel() * elem),
            "triton-int8": (lambda: da.decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs),
                            2 * (kq.numel() + ks.numel() * SCALE_BYTES)),
            "sdpa": (lambda: F.scaled_dot_product_attention(q.unsqueeze(2), k, v), 2 * k.numel() * elem),
        }
        for impl, (fn, nbytes) in calls.items():
            r = rows[impl]
            r.bytes_read = int(nbytes)
            try:
                out = fn()  # warm-up: compilation and autotuning land here
                if impl.startswith("triton"):
                    r.num_splits = da.default_num_splits(B, H, L, env.device)
                    r.kernel_config = da.last_config()
                r.max_abs_diff_vs_sdpa = float((out.reshape(ref.shape).float() - ref.float()).abs().max())
                t = _time_call(fn, env, graph=True)
            except Exception as exc:
                r.status = "oom" if is_oom(exc) else "error"
                r.reason = _error_reason(exc)
                free_cuda_memory()
                continue
            r.latency_ms_median, r.latency_ms_p10, r.latency_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
            r.achieved_bytes_per_s = nbytes / (t.median_ms * 1e-3)
            r.bandwidth_fraction = r.achieved_bytes_per_s / env.bandwidth if env.bandwidth else None
        result.micro.extend(rows.values())
        env.save()
        del q, k, v, kq, vq, ks, vs, ref


def measure_copy_bandwidth(device) -> float:
    """A 1 GiB device-to-device copy, counted as bytes read plus written, like the env phase."""
    import torch

    from .timing import bench_gpu

    src = torch.empty(2**28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    t = bench_gpu(lambda: dst.copy_(src), min_time_ms=30.0)
    return 2 * src.numel() * src.element_size() / (t.median_ms * 1e-3)


def collect_decode(run_id: str, plan: Plan, device, bandwidth: float | None, bandwidth_source: str | None,
                   save: Callable[[DecodeFile], None] = lambda f: None, progress=None,
                   budget_s: float | None = None, model_path: str | None = None) -> DecodeFile:
    """The phase on any device (tests run it on the CPU under TRITON_INTERPRET with a tiny plan)."""
    import torch

    device = torch.device(device)
    result = DecodeFile(
        schema_version=SCHEMA_VERSION, run_id=run_id,
        dtype="bfloat16" if device.type == "cuda" else "float32",
        prompt=f"random token ids, torch.Generator seeded from {SEED}, batch and context; no tokenizer",
        floor_bandwidth_bytes_per_s=bandwidth, floor_bandwidth_source=bandwidth_source,
        warmup_steps=plan.warmup_steps,
    )
    deadline = _Deadline(time.perf_counter() + budget_s if budget_s else None, budget_s)
    env = _Env(device, bandwidth, deadline, lambda: save(result), progress or (lambda it, **kw: it))
    if model_path:
        result.notes.append(f"Weights: the local checkpoint {Path(model_path).name!r} replaces the first model's "
                            "random weights; later model shapes stay random.")
    else:
        result.notes.append("Weights: transformers' own random initialization from GPT2Config with a fixed seed; "
                            "no pretrained weights were downloaded. Greedy output of random weights repeats tokens "
                            "and its logits have small top-2 margins, so token matches are a strict test.")
    # The microbenchmark first: it is short, and a spent time budget should cut model rows, not it.
    _micro_rows(result, plan, env)
    for i, mp in enumerate(plan.models):
        try:
            _model_rows(result, mp, plan, model_path if i == 0 else None, env)
        except Exception as exc:  # a model that cannot be built: say so, keep the other shapes
            if not is_oom(exc):
                raise
            result.notes.append(f"{mp.name}: out of memory while building the model ({_error_reason(exc)}).")
            free_cuda_memory()
    if deadline.skipped:
        result.notes.append(f"{deadline.skipped} rows were not run: the phase's time budget of {budget_s:.0f} s "
                            f"was spent (set {BUDGET_ENV}=0 for no limit).")
    return result


def run(ctx: RunContext) -> DecodeFile:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("the decode phase needs a CUDA GPU (torch.cuda.is_available() is False)")
    model_path = getattr(ctx, "model_path", None) or os.environ.get(MODEL_PATH_ENV) or None
    if model_path and not Path(model_path).is_dir():
        raise ValueError(f"--model-path {model_path!r} is not a directory; give a local GPT-2 checkpoint folder "
                         "(config.json and weights), or unset it for random weights.")
    bandwidth, source = ctx.measured("copy_bandwidth"), "env copy_bandwidth"
    if bandwidth is None:
        bandwidth, source = measure_copy_bandwidth(torch.device("cuda")), "decode phase copy"
    return collect_decode(
        ctx.run_id, PLANS[ctx.profile], "cuda", bandwidth, source, save=ctx.checkpoint,
        progress=lambda it, total=None, desc=None: ctx.progress(it, total=total, desc=desc),
        budget_s=budget_seconds(ctx.profile), model_path=model_path,
    )


__all__ = ["run", "collect_decode", "PLANS", "Plan", "ModelPlan", "new_tokens_for", "kv_bytes_per_step", "floor_ms",
           "token_agreement", "logit_diff_where_matched", "compare_logits", "budget_seconds"]
