"""Phase iterations: every recorded version of our kernel, timed side by side with SDPA's cuDNN and
flash backends at the goal shapes (batch 4, 32 heads, head_dim 128, N = 4096 and 16384, fp16 and
bf16, causal and not), with the registers and shared memory of each compiled kernel and the
theoretical occupancy they allow on this GPU.

The versions and their stories (change, prediction and its date) come from
kernels/attention_hopper.py VERSIONS. Each runs with its fixed tile config: tuning at collect time
would cost minutes. The kernels are compiled first in parallel worker processes (filling Triton's
disk cache), so the timed process only loads them. A Hopper version on a GPU that is not compute
capability 9.x keeps its row as 'unsupported', with the reason.

The case loop (`measure_cases`) takes the measuring function as an argument, so the bookkeeping
is tested on the CPU with fakes.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from .precompile import compile_in_pool
from .budget import budget_seconds as shared_budget_seconds
from .context import RunContext
from .device_choices import iterations_unsupported
from .occupancy import limits_from_device, occupancy
from .schema import SCHEMA_VERSION
from .shapes import AttentionCase
from .schema.iterations import IterationRow, IterationsFile, KernelVersionInfo, PredictedRange
from .timing import free_cuda_memory, is_oom, summarize

GOAL_SHAPES = ((4, 32, 4096, 128), (4, 32, 16384, 128))  # the bench phase's large shape at the goal lengths
DTYPES = ("float16", "bfloat16")
SDPA_IMPLS = ("sdpa-cudnn", "sdpa-flash")
GOAL_RATIO = 0.9
PROFILES = {
    "full": dict(shapes=GOAL_SHAPES, dtypes=DTYPES),
    "quick": dict(shapes=GOAL_SHAPES[:1], dtypes=DTYPES[:1]),
}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2}

# Timed calls per case: about TARGET_MS of device time, within [MIN_RUNS, MAX_RUNS]. A 30 ms call
# (N=16384) gets 5 runs, a 2 ms one 20: the spread of such long kernels is well under 1%, and the
# whole phase must fit in ~45 s on an H200.
TARGET_MS = 40.0
MIN_RUNS = 5
MAX_RUNS = 50
BUDGET_S = {"quick": 25.0, "full": 45.0}
BUDGET_ENV = "ITERATIONS_BUDGET_S"
PRECOMPILE_WORKERS = 16
PRECOMPILE_STALL_S = 120.0
PROXY_SHAPE = (1, 16, 256, 128)
# Past this max |out - SDPA's out| on the same inputs, a version's output is wrong and its speed
# meaningless: two correct implementations differ by about 1e-3 here (fp16) and 4e-3 (bf16).
WRONG_OUTPUT = {"float16": 1e-2, "bfloat16": 5e-2}  # compiles to the same kernel variants as the goal shapes (every int a multiple of 16)

# Before each timed call the GPU spins this many cycles (~0.5 ms), so the host has queued the call
# before the start event: device time only. Without it, a Python wrapper that takes longer to
# launch than the L2 flush takes to run leaves the GPU idle inside the timed interval (on the
# H200 that is several percent of a 2 ms call), which would favour C++-launched SDPA.
SPIN_CYCLES = 1_000_000

TIMING_METHOD = (f"CUDA events around each call, the L2 flushed before each (Triton's benchmark cache buffer zeroed) "
                 f"and the GPU first kept busy for {SPIN_CYCLES:,} cycles, so launch overhead is not timed; "
                 f"{MIN_RUNS} to {MAX_RUNS} timed calls, about {TARGET_MS:g} ms of device time, after a warm-up call "
                 "(compilation or loading from Triton's cache) and one untimed call; median, p10 and p90")


@dataclass(frozen=True)
class Case(AttentionCase):
    impl: str
    kind: str  # "version" or "sdpa"
    dtype: str
    causal: bool
    batch: int
    heads: int
    seq_len: int
    head_dim: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq_len, self.head_dim)



def build_cases(profile: str, versions: Iterable[tuple[str, tuple[str, ...]]]) -> list[Case]:
    """Goal cases in the order a time-budget cut hurts least: N=4096 before 16384; within a case the
    SDPA backends first (they are the yardstick), then the versions in journey order. `versions`:
    (name, maskings it is timed on), e.g. ("v5-causal-split", ("causal",))."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    p = PROFILES[profile]
    versions = list(versions)
    out = []
    for b, h, n, d in p["shapes"]:
        for dt in p["dtypes"]:
            for causal in (False, True):
                masking = "causal" if causal else "non-causal"
                out += [Case(s, "sdpa", dt, causal, b, h, n, d) for s in SDPA_IMPLS]
                out += [Case(name, "version", dt, causal, b, h, n, d) for name, ms in versions if masking in ms]
    return out


