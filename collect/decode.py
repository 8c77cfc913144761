"""Phase decode: KV-cache decode of GPT-2 six ways, where each step's time goes, one token-agreement
metric, and a decode-attention bandwidth microbenchmark.

Variants (kernels/decode/session.py runs them all through one interface):

  hf-generate   transformers' own model.generate, greedy, its default cache: what a user calls, per token
  hf-eager      transformers' model and dynamic cache in a greedy loop; bound by the host issuing kernels
  hf-compiled   transformers' model, StaticCache, forward compiled with torch.compile(mode="reduce-overhead");
                only at the key shapes (a cold compile per shape costs tens of seconds)
  eager         our loop over a preallocated bf16 cache, PyTorch ops
  graph         our step (GRAPH_STEP: our fused Triton kernels by default) replayed from one CUDA graph
  int8-graph    the same step and graph over an int8 cache
  int8-dequant  an int8 cache dequantized in full to bf16 every step (eager): the peak-memory regression

Every step time is loop time (collect/timing.py): steps issued back to back without synchronizing,
as generation runs them. At the key shapes a few steps also run under the torch profiler, which
gives kernels per step and their time by class. Token agreement is teacher-forced: every variant
is fed one token sequence and its argmax is compared with the reference step's at each position.

The phase is sized to fit a full collect on an H200 (see BUDGET_S); past the budget the remaining
rows are written as skipped, key shapes first so the sweeps' tails are what a slow machine loses.
Weights are transformers' random init with a fixed seed (nothing is downloaded), or a local
checkpoint from `--model-path` / $DECODE_MODEL_PATH.
"""
from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .budget import PHASE_BUDGET_ENVS, budget_seconds as shared_budget_seconds, no_limit_hint
from .context import RunContext
from .decode_profile import fused_role_order, profile_steps
from .schema import SCHEMA_VERSION
from .schema.decode import (
    REFERENCE_VARIANT, VARIANTS, AgreementRow, DecodeFile, DecodeModel, DecodeRow, HostProfileRow, KernelClassRow,
    KernelRoleRow, MicroRow,
)
from .stage_log import stage
from .timing import LOOP_REPEATS, compact_samples, free_cuda_memory, is_oom, summarize

MODEL_PATH_ENV = "DECODE_MODEL_PATH"
BUDGET_ENV = PHASE_BUDGET_ENVS["decode"]
GRAPH_STEP_ENV = "DECODE_GRAPH_STEP"
# How the graph variants compute a step: 'fused' (our Triton kernels), 'inductor' (our step compiled
# by torch.compile) or 'torch' (PyTorch ops). Chosen from measurements on the H200 (2026-11-30, each
# in a CUDA graph, loop time, batch 4, prompt 980): once the fused products loaded their weights as
# 16-byte vectors, read LayerNorm statistics left by the previous kernel and summed split-K
# partials with unrolled loads, the fused step took 2.43 ms at gpt2-xl and 0.462 at gpt2, against
# the torch step's 3.36 and 0.661 in the same runs. (Before that work the fused step lost: 4.36 ms
# against 3.35 at gpt2-xl. inductor took 0.640 ms at gpt2 against torch's 0.675; it was not
# measured at gpt2-xl, where its compile would cost the phase's budget.) The env var overrides it.
GRAPH_STEP = "fused"
# A full collect must finish in 9 minutes on an H200. This phase took about 160 s there (2026-11-30,
# stage times on stderr): parallel compilation 15 s (now done ahead, in the collect's shared pool),
# microbenchmark 8, building and warming up both models 12, key shapes 18, the agreement check 19
# (nearly all of it the host-bound transformers loop), compiled transformers 26 for gpt2's two key
# shapes and about 28 for gpt2-xl's one (cold torch.compile, the largest items), the sweeps the rest.
# Work runs in order of need: key shapes, agreement, compiled transformers, sweeps, the sweeps'
# host-bound rows; past the budget the rows left are written as skipped, and a compiled row starts
# only with COMPILE_RESERVE_S left. At 165 s the whole collect took 553 s on 2026-11-30 (the other
# phases had grown), over the 9 minutes. At 140 s (run h200-20261130j, 530 s in all on a slow host)
# the phase skipped 13 sweep rows, among them int8-graph rows the report needs at every sweep
# shape; 150 s with the host-bound rows last leaves only those to a slow host's cut.
# transformers' eager loop used to be timed at cache lengths it met for the first time, where PyTorch's
# cuDNN attention built a graph each step (60-80 ms a step at every model size in run h200-20261201f);
# it now warms every position it times first, which costs about what those cold timed steps did, and
# model.generate is timed beside it at the same shapes (one warm pair of calls and three timed pairs a
# row: about a second at gpt2 and a few at gpt2-xl, estimated from the warm step times, not yet measured).
BUDGET_S = {"quick": 75.0, "full": 150.0}
SEED = 0
# A compiled row starts only with this much budget left: its cold compile alone takes about this long.
COMPILE_RESERVE_S = 40.0
PRECOMPILE_WORKERS = 8
PRECOMPILE_STALL_S = 120.0  # longest wait for the next task (includes a worker's start-up)


# --- variants ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class VariantSpec:
    name: str
    family: str                 # "ours" or "hf"
    cache: str = "bf16"         # ours: a kernels.decode.gpt2.CACHES key
    step: str = "torch"         # ours: a kernels.decode.gpt2_fused.STEPS key
    graph: bool = False         # ours: replay one CUDA graph per step
    compiled: bool = False      # hf: StaticCache + torch.compile
    max_steps: int | None = None  # host-bound loops time fewer steps (their per-step time hardly varies)
    key_only: bool = False      # measured at the key shapes only
    host_bound: bool = False    # its sweep rows run last: its step time is the host's, at every context
    generate: bool = False      # hf: model.generate timed per token, not a step loop (no teacher forcing)
    # Warm up over every position the timed loops run, not a couple: a backend that plans a kernel per
    # shape (PyTorch's cuDNN attention builds a graph per key length, once per step since the layers share
    # it) would otherwise be timed planning. The warm-up pass's own time is kept as the row's cold_step_ms.
    warm_every_step: bool = False

    @property
    def step_impl(self) -> str:
        if self.family == "hf":
            return "transformers-generate" if self.generate else "transformers-compiled" if self.compiled else "transformers"
        return self.step


