"""Compiling for GPUs this machine does not have, from the tests: Triton's own ptxas, run in child
processes with the interpreter off (under TRITON_INTERPRET, @triton.jit makes nothing to compile)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def require_ptxas() -> None:
    """Skip the calling test where this Triton wheel ships no ptxas."""
    if not (Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this Triton wheel has no ptxas")


def compiler_env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}


def run_script_per_target(script: str, targets) -> list[list[str]]:
    """Run `script` once per target (its one argument), side by side (ptxas is single-threaded), and
    return every line each printed, split into words. A child that fails fails the test."""
    procs = [subprocess.Popen([sys.executable, "-c", script, str(t)], cwd=ROOT, env=compiler_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for t in targets]
    lines = []
    for p in procs:
        out, err = p.communicate(timeout=1200)
        assert p.returncode == 0, err[-3000:]
        lines += [line.split() for line in out.splitlines()]
    return lines
