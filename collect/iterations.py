"""Phase iterations: every recorded version of our kernel, timed side by side with SDPA's cuDNN and
flash backends at the goal shapes (fp16 and bf16, causal and not; head_dim 128 at B=4 H=32 for
N = 4096 and 16384, head_dim 64 at B=2 H=8 for N = 2048 to 16384), with the registers and shared
memory of each compiled kernel and the theoretical occupancy they allow on this GPU.

The versions and their stories (change, prediction and its date) come from
kernels/attention/versions.py VERSIONS. Each runs with its fixed tile config: tuning at collect time would cost minutes. The
kernels are compiled first in parallel worker processes (filling Triton's disk cache), so the
timed process only loads them. A Hopper version on a GPU that is not compute capability 9.x keeps
its row as 'unsupported', with the reason. Timing is the one clock (collect/timing.py), measured
here for itself: the bench phase times the same shipped kernel on its own.

The case loop (`measure_cases`) takes the measuring function as an argument, so the bookkeeping
is tested on the CPU with fakes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from . import timing
from .budget import PHASE_BUDGET_ENVS, budget_seconds as shared_budget_seconds, no_limit_hint
from .calls import (POOL_MEMORY_SHARE, CaptureCompiled, InputPool, call_for, device_memory_bytes, flash_route,
                    forced_backend, kernel_facts, our_kernels)
from .context import RunContext
from .device_choices import iterations_unsupported
from .precompile import CompileWork, compile_ahead
from .schema.occupancy import limits_from_device, occupancy
from .schema import SCHEMA_VERSION
from .schema.iterations import IterationRow, IterationsFile, KernelVersionInfo, PredictedRange
from .shapes import AttentionCase
from .timing import CallTimes, free_cuda_memory, is_oom, is_unsupported

# (batch, heads, seq_len, head_dim). The d128 N=4096 shape is where every version of the journey is
# timed; at the others only the portable baseline and the shipped version run beside SDPA and FA4,
# which keeps the phase inside the collect's time limit. The journey at N=16384 took 47 s of the
# phase's 82 in run h200-20261203b, most of it superseded versions, for the ranking N=4096 shows.
JOURNEY_SHAPES = ((4, 32, 4096, 128),)
D64_SHAPES = tuple((2, 8, n, 64) for n in (2048, 4096, 8192, 16384))
ENDPOINT_SHAPES = ((4, 32, 16384, 128), *D64_SHAPES)
DTYPES = ("float16", "bfloat16")
SDPA_IMPLS = ("sdpa-cudnn", "sdpa-flash")
# Third-party kernels timed beside SDPA where installed (kernels/attention/flash_attn4.py); elsewhere `unsupported` rows.
BASELINE_IMPLS = ("fa4",)
# Our device time over the fastest SDPA backend's, as a speed ratio, that the kernel aims for.
GOAL_RATIO = 1.0


@dataclass(frozen=True)
class Plan:
    """A profile's goal cases: every version at the journey shapes, the endpoints at the others.
    The journey runs in the first dtype at every journey shape, and in the others only at
    `every_dtype_journey` shapes (the endpoints run in every dtype everywhere)."""

    journey_shapes: tuple[tuple[int, int, int, int], ...]
    endpoint_shapes: tuple[tuple[int, int, int, int], ...]
    dtypes: tuple[str, ...]
    every_dtype_journey: tuple[tuple[int, int, int, int], ...] = ()

    def journey_at(self, shape: tuple[int, int, int, int], dtype: str) -> bool:
        return shape in self.journey_shapes and (dtype == self.dtypes[0] or shape in self.every_dtype_journey)


PLANS = {
    # The journey in fp16 only, the endpoints in both dtypes: superseded versions' bf16 rows differed from their
    # fp16 rows by a few percent, and their compiles and timings cost about 25 s of a collect that has to fit
    # FlashAttention-4 into 9 minutes (run h200-20261203e).
    "full": Plan(journey_shapes=JOURNEY_SHAPES, endpoint_shapes=ENDPOINT_SHAPES, dtypes=DTYPES),
    "quick": Plan(journey_shapes=JOURNEY_SHAPES[:1], endpoint_shapes=D64_SHAPES[:1], dtypes=DTYPES[:1]),
}

BUDGET_S = {"quick": 40.0, "full": 70.0}
BUDGET_ENV = PHASE_BUDGET_ENVS["iterations"]
PRECOMPILE_WORKERS = 16
PRECOMPILE_STALL_S = 120.0
# A small shape per head_dim that compiles to the same kernel variants as the goal shapes (every
# int a multiple of 16).
PROXY_SHAPES = {128: (1, 16, 256, 128), 64: (1, 16, 256, 64)}
# Past this max |out - SDPA's out| on the same inputs, a version's output is wrong and its speed
# meaningless: two correct implementations differ by about 1e-3 here (fp16) and 4e-3 (bf16).
WRONG_OUTPUT = {"float16": 1e-2, "bfloat16": 5e-2}

TIMING_METHOD = (
    "The one clock (collect/timing.py), as in the bench phase but measured here for itself: device time between "
    "CUDA events, the L2 flushed before each call and the GPU spinning while the host issues it (neither inside); "
    f"at least {timing.MIN_REPS} timed calls ({timing.LONG_MIN_REPS} for calls whose warm call took over "
    f"{timing.LONG_CALL_MS:g} ms of wall time); "
    "host time over a pool of distinct inputs (no loop time: the bench phase records it); after a warm-up call "
    "(compilation or loading from Triton's cache) and an output check against SDPA")

Case = AttentionCase


def kind_of(case: Case) -> str:
    """'sdpa' for a forced SDPA backend, 'baseline' for another project's kernel, 'version' for one of ours."""
    return "sdpa" if case.is_sdpa else "baseline" if case.impl in BASELINE_IMPLS else "version"


