"""Code built for an older GPU, assembled from its PTX for a newer one (kernels/retarget.py).

Launching needs a GPU; what can be checked here is the build: the launch the wrapper makes is caught
(kernels/aot.py), compiled for sm75, and its PTX assembled for sm90 by Triton's own ptxas. The
result must be sm90 code from sm75 PTX, with the sm75 build's resources kept for the fit check.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offline_compile import require_ptxas

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, math, subprocess, tempfile, torch
from triton import knobs
from kernels import aot, retarget
from kernels.attention.turing import _launch
q = aot.meta(2, 3, 1000, 64, dtype=torch.float16)
with aot.caught_launches() as launches:
    _launch(q, q, q, torch.empty_like(q), True, 0.125)
compiled, bound, build = retarget._port(launches[0], aot.TARGETS["sm75"], 90)
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(compiled.kernel); f.flush()
    sass = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f.name], capture_output=True, text=True).stdout
print(json.dumps(dict(build=build.__dict__, fits=build.fits(), args=list(bound)[:4], grid=list(launches[0].grid),
                      target=compiled.metadata.target.arch, header=[l for l in sass.splitlines() if "headerflags" in l],
                      mma=sorted({w for w in sass.split() if w.startswith("HMMA")}))))
"""


def test_an_sm75_build_is_assembled_for_sm90_from_its_ptx():
    import json

    require_ptxas()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    build = got["build"]
    assert build["target"] == "sm75" and build["ran_on"] == "sm90" and got["target"] == 75
    assert build["tensor_core_ops"] == ["mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"]
    assert got["fits"] == [True, ""] and build["shared_bytes"] <= 64 * 1024
    # sm90 machine code whose virtual architecture is sm75: the T4's PTX, not an sm90 recompile
    assert any("EF_CUDA_SM90" in h and "VIRTUAL_SM(EF_CUDA_SM75)" in h for h in got["header"]), got["header"]
    assert got["mma"] and all(op.startswith("HMMA.1688") for op in got["mma"]), got["mma"]  # m16n8k8
    assert got["args"] == ["Q", "K", "V", "O"] and got["grid"] == [16, 6]


def test_a_build_that_overflows_its_target_says_what_overflows():
    from kernels.retarget import PortedBuild

    ok, why = PortedBuild("_attn_fwd", "sm75", "sm90", 255, 4680, 98304).fits()
    assert not ok and "98304 bytes of shared memory" in why and "sm75 allows 65536" in why
    assert PortedBuild("_attn_fwd", "sm80", "sm90", 255, 0, 98304).fits() == (True, "")


def test_it_refuses_targets_it_does_not_know():
    from kernels.retarget import built_for

    with pytest.raises(ValueError, match="unknown target 'sm70'"):
        with built_for("sm70"):
            pass
