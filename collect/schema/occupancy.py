"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and which resource runs out.

Pure standard library, beside the schema because both halves use it: collect/ to choose register caps and
record occupancy, render/ to explain it and draw occupancy curves. The rules follow NVIDIA's
occupancy calculator (cuda_occupancy.h in the CUDA toolkit) for compute capability 7.0 and newer:

- Registers are allocated per warp: regs_per_thread x 32, rounded up to 256 (the register
  allocation unit, i.e. per-thread counts round up to a multiple of 8). Each SM has 4
  sub-partitions, each with a quarter of the register file; a warp lives in one of them, so the
  warps that fit are floor((regs_per_sm / 4) / regs_per_warp) x 4. A block needing more than
  255 registers per thread or more than regs_per_block (65,536) cannot launch at all.
- Shared memory per block = static + dynamic + what the driver reserves per block (1 KiB from
  compute capability 8.0), rounded up to 128 bytes. Blocks = floor(carveout / that). The carveout
  is the part of the unified L1/shared memory the driver gives to shared memory; by default the
  largest (smem_per_sm), though for a launch the driver may pick a smaller one (Nsight Compute's
  launch__shared_mem_config_size says which).
- Warp slots: floor(max_warps_per_sm / warps_per_block). Block slots: max_blocks_per_sm.

Active blocks = the smallest of the four; occupancy = active warps / max_warps_per_sm.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

REG_ALLOC_UNIT = 256      # registers, allocated per warp
SUB_PARTITIONS = 4        # SM sub-partitions (warp schedulers), each with 1/4 of the registers
SMEM_ALLOC_UNIT = 128     # bytes
MAX_REGS_PER_THREAD = 255


@dataclass(frozen=True)
class SmLimits:
    """What one SM offers; from the manifest's DeviceFacts (see limits_from_device)."""

    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    smem_per_sm_bytes: int = 233472
    smem_per_block_optin_bytes: int = 232448
    smem_reserved_per_block_bytes: int = 1024
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    warp_size: int = 32


@dataclass(frozen=True)
class Occupancy:
    """Blocks per SM allowed by each resource, the result and the occupancy it gives."""

    blocks_by_registers: int
    blocks_by_smem: int
    blocks_by_warps: int
    blocks_by_blocks: int
    active_blocks: int
    active_warps: int
    occupancy_pct: float
    limiters: tuple[str, ...]  # every resource at the minimum: 'registers', 'shared memory', 'warps', 'blocks'


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def limits_from_device(device) -> SmLimits | None:
    """SmLimits from a DeviceFacts-like object; None when it lacks a limit the model needs."""
    need = ("regs_per_sm", "smem_per_sm_bytes", "max_warps_per_sm", "max_blocks_per_sm")
    if device is None or any(getattr(device, n, None) is None for n in need):
        return None
    try:
        major = int(str(device.compute_capability).split(".")[0])
    except (ValueError, AttributeError):
        major = 0
    smem_sm = int(device.smem_per_sm_bytes)
    reserved = 1024 if major >= 8 else 0
    optin = getattr(device, "smem_per_block_optin_bytes", None) or getattr(device, "smem_per_block_bytes", None)
    return SmLimits(
        regs_per_sm=int(device.regs_per_sm),
        regs_per_block=int(getattr(device, "regs_per_block_max", None) or device.regs_per_sm),
        smem_per_sm_bytes=smem_sm,
        smem_per_block_optin_bytes=int(optin or smem_sm - reserved),
        smem_reserved_per_block_bytes=reserved,
        max_warps_per_sm=int(device.max_warps_per_sm),
        max_blocks_per_sm=int(device.max_blocks_per_sm),
        warp_size=int(getattr(device, "warp_size", 32) or 32),
    )


