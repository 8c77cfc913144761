"""The env phase's memory-hierarchy microbenchmarks: they compile for every GPU generation the
report supports, read what they claim to read, and the L2 kernel's arithmetic is right.

Their speed is measured by `make collect`; here only that the kernels are what the rates assume.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Compiled in a child process: TRITON_INTERPRET must be off there, and on in this one for the
# interpreter test below, and Triton reads it when a kernel is defined.
SCRIPT = r'''
import sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource
from kernels import membench as m

for cc in (75, 80, 86, 89, 90):
    t = GPUTarget("cuda", cc, 32)
    l2 = triton.compile(ASTSource(m._l2_read, {"src": "*fp32", "out": "*fp32", "n_chunks": "i32", "reps": "i32"},
                                  {"CHUNK": m.L2_CHUNK}), target=t, options={"num_warps": 4})
    sm = triton.compile(GluonASTSource(m._smem_read, {"out": "*fp32", "reps": "i32"},
                                       {"ROWS": m.SMEM_ROWS, "COLS": m.SMEM_COLS, "BUFFERS": m.SMEM_BUFFERS}),
                        target=t, options={"num_warps": 4})
    l2_ptx, sm_ptx = l2.asm["ptx"], sm.asm["ptx"]
    # the L2 loads bypass L1 (.cg), and the shared-memory loop reads 16 bytes per load
    print(cc, "ld.global.cg" in l2_ptx, "ld.shared.v4" in sm_ptx, sm.metadata.shared)
'''


def test_kernels_compile_for_every_target_and_load_what_the_rates_assume():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split() for line in out.stdout.strip().splitlines()]
    assert [int(x[0]) for x in lines] == [75, 80, 86, 89, 90]
    for cc, cg, v4, shared in lines:
        assert cg == "True" and v4 == "True", (cc, cg, v4)
        # both tiles fit the smallest per-block limit the report supports (a T4's 64 KiB)
        assert 2 * 32 * 128 * 4 <= int(shared) <= 64 * 1024


def test_l2_kernel_sums_every_chunk_it_claims_to_read(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import importlib

    import torch

    import kernels.membench as m
    m = importlib.reload(m)  # the decorator reads TRITON_INTERPRET when the kernel is defined
    chunks, programs, reps = 3, 4, 5
    buf = torch.arange(chunks * m.L2_CHUNK, dtype=torch.float32)
    out = torch.empty(programs, dtype=torch.float32)
    nbytes = m.l2_read(buf, out, reps)
    assert nbytes == programs * reps * m.L2_CHUNK * 4
    per_chunk = buf.view(chunks, m.L2_CHUNK).sum(1)
    want = [sum(per_chunk[(p + i * programs) % chunks] for i in range(reps)) for p in range(programs)]
    assert torch.allclose(out, torch.stack(want))
    with pytest.raises(ValueError, match="multiple of"):
        m.l2_read(torch.zeros(100), out, 1)
