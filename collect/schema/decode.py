"""decode.json: KV-cache decode with our GPT-2 loop against transformers' loops, an int8 cache two
ways, where each step's time goes (kernels per step, by class), one token-agreement metric, and a
standalone decode-attention bandwidth microbenchmark."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, BYTES_PER_S, CLOCK_MHZ, COUNT, DTYPES, FRACTION, IDENT, KERNEL_NAME, MS, NAME, NONNEGATIVE, RATIO,
                     ROW_STATUS, RUN_ID, SECONDS, SIZE, TEXT, doc, strict)

# Decode variants in the report's order; the page labels them.
VARIANTS = ("hf-eager", "hf-generate", "hf-compiled", "eager", "graph", "persistent", "int8-graph", "int8-dequant")
# Measured by runs made before the variants above; still read and labelled.
LEGACY_VARIANTS = ("int8-kernel",)
# Every variant name a run may hold: 'hf' is 'hf-eager' before its rename (migrate.rename_decode_hf_variant).
ALL_VARIANTS = VARIANTS + LEGACY_VARIANTS + ("hf",)
# Token agreement is measured against this variant's step (our bf16 step in a CUDA graph).
REFERENCE_VARIANT = "graph"
# What each kernel of the fused step does (KernelRoleRow.role): five per layer, in launch order, and the whole
# step's order (kernels/decode/gpt2_fused.FusedStep launches the embedding, the layers, the LM head and the argmax).
LAYER_ROLES = ("qkv", "attention", "proj", "fc", "out")
ROLE_ORDER = ("embed",) + LAYER_ROLES + ("head", "argmax")
# Step implementations of our loop (see kernels/decode/gpt2_fused.py), and transformers' two loops.
STEP_IMPLS = ("torch", "fused", "inductor", "persistent", "persistent-ws", "transformers", "transformers-compiled", "transformers-generate")
MICRO_IMPLS = ("triton-bf16", "triton-int8", "sdpa")
# What a profiled kernel does, read off its name (collect/decode_profile.py KERNEL_CLASSES, in this order).
KERNEL_CLASS_ORDER = ("persistent step", "attention", "cache write", "layer norm", "linear", "sampling", "embedding", "copy",
                      "elementwise", "other")
# A host profile's components (HostProfileRow.components): the name of what none of them covers, the ones nested
# inside another (reported, not subtracted again), and how far past the loop's own time the others may add up before
# the two profiled calls are noise, not an attribution (collect/host_profile.py profiles such a pair again).
HOST_OTHER = "everything else"
HOST_NESTED = frozenset({"causal mask (inside the forward)"})
HOST_PARTS_OVER_WHOLE = 1.02
# Series of a decode row: the main sweep, or the published study's int8-cache comparison.
SERIES = ("", "int8-comparison")


def _per_s(n: float | None, ms: float | None) -> float | None:
    return n / ms * 1e3 if n is not None and ms else None


@strict
@dataclass
class DecodeModel:
    """A model shape the sweeps ran, and where its weights came from."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("name",)

    name: str = doc("Shape name: 'gpt2' (124M) or 'gpt2-xl' (1.5B), or the checkpoint's folder name.", pattern=IDENT)
    weights: str = doc("'random-init' (transformers' own init from GPT2Config, fixed seed) or 'checkpoint'.",
                       choices=("random-init", "checkpoint"))
    n_layer: int = doc("Transformer blocks.", **SIZE)
    n_head: int = doc("Attention heads.", **SIZE)
    n_embd: int = doc("Hidden size.", **SIZE)
    head_dim: int = doc("n_embd / n_head.", **SIZE, derived=lambda m, _: m.n_embd / m.n_head)
    vocab_size: int = doc("Vocabulary size.", **SIZE)
    n_positions: int = doc("Largest prompt + new tokens the model accepts (1024 for GPT-2).", **SIZE)
    parameters: int = doc("Parameter count (tied embedding counted once).", **COUNT)
    weight_bytes_per_step: int = doc("Weight bytes one decode step reads: all blocks, final norm and the LM head "
                                     "(the tied token embedding, read in full); position table excluded.", **BYTES)
    dtype: str = doc("Weight and activation dtype, e.g. 'bfloat16'.", choices=DTYPES)
    seed: int | None = doc("Seed of the random init; null for a checkpoint.", None, lo=0, hi=2.0**64)
    checkpoint: str | None = doc("Folder name of the local checkpoint (--model-path), if one was used.", None, **NAME)
    hf_attn_implementation: str | None = doc("Attention implementation transformers picked for the baseline.", None,
                                             **NAME)
    init_s: float | None = doc("Seconds to build (or load) the model on the device.", None, **SECONDS)
    resident_bytes: int | None = doc("Device memory the model took when it was built (torch.cuda.memory_allocated "
                                     "after, less before): its weights and buffers. The phase keeps every model "
                                     "loaded to its end, so each row's peak_mem_bytes and mem_at_start_bytes hold "
                                     "the other models' too; the pages take them out with this. Null without a GPU "
                                     "and in runs before 2026-12-02.", None, **BYTES)


