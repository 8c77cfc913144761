"""manifest.json: provenance of a run (device, software, clocks, profiler flags, phase status)
plus the env phase's datasheet and measured ceilings."""
from __future__ import annotations

from dataclasses import dataclass

from .common import (BYTES, BYTES_PER_S, CLOCK_MHZ, COUNT, FLOP_PER_S, GIT_COMMIT, IDENT, LONG_TEXT, NAME, PHASE_STATUSES,
                     PROFILES, ROW_STATUS, RUN_ID, SECONDS, TEXT, doc, strict)

# The ceilings the env phase measures (collect/env.py), by name; pages look each one up.
CEILINGS = ("copy_bandwidth", "l2_bandwidth", "smem_bandwidth", "matmul_fp16", "matmul_bf16", "matmul_fp32")
ORIGINS = ("measured", "published")
# How the spin before each timed call read the SM clock (collect/spin_clock.py): 'counters', its own clock64 over the
# GPU's globaltimer; 'events', torch.cuda._sleep's requested cycles over the time between two CUDA events (runs
# before the stamped spin, or a GPU where it cannot be built); 'both' where a resumed phase's rows used each.
SM_CLOCK_METHODS = ("counters", "events", "both")


@strict
@dataclass
class DeviceFacts:
    """What the GPU reports about itself; limits the occupancy model needs."""

    name: str = doc("Device name as the driver reports it, e.g. 'NVIDIA H200'.", **NAME)
    compute_capability: str = doc("Major.minor, e.g. '9.0'.", pattern=r'^\d{1,2}\.\d{1,2}$', max_len=5)
    sm_count: int = doc("Streaming multiprocessors.", **COUNT)
    regs_per_sm: int | None = doc("32-bit registers per SM.", None, **COUNT)
    regs_per_block_max: int | None = doc("Most registers one block may use.", None, **COUNT)
    smem_per_sm_bytes: int | None = doc("Shared memory per SM.", None, **BYTES)
    smem_per_block_bytes: int | None = doc("Default shared memory limit per block.", None, **BYTES)
    smem_per_block_optin_bytes: int | None = doc("Shared memory per block with opt-in.", None, **BYTES)
    max_threads_per_sm: int | None = doc("Resident threads per SM.", None, **COUNT)
    max_warps_per_sm: int | None = doc("Resident warps per SM (threads / warp size).", None, **COUNT)
    max_blocks_per_sm: int | None = doc("Resident blocks per SM.", None, **COUNT)
    warp_size: int = doc("Threads per warp.", 32, **COUNT)
    l2_bytes: int | None = doc("L2 cache size.", None, **BYTES)
    memory_bytes: int | None = doc("Device memory size.", None, **BYTES)
    memory_bus_width_bits: int | None = doc("Memory bus width.", None, **COUNT)
    sm_clock_max_mhz: float | None = doc("Maximum SM clock the driver reports.", None, **CLOCK_MHZ)
    mem_clock_max_mhz: float | None = doc("Maximum memory clock the driver reports.", None, **CLOCK_MHZ)
    driver_version: str | None = doc("NVIDIA driver version.", None, **NAME)
    cuda_version: str | None = doc("CUDA runtime version torch was built with.", None, **NAME)
    supports_bf16: bool | None = doc("Whether bf16 tensor-core math is supported.", None)


@strict
@dataclass
class ClockSample:
    """One reading of the clocks; they are recorded, never changed."""

    CASE_KEY = ()  # readings, not cases: the same moment may be read twice

    moment: str = doc("When it was read, e.g. 'env-start', 'after-matmul'.", pattern=IDENT)
    sm_clock_mhz: float | None = doc("SM clock at that moment.", None, **CLOCK_MHZ)
    mem_clock_mhz: float | None = doc("Memory clock at that moment.", None, **CLOCK_MHZ)
    temperature_c: float | None = doc("GPU temperature.", None, lo=-100, hi=200)
    power_w: float | None = doc("Board power draw.", None, lo=0, hi=1e5)
    source: str = doc("Where it came from (nvidia-smi, pynvml).", "nvidia-smi", **NAME)


