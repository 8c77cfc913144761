"""profile.json: Nsight Compute counters per kernel launch, summed per implementation, plus the
register-cap experiment on the Triton kernel."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, CLOCK_MHZ, COUNT, DTYPES, FLOP, HOUR_MS, IDENT, KERNEL_NAME, LONG_TEXT, MS, NAME, PCT, RATIO,
                     ROW_STATUS, RUN_ID, SECONDS, SIZE, TEXT, doc, strict)


@strict
@dataclass
class KernelRow:
    """One kernel launch as Nsight Compute measured it (one replay-averaged profile)."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id", "launch")

    case_id: str = doc("The profiled case this launch belongs to, e.g. 'main-d64-naive'.", pattern=IDENT)
    impl: str = doc("Implementation: naive, triton, sdpa, sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math, fa4 (FlashAttention-4).",
                    pattern=IDENT)
    launch: int = doc("Position of this launch within its case (0 = first kernel the call launched).", **COUNT)
    kernel_name: str = doc("Demangled kernel name as Nsight Compute printed it; untrusted text (escape it).", **KERNEL_NAME)
    ncu_id: int | None = doc("Nsight Compute's running kernel ID in the report; null for published figures.",
                             None, **COUNT)
    block_size: int | None = doc("Threads per block.", None, **COUNT)
    grid_size: int | None = doc("Blocks in the grid.", None, **COUNT)
    duration_ms: float | None = doc("gpu__time_duration.sum, with clocks left as they were (--clock-control none).",
                                    None, **MS)
    sm_clock_mhz: float | None = doc("Average SM clock while the kernel ran (sm__cycles_elapsed.avg.per_second).",
                                     None, **CLOCK_MHZ)
    dram_read_bytes: float | None = doc("dram__bytes_read.sum.", None, **BYTES)
    dram_write_bytes: float | None = doc("dram__bytes_write.sum.", None, **BYTES)
    l2_bytes: float | None = doc("lts__t_bytes.sum: all traffic through the L2 slices.", None, **BYTES)
    # ncu's hit rate can pass 100 by a little (100.12 in run h200-20261203e: its counters are sampled per
    # L2 slice), so the bound leaves it room rather than refusing the whole run.
    l2_hit_rate_pct: float | None = doc("lts__t_sector_hit_rate.pct, as Nsight Compute reports it (a little over "
                                        "100 can occur).", None, lo=0, hi=105)
    l1_bytes: float | None = doc("l1tex__t_bytes.sum: global and local traffic through L1/TEX (not shared memory).",
                                 None, **BYTES)
    shared_bytes: float | None = doc("Shared-memory data bytes (sm__sass_data_bytes_mem_shared.sum) where the GPU has the counter.",
                                     None, **BYTES)
    local_bytes: float | None = doc("Local-memory (register spill) bytes through L1, loads plus stores.", None, **BYTES)
    flops_fp32: float | None = doc("fp32 FLOPs from SASS counters: fadd + fmul + 2 x ffma (per thread).", None, **FLOP)
    flops_fp16: float | None = doc("fp16 FLOPs from SASS counters, 2 per HADD2/HMUL2 and 4 per HFMA2 (packed pairs).",
                                   None, **FLOP)
    flops_tensor: float | None = doc("Tensor-core FLOPs from the sm__ops_path_tensor counters; null where the GPU lacks them.",
                                     None, **FLOP)
    tensor_inst: float | None = doc("Warp instructions executed on the tensor pipe (HMMA + GMMA); 0 means tensor cores did not run.",
                                    None, **COUNT)
    achieved_occupancy_pct: float | None = doc("sm__warps_active.avg.pct_of_peak_sustained_active.", None, **PCT)
    theoretical_occupancy_pct: float | None = doc("sm__maximum_warps_per_active_cycle_pct.", None, **PCT)
    block_limit_registers: int | None = doc("Blocks per SM the register file allows (launch__occupancy_limit_registers).",
                                            None, **COUNT)
    block_limit_smem: int | None = doc("Blocks per SM shared memory allows (launch__occupancy_limit_shared_mem).",
                                       None, **COUNT)
    block_limit_warps: int | None = doc("Blocks per SM the warp slots allow (launch__occupancy_limit_warps).",
                                        None, **COUNT)
    block_limit_blocks: int | None = doc("Blocks per SM the hardware block limit allows (launch__occupancy_limit_blocks).",
                                         None, **COUNT)
    registers_per_thread: int | None = doc("launch__registers_per_thread.", None, **COUNT)
    smem_per_block_bytes: int | None = doc("Static + dynamic shared memory per block (the driver's reserve excluded).",
                                           None, **BYTES)
    smem_driver_bytes: int | None = doc("Shared memory the driver reserves per block (launch__shared_mem_per_block_driver).",
                                        None, **BYTES)
    smem_config_bytes: int | None = doc("Shared-memory carveout the driver chose for the launch (launch__shared_mem_config_size).",
                                        None, **BYTES)
    waves_per_sm: float | None = doc("launch__waves_per_multiprocessor.", None, **COUNT)
    replay_passes: int | None = doc("Replay passes Nsight Compute needed for this launch.", None, **COUNT)
    kernel_step: str | None = doc("Our kernel: the recorded step of the kernel function that ran (one function "
                                  "serves several steps, e.g. Gluon 'g8'); null for other implementations.", None,
                                  pattern=IDENT)
    pipe_tensor_pct: float | None = doc("Tensor pipe busy, % of its peak cycles while the SM was active "
                                        "(sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active).", None, **PCT)
    pipe_fma_pct: float | None = doc("FMA pipe busy, % of peak (sm__pipe_fma_cycles_active...).", None, **PCT)
    pipe_alu_pct: float | None = doc("ALU pipe busy, % of peak (sm__pipe_alu_cycles_active...).", None, **PCT)
    pipe_xu_pct: float | None = doc("XU pipe (MUFU: the softmax's exponentials), % of its peak instruction rate "
                                    "(sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active).", None, **PCT)
    pipe_lsu_pct: float | None = doc("Load/store pipe, % of its peak instruction rate "
                                     "(sm__inst_executed_pipe_lsu...).", None, **PCT)
    issue_slots_pct: float | None = doc("Issue slots used, % of peak (sm__inst_issued.avg.pct_of_peak_sustained_active).",
                                        None, **PCT)
    sol_sm_pct: float | None = doc("Speed of Light, SM throughput % of peak (sm__throughput).", None, **PCT)
    sol_memory_pct: float | None = doc("Speed of Light, memory throughput % of peak (gpu__compute_memory_throughput).",
                                       None, **PCT)
    sol_dram_pct: float | None = doc("Speed of Light, DRAM throughput % of peak (gpu__dram_throughput).", None, **PCT)
    sol_l2_pct: float | None = doc("Speed of Light, L2 throughput % of peak (lts__throughput).", None, **PCT)
    sol_l1_pct: float | None = doc("Speed of Light, L1/shared throughput % of peak (l1tex__throughput).", None, **PCT)
    limiter: str | None = doc("What limits the kernel, judged by collect/schema/limiter.py from the fields above and "
                              "the stall rows: a unit at 80% of its peak or more ('tensor-pipe', 'exp-pipe', "
                              "'fma-pipe', 'alu-pipe', 'lsu-pipe', 'issue', 'dram', 'l2', 'l1'), else "
                              "'stall-<reason>' for the largest stall share; null where those counters are missing.",
                              None, pattern="^[a-z0-9_-]{1,64}$", max_len=64)
    limiter_evidence: str | None = doc("The figures that chose `limiter`, in words.", None, **TEXT)