def is_ours(case: Case) -> bool:
    return kind_of(case) == "version"


def build_cases(profile: str, versions: Iterable[tuple[str, tuple[str, ...]]], endpoints: Iterable[str] = ()) -> list[Case]:
    """Goal cases in the order a time-budget cut hurts least: shorter N first; within a case the
    SDPA backends first (they are the yardstick), then the versions in journey order. `versions`:
    (name, maskings it is timed on[, head sizes it changes]), e.g. ("v5-causal-split", ("causal",));
    `endpoints`: the version names also timed at the endpoint shapes."""
    if profile not in PLANS:
        raise ValueError(f"profile must be one of {', '.join(PLANS)}, got {profile!r}")
    p = PLANS[profile]
    versions = [(v[0], v[1], v[2] if len(v) > 2 else None) for v in versions]
    endpoints = set(endpoints)
    journey_dims = {s[3] for s in p.journey_shapes}
    # A version that changes only head sizes the journey shapes do not have is timed at the goal
    # shapes of its own head sizes instead (g8 changes d=64 alone).
    elsewhere = {name for name, _, dims in versions if dims is not None and not journey_dims & set(dims)}
    shapes = [(s, True) for s in p.journey_shapes] + [(s, False) for s in p.endpoint_shapes]
    out = []
    for (b, h, n, d), _ in sorted(shapes, key=lambda x: (x[0][0] * x[0][1] * x[0][2] ** 2 * x[0][3], not x[1])):
        for dt in p.dtypes:
            journey = p.journey_at((b, h, n, d), dt)
            for causal in (False, True):
                masking = "causal" if causal else "non-causal"
                out += [Case(s, dt, causal, b, h, n, d) for s in SDPA_IMPLS + BASELINE_IMPLS]
                out += [Case(name, dt, causal, b, h, n, d) for name, ms, dims in versions
                        if masking in ms and (dims is None or d in dims)
                        and (journey or name in endpoints or name in elsewhere)]
    return out


# --- one measurement, and the rows built from it ----------------------------------------------


@dataclass
class Measurement:
    times: CallTimes
    config: str | None = None
    warp_specialized: bool | None = None
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    max_abs_diff: float | None = None
    warmup_s: float | None = None
    tensor_cores: bool | None = None