@strict
@dataclass
class DecodeRow:
    """One decode variant at one (model, batch, context): greedy decoding, every step timed."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "variant", "batch", "context", "series")

    model: str = doc("Model name, see `models`.", pattern=IDENT)
    variant: str = doc("'hf-generate' (transformers' own model.generate, greedy, with its default cache: what a "
                       "user calls; step_ms is its time per token, see steps_per_loop), "
                       "'hf-eager' (transformers' model, its default dynamic cache, a greedy loop in eager mode: "
                       "bound by the host issuing kernels), 'hf-compiled' (transformers' model with a StaticCache and "
                       "its forward compiled by torch.compile(mode='reduce-overhead'), which replays CUDA graphs), "
                       "'eager' (our loop, bf16 cache, PyTorch ops), 'graph' (our step captured in one CUDA graph), "
                       "'persistent' (our step as one persistent kernel after the embedding, in a CUDA graph: "
                       "kernels/decode/persistent_step.py), 'int8-graph' (the same step and graph over an int8 cache), 'int8-dequant' (int8 cache "
                       "dequantized in full to bf16 every step, eager). Older runs also have 'int8-kernel' (the int8 "
                       "cache read by the Triton kernel, eager) and 'hf' (now 'hf-eager').",
                       choices=ALL_VARIANTS)
    batch: int = doc("Sequences decoded together.", **SIZE)
    context: int = doc("Prompt length: cached tokens when the first timed step runs.", **SIZE)
    new_tokens: int = doc("Tokens generated: one from the prefill, then one per decode step, the untimed first loop "
                          "included (hf-generate: those of one timed call); 0 when none ran.", **COUNT)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok.", None, **TEXT)
    series: str = doc("Which measurement series the row belongs to when one (model, variant, batch, context) was "
                      "measured under two conditions: '' for the main sweep; 'int8-comparison' for the published "
                      "study's int8-cache comparison, whose bf16 baseline repeats a sweep shape with its own peak "
                      "memory.", "", choices=SERIES)
    steps_timed: int = doc("Decode steps timed, after warm-up and an untimed first loop.", 0, **COUNT)
    step_ms_median: float | None = doc("Loop time of one decode step (all sequences advance one token): steps issued "
                                       "back to back with no synchronization, as generation runs them; the time of "
                                       "a loop divided by its steps, median over the loops.", None, **MS)
    step_ms_p10: float | None = doc("10th percentile of the loops' per-step times.", None, **MS, at_most="step_ms_median")
    step_ms_p90: float | None = doc("90th percentile of the loops' per-step times.", None, **MS, at_least="step_ms_median")
    step_samples_ms: list[float] | None = doc("The per-step time of each timed loop (or, hf-generate, of each timed "
                                              "pair of calls) behind the median and percentiles, in the order taken, "
                                              "in ms to 0.1 µs: what a comparison of two runs resamples. Null in runs "
                                              "before schema version 6.", None, **MS)
    steps_per_loop: int | None = doc("Steps in each timed loop. hf-generate: the decode steps per timed call; its "
                                     "step_ms is the time of a call generating that many tokens after the first, "
                                     "less the time of a call generating only the first (the prefill's), divided by "
                                     "the steps.", None, **COUNT)
    loops_timed: int | None = doc("Timed loops (the median is over these); hf-generate: timed pairs of calls.",
                                  None, **COUNT)
    step_impl: str | None = doc("How the step is computed: 'torch' (PyTorch ops and cuBLAS), 'fused' (our Triton "
                                "kernels, five per layer), 'inductor' (our step compiled by torch.compile), 'persistent' (one "
                                "plain-Triton persistent kernel), 'persistent-ws' (one warp-specialized Gluon persistent "
                                "kernel, Hopper), 'transformers' or 'transformers-compiled'.", None, choices=STEP_IMPLS)
    kernels_per_step: float | None = doc("GPU kernels one step runs (torch profiler, a few steps averaged); only at "
                                         "the shapes that were profiled.", None, **NONNEGATIVE)
    kernel_ms_per_step: float | None = doc("The GPU's busy time per step: the union of those kernels' intervals "
                                           "(where kernels overlap, under programmatic dependent launch, the overlap "
                                           "counts once). The step time minus this is time the GPU sat idle between "
                                           "kernels.", None, **MS)
    last_sm_share: float | None = doc("Persistent variant, at the profiled shapes, from one traced step: the share of "
                                      "its operations whose last tile finished on the SM that finished operations "
                                      "last most often. About 1 / the SMs where a different SM is last each time; "
                                      "near 1 where one SM is late every time (its place in the plan, or the SM "
                                      "itself). Null elsewhere and in runs before schema version 10.", None,
                                      **FRACTION)
    read_floor_ms: float | None = doc("Fused CUDA-graph steps, at the profiled shapes: the loop time of the same "
                                      "kernels, in the same order and launched the same way (one CUDA graph; "
                                      "programmatic dependent launch where the step uses it), each replaced by a "
                                      "plain read of the bytes its counterpart must read (kernels/decode/read_floor.py). "
                                      "Their bytes add up to bytes_per_step: what the step's kernel structure costs "
                                      "with no work in it.", None, **MS)
    attention_launch: str | None = doc("Fused CUDA-graph steps: how the step launched its attention, the fastest "
                                       "of the choices its session timed in the captured step at warm-up "
                                       "('plain'; or 'pdl' as a "
                                       "programmatic dependent of the previous kernel, '-prefetch64' asking L2 for "
                                       "the first 64 keys while it waits, '-late' letting the next kernel start "
                                       "after its loop instead of at once), then '+new-kv' where the qkv product "
                                       "handed the newest key and value to the attention, which wrote them into "
                                       "the cache (quantized there for int8). 'plain' or 'plain+new-kv' where the "
                                       "GPU has no PDL.",
                                       None, pattern=IDENT)
    attention_config: str | None = doc("Fused CUDA-graph steps: the split-KV attention config the captured step "
                                       "ran (tile, warps, stages): the fastest in the captured step of the configs "
                                       "the autotuner may pick, timed side by side at warm-up (the autotuner's own "
                                       "choice where the cache left no room to time them). A different choice "
                                       "changes the step's time, and its rounding.", None, **NAME)
    attention_trials: dict[str, float] | None = doc("Fused CUDA-graph steps: every attention choice the session "
                                                    "timed in the captured step at warm-up, as 'config | launch' "
                                                    "(the two fields above) to its best time per step in ms, "
                                                    "side by side over a few steps. None where none was judged.",
                                                    None, **NAME)
    cold_step_ms: float | None = doc("hf-eager: the mean time of a step the first time this process decodes at "
                                     "its cache lengths: the warm-up pass over exactly the positions the timed loops "
                                     "then run, issued back to back and synchronized at its end. Libraries that plan "
                                     "a kernel per shape (PyTorch's cuDNN attention builds a graph for each new key "
                                     "length) pay that plan here, not in step_ms. Null in runs before 2026-12-03.",
                                     None, **MS)
    cache_class: str | None = doc("transformers variants: the class of the cache the model decoded with "
                                  "('DynamicCache', 'StaticCache'). Null in runs before 2026-12-03.", None,
                                  pattern=IDENT)
    compile_s: float | None = doc("hf-compiled: seconds of the cold compile and CUDA-graph recording before the "
                                  "first timed step (never part of a step time).", None, **SECONDS)
    tokens_per_s: float | None = doc("batch / median step time.", None, **NONNEGATIVE,
                                     derived=lambda r, _: _per_s(r.batch, r.step_ms_median))
    peak_mem_bytes: int | None = doc("torch.cuda.max_memory_allocated over the timed steps (reset after prefill and "
                                     "warm-up): weights, cache and every temporary a step creates, and the other models "
                                     "the phase keeps loaded (see DecodeModel.resident_bytes). hf-generate: over its "
                                     "last timed pair of whole generate calls, so it includes the prefill and the "
                                     "cache the call builds.", None, **BYTES)
    mem_at_start_bytes: int | None = doc("torch.cuda.memory_allocated right before the timed steps: the loaded "
                                         "weights, this row's filled cache, buffers and graphs, and nothing of "
                                         "another variant (each row's session is the only one alive; runs collected "
                                         "before 2026-12-01 10:54 UTC kept the earlier rows' sessions alive at the "
                                         "agreement check's shape, and their bytes are in this figure there); peak_mem_bytes minus "
                                         "this is what a step allocates on top. hf-generate: read before its last "
                                         "timed pair of whole generate calls, so it holds no cache, and "
                                         "peak_mem_bytes minus this is what a whole call allocates, prefill and cache "
                                         "included.", None, **BYTES)
    kv_cache_bytes: int | None = doc("Bytes the KV cache occupies at the end (int8 values plus fp32 scales for the "
                                     "int8 variants; transformers' cache at its final length).", None, **BYTES)
    weight_bytes_per_step: int | None = doc("Weight bytes read per step (from the model).", None, **BYTES)
    kv_bytes_per_step: float | None = doc("Cache bytes a step must read, averaged over the timed steps, in the "
                                          "cache's stored format (int8 + scales for both int8 variants).",
                                          None, **BYTES)
    bytes_per_step: float | None = doc("weight_bytes_per_step + kv_bytes_per_step: the least traffic a step needs. "
                                       "The int8-dequant variant moves more (it writes and re-reads a bf16 copy); "
                                       "that excess is part of what achieved_over_floor shows.", None, **BYTES,
                                       derived=lambda r, _: None if r.weight_bytes_per_step is None or r.kv_bytes_per_step is None
                                       else r.weight_bytes_per_step + r.kv_bytes_per_step)
    floor_ms: float | None = doc("bytes_per_step / floor_bandwidth_bytes_per_s: the bandwidth floor.", None, **MS,
                                 derived=lambda r, f: _per_s(r.bytes_per_step, f.floor_bandwidth_bytes_per_s))
    achieved_over_floor: float | None = doc("step_ms_median / floor_ms; 1 would be a step at copy bandwidth.", None, **RATIO,
                                            derived=lambda r, _: r.step_ms_median / r.floor_ms
                                            if r.step_ms_median and r.floor_ms else None)
    token_match: float | None = doc("Older runs: fraction of the generated tokens equal to the reference row's at the "
                                    "same shape. Token agreement now lives in `agreement`.", None, **FRACTION)
    tokens_compared: int | None = doc("Tokens in that comparison (batch x new_tokens).", None, **COUNT)
    first_mismatch_step: int | None = doc("Earliest generated-token index where any sequence differs from 'eager'; "
                                          "null when all match.", None, **COUNT)
    distinct_tokens: int | None = doc("Distinct token ids generated; random weights often repeat one token, which "
                                      "makes a token match a weaker check.", None, **COUNT)
    max_abs_logit_diff: float | None = doc("Max |logit - eager's logit| at the final step, over sequences whose tokens "
                                           "all matched (same inputs); null when none did.", None, **NONNEGATIVE)
    logit_scale: float | None = doc("Max |logit| of the 'eager' row at its final step, to read the difference against.",
                                    None, **NONNEGATIVE)
    wall_s: float | None = doc("Host seconds the row took (prefill, warm-up, capture, timed steps).", None, **SECONDS)


@strict
@dataclass
class LogitCheck:
    """Teacher-forced logits of our decoder against transformers' full forward on the same weights."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "cache", "reference", "sequence")

    model: str = doc("Model name.", pattern=IDENT)
    cache: str = doc("Our cache: 'bf16', 'int8' or 'int8-dequant'.", choices=("bf16", "int8", "int8-dequant"))
    reference: str = doc("What it is compared with: 'transformers' (full forward, no cache) or 'eager' (our bf16 cache).",
                         choices=("transformers", "eager"))
    sequence: str = doc("'random' (random token ids) or 'greedy' (the 'eager' row's own greedy output at this model's "
                        "reference shape, so disagreements are the tokens a variant would change).",
                        choices=("random", "greedy"))
    batch: int = doc("Sequences.", **SIZE)
    prompt_len: int = doc("Tokens run by the prefill.", **SIZE)
    positions: int = doc("Positions compared: the prefill's last one and every decode step after it.", **COUNT)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None, **TEXT)
    max_abs_diff: float | None = doc("Max |logit difference| over positions, sequences and vocabulary.",
                                     None, **NONNEGATIVE)
    logit_scale: float | None = doc("Max |logit| of the reference.", None, **NONNEGATIVE)
    top1_agreement: float | None = doc("Fraction of positions (x sequences) whose argmax agrees; every position sees "
                                       "the same inputs, so one disagreement does not cascade.", None, **FRACTION)
    median_top2_margin: float | None = doc("Median gap between the reference's two largest logits: how close greedy "
                                           "decoding is to a tie.", None, **NONNEGATIVE)
    max_margin_at_disagreement: float | None = doc("Largest reference top-2 gap among positions whose argmax differs; "
                                                   "null when none differs.", None, **NONNEGATIVE)


