#!/usr/bin/env bash
# Record a small, real Nsight Compute export for the parser tests (tests/fixtures/ncu/).
#
#   bash scripts/gpu_profile_fixture.sh OUT_DIR      # from the repository root, on a GPU box
#
# Uses the profile phase's own code (python -m collect.profile), so the ncu command line is
# exactly the phase's. Writes into OUT_DIR:
#   ncu_version.txt            `ncu --version`
#   query_metrics.txt          `ncu --query-metrics` (which metrics this GPU has)
#   tiny/                      naive + sdpa + triton at B=1 H=2 N=256 d=64 fp16:
#                              raw.csv (ncu --import ... --page raw --csv --print-units base),
#                              ncu_console.txt (ncu stdout+stderr), cases.json, target_result.json,
#                              profile.json (what the phase makes of it), profile.ncu-rep
#   tiny_ncu_report.json       the same report read through ncu's Python module (cross-check)
#   nomatch/                   the same command with a kernel filter that matches nothing
#   headline_probe/            naive + triton at the headline shape (timing of the real phase)
#   timings.txt, *.log         wall time and output of each step
# Never changes clocks (the phase passes --clock-control none). Budget: under 60 s.
set -u
OUT=${1:?usage: bash scripts/gpu_profile_fixture.sh OUT_DIR}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
step() {  # step NAME TIMEOUT CMD...: run, log, time; a failing step never stops the others
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_s=$(( $(date +%s) - t0 )) total_s=$(elapsed)" | tee -a "$OUT/timings.txt"
}

NCU=${NCU:-$(command -v ncu || true)}
if [ -z "$NCU" ]; then echo "ncu not found on PATH" | tee "$OUT/ncu_version.txt"; fi
"${NCU:-ncu}" --version >"$OUT/ncu_version.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv >"$OUT/nvidia_smi.txt" 2>&1 || true

step query_metrics 20 sh -c "'${NCU:-ncu}' --query-metrics >'$OUT/query_metrics.txt' 2>&1"
step tiny 35 "$PY" -m collect.profile --tiny --keep "$OUT/tiny"

# Cross-check through ncu's own Python module: names, NVTX ranges and every metric with its unit.
step ncu_report 10 "$PY" - "$OUT/tiny/profile.ncu-rep" "$OUT/tiny_ncu_report.json" <<'EOF'
import glob, json, sys
paths = sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python")) + \
        sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"))
sys.path[:0] = paths[-1:]
import ncu_report
rep = ncu_report.load_report(sys.argv[1])
out = []
for ri in range(rep.num_ranges()):
    rng = rep.range_by_idx(ri)
    for ai in range(rng.num_actions()):
        a = rng.action_by_idx(ai)
        item = {"name": a.name(), "nvtx": [], "metrics": {}}
        try:
            st = a.nvtx_state()
            for d in st.domains():
                dom = st.domain_by_id(d)
                item["nvtx"].append({"domain": dom.name(), "push_pop": list(dom.push_pop_ranges())})
        except Exception as exc:
            item["nvtx_error"] = repr(exc)
        for n in a.metric_names():
            m = a.metric_by_name(n)
            try:
                v = m.as_double() if m.metric_type() != ncu_report.IMetric.MetricType_STRING else m.as_string()
            except Exception:
                v = m.as_string()
            item["metrics"][n] = [v, m.unit()]
        out.append(item)
json.dump(out, open(sys.argv[2], "w"), indent=0, default=str)
print(len(out), "actions")
EOF

# The failure path: a kernel filter that matches nothing (ncu: "No kernels were profiled").
step nomatch 20 "$PY" -m collect.profile --tiny --only naive --keep "$OUT/nomatch" \
  --extra-flag=--kernel-name --extra-flag='regex:^no_such_kernel_xyz$'

# How long the real cases take under ncu, if time is left (the phase must fit in 2 minutes).
LEFT=$(( 57 - $(elapsed) ))
if [ "$LEFT" -gt 8 ]; then
  step headline_probe "$LEFT" "$PY" -m collect.profile --headline --only naive,triton --keep "$OUT/headline_probe"
else
  echo "headline_probe skipped: $(elapsed) s used" | tee -a "$OUT/timings.txt"
fi
rm -f "$OUT"/headline_probe/profile.ncu-rep "$OUT"/nomatch/profile.ncu-rep
echo "done in $(elapsed) s" | tee -a "$OUT/timings.txt"
