"""Every choice a phase makes from the GPU it runs on, as a function of the device facts.

The phases read the GPU through `DeviceFacts` (the manifest's `device`), never through torch
directly, for the decisions below: so a T4's choices can be checked on a machine with no GPU
(tests/test_device_choices.py) and rehearsed on another GPU (`COLLECT_REHEARSE_DEVICE=t4`,
see `rehearsal_facts`). Each choice that the report has to explain comes with its reason.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from .schema.manifest import DeviceFacts

GIB = 1 << 30

# Set by `python -m collect --force-portable` (and by a rehearsal) and inherited by every child
# process: the kernels never take the Hopper path (kernels/ reads it).
PORTABLE_ONLY_ENV = "ATTN_PORTABLE_ONLY"
# Read by the portable kernel's autotuner: pick tile configs as on another GPU
# ('<major>.<minor>:<shared memory per block>'). Set only by a rehearsal.
TUNE_AS_ENV = "ATTN_TUNE_AS"
# Rehearsal only, not a user feature: every phase chooses as it would on the named GPU, from that
# GPU's facts (REHEARSAL_DEVICES), while measuring this one. The run is labelled as a rehearsal.
REHEARSE_ENV = "COLLECT_REHEARSE_DEVICE"
# Set by a rehearsal for the kernels (kernels/attention/dispatch.py reads it): the GPU generation whose
# paths flash_attention chooses from ("sm75").
REHEARSE_TARGET_ENV = "ATTN_REHEARSE_TARGET"


@dataclass(frozen=True)
class Choice:
    """A decision and the reason the report gives for it."""

    value: object
    reason: str


def capability(facts: DeviceFacts) -> tuple[int, int]:
    """'7.5' -> (7, 5)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", facts.compute_capability or "")
    if not m:
        raise ValueError(f"device compute_capability must look like '8.0', got {facts.compute_capability!r}")
    return int(m.group(1)), int(m.group(2))


def target_name(facts: DeviceFacts) -> str:
    """'7.5' -> 'sm75': the GPU generation as kernels/aot.py and kernels/attention/dispatch.py name it."""
    major, minor = capability(facts)
    return f"sm{major}{minor}"


def has_bf16(facts: DeviceFacts) -> bool:
    """bfloat16 tensor-core maths: the device says so, else compute capability 8.0 or newer."""
    return facts.supports_bf16 if facts.supports_bf16 is not None else capability(facts) >= (8, 0)


def cc_text(facts: DeviceFacts) -> str:
    return f"compute capability {facts.compute_capability}"


# --- the facts the choices are made from -------------------------------------------------------

# A Tesla T4 as torch and the driver describe it (memory: the datasheet's 16 GB as torch reports
# it on a T4, a little under 15 GiB once the driver's share is gone).
T4 = DeviceFacts(
    name="Tesla T4", compute_capability="7.5", sm_count=40, regs_per_sm=65536, regs_per_block_max=65536,
    smem_per_sm_bytes=65536, smem_per_block_bytes=49152, smem_per_block_optin_bytes=65536,
    max_threads_per_sm=1024, max_warps_per_sm=32, max_blocks_per_sm=16, warp_size=32, l2_bytes=4 * 1024 * 1024,
    memory_bytes=15_835_398_144, memory_bus_width_bits=256, sm_clock_max_mhz=1590.0, mem_clock_max_mhz=5001.0,
    supports_bf16=False,
)
REHEARSAL_DEVICES = {"t4": T4}


def rehearsal_name() -> str | None:
    """The GPU a rehearsal makes the phases choose as ($COLLECT_REHEARSE_DEVICE), or None."""
    name = os.environ.get(REHEARSE_ENV, "").strip().lower()
    if not name:
        return None
    if name not in REHEARSAL_DEVICES:
        raise ValueError(f"{REHEARSE_ENV}={name!r} names no known GPU; choose from {', '.join(REHEARSAL_DEVICES)}")
    return name


def choice_facts(measured: DeviceFacts | None) -> DeviceFacts | None:
    """The facts the phases choose from: this GPU's, or in a rehearsal the rehearsed GPU's."""
    name = rehearsal_name()
    if name is None:
        return measured
    facts = REHEARSAL_DEVICES[name]
    # Keep what the run really used, so the record shows both.
    if measured is not None:
        facts = replace(facts, driver_version=measured.driver_version, cuda_version=measured.cuda_version)
    return facts


