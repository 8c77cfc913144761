"""iterations.json: every recorded version of our kernel, timed side by side with SDPA's fastest
backends at the goal shapes, with the prediction made before each version was first measured
and the resources its compiled kernel uses."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, COUNT, DTYPES, IDENT, IDENT_OR_EMPTY, NAME, NONNEGATIVE, PCT, PROFILES, RATIO, ROW_STATUS,
                     RUN_ID, SECONDS, SIZE, TEXT, clock_fields, doc, strict, with_fields)

MASKINGS = ("non-causal", "causal")
# Where a version's kernel lives: one of flash_attention's paths, or its own choice per shape.
VERSION_PATHS = ("portable", "hopper", "gluon", "per-shape")


@strict
@dataclass
class PredictedRange:
    """The speedup a version was expected to give, written before it was measured."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("masking",)

    masking: str = doc("'non-causal' or 'causal'.", choices=MASKINGS)
    low: float = doc("Lowest expected factor on TFLOP/s against the baseline (geometric mean over the goal cases).",
                     **RATIO)
    high: float = doc("Highest expected factor.", **RATIO)


@strict
@dataclass
class KernelVersionInfo:
    """One step of the optimisation journey, as kernels/attention/versions.py VERSIONS records it."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("name",)

    name: str = doc("Version name, e.g. 'v0-portable', 'v1-tma'; ordered as the journey went.", pattern=IDENT)
    path: str = doc("'portable' (kernels/attention/portable.py), 'hopper' (kernels/attention/hopper.py), 'gluon' "
                    "(kernels/attention/gluon.py; both compute capability 9.x) or 'per-shape' (flash_attention's "
                    "own choice, kernels/attention/dispatch.py).",
                    choices=VERSION_PATHS)
    features: str = doc("Kernel switches of a Hopper version ('tma', 'overlap', 'warp_spec', 'causal_split', "
                        "'persistent', joined by '+'); 'per shape' when hopper_attention chooses; '' for the portable path.",
                        **NAME)
    change: str = doc("What this version changed, in words.", **TEXT)
    prediction: str = doc("The prediction written before the version was first measured.", **TEXT)
    predicted_at: str = doc("ISO date the prediction was written.", **NAME)
    baseline: str = doc("What the predicted speedup compares against: another version's name, or 'sdpa' for the "
                        "fastest SDPA backend of the same case.", "", pattern=IDENT_OR_EMPTY)
    predicted: list[PredictedRange] = doc("The predicted speedup range per masking.", default_factory=list)
    outcome: str = doc("What the author concluded after measuring (free text, written after); '' when none.", "", **TEXT)
    role: str = doc("'t4-fix' for the version that tries the fix the published T4 study left open (fewer, wider "
                    "loads); '' otherwise.", "", choices=("", "t4-fix"))
    configs: dict[str, str] = doc("Fixed tile config per masking ('non-causal'/'causal'), e.g. '128x128/w4/s2' "
                                  "(BLOCK_M x BLOCK_N / warps / pipeline stages).", default_factory=dict, **NAME)


@strict
@dataclass
@with_fields(clock_fields(), after="reason")
class IterationRow:
    """One implementation at one goal case: timed, or why not."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("impl", "dtype", "causal", "batch", "heads", "seq_len", "head_dim")

    impl: str = doc("A version name, 'sdpa-cudnn' / 'sdpa-flash' (one SDPA backend forced), or 'fa4'.", pattern=IDENT)
    kind: str = doc("'version' (ours), 'sdpa' (a forced SDPA backend) or 'baseline' (another project's kernel: "
                    "'fa4', FlashAttention-4).", choices=("version", "sdpa", "baseline"))
    dtype: str = doc("'float16', 'bfloat16' or 'float32'.", choices=DTYPES)
    causal: bool = doc("Causal mask on.")
    batch: int = doc("B.", **SIZE)
    heads: int = doc("H.", **SIZE)
    seq_len: int = doc("N.", **SIZE)
    head_dim: int = doc("d.", **SIZE)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok (e.g. the Hopper path on a GPU that is not compute capability 9.x).", None,
                             **TEXT)
    config: str | None = doc("Tile config the kernel ran with, e.g. '128x128/w4/s2'; null for SDPA.", None, **NAME)
    warp_specialized: bool | None = doc("Whether Triton warp-specialized the kernel (producer and consumer warpgroups).", None)
    registers_per_thread: int | None = doc("Registers per thread of the compiled kernel (its n_regs; for a warp-specialized "
                                           "kernel the launch figure, which setmaxnreg then moves between warpgroups).",
                                           None, **COUNT)
    spilled_registers: int | None = doc("Registers the compiler spilled to local memory (n_spills).", None, **COUNT)
    shared_mem_bytes: int | None = doc("Dynamic shared memory per block of the compiled kernel (metadata.shared).",
                                       None, **BYTES)
    warps_per_block: int | None = doc("Warps per block as launched (all warpgroups of a warp-specialized kernel).",
                                      None, **COUNT)
    blocks_per_sm: int | None = doc("Theoretical resident blocks per SM from registers, shared memory and warp slots "
                                    "(collect/schema/occupancy.py, the device's limits).", None, **COUNT)
    occupancy_pct: float | None = doc("Theoretical occupancy: resident warps / the SM's maximum.", None, **PCT)
    occupancy_limiter: str | None = doc("The resource(s) that set blocks_per_sm, e.g. 'registers' or 'shared memory'.", None,
                                        **NAME)
    max_abs_diff_vs_sdpa: float | None = doc("max |out - SDPA's out| on the same inputs: a sanity check at full size "
                                             "(the correctness phase is the real test).", None, **NONNEGATIVE)
    warmup_s: float | None = doc("Wall time of the first call: compilation (or loading from Triton's cache) lands here.",
                                 None, **SECONDS)


@strict
@dataclass
class IterationsFile:
    """iterations.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("The run this file belongs to.", pattern=RUN_ID)
    profile: str = doc("'quick' or 'full'.", choices=PROFILES)
    timing_method: str = doc("How latency was timed, in words.", **TEXT)
    goal_ratio: float = doc("The goal: our final version at this fraction or more of the fastest SDPA backend's TFLOP/s.",
                            **RATIO)
    final_version: str = doc("The version hopper_attention runs by default (the end of the journey).", pattern=IDENT)
    hopper_available: bool = doc("Whether this GPU could run the Hopper versions.")
    hopper_reason: str = doc("Why not, when it could not.", "", **TEXT)
    versions: list[KernelVersionInfo] = doc("The recorded versions, in journey order.", default_factory=list)
    rows: list[IterationRow] = doc("One row per implementation x dtype x causal x shape.", default_factory=list)
    notes: list[str] = doc("Anything the phase wants the reader to know (time budget, skipped cases).", default_factory=list,
                           **TEXT)