@strict
@dataclass
class DatasheetCeilings:
    """Vendor figures for a known GPU, each with its source."""

    key: str = doc("Table key matched from the device name, e.g. 'h200-sxm'.", pattern=IDENT)
    marketing_name: str = doc("Name as the datasheet gives it.", **NAME)
    memory_type: str = doc("HBM3e, GDDR6, ...", **NAME)
    memory_bandwidth_bytes_per_s: float = doc("Peak DRAM bandwidth.", **BYTES_PER_S)
    fp16_tensor_flops_per_s: float = doc("Dense fp16 tensor-core peak (no sparsity).", **FLOP_PER_S)
    bf16_tensor_flops_per_s: float | None = doc("Dense bf16 tensor-core peak; null where unsupported.", **FLOP_PER_S)
    fp32_flops_per_s: float = doc("Non-tensor fp32 peak.", **FLOP_PER_S)
    l2_bytes: int = doc("L2 cache size.", **BYTES)
    sm_count: int = doc("Streaming multiprocessors.", **COUNT)
    memory_bytes: int = doc("Memory size.", **BYTES)
    source: str = doc("Document the figures come from.", **TEXT)


@strict
@dataclass
class SweepPoint:
    """One shape of a ceiling's sweep: the ceiling is the best median over its points."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("problem",)

    problem: str = doc("What was run, e.g. 'M=N=K=4096 fp16'.", **NAME)
    per_s_median: float = doc("Median rate of this shape: bytes/s or FLOP/s.", lo=0, lo_open=True, hi=1e20)
    sm_clock_mhz: float | None = doc("Median SM clock read in the spin before each of its timed calls.", None,
                                     **CLOCK_MHZ)


@strict
@dataclass
class MeasuredCeiling:
    """A measured ceiling: the best a microbenchmark reached (a copy, L2 or shared-memory reads, a matmul sweep)."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("name",)

    name: str = doc("'copy_bandwidth' (DRAM, read + written), 'l2_bandwidth' (reads served by L2), "
                    "'smem_bandwidth' (shared-memory reads, whole GPU), 'matmul_fp16', 'matmul_bf16' or 'matmul_fp32'.",
                    choices=CEILINGS)
    quantity: str = doc("'bytes' (bandwidth) or 'flops' (compute).", choices=("bytes", "flops"))
    status: str = doc("ok, oom, unsupported, error or skipped (not run for time).", pattern=ROW_STATUS)
    reason: str | None = doc("Why it is not ok.", None, **TEXT)
    problem: str = doc("What was run, e.g. '2 GiB copy' or 'M=N=K=8192'.", "", **NAME)
    repeats: int = doc("Timed repeats.", 0, **COUNT)
    per_s_median: float | None = doc("Median rate: bytes/s (read + written) or FLOP/s.",
                                     None, lo=0, lo_open=True, hi=1e20)
    per_s_p10: float | None = doc("10th percentile of the rate.", None, lo=0, lo_open=True, hi=1e20,
                                  at_most="per_s_median")
    per_s_p90: float | None = doc("90th percentile of the rate.", None, lo=0, lo_open=True, hi=1e20,
                                  at_least="per_s_median")
    sm_clock_mhz: float | None = doc("Median SM clock seen while the best shape was timed.", None, **CLOCK_MHZ)
    sweep: list[SweepPoint] = doc("Every shape timed; the ceiling is the best median among them.",
                                  default_factory=list)