def portable_only() -> bool:
    """Whether the kernels are held to the portable path in this process and its children."""
    return os.environ.get(PORTABLE_ONLY_ENV, "0") not in ("", "0")


# --- kernels and paths -------------------------------------------------------------------------


def decode_dtype(facts: DeviceFacts) -> Choice:
    """The decode phase's model and cache dtype: bfloat16 where the GPU has it, else float16."""
    if has_bf16(facts):
        return Choice("bfloat16", f"bfloat16: {cc_text(facts)} has bfloat16 tensor cores")
    return Choice("float16", f"float16: {cc_text(facts)} has no bfloat16 tensor cores (they arrived with 8.0), "
                             "so the model weights and the KV cache are held in float16")


def attention_dtypes(facts: DeviceFacts, wanted: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The dtypes of `wanted` the attention phases can run here, and why each other one cannot."""
    out, why = [], {}
    for dt in wanted:
        if dt == "bfloat16" and not has_bf16(facts):
            why[dt] = f"{cc_text(facts)} has no bfloat16 tensor cores (they arrived with 8.0)"
        else:
            out.append(dt)
    return tuple(out), why


def turing_path(facts: DeviceFacts, force_portable: bool | None = None) -> Choice:
    """Whether flash_attention may take the Turing tensor-core kernel for float16 (after its
    first-call self-check, kernels/attention/turing_path.py)."""
    forced = portable_only() if force_portable is None else force_portable
    if capability(facts) != (7, 5):
        return Choice(False, f"{cc_text(facts)}: the Turing kernel is the float16 path on 7.5 only")
    if forced:
        return Choice(False, f"held to the portable kernel ({PORTABLE_ONLY_ENV}=1, --force-portable)")
    return Choice(True, f"{cc_text(facts)}: Triton compiles tl.dot without tensor cores here, so float16 takes "
                        "the Turing kernel (mma.sync m16n8k8) once its first-call self-check passes")


def hopper_path(facts: DeviceFacts, force_portable: bool | None = None) -> Choice:
    """Whether flash_attention may take its Hopper kernel (TMA, wgmma, warp specialization)."""
    forced = portable_only() if force_portable is None else force_portable
    major, _ = capability(facts)
    if major != 9:
        return Choice(False, f"{cc_text(facts)}: the Hopper kernel needs 9.x (TMA tensor descriptors and wgmma)")
    if forced:
        return Choice(False, f"held to the portable kernel ({PORTABLE_ONLY_ENV}=1, --force-portable)")
    return Choice(True, f"{cc_text(facts)}: the Hopper kernel runs for float16 and bfloat16")


def iterations_unsupported(facts: DeviceFacts, force_portable: bool | None = None) -> str | None:
    """Why the iterations phase does not apply here (its versions after the first are Hopper
    kernels), or None where it runs."""
    path = hopper_path(facts, force_portable)
    if path.value:
        return None
    return ("the recorded kernel versions after v0 are Hopper kernels, and this run cannot take the Hopper path: "
            f"{path.reason}. The portable kernel's own figures are on the Benchmarks page.")


def smem_limit_bytes(facts: DeviceFacts) -> int | None:
    """Shared memory one block may use (the opt-in maximum where the driver reports it)."""
    return facts.smem_per_block_optin_bytes or facts.smem_per_block_bytes


def portable_tile_configs(facts: DeviceFacts, head_dim: int, dtype: str) -> list[tuple[int, int, int, int]]:
    """The portable kernel's autotuner candidates here: (BLOCK_M, BLOCK_N, num_warps, num_stages),
    chosen by compute capability and pruned by this device's shared memory per block."""
    import torch

    from kernels.attention import candidate_configs

    cfgs = candidate_configs(capability(facts), head_dim, getattr(torch, dtype), smem_limit_bytes(facts))
    return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in cfgs]


def tuning_target(facts: DeviceFacts) -> str:
    """The value of $ATTN_TUNE_AS that makes the portable autotuner pick as on `facts`'
    GPU: '<major>.<minor>:<shared memory per block>'."""
    major, minor = capability(facts)
    return f"{major}.{minor}:{smem_limit_bytes(facts) or 0}"


# --- memory ------------------------------------------------------------------------------------