def variant_specs(graph_step: str = GRAPH_STEP) -> dict[str, VariantSpec]:
    specs = [
        # The eager loop first at each shape: its warm-up pass is then the first to meet the shape's cache
        # lengths, so its cold_step_ms is what a first pass costs; generate then meets them warm.
        VariantSpec("hf-eager", "hf", max_steps=16, host_bound=True, warm_every_step=True),
        VariantSpec("hf-generate", "hf", max_steps=16, host_bound=True, generate=True),
        VariantSpec("hf-compiled", "hf", compiled=True, key_only=True),
        VariantSpec("eager", "ours"),
        VariantSpec("graph", "ours", step=graph_step, graph=True),
        VariantSpec("int8-graph", "ours", cache="int8", step=graph_step, graph=True),
        VariantSpec("int8-dequant", "ours", cache="int8-dequant", max_steps=32),
    ]
    out = {s.name: s for s in specs}
    assert tuple(out) == VARIANTS
    return out


def graph_step_from_env() -> str:
    from kernels.decode.gpt2_fused import STEPS

    value = os.environ.get(GRAPH_STEP_ENV, GRAPH_STEP)
    if value not in STEPS:
        raise ValueError(f"{GRAPH_STEP_ENV} must be one of {', '.join(sorted(STEPS))}, got {value!r}")
    return value


# --- plans ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelPlan:
    name: str                                    # a kernels.decode.gpt2.PRESETS key
    key_shapes: tuple[tuple[int, int], ...]      # (batch, context): every variant, profiled, measured first
    sweep_shapes: tuple[tuple[int, int], ...] = ()  # every variant but the key-only ones, measured last
    agreement: bool = False                      # run the token-agreement check on this model
    args: object | None = None                   # a ModelArgs that overrides the preset (tests)


@dataclass(frozen=True)
class Plan:
    models: tuple[ModelPlan, ...]
    micro_contexts: tuple[int, ...]
    micro_batches: tuple[int, ...]
    micro_heads: int = 32
    micro_head_dim: int = 128
    steps: int = 64               # decode steps per row at most (fewer where the positions run out)
    warmup_steps: int = 2
    profile_steps: int = 4        # steps under the profiler at the key shapes
    agreement_batch: int = 4
    agreement_steps: int = 256    # teacher-forced steps compared: agreement_batch x this positions
    free_steps: int = 64          # greedy steps of the free-running comparison
    warmup_shape: tuple[int, int] = (4, 512)  # (batch, context) every kernel is compiled and tuned at


GPT2_KEY = ((4, 1000), (64, 512))
PLANS = {
    "quick": Plan(
        models=(ModelPlan("gpt2", ((4, 1000),), ((4, 128),), agreement=True),),
        micro_contexts=(1024, 16384),
        micro_batches=(4,),
        agreement_steps=250,
        free_steps=32,
    ),
    "full": Plan(
        models=(
            ModelPlan("gpt2", GPT2_KEY, ((4, 32), (4, 128), (4, 256), (4, 512), (1, 512), (16, 512)), agreement=True),
            ModelPlan("gpt2-xl", ((4, 1000),), ((4, 128), (4, 512))),
        ),
        micro_contexts=(1024, 4096, 16384, 32768),
        # batch 4 first: the autotuner tunes each length class on the first shape it meets
        micro_batches=(4, 16, 1),
    ),
}


def budget_seconds(profile: str, scale: float = 1.0) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile, scale)


# --- arithmetic the rows report (pure, tested on the CPU) -------------------------------------

def steps_for(n_positions: int, context: int, wanted: int) -> int:
    """Decode steps a row can run after a prompt of `context`: as many as wanted, but the last
    generated token must still have a position (context + steps + 1 <= n_positions)."""
    return max(0, min(wanted, n_positions - context - 1))


