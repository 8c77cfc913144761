"""decode.json: KV-cache decode with our GPT-2 loop against transformers', an int8 cache two ways,
and a standalone decode-attention bandwidth microbenchmark."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, BYTES_PER_S, COUNT, FRACTION, IDENT, IDENT_OR_EMPTY, MS, NONNEGATIVE, RATIO, ROW_STATUS,
                     RUN_ID, SECONDS, SIZE, doc, strict)

# Decode variants in the report's order; the page labels them.
VARIANTS = ("hf", "eager", "graph", "int8-dequant", "int8-kernel")
REFERENCE_VARIANT = "eager"
MICRO_IMPLS = ("triton-bf16", "triton-int8", "sdpa")


@strict
@dataclass
class DecodeModel:
    """A model shape the sweeps ran, and where its weights came from."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("name",)

    name: str = doc("Shape name: 'gpt2' (124M) or 'gpt2-xl' (1.5B), or the checkpoint's folder name.", pattern=IDENT)
    weights: str = doc("'random-init' (transformers' own init from GPT2Config, fixed seed) or 'checkpoint'.",
                       pattern=IDENT)
    n_layer: int = doc("Transformer blocks.", **SIZE)
    n_head: int = doc("Attention heads.", **SIZE)
    n_embd: int = doc("Hidden size.", **SIZE)
    head_dim: int = doc("n_embd / n_head.", **SIZE)
    vocab_size: int = doc("Vocabulary size.", **SIZE)
    n_positions: int = doc("Largest prompt + new tokens the model accepts (1024 for GPT-2).", **SIZE)
    parameters: int = doc("Parameter count (tied embedding counted once).", **COUNT)
    weight_bytes_per_step: int = doc("Weight bytes one decode step reads: all blocks, final norm and the LM head "
                                     "(the tied token embedding, read in full); position table excluded.", **BYTES)
    dtype: str = doc("Weight and activation dtype, e.g. 'bfloat16'.", pattern=IDENT)
    seed: int | None = doc("Seed of the random init; null for a checkpoint.", None, lo=0, hi=2.0**64)
    checkpoint: str | None = doc("Folder name of the local checkpoint (--model-path), if one was used.", None)
    hf_attn_implementation: str | None = doc("Attention implementation transformers picked for the baseline.", None)
    init_s: float | None = doc("Seconds to build (or load) the model on the device.", None, **SECONDS)