@strict
@dataclass
class ImplRow:
    """One profiled call of one implementation at one shape: its launches summed."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id",)

    case_id: str = doc("Case id; joins KernelRow.case_id.", pattern=IDENT)
    group: str = doc("'main' (implementations compared) or 'regcap' (register-cap experiment).", choices=("main", "regcap"))
    impl: str = doc("Implementation name.", pattern=IDENT)
    batch: int = doc("Batch size.", **SIZE)
    heads: int = doc("Attention heads.", **SIZE)
    seq_len: int = doc("Sequence length.", **SIZE)
    head_dim: int = doc("Head dimension.", **SIZE)
    dtype: str = doc("'float16', 'bfloat16' or 'float32'.", choices=DTYPES)
    causal: bool = doc("Causal mask.")
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok.", None, **TEXT)
    config: str | None = doc("Triton tile config that ran, e.g. 'BLOCK_M=128 BLOCK_N=64 warps=8 stages=3 maxnreg=none'.", None,
                             **NAME)
    kernels: int = doc("Kernel launches the call made inside the profiled range.", 0, **COUNT)
    duration_ms: float | None = doc("Sum of kernel durations (no launch gaps).", None, **MS)
    dram_read_bytes: float | None = doc("Sum over launches.", None, **BYTES)
    dram_write_bytes: float | None = doc("Sum over launches.", None, **BYTES)
    dram_bytes: float | None = doc("DRAM bytes read plus written where only the total is known (published figures); "
                                   "null when the read and write parts are given.", None, **BYTES)
    l2_bytes: float | None = doc("Sum over launches.", None, **BYTES)
    l1_bytes: float | None = doc("Sum over launches.", None, **BYTES)
    flops_counted: float | None = doc("fp32 + fp16 + tensor FLOPs from counters; null when tensor FLOPs could not be counted.",
                                      None, **FLOP)
    flops_tensor: float | None = doc("Tensor-core FLOPs from counters.", None, **FLOP)
    tensor_inst: float | None = doc("Tensor-pipe warp instructions, summed.", None, **COUNT)
    kernel_step: str | None = doc("Our kernel: the recorded step that ran (see KernelRow.kernel_step).", None,
                                  pattern=IDENT)
    flops_model: float = doc("Analytical FLOPs: 4·B·H·N²·d (2·B·H·N²·d for each of QKᵀ and PV), halved when causal.",
                             0.0, **FLOP)


@strict
@dataclass
class StallRow:
    """Why warps were not issuing, for one launch: one reason per row."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id", "launch", "reason")

    case_id: str = doc("Case id.", pattern=IDENT)
    launch: int = doc("Launch within the case; joins KernelRow.", **COUNT)
    reason: str = doc("Stall reason as Nsight Compute names it (long_scoreboard, mio_throttle, barrier, ...).",
                      pattern=IDENT)
    warps_per_issue: float = doc("smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio: warps stalled "
                                 "for this reason per issued instruction.", **COUNT)