def _base_row(case: Case, status: str, reason: str | None = None) -> IterationRow:
    return IterationRow(impl=case.impl, kind=kind_of(case), dtype=case.dtype, causal=case.causal, batch=case.batch,
                        heads=case.heads, seq_len=case.seq_len, head_dim=case.head_dim, status=status, reason=reason,
                        flops=case.flops)


def ok_row(case: Case, m: Measurement, limits=None) -> IterationRow:
    row = _base_row(case, "ok")
    timing.record(row, m.times, case.flops)
    row.config, row.warp_specialized = m.config, m.warp_specialized
    row.registers_per_thread, row.spilled_registers = m.n_regs, m.n_spills
    row.shared_mem_bytes, row.warps_per_block = m.shared_bytes, m.num_warps
    row.max_abs_diff_vs_sdpa, row.warmup_s = m.max_abs_diff, m.warmup_s
    row.tensor_cores = m.tensor_cores
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
    out_of_resources = is_unsupported(exc)  # a tile that does not fit on chip, a path this Triton cannot compile
    if is_oom(exc) and not out_of_resources:
        return _base_row(case, "oom", _trim(f"{type(exc).__name__}: {text}", 300))
    if out_of_resources or (not is_ours(case) and any(r in text for r in _REFUSALS)):
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
            row = _base_row(case, "skipped", f"not run: the iterations phase's time budget was spent before this "
                                             f"case ({no_limit_hint(BUDGET_ENV)})")
        elif is_ours(case) and requires_hopper(case.impl) and not hopper_ok:
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
    """A KernelVersion (kernels/attention/versions.py) as the data file records it."""
    feats = v.features_label()
    predicted = [PredictedRange(masking=m, low=float(lo), high=float(hi)) for m, (lo, hi) in v.predicted_speedup.items()]
    configs = {("causal" if c else "non-causal"): _cfg_text(cfg) for c, cfg in sorted(v.configs.items()) if cfg}
    return KernelVersionInfo(name=v.name, path=v.path or "per-shape", features=feats, change=v.change, prediction=v.prediction,
                             predicted_at=v.predicted_at, baseline=v.baseline, predicted=predicted, outcome=v.outcome,
                             role=v.role, configs=configs)


# --- measuring on the device -----------------------------------------------------------------


class WrongOutput(RuntimeError):
    """A version's output disagrees with SDPA's beyond any rounding: its timing is not reported."""


class DeviceMeasurer:
    """Measures one case on the GPU: shared inputs, warm-up (captures the compiled kernel), a sanity
    comparison with the case's first SDPA output, then the one clock."""

    def __init__(self, device: str = "cuda", *, l2_bytes: int | None = None, pool_budget_bytes: int | None = None,
                 max_clock_mhz: float | None = None):
        self.device = device
        self.pool = InputPool(device, l2_bytes, pool_budget_bytes)
        self.max_clock_mhz = max_clock_mhz
        self._key = None
        self._ref = {}

    def __call__(self, case: Case) -> Measurement:
        with forced_backend(case):
            return self._measure(case)

    def _measure(self, case: Case) -> Measurement:
        import torch

        from kernels import attention as A
        from kernels.attention import hopper as H
        from kernels.attention import versions as V
        from kernels.attention.launcher import replays_off

        q, k, v = self.pool.first(case)
        if (case.dtype, case.shape) != self._key:
            self._key, self._ref = (case.dtype, case.shape), {}
        version = V.get_version(case.impl) if is_ours(case) else None
        call = call_for(case, q, k, v, fn=version)

        capture = CaptureCompiled(our_kernels())
        t0 = time.perf_counter()
        # Without replays: a version that routes to another's kernel and config (v21 at d=64 runs v20's) has
        # the same launch key, and a replay would launch that kernel without Triton returning it to capture.
        with capture, replays_off():
            out = call()
            torch.cuda.synchronize()
        warmup_s = time.perf_counter() - t0
        facts = kernel_facts(capture.first) if version is not None else {}
        config = ws = None
        if version is not None:
            last = A.kernel_config_of_last_call() or {}
            if version.path == "hopper" or (version.path is None and last.get("path") == "hopper"):
                launch = H.last_launch() or {}
                config, ws = _cfg_text(launch.get("config")), launch.get("warp_specialized")
            else:
                config, ws = _cfg_text(last), _gluon_warp_specialized(last)
        diff = None
        if case.causal not in self._ref:
            if case.is_sdpa:
                self._ref[case.causal] = out
        else:
            diff = (out.float() - self._ref[case.causal].float()).abs().max().item()
            if not diff <= WRONG_OUTPUT[case.dtype]:  # NaN lands here too
                raise WrongOutput(f"output differs from SDPA's by up to {diff:.3g} (> {WRONG_OUTPUT[case.dtype]:g}): "
                                  "the kernel is wrong here, so it is not timed")
        del out
        wall_ms = timing.wall_ms(call)
        calls = [call_for(case, *qkv, fn=version) for qkv in self.pool.all(case)]
        # No loop time here: these goal shapes are device-bound, and the bench phase records loop time.
        times = timing.measure_call(calls, wall_ms, max_clock_mhz=self.max_clock_mhz, loop=False)
        return Measurement(times=times, config=config, warp_specialized=ws, max_abs_diff=diff, warmup_s=warmup_s,
                           **facts)


