"""What each kernel of the fused decode step spends its time on, from Nsight Compute.

Runs one eager step of the fused step (kernels/decode/gpt2_fused.py, the kernels the graph variant replays)
under `ncu`, after steps that compile and warm it, and writes under --out: the raw metrics (raw.csv) and
summary.json, one record per kernel: its role, duration, DRAM bytes and throughput, how long its SMs were
busy against the kernel's span (the ramp and the tail), registers, local-memory loads (spills), achieved
occupancy and the top warp stall reasons. Kernels run one at a time under ncu, so a duration here is a
kernel's alone, without the overlap the graph step's programmatic dependent launches give it.

    python3 scripts/profile_fused_step.py --batch 64 --context 512 --cache int8 --out $OUT/ncu-b64-int8
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STALLS = ("long_scoreboard", "barrier", "membar", "short_scoreboard", "wait", "math_pipe_throttle", "lg_throttle",
          "mio_throttle", "not_selected", "selected", "no_instruction", "drain", "sleeping", "branch_resolving",
          "dispatch_stall", "imc_miss")
METRICS = {
    "duration_ns": "gpu__time_duration.sum",  # seconds in ncu_parse's base units: scaled below
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_active_cycles": "sm__cycles_active.avg",
    "sm_elapsed_cycles": "sm__cycles_elapsed.avg",
    "registers": "launch__registers_per_thread",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "local_loads": "smsp__sass_inst_executed_op_local_ld.sum",
    "issue_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
}
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
ROLES = (("_ln_qkv", "qkv"), ("_split_kv", "attention"), ("_ln_linear", "ln_linear"),
         ("_linear_residual", "residual"), ("_embed", "embed"), ("_argmax", "argmax"))


@dataclasses.dataclass(frozen=True)
class ProfileArgs:
    model: str
    batch: int
    context: int
    cache: str
    out: Path
    driver: bool


def parse(argv=None) -> ProfileArgs:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2", help="a kernels.decode.gpt2.PRESETS name")
    ap.add_argument("--batch", type=int, default=4, help="sequences decoded together")
    ap.add_argument("--context", type=int, default=1000, help="cached tokens when the profiled step runs")
    ap.add_argument("--cache", default="bf16", choices=("bf16", "int8"), help="the KV cache's kind")
    ap.add_argument("--out", type=Path, default=Path("fused-ncu"), help="folder for the metrics and the summary")
    ap.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)  # the process ncu profiles
    a = ap.parse_args(argv)
    return ProfileArgs(a.model, a.batch, a.context, a.cache, a.out, a.driver)


def drive(a: ProfileArgs) -> None:
    """Three eager steps to compile, autotune and warm; the fourth runs between cudaProfilerStart and Stop."""
    import torch

    from kernels.decode.session import random_started_session

    s = random_started_session(a.model, a.batch, a.context, a.cache, "fused")
    for _ in range(3):
        s.step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    s.step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def role_of(name: str) -> str:
    return next((role for key, role in ROLES if key in name), "other")


def summarize(raw_csv: str) -> list[dict]:
    """One record per kernel from ncu's raw page, in base units (collect/ncu_parse.py); a row ncu cut short (no
    duration) is left out."""
    from collect.ncu_parse import parse_raw_csv, stall_reasons

    out = []
    for k in parse_raw_csv(raw_csv):
        rec = {key: k.get(metric) for key, metric in METRICS.items()}
        if rec["duration_ns"] is None:
            continue
        rec["duration_ns"] *= 1e9
        rec.update(kernel=k.name[:60], role=role_of(k.name))
        if rec["sm_active_cycles"] and rec["sm_elapsed_cycles"]:
            rec["sm_busy_share"] = rec["sm_active_cycles"] / rec["sm_elapsed_cycles"]
        rec["top_stalls"] = sorted(stall_reasons(k).items(), key=lambda kv: -kv[1])[:4]
        out.append(rec)
    return out


def main(argv=None) -> int:
    a = parse(argv)
    if a.driver:
        drive(a)
        return 0
    from collect import ncu_setup

    ncu = ncu_setup.require_ncu()
    a.out.mkdir(parents=True, exist_ok=True)
    metrics = list(METRICS.values()) + [STALL_METRIC.format(s) for s in STALLS]
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", ",".join(metrics),
           "--csv", "--page", "raw", "--print-units", "base", sys.executable, __file__, "--driver", "--model", a.model, "--batch",
           str(a.batch), "--context", str(a.context), "--cache", a.cache]
    done = subprocess.run(cmd, env=os.environ.copy(), capture_output=True, text=True)
    (a.out / "raw.csv").write_text(done.stdout, encoding="utf-8")
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"ncu exited with status {done.returncode}: see its messages above.")
    recs = summarize(done.stdout)
    (a.out / "summary.json").write_text(json.dumps(recs, indent=1), encoding="utf-8")
    for r in recs:
        stalls = " ".join(f"{s}:{v:.1f}" for s, v in r["top_stalls"])
        print(f"{r['role']:10s} {r['duration_ns'] / 1e3:7.2f} us  dram {r['dram_read_bytes'] / 1e6:7.2f} MB "
              f"{r['dram_pct']:5.1f}%  busy {r.get('sm_busy_share', 0):.2f}  grid {r['grid']:.0f}x{r['block']:.0f} "
              f"regs {r['registers']:.0f}  occ {r['occupancy_pct']:.1f}%  local {r['local_loads']:.0f}  {stalls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
