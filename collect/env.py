"""Phase env: what the GPU is, what its datasheet promises, and what it actually sustains."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from .schema.datasheets import lookup
from . import timing
from .schema.manifest import ClockSample, DatasheetCeilings, DeviceFacts, Manifest, MeasuredCeiling, SweepPoint
from .timing import free_cuda_memory, is_oom, sync

# Resident blocks per SM by compute capability: not exposed by torch, so from the CUDA C++
# Programming Guide's table of technical specifications per compute capability.
MAX_BLOCKS_PER_SM = {(7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 7): 16, (8, 9): 24, (9, 0): 32, (10, 0): 32}


@dataclass
class EnvResult:
    """What the env phase adds to the manifest."""

    device: DeviceFacts
    software: dict[str, str | None]
    clocks: list[ClockSample]
    datasheet: DatasheetCeilings | None
    measured_ceilings: list[MeasuredCeiling]
    notes: list[str] = field(default_factory=list)


def _smi(query: str) -> list[str] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]


def _float(x: str | None) -> float | None:
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def describe_device() -> DeviceFacts:
    """Device facts from torch (and nvidia-smi for the driver); a clear error without a CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible to torch (torch.cuda.is_available() is False). "
                           "`make collect` measures on an NVIDIA GPU (T4 or newer); to read the committed report "
                           "on this machine run `make serve` instead.")
    p = torch.cuda.get_device_properties(0)
    cc = (p.major, p.minor)
    threads = getattr(p, "max_threads_per_multi_processor", None)
    smi = _smi("driver_version,clocks.max.sm,clocks.max.mem") or [None, None, None]
    bus = None
    try:
        import triton

        bus = triton.runtime.driver.active.utils.get_device_properties(0).get("mem_bus_width")
    except Exception:  # optional detail; the triton driver API moves between releases
        pass
    return DeviceFacts(
        name=p.name,
        compute_capability=f"{p.major}.{p.minor}",
        sm_count=p.multi_processor_count,
        regs_per_sm=getattr(p, "regs_per_multiprocessor", None),
        regs_per_block_max=65536 if cc >= (7, 0) else None,
        smem_per_sm_bytes=getattr(p, "shared_memory_per_multiprocessor", None),
        smem_per_block_bytes=getattr(p, "shared_memory_per_block", None),
        smem_per_block_optin_bytes=getattr(p, "shared_memory_per_block_optin", None),
        max_threads_per_sm=threads,
        max_warps_per_sm=threads // p.warp_size if threads and getattr(p, "warp_size", None) else None,
        max_blocks_per_sm=MAX_BLOCKS_PER_SM.get(cc),
        warp_size=getattr(p, "warp_size", 32),
        l2_bytes=getattr(p, "L2_cache_size", None),
        memory_bytes=p.total_memory,
        memory_bus_width_bits=bus,
        sm_clock_max_mhz=_float(smi[1]),
        mem_clock_max_mhz=_float(smi[2]),
        driver_version=smi[0],
        cuda_version=torch.version.cuda,
        supports_bf16=cc >= (8, 0),
    )


def _version_of(module: str) -> str | None:
    """A module's version without importing it where nothing has yet: a loaded module's `__version__`, else
    the installed distribution's (flash-attn-4 imports as flash_attn), else the module's after an import.
    Importing transformers only to read its version took 5 s of the env phase on the H200, and its objects
    made every later gc.collect of the collect slower."""
    loaded = sys.modules.get(module)
    if getattr(loaded, "__version__", None):
        return str(loaded.__version__)
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - no distribution by that name: ask the module itself
        pass
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001
        return None


def ncu_version() -> str | None:
    from .ncu_setup import locate_ncu

    exe = locate_ncu()[0]  # the ncu the profile phase will use ($NCU first)
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+([\w.\-() ]+)", out)
    return m.group(1).strip() if m else (out.strip().splitlines() or [None])[-1]


def software_versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "os": platform.platform(),
        "torch": _version_of("torch"),
        "triton": _version_of("triton"),
        "transformers": _version_of("transformers"),
        "numpy": _version_of("numpy"),
        "flash-attn-4": _version_of("flash-attn-4"),  # None where not installed: its rows say so
        "ncu": ncu_version(),
    }