def blocks_by_registers(lim: SmLimits, threads_per_block: int, regs_per_thread: int) -> int:
    if regs_per_thread <= 0:
        return lim.max_blocks_per_sm
    warps = -(-threads_per_block // lim.warp_size)
    per_warp = _round_up(regs_per_thread * lim.warp_size, REG_ALLOC_UNIT)
    # The hardware checks the per-block limit as if warps were spread over all 4 sub-partitions.
    assumed = per_warp * _round_up(warps, SUB_PARTITIONS)
    if regs_per_thread > MAX_REGS_PER_THREAD or per_warp * warps > lim.regs_per_block or assumed > lim.regs_per_block:
        return 0
    warps_per_partition = (lim.regs_per_sm // SUB_PARTITIONS) // per_warp
    return (warps_per_partition * SUB_PARTITIONS) // warps


def smem_allocated(lim: SmLimits, smem_per_block: int) -> int:
    """Bytes one block takes out of the SM's shared memory, the driver's reserve included."""
    return _round_up(smem_per_block + lim.smem_reserved_per_block_bytes, SMEM_ALLOC_UNIT)


def blocks_by_smem(lim: SmLimits, smem_per_block: int, carveout_bytes: int | None = None) -> int:
    if smem_per_block > lim.smem_per_block_optin_bytes:
        return 0
    per_block = smem_allocated(lim, smem_per_block)
    capacity = carveout_bytes if carveout_bytes else lim.smem_per_sm_bytes
    return capacity // per_block if per_block > 0 else lim.max_blocks_per_sm


def occupancy(lim: SmLimits, threads_per_block: int, regs_per_thread: int, smem_per_block: int,
              carveout_bytes: int | None = None) -> Occupancy:
    """Theoretical occupancy of one launch configuration on an SM with limits `lim`."""
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be positive, got {threads_per_block}")
    warps = -(-threads_per_block // lim.warp_size)
    by = {
        "registers": blocks_by_registers(lim, threads_per_block, regs_per_thread),
        "shared memory": blocks_by_smem(lim, smem_per_block, carveout_bytes),
        "warps": lim.max_warps_per_sm // warps,
        "blocks": lim.max_blocks_per_sm,
    }
    active = min(by.values())
    limiters = tuple(k for k, v in by.items() if v == active)
    active_warps = active * warps
    return Occupancy(by["registers"], by["shared memory"], by["warps"], by["blocks"], active, active_warps,
                     100.0 * active_warps / lim.max_warps_per_sm, limiters)


def occupancy_vs_registers(lim: SmLimits, threads_per_block: int, smem_per_block: int,
                           carveout_bytes: int | None = None) -> list[tuple[int, float]]:
    """(registers per thread, occupancy %) for 8..255 registers: the curve a register cap moves along."""
    regs = list(range(8, MAX_REGS_PER_THREAD + 1, 8)) + [MAX_REGS_PER_THREAD]
    return [(r, occupancy(lim, threads_per_block, r, smem_per_block, carveout_bytes).occupancy_pct) for r in regs]


def occupancy_vs_smem(lim: SmLimits, threads_per_block: int, regs_per_thread: int,
                      points: int = 96) -> list[tuple[int, float]]:
    """(shared memory per block in bytes, occupancy %) from 0 to the opt-in per-block maximum."""
    top = lim.smem_per_block_optin_bytes
    step = max(SMEM_ALLOC_UNIT, _round_up(math.ceil(top / points), SMEM_ALLOC_UNIT))
    sizes = list(range(0, top + 1, step))
    if sizes[-1] != top:
        sizes.append(top)
    return [(s, occupancy(lim, threads_per_block, regs_per_thread, s).occupancy_pct) for s in sizes]


def register_cap_for_blocks(lim: SmLimits, threads_per_block: int, blocks: int) -> int | None:
    """The most registers per thread (a multiple of 8, at most 255) that still lets `blocks` blocks
    fit by registers; None when even 8 registers are not enough."""
    best = None
    for r in range(8, MAX_REGS_PER_THREAD + 1, 8):
        if blocks_by_registers(lim, threads_per_block, r) >= blocks:
            best = r
    if best is not None and best == 248 and blocks_by_registers(lim, threads_per_block, MAX_REGS_PER_THREAD) >= blocks:
        best = MAX_REGS_PER_THREAD
    return best
