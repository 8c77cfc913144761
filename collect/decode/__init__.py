"""Phase decode: KV-cache decode of GPT-2 six ways, where each step's time goes, one token-agreement
metric, and a decode-attention bandwidth microbenchmark.

Variants (kernels/decode/session.py runs them all through one interface):

  hf-generate   transformers' own model.generate, greedy, its default cache: what a user calls, per token
  hf-eager      transformers' model and dynamic cache in a greedy loop; bound by the host issuing kernels
  hf-compiled   transformers' model, StaticCache, forward compiled with torch.compile(mode="reduce-overhead");
                only at the key shapes (a cold compile per shape costs tens of seconds)
  eager         our loop over a preallocated bf16 cache, PyTorch ops
  graph         our step (GRAPH_STEP: our fused Triton kernels by default) replayed from one CUDA graph
  persistent    our step as one persistent kernel between the embedding and the argmax, in a CUDA graph
                (key shapes only; batch at most 16, Ampere and newer)
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

A reader starts at phase.py (the order of the work), then reads the stage it runs:

    plans.py       the variants, the plans per profile, the time budget, the device's decode dtype
    arithmetic.py  steps and loops a row runs, the bytes a step reads, its floor (pure)
    sessions.py    what the rows share: deadline, models, one session per variant and shape
    rows.py        one timed row per variant and shape, its kernels by class and role
    baselines.py   transformers' model.generate per token, and the host profile of its loops
    agreement.py   teacher-forced token agreement and the free-running comparison
    micro.py       the decode-attention microbenchmark and the copy bandwidth
    compiling.py   the kernels compiled ahead, for the collect's shared compile pool
"""
from __future__ import annotations

from .agreement import agreement_fields, free_running_fields, ulp
from .arithmetic import floor_ms, kv_bytes_per_step, loop_shape, steps_for
from .compiling import compile_tasks, compile_work, precompile
from .phase import collect_decode, run
from .plans import (BUDGET_ENV, BUDGET_S, GRAPH_STEP, GRAPH_STEP_ENV, MODEL_PATH_ENV, PLANS, ModelPlan, Plan,
                    VariantSpec, budget_seconds, graph_step_from_env, variant_specs)

__all__ = ["run", "collect_decode", "compile_work", "PLANS", "Plan", "ModelPlan", "VariantSpec", "variant_specs",
           "graph_step_from_env", "GRAPH_STEP", "GRAPH_STEP_ENV", "BUDGET_ENV", "BUDGET_S", "MODEL_PATH_ENV",
           "budget_seconds", "steps_for", "loop_shape", "kv_bytes_per_step", "floor_ms", "agreement_fields",
           "free_running_fields", "ulp", "compile_tasks", "precompile"]
