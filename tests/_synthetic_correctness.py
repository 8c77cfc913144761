"""A synthetic correctness.json with errors chosen by the test (tmp folders only, never data/runs)."""
from __future__ import annotations

import math
from pathlib import Path

from collect.correctness import CONFIG_POLICY_TEXT, INPUTS_TEXT, REFERENCE_TEXT, TOL_FACTOR, build_grid
from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.correctness import CorrectnessFile, CorrectnessRow, Tolerance
from collect.schema.manifest import PhaseRecord

from synthetic import make_run, manifest

BITS = {"float16": 10, "bfloat16": 7}


def tolerance(dtype: str) -> Tolerance:
    u = 2.0 ** -(BITS[dtype] + 1)
    return Tolerance(dtype=dtype, mantissa_bits=BITS[dtype], unit_roundoff=u, factor=TOL_FACTOR,
                     tol_abs=TOL_FACTOR * u, tol_rel=TOL_FACTOR * u)


def correctness_file(run_id: str, floor_in_u: float = 0.6, row0_in_u: float = 0.0, profile: str = "full",
                     fail: int = 0, unsupported_bf16: bool = False, causal_worst: int | None = None,
                     hopper: bool = False, portable_fail: int = 0, other_factor: float = 2.0, recorded: bool = False,
                     sdpa_backend: str | None = None) -> CorrectnessFile:
    """Causal cases sit at floor_in_u * u of max |ref| (3.0); non-causal errors shrink like their outputs.
    recorded: rows carry the path and Gluon step the sm90 rules give their shape (as runs from schema 7 do)."""
    rows = []
    for c in build_grid(profile, hopper):
        tol = tolerance(c.dtype)
        u = tol.unit_roundoff
        row = CorrectnessRow(impl=c.impl, dtype=c.dtype, causal=c.causal, batch=c.batch, heads=c.heads,
                             seq_len=c.seq_len, head_dim=c.head_dim, status="ok", seed=c.seed,
                             tol_abs=tol.tol_abs, tol_rel=tol.tol_rel, layout=c.layout, route_case=c.route_case)
        if recorded:
            row.kernel_path, row.kernel_step = _route(c)
        if c.impl == "sdpa":
            row.backend_used = sdpa_backend
        if unsupported_bf16 and c.dtype == "bfloat16":
            row.status, row.reason = "unsupported", "bfloat16 needs a GPU of compute capability >= 8.0; this one is 7.5"
            rows.append(row)
            continue
        v0 = 2.5
        ref = 3.0 if c.causal else 3.0 / math.sqrt(c.seq_len)
        if c.seq_len == 1:  # one key: the output is the V row itself
            err, worst = 0.0, 0
        elif c.causal:
            err = floor_in_u * u * ref
            worst = 1 + c.head_dim % 3 if causal_worst is None else min(causal_worst, c.seq_len - 1)
        else:
            err, worst = 0.5 * u * ref, c.seq_len // 2
        if c.impl not in ("triton", "triton-portable"):
            err *= other_factor
        usage = err / (tol.tol_abs + tol.tol_rel * ref)
        row.max_abs_err, row.max_rel_err, row.max_abs_ref = err, err / ref, ref
        row.worst_query = worst
        row.worst_query_keys = worst + 1 if c.causal else c.seq_len
        row.first_row_max_abs_err = row0_in_u * u * v0 if c.causal else 0.3 * u * ref
        row.first_row_max_abs_v = v0
        row.tol_usage, row.passed = usage, usage <= 1
        row.config = "BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=3 (fixed)" if c.impl == "triton" else None
        if hopper and c.impl == "triton":
            row.config = "hopper path, BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2 (fixed) [warp_spec+persistent]"
        elif c.impl == "triton-portable":
            row.config = "portable path, BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=3 (fixed)"
        row.wall_s = 0.01
        rows.append(row)
    for r in [r for r in rows if r.impl == "triton" and r.status == "ok" and r.seq_len == 1000][:fail]:
        r.tol_usage, r.passed = 1.7, False
    for r in [r for r in rows if r.impl == "triton-portable" and r.status == "ok" and r.seq_len == 1000][:portable_fail]:
        r.tol_usage, r.passed = 1.9, False
    return CorrectnessFile(schema_version=SCHEMA_VERSION, run_id=run_id, rows=rows,
                           tolerances=[tolerance(d) for d in BITS], reference=REFERENCE_TEXT, inputs=INPUTS_TEXT,
                           config_policy=CONFIG_POLICY_TEXT)


def _route(c) -> tuple[str | None, str | None]:
    """(path, Gluon step) our kernel's row records: the sm90 rules' choice for `triton`, the portable kernel for
    `triton-portable`; nothing for PyTorch's rows."""
    if c.impl == "triton-portable":
        return "portable", None
    if c.impl != "triton":
        return None, None
    from kernels.attention.dispatch import SHAPE_RULES, rule_route

    path, cfg = rule_route(SHAPE_RULES, c.head_dim, c.causal, c.seq_len, batch_heads=c.batch * c.heads)
    return path, (cfg or {}).get("version")


def make_correctness_run(data_dir: Path, run_id: str = "synthetic-20261129", **kw) -> Path:
    run_dir = make_run(data_dir, run_id)
    m = manifest(run_id)
    m.phases.append(PhaseRecord(name="correctness", status="complete", file="correctness.json", duration_s=20.0))
    write_json_atomic(run_dir / "manifest.json", m)
    write_json_atomic(run_dir / "correctness.json", correctness_file(run_id, **kw))
    return run_dir