@strict
@dataclass
class PhaseRecord:
    """What happened to one phase in this run."""

    # The case key: two rows with the same values here measure one case twice (refused).
    CASE_KEY = ("name",)

    name: str = doc("Phase name.", pattern=IDENT)
    status: str = doc("'complete'; 'running' while it runs (a crash leaves it so); 'partial' when it stopped early "
                      "with rows saved; 'failed' with none; 'unsupported' where it does not apply to this GPU.",
                      choices=PHASE_STATUSES)
    file: str | None = doc("Data file the phase wrote, relative to the run folder.",
                           None, pattern=r'^[a-z0-9_-]+\.json$', max_len=64)
    started_utc: str | None = doc("ISO 8601 start time.", None, utc_time=True)
    duration_s: float | None = doc("Wall time of the phase.", None, **SECONDS)
    rows: int | None = doc("Rows written.", None, **COUNT)
    error: str | None = doc("The error, with its type, when the phase failed.", None, **LONG_TEXT)
    reason: str | None = doc("Why the phase does not apply to this device, when its status is 'unsupported'.", None,
                             **TEXT)
    profile: str | None = doc("Profile the phase ran under.", None, choices=PROFILES)
    git_commit: str | None = doc("Commit of the code that ran this phase (a run's phases may come from "
                                 "different collect invocations).", None, pattern=GIT_COMMIT)
    sm_clock_method: str | None = doc("How the spin before this phase's timed calls read the SM clock: 'counters' "
                                      "(the spin's clock64 over the GPU's globaltimer), 'events' (its requested cycles "
                                      "over CUDA-event time, which counts its launch in) or 'both'; null where the "
                                      "phase timed no call.", None, choices=SM_CLOCK_METHODS)


@strict
@dataclass
class Manifest:
    """manifest.json: one per run."""

    schema_version: int = doc("Version of this data contract.")
    run_id: str = doc("Short device slug and date, e.g. 'h200-20261129'.", pattern=RUN_ID)
    created_utc: str = doc("ISO 8601 time the run was created.", utc_time=True)
    updated_utc: str = doc("ISO 8601 time of the last write.", utc_time=True)
    profile: str = doc("'quick' or 'full' ('published' for figures transcribed from a write-up).", choices=PROFILES)
    command: str = doc("The latest collect command line that wrote into this run.", **LONG_TEXT)
    git_commit: str | None = doc("Commit of the code of that latest collect (each phase records its own).",
                                 None, pattern=GIT_COMMIT)
    git_dirty: bool | None = doc("Whether that tree had uncommitted changes.", None)
    kernel_version: str | None = doc("The recorded version of our kernel that flash_attention ships in the code of "
                                     "that latest collect (kernels/attention/versions.FINAL_VERSION): the one the "
                                     "bench, profile and decode rows ran. Null in runs before 2026-12-03, whose "
                                     "iterations.json names it as final_version where that phase ran.", None,
                                     pattern=IDENT)
    hostname: str | None = doc("Host the run came from.", None, **NAME)
    device: DeviceFacts | None = doc("The GPU.", None)
    software: dict[str, str | None] = doc("Versions: python, torch, triton, transformers, ncu, ...", default_factory=dict,
                                          **NAME)
    clocks: list[ClockSample] = doc("Clock readings during the run.", default_factory=list)
    datasheet: DatasheetCeilings | None = doc("Vendor figures; null for a GPU missing from the table.", None)
    measured_ceilings: list[MeasuredCeiling] = doc("Measured copy bandwidth and matmul rates.", default_factory=list)
    profiler_flags: list[str] = doc("Nsight Compute flags used by the profile phase.", default_factory=list, **LONG_TEXT)
    phases: list[PhaseRecord] = doc("Status of each phase.", default_factory=list)
    notes: list[str] = doc("Anything the collector wants the reader to know.", default_factory=list, **TEXT)
    origin: str = doc("'measured' by `python -m collect`, or 'published': figures transcribed from a write-up "
                      "(data/reference/), not re-measured here.", "measured", choices=ORIGINS)
    citation: str | None = doc("For published figures: the write-up they were transcribed from.", None, **TEXT)
    rehearsal: str | None = doc("Set (e.g. 't4') when the phases chose as another GPU would, from that GPU's device facts, "
                                "to rehearse its code paths here: the timings are still this device's. Not a report run.",
                                None, **NAME)