def _gluon_warp_specialized(last: dict) -> bool:
    """Whether flash_attention's last call ran a warp-specialized kernel: only the Gluon path's
    producer/consumer steps are (the portable kernel never is)."""
    if last.get("path") != "gluon":
        return False
    from kernels.attention import gluon_versions as GV

    return GV.get_version(last.get("version") or GV.DEFAULT_VERSION).kernel == "ws"


# --- compiling in parallel -------------------------------------------------------------------


def _compile_one(task) -> str | None:
    """Worker: run one version once on the proxy shape, which leaves its kernel in Triton's disk cache.
    A version that chooses its path per shape runs the path and config its real shape takes (`route`)."""
    name, dtype, causal, head_dim, device_name, route = task
    import torch

    from kernels.attention import versions as V
    from kernels import flash_attention

    try:
        device = torch.device(device_name)
        torch.cuda.set_device(device)
        g = torch.Generator(device=device).manual_seed(0)
        q, k, v = (torch.randn(PROXY_SHAPES[head_dim], generator=g, device=device).to(getattr(torch, dtype)) for _ in range(3))
        if route is None:
            V.get_version(name)(q, k, v, causal)
        else:
            flash_attention(q, k, v, causal, path=route[0], config=route[1])
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the timed case will meet (and record) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def version_route(case: Case, device_name: str):
    """(path, config) a per-shape version runs at the case's shape; None for a version of one path,
    which runs the same kernel at the proxy shape."""
    from kernels.attention import versions as V

    v = V.get_version(case.impl)
    if v.path is not None:
        return None
    if v.routes is not None:
        return v.routes(case.head_dim, case.causal, case.seq_len, batch_heads=case.batch * case.heads)
    return flash_route(case, device_name)


def compile_tasks(cases: list[Case], hopper_ok: bool, requires_hopper: Callable[[str], bool], device_name: str,
                  route: Callable[[Case, str], object] = version_route) -> list[tuple]:
    """One task per kernel the cases will run: (version, dtype, causal, head_dim), and for a version
    that picks its path per shape, the path and config each goal shape takes (the rules choose by
    length, so the proxy's own length could pick another kernel)."""
    seen = {}
    for c in cases:
        if not is_ours(c) or (requires_hopper(c.impl) and not hopper_ok):
            continue
        r = route(c, device_name)
        seen.setdefault((c.impl, c.dtype, c.causal, c.head_dim, repr(r)),
                        (c.impl, c.dtype, c.causal, c.head_dim, device_name, r))
    return list(seen.values())


def budget_seconds(profile: str, scale: float = 1.0) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile, scale)


def new_file(ctx: RunContext, versions, hopper_ok: bool, hopper_reason: str, final: str) -> IterationsFile:
    return IterationsFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, profile=ctx.profile,
                          timing_method=TIMING_METHOD, goal_ratio=GOAL_RATIO, final_version=final,
                          hopper_available=hopper_ok, hopper_reason=hopper_reason,
                          versions=[version_info(v) for v in versions])


