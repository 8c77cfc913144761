"""correctness.json: the fused kernel against a float64 reference over a shape x dtype x causal grid."""
from __future__ import annotations

from dataclasses import dataclass

from .bench import KERNEL_PATHS
from .common import COUNT, DTYPES, GPU_TARGET, IDENT, NAME, NONNEGATIVE, RATIO, ROW_STATUS, RUN_ID, SECONDS, SIZE, TEXT, doc, strict


@strict
@dataclass
class Tolerance:
    """The pass criterion for one dtype, derived from its unit roundoff rather than typed."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("dtype",)

    dtype: str = doc("'float16', 'bfloat16' or 'float32'.", choices=DTYPES)
    mantissa_bits: int = doc("Stored fraction bits of the format (10 for float16, 7 for bfloat16).", **COUNT)
    unit_roundoff: float = doc("u = 2^-(mantissa_bits + 1): the largest relative error of one round-to-nearest.",
                               lo=0, lo_open=True, hi=1, derived=lambda r, _: 2.0 ** -(r.mantissa_bits + 1))
    factor: float = doc("Multiple of u allowed (the kernel rounds twice: P before the PV product, and the output).",
                        **RATIO)
    tol_abs: float = doc("Absolute tolerance, factor * u.", **NONNEGATIVE, derived=lambda r, _: r.factor * r.unit_roundoff)
    tol_rel: float = doc("Relative tolerance, factor * u.", **NONNEGATIVE, derived=lambda r, _: r.factor * r.unit_roundoff)


@strict
@dataclass
class CorrectnessRow:
    """One case of the grid: one implementation, shape, dtype and masking against the float64 reference."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("impl", "dtype", "causal", "batch", "heads", "seq_len", "head_dim", "layout")

    impl: str = doc("Implementation under test: 'triton' (flash_attention as it ships), 'triton-portable' (held to "
                    "the portable kernel), 'triton-portable-sm75' / 'triton-turing-sm75' / 'triton-portable-sm80' "
                    "(the code a T4 or an A100 runs, built for that target and run here through its PTX); 'naive' or "
                    "'sdpa' for comparison rows.", pattern=IDENT)
    dtype: str = doc("'float16', 'bfloat16' or 'float32': the dtype of q, k, v and the output.", choices=DTYPES)
    causal: bool = doc("Whether query i attends only to keys 0..i.")
    batch: int = doc("Batch size B.", **SIZE)
    heads: int = doc("Attention heads H.", **SIZE)
    seq_len: int = doc("Sequence length N (queries = keys).", **SIZE)
    head_dim: int = doc("Head dimension d.", **SIZE)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why the case is not ok (exception type and message, or the missing capability), or why "
                             "an ok case failed outright (non-finite outputs).", None, **TEXT)
    seed: int = doc("Seed of the standard-normal inputs (drawn in float32, then cast to dtype).", 0, lo=0, hi=2.0**64)
    max_abs_err: float | None = doc("max |out - ref| over every element, the output upcast to float64.",
                                    None, **NONNEGATIVE)
    max_rel_err: float | None = doc(
        "Normwise relative error: max |out - ref| / max |ref| over the whole output. Normwise rather than "
        "elementwise because ref is close to 0 in some elements, where an elementwise ratio explodes.",
                                    None, **NONNEGATIVE)
    max_abs_ref: float | None = doc("max |ref|: the scale max_rel_err divides by.", None, **NONNEGATIVE)
    worst_query: int | None = doc("Query position (0-based) of the element with the largest |out - ref|.",
                                  None, **COUNT)
    worst_query_keys: int | None = doc("Keys that query attends to: worst_query + 1 when causal, else seq_len.",
                                       None, **COUNT)
    first_row_max_abs_err: float | None = doc(
        "max |out - ref| over query position 0 (every batch, head and channel). Under causal masking that query "
        "attends only to key 0, so the reference there is exactly v[..., 0, :].", None, **NONNEGATIVE)
    first_row_max_abs_v: float | None = doc(
        "max |v[..., 0, :]|: the size of the values query 0 copies when causal.", None, **NONNEGATIVE)
    tol_abs: float | None = doc("Absolute tolerance applied (from this dtype's Tolerance).", None, **NONNEGATIVE)
    tol_rel: float | None = doc("Relative tolerance applied (from this dtype's Tolerance).", None, **NONNEGATIVE)
    tol_usage: float | None = doc(
        "max over elements of |out - ref| / (tol_abs + tol_rel * |ref|); the case passes when this is <= 1.",
                                  None, **NONNEGATIVE)
    passed: bool | None = doc("Every element within tol_abs + tol_rel * |ref|; null when the case did not run.", None)
    config: str | None = doc(
        "Tile config the kernel ran with (block sizes, warps, stages; fixed or autotuned); null for PyTorch rows.", None,
        **NAME)
    kernel_path: str | None = doc("Our kernel's rows: the kernel path that ran ('portable', 'hopper', 'gluon', "
                                  "'turing'); null for PyTorch rows and in runs before it was recorded.", None,
                                  choices=KERNEL_PATHS)
    kernel_step: str | None = doc("Rows on the Gluon path: the step of the Gluon kernel that ran (e.g. 'g33', "
                                  "kernels/attention/gluon_versions.py); null on the other paths and in runs before "
                                  "it was recorded.", None, pattern=IDENT)
    backend_used: str | None = doc("'sdpa' rows: the backend PyTorch chose for these inputs ('flash', 'efficient', "
                                   "'cudnn', 'math', or 'unknown'); null for other rows and in runs before it was "
                                   "recorded.", None, pattern=IDENT)
    route_case: bool = doc("A case added to the grid because its shape reaches a row of the sm90 route table "
                           "(kernels/attention/route_table.py) that no other case reaches, such as a kernel chosen "
                           "only from 2^17 query rows; false for the regular grid and in runs before such cases "
                           "were added.", False)
    wall_s: float | None = doc(
        "Wall time of the case: inputs, kernel (with any compilation), reference and metrics.", None, **SECONDS)
    layout: str = doc("How q, k, v lie in memory: 'contiguous', or 'bnhd-view' (views of a (batch, seq_len, heads, "
                      "head_dim) tensor, whose head and sequence strides are swapped).", "contiguous",
                      choices=("contiguous", "bnhd-view"))
    built_for: str | None = doc("Set when the kernel's code was built for another GPU generation ('sm75', 'sm80') and "
                                "assembled from its PTX for the GPU that ran it; null for code built for this GPU.",
                                None, pattern=GPU_TARGET)
    ran_on: str | None = doc("The GPU generation that ran code built for another ('sm90'); null otherwise.", None,
                             pattern=GPU_TARGET)
    tensor_cores: bool | None = doc("Ported rows: whether the code built for the target issues tensor-core "
                                    "instructions (mma.sync in its PTX); null where not recorded.", None)
    target_registers: int | None = doc("Ported rows: registers per thread of the target's own ptxas build (the most "
                                       "over the call's kernels).", None, **COUNT)
    target_spill_bytes: int | None = doc("Ported rows: bytes per thread the target's own build spills to local "
                                         "memory.", None, **COUNT)
    target_shared_bytes: int | None = doc("Ported rows: shared memory per block of the target's own build, bytes.",
                                          None, **COUNT)
    fits_target: bool | None = doc("Ported rows: whether the target's own build fits that GPU (shared memory per "
                                   "block, registers); false says a real one of that GPU could not launch it, "
                                   "and `reason` says what overflows.", None)


@strict
@dataclass
class CorrectnessFile:
    """correctness.json: one row per case; the tolerances and the reference it was judged by."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("The run this file belongs to.", pattern=RUN_ID)
    rows: list[CorrectnessRow] = doc(
        "One row per case, in grid order; comparison rows (naive, sdpa) follow.", default_factory=list)
    tolerances: list[Tolerance] = doc("The per-dtype pass criterion every row was judged by.", default_factory=list)
    reference: str = doc("How the reference output is computed.", "", **TEXT)
    inputs: str = doc("How the inputs are drawn.", "", **TEXT)
    config_policy: str = doc("Which tile config each triton row ran with, and why.", "", **TEXT)
