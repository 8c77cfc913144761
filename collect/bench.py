"""Phase bench: device, host and loop time, TFLOP/s and peak memory of every attention implementation
over seq_len.

Implementations: naive PyTorch; SDPA with each backend forced in turn (a backend that refuses the
inputs is a row with status unsupported and PyTorch's reasons); SDPA left to choose, recording the
backend it chose; our Triton kernel. Each case: one warm-up call (compilation and autotuning land
there), one call with the peak-memory statistics freshly reset, then the one clock of
collect/timing.py: host time over a pool of distinct inputs, device time (L2 flushed, no host
time inside), loop time over a pool larger than twice the L2. A forced backend's context manager
is entered once around the whole measurement, never inside a timed call. Out of memory is a
result: a row with the size asked for.

The case loop (`measure_cases`) takes the measuring function as an argument, so the bookkeeping
(statistics, OOM, refusals, checkpoints, the time budget) is tested on the CPU with fakes.
"""
from __future__ import annotations

import dataclasses
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from kernels.attention import HEAD_DIMS, IMPLEMENTATIONS, SDPA_BACKENDS

from . import fa4_precompile, timing
from .bench_power import DeviceEnergy, measure_power
from .budget import PHASE_BUDGET_ENVS, budget_seconds as shared_budget_seconds, no_limit_hint
from .context import RunContext
from .device_choices import has_bf16
from .schema import SCHEMA_VERSION
from .schema.bench import BenchFile, BenchRow
from .schema.common import case_key
from .shapes import AttentionCase
from .calls import (POOL_MEMORY_SHARE, CaptureCompiled, InputPool, call_for, device_memory_bytes, forced_backend,
                    our_kernels)
from .timing import CallTimes, free_cuda_memory, is_oom, is_unsupported

# Every implementation the phase measures, in the order it measures those that share inputs.
# FlashAttention-4 ("fa4") is timed wherever it is installed; elsewhere its rows say why not.
IMPLS = ("naive", *(f"sdpa-{b}" for b in SDPA_BACKENDS), "sdpa", "fa4", "triton", "triton-portable")
# Our kernel as shipped (path chosen at run time) and held to the portable path. The second is
# measured only where the first runs another path (Hopper), so it shows what that path buys.
KERNEL_IMPLS = ("triton", "triton-portable")
# Measured last: they put the others in context but are the slowest and least decisive.
CONTEXT_IMPLS = ("sdpa-efficient", "sdpa-math")
BENCH_DTYPES = ("float16", "bfloat16")

# The whole collect must fit in one device command (9 minutes on an H200). The budget is a safety
# net for a slower GPU, not a plan: past it the remaining cases become `skipped` rows that say so.
# BENCH_BUDGET_S overrides it (0: no limit).
BUDGET_S = {"quick": 150.0, "full": 210.0}
BUDGET_ENV = PHASE_BUDGET_ENVS["bench"]

TIMING_METHOD = (
    "The one clock (collect/timing.py). Device time: CUDA events around each call, the L2 flushed before it "
    "(Triton's benchmark buffer zeroed) and the GPU spinning while the host issues the call, so neither the flush "
    f"nor host time is inside; at least {timing.MIN_REPS} timed calls ({timing.LONG_MIN_REPS} for calls whose "
    f"warm call took over {timing.LONG_CALL_MS:g} ms of wall time), more for short calls, up to about "
    f"{timing.TARGET_MS:g} ms of device time. Host "
    "time: CPU time per call with the GPU kept busy, inputs rotating over distinct tensors. Loop time: calls back to "
    f"back with no sync, per call, median of {timing.LOOP_REPEATS} loops (of {timing.LONG_LOOP_CALLS} calls for "
    f"calls over {timing.LONG_CALL_MS:g} ms), inputs rotating over a pool larger than "
    "twice the L2. All after a warm-up call (compilation, autotuning) and the peak-memory call; a forced SDPA "
    "backend's context manager is entered outside the timed calls.")
BACKEND_CHOICE_METHOD = ("torch._fused_sdp_choice(q, k, v, is_causal=...) on the case's inputs, which runs PyTorch's "
                         "own backend selection without computing attention")
# PyTorch's words when every allowed SDPA backend declines the inputs (CUDA, then CPU builds).
_REFUSALS = ("No available kernel", "No viable backend")