# What a hot spot's instruction does (collect/ncu_source.py assigns them from the opcode).
HOTSPOT_ROLES = ("mma", "mma-wait", "exp", "barrier", "async-wait", "tma", "load", "store", "convert", "math", "control",
                 "other")


@strict
@dataclass
class HotSpotRow:
    """One of the SASS instructions where a kernel's warps were sampled most (Nsight Compute's source page)."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id", "launch", "rank")

    case_id: str = doc("Case id; joins KernelRow.case_id.", pattern=IDENT)
    launch: int = doc("Launch within the case; joins KernelRow.", **COUNT)
    rank: int = doc("0 for the instruction with the most samples.", **COUNT)
    address: str = doc("The instruction's address in the profiled process.", pattern="^0x[0-9a-fA-F]{1,16}$", max_len=18)
    opcode: str = doc("SASS opcode with its modifiers, e.g. 'HGMMA.64x128x16.F32'.", pattern="^[A-Z0-9_.x]{0,80}$", max_len=80)
    role: str = doc("What the instruction does: mma, mma-wait, exp, barrier, async-wait, tma, load, store, convert, "
                    "math, control or other (collect/ncu_source.py).",
choices=HOTSPOT_ROLES)
    sass: str = doc("The SASS line as Nsight Compute printed it (untrusted text).", **NAME)
    samples: float = doc("Warp samples at this instruction (SourceCounters' PC sampling).", **COUNT)
    share_pct: float = doc("Share of the kernel's samples.", **PCT)
    top_reason: str | None = doc("The stall reason sampled most at this instruction.", None, pattern=IDENT)
    top_reason_pct: float | None = doc("Its share of this instruction's samples.", None, **PCT)
    source_line: str | None = doc("The source line the instruction came from, where the report has it.", None, **NAME)


@strict
@dataclass
class RegCapRow:
    """The register-cap experiment: one Triton tile config with or without maxnreg."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id", "block_m", "block_n", "num_warps", "num_stages", "maxnreg")

    case_id: str = doc("Case id of the profiled launch.", pattern=IDENT)
    block_m: int = doc("BLOCK_M.", **SIZE)
    block_n: int = doc("BLOCK_N.", **SIZE)
    num_warps: int = doc("Warps per block.", **SIZE)
    num_stages: int = doc("Software pipeline stages.", **SIZE)
    maxnreg: int | None = doc("Register cap per thread passed to the compiler; null = no cap.", None, **COUNT)
    autotuned: bool = doc("Whether this tile shape is the one the autotuner picked at this shape.", False)
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", "ok", pattern=ROW_STATUS)
    reason: str | None = doc("Why the row is not ok.", None, **TEXT)
    registers_per_thread: int | None = doc("Registers per thread the compiled kernel uses.", None, **COUNT)
    theoretical_occupancy_pct: float | None = doc("From Nsight Compute.", None, **PCT)
    achieved_occupancy_pct: float | None = doc("From Nsight Compute.", None, **PCT)
    block_limit_registers: int | None = doc("Blocks per SM the registers allow.", None, **COUNT)
    block_limit_smem: int | None = doc("Blocks per SM shared memory allows.", None, **COUNT)
    local_bytes: float | None = doc("Register-spill traffic (local memory), bytes.", None, **BYTES)
    latency_ms_median: float | None = doc("Median device time outside the profiler (the one clock: L2 flushed, no host time).",
                                          None, **MS)
    latency_ms_p10: float | None = doc("10th percentile latency.", None, **MS, at_most="latency_ms_median")
    latency_ms_p90: float | None = doc("90th percentile latency.", None, **MS, at_least="latency_ms_median")


