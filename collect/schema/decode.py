"""decode.json: KV-cache decode with our GPT-2 loop against transformers', an int8 cache two ways,
and a standalone decode-attention bandwidth microbenchmark."""
from __future__ import annotations

from dataclasses import dataclass

from .common import doc, strict

# Decode variants in the report's order; the page labels them.
VARIANTS = ("hf", "eager", "graph", "int8-dequant", "int8-kernel")
REFERENCE_VARIANT = "eager"
MICRO_IMPLS = ("triton-bf16", "triton-int8", "sdpa")


@strict
@dataclass
class DecodeModel:
    """A model shape the sweeps ran, and where its weights came from."""

    name: str = doc("Shape name: 'gpt2' (124M) or 'gpt2-xl' (1.5B), or the checkpoint's folder name.")
    weights: str = doc("'random-init' (transformers' own init from GPT2Config, fixed seed) or 'checkpoint'.")
    n_layer: int = doc("Transformer blocks.")
    n_head: int = doc("Attention heads.")
    n_embd: int = doc("Hidden size.")
    head_dim: int = doc("n_embd / n_head.")
    vocab_size: int = doc("Vocabulary size.")
    n_positions: int = doc("Largest prompt + new tokens the model accepts (1024 for GPT-2).")
    parameters: int = doc("Parameter count (tied embedding counted once).")
    weight_bytes_per_step: int = doc("Weight bytes one decode step reads: all blocks, final norm and the LM head "
                                     "(the tied token embedding, read in full); position table excluded.")
    dtype: str = doc("Weight and activation dtype, e.g. 'bfloat16'.")
    seed: int | None = doc("Seed of the random init; null for a checkpoint.", None)
    checkpoint: str | None = doc("Folder name of the local checkpoint (--model-path), if one was used.", None)
    hf_attn_implementation: str | None = doc("Attention implementation transformers picked for the baseline.", None)
    init_s: float | None = doc("Seconds to build (or load) the model on the device.", None)


@strict
@dataclass
class DecodeRow:
    """One decode variant at one (model, batch, context): greedy decoding, every step timed."""

    model: str = doc("Model name, see `models`.")
    variant: str = doc("'hf' (transformers' model and its default dynamic cache, greedy loop), 'eager' (our loop, "
                       "bf16 cache), 'graph' (our loop captured in a CUDA graph), 'int8-dequant' (int8 cache "
                       "dequantized in full to bf16 every step), 'int8-kernel' (int8 cache read by the Triton "
                       "decode kernel, no bf16 copy).")
    batch: int = doc("Sequences decoded together.")
    context: int = doc("Prompt length: cached tokens when the first timed step runs.")
    new_tokens: int = doc("Tokens generated: one from the prefill, then one per timed step.")
    status: str = doc("ok, oom, unsupported or error.")
    reason: str | None = doc("Why the row is not ok.", None)
    steps_timed: int = doc("Decode steps timed (new_tokens - 1), each with CUDA events, after warm-up.", 0)
    step_ms_median: float | None = doc("Median wall time of one decode step (all sequences advance one token).", None)
    step_ms_p10: float | None = doc("10th percentile step time.", None)
    step_ms_p90: float | None = doc("90th percentile step time.", None)
    tokens_per_s: float | None = doc("batch / median step time.", None)
    peak_mem_bytes: int | None = doc("torch.cuda.max_memory_allocated over the timed steps (reset after prefill and "
                                     "warm-up): weights, cache and every temporary a step creates.", None)
    mem_at_start_bytes: int | None = doc("torch.cuda.memory_allocated right before the timed steps: weights, the "
                                         "filled cache and anything else alive; peak_mem_bytes minus this is what "
                                         "a step allocates on top.", None)
    kv_cache_bytes: int | None = doc("Bytes the KV cache occupies at the end (int8 values plus fp32 scales for the "
                                     "int8 variants; transformers' cache at its final length).", None)
    weight_bytes_per_step: int | None = doc("Weight bytes read per step (from the model).", None)
    kv_bytes_per_step: float | None = doc("Cache bytes a step must read, averaged over the timed steps, in the "
                                          "cache's stored format (int8 + scales for both int8 variants).", None)
    bytes_per_step: float | None = doc("weight_bytes_per_step + kv_bytes_per_step: the least traffic a step needs. "
                                       "The int8-dequant variant moves more (it writes and re-reads a bf16 copy); "
                                       "that excess is part of what achieved_over_floor shows.", None)
    floor_ms: float | None = doc("Bandwidth floor: bytes_per_step / floor_bandwidth_bytes_per_s.", None)
    achieved_over_floor: float | None = doc("step_ms_median / floor_ms; 1 would be a step at copy bandwidth.", None)
    token_match: float | None = doc("Fraction of the generated tokens (all sequences) equal to the 'eager' row's at "
                                    "the same shape; null for 'eager' itself.", None)
    tokens_compared: int | None = doc("Tokens in that comparison (batch x new_tokens).", None)
    first_mismatch_step: int | None = doc("Earliest generated-token index where any sequence differs from 'eager'; "
                                          "null when all match.", None)
    distinct_tokens: int | None = doc("Distinct token ids generated; random weights often repeat one token, which "
                                      "makes a token match a weaker check.", None)
    max_abs_logit_diff: float | None = doc("Max |logit - eager's logit| at the final step, over sequences whose tokens "
                                           "all matched (same inputs); null when none did.", None)
    logit_scale: float | None = doc("Max |logit| of the 'eager' row at its final step, to read the difference against.", None)
    wall_s: float | None = doc("Host seconds the row took (prefill, warm-up, capture, timed steps).", None)


