"""The phase driver: rows in order of what the report needs most, until the time budget is spent."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from ..budget import no_limit_hint
from ..context import RunContext
from ..schema import SCHEMA_VERSION
from ..schema.decode import DecodeFile, REFERENCE_VARIANT
from ..stage_log import stage
from ..timing import free_cuda_memory, is_oom
from .agreement import _agreement_reference, _agreement_rows, _agreement_shape, agreement_order
from .baselines import _host_profile_rows
from .compiling import precompile
from .micro import _micro_rows, measure_copy_bandwidth
from .plans import (BUDGET_ENV, GRAPH_STEP, MODEL_PATH_ENV, Plan, PLANS, SEED, _dtype_choice, budget_seconds,
                    graph_step_from_env, native_dtype, variant_specs)
from .rows import _rows
from .sessions import _build_model, _clean, _Deadline, _Env, _error_reason, _Model, _warm_up, heap_unfrozen_after


@heap_unfrozen_after()
def collect_decode(run_id: str, plan: Plan, device, bandwidth: float | None, bandwidth_source: str | None,
                   save: Callable[[DecodeFile], None] = lambda f: None, progress=None,
                   budget_s: float | None = None, model_path: str | None = None,
                   graph_step: str = GRAPH_STEP, dtype: tuple[str, str] | None = None,
                   compile_pool=None) -> DecodeFile:
    """The phase on any device (tests run it on the CPU under TRITON_INTERPRET with a tiny plan).
    dtype: (name, reason) chosen from the device facts (a rehearsal's GPU decodes in its own dtype);
    None: the device's own choice. compile_pool: the collect's shared one (collect/precompile.py)."""
    import torch

    device = torch.device(device)
    if dtype is not None and device.type == "cuda":
        torch_dtype, reason = getattr(torch, dtype[0]), dtype[1]
    else:
        torch_dtype, reason = native_dtype(device)
    result = DecodeFile(
        schema_version=SCHEMA_VERSION, run_id=run_id,
        dtype=str(torch_dtype).removeprefix("torch."), dtype_reason=reason,
        prompt=f"random token ids from a torch.Generator seeded by {SEED}, the batch and the context; no tokenizer",
        floor_bandwidth_bytes_per_s=bandwidth, floor_bandwidth_source=bandwidth_source,
        warmup_steps=plan.warmup_steps, graph_step=graph_step,
    )
    deadline = _Deadline(time.perf_counter() + budget_s if budget_s else None, budget_s)
    env = _Env(device, bandwidth, deadline, lambda: save(result), variant_specs(graph_step),
               progress or (lambda it, **kw: it), torch_dtype)
    if model_path:
        result.notes.append(f"Weights: the local checkpoint {Path(model_path).name!r} replaces the first model's "
                            "random weights; later model shapes stay random.")
    else:
        result.notes.append("Weights: transformers' own random initialization from GPT2Config with a fixed seed; "
                            "no pretrained weights were downloaded. The logits of random weights have small top-2 "
                            "margins, so token agreement is a strict test.")
    if device.type == "cuda":
        with stage("decode", "parallel compilation"):
            precompile(plan, graph_step, device, dtype_name=result.dtype, pool=compile_pool)
    # The microbenchmark first: it is short, and a spent time budget should cut sweep rows, not it.
    with stage("decode", "microbenchmark"):
        _micro_rows(result, plan, env)
    models: list[_Model] = []
    for i, mp in enumerate(plan.models):
        try:
            with stage("decode", f"building {mp.name}"):
                m = _build_model(mp, model_path if i == 0 else None, env)
        except Exception as exc:  # a model that cannot be built: say so, keep the other shapes
            if not is_oom(exc):
                raise
            result.notes.append(f"{mp.name}: out of memory while building the model ({_error_reason(exc)}).")
            free_cuda_memory()
            continue
        result.models.append(m.info)
        env.save()
        with stage("decode", f"warming up {mp.name}"):
            _warm_up(m, plan, env)
        models.append(m)
    # In order of what the report needs most, since a spent budget skips whatever is left: the key
    # shapes; the agreement check of our CUDA-graph steps (seconds for every model); transformers' compiled
    # loop at the agreement's shape, what a user would pick (a cold compile, its session reused by the check, which
    # is also what compares our steps with transformers); the compiled loop's other key shapes; the host profile; our
    # CUDA-graph steps' sweeps; the check's eager and host-bound loops; the other loops' sweeps, and last the sweeps'
    # host-bound rows (transformers' eager loop: its step time is the host's at every context, and its rows cost the
    # most). Run h200-20261203k, with 107 s, spent 20 s on the eager loops' check before the compiled loop, whose key
    # rows its 40 s reserve then skipped; moved behind it, gpt2's compiled row ran (1.12 ms a step after a 15.5 s
    # compile, same 107 s, H200, 2026-12-03). On H100 hosts whose CPU ran the host-bound loops 1.3-2.7x slower (runs
    # h100-20261206b and c, not committed) the check's eager loops (26 s) still came before gpt2-xl's compiled key
    # row, which the reserve then skipped; they now wait behind the rows the report's headline and figures need.
    # On a host that fits every row (runs h200-20261205d and f) the order changes nothing but the stage times.
    # A compiled session is kept for the agreement only where the check compares a compiled variant.
    keep = {id(m): _agreement_shape(m, plan) if any(sp.compiled and m.plan.checks(v) for v, sp in env.specs.items())
            else None for m in models}
    for m in models:
        with stage("decode", f"{m.info.name} key shapes"):
            _rows(m, m.plan.key_shapes, plan, env, result, key=True, keep_shape=keep[id(m)],
                  which=lambda sp: not sp.compiled)
    refs, later = {}, {}
    for m in models:
        if m.plan.agreement:
            with stage("decode", f"{m.info.name} agreement, CUDA-graph steps"):
                refs[id(m)] = _agreement_reference(m, plan, env) if not env.deadline.passed() else "skipped: " + \
                    env.deadline.reason()
                order = agreement_order([v for v, sp in env.specs.items() if v != REFERENCE_VARIANT and not sp.compiled
                                         and not sp.generate and m.plan.checks(v)], env.specs)
                _agreement_rows(m, plan, env, result, refs[id(m)], [v for v in order if env.specs[v].graph])
                later[id(m)] = [v for v in order if not env.specs[v].graph]
    for m in models:
        shared = keep[id(m)]
        compiled_checked = [v for v, sp in env.specs.items() if sp.compiled and m.plan.checks(v)]
        if shared is None and not (m.plan.agreement and compiled_checked):
            continue
        with stage("decode", f"{m.info.name} compiled transformers at the agreement's shape"):
            if shared is not None:
                _rows(m, [shared], plan, env, result, key=True, keep_shape=shared, which=lambda sp: sp.compiled)
            if m.plan.agreement and compiled_checked:
                # Without its row's session the check would pay a cold compile of its own: skipped with it.
                _agreement_rows(m, plan, env, result, refs[id(m)], compiled_checked, skip={
                    v: "not run: the compiled loop's row at this shape was skipped, and its session (a cold compile) "
                       "is what the check reuses" for v in compiled_checked if _row_status(result, m, v, shared) == "skipped"})
            m.sessions.clear()
            _clean(env, full=True)  # the kept session outlived the collections that froze it
    for m in models:
        with stage("decode", f"{m.info.name} compiled transformers"):
            _rows(m, [k for k in m.plan.key_shapes if k != keep[id(m)]], plan, env, result, key=True,
                  which=lambda sp: sp.compiled)
    if models:
        with stage("decode", "host profile of transformers' loops"):
            _host_profile_rows(models[0], *models[0].plan.key_shapes[0], env, result)
    # Our CUDA-graph steps' sweep rows before the other variants' (the eager loops, the dequantizing one): they are
    # what the context and batch figures are for, and a second each. Run h200-20261204f's budget ran out a third of
    # the way through gpt2's sweep shape by shape, leaving no batch sweep at all.
    for graph in (True, False):
        for m in models:
            with stage("decode", f"{m.info.name} sweep, {'CUDA-graph steps' if graph else 'other loops'}"):
                _rows(m, m.plan.sweep_shapes, plan, env, result, key=False,
                      which=lambda sp: not sp.host_bound and sp.graph == graph)
        if graph:
            for m in models:
                if later.get(id(m)):
                    with stage("decode", f"{m.info.name} agreement, eager loops"):
                        _agreement_rows(m, plan, env, result, refs[id(m)], later[id(m)])
    for m in models:
        with stage("decode", f"{m.info.name} sweep, host-bound rows"):
            _rows(m, m.plan.sweep_shapes, plan, env, result, key=False, which=lambda sp: sp.host_bound)
    if deadline.skipped:
        result.notes.append(f"{deadline.skipped} rows were not run: the phase's time budget of {budget_s:.0f} s "
                            f"was spent ({no_limit_hint(BUDGET_ENV)}).")
    return result


def _row_status(result: DecodeFile, m: _Model, variant: str, shape) -> str | None:
    return next((r.status for r in result.rows
                 if r.model == m.info.name and r.variant == variant and (r.batch, r.context) == tuple(shape)), None)


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
        budget_s=ctx.own_budget(budget_seconds, bandwidth), model_path=model_path,
        graph_step=graph_step_from_env(), dtype=_dtype_choice(ctx), compile_pool=ctx.compile_pool,
    )


