"""Synthetic runs for tests: written to tmp folders only, never to data/runs."""
from __future__ import annotations

from pathlib import Path

from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.manifest import ClockSample, DeviceFacts, Manifest, MeasuredCeiling, PhaseRecord
from collect.schema.datasheets import lookup


def device(name: str = "NVIDIA H200") -> DeviceFacts:
    return DeviceFacts(name=name, compute_capability="9.0", sm_count=132, regs_per_sm=65536, regs_per_block_max=65536,
                       smem_per_sm_bytes=233472, smem_per_block_bytes=49152, smem_per_block_optin_bytes=232448,
                       max_threads_per_sm=2048, max_warps_per_sm=64, max_blocks_per_sm=32, l2_bytes=62914560,
                       memory_bytes=150_000_000_000, sm_clock_max_mhz=1980, mem_clock_max_mhz=3201,
                       driver_version="580.0", cuda_version="13.0", supports_bf16=True)


def manifest(run_id: str, name: str = "NVIDIA H200", created: str = "2026-11-29T08:00:00+00:00") -> Manifest:
    ceil = [MeasuredCeiling(name="copy_bandwidth", quantity="bytes", status="ok", problem="1 GiB copy", repeats=50,
                            per_s_median=4.0e12, per_s_p10=3.9e12, per_s_p90=4.1e12),
            MeasuredCeiling(name="matmul_fp16", quantity="flops", status="ok", problem="8192^3", repeats=50,
                            per_s_median=7.5e14, per_s_p10=7.4e14, per_s_p90=7.6e14),
            MeasuredCeiling(name="matmul_bf16", quantity="flops", status="ok", problem="8192^3", repeats=50,
                            per_s_median=7.2e14, per_s_p10=7.1e14, per_s_p90=7.3e14),
            MeasuredCeiling(name="matmul_fp32", quantity="flops", status="error", reason="synthetic failure",
                            problem="8192^3")]
    return Manifest(schema_version=SCHEMA_VERSION, run_id=run_id, created_utc=created, updated_utc=created,
                    profile="quick", command="synthetic", device=device(name),
                    software={"python": "3.12", "torch": "2.11", "triton": "3.6", "ncu": None},
                    clocks=[ClockSample(moment="env-start", sm_clock_mhz=1980.0, mem_clock_mhz=3201.0)],
                    datasheet=lookup(name), measured_ceilings=ceil,
                    phases=[PhaseRecord(name="env", status="complete", file="manifest.json", duration_s=3.0)])


def make_run(data_dir: Path, run_id: str = "synthetic-20261129", **kw) -> Path:
    run_dir = Path(data_dir) / "runs" / run_id
    write_json_atomic(run_dir / "manifest.json", manifest(run_id, **kw))
    return run_dir