@strict
@dataclass
class LogitCheck:
    """Teacher-forced logits of our decoder against transformers' full forward on the same weights."""

    model: str = doc("Model name.")
    cache: str = doc("Our cache: 'bf16', 'int8' or 'int8-dequant'.")
    reference: str = doc("What it is compared with: 'transformers' (full forward, no cache) or 'eager' (our bf16 cache).")
    sequence: str = doc("'random' (random token ids) or 'greedy' (the 'eager' row's own greedy output at this model's "
                        "reference shape, so disagreements are the tokens a variant would change).")
    batch: int = doc("Sequences.")
    prompt_len: int = doc("Tokens run by the prefill.")
    positions: int = doc("Positions compared: the prefill's last one and every decode step after it.")
    status: str = doc("ok, oom, unsupported or error.")
    reason: str | None = doc("Why not ok.", None)
    max_abs_diff: float | None = doc("Max |logit difference| over positions, sequences and vocabulary.", None)
    logit_scale: float | None = doc("Max |logit| of the reference.", None)
    top1_agreement: float | None = doc("Fraction of positions (x sequences) whose argmax agrees; every position sees "
                                       "the same inputs, so one disagreement does not cascade.", None)
    median_top2_margin: float | None = doc("Median gap between the reference's two largest logits: how close greedy "
                                           "decoding is to a tie.", None)
    max_margin_at_disagreement: float | None = doc("Largest reference top-2 gap among positions whose argmax differs; "
                                                   "null when none differs.", None)


@strict
@dataclass
class MicroRow:
    """Decode attention alone: one query per (batch, head) over a full cache of `context` keys."""

    impl: str = doc("'triton-bf16', 'triton-int8' (our split-KV kernel) or 'sdpa' (torch SDPA, query length 1, bf16).")
    batch: int = doc("Batch.")
    heads: int = doc("Heads.")
    head_dim: int = doc("Head dimension.")
    context: int = doc("Cached keys read.")
    status: str = doc("ok, oom, unsupported or error.")
    reason: str | None = doc("Why not ok.", None)
    latency_ms_median: float | None = doc("Median device time of one call, replayed from a CUDA graph so the host's "
                                          "launch overhead is left out; L2 flushed before each call (do_bench).", None)
    latency_ms_p10: float | None = doc("10th percentile.", None)
    latency_ms_p90: float | None = doc("90th percentile.", None)
    bytes_read: int | None = doc("Cache bytes the call must read: keys and values (plus fp32 scales for int8); q and "
                                 "the output are negligible.", None)
    achieved_bytes_per_s: float | None = doc("bytes_read / median latency.", None)
    bandwidth_fraction: float | None = doc("achieved_bytes_per_s / the floor bandwidth (see DecodeFile).", None)
    num_splits: int | None = doc("Splits of the context per (batch, head) for the Triton kernel.", None)
    kernel_config: str | None = doc("Tile configuration the autotuner chose.", None)
    max_abs_diff_vs_sdpa: float | None = doc("Max |output - SDPA's bf16 output| (int8 includes quantization error).", None)


@strict
@dataclass
class DecodeFile:
    """decode.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("Run this file belongs to.")
    dtype: str = doc("Weights, activations and bf16 caches.", "bfloat16")
    prompt: str = doc("How prompts were made (random token ids with a fixed seed: no tokenizer, no text).", "")
    floor_bandwidth_bytes_per_s: float | None = doc(
        "Rate used for every bandwidth floor: the env phase's measured copy bandwidth, used as-is. That figure "
        "counts bytes read plus bytes written, i.e. all DRAM traffic a copy causes, and DRAM bandwidth is shared "
        "by both directions; a decode step's traffic is almost all reads, so the total is the rate it can reach. "
        "Halving it (the read half of a copy) would double every floor and make the kernels look better than "
        "they are.", None)
    floor_bandwidth_source: str | None = doc("'env copy_bandwidth' or 'decode phase copy' (measured here because the "
                                             "env phase had not run).", None)
    warmup_steps: int = doc("Untimed steps before each row's timed steps (compilation, autotuning, capture).", 0)
    models: list[DecodeModel] = doc("Model shapes used.", default_factory=list)
    rows: list[DecodeRow] = doc("One row per (model, variant, batch, context).", default_factory=list)
    checks: list[LogitCheck] = doc("Logit checks against transformers and between caches.", default_factory=list)
    micro: list[MicroRow] = doc("Decode-attention microbenchmark.", default_factory=list)
    notes: list[str] = doc("What the reader should know about this run.", default_factory=list)