@strict
@dataclass
class DecodeRow:
    """One decode variant at one (model, batch, context): greedy decoding, every step timed."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("model", "variant", "batch", "context", "series")

    model: str = doc("Model name, see `models`.", pattern=IDENT)
    variant: str = doc("'hf' (transformers' model and its default dynamic cache, greedy loop), 'eager' (our loop, "
                       "bf16 cache), 'graph' (our loop captured in a CUDA graph), 'int8-dequant' (int8 cache "
                       "dequantized in full to bf16 every step), 'int8-kernel' (int8 cache read by the Triton "
                       "decode kernel, no bf16 copy).", pattern=IDENT)
    batch: int = doc("Sequences decoded together.", **SIZE)
    context: int = doc("Prompt length: cached tokens when the first timed step runs.", **SIZE)
    new_tokens: int = doc("Tokens generated: one from the prefill, then one per timed step.", **SIZE)
    status: str = doc("ok, oom, unsupported or error.", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok.", None)
    series: str = doc("Which measurement series the row belongs to when one (model, variant, batch, context) was "
                      "measured under two conditions: '' for the main sweep; 'int8-comparison' for the published "
                      "study's int8-cache comparison, whose bf16 baseline repeats a sweep shape with its own peak "
                      "memory.", "", pattern=IDENT_OR_EMPTY)
    steps_timed: int = doc("Decode steps timed (new_tokens - 1), each with CUDA events, after warm-up.", 0, **COUNT)
    step_ms_median: float | None = doc("Median wall time of one decode step (all sequences advance one token).",
                                       None, **MS)
    step_ms_p10: float | None = doc("10th percentile step time.", None, **MS)
    step_ms_p90: float | None = doc("90th percentile step time.", None, **MS)
    tokens_per_s: float | None = doc("batch / median step time.", None, lo=0, lo_open=True, hi=1e12)
    peak_mem_bytes: int | None = doc("torch.cuda.max_memory_allocated over the timed steps (reset after prefill and "
                                     "warm-up): weights, cache and every temporary a step creates.", None, **BYTES)
    mem_at_start_bytes: int | None = doc("torch.cuda.memory_allocated right before the timed steps: weights, the "
                                         "filled cache and anything else alive; peak_mem_bytes minus this is what "
                                         "a step allocates on top.", None, **BYTES)
    kv_cache_bytes: int | None = doc("Bytes the KV cache occupies at the end (int8 values plus fp32 scales for the "
                                     "int8 variants; transformers' cache at its final length).", None, **BYTES)
    weight_bytes_per_step: int | None = doc("Weight bytes read per step (from the model).", None, **BYTES)
    kv_bytes_per_step: float | None = doc("Cache bytes a step must read, averaged over the timed steps, in the "
                                          "cache's stored format (int8 + scales for both int8 variants).",
                                          None, **BYTES)
    bytes_per_step: float | None = doc("weight_bytes_per_step + kv_bytes_per_step: the least traffic a step needs. "
                                       "The int8-dequant variant moves more (it writes and re-reads a bf16 copy); "
                                       "that excess is part of what achieved_over_floor shows.", None, **BYTES)
    floor_ms: float | None = doc("Bandwidth floor: bytes_per_step / floor_bandwidth_bytes_per_s.", None, **MS)
    achieved_over_floor: float | None = doc("step_ms_median / floor_ms; 1 would be a step at copy bandwidth.",
                                            None, **RATIO)
    token_match: float | None = doc("Fraction of the generated tokens (all sequences) equal to the 'eager' row's at "
                                    "the same shape; null for 'eager' itself.", None, **FRACTION)
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
    cache: str = doc("Our cache: 'bf16', 'int8' or 'int8-dequant'.", pattern=IDENT)
    reference: str = doc("What it is compared with: 'transformers' (full forward, no cache) or 'eager' (our bf16 cache).",
                         pattern=IDENT)
    sequence: str = doc("'random' (random token ids) or 'greedy' (the 'eager' row's own greedy output at this model's "
                        "reference shape, so disagreements are the tokens a variant would change).", pattern=IDENT)
    batch: int = doc("Sequences.", **SIZE)
    prompt_len: int = doc("Tokens run by the prefill.", **SIZE)
    positions: int = doc("Positions compared: the prefill's last one and every decode step after it.", **COUNT)
    status: str = doc("ok, oom, unsupported or error.", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None)
    max_abs_diff: float | None = doc("Max |logit difference| over positions, sequences and vocabulary.",
                                     None, **NONNEGATIVE)
    logit_scale: float | None = doc("Max |logit| of the reference.", None, **NONNEGATIVE)
    top1_agreement: float | None = doc("Fraction of positions (x sequences) whose argmax agrees; every position sees "
                                       "the same inputs, so one disagreement does not cascade.", None, **FRACTION)
    median_top2_margin: float | None = doc("Median gap between the reference's two largest logits: how close greedy "
                                           "decoding is to a tie.", None, **NONNEGATIVE)
    max_margin_at_disagreement: float | None = doc("Largest reference top-2 gap among positions whose argmax differs; "
                                                   "null when none differs.", None, **NONNEGATIVE)


@strict
@dataclass
class MicroRow:
    """Decode attention alone: one query per (batch, head) over a full cache of `context` keys."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("impl", "batch", "heads", "head_dim", "context")

    impl: str = doc("'triton-bf16', 'triton-int8' (our split-KV kernel) or 'sdpa' (torch SDPA, query length 1, bf16).",
                    pattern=IDENT)
    batch: int = doc("Batch.", **SIZE)
    heads: int = doc("Heads.", **SIZE)
    head_dim: int = doc("Head dimension.", **SIZE)
    context: int = doc("Cached keys read.", **SIZE)
    status: str = doc("ok, oom, unsupported or error.", pattern=ROW_STATUS)
    reason: str | None = doc("Why not ok.", None)
    latency_ms_median: float | None = doc("Median device time of one call, replayed from a CUDA graph so the host's "
                                          "launch overhead is left out; L2 flushed before each call (do_bench).",
                                          None, **MS)
    latency_ms_p10: float | None = doc("10th percentile.", None, **MS)
    latency_ms_p90: float | None = doc("90th percentile.", None, **MS)
    bytes_read: int | None = doc("Cache bytes the call must read: keys and values (plus fp32 scales for int8); q and "
                                 "the output are negligible.", None, **BYTES)
    achieved_bytes_per_s: float | None = doc("bytes_read / median latency.", None, **BYTES_PER_S)
    bandwidth_fraction: float | None = doc("achieved_bytes_per_s / the floor bandwidth (see DecodeFile).",
                                           None, **RATIO)
    num_splits: int | None = doc("Splits of the context per (batch, head) for the Triton kernel.", None, **COUNT)
    kernel_config: str | None = doc("Tile configuration the autotuner chose.", None)
    max_abs_diff_vs_sdpa: float | None = doc("Max |output - SDPA's bf16 output| (int8 includes quantization error).",
                                             None, **NONNEGATIVE)


@strict
@dataclass
class DecodeFile:
    """decode.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("Run this file belongs to.", pattern=RUN_ID)
    dtype: str = doc("Weights, activations and bf16 caches.", "bfloat16", pattern=IDENT)
    prompt: str = doc("How prompts were made (random token ids with a fixed seed: no tokenizer, no text).", "")
    floor_bandwidth_bytes_per_s: float | None = doc(
        "Rate used for every bandwidth floor: the env phase's measured copy bandwidth, used as-is. That figure "
        "counts bytes read plus bytes written, i.e. all DRAM traffic a copy causes, and DRAM bandwidth is shared "
        "by both directions; a decode step's traffic is almost all reads, so the total is the rate it can reach. "
        "Halving it (the read half of a copy) would double every floor and make the kernels look better than "
        "they are.", None, **BYTES_PER_S)
    floor_bandwidth_source: str | None = doc("'env copy_bandwidth' or 'decode phase copy' (measured here because the "
                                             "env phase had not run).", None)
    warmup_steps: int = doc("Untimed steps before each row's timed steps (compilation, autotuning, capture).",
                            0, **COUNT)
    models: list[DecodeModel] = doc("Model shapes used.", default_factory=list)
    rows: list[DecodeRow] = doc("One row per (model, variant, batch, context).", default_factory=list)
    checks: list[LogitCheck] = doc("Logit checks against transformers and between caches.", default_factory=list)
    micro: list[MicroRow] = doc("Decode-attention microbenchmark.", default_factory=list)
    notes: list[str] = doc("What the reader should know about this run.", default_factory=list)
