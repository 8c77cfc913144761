#!/usr/bin/env bash
# Nsight Compute on our causal kernel against cuDNN and our non-causal kernel at the goal shape
# (B=4 H=32 N=4096 d=128 fp16), then the dev script's run-5 candidates. Writes into $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-ncu}
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
probe() {  # name, then probe arguments
    local name=$1; shift
    timeout 150 $NCU --profile-from-start off --clock-control none $SECTIONS --print-units base \
        python3 scripts/gpu_causal_probe.py "$@" > "$OUT/ncu_$name.txt" 2>&1
    echo "ncu $name: exit $? ($(grep -c '^  [_a-zA-Z]' "$OUT/ncu_$name.txt") kernel headers)"
}
probe pairs_causal --impl v8-causal-pairs --causal
probe v4_causal --impl v4-warpspec --causal
probe cudnn_causal --impl sdpa-cudnn --causal
probe v6_full --impl v6-persistent