Case = AttentionCase


@dataclass(frozen=True)
class Plan:
    """A profile's sweep."""

    shapes: tuple[tuple[int, int, int], ...]  # (batch, heads, head_dim), each at every seq_len
    seq_lens: tuple[int, ...]
    dtypes: tuple[str, ...]
    causal: tuple[bool, ...] = (False, True)
    impls: tuple[str, ...] = IMPLS
    # (batch, heads, seq_len, head_dim) measured at that one length: the shapes inference users run.
    points: tuple[tuple[int, int, int, int], ...] = ()
    # (impl, (batch, heads, head_dim), ...): an implementation timed on these sweeps only, not at the points. The whole
    # collect must fit in 9 minutes, and these rows answer their question at one shape (see PLANS).
    only_at: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...] = ()
    # ((batch, heads, head_dim), seq_lens): a sweep timed at these lengths instead of `seq_lens`.
    lens_for: tuple[tuple[tuple[int, int, int], tuple[int, ...]], ...] = ()

    def sweep_lens(self, shape: tuple[int, int, int]) -> tuple[int, ...]:
        return dict(self.lens_for).get(shape, self.seq_lens)

    def cases(self) -> list[Case]:
        """In the order a time-budget cut hurts least: the implementations the report argues about
        first, SDPA's slow math and memory-efficient backends after; within each, cheap shapes first
        and N ascending. Cases with the same inputs stay together, so the inputs are made once."""
        tiers = [[i for i in self.impls if i not in CONTEXT_IMPLS], [i for i in self.impls if i in CONTEXT_IMPLS]]
        shapes = [(b, h, n, d) for b, h, d in self.shapes for n in self.sweep_lens((b, h, d))] + list(self.points)
        return [Case(impl, dt, causal, b, h, n, d)
                for tier in tiers for b, h, n, d in shapes for dt in self.dtypes
                for causal in self.causal for impl in tier if self._runs(impl, b, h, n, d)]

    def _runs(self, impl: str, b: int, h: int, n: int, d: int) -> bool:
        only = dict(self.only_at)
        return impl not in only or ((b, h, d) in only[impl] and n in self.sweep_lens((b, h, d)))


STUDY_SHAPE = (2, 8, 64)  # the published study's batch, heads, head_dim
LARGE_SHAPE = (4, 32, 128)
# The shapes inference users run beyond the two sweeps: many heads at a moderate length, and one long
# sequence of one request (B1 H32 N32768 needs no score matrix in a fused kernel, 68 GB in naive).
INFERENCE_POINTS = ((8, 16, 2048, 64), (1, 16, 8192, 128), (1, 32, 32768, 128))
# Head sizes between the kernels' tiles, common in real models, at the large shape's N=4096: they run
# padded to the 128 tile.
HEAD_SIZE_POINTS = ((4, 32, 4096, 80), (4, 32, 4096, 96))
PLANS = {
    # SDPA's math backend stores the scores like naive and is never the fastest: the study shape shows it. So
    # for its memory-efficient backend: in runs h200-20261203a and b it was never within 10% of the fastest
    # other implementation at any of its 81 cases. The portable path beside the Hopper one (what TMA and warp
    # specialization buy) is shown there too; its autotuning at d=128 cost a fifth of the phase. Naive runs the
    # sweeps, where it runs out of memory, but not the single shapes (its 68 GB of scores at B=1 H=32 N=32768
    # say nothing the sweeps do not). The d=128 sweep leaves out N=8192 (24 s of the phase in run h200-20261203b):
    # its goal lengths are 4096 and 16384, and 8192 is timed at B=1 H=16.
    "full": Plan(shapes=(STUDY_SHAPE, LARGE_SHAPE), seq_lens=tuple(2**i for i in range(9, 15)), dtypes=BENCH_DTYPES,
                 points=INFERENCE_POINTS + HEAD_SIZE_POINTS,
                 only_at=(("sdpa-math", (STUDY_SHAPE,)), ("sdpa-efficient", (STUDY_SHAPE,)),
                          ("triton-portable", (STUDY_SHAPE,)), ("naive", (STUDY_SHAPE, LARGE_SHAPE))),
                 lens_for=((LARGE_SHAPE, (512, 1024, 2048, 4096, 16384)),)),
    "quick": Plan(shapes=(STUDY_SHAPE,), seq_lens=(512, 2048, 8192), dtypes=("float16",)),
}