def _cases(profile: str) -> list[Case]:
    from kernels.attention import versions as V

    versions = [v for v in V.VERSIONS.values() if v.in_phase]
    # The endpoints of the journey, timed at every goal shape: where it started (the portable
    # kernel), what ships, and the candidates written after it, which must beat it everywhere.
    names = list(V.VERSIONS)
    later = [v.name for v in versions if names.index(v.name) > names.index(V.FINAL_VERSION)]
    endpoints = [versions[0].name, V.FINAL_VERSION, *later]
    return build_cases(profile, [(v.name, tuple(v.maskings), tuple(v.head_dims)) for v in versions], endpoints)


def _requires_hopper(name: str) -> bool:
    from kernels.attention import versions as V

    return V.get_version(name).requires_hopper


def _work(ctx: RunContext, cases: list[Case], hopper_ok: bool) -> CompileWork:
    import torch

    dev = ctx.manifest.device
    live = [c for c in cases if not (dev and dev.supports_bf16 is False and c.dtype == "bfloat16")]
    tasks = compile_tasks(live, hopper_ok, _requires_hopper, f"cuda:{torch.cuda.current_device()}")
    return CompileWork("iterations", _compile_one, tuple(tasks), PRECOMPILE_WORKERS)


def compile_work(ctx: RunContext) -> CompileWork | None:
    """The kernels this phase's versions need, for a compile pool (collect/precompile.py); None where
    the phase does not run."""
    import torch

    from kernels.attention import hopper as H

    if ctx.profile not in PLANS or not torch.cuda.is_available() or (ctx.facts and iterations_unsupported(ctx.facts)):
        return None
    return _work(ctx, _cases(ctx.profile), H.hopper_available()[0])


def run(ctx: RunContext) -> IterationsFile:
    if ctx.profile not in PLANS:
        raise ValueError(f"profile must be one of {', '.join(PLANS)}, got {ctx.profile!r}")
    import torch

    from kernels.attention import hopper as H
    from kernels.attention import versions as V

    if not torch.cuda.is_available():
        raise RuntimeError("the iterations phase times kernels on a CUDA GPU and none is visible")
    why = iterations_unsupported(ctx.facts) if ctx.facts else None
    if why:
        ctx.unsupported(why)
    cases = _cases(ctx.profile)
    hopper_ok, hopper_reason = H.hopper_available()
    dev = ctx.manifest.device
    # Every version's story is recorded; only those in the phase are timed.
    result = new_file(ctx, list(V.VERSIONS.values()), hopper_ok, hopper_reason, V.FINAL_VERSION)
    budget = ctx.own_budget(budget_seconds)
    t0 = time.monotonic()

    supports_bf16 = dev.supports_bf16 if dev else None
    compile_ahead(ctx.compile_pool, _work(ctx, cases, hopper_ok), stall_s=PRECOMPILE_STALL_S)

    def on_row(row: IterationRow) -> None:
        result.rows.append(row)
        ctx.checkpoint(result)

    measurer = DeviceMeasurer(l2_bytes=dev.l2_bytes if dev else None,
                              pool_budget_bytes=int(POOL_MEMORY_SHARE * device_memory_bytes(dev)),
                              max_clock_mhz=dev.sm_clock_max_mhz if dev else None)
    measure_cases(cases, measurer, on_row, requires_hopper=_requires_hopper, hopper_ok=hopper_ok,
                  hopper_reason=hopper_reason, supports_bf16=supports_bf16, limits=limits_from_device(dev),
                  deadline=t0 + budget if budget else None,
                  progress=lambda it, total: ctx.progress(it, total=total, desc="iterations"))
    skipped = sum(1 for r in result.rows if r.status == "skipped")
    if skipped:
        result.notes.append(f"{skipped} of {len(cases)} cases were skipped: the phase's time budget of {budget:.0f} s "
                            f"was spent ({no_limit_hint(BUDGET_ENV)}).")
    if not hopper_ok:
        result.notes.append(f"The Hopper versions did not run on this GPU: {hopper_reason}.")
    return result
