"""Phase correctness: the fused kernel against a float64 reference over seq_len x head_dim x batch x
causal x dtype, one row per case.

Lengths 1, 17, 1000 and 4097 are in the grid because they are not multiples of any tile size, so
the masked tail tiles run (a grid of powers of two never touches them). The reference is computed in
float64 from the very same rounded inputs, so the error measured is the kernel's arithmetic and the
final rounding of its output, not the rounding of the inputs.

Route cases: flash_attention picks its kernel by shape (kernels/attention/dispatch.py SHAPE_RULES), and
some kernels are chosen only at shapes the grid never reaches (g33's 192-row tiles from 2^18 query
rows, the Hopper kernel's split causal schedule from N=8192). For each route of the sm90 table that no
grid case takes, the full profile adds the cheapest case that takes it (route_cases), so every kernel
the dispatch can choose there is checked against the reference; each row records the path and step
that ran.

Kernel paths: `triton` rows run flash_attention as it ships (the path chosen at run time: the
Hopper and Gluon kernels for float16/bfloat16 on compute capability 9.x, the Turing tensor-core
kernel for float16 on 7.5, the portable one elsewhere). Where another path ships, the grid runs a
second time as `triton-portable` rows, held to the portable path, so both are checked on the same
cases.

Code built for older GPUs (the `PORTED` rows): on a GPU newer than a T4 or an A100, the grid runs
again with the code those GPUs would run, built for their target and assembled here from its PTX
(kernels/retarget.py): the portable kernel's sm75 build (no tensor cores), the Turing kernel's
sm75 build (mma.sync m16n8k8) and the portable kernel's sm80 build (mma.sync m16n8k16). Each row
says which target its code was built for and what it ran on, with that target's own build's
registers, spills and shared memory. It checks their arithmetic, not their speed there.

Layouts: besides contiguous inputs, each kernel runs a few cases on q, k, v that are views of a
(batch, seq_len, heads, head_dim) tensor, whose strides are not those of a contiguous tensor.

Tile configs: on a GPU each portable-path case runs with a fixed config taken in turn from the
autotuner's own candidate list for that GPU, head_dim and dtype, so every config the autotuner
could pick for the benchmarks is checked on ragged lengths. Autotuning instead would time every
candidate for each (length bucket, head_dim, causal, dtype) key, over a minute in all, and check
only the winners. Hopper-path cases run with the config and kernel variant the path picks for the
shape (one config per head_dim for 64 and 128), which is what the benchmarks run.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from typing import Callable

from kernels.common import PADDED_HEAD_DIMS

from .calls import flash_route
from .precompile import CompileWork, compile_ahead
from .context import RunContext
from .schema import SCHEMA_VERSION
from .shapes import AttentionCase
from .schema.common import case_key
from .schema.correctness import CorrectnessFile, CorrectnessRow, Tolerance
from .timing import free_cuda_memory, is_oom, is_unsupported

DTYPES = ("float16", "bfloat16")
# Our kernel as flash_attention ships it, and held to the portable path (Hopper GPUs only).
KERNEL_IMPLS = ("triton", "triton-portable")
# Our code as older GPUs would run it, built for their target and run here through its PTX
# (kernels/retarget.py): impl -> (target, which kernel).
PORTED = {
    "triton-portable-sm75": ("sm75", "portable"),
    "triton-turing-sm75": ("sm75", "turing"),
    "triton-portable-sm80": ("sm80", "portable"),
}
# The input layouts a kernel row can take; "bnhd-view": q, k, v are (B, N, H, d) tensors transposed
# to (B, H, N, d), so the head and sequence strides are swapped against a contiguous tensor.
LAYOUTS = ("contiguous", "bnhd-view")
# The view cases each kernel runs: (dtype, causal, seq_len, head_dim), ragged lengths both.
VIEW_CASES = (("float16", True, 1000, 64), ("float16", False, 4097, 128))

# The kernel rounds twice (P to the input dtype before the PV product, then the output), each
# worth at most u relative to the values involved: 4u leaves a factor of two above that bound.
TOL_FACTOR = 4.0

HEADS = 3  # not a power of two and != batch, so a (batch, head) index mix-up cannot cancel out


@dataclass(frozen=True)
class Case(AttentionCase):
    """An attention case with the layout of its inputs (contiguous unless said); route_case: added to
    reach a kernel route the grid never takes (see route_cases)."""

    layout: str = "contiguous"
    route_case: bool = False


@dataclass(frozen=True)
class Grid:
    """Lengths x head dims x batches, every dtype and masking, for the implementations named."""

    seq_lens: tuple[int, ...]
    head_dims: tuple[int, ...]
    batches: tuple[int, ...]
    impls: tuple[str, ...] = ()  # empty: our kernel's paths (see build_grid)

    def cases(self, impls: tuple[str, ...]) -> list[Case]:
        return [Case(impl, dt, causal, b, HEADS, n, d) for impl in (self.impls or impls)
                for dt in DTYPES for causal in (False, True) for d in self.head_dims for n in self.seq_lens
                for b in self.batches]


@dataclass(frozen=True)
class Plan:
    """A profile's grids: our kernel's, then PyTorch's implementations judged the same way, for scale;
    and the grids the ported builds run (ragged lengths and every head size, fewer batches)."""

    grids: tuple[Grid, ...]
    ported: tuple[Grid, ...] = ()
    routes: bool = False  # add route_cases for the sm90 routes the grids never take


PLANS = {
    "quick": Plan(grids=(Grid(seq_lens=(1, 17, 1000, 4097), head_dims=(64,), batches=(1,)),),
                  ported=(Grid(seq_lens=(1, 17, 1000, 4097), head_dims=(64,), batches=(1,)),)),
    "full": Plan(grids=(
        Grid(seq_lens=(1, 17, 128, 1000, 2048, 4097), head_dims=(64, 128), batches=(1, 2)),
        # The other head dims the kernel supports, at small N only (their cost is compile time, not data).
        Grid(seq_lens=(1, 17, 128), head_dims=(16, 32, 256), batches=(1,)),
        # Head sizes between the tiles, common in real models: run padded to the next tile. A ragged
        # and a tile-multiple length.
        Grid(seq_lens=(17, 128), head_dims=PADDED_HEAD_DIMS, batches=(1,)),
        Grid(seq_lens=(17, 1000, 4097), head_dims=(64,), batches=(1,), impls=("naive", "sdpa")),
    ), ported=(
        # The builds for older GPUs stop at d=128: their d=192 and d=256 variants were the slowest to compile
        # of the collect's shared pool (most of its 36 compile failures: tiles too large for a T4's shared
        # memory), and pushed a full collect with FlashAttention-4 past its 9 minutes (run h200-20261203e).
        # The main grid still checks d=192 and d=256 on the portable path here; a T4 checks its own in its run.
        Grid(seq_lens=(1, 17, 1000, 4097), head_dims=(64, 128), batches=(2,)),
        Grid(seq_lens=(17, 128), head_dims=(16, 32), batches=(1,)),
        Grid(seq_lens=(17,), head_dims=tuple(d for d in PADDED_HEAD_DIMS if d <= 128), batches=(1,)),
    ), routes=True),
}

# The reference materialises (heads, N, N) float64 scores: cap that per chunk of heads.
REFERENCE_CHUNK_BYTES = 512 * 2**20

# Kernel variants compile in parallel before the cases run (see precompile); 0 or 1 turns it off.
PRECOMPILE_WORKERS = 15
PRECOMPILE_STALL_S = 90.0  # longest wait for the next compiled variant (includes worker start-up)

REFERENCE_TEXT = ("float64 softmax(q k^T / sqrt(d) [causal mask]) v on the GPU "
                  "(kernels.attention.reference_attention), from the same rounded q, k, v the implementation received, upcast exactly to float64")
INPUTS_TEXT = "q, k, v standard normal, drawn in float32 from a per-shape seed, then rounded to the case's dtype"
CONFIG_POLICY_TEXT = ("portable-path rows on a GPU: a fixed tile config taken in turn from the autotuner's candidate "
                      "list for that GPU, head_dim and dtype (every candidate is exercised); Hopper-path rows: the "
                      "config and kernel variant the path picks for the shape; under TRITON_INTERPRET=1: the "
                      "kernel's interpreter config")

def build_grid(profile: str, hopper: bool = False, ported: tuple[str, ...] = ()) -> list[Case]:
    """The cases for a profile: `quick` is a subset of `full`; comparison rows come last.
    hopper: another path than the portable kernel ships here (the name is historical), so the grid
    runs again on the portable one. ported: the PORTED impls this GPU can run (newer than their target)."""
    if profile not in PLANS:
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    kernels = (KERNEL_IMPLS if hopper else KERNEL_IMPLS[:1])
    plan = PLANS[profile]
    ours = [c for g in plan.grids if not g.impls for c in g.cases(KERNEL_IMPLS[:1])]
    ours += route_cases(ours) if plan.routes else []
    theirs = [g for g in plan.grids if g.impls]
    views = [Case(impl, dt, causal, 2, HEADS, n, d, layout="bnhd-view") for impl in kernels + tuple(ported)
             for dt, causal, n, d in VIEW_CASES]
    return ([replace(c, impl=impl) for impl in kernels for c in ours]
            + [c for impl in ported for g in plan.ported for c in g.cases((impl,))] + views
            + [c for g in theirs for c in g.cases(())])


# --- the cases that reach every kernel route ---------------------------------------------------


def route_row(case: Case) -> int:
    """The row of the sm90 route table (kernels/attention/route_table.py) the case's shape takes: the index of
    the first SHAPE_RULES rule that matches it (first match wins, as flash_attention chooses), or
    len(SHAPE_RULES) for the Hopper kernel every other shape takes."""
    from kernels.attention.dispatch import SHAPE_RULES

    return next((i for i, rule in enumerate(SHAPE_RULES) if rule.matches(case.shape, case.causal)), len(SHAPE_RULES))


def hopper_split_from() -> int | None:
    """The length from which the Hopper kernel runs its split causal schedule (a kernel of its own, chosen by
    length inside the path); None where the Hopper path does not import with this Triton."""
    try:
        from kernels.attention.hopper import SPLIT_FROM_SEQ_LEN
    except Exception:  # noqa: BLE001 - any failure to import means the path cannot be chosen here
        return None
    return SPLIT_FROM_SEQ_LEN


def _ragged_length(at_least: int) -> int:
    """A length from `at_least` on that no tile divides, so the masked tail runs too (17 for short ones)."""
    return at_least + 1 if at_least > 1 else 17


def _case_for_rule(rule, dtype: str) -> Case:
    """The cheapest case of a rule's shape class: a head size it takes, the shortest ragged length it allows,
    and the fewest batches that give it its query rows (the reference's cost grows as B x N^2). An earlier
    rule may still take that shape (route_cases checks)."""
    d = rule.head_dim if rule.head_sizes is None or rule.head_sizes[0] <= rule.head_dim <= rule.head_sizes[1] \
        else rule.head_sizes[1]
    n = _ragged_length(rule.min_len)
    n = n if rule.max_len is None else min(n, rule.max_len)
    batch = max(1, -(-rule.min_rows // (HEADS * n)))
    return Case(KERNEL_IMPLS[0], dtype, rule.causal, batch, HEADS, n, d, route_case=True)


def route_cases(cases: list[Case]) -> list[Case]:
    """For each dtype, a case for every sm90 route no case of `cases` takes: each SHAPE_RULES rule
    (kernels/attention/dispatch.py) and, for the Hopper kernel every other shape takes, its split causal
    schedule. Derived from the rules, so a new rule gets its case without an edit here."""
    from kernels.attention.dispatch import SHAPE_RULES

    fallback = len(SHAPE_RULES)
    split = hopper_split_from()
    out = []
    for dt in DTYPES:
        mine = [c for c in cases if c.dtype == dt]
        taken = {route_row(c) for c in mine}
        for i, rule in enumerate(SHAPE_RULES):
            case = _case_for_rule(rule, dt) if i not in taken else None
            if case is not None and route_row(case) == i:  # else no cheap shape reaches it: the test names it
                out.append(case)
        hopper = [c for c in mine if route_row(c) == fallback]
        if split and hopper and not any(c.causal and c.seq_len >= split for c in hopper):
            d = min(c.head_dim for c in hopper)  # the cheapest head size the Hopper kernel takes
            out.append(Case(KERNEL_IMPLS[0], dt, True, 1, HEADS, _ragged_length(split), d, route_case=True))
    return out


def ported_impls(device) -> tuple[str, ...]:
    """The PORTED impls this device can run: those built for an older GPU generation than it."""
    import torch

    if device.type != "cuda":
        return ()
    from kernels.aot import TARGETS

    cap = tuple(torch.cuda.get_device_capability(device))
    return tuple(impl for impl, (target, _) in PORTED.items() if cap > TARGETS[target].capability)


# --- tolerances ------------------------------------------------------------------------------


def tolerance_for(dtype_name: str) -> Tolerance:
    """u from torch's own description of the format (eps = 2^-mantissa_bits, u = eps / 2)."""
    import torch

    eps = torch.finfo(getattr(torch, dtype_name)).eps
    u = eps / 2
    return Tolerance(dtype=dtype_name, mantissa_bits=int(round(-math.log2(eps))), unit_roundoff=u,
                     factor=TOL_FACTOR, tol_abs=TOL_FACTOR * u, tol_rel=TOL_FACTOR * u)


# --- error metrics ---------------------------------------------------------------------------


def error_metrics(out, ref, v, tol: Tolerance) -> dict:
    """Compare `out` with the float64 `ref` (both (B, H, N, d)); `v` gives the first row's scale.

    Returns the CorrectnessRow metric fields. A non-finite output fails and is named in `reason`.
    """
    import torch

    out64 = out.double()
    n, d = ref.shape[-2], ref.shape[-1]
    bad = int((~torch.isfinite(out64)).sum())
    abs_ref = ref.abs()
    max_abs_ref = float(abs_ref.max()) if ref.numel() else 0.0
    v_row0 = float(v[..., 0, :].double().abs().max())
    if bad:
        return dict(max_abs_err=None, max_rel_err=None, max_abs_ref=max_abs_ref, worst_query=None,
                    worst_query_keys=None, first_row_max_abs_err=None, first_row_max_abs_v=v_row0,
                    tol_usage=None, passed=False, reason=f"{bad} of {out.numel()} outputs are NaN or infinite")
    err = (out64 - ref).abs()
    flat = int(err.flatten().argmax())
    max_abs = float(err.flatten()[flat])
    worst_q = (flat // d) % n
    if max_abs_ref > 0:
        rel = max_abs / max_abs_ref
    else:  # all-zero reference: any error is infinitely large relative to it
        rel = 0.0 if max_abs == 0 else None
    usage = float((err / (tol.tol_abs + tol.tol_rel * abs_ref)).max())
    return dict(max_abs_err=max_abs, max_rel_err=rel, max_abs_ref=max_abs_ref, worst_query=worst_q,
                worst_query_keys=None, first_row_max_abs_err=float(err[..., 0, :].max()),
                first_row_max_abs_v=v_row0, tol_usage=usage, passed=usage <= 1.0, reason=None)


# Bytes the reference holds per score: the float64 scores, their softmax and the mask's share (generously).
REFERENCE_BYTES_PER_SCORE = 8 * 3


def reference_blocks(heads: int, n: int) -> tuple[int, int]:
    """(heads, query rows) the reference takes at a time so its scores stay under REFERENCE_CHUNK_BYTES: whole
    heads where one fits, else one head a block of query rows at a time (at N=8193 one head's scores alone
    would be 1.6 GB, past a T4's share at longer N)."""
    per_row = n * REFERENCE_BYTES_PER_SCORE
    rows = max(1, REFERENCE_CHUNK_BYTES // per_row)
    if rows < n:
        return 1, rows
    return max(1, min(heads, REFERENCE_CHUNK_BYTES // (per_row * n))), n


def reference(q, k, v, causal: bool):
    """The float64 reference over (reference_blocks) chunks of heads or of one head's query rows."""
    import torch

    from kernels.attention import reference_attention

    b, h, n, d = q.shape
    flat = [t.reshape(1, b * h, n, d) for t in (q, k, v)]
    heads, rows = reference_blocks(b * h, n)
    if rows == n:
        parts = [reference_attention(*(t[:, s:s + heads] for t in flat), causal=causal) for s in range(0, b * h, heads)]
        return torch.cat(parts, dim=1).reshape(b, h, n, d)
    parts = [_reference_rows(*(t[0, s] for t in flat), causal, r, min(r + rows, n))
             for s in range(b * h) for r in range(0, n, rows)]
    return torch.cat(parts, dim=0).reshape(b, h, n, d)


def _reference_rows(q, k, v, causal: bool, first: int, stop: int):
    """reference_attention's float64 softmax(q k^T / sqrt(d) [causal mask]) v for query rows [first, stop) of one
    (N, d) head: a causal query sees keys up to itself, so the keys past `stop` are left out, not masked."""
    import torch

    keys = stop if causal else k.shape[0]
    q, k, v = q[first:stop].double(), k[:keys].double(), v[:keys].double()
    scores = (q @ k.T) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        later = torch.arange(keys, device=q.device)[None, :] > torch.arange(first, stop, device=q.device)[:, None]
        scores = scores.masked_fill(later, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# --- tile configs ----------------------------------------------------------------------------


def spec_class(seq_len: int) -> str:
    """Triton compiles one variant per integer specialisation (==1, divisible by 16, other)."""
    return "one" if seq_len == 1 else "div16" if seq_len % 16 == 0 else "ragged"


def assign_configs(cases: list[Case], candidates: Callable[[int, str], list],
                   impls: tuple = ("triton",)) -> dict[Case, list]:
    """For each case of `impls` (those running the portable path), its candidate configs rotated
    so that the first is the one to use.

    One config per (head_dim, dtype, causal, spec class) keeps compilations to one per variant;
    the rotation moves on with each variant of a head_dim (12 in the full grid: 2 dtypes x causal
    x 3 spec classes), so every candidate for that head_dim runs when there are at most 12.
    Later entries are fallbacks for a config that does not fit this GPU's shared memory.
    """
    out: dict[Case, list] = {}
    turn: dict[tuple, int] = {}  # variant -> its index among the variants of its head_dim
    per_dim: dict[int, int] = {}
    for c in cases:
        if c.impl not in impls:
            continue
        variant = (c.head_dim, c.dtype, c.causal, spec_class(c.seq_len))
        if variant not in turn:
            turn[variant] = per_dim.get(c.head_dim, 0)
            per_dim[c.head_dim] = turn[variant] + 1
        cands = list(candidates(c.head_dim, c.dtype))
        if not cands:
            out[c] = [None]
            continue
        i = turn[variant] % len(cands)
        out[c] = cands[i:] + cands[:i]
    return out


def _gpu_candidates(device, facts=None) -> Callable[[int, str], list]:
    """The autotuner's candidate list for this GPU, as fixed-config dicts for flash_attention
    (from `facts` when given: the device the phases choose for, collect/device_choices.py)."""
    import torch

    from kernels import attention

    if facts is not None:
        from .device_choices import portable_tile_configs

        return lambda head_dim, dtype_name: [dict(BLOCK_M=m, BLOCK_N=n, num_warps=w, num_stages=s)
                                             for m, n, w, s in portable_tile_configs(facts, head_dim, dtype_name)]
    cap = torch.cuda.get_device_capability(device)
    # The same shared-memory limit the autotuner prunes with, so the candidate lists agree.
    smem_of = getattr(attention, "_smem_limit", None)
    smem = smem_of(device) if smem_of else None

    def cands(head_dim: int, dtype_name: str) -> list:
        return [dict(BLOCK_M=c.kwargs["BLOCK_M"], BLOCK_N=c.kwargs["BLOCK_N"], num_warps=c.num_warps,
                     num_stages=c.num_stages)
                for c in attention.candidate_configs(cap, head_dim, getattr(torch, dtype_name), smem)]

    return cands


def _is_out_of_resources(exc: BaseException) -> bool:
    """Triton's compile-time 'does not fit' (shared memory, registers), not a device OOM."""
    return type(exc).__name__ == "OutOfResources"


def _config_text(cfg: dict | None) -> str | None:
    if not cfg:
        return None
    how = "autotuned" if cfg.get("autotuned") else "fixed"
    path = f"{cfg['path']} path, " if cfg.get("path") else ""
    feats = f" [{cfg['features']}]" if cfg.get("features") else ""
    return (f"{path}BLOCK_M={cfg.get('BLOCK_M')} BLOCK_N={cfg.get('BLOCK_N')} num_warps={cfg.get('num_warps')} "
            f"num_stages={cfg.get('num_stages')} ({how}){feats}")


# --- running one case ------------------------------------------------------------------------


def _unsupported_reason(case: Case, device, facts=None) -> str | None:
    """Why this GPU cannot run the case at all (bf16 before compute capability 8.0), else None."""
    import torch

    if device.type != "cuda":
        return None
    if case.impl in PORTED:
        return _ported_unsupported(case)
    if facts is not None:
        from .device_choices import attention_dtypes

        return attention_dtypes(facts, (case.dtype,))[1].get(case.dtype)
    cap = tuple(torch.cuda.get_device_capability(device))
    if case.dtype == "bfloat16" and cap < (8, 0):
        return (f"bfloat16 needs a GPU of compute capability >= 8.0; this one is {cap[0]}.{cap[1]} "
                "(no bf16 tensor-core instructions)")
    return None


def _inputs(case: Case, device):
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(case.seed)
    dtype = getattr(torch, case.dtype)
    if getattr(case, "layout", "contiguous") == "bnhd-view":
        shape = (case.batch, case.seq_len, case.heads, case.head_dim)
        return [torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype).transpose(1, 2)
                for _ in range(3)]
    shape = (case.batch, case.heads, case.seq_len, case.head_dim)
    return [torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype) for _ in range(3)]


def _ported_unsupported(case: Case) -> str | None:
    """Why a PORTED impl cannot run the case (what its target GPU lacks), else None."""
    target, kernel = PORTED[case.impl]
    if target == "sm75" and case.dtype != "float16":
        return f"a T4 (sm75) has no {case.dtype} arithmetic in these kernels: its builds run float16"
    if kernel == "turing":
        from kernels.attention.turing_path import HEAD_DIMS as TURING_DIMS

        if case.head_dim not in TURING_DIMS:
            return f"the Turing kernel takes head_dim {', '.join(map(str, TURING_DIMS))}"
    return None


def ported_candidates(target: str) -> Callable[[int, str], list]:
    """The portable kernel's autotuner candidates on the target's representative GPU (T4, A100), as
    fixed-config dicts: the configs its autotuner could pick there."""
    import torch

    from kernels.aot import TARGETS
    from kernels.attention import candidate_configs

    t = TARGETS[target]
    return lambda head_dim, dtype_name: [
        dict(BLOCK_M=c.kwargs["BLOCK_M"], BLOCK_N=c.kwargs["BLOCK_N"], num_warps=c.num_warps, num_stages=c.num_stages)
        for c in candidate_configs(t.capability, head_dim, getattr(torch, dtype_name), t.smem_per_block)]


def _first_fitting(configs: list, attempt: Callable):
    """attempt(config) for each config in turn until one fits this GPU; only Triton's "does not fit"
    (shared memory, registers) moves on to the next, any other failure is the case's result."""
    last: BaseException | None = None
    for cfg in configs or [None]:
        try:
            return attempt(cfg)
        except Exception as exc:  # noqa: BLE001 - only "does not fit" moves on to the next config
            if not _is_out_of_resources(exc):
                raise
            last = exc
    raise last  # type: ignore[misc]


def _call_ported(case: Case, q, k, v, configs: list):
    """Run the case on the code its target GPU would run, assembled here from that code's PTX:
    (output, config text, the Port with what was built)."""
    from kernels.attention import portable_attention
    from kernels.retarget import built_for

    target, kernel = PORTED[case.impl]
    with built_for(target) as port:
        if kernel == "turing":
            from kernels.attention import turing as attention_turing

            out = attention_turing.turing_attention(q, k, v, case.causal)
            info = dict(attention_turing.tile_config(case.head_dim), path="turing")
        else:
            out, info = _first_fitting(configs, lambda cfg: portable_attention(q, k, v, case.causal, None, cfg))
            info = dict(info, path="portable")
        _sync(q.device)
    return out, info, port


def _call(case: Case, q, k, v, configs: list):
    """Run the implementation: (output, what our kernel ran (kernel_config_of_last_call), the Port of a PORTED
    case's build); None for what does not apply."""
    from kernels import attention

    if case.impl in PORTED:
        return _call_ported(case, q, k, v, configs)
    if case.impl not in KERNEL_IMPLS:
        return attention.get_impl(case.impl)(q, k, v, case.causal), None, None
    path = "portable" if case.impl == "triton-portable" else None

    def attempt(cfg):
        out = attention.flash_attention(q, k, v, causal=case.causal, config=cfg, path=path)
        _sync(q.device)
        return out, attention.kernel_config_of_last_call(), None

    return _first_fitting(configs, attempt)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)  # surfaces asynchronous launch errors inside this case


def run_case(case: Case, device, tol: Tolerance, configs: list | None = None, facts=None) -> CorrectnessRow:
    """One row; every failure becomes a status and a reason, never an exception."""
    t0 = time.perf_counter()
    row = CorrectnessRow(impl=case.impl, dtype=case.dtype, causal=case.causal, batch=case.batch, heads=case.heads,
                         seq_len=case.seq_len, head_dim=case.head_dim, status="ok", seed=case.seed,
                         tol_abs=tol.tol_abs, tol_rel=tol.tol_rel, layout=getattr(case, "layout", "contiguous"),
                         route_case=getattr(case, "route_case", False))
    if case.impl in PORTED:
        row.built_for = PORTED[case.impl][0]
    why = _unsupported_reason(case, device, facts)
    if why is not None:
        row.status, row.reason = "unsupported", why
        return row
    try:
        row.config, m = _measure(case, device, tol, configs or [None], row)
    except Exception as exc:  # noqa: BLE001 - a case's failure is a result, not a crash
        fits = not is_unsupported(exc)
        row.status = "unsupported" if not fits else ("oom" if is_oom(exc) else "error")
        row.reason = f"{type(exc).__name__}: {str(exc).strip()}"[:600]
    else:
        for key, value in m.items():
            if key == "reason" and value is None:
                continue  # keep what the port said (a build that does not fit its target GPU)
            setattr(row, key, value)
        if row.worst_query is not None:
            row.worst_query_keys = row.worst_query + 1 if case.causal else case.seq_len
    if row.status == "oom":
        free_cuda_memory()  # here, not in the except block, whose traceback still holds the tensors
    row.wall_s = round(time.perf_counter() - t0, 4)
    return row


def _measure(case: Case, device, tol: Tolerance, configs: list, row: CorrectnessRow | None = None
             ) -> tuple[str | None, dict]:
    """Inputs, implementation, reference, metrics; its tensors die with its frame. Fills `row` with what
    ran (see _describe_run), and for a PORTED case what its target's build is and where it ran."""
    q, k, v = _inputs(case, device)
    out, info, port = _call(case, q, k, v, configs)
    if row is not None:
        _describe_run(row, info, _sdpa_backend(case, q, k, v))
        if port is not None:
            _describe_port(row, port)
    _sync(device)
    ref = reference(q, k, v, case.causal)
    m = error_metrics(out, ref, v, tol)
    _sync(device)
    return _config_text(info), m


def _sdpa_backend(case: Case, q, k, v) -> str | None:
    """The backend PyTorch's SDPA picks for the case's inputs (an 'sdpa' row's error is that backend's)."""
    if case.impl != "sdpa":
        return None
    from .bench import chosen_backend

    return chosen_backend(q, k, v, case.causal)


def _describe_run(row: CorrectnessRow, info: dict | None, backend: str | None) -> None:
    """What ran, as bench rows record it: our kernel's path and, on the Gluon path, its step (the kernel the
    route table names for the shape); PyTorch's backend for an SDPA row."""
    if info:
        row.kernel_path = info.get("path")
        row.kernel_step = info.get("version") if info.get("path") == "gluon" else None
    row.backend_used = backend


def _describe_port(row: CorrectnessRow, port) -> None:
    """The ported build's facts on its row: where it ran, tensor cores, the target build's resources
    (the largest over the call's kernels) and whether they fit the target GPU."""
    row.ran_on = port.ran_on
    row.tensor_cores = port.tensor_cores
    builds = port.builds
    if not builds:
        return
    row.target_registers = max((b.registers for b in builds if b.registers is not None), default=None)
    row.target_spill_bytes = max((b.spill_bytes for b in builds if b.spill_bytes is not None), default=None)
    row.target_shared_bytes = max(b.shared_bytes for b in builds)
    misfits = [why for ok, why in (b.fits() for b in builds) if not ok]
    row.fits_target = not misfits
    if misfits:
        row.reason = "; ".join(misfits)[:600]


def _proxy_seq_len(seq_len: int) -> int:
    """A tiny length that compiles to the same kernel variant as `seq_len` (see spec_class)."""
    return {"one": 1, "div16": 16, "ragged": 17}[spec_class(seq_len)]


def _compile_variant(task) -> str | None:
    """Worker: run one kernel variant once on tiny inputs, which leaves it in Triton's disk cache.
    `route` is the (path, config) the real case's shape takes (kernels.attention.dispatch.route); the tiny
    stand-in would otherwise take whatever path the rules give its own length."""
    device_name, impl, dtype, causal, seq_len, head_dim, configs, route = task
    import torch

    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    case = Case(impl, dtype, causal, 1, HEADS, seq_len, head_dim)
    try:
        q, k, v = _inputs(case, device)
        if route is None:
            _call(case, q, k, v, configs)
        else:
            from kernels import attention

            attention.flash_attention(q, k, v, causal=causal, path=route[0], config=route[1])
            _sync(device)
    except Exception as exc:  # noqa: BLE001 - the real case will meet (and record) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _route(case: Case, device_name: str):
    """The (path, config) flash_attention's own choice takes at the case's shape on a GPU; None
    elsewhere, and for the rows that name their path or carry fixed configs."""
    if case.impl != "triton" or not device_name.startswith("cuda"):
        return None
    return flash_route(case, device_name)


def _task_of(c: Case, configs: dict[Case, list], device_name: str) -> tuple[tuple, tuple] | None:
    """(key, task) of the kernel variant a case needs compiled, or None for a case that compiles nothing of ours."""
    if c.impl not in KERNEL_IMPLS and c.impl not in PORTED:
        return None
    cfgs = configs.get(c) or [None]
    route = None if configs.get(c) else _route(c, device_name)
    # A route case exists because its length chooses the kernel (the Hopper kernel's split schedule is chosen
    # inside its path, from N), so its stand-in keeps the length, at batch 1.
    n = c.seq_len if route is not None and getattr(c, "route_case", False) else _proxy_seq_len(c.seq_len)
    key = (c.impl, c.dtype, c.causal, n, c.head_dim, repr(cfgs), repr(route))
    return key, (device_name, c.impl, c.dtype, c.causal, key[3], c.head_dim, cfgs, route)


def compile_tasks(cases: list[Case], configs: dict[Case, list], device_name: str) -> list[tuple]:
    """One task per kernel variant the triton cases need: a tiny stand-in case with its config list,
    and for flash_attention's own choice the path and config the real shape takes."""
    seen: dict[tuple, tuple] = {}
    for c in cases:
        found = _task_of(c, configs, device_name)
        if found:
            seen.setdefault(*found)
    return list(seen.values())


def run_order(cases: list[Case], configs: dict[Case, list], device, pool=None):
    """The cases in the order to run them. With the collect's shared compile pool: first the cases that
    compile nothing of ours (PyTorch's backends, FlashAttention-4), while the workers compile, then each
    kernel variant's cases as soon as the pool has compiled it, since this phase times nothing. On a cold
    H200 (run h200-20261203j) waiting for all 292 variants first took 63 s of the phase's 96. Without the
    pool: compile everything ahead (precompile), then the grid's order."""
    if pool is None or not pool.covers("correctness"):
        precompile(cases, configs, device, pool=pool)
        yield from cases
        return
    # Task i of the pool is the i-th distinct key, in the grid's order (compile_tasks).
    keys = [found[0] if found else None for found in (_task_of(c, configs, str(device)) for c in cases)]
    index = {key: i for i, key in enumerate(dict.fromkeys(k for k in keys if k is not None))}
    by_task: dict[int, list[Case]] = {}
    for c, key in zip(cases, keys):
        if key is None:
            yield c
        else:
            by_task.setdefault(index[key], []).append(c)
    for i in pool.as_done("correctness"):
        yield from by_task.pop(i, [])
    for rest in by_task.values():  # the pool broke down or stalled: these compile as they run
        yield from rest


def _work(cases: list[Case], configs: dict[Case, list], device) -> CompileWork:
    return CompileWork("correctness", _compile_variant, tuple(compile_tasks(cases, configs, str(device))),
                       PRECOMPILE_WORKERS)


def precompile(cases: list[Case], configs: dict[Case, list], device, workers: int | None = None,
               pool=None) -> int | None:
    """Compile every kernel variant the grid needs in parallel worker processes, or wait for the
    collect's shared pool where it holds them (collect/precompile.py).

    Each variant costs a second or two of single-threaded compilation and the full grid needs
    dozens; the workers fill Triton's on-disk cache, so the cases themselves only load. Best
    effort: on any failure or stall the cases compile for themselves, as they would without this.
    Returns how many variants raised, or None when it did not run to the end.
    """
    return compile_ahead(pool, _work(cases, configs, device), workers, PRECOMPILE_STALL_S)


def _plan(ctx: RunContext, device) -> tuple[list[Case], dict[Case, list]]:
    """The cases, and the fixed tile configs the portable rows take on a GPU."""
    from kernels.attention.dispatch import another_path_ships

    hopper = device.type == "cuda" and another_path_ships(device)
    ported = ported_impls(device)
    cases = build_grid(ctx.profile, hopper, ported)
    portable = ("triton-portable",) if hopper else ("triton",)
    configs = assign_configs(cases, _gpu_candidates(device, ctx.facts), portable) if device.type == "cuda" else {}
    for impl in ported:
        if PORTED[impl][1] == "portable":
            configs.update(assign_configs(cases, ported_candidates(PORTED[impl][0]), (impl,)))
    return cases, configs


def compile_work(ctx: RunContext) -> CompileWork | None:
    """The kernel variants this phase's cases need, for a compile pool (collect/precompile.py)."""
    device = _device()
    if device.type != "cuda":
        return None
    return _work(*_plan(ctx, device), device)


def _device():
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return torch.device("cpu")
    raise RuntimeError("the correctness phase needs a CUDA GPU (or TRITON_INTERPRET=1 for a CPU test run)")


def run(ctx: RunContext) -> CorrectnessFile:
    device = _device()
    cases, configs = _plan(ctx, device)
    tols = {dt: tolerance_for(dt) for dt in DTYPES}
    order = run_order(cases, configs, device, ctx.compile_pool) if device.type == "cuda" else cases
    result = CorrectnessFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, rows=[], tolerances=list(tols.values()),
                             reference=REFERENCE_TEXT, inputs=INPUTS_TEXT, config_policy=CONFIG_POLICY_TEXT)
    saved = ctx.saved_cases(CorrectnessRow)  # --resume: cases an unfinished earlier collect measured
    for case in ctx.progress(order, total=len(cases), desc="correctness"):
        result.rows.append(saved.get(case_key(case, CorrectnessRow))
                           or run_case(case, device, tols[case.dtype], configs.get(case), ctx.facts))
        ctx.checkpoint(result)
    # The file keeps the grid's order whatever order the cases ran in.
    place = {case_key(c, CorrectnessRow): n for n, c in enumerate(cases)}
    result.rows.sort(key=lambda r: place.get(case_key(r, CorrectnessRow), len(place)))
    return result