@dataclass
class _ProfiledStep:
    """The profiled step a breakdown row belongs to: one variant at one shape, as in `rows`."""

    model: str = doc("Model name.", pattern=IDENT)
    variant: str = doc("Decode variant, as in `rows`.", choices=ALL_VARIANTS)
    batch: int = doc("Batch.", **SIZE)
    context: int = doc("Context.", **SIZE)


@strict
@dataclass
class KernelClassRow(_ProfiledStep):
    """Where one variant's step time goes at one shape: the kernels of one class, per step."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "variant", "batch", "context", "kernel_class")

    kernel_class: str = doc("'persistent step' (the persistent variant's one kernel: every product and attention "
                            "of a step), 'linear' (matrix products, with whatever is fused into them), 'attention', "
                            "'cache write', 'layer norm', 'elementwise', 'embedding', 'sampling' (argmax and "
                            "token bookkeeping), 'copy' or 'other'; chosen from the kernel's name.",
                            choices=KERNEL_CLASS_ORDER)
    kernels_per_step: float = doc("Kernels of this class per step.", **NONNEGATIVE)
    ms_per_step: float = doc("Their GPU time per step (ms): durations, with any overlap between kernels charged "
                             "to the one that started first, so the classes add up to the busy time.",
                             **NONNEGATIVE)
    top_kernel: str | None = doc("The kernel of this class that took the most time (a name from the profiler).", None,
                                 **KERNEL_NAME)


@strict
@dataclass
class KernelRoleRow(_ProfiledStep):
    """Where a fused CUDA-graph step's time goes at one shape, by what each kernel does: every layer's five
    launches, the embedding, the LM head and the argmax, each charged as the kernel classes are (a CUDA-graph
    variant of the fused step). For the persistent variant the roles are the operations inside its one
    kernel, from one traced step: each operation's span of the critical path (kernels/decode/
    persistent_trace.py); the embedding and the argmax, kernels of their own, are not traced."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "variant", "batch", "context", "role")

    role: str = doc("'embed', 'qkv' (norm, qkv product, cache write), 'attention', 'proj' (attention output "
                    "product and residual add), 'fc' (norm, first MLP product, GELU), 'out' (second MLP product "
                    "and residual add), 'head' (final norm and LM head) or 'argmax'; read off the kernel's place "
                    "in the step and checked against its name.", choices=ROLE_ORDER)
    kernels_per_step: float = doc("Kernels of this role per step (the layers, or one); for the persistent "
                                  "variant, its operations of this role.", **NONNEGATIVE)
    ms_per_step: float = doc("Their GPU time per step (ms), overlap charged to the kernel that started first; for "
                             "the persistent variant, the operations' spans of the step's critical path.",
                             **NONNEGATIVE)
    bytes_per_step: float | None = doc("Bytes this role must read per step: its weights, or for the attention the "
                                       "cache (averaged over the timed steps); null for the embedding and the "
                                       "argmax.", None, **BYTES)
    handoff_ms_per_step: float | None = doc("Persistent variant: of ms_per_step, the time from the end of each "
                                            "operation before until the median SM had its first tile of the "
                                            "operation under way: the counter's release and the polls that see it, "
                                            "the input rows and the LayerNorm (kernels/decode/persistent_trace."
                                            "role_split). Null for the graph steps and in runs before schema "
                                            "version 10.", None, **MS, at_most="ms_per_step")
    late_ms_per_step: float | None = doc("Persistent variant: of ms_per_step, the time from the median SM's "
                                         "finish of its share to the last SM's, which ends each operation. What "
                                         "is left of ms_per_step beside this and the hand-off is the median SM's "
                                         "work. Null as handoff_ms_per_step is.", None, **MS, at_most="ms_per_step")