def loop_shape(steps: int, repeats: int = LOOP_REPEATS) -> tuple[int, int]:
    """(loops, steps per loop) for `steps` steps: one untimed loop and up to `repeats` timed ones,
    at least four steps a loop where there is room (a loop starts from an idle GPU)."""
    if steps < 2:
        raise ValueError(f"timing needs at least 2 steps, got {steps}")
    loops = min(repeats + 1, max(2, steps // 4))
    return loops, steps // loops


def _role_bytes(step_fn, kv_bytes: float, layers: int) -> dict[str, float]:
    """Bytes each role of the fused step reads per step, summed from the step's own per-kernel bytes
    (FusedStep.kernel_bytes, which the read-only twin reads too); roles that read none of the floor's bytes
    (the embedding, the argmax) are left out."""
    out: dict[str, float] = {}
    for role, n in zip(fused_role_order(layers), step_fn.kernel_bytes(kv_bytes / layers)):
        if n:
            out[role] = out.get(role, 0.0) + float(n)
    return out


def kv_bytes_per_step(bytes_per_token: int, context: int, first: int, last: int) -> float:
    """Cache bytes a step reads, averaged over steps first..last (0-based after the prompt): step s
    attends over context + s + 1 keys."""
    return bytes_per_token * (context + 1 + (first + last) / 2)


def floor_ms(bytes_per_step: float, bandwidth: float | None) -> float | None:
    return None if not bandwidth else bytes_per_step / bandwidth * 1e3


def ulp(x, mantissa_bits: int):
    """One unit in the last place at |x| for a float type with `mantissa_bits` significant bits."""
    import torch

    x = torch.as_tensor(x, dtype=torch.float64).abs().clamp_min(2.0**-126)
    return torch.exp2(torch.floor(torch.log2(x)) - (mantissa_bits - 1))


def agreement_fields(ref_v, ref_i, test_v, test_i, mantissa_bits: int = 8) -> dict:
    """Fields of an AgreementRow from (B, P, 2) top-2 values and ids of the reference and the variant."""
    top, second = ref_v[..., 0].double(), ref_v[..., 1].double()
    tie = (top - second) < ulp(top, mantissa_bits)
    agree = ref_i[..., 0] == test_i[..., 0]
    out_ties = ~tie
    dis = out_ties & ~agree
    margins = (top - second)[dis]
    same = agree.nonzero(as_tuple=True)
    n = int(agree.numel())
    return {
        "positions": n,
        "near_ties": int(tie.sum()),
        "near_tie_fraction": float(tie.sum()) / n,
        "agreement": float(agree[out_ties].float().mean()) if bool(out_ties.any()) else None,
        "agreement_at_near_ties": float(agree[tie].float().mean()) if bool(tie.any()) else None,
        "disagreements": int(dis.sum()),
        "max_margin_at_disagreement": float(margins.max()) if margins.numel() else None,
        "max_top1_logit_diff": float((test_v[..., 0].double() - top)[same].abs().max()) if same[0].numel() else None,
    }


def free_running_fields(tokens, ref_tokens) -> dict:
    """Greedy tokens (B, n) of a variant against the reference's from the same prompt."""
    if tuple(tokens.shape) != tuple(ref_tokens.shape):
        raise ValueError(f"token tensors differ in shape: {tuple(tokens.shape)} vs {tuple(ref_tokens.shape)}")
    eq = tokens == ref_tokens
    bad = (~eq).any(0).nonzero()
    return {"free_running_match": float(eq.float().mean()), "free_running_tokens": int(eq.numel()),
            "free_running_first_mismatch": int(bad[0, 0]) if bad.numel() else None}


# --- the phase --------------------------------------------------------------------------------

@dataclass
class _Deadline:
    at: float | None
    budget: float | None
    skipped: int = 0

    def passed(self, reserve_s: float = 0.0) -> bool:
        """Past the deadline, or within `reserve_s` of it (a row that cannot finish in time)."""
        return self.at is not None and time.perf_counter() + reserve_s > self.at

    def reason(self) -> str:
        self.skipped += 1
        return (f"not run: the decode phase's time budget of {self.budget:.0f} s was spent before this row "
                f"({no_limit_hint(BUDGET_ENV)})")


@dataclass
class _Env:
    """What rows share: device, floor bandwidth, the deadline, and how to save progress."""

    device: object
    bandwidth: float | None
    deadline: _Deadline
    save: Callable[[], None]
    specs: dict
    progress: Callable = field(default=lambda it, **kw: it)
    dtype: object = None  # the models' and caches' torch dtype

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()


@dataclass
class _Model:
    hf: object
    ours: object
    info: DecodeModel
    plan: ModelPlan
    # (variant, batch, capacity) -> session, kept for the agreement check: the compiled transformers
    # session only, whose cold compile costs tens of seconds. Every other session lives for one row or
    # one agreement check, so a row's memory figures never hold another variant's session.
    sessions: dict = field(default_factory=dict)
    # (variant, batch, capacity) -> the AttentionChoice a graph row's session was judged to, so that a
    # later session of that variant and shape (the agreement check's) runs the same kernels, unjudged.
    judged: dict = field(default_factory=dict)


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _clean(env: _Env) -> None:
    gc.collect()
    if env.cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _prompt(batch: int, context: int, vocab: int):
    import torch

    g = torch.Generator().manual_seed(SEED * 1_000_003 + batch * 10_007 + context)
    return torch.randint(0, vocab, (batch, context), generator=g)


def _build_model(mp: ModelPlan, model_path: str | None, env: _Env) -> _Model:
    from kernels.decode.gpt2 import GPT2, PRESETS, load_hf_model, random_hf_model

    t0 = time.perf_counter()
    dtype = env.dtype
    held_before = _allocated(env)
    if model_path:
        hf = load_hf_model(model_path, env.device, dtype)
        name, weights, seed, ckpt = Path(model_path).name, "checkpoint", None, Path(model_path).name
    else:
        hf = random_hf_model(mp.args or PRESETS[mp.name], seed=SEED, device=env.device, dtype=dtype)
        name, weights, seed, ckpt = mp.name, "random-init", SEED, None
    ours = GPT2.from_hf(hf)
    env.sync()
    a = ours.args
    info = DecodeModel(
        name=name, weights=weights, seed=seed, checkpoint=ckpt, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
        head_dim=a.head_dim, vocab_size=a.vocab_size, n_positions=a.n_positions, parameters=ours.parameter_count(),
        weight_bytes_per_step=ours.weight_bytes_per_step(), dtype=str(dtype).removeprefix("torch."),
        hf_attn_implementation=getattr(hf.config, "_attn_implementation", None),
        init_s=time.perf_counter() - t0,
        # Every model stays loaded through the phase: the pages take the others' bytes out of a row's figures.
        resident_bytes=None if held_before is None else max(0, _allocated(env) - held_before),
    )
    return _Model(hf, ours, info, mp)


def _allocated(env: _Env) -> int | None:
    if not env.cuda:
        return None
    import torch

    env.sync()
    return torch.cuda.memory_allocated(env.device)


def _unsupported(spec: VariantSpec, env: _Env, timing: bool = True) -> str | None:
    """Why this variant cannot run here. Without a GPU our graph step still runs, uncaptured: the same
    numbers, so it can be checked, but its time would not be the graph's."""
    if spec.graph and not env.cuda and timing:
        return "CUDA graphs need a CUDA device"
    if spec.compiled and not env.cuda:
        return "torch.compile(mode='reduce-overhead') replays CUDA graphs: it needs a CUDA device"
    return None


def _session_key(spec: VariantSpec, batch: int, capacity: int) -> tuple:
    """What _Model.sessions and _Model.judged are keyed by: one variant's sessions of one shape."""
    return spec.name, batch, capacity


def _session(spec: VariantSpec, m: _Model, batch: int, capacity: int, env: _Env, keep: bool):
    """A session for this variant; a session kept for the agreement check is reused (a compiled one
    would otherwise compile again)."""
    from kernels.decode.session import HfSession, OurSession

    key = _session_key(spec, batch, capacity)
    if key in m.sessions:
        s = m.sessions[key]
        s.set_mode(False, False)
        return s
    if spec.family == "hf":
        s = HfSession(m.hf, batch, capacity, compiled=spec.compiled)
    else:
        s = OurSession(m.ours, batch, capacity, spec.cache, spec.step, cuda_graph=spec.graph and env.cuda)
        if key in m.judged:
            s.adopt_attention(m.judged[key])
    if keep:
        m.sessions[key] = s
    return s


def _loop_time(step: Callable[[], None], per_loop: int, repeats: int, env: _Env):
    """Loop time on a GPU (the one clock); on the CPU the same loops timed by the host clock."""
    if env.cuda:
        from .timing import loop_time

        return loop_time([step], per_loop, repeats)
    samples = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(per_loop):
            step()
        if r:
            samples.append((time.perf_counter() - t0) * 1e3 / per_loop)
    return summarize(samples)


def _profile(session, steps: int, env: _Env, result: DecodeFile, fused_layers: int | None = None):
    """Kernels of a few steps (and for a fused step of `fused_layers` layers, by role); a profiler that
    cannot run costs the counts, not the row."""
    if not env.cuda:
        return None
    try:
        return profile_steps(session.step, steps, env.sync, fused_layers)
    except Exception as exc:  # noqa: BLE001
        note = f"The torch profiler could not count kernels: {_error_reason(exc)}"
        if note not in result.notes:
            result.notes.append(note)
        return None


def _pdl_fallback(spec: VariantSpec, exc: BaseException, result: DecodeFile) -> bool:
    """If a graph of the fused step failed while its kernels launch with programmatic dependent launch,
    turn that off for the rest of the phase (and say so); True if the row is worth running again."""
    from kernels.decode import fused_linear as fl
    from kernels.common import has_pdl

    import torch

    if not (spec.graph and spec.step == "fused" and fl.TUNING.pdl) or is_oom(exc):
        return False
    if not torch.cuda.is_available() or not has_pdl(torch.cuda.get_device_capability()):
        return False  # the kernels launch without it there anyway
    fl.TUNING.pdl = False
    result.notes.append(f"The fused step's kernels were launched without programmatic dependent launch from the "
                        f"{spec.name} rows on: with it, the step failed ({_error_reason(exc)}).")
    return True


def _cache_bytes(session) -> int:
    return session.cache.nbytes() if hasattr(session.cache, "nbytes") else session.kv_cache_bytes()


def _decode_row(spec: VariantSpec, m: _Model, batch: int, context: int, plan: Plan, env: _Env, profile: bool,
                keep: bool, result: DecodeFile) -> DecodeRow:
    import torch

    from kernels.decode.gpt2 import cache_bytes_per_token, check_limits

    a = m.ours.args
    n = steps_for(a.n_positions, context, plan.steps)
    row = DecodeRow(model=m.info.name, variant=spec.name, batch=batch, context=context, new_tokens=0, status="ok",
                    step_impl=spec.step_impl)
    if env.deadline.passed(COMPILE_RESERVE_S if spec.compiled else 0.0):
        row.status, row.reason = "skipped", env.deadline.reason()
        return row
    if n < 2:
        row.status = "unsupported"
        row.reason = (f"context {context} leaves room for {n} decode step(s) within the model's {a.n_positions} "
                      "positions; timing needs at least 2")
        return row
    why = _unsupported(spec, env)
    if why:
        row.status, row.reason = "unsupported", why
        return row
    timed_n = min(n, spec.max_steps or n)
    loops, per_loop = loop_shape(timed_n)
    capacity = context + n
    check_limits(a, context, n + 1, batch)
    _clean(env)
    prompt = _prompt(batch, context, a.vocab_size)
    if spec.generate:
        return _generate_row(row, m, prompt, timed_n, loops - 1, env)
    # Positions the row decodes after its prefill: the profiled steps, then the timed loops, each from the prompt.
    warm = max(loops * per_loop, min(plan.profile_steps, n) if profile else 0) if spec.warm_every_step else plan.warmup_steps
    class_rows: list[KernelClassRow] = []
    roles = []
    fused_graph = spec.graph and spec.step_impl == "fused"
    t0 = time.perf_counter()
    try:
        s = _session(spec, m, batch, capacity, env, keep)
        s.prepare(prompt, warm)
        row.compile_s = getattr(s, "compile_s", None)
        if spec.warm_every_step:
            row.cold_step_ms = s.warmup_step_ms
        if fused_graph:
            row.attention_launch = s.step_fn.attention_launch.label
            row.attention_config = s.attention_config
            if (choice := s.attention_choice()) is not None:
                m.judged[_session_key(spec, batch, capacity)] = choice
                row.attention_trials = dict(choice.ms)
        if profile:
            prof = _profile(s, min(plan.profile_steps, n), env, result, a.n_layer if fused_graph else None)
            if prof is not None:
                roles = prof.roles
                row.kernels_per_step, row.kernel_ms_per_step = prof.kernels_per_step, prof.kernel_ms_per_step
                class_rows.extend(
                    KernelClassRow(model=m.info.name, variant=spec.name, batch=batch, context=context,
                                   kernel_class=c.kernel_class, kernels_per_step=c.kernels_per_step,
                                   ms_per_step=c.ms_per_step, top_kernel=c.top_kernel[:300]) for c in prof.classes)
            s.start(prompt)
        if env.cuda:  # allocator counters, kept on the host: no sync needed; loop_time syncs around each loop
            row.mem_at_start_bytes = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t = _loop_time(s.step, per_loop, loops - 1, env)
        if env.cuda:
            row.peak_mem_bytes = torch.cuda.max_memory_allocated()
        row.kv_cache_bytes = _cache_bytes(s)
        row.cache_class = getattr(s, "cache_class", None)
        tokens = s.generated(context, loops * per_loop + 1)
    except Exception as exc:  # one failed row is a row, not a failed phase
        row.status = "oom" if is_oom(exc) else "error"
        row.reason = _error_reason(exc)
        m.sessions.pop(_session_key(spec, batch, capacity), None)
        free_cuda_memory()
        return row
    row.wall_s = time.perf_counter() - t0
    result.kernel_classes.extend(class_rows)
    row.new_tokens = loops * per_loop + 1
    row.loops_timed, row.steps_per_loop = loops - 1, per_loop
    row.steps_timed = (loops - 1) * per_loop
    row.step_ms_median, row.step_ms_p10, row.step_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
    row.step_samples_ms = compact_samples(t)
    row.tokens_per_s = batch / (t.median_ms * 1e-3) if t.median_ms > 0 else None
    per_token = cache_bytes_per_token(a, batch, int8=spec.cache.startswith("int8") and spec.family == "ours",
                                      dtype_bytes=m.ours.wte.element_size())
    row.weight_bytes_per_step = m.info.weight_bytes_per_step
    row.kv_bytes_per_step = kv_bytes_per_step(per_token, context, per_loop, loops * per_loop - 1)
    row.bytes_per_step = row.weight_bytes_per_step + row.kv_bytes_per_step
    role_bytes = _role_bytes(s.step_fn, row.kv_bytes_per_step, a.n_layer) if roles else {}
    result.kernel_roles.extend(
        KernelRoleRow(model=m.info.name, variant=spec.name, batch=batch, context=context, role=r.role,
                      kernels_per_step=r.kernels_per_step, ms_per_step=r.ms_per_step,
                      bytes_per_step=role_bytes.get(r.role)) for r in roles)
    row.floor_ms = floor_ms(row.bytes_per_step, env.bandwidth)
    row.achieved_over_floor = t.median_ms / row.floor_ms if row.floor_ms else None
    row.distinct_tokens = int(tokens.unique().numel())
    if profile and env.cuda and fused_graph:
        row.read_floor_ms = _read_floor(s, row, a.n_layer, per_loop, loops - 1, result)
    return row


def _call_ms(fn: Callable[[], object], env: _Env) -> float:
    """One call's time on the phase's clock: CUDA events on a GPU, the host clock on the CPU."""
    if not env.cuda:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import torch

    env.sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _generate_row(row: DecodeRow, m: _Model, prompt, steps: int, pairs: int, env: _Env) -> DecodeRow:
    """transformers' model.generate per token: each timed pair is one call generating the prefill's token and
    `steps` more, and one generating the prefill's token alone; their difference over `steps` is the time of
    a token after the first, prefill and the call's own set-up taken out. One untimed pair first, over the
    same positions, so every shape the timed calls meet has been met (see VariantSpec.warm_every_step)."""
    import torch

    from kernels.decode.session import hf_generate
    from kernels.decode.gpt2 import cache_bytes_per_token

    a, context, batch = m.ours.args, prompt.shape[1], prompt.shape[0]
    t0 = time.perf_counter()
    samples = []
    try:
        for p in range(pairs + 1):
            if p == pairs and env.cuda:
                row.mem_at_start_bytes = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            long_ms = _call_ms(lambda: hf_generate(m.hf, prompt, steps + 1), env)
            short_ms = _call_ms(lambda: hf_generate(m.hf, prompt, 1), env)
            if p:
                samples.append((long_ms - short_ms) / steps)
        if env.cuda:
            row.peak_mem_bytes = torch.cuda.max_memory_allocated()
        tokens, cache = hf_generate(m.hf, prompt, steps + 1)
    except Exception as exc:  # one failed row is a row, not a failed phase
        row.status = "oom" if is_oom(exc) else "error"
        row.reason = _error_reason(exc)
        free_cuda_memory()
        return row
    if min(samples) <= 0:
        row.status = "error"
        row.reason = (f"a call generating {steps} more tokens took no longer than one generating the first alone "
                      f"(per-token differences {', '.join(f'{x:.3g}' for x in samples)} ms): too noisy to time")
        return row
    t = summarize(samples)
    row.wall_s = time.perf_counter() - t0
    row.cache_class = type(cache).__name__ if cache is not None else None
    row.new_tokens = steps + 1
    row.loops_timed, row.steps_per_loop, row.steps_timed = pairs, steps, pairs * steps
    row.step_ms_median, row.step_ms_p10, row.step_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
    row.step_samples_ms = compact_samples(t)
    row.tokens_per_s = batch / (t.median_ms * 1e-3)
    per_token = cache_bytes_per_token(a, batch, int8=False, dtype_bytes=m.ours.wte.element_size())
    row.kv_cache_bytes = per_token * (context + steps)  # the cache holds every position but the last token's
    row.weight_bytes_per_step = m.info.weight_bytes_per_step
    row.kv_bytes_per_step = kv_bytes_per_step(per_token, context, 0, steps - 1)
    row.bytes_per_step = row.weight_bytes_per_step + row.kv_bytes_per_step
    row.floor_ms = floor_ms(row.bytes_per_step, env.bandwidth)
    row.achieved_over_floor = t.median_ms / row.floor_ms if row.floor_ms else None
    row.distinct_tokens = int(tokens.unique().numel())
    return row


# Tokens the two profiled calls of each transformers loop differ by (collect/host_profile.py).
HOST_PROFILE_STEPS = 16


def _host_profile_rows(m: _Model, batch: int, context: int, env: _Env, result: DecodeFile) -> None:
    """model.generate and the plain greedy loop under cProfile and the torch profiler at one shape: why one
    costs more per token than the other (collect/host_profile.py). A failure costs these rows, not the phase."""
    from kernels.decode.session import HfSession, hf_generate

    from .host_profile import attribute, count_device_work, profile_call

    a = m.ours.args
    steps = steps_for(a.n_positions, context, HOST_PROFILE_STEPS)
    rows = {v: HostProfileRow(model=m.info.name, variant=v, batch=batch, context=context, steps=steps, status="ok")
            for v in ("hf-generate", "hf-eager")}
    result.host_profiles.extend(rows.values())
    if env.deadline.passed() or steps < 1:
        for r in rows.values():
            r.status = "skipped" if steps else "unsupported"
            r.reason = env.deadline.reason() if steps else f"context {context} leaves no room for a decode step"
        return
    prompt = _prompt(batch, context, a.vocab_size)
    session = HfSession(m.hf, batch, context + steps)
    calls = {"hf-generate": (lambda: hf_generate(m.hf, prompt, steps + 1), lambda: hf_generate(m.hf, prompt, 1)),
             "hf-eager": (lambda: _eager_tokens(session, prompt, steps), lambda: _eager_tokens(session, prompt, 0))}
    for variant, (long, short) in calls.items():
        row = rows[variant]
        try:
            long(), short()  # warm: every cache length and kernel the profiled calls meet
            att = attribute(profile_call(long), profile_call(short), steps, variant)
            (k_long, c_long), (k_short, c_short) = count_device_work(long, env.sync), count_device_work(short, env.sync)
        except Exception as exc:  # noqa: BLE001
            row.status, row.reason = ("oom" if is_oom(exc) else "error"), _error_reason(exc)
            free_cuda_memory()
            continue
        row.ms_per_token, row.components, row.calls_per_token = att.ms_per_token, att.components, att.calls_per_token
        row.kernels_per_token = (k_long - k_short) / steps
        row.host_copies_per_token = (c_long - c_short) / steps
    env.save()


def _eager_tokens(session, prompt, steps: int) -> None:
    session.start(prompt)
    for _ in range(steps):
        session.step()


def _read_floor(session, row: DecodeRow, layers: int, per_loop: int, repeats: int, result: DecodeFile) -> float | None:
    """The step's kernels as plain reads of their bytes (collect/read_floor.py); a failure costs this
    figure and a note, not the row."""
    from .read_floor import read_floor_ms

    try:
        sizes = session.step_fn.kernel_bytes(row.kv_bytes_per_step / layers)
        return read_floor_ms(sizes, session.device, session.step_fn.kernel_pdl(), per_loop, repeats)
    except Exception as exc:  # noqa: BLE001
        note = f"The read-only twin of the fused step could not be timed: {_error_reason(exc)}"
        if note not in result.notes:
            result.notes.append(note)
        free_cuda_memory()
        return None


def _rows(m: _Model, shapes, plan: Plan, env: _Env, result: DecodeFile, key: bool, keep_shape=None,
          compiled: bool | None = None, host_bound: bool | None = None) -> None:
    """Rows at these shapes; `compiled` picks only (True) or all but (False) the variants that compile,
    `host_bound` likewise the host-bound ones."""
    cases = [(b, c, spec) for b, c in shapes for spec in env.specs.values()
             if (key or not spec.key_only) and (compiled is None or spec.compiled == compiled)
             and (host_bound is None or spec.host_bound == host_bound)]
    for b, c, spec in env.progress(cases, total=len(cases), desc=f"decode {m.info.name}"):
        keep = keep_shape is not None and (b, c) == keep_shape and spec.compiled
        row = _decode_row(spec, m, b, c, plan, env, profile=key, keep=keep, result=result)
        if row.status == "error" and _pdl_fallback(spec, RuntimeError(row.reason), result):
            row = _decode_row(spec, m, b, c, plan, env, profile=key, keep=keep, result=result)
        result.rows.append(row)
        env.save()


def _agreement_capacity(plan: Plan, n_positions: int) -> tuple[int, int]:
    """(capacity, prompt length) of the agreement check: the sequence fills the model's positions."""
    capacity = n_positions - 1
    return capacity, capacity - plan.agreement_steps


def _agreement_reference(m: _Model, plan: Plan, env: _Env) -> dict | str:
    """The reference step's greedy continuation of a random prompt and its teacher-forced top-2 logits
    on that sequence; or why it could not run."""
    import torch

    a = m.ours.args
    B = plan.agreement_batch
    capacity, P = _agreement_capacity(plan, a.n_positions)
    S, F = plan.agreement_steps, min(plan.free_steps, plan.agreement_steps)
    if P < 1:
        return f"unsupported: {S} compared steps do not fit the model's {a.n_positions} positions"
    prompt = _prompt(B, P, a.vocab_size)
    try:
        ref = _session(env.specs[REFERENCE_VARIANT], m, B, capacity, env, keep=False)
        ref.prepare(prompt, plan.warmup_steps)
        for _ in range(S):
            ref.step()
        seq = torch.cat([prompt, ref.generated(P, S + 1)], 1)
        free = ref.generated(P, F + 1)
        ref.set_mode(True, True)
        ref.prepare(seq, plan.warmup_steps, prompt_len=P)
        for _ in range(S):
            ref.step()
        top = ref.top2(P, S)
    except Exception as exc:
        free_cuda_memory()
        return f"{'oom' if is_oom(exc) else 'error'}: reference: {_error_reason(exc)}"
    return {"capacity": capacity, "P": P, "S": S, "F": F, "prompt": prompt, "seq": seq, "free": free, "top": top}


def _agreement_rows(m: _Model, plan: Plan, env: _Env, result: DecodeFile, ref: dict | str, variants) -> None:
    """Teacher-forced top-1 agreement of each variant with the reference step, plus free running."""
    import torch

    B = plan.agreement_batch
    capacity, P = _agreement_capacity(plan, m.ours.args.n_positions)
    bits = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}[m.ours.dtype]
    for v in env.progress(list(variants), total=len(variants), desc=f"agreement {m.info.name}"):
        row = AgreementRow(model=m.info.name, variant=v, reference=REFERENCE_VARIANT, batch=B, prompt_len=P,
                           positions=B * plan.agreement_steps, status="ok")
        spec = env.specs[v]
        why = _unsupported(spec, env, timing=False)
        if env.deadline.passed():
            row.status, row.reason = "skipped", env.deadline.reason()
        elif isinstance(ref, str):
            row.status, row.reason = ref.split(": ", 1)
        elif why:
            row.status, row.reason = "unsupported", why
        else:
            _clean(env)  # the previous variant's session is gone before this one is built
            try:
                s = _session(spec, m, B, capacity, env, keep=spec.compiled)
                s.prepare(ref["prompt"], plan.warmup_steps)
                for _ in range(ref["F"]):
                    s.step()
                for k, val in free_running_fields(s.generated(P, ref["F"] + 1), ref["free"]).items():
                    setattr(row, k, val)
                s.set_mode(True, True)
                s.prepare(ref["seq"], plan.warmup_steps, prompt_len=P)
                for _ in range(ref["S"]):
                    s.step()
                for k, val in agreement_fields(*ref["top"], *s.top2(P, ref["S"]), mantissa_bits=bits).items():
                    setattr(row, k, val)
                del s
            except Exception as exc:
                row.status = "oom" if is_oom(exc) else "error"
                row.reason = _error_reason(exc)
                free_cuda_memory()
        result.agreement.append(row)
        env.save()


def _agreement_shape(m: _Model, plan: Plan):
    """The key shape whose compiled session the agreement check can reuse (same batch and capacity), if any."""
    if not m.plan.agreement:
        return None
    n = m.ours.args.n_positions
    cap, _ = _agreement_capacity(plan, n)
    return next(((b, c) for b, c in m.plan.key_shapes if b == plan.agreement_batch and c + steps_for(n, c, plan.steps) == cap),
                None)


def compile_tasks(plan: Plan, graph_step: str, device_name: str, dtype_name: str = "") -> list[tuple]:
    """One task per kernel family a run needs: the microbenchmark's attention (bf16, int8), and per model,
    row tiling (16 or 64 rows a program, ...) and cache length modulo 16 (Triton specializes strides
    divisible by 16), the steps of every variant that runs our kernels. Each task ends with the device and
    the dtype the rows use ('' for the device's own choice), so the workers compile the variants the rows
    will launch."""
    from kernels.decode.gpt2 import PRESETS

    tasks = [("micro", int8, plan.micro_heads, plan.micro_head_dim, device_name, dtype_name) for int8 in (False, True)]
    seen = set()
    for mp in plan.models:
        args = mp.args or PRESETS[mp.name]
        for b, c in mp.key_shapes + mp.sweep_shapes:
            n = steps_for(args.n_positions, c, plan.steps)
            if n < 2:
                continue
            key = (args, max(16, 1 << (b - 1).bit_length()), (c + n) % 16)
            if key not in seen:
                seen.add(key)
                tasks.append(("step", args, b, key[2], graph_step, device_name, dtype_name))
    return tasks


def _compile_task(task: tuple) -> str | None:
    """In a spawned process: run each kernel of a task once on tiny inputs (zero weights), so Triton's
    on-disk cache holds every variant the rows will launch."""
    try:
        import torch

        from kernels.decode.session import OurSession
        from kernels.decode.gpt2 import GPT2

        from kernels.decode.gpt2 import decode_dtype

        device = torch.device(task[-2])
        dtype = getattr(torch, task[-1]) if task[-1] else decode_dtype(device)
        if task[0] == "micro":
            from kernels.decode.attention import decode_attention
            from kernels.decode.kv_quant import quantize

            _, int8, heads, head_dim, _, _ = task
            q = torch.randn((1, heads, head_dim), device=device, dtype=dtype)
            k = torch.randn((1, heads, 64, head_dim), device=device, dtype=dtype)
            lens = torch.full((1,), 64, device=device, dtype=torch.int32)
            if int8:
                (kq, ks), (vq, vs) = (quantize(k),) * 2
                decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs)
            else:
                decode_attention(q, k, k, lens)
        else:
            _, args, batch, cap_mod, graph_step, _, _ = task
            model = GPT2.zeros(args, device, dtype)
            capacity = 16 + cap_mod
            prompt = torch.zeros((batch, 8), dtype=torch.int64)
            # The graph steps and the eager steps; one pair each where the graph step is "torch" too.
            for cache, step in dict.fromkeys((("bf16", graph_step), ("int8", graph_step), ("bf16", "torch"),
                                              ("int8", "torch"))):
                s = OurSession(model, batch, capacity, cache, step)
                s.prepare(prompt, 1)
                if hasattr(s.step_fn, "compile_attention_launches"):  # what the graph sessions will measure
                    s.step_fn.compile_attention_launches(s.lens)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the rows will meet (and record) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _work(plan: Plan, graph_step: str, device, dtype_name: str):
    from .precompile import CompileWork

    return CompileWork("decode", _compile_task, tuple(compile_tasks(plan, graph_step, str(device), dtype_name)),
                       PRECOMPILE_WORKERS)


