"""What the decode phase runs: its variants, its plans per profile, its time budget and the device's decode
dtype."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..budget import PHASE_BUDGET_ENVS, budget_seconds as shared_budget_seconds
from ..context import RunContext
from ..schema.decode import VARIANTS


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
# Work runs in order of need (collect/decode/phase.py): key shapes, the agreement of our CUDA-graph steps,
# compiled transformers at the agreement's shape, the other compiled rows, the host profile, our CUDA-graph steps'
# sweeps, the agreement of the eager loops, the other sweeps, the sweeps' host-bound rows; past the budget the rows
# left are written as skipped, and a compiled row starts only with COMPILE_RESERVE_S left. At 165 s the whole collect took 553 s on 2026-11-30 (the other
# phases had grown), over the 9 minutes. At 140 s (run h200-20261130j, 530 s in all on a slow host)
# the phase skipped 13 sweep rows, among them int8-graph rows the report needs at every sweep
# shape; 150 s with the host-bound rows last leaves only those to a slow host's cut.
# transformers' eager loop used to be timed at cache lengths it met for the first time, where PyTorch's
# cuDNN attention built a graph each step (60-80 ms a step at every model size in run h200-20261201f);
# it now warms every position it times first, which costs about what those cold timed steps did, and
# model.generate is timed beside it at the same shapes (one warm pair of calls and three timed pairs a
# row: about a second at gpt2 and a few at gpt2-xl, estimated from the warm step times, not yet measured).
# With no budget (env and decode alone, H200, 2026-12-04, stage times) every row took 212 s on one host and 252 s on
# another: up to the compiled key rows 139-171 s (gpt2-xl's compiled row alone 37-42 s), our CUDA-graph steps'
# sweep rows 18-21 s, the other loops' 23-24 s, the host-bound rows 32-34 s. A sweep row cost about 0.7 s more than
# its own wall time, 0.28 s of it a full garbage collection before each row (cProfile); the collections now look
# only at what the last row made (sessions._clean), which is not yet measured in a collect.
BUDGET_S = {"quick": 75.0, "full": 150.0}
SEED = 0
# A compiled row starts only with this much budget left: its cold compile alone takes about this long.
COMPILE_RESERVE_S = 40.0


@dataclass(frozen=True)
class VariantSpec:
    name: str
    family: str                 # "ours" or "hf"
    cache: str = "bf16"         # ours: a kernels.decode.gpt2.CACHES key
    step: str = "torch"         # ours: a kernels.decode.session.STEPS key, or "persistent": the best for the GPU
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

    def step_for(self, batch: int | None, device) -> str:
        """The STEPS key this variant runs at `batch` sequences on `device`: "persistent" picks the warp-specialized
        step where it runs (kernels.decode.session.persistent_step_for)."""
        if self.step != "persistent":
            return self.step
        from kernels.decode.session import persistent_step_for

        return persistent_step_for(batch, device)

    def impl_for(self, batch: int | None, device) -> str:
        """What a row of this variant records as its step_impl."""
        return self.step_for(batch, device) if self.family == "ours" else self.step_impl


def variant_specs(graph_step: str = GRAPH_STEP) -> dict[str, VariantSpec]:
    specs = [
        # The eager loop first at each shape: its warm-up pass is then the first to meet the shape's cache
        # lengths, so its cold_step_ms is what a first pass costs; generate then meets them warm.
        VariantSpec("hf-eager", "hf", max_steps=16, host_bound=True, warm_every_step=True),
        VariantSpec("hf-generate", "hf", max_steps=16, host_bound=True, generate=True),
        VariantSpec("hf-compiled", "hf", compiled=True, key_only=True),
        VariantSpec("eager", "ours"),
        VariantSpec("graph", "ours", step=graph_step, graph=True),
        # Issue 44's persistent step (the warp-specialized one on Hopper), at the key shapes only until it has earned
        # the sweeps' time.
        VariantSpec("persistent", "ours", step="persistent", graph=True, key_only=True),
        VariantSpec("int8-graph", "ours", cache="int8", step=graph_step, graph=True),
        VariantSpec("int8-dequant", "ours", cache="int8-dequant", max_steps=32),
    ]
    out = {s.name: s for s in specs}
    assert tuple(out) == VARIANTS
    return out


def graph_step_from_env() -> str:
    from kernels.decode.session import STEPS

    value = os.environ.get(GRAPH_STEP_ENV, GRAPH_STEP)
    if value not in STEPS:
        raise ValueError(f"{GRAPH_STEP_ENV} must be one of {', '.join(sorted(STEPS))}, got {value!r}")
    return value


@dataclass(frozen=True)
class ModelPlan:
    name: str                                    # a kernels.decode.gpt2.PRESETS key
    key_shapes: tuple[tuple[int, int], ...]      # (batch, context): every variant, profiled, measured first
    sweep_shapes: tuple[tuple[int, int], ...] = ()  # every variant but the key-only ones, measured last
    agreement: bool = False                      # run the token-agreement check on this model
    # The variants it checks (None: every one). At gpt2-xl only our CUDA-graph steps: the host-bound and eager
    # loops would take tens of seconds of the phase's budget for 1,024 positions, and transformers' compiled
    # loop a cold compile of its own; at gpt2 they are all checked.
    agreement_variants: tuple[str, ...] | None = None
    args: object | None = None                   # a ModelArgs that overrides the preset (tests)

    def checks(self, variant: str) -> bool:
        """Whether the agreement check compares this variant on this model."""
        return self.agreement and (self.agreement_variants is None or variant in self.agreement_variants)


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
            ModelPlan("gpt2-xl", ((4, 1000),), ((4, 128), (4, 512)), agreement=True,
                      agreement_variants=("persistent", "int8-graph")),
        ),
        micro_contexts=(1024, 4096, 16384, 32768),
        # batch 4 first: the autotuner tunes each length class on the first shape it meets
        micro_batches=(4, 16, 1),
    ),
}


def budget_seconds(profile: str, scale: float = 1.0) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile, scale)


def _dtype_choice(ctx: RunContext) -> tuple[str, str] | None:
    from ..device_choices import decode_dtype as choose

    choice = choose(ctx.facts) if ctx.facts is not None else None
    return (choice.value, choice.reason) if choice else None


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


