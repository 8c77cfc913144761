"""Ours and FlashAttention-4 at one shape, instruction by instruction, from Nsight Compute.

Profiles one call of each implementation (after calls that compile and warm it) with the SourceCounters,
InstructionStats and WarpStateStats sections, and writes under --out, per implementation: the SASS source
page with each instruction's executions and stall samples (<impl>-source.csv) and summary.json: executed
instructions by opcode (the opcode's first word, e.g. FMNMX, MUFU.EX2 -> MUFU) per tensor-core instruction,
and stall samples by reason. Two kernels doing the same matmuls issue the same tensor-core instructions, so
the counts per tensor-core instruction say which one spends more of its issue slots on what.

    python3 scripts/profile_attention_sass.py --head-dim 128 --seq-len 4096 --out $OUT/sass
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")

SECTIONS = ("SourceCounters", "InstructionStats", "WarpStateStats", "LaunchStats")
IMPLS = ("ours", "fa4")
TENSOR_OPCODES = ("HGMMA", "HMMA")


@dataclasses.dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: str


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4, help="batch size")
    ap.add_argument("--heads", type=int, default=32, help="attention heads")
    ap.add_argument("--seq-len", type=int, default=4096, help="queries and keys per head")
    ap.add_argument("--head-dim", type=int, default=128, help="head size")
    ap.add_argument("--causal", action="store_true", help="mask future keys")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="input dtype")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma-separated: ours, fa4")
    ap.add_argument("--out", type=Path, default=Path("attention-sass"), help="folder for the pages and the summary")
    ap.add_argument("--driver", default=None, help=argparse.SUPPRESS)  # the implementation ncu profiles
    a = ap.parse_args(argv)
    return a, Shape(a.batch, a.heads, a.seq_len, a.head_dim, a.causal, a.dtype)


def drive(impl: str, s: Shape) -> None:
    """Three calls to compile and warm, then one between cudaProfilerStart and Stop."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(s.batch, s.heads, s.seq_len, s.head_dim, device="cuda", dtype=getattr(torch, s.dtype),
                           generator=g) for _ in range(3))
    if impl == "fa4":
        from kernels.attention.flash_attn4 import fa4_attention, unavailable_reason

        why = unavailable_reason(q.device)
        if why:
            raise SystemExit(why)
        call = lambda: fa4_attention(q, k, v, causal=s.causal)  # noqa: E731
    else:
        from kernels.attention import flash_attention

        call = lambda: flash_attention(q, k, v, causal=s.causal)  # noqa: E731
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def summarize(source_csv: str) -> dict:
    """Executions and stall samples by opcode family (MUFU.EX2 -> MUFU), from ncu's SASS source page: the
    kernel block with the most instructions (FA4's call also launches small kernels)."""
    from collect.ncu_source import parse_source_csv

    kernel = max(parse_source_csv(source_csv), key=lambda k: len(k.instructions), default=None)
    if kernel is None or not kernel.instructions:
        return {"error": "no SASS rows in the source page"}
    executed, samples = Counter(), Counter()
    for ins in kernel.instructions:
        family = ins.opcode.split(".")[0]
        executed[family] += ins.executed
        samples[family] += ins.samples
    tensor = sum(executed[o] for o in TENSOR_OPCODES) or 1.0
    return {
        "instructions": sum(executed.values()),
        "tensor_instructions": tensor,
        "per_tensor_instruction": {o: round(n / tensor, 2) for o, n in executed.most_common(40)},
        "sample_share_pct": {o: round(100 * n / (sum(samples.values()) or 1), 2) for o, n in samples.most_common(25)},
    }


def main(argv=None) -> int:
    a, shape = parse(argv)
    if a.driver:
        drive(a.driver, shape)
        return 0
    from collect import ncu_setup

    ncu = ncu_setup.require_ncu()
    a.out.mkdir(parents=True, exist_ok=True)
    args = ["--batch", str(shape.batch), "--heads", str(shape.heads), "--seq-len", str(shape.seq_len),
            "--head-dim", str(shape.head_dim), "--dtype", shape.dtype] + (["--causal"] if shape.causal else [])
    summary = {"shape": dataclasses.asdict(shape)}
    for impl in a.impls.split(","):
        rep = a.out / impl
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--import-source", "no", "-f",
               "-o", str(rep)]
        for sec in SECTIONS:
            cmd += ["--section", sec]
        cmd += [sys.executable, __file__, "--driver", impl, *args]
        done = subprocess.run(cmd, env=os.environ.copy(), capture_output=True, text=True)
        if done.returncode != 0:
            summary[impl] = {"error": (done.stdout + done.stderr)[-2000:]}
            print(f"{impl}: ncu failed:\n{summary[impl]['error']}", flush=True)
            continue
        page = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
                              capture_output=True, text=True).stdout
        (a.out / f"{impl}-source.csv").write_text(page, encoding="utf-8")
        details = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "details", "--csv"],
                                 capture_output=True, text=True).stdout
        (a.out / f"{impl}-details.csv").write_text(details, encoding="utf-8")
        rep.with_suffix(".ncu-rep").unlink(missing_ok=True)  # large, and the pages hold what is read here
        summary[impl] = summarize(page)
        print(impl, json.dumps(summary[impl]), flush=True)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
