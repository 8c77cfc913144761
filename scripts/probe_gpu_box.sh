#!/usr/bin/env bash
# One-off look at the GPU box's tools, saved under $1 (the device tool's $OUT).
out=${1:?usage: probe_gpu_box.sh OUTDIR}
mkdir -p "$out"
{
  nvidia-smi; which ncu; ncu --version; python3 --version
  python3 -c "import torch, triton, transformers, numpy; print(torch.__version__, triton.__version__, transformers.__version__, numpy.__version__)"
  python3 -c "import triton; print(triton.runtime.driver.active.utils.get_device_properties(0))"
  python3 -c "import torch; p=torch.cuda.get_device_properties(0); print(p); print([a for a in dir(p) if not a.startswith('_')])"
} > "$out/probe.txt" 2>&1
cat > /tmp/mm.py <<'PY'
import torch
a = torch.randn(1024, 1024, device="cuda", dtype=torch.half)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.cuda.nvtx.range_push("mm")
b = a @ a
c = torch.softmax(b.float(), -1)
torch.cuda.nvtx.range_pop()
torch.cuda.profiler.stop()
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none --profile-from-start off --csv --page raw --print-units base \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,sm__inst_executed_pipe_tensor.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  --section Occupancy --section LaunchStats --section WarpStateStats \
  -o "$out/probe" python3 /tmp/mm.py > "$out/ncu_probe_stdout.txt" 2>&1
ncu --import "$out/probe.ncu-rep" --csv --page raw --print-units base > "$out/ncu_probe_raw.csv" 2>&1
ncu --import "$out/probe.ncu-rep" --csv --page details --print-units base > "$out/ncu_probe_details.csv" 2>&1
rm -f "$out/probe.ncu-rep"