def sample_clocks(moment: str) -> ClockSample:
    v = _smi("clocks.sm,clocks.mem,temperature.gpu,power.draw") or [None] * 4
    return ClockSample(moment=moment, sm_clock_mhz=_float(v[0]), mem_clock_mhz=_float(v[1]),
                       temperature_c=_float(v[2]), power_w=_float(v[3]), source="nvidia-smi" if v[0] else "unavailable")


def _time_rate(fn, work: float, max_clock_mhz: float, flush: bool = True) -> tuple[float, float, float, int, float | None]:
    """(median, p10, p90 rate, calls, SM clock MHz) of a warm `fn` doing `work` bytes or FLOPs per call."""
    fn()
    d = timing.device_time(fn, timing.wall_ms(fn), max_clock_mhz=max_clock_mhz, flush=flush)
    t = d.timing
    return work / (t.median_ms * 1e-3), work / (t.p90_ms * 1e-3), work / (t.p10_ms * 1e-3), t.n, d.sm_clock_mhz


def _failed(name: str, quantity: str, problem: str, exc: BaseException) -> MeasuredCeiling:
    status = "oom" if is_oom(exc) else "error"
    return MeasuredCeiling(name=name, quantity=quantity, status=status, reason=f"{type(exc).__name__}: {exc}"[:500],
                           problem=problem)


def _best_of(name: str, quantity: str, points: list[tuple[str, Callable[[], Callable[[], object]], float]],
             max_clock_mhz: float, flush: bool = True) -> MeasuredCeiling:
    """Time every (problem, make, work) point; the ceiling is the best median among them, with the sweep."""
    sweep, best, errors = [], None, []
    for problem, make, work in points:
        try:
            fn = make()
            med, lo, hi, n, clock = _time_rate(fn, work, max_clock_mhz, flush)
            del fn
        except Exception as exc:  # noqa: BLE001 - one shape failing leaves the others
            errors.append(_failed(name, quantity, problem, exc))
            continue
        finally:
            free_cuda_memory()
        sweep.append(SweepPoint(problem=problem, per_s_median=med, sm_clock_mhz=clock))
        if best is None or med > best[1]:
            best = (problem, med, lo, hi, n, clock)
    if best is None:
        return errors[0] if errors else MeasuredCeiling(name=name, quantity=quantity, status="error",
                                                        reason="nothing was measured")
    problem, med, lo, hi, n, clock = best
    if len(points) > 1:
        problem = f"best of {len(points)} shapes: {problem}"
    return MeasuredCeiling(name=name, quantity=quantity, status="ok", problem=problem, repeats=n, per_s_median=med,
                           per_s_p10=lo, per_s_p90=hi, sm_clock_mhz=clock, sweep=sweep if len(points) > 1 else [])


# Matmul ceilings: the best median over a sweep of square shapes (one shape is not a roof: cuBLAS
# picks different kernels per shape, and the largest is not always the fastest).
MATMUL_SIZES = {"full": (4096, 6144, 8192, 12288, 16384), "quick": (4096, 8192)}
FP32_SIZES = {"full": (4096, 8192), "quick": (4096,)}
WARMUP_S = 1.0  # of matmuls before anything is timed: an idle GPU starts at its lowest clock
CEILING_COUNT = 6


