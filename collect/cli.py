"""`python -m collect [PHASE ...]`: measure on this GPU and write data/runs/<run-id>/.
`python -m collect diff A B` and `python -m collect noise RUN...` compare runs already written, and `python -m
collect compact RUN...` compresses them (tools_cli.py)."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from . import device_choices
from .budget import PHASE_BUDGET_ENVS
from .phases import PHASE_ORDER
from .runner import REPO_ROOT, CollectConfig, run_collect
from .tools_cli import SUBCOMMANDS

TORCH_MISSING = ("collect: this Python ({exe}) cannot import {module}. `make collect` measures with the Python that "
                 "already has torch, triton, numpy, transformers and tqdm (a GPU image usually does); name it with "
                 "`make collect PYTHON=/path/to/python`, or install them into this one "
                 "(`{exe} -m pip install torch triton numpy transformers tqdm`).")
# Without a GPU an install would not help (and PyPI's torch for Linux is a download of a few GB): say so first.
NO_GPU = ("collect: this machine has no NVIDIA GPU that nvidia-smi can see, and this Python ({exe}) cannot import "
          "{module}. `make collect` measures on an NVIDIA GPU (T4 or newer); to read the report from the committed "
          "runs here, run `make serve`. On a GPU box, name the Python that has torch: `make collect PYTHON=...`.")


def parse_args(argv: list[str] | None = None) -> CollectConfig:
    ap = argparse.ArgumentParser(
        prog="python -m collect",
        description="Run the measurement phases on this machine's GPU and write JSON for the report.",
        epilog=f"Rehearsal (to check another GPU's code paths on this one, not for reports): "
               f"{device_choices.REHEARSE_ENV}=t4 makes every phase choose as on a T4 from a T4's device facts "
               "(tile configs, shared-memory limit, float16 decode, no Hopper path, no iterations, its memory); the "
               "run is labelled a rehearsal. "
               "Comparing runs (no GPU needed): `python -m collect diff RUN_A RUN_B` (see its --help) and "
               "`python -m collect noise RUN...` (the noise floor from repeat runs of one commit); and "
               "`python -m collect compact RUN...` keeps finished runs' phase files gzip-compressed.",
    )
    ap.add_argument("phases", nargs="*", metavar="PHASE", help=f"phases to run, in this order: {' '.join(PHASE_ORDER)} "
                    "(default: all)")
    ap.add_argument("--profile", choices=["quick", "full"], default="quick",
                    help="quick: a subset of every sweep, for a first look (default); full: the report's dataset")
    ap.add_argument("--run-id", help="folder name under --out (default: <device-slug>-<YYYYMMDD>, e.g. h200-20261129)")
    ap.add_argument("--resume", action="store_true", help="skip phases this run already completed; continue the others "
                    "from the rows they saved, measuring again rows skipped for time")
    ap.add_argument("--model-path", help="decode phase: a local GPT-2 checkpoint folder (GPT2LMHeadModel."
                    "from_pretrained) instead of the default random weights; the report says which was used")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "runs", help="where runs live (default: data/runs)")
    ap.add_argument("--force-portable", action="store_true",
                    help="hold our kernel to its portable path (no Hopper kernel), in every phase and child process "
                         f"(sets {device_choices.PORTABLE_ONLY_ENV}=1)")
    ap.add_argument("--max-memory", metavar="SIZE", type=_size,
                    help="allocate at most SIZE on the GPU, e.g. 15GiB or 16GB: cases predicted not to fit are "
                         "recorded as out of memory, and the allocator refuses beyond it")
    ap.add_argument("--time-limit", metavar="SECONDS", type=float,
                    help="end the whole collect within about this many seconds, scaled like the phase budgets to a "
                         "GPU slower than an H200: each phase's budget shrinks to what is left, and cases past it "
                         "are recorded as skipped (default: 530 for --profile full, sized to fit 9 minutes on an "
                         "H200; none for quick; 0: none)")
    a = ap.parse_args(argv)
    if a.time_limit is not None and a.time_limit < 0:
        ap.error(f"--time-limit must be 0 (none) or a number of seconds, got {a.time_limit}")
    unknown = [p for p in a.phases if p not in PHASE_ORDER]
    if unknown:
        ap.error(f"unknown phase {', '.join(unknown)}; choose from {', '.join(PHASE_ORDER)}")
    try:
        device_choices.rehearsal_name()
    except ValueError as exc:
        ap.error(str(exc))
    return CollectConfig(phases=a.phases or list(PHASE_ORDER), profile=a.profile, run_id=a.run_id, out=a.out,
                         resume=a.resume, model_path=a.model_path, force_portable=a.force_portable,
                         max_memory=a.max_memory, time_limit_s=a.time_limit)


def _size(text: str) -> int:
    try:
        return device_choices.parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def apply_environment(cfg: CollectConfig) -> None:
    """Settings the kernels read from the environment, set here so every child process (the
    profiler's target, compile workers) inherits them."""
    rehearsal = device_choices.rehearsal_name()
    if cfg.force_portable:
        os.environ[device_choices.PORTABLE_ONLY_ENV] = "1"
    if rehearsal:
        # The kernels choose as on the rehearsed GPU: its paths only (a T4's Turing kernel runs its
        # sm75 build here through its PTX), and its tile configs for the portable kernel.
        facts = device_choices.REHEARSAL_DEVICES[rehearsal]
        os.environ[device_choices.REHEARSE_TARGET_ENV] = device_choices.target_name(facts)
        os.environ[device_choices.TUNE_AS_ENV] = device_choices.tuning_target(facts)


def recorded_command(argv: list[str]) -> str:
    """The command as the manifest records it, with the environment settings that change what the run
    holds (a rehearsal's device, each phase's budget override), so that running it again measures the same rows."""
    env = {device_choices.REHEARSE_ENV: device_choices.rehearsal_name()}
    env.update({name: os.environ.get(name) for name in PHASE_BUDGET_ENVS.values()})
    prefix = "".join(f"{name}={shlex.quote(value)} " for name, value in env.items() if value)
    return prefix + "python -m collect " + " ".join(shlex.quote(x) for x in argv)


def _missing_gpu_stack() -> str | None:
    """The first module of the GPU stack this Python cannot import, if any."""
    import importlib.util

    for module in ("torch", "triton", "numpy"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the loaded driver sees


def _nvidia_gpu() -> bool:
    """Whether the NVIDIA driver sees a GPU here (asked without torch, which may be what is missing)."""
    import shutil
    import subprocess

    if NVIDIA_GPUS.is_dir() and any(NVIDIA_GPUS.iterdir()):
        return True
    exe = shutil.which("nvidia-smi")
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20) if exe else None
    except (OSError, subprocess.SubprocessError):
        return False
    return bool(out and out.returncode == 0 and "GPU" in out.stdout)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in SUBCOMMANDS:  # a word no phase takes (the registry is checked for it)
        from .tools_cli import main as tools_main

        return tools_main(args)
    cfg = parse_args(argv)
    missing = _missing_gpu_stack()
    if missing:
        message = TORCH_MISSING if _nvidia_gpu() else NO_GPU
        print(message.format(exe=sys.executable, module=missing), file=sys.stderr)
        return 2
    apply_environment(cfg)
    command = recorded_command(sys.argv[1:] if argv is None else argv)
    try:
        failed = run_collect(cfg, command=command)
    except (RuntimeError, ValueError) as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 2
    if failed:
        print(f"collect: {failed} phase(s) failed; see 'phases' in the manifest. Others were kept.", file=sys.stderr)
    return 1 if failed else 0