def parse_bytes(text: str) -> int:
    """'15GiB', '15 GiB', '16GB', '1.5e10' -> bytes (GiB/MiB/KiB are powers of two, GB/MB/KB of ten)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([KMGT]i?B|B)?\s*", text or "")
    if not m:
        raise ValueError(f"a memory size looks like '15GiB' or '16GB', got {text!r}")
    unit = (m.group(2) or "B").upper().replace("IB", "iB")
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
             "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]
    value = int(float(m.group(1)) * scale)
    if value <= 0:
        raise ValueError(f"a memory size must be above zero, like '15GiB', got {text!r}")
    return value


def memory_limit(facts: DeviceFacts | None, max_memory: int | None = None) -> Choice:
    """The bytes the phases may allocate: the device's memory, or the --max-memory cap if smaller."""
    device = facts.memory_bytes if facts else None
    if max_memory is not None and (device is None or max_memory < device):
        return Choice(max_memory, f"--max-memory caps allocations at {max_memory / GIB:.1f} GiB")
    if device is None:
        return Choice(None, "the device did not report its memory size")
    return Choice(device, f"device memory, {device / GIB:.1f} GiB")


def predicts_oom(facts: DeviceFacts | None, need_bytes: int, max_memory: int | None = None) -> str | None:
    """Why a case needing at least `need_bytes` cannot fit (recorded as oom without trying), or None."""
    limit = memory_limit(facts, max_memory)
    if limit.value is None or need_bytes <= limit.value:
        return None
    return (f"not attempted: predicted need of at least {need_bytes} bytes > {limit.value} bytes allowed "
            f"({limit.reason})")


def memory_fraction(facts: DeviceFacts | None, max_memory: int | None) -> float | None:
    """What torch.cuda.set_per_process_memory_fraction needs for the cap, or None without one."""
    if max_memory is None or facts is None or not facts.memory_bytes:
        return None
    return min(1.0, max_memory / facts.memory_bytes)


# --- time ------------------------------------------------------------------------------------

# The phase budgets (BUDGET_S in each phase) were sized on an H200, whose measured device-to-device
# copy runs at about this rate; a slower GPU gets proportionally longer, up to MAX_BUDGET_SCALE, so
# a T4's quick profile runs every case (a budget is a cap against a runaway phase, not a target).
REFERENCE_COPY_BYTES_PER_S = 4.0e12
MAX_BUDGET_SCALE = 3.0


def budget_scale(copy_bytes_per_s: float | None) -> Choice:
    """How much longer than its default a phase may run here, from the measured copy bandwidth."""
    if not copy_bytes_per_s or copy_bytes_per_s <= 0:
        return Choice(1.0, "no measured copy bandwidth: the default budgets")
    ratio = REFERENCE_COPY_BYTES_PER_S / copy_bytes_per_s
    scale = min(MAX_BUDGET_SCALE, max(1.0, ratio))
    return Choice(scale, f"measured copy bandwidth {copy_bytes_per_s / 1e9:.0f} GB/s: budgets x{scale:.2g} "
                         f"(sized at {REFERENCE_COPY_BYTES_PER_S / 1e9:.0f} GB/s, at most x{MAX_BUDGET_SCALE:g})")


# --- the profiler ------------------------------------------------------------------------------


def ncu_metrics(facts: DeviceFacts) -> list[str]:
    """The Nsight Compute metrics the profile phase asks for on this GPU generation.

    Turing (7.5) counts tensor-pipe instructions (HMMA) but has none of the per-type tensor
    operation counters (`sm__ops_path_tensor_*`, from Ampere on), so the report falls back to
    instruction counts and the compiled code there; `*_gmma` and `*hgmma*` exist on Hopper only,
    and bfloat16 counters only where bfloat16 does. The phase still drops whatever this ncu does
    not list (`--query-metrics`) or refuses at run time."""
    from .ncu_metrics import CORE_METRICS, OPTIONAL_METRICS

    cc = capability(facts)
    out = list(CORE_METRICS)
    for m in OPTIONAL_METRICS:
        if "gmma" in m and cc[0] != 9:
            continue
        if m.startswith("sm__ops_path_tensor") and cc < (8, 0):
            continue
        if "bf16" in m and not has_bf16(facts):
            continue
        out.append(m)
    return out