def warm_up(seconds: float = WARMUP_S) -> None:
    """Keep the GPU busy for `seconds` so the first measurement does not see an idle clock."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            a @ a
        sync()
    del a
    free_cuda_memory()


def _cache_ceilings(device: DeviceFacts, membench, clock: float):
    """The L2 and shared-memory read rates (kernels/membench.py), one MeasuredCeiling each."""
    import torch

    # L2: a buffer a quarter of the L2, read from a warm L2 (no flush before the timed calls).
    programs = 16 * device.sm_count
    l2 = device.l2_bytes or 4 * 2**20
    elems = max(membench.L2_CHUNK, (l2 // 4 // 4) // membench.L2_CHUNK * membench.L2_CHUNK)
    reps = 256

    def make_l2():
        buf = torch.randn(elems, device="cuda", dtype=torch.float32)
        out = torch.empty(programs, device="cuda", dtype=torch.float32)
        return lambda: membench.l2_read(buf, out, reps)

    l2_work = programs * reps * membench.L2_CHUNK * 4
    yield _best_of("l2_bandwidth", "bytes", [(f"{elems * 4 / 2**20:.1f} MiB resident in L2, read by "
                                              f"{programs} programs with ld.global.cg", make_l2, l2_work)],
                   clock, flush=False)

    # Shared memory: each program re-reads its own tiles; four programs per SM keep it busy.
    smem_programs = 4 * device.sm_count
    smem_reps = 2048

    def make_smem():
        out = torch.empty(smem_programs, device="cuda", dtype=torch.float32)
        return lambda: membench.smem_read(out, smem_reps)

    smem_work = smem_programs * smem_reps * membench.SMEM_ROWS * membench.SMEM_COLS * 4
    yield _best_of("smem_bandwidth", "bytes", [(f"{smem_programs} programs re-reading 16 KiB tiles with "
                                                "16-byte shared loads", make_smem, smem_work)], clock)


def measure_ceilings(device: DeviceFacts, quick: bool):
    """Yields one MeasuredCeiling at a time, so the progress bar moves as each finishes. Warm the
    GPU first (warm_up): a cold one starts at its idle clock."""
    import torch

    try:
        from kernels import membench
    except Exception as exc:  # noqa: BLE001 - its Gluon kernel leans on an API that moves between Triton releases
        membench, missing = None, f"kernels/membench.py does not import with this Triton ({type(exc).__name__}: {exc})"

    clock = device.sm_clock_max_mhz or timing.DEFAULT_CLOCK_MHZ
    profile = "quick" if quick else "full"

    # DRAM: a copy big enough to dwarf the L2 many times over; bytes counted = read + written.
    n_bytes = min(1 << 30, (device.memory_bytes or 1 << 34) // 8)

    def make_copy():
        src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    yield _best_of("copy_bandwidth", "bytes", [(f"{n_bytes / 2**30:.2f} GiB device-to-device copy", make_copy,
                                                2.0 * n_bytes)], clock)

    if membench is None:
        for name in ("l2_bandwidth", "smem_bandwidth"):
            yield MeasuredCeiling(name=name, quantity="bytes", status="unsupported", reason=missing[:500])
    else:
        yield from _cache_ceilings(device, membench, clock)

    for dtype_name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)):
        name = f"matmul_{dtype_name}"
        sizes = FP32_SIZES[profile] if dtype_name == "fp32" else MATMUL_SIZES[profile]
        if dtype_name == "bf16" and not device.supports_bf16:
            yield MeasuredCeiling(name=name, quantity="flops", status="unsupported",
                                  problem=f"M=N=K {dtype_name} random normal",
                                  reason=f"compute capability {device.compute_capability} has no bf16 tensor cores")
            continue

        def make_mm(size, dtype=dtype):
            a = torch.randn(size, size, device="cuda", dtype=dtype)
            b = torch.randn(size, size, device="cuda", dtype=dtype)
            c = torch.empty(size, size, device="cuda", dtype=dtype)
            return lambda: torch.matmul(a, b, out=c)

        fits = [n for n in sizes if 3 * n * n * dtype.itemsize * 2 < (device.memory_bytes or 1 << 34)]
        points = [(f"M=N=K={n} {dtype_name} random normal" + (" (TF32 off)" if dtype_name == "fp32" else ""),
                   lambda n=n: make_mm(n), 2.0 * n**3) for n in fits]
        prev_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 ceiling means real fp32, not TF32
        try:
            yield _best_of(name, "flops", points, clock)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32


def run(ctx) -> EnvResult:
    device = describe_device()
    clocks = [sample_clocks("env-start")]
    warm_up()
    clocks.append(sample_clocks("env-after-warm-up"))
    ceilings = list(ctx.progress(measure_ceilings(device, ctx.quick), total=CEILING_COUNT, desc="env"))
    clocks.append(sample_clocks("after-ceilings"))
    sheet = lookup(device.name)
    notes = [] if sheet else [f"{device.name} is not in the datasheet table (collect/schema/datasheets.py); "
                              "datasheet ceilings are empty and only measured ones are shown."]
    return EnvResult(device=device, software=software_versions(), clocks=clocks, datasheet=sheet,
                     measured_ceilings=ceilings, notes=notes)


def merge_into_manifest(m: Manifest, r: EnvResult) -> None:
    m.device, m.software, m.datasheet, m.measured_ceilings = r.device, r.software, r.datasheet, r.measured_ceilings
    m.clocks = [c for c in m.clocks if not c.moment.startswith("env-") and c.moment != "after-ceilings"] + r.clocks
    m.notes = [n for n in m.notes if "datasheet table" not in n] + r.notes
