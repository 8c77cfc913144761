"""The Nsight Compute metrics the profile phase can ask for, by what GPUs have them: a leaf module,
so the device choices (collect/device_choices.py) and the phase itself read one list."""
from __future__ import annotations

# Requested on every GPU: these exist from Turing (sm_75) on.
CORE_METRICS = [
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_bytes.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
]
# What limits a kernel (collect/schema/limiter.py judges them): each pipe's busy share of its peak while
# the SM was active, the issue slots used, and the Speed-of-Light throughputs. Every name exists from
# Turing on (checked with `ncu --query-metrics --chip tu104|ga100|gh100`, Nsight Compute 2025.3).
# Field of KernelRow -> metric.
LIMITER_METRICS = {
    "pipe_tensor_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "pipe_fma_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "pipe_alu_pct": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "pipe_xu_pct": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "pipe_lsu_pct": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "issue_slots_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "sol_sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sol_memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sol_dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sol_l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "sol_l1_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
}
CORE_METRICS += list(LIMITER_METRICS.values())
# Tensor-pipe instructions: the generic counter, else HMMA (mma.sync) / GMMA (wgmma, Hopper).
TENSOR_INST_METRICS = ["sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum"]
TENSOR_INST_FALLBACK = "sm__inst_executed_pipe_tensor.sum"
# Tensor-core operation counters per instruction family and input type (dense only). Disjoint, so
# they add up; which ones exist depends on the GPU.
TENSOR_FLOP_METRICS = [
    "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp16_sparsity_off.sum",
    "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32_sparsity_off.sum",
    "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32_sparsity_off.sum",
    "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum",
    "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum",
]
# One counted tensor "op" is one FLOP: on the H200 fixture the Triton and cuDNN kernels count exactly
# 4·B·H·N²·d (tests/fixtures/ncu/).
TENSOR_FLOPS_PER_OP = 1.0
SHARED_BYTES_METRICS = ["sm__sass_data_bytes_mem_shared.sum"]
LOCAL_BYTES_METRICS = ["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"]
OPTIONAL_METRICS = [TENSOR_INST_FALLBACK, *TENSOR_INST_METRICS, *TENSOR_FLOP_METRICS, *SHARED_BYTES_METRICS,
                    *LOCAL_BYTES_METRICS]
