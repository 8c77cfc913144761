"""Where the persistent decode step's warps wait, from Nsight Compute's PC sampling.

Runs one eager step of the persistent kernel (kernels/decode/persistent_step.py) under `ncu` after a step
that compiles and warms it, then writes, under --out: the report (persistent.ncu-rep), its details page
(details.csv), its SASS source page with stall samples per instruction (source.csv), and summary.json: the
samples by instruction role and by stall reason, and the instructions sampled most
(collect/ncu_source.hotspots). The trace of scripts/sweep_persistent.py says how long each tile waits
and works; this says on which instructions.

    python3 scripts/profile_persistent.py --out $OUT/ncu          # on the GPU, with ncu on PATH
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

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "SourceCounters", "LaunchStats", "Occupancy")


@dataclasses.dataclass(frozen=True)
class ProfileArgs:
    model: str
    batch: int
    context: int
    out: Path
    tiling: int
    driver: bool
    step: str = "persistent"


def parse(argv=None) -> ProfileArgs:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2", help="a kernels.decode.gpt2.PRESETS name")
    ap.add_argument("--batch", type=int, default=4, help="sequences decoded together (at most 16)")
    ap.add_argument("--context", type=int, default=1000, help="cached tokens when the profiled step runs")
    ap.add_argument("--tiling", type=int, default=0, help="index into persistent_step.CANDIDATE_TILINGS")
    ap.add_argument("--step", default="persistent", choices=("persistent", "persistent-ws"),
                    help="the plain-Triton persistent step, or the warp-specialized one (Hopper)")
    ap.add_argument("--out", type=Path, default=Path("persistent-ncu"), help="folder for the report and summaries")
    ap.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)  # the process ncu profiles
    a = ap.parse_args(argv)
    return ProfileArgs(a.model, a.batch, a.context, a.out, a.tiling, a.driver, a.step)


def drive(a: ProfileArgs) -> None:
    """Two eager steps: the first compiles and warms, the second is the one ncu profiles (--launch-skip 1)."""
    import torch

    from kernels.decode.persistent_step import CANDIDATE_TILINGS
    from kernels.decode.session import random_started_session

    options = dict(tiling=CANDIDATE_TILINGS[a.tiling]) if a.step == "persistent" else None
    s = random_started_session(a.model, a.batch, a.context, "bf16", a.step, headroom=4, step_options=options)
    for _ in range(2):
        s.step()
    torch.cuda.synchronize()
    s.check()


def summarize(source_csv: str) -> dict:
    from collect import ncu_source

    kernels = [k for k in ncu_source.parse_source_csv(source_csv) if "persistent" in k.name]
    if not kernels:
        return {"error": "the source page has no block for the persistent kernel"}
    return ncu_source.stall_summary(kernels[-1])


def main(argv=None) -> int:
    a = parse(argv)
    if a.driver:
        drive(a)
        return 0
    from collect import ncu_setup

    ncu = ncu_setup.require_ncu()
    a.out.mkdir(parents=True, exist_ok=True)
    rep = a.out / "persistent"
    cmd = [ncu, "--clock-control", "none", "--kernel-name", "regex:persistent_(step|ws)", "--launch-skip", "1",
           "--launch-count", "1", "--import-source", "no", "-f", "-o", str(rep)]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += [sys.executable, __file__, "--driver", "--model", a.model, "--batch", str(a.batch), "--context",
            str(a.context), "--tiling", str(a.tiling), "--step", a.step]
    print(" ".join(cmd), flush=True)
    rc = subprocess.run(cmd, env=os.environ.copy()).returncode
    if rc != 0:
        raise SystemExit(f"ncu exited with status {rc}: see its messages above.")
    pages = {"details.csv": ["--page", "details", "--csv"],
             "source.csv": ["--page", "source", "--csv", "--print-source", "sass"]}
    for name, page in pages.items():
        done = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", *page], capture_output=True, text=True)
        (a.out / name).write_text(done.stdout + done.stderr, encoding="utf-8")
    summary = summarize((a.out / "source.csv").read_text(encoding="utf-8"))
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "hotspots"}, indent=1))
    for h in summary.get("hotspots", [])[:25]:
        print(f"{h['share_pct']:5.1f}% {h['role']:10s} {h['top_reason']}:{(h['top_reason_pct'] or 0):.0f}% {h['sass'][:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