def precompile(plan: Plan, graph_step: str, device, workers: int | None = None, dtype_name: str = "",
               pool=None) -> int | None:
    """Compile the kernels the rows need in parallel spawned processes before anything is timed: Triton
    compiles single-threaded, a second or two per variant, and a full run needs dozens. `pool`: the
    collect's shared compile pool, if it holds this work already. Best effort: whatever these miss,
    the rows compile for themselves (untimed, in their warm-up)."""
    from .precompile import compile_ahead

    return compile_ahead(pool, _work(plan, graph_step, device, dtype_name), workers, PRECOMPILE_STALL_S)


def _dtype_choice(ctx: RunContext) -> tuple[str, str] | None:
    from .device_choices import decode_dtype as choose

    choice = choose(ctx.facts) if ctx.facts is not None else None
    return (choice.value, choice.reason) if choice else None


def compile_work(ctx: RunContext):
    """The kernels the rows need, for the collect's compile pool (collect/precompile.py)."""
    import torch

    if ctx.profile not in PLANS or not torch.cuda.is_available():
        return None
    choice = _dtype_choice(ctx)
    dtype_name = choice[0] if choice else str(native_dtype(torch.device("cuda"))[0]).removeprefix("torch.")
    return _work(PLANS[ctx.profile], graph_step_from_env(), torch.device("cuda"), dtype_name)


