"""`python -m collect [PHASE ...]`: measure on this GPU and write data/runs/<run-id>/."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .phases import PHASE_ORDER
from .runner import REPO_ROOT, CollectConfig, run_collect


def parse_args(argv: list[str] | None = None) -> CollectConfig:
    ap = argparse.ArgumentParser(
        prog="python -m collect",
        description="Run the measurement phases on this machine's GPU and write JSON for the report.",
    )
    ap.add_argument("phases", nargs="*", metavar="PHASE", help=f"phases to run, in this order: {' '.join(PHASE_ORDER)} "
                    "(default: all)")
    ap.add_argument("--profile", choices=["quick", "full"], default="quick",
                    help="quick: a subset of every sweep, for a first look (default); full: the report's dataset")
    ap.add_argument("--run-id", help="folder name under --out (default: <device-slug>-<YYYYMMDD>, e.g. h200-20261129)")
    ap.add_argument("--resume", action="store_true", help="skip phases this run already completed")
    ap.add_argument("--model-path", help="decode phase: a local GPT-2 checkpoint folder (GPT2LMHeadModel."
                    "from_pretrained) instead of the default random weights; the report says which was used")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "runs", help="where runs live (default: data/runs)")
    a = ap.parse_args(argv)
    unknown = [p for p in a.phases if p not in PHASE_ORDER]
    if unknown:
        ap.error(f"unknown phase {', '.join(unknown)}; choose from {', '.join(PHASE_ORDER)}")
    return CollectConfig(phases=a.phases or list(PHASE_ORDER), profile=a.profile, run_id=a.run_id, out=a.out,
                         resume=a.resume, model_path=a.model_path)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    command = "python -m collect " + " ".join(shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    try:
        failed = run_collect(cfg, command=command)
    except RuntimeError as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 2
    if failed:
        print(f"collect: {failed} phase(s) failed; see 'phases' in the manifest. Others were kept.", file=sys.stderr)
    return 1 if failed else 0
