"""The decode kernels compile for real GPUs (T4, A100, H100/H200) without spilling registers.

The interpreter runs a kernel's maths but not its compilation: a shape error in an op that does not
broadcast, or a tile that overflows the register file, only shows on a GPU. Triton's own ptxas can
compile for a target GPU on a machine without one, so this catches both here.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r'''
import re, subprocess, sys, tempfile, os
from pathlib import Path
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernels import decode_attention as da, kv_quant as kq

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"

def compile_for(cc, fn, sig, consts, num_warps, num_stages=2):
    # What the JIT sees on a GPU: 16-byte aligned pointers, strides divisible by 16.
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig)
             if sig[n].startswith("*") or (n.startswith("stride") and n != "stride_lens")}
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", cc, 32),
                       options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    # ptxas puts spilled registers on the stack frame; a Triton kernel that does not spill has none.
    regs, stack, local = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", out).groups()
    return int(regs), int(stack) + int(local)

split = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "KScale": "*bf16", "VScale": "*bf16", "Lens": "*i32",
         "OPart": "*fp32", "LsePart": "*fp32", **{s: "i32" for s in (
             "stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh", "stride_vn",
             "stride_sb", "stride_sh", "stride_lens", "H", "num_splits")},
         "qk_scale_log2": "fp32", "len_bucket": "i32", "HEAD_DIM": "constexpr", "BLOCK_D": "constexpr",
         "BLOCK_N": "constexpr", "IS_INT8": "constexpr", "USE_DOT": "constexpr", "UPCAST": "constexpr"}
merge = {"OPart": "*fp32", "LsePart": "*fp32", "Out": "*bf16", "stride_ob": "i32", "stride_oh": "i32", "H": "i32",
         "num_splits": "i32", "HEAD_DIM": "constexpr", "BLOCK_D": "constexpr", "BLOCK_S": "constexpr"}
store = {"K": "*bf16", "V": "*bf16", "KQ": "*i8", "VQ": "*i8", "KS": "*fp32", "VS": "*fp32", "Pos": "*i64",
         **{s: "i32" for s in ("stride_kb", "stride_kh", "stride_vb", "stride_vh", "stride_qb", "stride_qh",
                               "stride_qn", "stride_sb", "stride_sh", "H")},
         "HEAD_DIM": "constexpr", "BLOCK_D": "constexpr"}
for cc in map(int, sys.argv[1:]):
    for int8 in (False, True):
        sig = dict(split, **({"K": "*i8", "V": "*i8", "KScale": "*fp32", "VScale": "*fp32"} if int8 else {}))
        for cfg in da.AUTOTUNE_CONFIGS:
            if cfg.kwargs["USE_DOT"] and cc < 80:
                continue  # pruned at run time on a GPU older than Ampere
            for d in (64, 128):
                consts = {"HEAD_DIM": d, "BLOCK_D": d, "IS_INT8": int8, "UPCAST": False, **cfg.kwargs}
                regs, spill = compile_for(cc, da._split_kv_kernel, sig, consts, cfg.num_warps, cfg.num_stages)
                print("split", cc, int8, d, cfg.kwargs["BLOCK_N"], cfg.kwargs["USE_DOT"], cfg.num_warps, regs, spill)
    print("merge", cc, *compile_for(cc, da._merge_kernel, merge, {"HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_S": 64}, 4))
    print("store", cc, *compile_for(cc, kq._quantize_store_kernel, store, {"HEAD_DIM": 64, "BLOCK_D": 64}, 1))
'''


def test_kernels_compile_for_t4_a100_and_h100_without_spills():
    if not (Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this Triton wheel has no ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for real, not interpret
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "75", "80", "90"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line.split() for line in proc.stdout.splitlines()]
    assert sum(line[0] == "split" for line in lines) >= 3 * 2 * 2 * 2  # every target, dtype, head_dim, a few configs
    assert sum(line[0] in ("merge", "store") for line in lines) == 6
    spilled = [line for line in lines if int(line[-1]) != 0]
    assert not spilled, f"kernels spill to local memory: {spilled}"