def validate_cases(cases: Iterable[Case]) -> None:
    """Every name and shape checked on the host, before any GPU work; ValueError says what to fix."""
    for c in cases:
        if c.impl.startswith("sdpa-") and c.backend_requested not in SDPA_BACKENDS:
            raise ValueError(f"unknown SDPA backend {c.backend_requested!r} in implementation {c.impl!r}; "
                             f"valid backends: {', '.join(SDPA_BACKENDS)}")
        if c.impl not in IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {c.impl!r}; valid: {', '.join(IMPLEMENTATIONS)}")
        if c.dtype not in BENCH_DTYPES:
            raise ValueError(f"unknown dtype {c.dtype!r}; valid: {', '.join(BENCH_DTYPES)}")
        if min(c.batch, c.heads, c.seq_len, c.head_dim) < 1:
            raise ValueError(f"batch, heads, seq_len and head_dim must be >= 1: {c.label()}")
        if c.impl in KERNEL_IMPLS and c.head_dim not in HEAD_DIMS:
            raise ValueError(f"the Triton kernel supports head_dim a multiple of 8 from 8 to 256, not {c.head_dim}: "
                             f"{c.label()}")


# --- what one measurement returns, and the rows built from it ----------------------------------


@dataclass
class Measurement:
    times: CallTimes
    peak_mem_bytes: int | None
    backend_used: str | None = None
    kernel_config: dict[str, int] = field(default_factory=dict)
    warmup_s: float | None = None
    kernel_path: str | None = None
    path_rule: str | None = None
    tensor_cores: bool | None = None
    kernel_step: str | None = None


class BackendRefused(RuntimeError):
    """A forced SDPA backend declined these inputs; the message carries PyTorch's reasons."""


def _base_row(case: Case, status: str, reason: str | None = None) -> BenchRow:
    return BenchRow(impl=case.impl, backend_requested=case.backend_requested, backend_used=None, dtype=case.dtype,
                    causal=case.causal, batch=case.batch, heads=case.heads, seq_len=case.seq_len,
                    head_dim=case.head_dim, status=status, reason=reason, flops=case.flops,
                    input_bytes=case.input_bytes)


def ok_row(case: Case, m: Measurement) -> BenchRow:
    row = _base_row(case, "ok")
    timing.record(row, m.times, case.flops)
    row.peak_mem_bytes = m.peak_mem_bytes
    row.backend_used = m.backend_used if m.backend_used is not None else case.backend_requested
    row.kernel_config = dict(m.kernel_config)
    row.warmup_s = m.warmup_s
    row.kernel_path, row.path_rule, row.tensor_cores = m.kernel_path, m.path_rule, m.tensor_cores
    row.kernel_step = m.kernel_step
    return row


_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_ASKED = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)")