@strict
@dataclass
class AgreementRow:
    """Teacher-forced top-1 agreement of one variant with the reference step on one token sequence."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "variant", "reference", "batch", "prompt_len")

    model: str = doc("Model name.", pattern=IDENT)
    variant: str = doc("Decode variant compared.", choices=ALL_VARIANTS)
    reference: str = doc("The variant compared against: 'graph' (our bf16 step; run without capture on a device "
                         "without CUDA graphs, which computes the same numbers).", choices=VARIANTS)
    batch: int = doc("Sequences.", **SIZE)
    prompt_len: int = doc("Tokens prefilled before the first compared step.", **SIZE)
    positions: int = doc("Positions compared: batch x steps; every step is fed the sequence's own next token, so one "
                         "disagreement never changes the inputs of the next.", **COUNT)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None, **TEXT)
    near_ties: int | None = doc("Positions where the reference's two largest logits differ by less than one unit in "
                                "the last place of the model's dtype (bf16: 8 significant bits) at the top logit's "
                                "magnitude: a rounding of the logit alone could swap them.", None, **COUNT)
    near_tie_fraction: float | None = doc("near_ties / positions.", None, **FRACTION,
                                          derived=lambda r, _: r.near_ties / r.positions
                                          if r.near_ties is not None and r.positions else None)
    agreement: float | None = doc("Fraction of the positions outside near-ties where the variant's argmax equals the "
                                  "reference's: the metric of record.", None, **FRACTION)
    agreement_at_near_ties: float | None = doc("The same fraction at near-ties (null when there are none).", None, **FRACTION)
    disagreements: int | None = doc("Positions outside near-ties where the argmax differs.", None, **COUNT)
    max_margin_at_disagreement: float | None = doc("Largest reference top-2 margin among those disagreements.", None, **NONNEGATIVE)
    max_top1_logit_diff: float | None = doc("Largest |top logit - reference's top logit| over the positions where "
                                            "both chose the same token.", None, **NONNEGATIVE)
    free_running_match: float | None = doc("The second number: fraction of greedy tokens equal to the reference's "
                                           "greedy tokens from the same prompt, each loop fed its own output. One "
                                           "early difference changes every later input of that sequence, so this "
                                           "falls far faster than the agreement.", None, **FRACTION)
    free_running_tokens: int | None = doc("Tokens in that comparison (batch x steps).", None, **COUNT)
    free_running_first_mismatch: int | None = doc("Earliest step where any sequence's greedy token differs; null "
                                                  "when none does.", None, **COUNT)


@strict
@dataclass
class MicroRow:
    """Decode attention alone: one query per (batch, head) over a full cache of `context` keys."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("impl", "batch", "heads", "head_dim", "context")

    impl: str = doc("'triton-bf16', 'triton-int8' (our split-KV kernel) or 'sdpa' (torch SDPA, query length 1, bf16).",
                    choices=MICRO_IMPLS)
    batch: int = doc("Batch.", **SIZE)
    heads: int = doc("Heads.", **SIZE)
    head_dim: int = doc("Head dimension.", **SIZE)
    context: int = doc("Cached keys read.", **SIZE)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None, **TEXT)
    latency_ms_median: float | None = doc("Median device time of one call (collect/timing.py: L2 flushed before each "
                                          "call, the GPU kept busy while the host issues it, so no host time falls "
                                          "inside). Older runs: a CUDA-graph replay timed with do_bench.", None, **MS)
    latency_ms_p10: float | None = doc("10th percentile.", None, **MS, at_most="latency_ms_median")
    latency_ms_p90: float | None = doc("90th percentile.", None, **MS, at_least="latency_ms_median")
    bytes_read: int | None = doc("Cache bytes the call must read: keys and values (plus fp32 scales for int8); q and "
                                 "the output are negligible.", None, **BYTES)
    achieved_bytes_per_s: float | None = doc("bytes_read / median latency.", None, **BYTES_PER_S,
                                             derived=lambda r, _: _per_s(r.bytes_read, r.latency_ms_median))
    bandwidth_fraction: float | None = doc("achieved_bytes_per_s / the floor bandwidth (see DecodeFile). That bandwidth "
                                           "counts a copy's reads plus its writes, and DRAM turns around between the "
                                           "two; a stream of reads only can run faster, so a value above 1 is "
                                           "possible and not an error.", None, **RATIO,
                                           derived=lambda r, f: r.achieved_bytes_per_s / f.floor_bandwidth_bytes_per_s
                                           if r.achieved_bytes_per_s and f.floor_bandwidth_bytes_per_s else None)
    host_ms_median: float | None = doc("Median host time of one call: the CPU cost of launching it.", None, **MS)
    sm_clock_mhz: float | None = doc("SM clock seen right before the timed calls (median).", None, **CLOCK_MHZ)
    num_splits: int | None = doc("Splits of the context per (batch, head) for the Triton kernel.", None, **COUNT)
    kernel_config: str | None = doc("Tile configuration the autotuner chose.", None, **NAME)
    max_abs_diff_vs_sdpa: float | None = doc("Max |output - SDPA's bf16 output| (int8 includes quantization error).",
                                             None, **NONNEGATIVE)


