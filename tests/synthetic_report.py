"""Synthetic runs with the fields the one clock and the env microbenchmarks add (host and loop time, SM clocks,
L2 and shared-memory ceilings, the ncu clock cross-check), for the report's pages. Written to tmp folders only."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import synthetic
from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.bench import BenchFile, BenchRow
from collect.schema.manifest import MeasuredCeiling, SweepPoint
from collect.schema.profile import ClockCheckRow, ImplRow, KernelRow, ProfileFile
from render.runs import load_run

SM_COUNT = 132  # synthetic.device()


def add_ceilings(run_dir: Path, l2: float | None = 1.2e13, smem: float | None = 3.0e13) -> None:
    """Measured L2 and shared-memory bandwidth in the manifest, each the best of a two-point sweep."""
    m = json.loads((run_dir / "manifest.json").read_text())
    for name, value in (("l2_bandwidth", l2), ("smem_bandwidth", smem)):
        if value is None:
            continue
        sweep = [SweepPoint(problem=f"{name} small", per_s_median=value * 0.8, sm_clock_mhz=1900.0),
                 SweepPoint(problem=f"{name} best", per_s_median=value, sm_clock_mhz=1980.0)]
        c = MeasuredCeiling(name=name, quantity="bytes", status="ok", problem=f"{name} best", repeats=20,
                            per_s_median=value, per_s_p10=value * 0.99, per_s_p90=value * 1.01, sm_clock_mhz=1980.0,
                            sweep=sweep)
        m["measured_ceilings"].append(dataclasses.asdict(c))
    (run_dir / "manifest.json").write_text(json.dumps(m))


def bench_rows(ns=(512, 1024, 2048, 4096), host_us: float | None = 20.0, loop_factor=None, sm_clock=True,
               triton_ms=None, naive_ms=None, causal=(False,)) -> list[BenchRow]:
    """naive, sdpa-flash and triton at B=2, H=8, d=64, fp16. Device time grows as N²; host time is fixed, and loop
    time is device time times loop_factor(impl, n) (default: host time or device time, whichever is longer)."""
    rows = []
    for c in causal:
        for n in ns:
            flops = 4.0 * 2 * 8 * n * n * 64 / (2 if c else 1)
            for impl, base in (("naive", 0.02), ("sdpa-flash", 0.004), ("triton", 0.006)):
                if impl == "triton" and triton_ms:
                    base = triton_ms
                if impl == "naive" and naive_ms:
                    base = naive_ms
                dev = base * (n / ns[0]) ** 2
                row = dict(impl=impl, backend_requested="flash" if impl.startswith("sdpa") else None,
                           backend_used="flash" if impl.startswith("sdpa") else None, dtype="float16", causal=c,
                           batch=2, heads=8, seq_len=n, head_dim=64, status="ok", latency_ms_median=dev,
                           latency_ms_p10=dev * 0.97, latency_ms_p90=dev * 1.03, n_timed_runs=50, flops=flops,
                           tflops=flops / (dev * 1e-3) / 1e12, peak_mem_bytes=n * n * (8 if impl == "naive" else 1),
                           kernel_config={"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
                           if impl == "triton" else {})
                if host_us is not None:
                    loop = dev * loop_factor(impl, n) if loop_factor else max(dev, host_us / 1e3)
                    row.update(host_us_median=host_us, host_us_p10=host_us * 0.9, host_us_p90=host_us * 1.2,
                               loop_ms_median=loop, loop_ms_p10=loop * 0.98, loop_ms_p90=loop * 1.02)
                if sm_clock:
                    row.update(sm_clock_mhz=1960.0, sm_clock_min_mhz=1890.0, sm_clock_max_mhz=1980.0)
                rows.append(BenchRow(**row))
    return rows


def kernel(case, impl, launch, name, ms, **kw) -> KernelRow:
    return KernelRow(case_id=case, impl=impl, launch=launch, kernel_name=name, ncu_id=launch, duration_ms=ms, **kw)


def profile_file(run_id: str, triton_grid=SM_COUNT, triton_l1=8e4, triton_shared=4e6, math_tensor_flops=0.0,
                 tensor_flops_counted=True, clock_ratio=1.02, with_clock_check=True, naive_dram=1.2e9,
                 triton_dram=1.3e7, our_clock_config=None, triton_kernel="_hopper_fwd_ws_persistent") -> ProfileFile:
    """naive (two GEMMs and a softmax), sdpa-math (FP32 GEMMs, a softmax with tensor-pipe instructions) and our
    kernel (one launch) at B=2, H=8, N=2048, d=64, fp16."""
    shape = dict(batch=2, heads=8, seq_len=2048, head_dim=64, dtype="float16", causal=False)
    fm = 4.0 * 2 * 8 * 2048 * 2048 * 64
    tensor = (lambda v: v) if tensor_flops_counted else (lambda v: None)
    impls, kernels = [], []

    def impl(name, ms, dram, l2, l1, flops_tensor, n_kernels, config=None):
        impls.append(ImplRow(case_id=f"main-{name}", group="main", impl=name, **shape, status="ok", kernels=n_kernels,
                             duration_ms=ms, dram_read_bytes=dram * 0.9, dram_write_bytes=dram * 0.1, l2_bytes=l2,
                             l1_bytes=l1, flops_counted=fm if flops_tensor is not None else None,
                             flops_tensor=flops_tensor, tensor_inst=1e6, flops_model=fm, config=config))

    impl("naive", 0.5, naive_dram, 2.5e9, 1.6e9, tensor(fm), 3)
    kernels += [kernel("main-naive", "naive", 0, "nvjet_sm90_hsh_256x128_gemm", 0.05, flops_tensor=tensor(fm / 2),
                       tensor_inst=1e5, l1_bytes=2.7e8, l2_bytes=2.7e8, shared_bytes=1e8, dram_read_bytes=1e8),
                kernel("main-naive", "naive", 1, "cunn_SoftMaxForward<8, c10::Half>", 0.4, flops_tensor=tensor(0.0),
                       tensor_inst=3e6, l1_bytes=6e8, l2_bytes=1e9, shared_bytes=4e8, dram_read_bytes=9e8),
                kernel("main-naive", "naive", 2, "nvjet_sm90_hsh_64x256_gemm", 0.05, flops_tensor=tensor(fm / 2),
                       tensor_inst=2e5, l1_bytes=2.3e8, l2_bytes=2.3e8, shared_bytes=1e8, dram_read_bytes=1e8)]
    impl("sdpa-math", 1.0, 2.0e9, 4e9, 3e9, tensor(math_tensor_flops), 3)
    kernels += [kernel("main-sdpa-math", "sdpa-math", 0, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", 0.3,
                       flops_fp32=fm / 2, flops_tensor=tensor(math_tensor_flops / 2), tensor_inst=0.0, l1_bytes=5e8,
                       l2_bytes=6e8, shared_bytes=1.6e9),
                kernel("main-sdpa-math", "sdpa-math", 1, "softmax_warp_forward<float, float>", 0.2, flops_fp32=1e9,
                       flops_tensor=tensor(0.0), tensor_inst=3e4, l1_bytes=5e8, l2_bytes=8e8, shared_bytes=0.0),
                kernel("main-sdpa-math", "sdpa-math", 2, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n", 0.3,
                       flops_fp32=fm / 2, flops_tensor=tensor(math_tensor_flops / 2), tensor_inst=0.0, l1_bytes=4e8,
                       l2_bytes=5e8, shared_bytes=1.2e9)]
    impl("triton", 0.05, triton_dram, 1e8, triton_l1, tensor(fm), 1, "BLOCK_M=128 BLOCK_N=128 warps=4 stages=2 maxnreg=none")
    kernels.append(kernel("main-triton", "triton", 0, triton_kernel, 0.05, flops_tensor=tensor(fm),
                          tensor_inst=4e5, l1_bytes=triton_l1, l2_bytes=1e8, shared_bytes=triton_shared,
                          dram_read_bytes=triton_dram * 0.9, block_size=384, grid_size=triton_grid,
                          registers_per_thread=168, smem_per_block_bytes=115000, block_limit_registers=1,
                          block_limit_smem=2, block_limit_warps=5, block_limit_blocks=32,
                          theoretical_occupancy_pct=18.75, achieved_occupancy_pct=18.7))
    checks = []
    if with_clock_check:
        for i in impls:
            ncu = i.duration_ms
            dev = ncu * clock_ratio if i.kernels == 1 else ncu + 0.02
            checks.append(ClockCheckRow(case_id=i.case_id, impl=i.impl, **shape, kernels=i.kernels, ncu_ms=ncu,
                                        device_ms=dev, device_over_ncu=dev / ncu, gap_ms=dev - ncu,
                                        config=our_clock_config if i.impl == "triton" else None))
    return ProfileFile(schema_version=SCHEMA_VERSION, run_id=run_id, flops_source="counters" if tensor_flops_counted
                       else "analytical", impls=impls, kernels=kernels, clock_check=checks)


def make(tmp_path: Path, run_id: str = "rep-1", bench=None, profile=None, ceilings=True, **kw):
    """A loaded run: manifest (with L2 and shared-memory ceilings unless ceilings=False), and the given phases."""
    run_dir = synthetic.make_run(tmp_path, run_id)
    if ceilings:
        add_ceilings(run_dir, **kw)
    m = json.loads((run_dir / "manifest.json").read_text())
    if bench is not None:
        write_json_atomic(run_dir / "bench.json", BenchFile(schema_version=SCHEMA_VERSION, run_id=run_id, profile="quick",
                                                            timing_method="synthetic", backend_choice_method="synthetic",
                                                            min_timed_runs=50, rows=bench, notes=["a note"]))
        m["phases"].append({"name": "bench", "status": "complete", "file": "bench.json", "rows": len(bench) + 1})
    if profile is not None:
        profile.run_id = run_id
        write_json_atomic(run_dir / "profile.json", profile)
        m["phases"].append({"name": "profile", "status": "complete", "file": "profile.json"})
    (run_dir / "manifest.json").write_text(json.dumps(m))
    return load_run(run_dir)