def requested_bytes(message: str) -> int | None:
    """The allocation PyTorch's caching allocator failed on, from its error message."""
    m = _ASKED.search(message)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _trim(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_row(case: Case, exc: BaseException) -> BenchRow:
    """What an exception during a case means: out of memory, a refusal, or an error."""
    text = str(exc)
    out_of_resources = is_unsupported(exc)  # a tile that does not fit on chip, a path this Triton cannot compile
    if is_oom(exc) and not out_of_resources:
        row = _base_row(case, "oom", _trim(f"{type(exc).__name__}: {text}", 300))
        row.requested_bytes = requested_bytes(text) or case.least_bytes()
        return row
    refused = isinstance(exc, BackendRefused) or (
        case.backend_requested is not None and isinstance(exc, RuntimeError) and any(r in text for r in _REFUSALS))
    if refused or out_of_resources:
        return _base_row(case, "unsupported", _trim(text))
    return _base_row(case, "error", _trim(f"{type(exc).__name__}: {text}"))


# --- the case loop ---------------------------------------------------------------------------


def measure_cases(cases: list[Case], measure: Callable[[Case], Measurement], on_row: Callable[[BenchRow], None], *,
                  memory_bytes: int | None = None, supports_bf16: bool | None = None,
                  deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
                  progress: Callable[[Iterable[Case], int], Iterable[Case]] = lambda it, total: it,
                  free: Callable[[], None] = free_cuda_memory,
                  saved: Mapping[tuple, BenchRow] | None = None) -> list[BenchRow]:
    """Measure every case in order, handing each row to on_row as soon as it exists.

    A case fails alone: an exception becomes its row and the loop goes on. memory_bytes lets a case
    that cannot fit even its score matrix be recorded as oom without trying; deadline (a clock()
    value) turns the cases left after it into rows that say they were not run. saved (--resume,
    RunContext.saved_cases) holds rows an unfinished earlier collect measured: they are kept, not re-measured.
    """
    validate_cases(cases)
    rows = []
    bar = progress(cases, len(cases))
    for case in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(case.label(), refresh=False)
        if saved and case_key(case, BenchRow) in saved:
            row = saved[case_key(case, BenchRow)]
        elif deadline is not None and clock() > deadline:
            row = _base_row(case, "skipped", f"not run: the bench phase's time budget was spent before this case "
                                             f"({no_limit_hint(BUDGET_ENV)})")
        elif case.dtype == "bfloat16" and supports_bf16 is False:
            row = _base_row(case, "unsupported", "this GPU has no bfloat16 tensor-core support")
        elif memory_bytes is not None and case.least_bytes() > memory_bytes:
            row = _base_row(case, "oom", f"not attempted: predicted need of at least {case.least_bytes()} bytes "
                                         f"(inputs, output, one score matrix) > the {memory_bytes} bytes allowed "
                                         "(device memory, or --max-memory)")
            row.requested_bytes = case.least_bytes()
        else:
            try:
                row = ok_row(case, measure(case))
            except Exception as exc:  # noqa: BLE001 - a case's failure is its row, not the phase's end
                row = failure_row(case, exc)
            if row.status != "ok":
                free()  # the failed call's tensors are unreachable once `exc` is gone
        rows.append(row)
        on_row(row)
    return rows


# --- measuring on the device -----------------------------------------------------------------

_BACKEND_NAMES = {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient", "CUDNN_ATTENTION": "cudnn",
                  "MATH": "math"}


def chosen_backend(q, k, v, causal: bool) -> str:
    """The SDPA backend PyTorch picks for these inputs when none is forced."""
    try:
        import torch
        from torch.nn.attention import SDPBackend

        name = SDPBackend(int(torch._fused_sdp_choice(q, k, v, is_causal=causal))).name
    except Exception:  # noqa: BLE001 - a private API; its absence must not cost the row
        return "unknown"
    return _BACKEND_NAMES.get(name, name.lower())


class DeviceMeasurer:
    """Measures one case: inputs, warm-up, peak memory, then host, device and loop time."""

    def __init__(self, device: str = "cuda", *, l2_bytes: int | None = None, pool_budget_bytes: int | None = None,
                 max_clock_mhz: float | None = None,
                 times: Callable[[list[Callable[[], object]], float], CallTimes] | None = None):
        self.device = device
        self.pool = InputPool(device, l2_bytes, pool_budget_bytes)
        self.times = times or (lambda calls, wall_ms: timing.measure_call(calls, wall_ms,
                                                                          max_clock_mhz=max_clock_mhz))

    def _sync(self) -> None:
        import torch

        if self.device != "cpu":
            torch.cuda.synchronize()

    def __call__(self, case: Case) -> Measurement:
        with forced_backend(case):
            return self._measure(case)

    def _measure(self, case: Case) -> Measurement:
        import torch

        from kernels import attention

        q, k, v = self.pool.first(case)
        call = call_for(case, q, k, v)
        # Our kernel's compiled code says whether the tensor cores ran it (a T4 runs tl.dot on FMA units).
        capture = CaptureCompiled(our_kernels() if case.impl in KERNEL_IMPLS and self.device != "cpu" else [])
        t0 = time.perf_counter()
        with capture, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                call()
                self._sync()
            except RuntimeError as exc:
                if case.backend_requested is None or is_oom(exc) or not any(r in str(exc) for r in _REFUSALS):
                    raise
                # PyTorch gives its reasons as warnings and raises a generic error: keep both.
                why = list(dict.fromkeys(str(w.message).strip() for w in caught))
                raise BackendRefused(" | ".join([str(exc).strip(), *why])) from None
        warmup_s = time.perf_counter() - t0

        config, path, rule, step = {}, None, None, None
        tensor = None
        if capture.kernels:
            from kernels.aot import uses_tensor_cores

            tensor = uses_tensor_cores(capture.first)
        if case.impl in KERNEL_IMPLS:
            last = attention.kernel_config_of_last_call() or {}
            config = {key: val for key, val in last.items() if isinstance(val, int) and not isinstance(val, bool)}
            path, rule = last.get("path"), last.get("path_rule")
            step = last.get("version") if path == "gluon" else None
        used = chosen_backend(q, k, v, case.causal) if case.impl == "sdpa" else None

        # Peak memory after warm-up, so autotuning scratch is never counted; baseline holds the inputs.
        peak = None
        cuda = self.device != "cpu"
        if cuda:
            self._sync()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = call()
        self._sync()
        wall_ms = (time.perf_counter() - t0) * 1e3
        if cuda:
            peak = torch.cuda.max_memory_allocated() - base
        del out
        calls = [call_for(case, *qkv) for qkv in self.pool.all(case)] if cuda else [call]
        return Measurement(times=self.times(calls, wall_ms), peak_mem_bytes=peak, backend_used=used,
                           kernel_config=config, warmup_s=warmup_s, kernel_path=path, path_rule=rule,
                           tensor_cores=tensor, kernel_step=step)


def plan_for_device(plan: Plan, hopper: bool) -> Plan:
    """Without the Hopper path, `triton-portable` would time the very kernel `triton` does: drop it."""
    if hopper:
        return plan
    return dataclasses.replace(plan, impls=tuple(i for i in plan.impls if i != "triton-portable"))


def device_cases(profile: str) -> list[Case]:
    """The profile's cases on this GPU: what run() times and compile_work() compiles ahead."""
    from kernels.attention import hopper_path_runs

    return plan_for_device(PLANS[profile], hopper_path_runs()).cases()


def compile_work(ctx: RunContext):
    """FlashAttention-4's kernels for this phase's cases, for the collect's compile pool (collect/fa4_precompile.py)."""
    import torch

    if ctx.profile not in PLANS or not torch.cuda.is_available():
        return None
    return fa4_precompile.compile_work(device_cases(ctx.profile), "bench")


def budget_seconds(profile: str, scale: float = 1.0) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile, scale)