def _warm_up(m: _Model, plan: Plan, env: _Env) -> None:
    """Compile and autotune our kernels at a mid-sweep shape, so no row pays for it (and autotuning
    never chooses on a toy problem). The compiled transformers loop compiles in its own rows."""
    B, T = plan.warmup_shape
    T = min(T, m.ours.args.n_positions // 2)
    prompt = _prompt(B, T, m.ours.args.vocab_size)
    for spec in env.specs.values():
        if _unsupported(spec, env) or spec.compiled or spec.generate:
            continue
        s = _session(spec, m, B, T + 2, env, keep=False)
        s.prepare(prompt, 1)
        s.step()
        del s  # gone before the next variant's is built: one session at a time
    _clean(env)


def _time_call(fn, env: _Env):
    """(device timing, host timing) of a warm call; on the CPU, host-clock times for both."""
    if env.cuda:
        from .timing import measure_call, wall_ms

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
            split = da.SplitBuffers(B, H, D, da.default_num_splits(B, H, L, env.device), env.device)
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

    from .timing import measure_call, wall_ms

    src = torch.empty(2**28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def copy():
        dst.copy_(src)

    copy()
    t = measure_call([copy], wall_ms(copy), loop=False).device.timing
    return 2 * src.numel() * src.element_size() / (t.median_ms * 1e-3)


def native_dtype(device) -> tuple[object, str]:
    """The device's own decode dtype and the reason the report gives for it."""
    import torch

    from kernels.decode.gpt2 import decode_dtype

    dt = decode_dtype(device)
    if dt == torch.float16:
        return dt, ("float16: this GPU has no native bfloat16 arithmetic, so weights, activations and caches are "
                    "fp16 (bf16 would be emulated)")
    if dt == torch.bfloat16:
        return dt, "bfloat16: the GPU computes it natively"
    return dt, "float32: no GPU"


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
    # shapes, the agreement check, the compiled transformers loop (a cold compile per shape, its
    # session at the agreement's capacity reused by the check), the sweeps, and last the sweeps' host-bound
    # rows (transformers' eager loop: its step time is the host's at every context, and its rows
    # cost the most).
    keep = {id(m): _agreement_shape(m, plan) for m in models}
    for m in models:
        with stage("decode", f"{m.info.name} key shapes"):
            _rows(m, m.plan.key_shapes, plan, env, result, key=True, keep_shape=keep[id(m)], compiled=False)
    refs = {}
    for m in models:
        if m.plan.agreement:
            with stage("decode", f"{m.info.name} agreement"):
                refs[id(m)] = _agreement_reference(m, plan, env) if not env.deadline.passed() else "skipped: " + \
                    env.deadline.reason()
                _agreement_rows(m, plan, env, result, refs[id(m)],
                                [v for v, sp in env.specs.items()
                                 if v != REFERENCE_VARIANT and not sp.compiled and not sp.generate])
    if models:
        with stage("decode", "host profile of transformers' loops"):
            _host_profile_rows(models[0], *models[0].plan.key_shapes[0], env, result)
    for m in models:
        with stage("decode", f"{m.info.name} compiled transformers"):
            # The agreement's shape first: its session serves the check, and is freed before the
            # other shapes' rows, so none of them counts it in its memory.
            shared = keep[id(m)]
            _rows(m, [k for k in m.plan.key_shapes if k == shared], plan, env, result, key=True, keep_shape=shared,
                  compiled=True)
            if m.plan.agreement:
                _agreement_rows(m, plan, env, result, refs[id(m)], [v for v, sp in env.specs.items() if sp.compiled])
            m.sessions.clear()
            _clean(env)
            _rows(m, [k for k in m.plan.key_shapes if k != shared], plan, env, result, key=True, compiled=True)
    for m in models:
        with stage("decode", f"{m.info.name} sweep"):
            _rows(m, m.plan.sweep_shapes, plan, env, result, key=False, host_bound=False)
    for m in models:
        with stage("decode", f"{m.info.name} sweep, host-bound rows"):
            _rows(m, m.plan.sweep_shapes, plan, env, result, key=False, host_bound=True)
    if deadline.skipped:
        result.notes.append(f"{deadline.skipped} rows were not run: the phase's time budget of {budget_s:.0f} s "
                            f"was spent ({no_limit_hint(BUDGET_ENV)}).")
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
        budget_s=ctx.own_budget(budget_seconds, bandwidth), model_path=model_path,
        graph_step=graph_step_from_env(), dtype=_dtype_choice(ctx), compile_pool=ctx.compile_pool,
    )


__all__ = ["run", "collect_decode", "PLANS", "Plan", "ModelPlan", "VariantSpec", "variant_specs", "steps_for",
           "loop_shape", "kv_bytes_per_step", "floor_ms", "agreement_fields", "free_running_fields", "budget_seconds"]
