"""Phase env: what the GPU is, what its datasheet promises, and what it actually sustains."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from .datasheets import lookup
from .schema.manifest import ClockSample, DatasheetCeilings, DeviceFacts, Manifest, MeasuredCeiling
from .timing import bench_gpu, free_cuda_memory, is_oom

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
    try:
        return __import__(module).__version__
    except Exception:
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
        "ncu": ncu_version(),
    }


def sample_clocks(moment: str) -> ClockSample:
    v = _smi("clocks.sm,clocks.mem,temperature.gpu,power.draw") or [None] * 4
    return ClockSample(moment=moment, sm_clock_mhz=_float(v[0]), mem_clock_mhz=_float(v[1]),
                       temperature_c=_float(v[2]), power_w=_float(v[3]), source="nvidia-smi" if v[0] else "unavailable")


def _measure(name: str, quantity: str, problem: str, make, work: float, min_reps: int) -> MeasuredCeiling:
    """Time `make()`'s returned callable; `work` is bytes or FLOPs per call."""
    try:
        fn = make()
        fn()  # first call: cuBLAS heuristics and allocation happen here, not in the timing
        t = bench_gpu(fn, min_reps=min_reps, warmup_ms=200.0)  # long warm-up: clocks ramp up from idle
        del fn
        return MeasuredCeiling(name=name, quantity=quantity, status="ok", problem=problem, repeats=t.n,
                               per_s_median=work / (t.median_ms * 1e-3), per_s_p10=work / (t.p90_ms * 1e-3),
                               per_s_p90=work / (t.p10_ms * 1e-3))
    except Exception as exc:  # noqa: BLE001 - recorded as a row, the phase goes on
        status = "oom" if is_oom(exc) else "error"
        return MeasuredCeiling(name=name, quantity=quantity, status=status, reason=f"{type(exc).__name__}: {exc}"[:500],
                               problem=problem)
    finally:
        free_cuda_memory()


CEILING_COUNT = 4


def measure_ceilings(device: DeviceFacts, quick: bool):
    """Yields one MeasuredCeiling at a time, so the progress bar moves as each finishes."""
    import torch

    # Copy: big enough to dwarf the L2 many times over; bytes counted = read + written.
    n_bytes = min(1 << 30, (device.memory_bytes or 1 << 34) // 8)

    def make_copy():
        src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    yield (_measure("copy_bandwidth", "bytes", f"{n_bytes / 2**30:.2f} GiB device-to-device copy", make_copy,
                         2.0 * n_bytes, min_reps=50))

    size = 4096 if quick else 8192
    for dtype_name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)):
        name = f"matmul_{dtype_name}"
        problem = f"M=N=K={size} {dtype_name} random normal" + (" (TF32 off)" if dtype_name == "fp32" else "")
        if dtype_name == "bf16" and not device.supports_bf16:
            yield MeasuredCeiling(name=name, quantity="flops", status="unsupported", problem=problem,
                                  reason=f"compute capability {device.compute_capability} has no bf16 tensor cores")
            continue

        def make_mm(dtype=dtype):
            a = torch.randn(size, size, device="cuda", dtype=dtype)
            b = torch.randn(size, size, device="cuda", dtype=dtype)
            c = torch.empty(size, size, device="cuda", dtype=dtype)
            return lambda: torch.matmul(a, b, out=c)

        prev_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 ceiling means real fp32, not TF32
        try:
            yield _measure(name, "flops", problem, make_mm, 2.0 * size**3, min_reps=20 if dtype_name == "fp32" else 50)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32


def run(ctx) -> EnvResult:
    device = describe_device()
    clocks = [sample_clocks("env-start")]
    ceilings = list(ctx.progress(measure_ceilings(device, ctx.quick), total=CEILING_COUNT, desc="env"))
    clocks.append(sample_clocks("after-ceilings"))
    sheet = lookup(device.name)
    notes = [] if sheet else [f"{device.name} is not in the datasheet table (collect/datasheets.py); "
                              "datasheet ceilings are empty and only measured ones are shown."]
    return EnvResult(device=device, software=software_versions(), clocks=clocks, datasheet=sheet,
                     measured_ceilings=ceilings, notes=notes)


def merge_into_manifest(m: Manifest, r: EnvResult) -> None:
    m.device, m.software, m.datasheet, m.measured_ceilings = r.device, r.software, r.datasheet, r.measured_ceilings
    m.clocks = [c for c in m.clocks if not c.moment.startswith("env-") and c.moment != "after-ceilings"] + r.clocks
    m.notes = [n for n in m.notes if "datasheet table" not in n] + r.notes