def run(ctx: RunContext) -> BenchFile:
    if ctx.profile not in PLANS:
        raise ValueError(f"profile must be one of {', '.join(PLANS)}, got {ctx.profile!r}")
    budget = ctx.own_budget(budget_seconds)
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("the bench phase times kernels on a CUDA GPU and none is visible")
    cases = device_cases(ctx.profile)
    dev = ctx.manifest.device
    result = BenchFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, profile=ctx.profile,
                       timing_method=TIMING_METHOD, backend_choice_method=BACKEND_CHOICE_METHOD,
                       min_timed_runs=timing.LONG_MIN_REPS)

    def on_row(row: BenchRow) -> None:
        result.rows.append(row)
        ctx.checkpoint(result)

    memory = device_memory_bytes(dev)
    measurer = DeviceMeasurer(l2_bytes=dev.l2_bytes if dev else None,
                              pool_budget_bytes=int(POOL_MEMORY_SHARE * memory),
                              max_clock_mhz=dev.sm_clock_max_mhz if dev else None)
    t0 = time.monotonic()
    deadline = t0 + budget if budget else None
    facts = ctx.facts  # this GPU's, or a rehearsed one's (collect/device_choices.py)
    measure_cases(cases, measurer, on_row, memory_bytes=ctx.memory_limit_bytes or memory,
                  supports_bf16=has_bf16(facts) if facts else None,
                  deadline=deadline,
                  progress=lambda it, total: ctx.progress(it, total=total, desc="bench"),
                  saved=ctx.saved_cases(BenchRow))
    # The longest non-causal case again, back to back at the power limit, for the energy each call spends.
    result.notes.extend(measure_power(result.rows, DeviceEnergy(measurer.pool), lambda: ctx.checkpoint(result),
                                      deadline=deadline))
    skipped = sum(1 for r in result.rows if r.status == "skipped")
    if skipped:
        result.notes.append(f"{skipped} of {len(cases)} cases were skipped: the phase's time budget of "
                            f"{budget:.0f} s was spent ({no_limit_hint(BUDGET_ENV)}).")
    return result