# --- one measurement, and the rows built from it ----------------------------------------------


@dataclass
class Measurement:
    median_ms: float
    p10_ms: float
    p90_ms: float
    n: int
    config: str | None = None
    warp_specialized: bool | None = None
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    max_abs_diff: float | None = None
    warmup_s: float | None = None


def _base_row(case: Case, status: str, reason: str | None = None) -> IterationRow:
    return IterationRow(impl=case.impl, kind=case.kind, dtype=case.dtype, causal=case.causal, batch=case.batch,
                        heads=case.heads, seq_len=case.seq_len, head_dim=case.head_dim, status=status, reason=reason,
                        flops=case.flops)


def ok_row(case: Case, m: Measurement, limits=None) -> IterationRow:
    row = _base_row(case, "ok")
    row.latency_ms_median, row.latency_ms_p10, row.latency_ms_p90, row.n_timed_runs = m.median_ms, m.p10_ms, m.p90_ms, m.n
    row.tflops = case.flops / (m.median_ms * 1e-3) / 1e12 if m.median_ms > 0 else None
    row.config, row.warp_specialized = m.config, m.warp_specialized
    row.registers_per_thread, row.spilled_registers = m.n_regs, m.n_spills
    row.shared_mem_bytes, row.warps_per_block = m.shared_bytes, m.num_warps
    row.max_abs_diff_vs_sdpa, row.warmup_s = m.max_abs_diff, m.warmup_s
    if limits is not None and m.num_warps and m.n_regs is not None and m.shared_bytes is not None:
        occ = occupancy(limits, 32 * m.num_warps, m.n_regs, m.shared_bytes)
        row.blocks_per_sm, row.occupancy_pct = occ.active_blocks, occ.occupancy_pct
        row.occupancy_limiter = ", ".join(occ.limiters)
    return row