@strict
@dataclass
class HostProfileRow:
    """Where one of transformers' host-bound loops spends host time per token, under cProfile
    (collect/host_profile.py)."""

    CASE_KEY = ("model", "variant", "batch", "context")

    model: str = doc("Model name.", pattern=IDENT)
    variant: str = doc("'hf-generate' (model.generate) or 'hf-eager' (the plain greedy loop).",
                       choices=("hf-generate", "hf-eager"))
    batch: int = doc("Batch.", **SIZE)
    context: int = doc("Prompt length.", **SIZE)
    steps: int = doc("Tokens the two profiled calls differ by.", **COUNT)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None, **TEXT)
    ms_per_token: float | None = doc("The loop's host time per token under cProfile (slower than the timed rows: "
                                     "read components as shares of it).", None, **MS)
    components: dict[str, float] | None = doc("Component (transformers' function, collect/host_profile.COMPONENTS) to "
                                              "its profiled ms per token; 'everything else' is what none of them "
                                              "covers; 'causal mask (inside the forward)' is part of 'model forward'.",
                                              None, **NAME)
    calls_per_token: dict[str, float] | None = doc("Component to its calls per token.", None, **NAME)
    kernels_per_token: float | None = doc("GPU kernels the loop launches per token (torch profiler).", None,
                                          **NONNEGATIVE)
    host_copies_per_token: float | None = doc("Device-to-host copies per token: each makes the host wait for the GPU.",
                                              None, **NONNEGATIVE)


