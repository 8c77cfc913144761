"""Static SASS of an attention kernel's key loop, counted by opcode, on a machine without a GPU.

Why: Nsight Compute counts what ran, but only on the GPU machine and per whole kernel. Reading the
compiled loops here tells, per key step, which instructions one kernel issues that another does not
(kernels/attention/notes.md, "Static SASS of g32 beside FlashAttention-4's sm90 forward").

It disassembles each cubin with Triton's own cuobjdump, finds every loop (a branch back to an
earlier address), and for each loop that holds HGMMA prints its size, its HGMMA count and its
opcodes (the first word of each instruction, or the full opcode with --full), in total and per
HGMMA, and where the step's work sits: instructions from the loop's top to its first HGMMA, from the
last MUFU to the back-branch, and how much of the softmax runs before the wait for the P V matmul.
ptxas puts each mbarrier wait's retry out of line after EXIT: those instructions are not counted.

  .venv/bin/python scripts/static_sass.py --gluon g32 --gluon g37      # compile ours for sm90 here
  .venv/bin/python scripts/static_sass.py fa4.cubin --dump-loop 0      # any cubin, e.g. FA4's

FlashAttention-4's cubin comes from its own compile in fake-tensor mode (no GPU needed):
FLASH_ATTENTION_ARCH=sm_90 CUTE_DSL_ARCH=sm_90a FLASH_ATTENTION_NUM_SMS=132 CUTE_DSL_KEEP=ptx,cubin
CUTE_DSL_DUMP_DIR=DIR, then flash_attn.cute.interface._flash_attn_fwd on torch FakeTensorMode "cuda"
tensors; the CuTe DSL wheels must match the running Python (the .fa4 archive is cp312).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def disassemble(cubin: Path) -> tuple[list[tuple[int, str, str, str]], str]:
    """(address, predicate, opcode, operands) of every instruction, and cuobjdump's resource usage."""
    sass = subprocess.run([str(BIN / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    usage = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True,
                           check=True).stdout
    insts = [(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip())
             for m in LINE.finditer(sass)]
    return insts, " ".join(re.findall(r"REG:\d+ STACK:\d+|LOCAL:\d+", usage))


def loops(insts):
    """(start, end) address ranges of the loops that hold HGMMA: a backward BRA's target to the BRA
    itself, innermost first. ptxas puts each mbarrier wait's retry out of line, after the kernel's
    EXIT: its branch back to just after the forward branch that left is no loop and is skipped."""
    fwd = []
    spans = []
    for addr, _, op, args in insts:
        m = re.match(r"(0x[0-9a-f]+)", args)
        if not (op.startswith("BRA") and m):
            continue
        target = int(m.group(1), 16)
        if target > addr:
            fwd.append((addr, target))
        elif not any(target - 0x40 <= s < target and target < t <= addr for s, t in fwd):
            spans.append((target, addr))
    hg = [a for a, _, op, _ in insts if op.startswith("HGMMA")]
    spans = sorted(s for s in spans if any(s[0] <= a <= s[1] for a in hg))
    # a loop that holds another HGMMA loop is the walk over query tiles: keep the inner ones
    return [s for s in spans if not any(t != s and s[0] <= t[0] and t[1] <= s[1] for t in spans)]


def count(insts, span, full):
    body = [i for i in insts if span[0] <= i[0] <= span[1]]
    ops = collections.Counter(op if full else op.split(".")[0] for _, _, op, _ in body)
    return body, ops


def landmarks(body):
    """Where the step's work sits: instructions from the loop's top to its first HGMMA, from the last
    MUFU to the back-branch, and which of the softmax's MUFU and FFMA come before the wait for every
    wgmma group (WARPGROUP.DEPBAR.LE gsb0, 0x0), i.e. run while the P V matmul is still in flight."""
    ops = [op for _, _, op, _ in body]
    first_hg = next(i for i, op in enumerate(ops) if op.startswith("HGMMA"))
    mufu = [i for i, op in enumerate(ops) if op.startswith("MUFU")]
    wait0 = [i for i, (_, _, op, args) in enumerate(body) if op.startswith("WARPGROUP.DEPBAR") and args.endswith("0x0")]
    fr = f"top to first HGMMA {first_hg}"
    if mufu:
        fr += f"; last MUFU to back-branch {len(ops) - 1 - mufu[-1]}"
    if wait0:
        w = wait0[0]
        before = collections.Counter(op.split(".")[0] for op in ops[:w])
        fr += (f"; before the last wgmma wait: MUFU {before['MUFU']}/{len(mufu)}, "
               f"FFMA {before['FFMA']}/{ops.count('FFMA')}, FMNMX {before['FMNMX']}/{ops.count('FMNMX')}")
    return fr


def main(argv=None):
    first, rest = __doc__.split("\n\n", 1)
    ap = argparse.ArgumentParser(description=first, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    ap.add_argument("cubins", nargs="*", type=Path, help="cubin files to read")
    ap.add_argument("--gluon", action="append", default=[], metavar="VERSION",
                    help="compile this Gluon version for sm90 here (needs TRITON_INTERPRET unset; repeatable)")
    ap.add_argument("--dtype", default="bfloat16", help="dtype for --gluon (default bfloat16)")
    ap.add_argument("--head-dim", type=int, default=128, help="head size for --gluon (default 128)")
    ap.add_argument("--causal", action="store_true", help="compile --gluon causal (default non-causal)")
    ap.add_argument("--full", action="store_true", help="count full opcodes (HGMMA.64x128x16.F32.BF16) not first words")
    ap.add_argument("--dump-loop", type=int, metavar="N", help="print loop N's instructions of each kernel")
    ap.add_argument("--keep", type=Path, help="folder to keep --gluon's cubin and PTX in")
    a = ap.parse_args(argv)
    cubins = list(a.cubins)
    if a.gluon:
        os.environ.pop("TRITON_INTERPRET", None)
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import torch  # the project's kernels take torch dtypes
        from kernels.attention import gluon as G
        out = a.keep or Path(tempfile.mkdtemp(prefix="static_sass_"))
        out.mkdir(parents=True, exist_ok=True)
        for name in a.gluon:
            k = G.compile_for_target(name, getattr(torch, a.dtype), a.head_dim, a.causal)
            path = out / f"{name}-{a.dtype}-d{a.head_dim}-{'causal' if a.causal else 'full'}.cubin"
            path.write_bytes(k.asm["cubin"])
            path.with_suffix(".ptx").write_text(k.asm["ptx"])
            cubins.append(path)
    for cubin in cubins:
        insts, usage = disassemble(cubin)
        total = collections.Counter(op.split(".")[0] for _, _, op, _ in insts)
        print(f"== {cubin.name}: {len(insts)} instructions, {total['HGMMA']} HGMMA; {usage}")
        for n, span in enumerate(loops(insts)):
            body, ops = count(insts, span, a.full)
            hg = sum(v for k, v in ops.items() if k.startswith("HGMMA"))
            print(f"-- loop {n}: {span[0]:#x}-{span[1]:#x}, {len(body)} instructions, {hg} HGMMA, "
                  f"{len(body) / max(hg, 1):.1f} a HGMMA")
            print("   " + landmarks(body))
            for op, c in ops.most_common():
                print(f"   {op:32s} {c:5d}  {c / max(hg, 1):6.2f}")
            if a.dump_loop == n:
                for addr, pred, op, args in body:
                    print(f"   {addr:06x} {pred:6s} {op} {args}")


if __name__ == "__main__":
    main()