def _trim(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# PyTorch's words when a forced SDPA backend declines the inputs.
_REFUSALS = ("No available kernel", "No viable backend")


def failure_row(case: Case, exc: BaseException) -> IterationRow:
    """What an exception during a case means: out of memory, a refusal, or an error."""
    text = str(exc)
    out_of_resources = type(exc).__name__ == "OutOfResources"  # a tile that does not fit on chip
    if is_oom(exc) and not out_of_resources:
        return _base_row(case, "oom", _trim(f"{type(exc).__name__}: {text}", 300))
    if out_of_resources or (case.kind == "sdpa" and any(r in text for r in _REFUSALS)):
        return _base_row(case, "unsupported", _trim(text))
    return _base_row(case, "error", _trim(f"{type(exc).__name__}: {text}"))


# --- the case loop ---------------------------------------------------------------------------


def measure_cases(cases: list[Case], measure: Callable[[Case], Measurement], on_row: Callable[[IterationRow], None], *,
                  requires_hopper: Callable[[str], bool], hopper_ok: bool, hopper_reason: str = "",
                  supports_bf16: bool | None = None, limits=None, deadline: float | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  progress: Callable[[Iterable[Case], int], Iterable[Case]] = lambda it, total: it,
                  free: Callable[[], None] = free_cuda_memory) -> list[IterationRow]:
    """Measure every case in order, handing each row to on_row as soon as it exists. A case fails
    alone; cases left when the deadline (a clock() value) passes become rows saying so."""
    rows = []
    bar = progress(cases, len(cases))
    for case in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(case.label(), refresh=False)
        if deadline is not None and clock() > deadline:
            row = _base_row(case, "error", f"not run: the iterations phase's time budget was spent before this case "
                                           f"(set {BUDGET_ENV}=0 for no limit)")
        elif case.kind == "version" and requires_hopper(case.impl) and not hopper_ok:
            row = _base_row(case, "unsupported", f"Hopper version: {hopper_reason}")
        elif case.dtype == "bfloat16" and supports_bf16 is False:
            row = _base_row(case, "unsupported", "this GPU has no bfloat16 tensor-core support")
        else:
            try:
                row = ok_row(case, measure(case), limits)
            except Exception as exc:  # noqa: BLE001 - a case's failure is its row, not the phase's end
                row = failure_row(case, exc)
            if row.status != "ok":
                free()
        rows.append(row)
        on_row(row)
    return rows


# --- the versions' stories -------------------------------------------------------------------


def _cfg_text(cfg: dict | None) -> str | None:
    if not cfg:
        return None
    return f"{cfg.get('BLOCK_M')}x{cfg.get('BLOCK_N')}/w{cfg.get('num_warps')}/s{cfg.get('num_stages')}"


def version_info(v) -> KernelVersionInfo:
    """A KernelVersion (kernels/attention_hopper.py) as the data file records it."""
    feats = v.features_label()
    predicted = [PredictedRange(masking=m, low=float(lo), high=float(hi)) for m, (lo, hi) in v.predicted_speedup.items()]
    configs = {("causal" if c else "non-causal"): _cfg_text(cfg) for c, cfg in sorted(v.configs.items()) if cfg}
    return KernelVersionInfo(name=v.name, path=v.path, features=feats, change=v.change, prediction=v.prediction,
                             predicted_at=v.predicted_at, baseline=v.baseline, predicted=predicted, outcome=v.outcome,
                             role=v.role, configs=configs)


# --- measuring on the device -----------------------------------------------------------------


class WrongOutput(RuntimeError):
    """A version's output disagrees with SDPA's beyond any rounding: its timing is not reported."""


class CaptureCompiled:
    """Records the CompiledKernel each launch of the given @triton.jit functions returns (its
    registers and shared memory are what this phase reports). Restores them on exit. `first` is
    the main kernel of a version that launches two (the split causal schedule's second launch is
    a small diagonal-and-merge kernel)."""

    def __init__(self, fns):
        self.fns = list(fns)
        self.kernels = []

    @property
    def first(self):
        return self.kernels[0] if self.kernels else None

    def __enter__(self):
        for fn in self.fns:
            original = fn.run

            def run(*args, _original=original, **kwargs):
                kernel = _original(*args, **kwargs)
                self.kernels.append(kernel)
                return kernel

            fn.run = run  # an instance attribute shadows JITFunction.run for this object only
        return self

    def __exit__(self, *exc):
        for fn in self.fns:
            fn.__dict__.pop("run", None)
        return False


def kernel_facts(kernel) -> dict:
    """n_regs, n_spills, shared, num_warps of a CompiledKernel (its handles loaded if need be)."""
    if kernel is None:
        return {}
    if getattr(kernel, "n_regs", None) is None and hasattr(kernel, "_init_handles"):
        kernel._init_handles()
    md = kernel.metadata
    return dict(n_regs=getattr(kernel, "n_regs", None), n_spills=getattr(kernel, "n_spills", None),
                shared_bytes=getattr(md, "shared", None), num_warps=getattr(md, "num_warps", None))


def timed_runs(est_ms: float) -> int:
    return max(MIN_RUNS, min(MAX_RUNS, math.ceil(TARGET_MS / max(est_ms, 1e-3))))


def time_on_device(fn: Callable[[], object], est_ms: float):
    """timed_runs(est_ms) device-timed calls of an already warm fn, L2 flushed before each, the
    GPU kept busy while the host launches (see SPIN_CYCLES)."""
    import torch
    from triton import runtime

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    n = timed_runs(est_ms)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for start, end in zip(starts, ends):
        torch.cuda._sleep(SPIN_CYCLES)
        driver.clear_cache(cache)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)])


