"""bench.json: latency, TFLOP/s and peak memory of each attention implementation over seq_len."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, CLOCK_MHZ, COUNT, DTYPES, IDENT, MILLIJOULES, MS, NAME, PROFILES, ROW_STATUS, RUN_ID,
                     SECONDS, SIZE, TEXT, WATTS, clock_fields, doc, strict, with_fields)

# The paths flash_attention can take (kernels/attention/dispatch.py); pages name each one.
KERNEL_PATHS = ("portable", "hopper", "gluon", "turing")


@strict
@dataclass
@with_fields(clock_fields(n_timed_runs="Timed calls behind the statistics (at least 50).",
                          p10="10th percentile of the timed calls.", p90="90th percentile of the timed calls."),
             after="reason")
class BenchRow:
    """One implementation at one shape, dtype and masking: measured, or why not."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("impl", "backend_requested", "dtype", "causal", "batch", "heads", "seq_len", "head_dim")

    impl: str = doc("'naive', 'triton' (our kernel, its path chosen at run time), 'triton-portable' (held to the "
                    "portable path; Hopper GPUs only), 'sdpa' (PyTorch chooses) or 'sdpa-<backend>' (one backend forced).",
                    pattern=IDENT)
    backend_requested: str | None = doc("SDPA backend forced: flash, cudnn, efficient or math; null when none was.",
                                        pattern=IDENT)
    backend_used: str | None = doc("SDPA backend that ran: the forced one, or the one PyTorch chose for 'sdpa' "
                                   "('unknown' if it could not be read); null for naive and triton.", pattern=IDENT)
    dtype: str = doc("'float16', 'bfloat16' or 'float32'.", choices=DTYPES)
    causal: bool = doc("Causal mask on (each query sees only keys at or before it).")
    batch: int = doc("B.", **SIZE)
    heads: int = doc("H.", **SIZE)
    seq_len: int = doc("N, the query and key length.", **SIZE)
    head_dim: int = doc("d.", **SIZE)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok: PyTorch's refusal, the failed allocation, the exception.", None,
                             **TEXT)
    input_bytes: int = doc("Bytes of Q, K and V together.", 0, **BYTES)
    peak_mem_bytes: int | None = doc("Peak allocated bytes above what was allocated before the measured call "
                                     "(the inputs), with peak statistics reset after warm-up; includes the output.",
                                     None, **BYTES)
    requested_bytes: int | None = doc("oom rows: the allocation that failed (from PyTorch's message) or, when the "
                                      "case was not attempted, the predicted need.", None, **BYTES)
    warmup_s: float | None = doc("Wall time of the first call: compilation and Triton autotuning land here.",
                                 None, **SECONDS)
    kernel_path: str | None = doc("triton rows: the kernel path flash_attention took ('portable', 'hopper', "
                                  "'gluon').", None, choices=KERNEL_PATHS)
    path_rule: str | None = doc("triton rows: why flash_attention took that path (a measured shape rule, or the "
                                "path being available).", None, **TEXT)
    kernel_config: dict[str, int] = doc("triton rows: the tile config that ran (BLOCK_M, BLOCK_N, "
                                        "num_warps, num_stages).", default_factory=dict, **NAME)
    kernel_step: str | None = doc("triton rows on the Gluon path: the step of the Gluon kernel that ran (e.g. "
                                  "'g7', kernels/attention/gluon.py GLUON_VERSIONS); null on the other paths and in runs before "
                                  "it was recorded.", None, pattern=IDENT)
    tensor_cores: bool | None = doc("triton rows: whether the compiled kernel that ran issues tensor-core instructions "
                                    "(mma or wgmma in its code, kernels/aot.py uses_tensor_cores); null where unknown "
                                    "(PyTorch's kernels, published figures).", None)
    # At the power limit (collect/bench_power.py): the plan's power case, each of POWER_IMPLS run back to back.
    board_power_w: float | None = doc("Power case only: the board's mean power while the call ran back to back for "
                                      "a few seconds, from the driver's energy counter (NVML); null on other rows, "
                                      "where it was not measured, and in runs before schema version 9.", None, **WATTS)
    power_limit_w: float | None = doc("Power case only: the board's enforced power limit then (NVML).", None, **WATTS)
    power_sm_clock_mhz: float | None = doc("Power case only: the mean SM clock then (NVML), beside sm_clock_mhz, the "
                                           "clock the rested device timing saw.", None, **CLOCK_MHZ)
    power_loop_ms: float | None = doc("Power case only: device time per call then, back to back (CUDA events "
                                      "around the calls of the counter's window).", None, **MS)
    energy_mj_per_call: float | None = doc("Power case only: board_power_w x power_loop_ms, the board's energy per "
                                           "call at that pace, in millijoules.", None, **MILLIJOULES)


@strict
@dataclass
class BenchFile:
    """bench.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("The run this file belongs to.", pattern=RUN_ID)
    profile: str = doc("'quick' or 'full'.", choices=PROFILES)
    timing_method: str = doc("How latency was timed, in words.", **TEXT)
    backend_choice_method: str = doc("How backend_used was found for 'sdpa' with no backend forced.", **TEXT)
    min_timed_runs: int = doc("Least number of timed calls behind any ok row.", **COUNT)
    rows: list[BenchRow] = doc("One row per implementation x shape x dtype x causal.", default_factory=list)
    notes: list[str] = doc("Anything the phase wants the reader to know (time budget, skipped cases).",
                           default_factory=list, **TEXT)
