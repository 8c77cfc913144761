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
  .venv/bin/python scripts/static_sass.py --decode all                  # the decode step's kernels, --chain

--chain (kernels without HGMMA: the decode step's) reads the scoreboards too: each instruction's control bits
say which of the six scoreboards it sets and which it waits on, so a wait on one that a global load, atomic
or fence set is a wait on memory. It prints, per kernel, what runs before griddepcontrol.wait (ACQBULK) and
launch_dependents (PREEXIT), the main loop's loads (width, how many issue before the first wait on memory)
and, after the loop, the memory events in address order with the number of dependent round trips: waits on
a global op issued after the previous such wait (ops issued together overlap; see kernels/decode/notes.md,
"Static SASS of the graph step's kernels").

FlashAttention-4's cubin comes from its own compile in fake-tensor mode (no GPU needed):
FLASH_ATTENTION_ARCH=sm_90 CUTE_DSL_ARCH=sm_90a FLASH_ATTENTION_NUM_SMS=132 CUTE_DSL_KEEP=ptx,cubin
CUTE_DSL_DUMP_DIR=DIR, then flash_attn.cute.interface._flash_attn_fwd on torch FakeTensorMode "cuda"
tensors; the CuTe DSL wheels must match the running Python (the .fa4 archive is cp312).
"""
import argparse
import collections
import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")
# an instruction's two words; the second's top 23 bits are its control: stall, yield, write and read
# scoreboards (7: none), the mask of scoreboards it waits on, reuse
CONTROL = re.compile(r"/\*([0-9a-f]{4,})\*/[^\n]*\n\s*/\* (0x[0-9a-f]{16}) \*/")
MEMORY = re.compile(r"^(LDG|ATOMG|ATOM\b|ATOM\.|RED\b|RED\.|MEMBAR|LD\.|LD\b)")  # a wait on these is a wait on memory
EVENTS = ("LDG", "STG", "ATOM", "RED", "MEMBAR", "ERRBAR", "CCTL", "BAR.", "EXIT", "ACQBULK", "PREEXIT", "SHFL",
          "STS", "LDS", "DEPBAR", "LDGSTS", "NANOSLEEP", "VOTE")


@functools.lru_cache(maxsize=None)
def _sass(cubin: Path) -> str:
    """cuobjdump's SASS of a cubin, once: the instruction list and the scoreboard bits both read it."""
    return subprocess.run([str(BIN / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout


def disassemble(cubin: Path) -> tuple[list[tuple[int, str, str, str]], str]:
    """(address, predicate, opcode, operands) of every instruction, and cuobjdump's resource usage."""
    sass = _sass(cubin)
    usage = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True,
                           check=True).stdout
    insts = [(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip())
             for m in LINE.finditer(sass)]
    return insts, " ".join(re.findall(r"REG:\d+ STACK:\d+|LOCAL:\d+", usage))


def scoreboards(cubin: Path) -> dict[int, tuple[int, int]]:
    """{address: (scoreboard it sets on completion or 7, mask of scoreboards it waits on)}"""
    return {int(a, 16): ((int(w, 16) >> 46) & 7, (int(w, 16) >> 52) & 63) for a, w in CONTROL.findall(_sass(cubin))}


def memory_waits(insts, sb, lo, hi):
    """[(address, opcodes waited on, fresh)] over [lo, hi] in address order: each wait on a scoreboard that a
    global load, atomic or fence set; fresh when one of them was issued after the previous fresh wait (a
    dependent round trip), not when it waits on ops issued together with ones already waited for."""
    pending, last, out = {}, -1, []
    for k, (addr, _, op, _) in enumerate(insts):
        if not lo <= addr <= hi:
            continue
        wbar, wait = sb.get(addr, (7, 0))
        hit = [pending.pop(b) for b in range(6) if wait >> b & 1 and b in pending]
        if hit:
            fresh = max(i for i, _ in hit) > last
            last = k if fresh else last
            out.append((addr, sorted({o for _, o in hit}), fresh))
        if wbar != 7 and MEMORY.match(op):
            pending[wbar] = (k, op)
    return out


def chain(insts, sb, span, dump):
    """The --chain report of one kernel: before the wait, the main loop's loads, and what follows the loop."""
    ops = [op for _, _, op, _ in insts]
    at = {addr: k for k, (addr, _, _, _) in enumerate(insts)}
    acq = [a for a, _, op, _ in insts if op == "ACQBULK"]
    pre = [a for a, _, op, _ in insts if op == "PREEXIT"]
    if acq:
        head = collections.Counter(op.split(".")[0] + (".PF2" if op == "CCTL.E.PF2" else "")
                                   for op in ops[:at[acq[0]]] if op.startswith(("LDG", "CCTL", "LDC", "BRA")))
        print(f"   before ACQBULK (griddepcontrol.wait, at {acq[0]:#x}): {at[acq[0]]} instructions, {dict(head)}; "
              f"PREEXIT (launch_dependents) at {', '.join(hex(a) for a in pre) or 'none'}")
    if span:
        body = [i for i in insts if span[0] <= i[0] <= span[1]]
        loads = collections.Counter(op for _, _, op, _ in body if op.startswith(("LDG", "LDGSTS")))
        w = memory_waits(insts, sb, *span)
        first = next((a for a, _, _ in w), span[1])
        before = sum(1 for a, _, op, _ in body if a < first and op.startswith("LDG"))
        deps = sum(op.startswith("DEPBAR") for _, _, op, _ in body)
        print(f"   main loop {span[0]:#x}-{span[1]:#x}: {len(body)} instructions, loads {dict(loads)}, "
              f"{sum(o.startswith(('HMMA', 'HGMMA')) for _, _, o, _ in body)} MMA, "
              f"{sum(o.startswith('BAR.') for _, _, o, _ in body)} BAR, {deps} DEPBAR; {len(w)} waits on memory "
              f"({sum(f for _, _, f in w)} fresh), {before} LDG issued before the first")
    lo = span[1] + 1 if span else (acq[0] if acq else 0)
    w = memory_waits(insts, sb, lo, insts[-1][0])
    tail = collections.Counter(op for a, _, op, _ in insts if a >= lo and op.startswith(EVENTS))
    print(f"   after it: {sum(f for _, _, f in w)} dependent round trips ({len(w)} waits on memory); {dict(tail)}")
    if dump:
        waits = {a: (o, f) for a, o, f in w}
        for addr, pred, op, args in insts:
            if addr >= lo and (op.startswith(EVENTS) or addr in waits):
                mark = f"  <- waits on {'+'.join(waits[addr][0])}{' (new round trip)' if waits[addr][1] else ''}" \
                    if addr in waits else ""
                print(f"   {addr:06x} {pred:6s} {op} {args[:48]}{mark}")


def main_loop(insts):
    """The innermost loop holding the most MMA, else the most global loads (a backward branch's span)."""
    spans = [(int(re.match(r"(0x[0-9a-f]+)", args).group(1), 16), addr) for addr, _, op, args in insts
             if op.startswith("BRA") and re.match(r"0x[0-9a-f]+", args)
             and int(re.match(r"(0x[0-9a-f]+)", args).group(1), 16) < addr]

    def weight(s):
        body = [op for a, _, op, _ in insts if s[0] <= a <= s[1]]
        return (sum(o.startswith(("HMMA", "HGMMA")) for o in body), sum(o.startswith("LDG") for o in body))
    spans = [s for s in spans if weight(s) > (0, 0)]
    return max(spans, key=weight, default=None)


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


# The gpt2 graph step's kernels as the step picks them on an H200 (132 SMs): its four products at batch 4
# (Tuning.few_rows), and the split-KV attention configs and launches judged in run h200-20261205a.
DECODE = ("qkv", "proj", "fc", "out", "head", "attn_b4", "attn_i8_b4", "attn_b64", "attn_i8_b64")


def decode_cubins(names, out: Path, maxnreg=None) -> list[Path]:
    """Compile the named decode kernels for sm90 through their own launchers on meta tensors (kernels/aot.py)."""
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch
    from kernels.aot import TARGETS, caught_launches, compile_launch, meta
    from kernels.decode import fused_linear as fl
    from kernels.decode.attention import SplitBuffers, split_kv_attention
    from kernels.decode.gpt2 import PRESETS
    from kernels.decode.kv_quant import SCALE_DTYPE
    from kernels.decode.split_kv_config import AttentionLaunch, _config, as_launch_config

    gpu, dt, f32, B = fl.Device(132, (9, 0)), torch.bfloat16, torch.float32, 4
    m = PRESETS["gpt2"]
    C, H, D, V, eps = m.n_embd, m.n_head, m.head_dim, m.vocab_size, m.layer_norm_epsilon
    ws = fl.Workspace("meta", 1 << 24, 1 << 16)
    st = meta(2, B, fl.stats_capacity(B, C, gpu), dtype=f32)
    after = fl.residual_stats(st, fl.linear_tiling(B, 4 * C, C, gpu), C)

    def x(*shape, dtype=dt):
        return meta(*shape, dtype=dtype)

    def attn(batch, int8, cfg, how, capacity, splits):
        def go():
            q, cache = x(batch, H, D), x(batch, H, capacity, D, dtype=torch.int8 if int8 else dt)
            scale = x(batch, H, capacity, dtype=SCALE_DTYPE) if int8 else None
            split_kv_attention(q, cache, cache, x(1, dtype=torch.int32), x(batch, H, D), SplitBuffers(batch, H, D, splits, "meta"),
                               k_scale=scale, v_scale=scale, config=as_launch_config(cfg), launch=how,
                               target_capability=(9, 0), new_kv=x(2, batch, H, D) if how.new_kv else None)
        return go

    kv = x(B, H, 1024, D)
    launch = {
        "qkv": lambda: fl.ln_qkv_store(x(B, C), x(C), x(C), eps, x(C, 3 * C), x(3 * C), x(B, H, D), kv, kv,
                                       x(1, dtype=torch.int64), ws, gpu=gpu, stats=after),
        "proj": lambda: fl.linear_residual(x(B, C), x(C, C), x(C), x(B, C), ws, gpu=gpu, stats_out=st,
                                           tiles=fl.linear_tiling(B, C, C, gpu, after_attention=True)),
        "fc": lambda: fl.ln_linear(x(B, C), x(C), x(C), eps, x(C, 4 * C), x(4 * C), x(B, 4 * C), ws, "gelu_tanh",
                                   gpu=gpu, stats=after),
        "out": lambda: fl.linear_residual(x(B, 4 * C), x(4 * C, C), x(C), x(B, C), ws, gpu=gpu, stats_out=st),
        "head": lambda: fl.ln_linear(x(B, C), x(C), x(C), eps, x(V, C).t(), None, x(B, V, dtype=f32), ws, gpu=gpu,
                                     stats=after),
        # batch 4: 8 splits of 128 keys; batch 64, 512 keys: one split (split_kv_config.default_num_splits)
        "attn_b4": attn(4, False, _config(64, 4), AttentionLaunch(True, 64), 1024, 8),
        "attn_i8_b4": attn(4, True, _config(64, 2), AttentionLaunch(True, 64, False), 1024, 8),
        "attn_b64": attn(64, False, _config(64, 4, dot=True, stages=3), AttentionLaunch(True, 64, True, True), 512, 1),
        "attn_i8_b64": attn(64, True, _config(64, 1, ahead=1), AttentionLaunch(True, 64, True, True), 512, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        with caught_launches() as launches:
            launch[name]()
        for n, caught in enumerate(launches):
            if maxnreg:
                caught.kwargs["maxnreg"] = maxnreg
            k = compile_launch(caught, TARGETS["sm90"])
            paths.append(_save(k, out / f"{name}{n or ''}.cubin"))
    return paths


def _save(kernel, path: Path) -> Path:
    """A compiled kernel's cubin at `path` and its PTX beside it."""
    path.write_bytes(kernel.asm["cubin"])
    path.with_suffix(".ptx").write_text(kernel.asm["ptx"])
    return path


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
    ap.add_argument("--keep", type=Path, help="folder to keep --gluon's or --decode's cubin and PTX in")
    ap.add_argument("--decode", action="append", default=[], metavar="KERNEL", choices=(*DECODE, "all"),
                    help=f"compile this kernel of the decode graph step for sm90 here: {', '.join(DECODE)}, or all "
                         "(as the step launches it; implies --chain; repeatable)")
    ap.add_argument("--maxnreg", type=int, help="compile --decode's kernels with this register cap (ptxas .maxnreg)")
    ap.add_argument("--chain", action="store_true", help="print the --chain report (see above)")
    ap.add_argument("--dump-chain", action="store_true", help="with --chain, list the memory events after the loop")
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
            cubins.append(_save(k, out / f"{name}-{a.dtype}-d{a.head_dim}-{'causal' if a.causal else 'full'}.cubin"))
    if a.decode:
        out = a.keep or Path(tempfile.mkdtemp(prefix="static_sass_"))
        cubins += decode_cubins(DECODE if "all" in a.decode else a.decode, out, a.maxnreg)
        a.chain = True
    for cubin in cubins:
        insts, usage = disassemble(cubin)
        if a.chain:
            print(f"== {cubin.name}: {len(insts)} instructions; {usage}")
            chain(insts, scoreboards(cubin), main_loop(insts), a.dump_chain)
            continue
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