class DeviceMeasurer:
    """Measures one case on the GPU: shared inputs, warm-up (captures the compiled kernel), a sanity
    comparison with the case's first SDPA output, then the timed calls."""

    def __init__(self, device: str = "cuda"):
        self.device = device
        self._key = None
        self._qkv = None
        self._ref = {}

    def inputs(self, case: Case):
        import torch

        key = (case.dtype, case.shape)
        if key != self._key:
            self._key = self._qkv = None
            self._ref.clear()
            free_cuda_memory()
            g = torch.Generator(device=self.device).manual_seed(0)
            self._qkv = tuple(torch.randn(case.shape, generator=g, device=self.device, dtype=torch.float32)
                              .to(getattr(torch, case.dtype)) for _ in range(3))
            self._key = key
        return self._qkv

    def __call__(self, case: Case) -> Measurement:
        import torch

        from kernels import attention as A
        from kernels import attention_hopper as H

        q, k, v = self.inputs(case)
        if case.kind == "sdpa":
            impl = A.get_impl(case.impl)

            def call():
                return impl(q, k, v, case.causal)
        else:
            version = H.get_version(case.impl)

            def call():
                return version(q, k, v, case.causal)

        capture = CaptureCompiled([A._attn_fwd, H._hopper_fwd, H._hopper_fwd_ws, H._hopper_fwd_ws_persistent,
                                   H._diag_merge])
        t0 = time.perf_counter()
        with capture:
            out = call()
            torch.cuda.synchronize()
        warmup_s = time.perf_counter() - t0
        facts = kernel_facts(capture.first) if case.kind == "version" else {}
        config = ws = None
        if case.kind == "version":
            version = H.get_version(case.impl)
            if version.path == "hopper":
                last = H.last_launch() or {}
                config, ws = _cfg_text(last.get("config")), last.get("warp_specialized")
            else:
                config, ws = _cfg_text(A.kernel_config_of_last_call()), False
        ref_key = (case.causal,)
        diff = None
        if ref_key not in self._ref:
            if case.kind == "sdpa":
                self._ref[ref_key] = out
        else:
            diff = (out.float() - self._ref[ref_key].float()).abs().max().item()
            if not diff <= WRONG_OUTPUT[case.dtype]:  # NaN lands here too
                raise WrongOutput(f"output differs from SDPA's by up to {diff:.3g} (> {WRONG_OUTPUT[case.dtype]:g}): "
                                  "the kernel is wrong here, so it is not timed")
        del out
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        est_ms = (time.perf_counter() - t0) * 1e3
        t = time_on_device(call, est_ms)
        return Measurement(median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms, n=t.n, config=config,
                           warp_specialized=ws, max_abs_diff=diff, warmup_s=warmup_s, **facts)


# --- compiling in parallel -------------------------------------------------------------------