@strict
@dataclass
class ClockCheckRow:
    """Our device time beside Nsight Compute's for the same call: the proof of the one clock."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("case_id",)

    case_id: str = doc("Case id; joins ImplRow.case_id.", pattern=IDENT)
    impl: str = doc("Implementation name.", pattern=IDENT)
    batch: int = doc("Batch size.", **SIZE)
    heads: int = doc("Attention heads.", **SIZE)
    seq_len: int = doc("Sequence length.", **SIZE)
    head_dim: int = doc("Head dimension.", **SIZE)
    dtype: str = doc("'float16', 'bfloat16' or 'float32'.", choices=DTYPES)
    causal: bool = doc("Causal mask.")
    kernels: int = doc("Kernel launches in the call.", **COUNT)
    ncu_ms: float = doc("Sum of the call's kernels' gpu__time_duration under Nsight Compute (--clock-control none, "
                        "caches flushed).", **MS)
    device_ms: float = doc("Our device time of the same call (median), measured outside the profiler.", **MS)
    device_over_ncu: float = doc("device_ms / ncu_ms: 1 when the two clocks agree.", **RATIO,
                                 derived=lambda r, _: r.device_ms / r.ncu_ms)
    gap_ms: float = doc("device_ms - ncu_ms: for a multi-kernel call, the time between its kernels.",
                        lo=-HOUR_MS, hi=HOUR_MS, derived=lambda r, _: r.device_ms - r.ncu_ms)
    sm_clock_mhz: float | None = doc("SM clock seen during our device timing.", None, **CLOCK_MHZ)
    config: str | None = doc("Our kernel only: the tile config our clock ran, pinned to the one the profiled call "
                             "ran where that call autotunes (null for the other paths, other implementations, and "
                             "runs that did not record it).", None, **NAME)


@strict
@dataclass
class ProfileFile:
    """profile.json: the profile phase's output."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("Run this file belongs to.", pattern=RUN_ID)
    status: str = doc("ok when Nsight Compute produced data; unsupported or error (with reason) when it could not.", "ok",
                      choices=("ok", "unsupported", "error"))
    reason: str | None = doc("Why there is no data: ncu missing, no permission for the counters, no kernel profiled...", None,
                             **TEXT)
    fix: str | None = doc("What to do so the next run has a profile (install Nsight Compute, allow counter access); "
                          "null when there is nothing to fix.", None, **TEXT)
    ncu_version: str | None = doc("`ncu --version` of the profiler that ran.", None, **NAME)
    ncu_command: list[str] = doc("The ncu command line, target included.", default_factory=list, **LONG_TEXT)
    flops_source: str = doc("'counters' when tensor FLOPs came from the tensor-op counters, else 'analytical'.", "analytical",
                            choices=("counters", "analytical"))
    metrics_missing: list[str] = doc("Metrics asked for that this GPU or ncu version does not have.", default_factory=list,
                                     **NAME)
    wall_s: float | None = doc("Wall time of the ncu run.", None, **SECONDS)
    impls: list[ImplRow] = doc("One row per profiled call (per implementation and shape).", default_factory=list)
    kernels: list[KernelRow] = doc("One row per kernel launch.", default_factory=list)
    stalls: list[StallRow] = doc("Warp stall reasons per launch.", default_factory=list)
    regcap: list[RegCapRow] = doc("The register-cap experiment (runs before 2026-12-03; retired since: the shipped "
                                  "kernels' shared memory caps their blocks per SM at what their registers allow).",
                                  default_factory=list)
    hotspots: list[HotSpotRow] = doc("The SASS instructions with the most warp samples, per profiled launch of our "
                                     "kernel and its peers at the limiter shapes.", default_factory=list)
    clock_check: list[ClockCheckRow] = doc("Our device time beside Nsight Compute's, per profiled call.",
                                           default_factory=list)