@strict
@dataclass
class DecodeFile:
    """decode.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("Run this file belongs to.", pattern=RUN_ID)
    dtype: str = doc("Weights, activations and bf16 caches.", "bfloat16", choices=DTYPES)
    prompt: str = doc("How prompts were made (random token ids with a fixed seed: no tokenizer, no text).", "", **TEXT)
    floor_bandwidth_bytes_per_s: float | None = doc(
        "Rate used for every bandwidth floor: the env phase's measured copy bandwidth, used as-is. That figure "
        "counts bytes read plus bytes written, i.e. all DRAM traffic a copy causes, and DRAM bandwidth is shared "
        "by both directions; a decode step's traffic is almost all reads, so the copy's total is the yardstick. "
        "A stream of reads alone can exceed it somewhat, since DRAM then never turns around to write "
        "(MicroRow.bandwidth_fraction shows by how much on this GPU). Halving it (the read half of a copy) would "
        "double every floor and make the kernels look better than they are.", None, **BYTES_PER_S)
    floor_bandwidth_source: str | None = doc("'env copy_bandwidth' or 'decode phase copy' (measured here because the "
                                             "env phase had not run).", None, **NAME)
    warmup_steps: int = doc("Untimed steps before each row's timed steps (compilation, autotuning, capture).", 0, **COUNT)
    dtype_reason: str | None = doc("Why this dtype: bf16 where the GPU computes it natively, fp16 where it does not "
                                   "(a T4).", None, **TEXT)
    graph_step: str | None = doc("Step implementation of the 'graph' and 'int8-graph' variants (see DecodeRow."
                                 "step_impl).", None, choices=STEP_IMPLS)
    models: list[DecodeModel] = doc("Model shapes used.", default_factory=list)
    rows: list[DecodeRow] = doc("One row per (model, variant, batch, context).", default_factory=list)
    checks: list[LogitCheck] = doc("Older runs: logit checks against transformers and between caches.",
                                   default_factory=list)
    kernel_classes: list[KernelClassRow] = doc("Where each profiled row's step time goes, by kernel class.",
                                               default_factory=list)
    kernel_roles: list[KernelRoleRow] = doc("Where each profiled fused graph step's time goes, by kernel role "
                                            "(runs before 2026-12-02 did not record it).", default_factory=list)
    agreement: list[AgreementRow] = doc("Token agreement of every variant with the reference step.",
                                        default_factory=list)
    micro: list[MicroRow] = doc("Decode-attention microbenchmark.", default_factory=list)
    host_profiles: list[HostProfileRow] = doc("Where transformers' model.generate and its plain greedy loop spend host "
                                              "time per token, at one shape (runs before 2026-12-03 did not record "
                                              "it).", default_factory=list)
    notes: list[str] = doc("What the reader should know about this run.", default_factory=list, **TEXT)