def _compile_one(task) -> str | None:
    """Worker: run one version once on the proxy shape, which leaves its kernel in Triton's disk cache."""
    name, dtype, causal, device_name = task
    import torch

    from kernels import attention_hopper as H

    try:
        device = torch.device(device_name)
        torch.cuda.set_device(device)
        g = torch.Generator(device=device).manual_seed(0)
        q, k, v = (torch.randn(PROXY_SHAPE, generator=g, device=device).to(getattr(torch, dtype)) for _ in range(3))
        H.get_version(name)(q, k, v, causal)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the timed case will meet (and record) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def compile_tasks(cases: list[Case], hopper_ok: bool, requires_hopper: Callable[[str], bool], device_name: str) -> list[tuple]:
    """One task per (version, dtype, causal) the cases will run: the goal lengths and the proxy
    compile to the same kernel, so one compilation serves both."""
    seen = {}
    for c in cases:
        if c.kind != "version" or (requires_hopper(c.impl) and not hopper_ok):
            continue
        seen.setdefault((c.impl, c.dtype, c.causal), (c.impl, c.dtype, c.causal, device_name))
    return list(seen.values())


def precompile(tasks: list[tuple], workers: int | None = None) -> int | None:
    """Compile the versions' kernels in parallel spawned processes (a second or two each, single-
    threaded, dozens in all). Best effort: on any failure the cases compile for themselves.
    Returns how many tasks raised, or None when it did not run to the end."""
    return compile_in_pool(_compile_one, tasks, "iterations", workers, PRECOMPILE_WORKERS, PRECOMPILE_STALL_S)


def budget_seconds(profile: str) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile)


def new_file(ctx: RunContext, versions, hopper_ok: bool, hopper_reason: str, final: str) -> IterationsFile:
    return IterationsFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, profile=ctx.profile,
                          timing_method=TIMING_METHOD, goal_ratio=GOAL_RATIO, final_version=final,
                          hopper_available=hopper_ok, hopper_reason=hopper_reason,
                          versions=[version_info(v) for v in versions])


def run(ctx: RunContext) -> IterationsFile:
    if ctx.profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {ctx.profile!r}")
    import torch

    from kernels import attention_hopper as H

    if not torch.cuda.is_available():
        raise RuntimeError("the iterations phase times kernels on a CUDA GPU and none is visible")
    why = iterations_unsupported(ctx.facts) if ctx.facts else None
    if why:
        ctx.unsupported(why)
    versions = [v for v in H.VERSIONS.values() if v.in_phase]
    cases = build_cases(ctx.profile, [(v.name, tuple(v.maskings)) for v in versions])
    hopper_ok, hopper_reason = H.hopper_available()
    dev = ctx.manifest.device
    # Every version's story is recorded; only those in the phase are timed.
    result = new_file(ctx, list(H.VERSIONS.values()), hopper_ok, hopper_reason, H.FINAL_VERSION)
    budget = budget_seconds(ctx.profile)
    t0 = time.monotonic()

    def requires_hopper(name: str) -> bool:
        return H.get_version(name).requires_hopper

    supports_bf16 = dev.supports_bf16 if dev else None
    live = [c for c in cases if not (supports_bf16 is False and c.dtype == "bfloat16")]
    precompile(compile_tasks(live, hopper_ok, requires_hopper, f"cuda:{torch.cuda.current_device()}"))

    def on_row(row: IterationRow) -> None:
        result.rows.append(row)
        ctx.checkpoint(result)

    measure_cases(cases, DeviceMeasurer(), on_row, requires_hopper=requires_hopper, hopper_ok=hopper_ok,
                  hopper_reason=hopper_reason, supports_bf16=supports_bf16, limits=limits_from_device(dev),
                  deadline=t0 + budget if budget else None,
                  progress=lambda it, total: ctx.progress(it, total=total, desc="iterations"))
    skipped = sum(1 for r in result.rows if r.reason and r.reason.startswith("not run"))
    if skipped:
        result.notes.append(f"{skipped} of {len(cases)} cases were not run: the phase's time budget of {budget:.0f} s "
                            f"was spent (set {BUDGET_ENV}=0 for no limit).")
    if not hopper_ok:
        result.notes.append(f"The Hopper versions did not run on this GPU: {hopper_reason}.")
    return result
