"""The decode kernels compile for real GPUs (T4 in fp16, A100, H100/H200 in bf16) without spilling registers.

The interpreter runs a kernel's maths but not its compilation: a shape error in an op that does not
broadcast, inline assembly, or a tile that overflows the register file only shows on a GPU. Triton's
own ptxas can compile for a target GPU on a machine without one, so this catches them here.
"""
from offline_compile import require_ptxas, run_script_per_target

SCRIPT = r'''
import re, subprocess, sys, tempfile, os
from pathlib import Path
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernels.decode import attention as da, kv_quant as kq, fused_linear as fl, gpt2_fused as gf
from kernels.decode.split_kv_config import tunable_configs

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"

def compile_for(cc, fn, sig, consts, num_warps, num_stages=2, aligned=()):
    # What the JIT sees on a GPU: 16-byte aligned pointers, and the strides that are multiples of 16.
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig) if sig[n].startswith("*") or n in aligned}
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", cc, 32),
                       options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    # ptxas puts spilled registers on the stack frame; a Triton kernel that does not spill has none.
    regs, stack, local = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", out).groups()
    return int(regs), int(stack) + int(local)

def ints(*names):
    return {n: "i32" for n in names}

for cc in map(int, sys.argv[1:]):
    f = "*fp16" if cc < 80 else "*bf16"  # a T4 decodes in fp16: it has no native bf16
    split = {"Q": f, "K": f, "V": f, "KScale": f, "VScale": f, "Lens": "*i32", "OPart": "*fp32", "LsePart": "*fp32",
             "Out": f, "Counter": "*i32", "NewKV": f,
             **ints("stride_qb", "stride_qh", "stride_ob", "stride_oh", "stride_kb", "stride_kh", "stride_kn",
                    "stride_vb", "stride_vh", "stride_vn", "stride_sb", "stride_sh", "stride_lens", "H", "num_splits"),
             "qk_scale_log2": "fp32", "len_bucket": "i32", "prefetch_keys": "i32", "early_trigger": "i32",
             "HEAD_DIM": "constexpr", "BLOCK_D": "constexpr", "BLOCK_N": "constexpr", "IS_INT8": "constexpr",
             "USE_DOT": "constexpr", "UPCAST": "constexpr", "UNROLL": "constexpr", "PDL": "constexpr",
             "AHEAD": "constexpr", "NEW_ROW": "constexpr"}
    strides = ("stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh", "stride_vn")
    for int8 in (False, True):
        sig = dict(split, **({"K": "*i8", "V": "*i8", "KScale": "*fp32", "VScale": "*fp32"} if int8 else {}))
        # The fused step (head_dim 64) may launch attention as a programmatic dependent from Hopper on,
        # and hand it the newest key and value to write (NEW_ROW).
        for d, pdl, new_row in ([(64, False, False), (64, False, True), (128, False, False)]
                                + ([(64, True, True)] if cc >= 90 else [])):
            # Pruned at run time: tensor-core dots before Ampere, row streams too wide for the head_dim.
            for cfg in tunable_configs(int8, divmod(cc, 10), d):
                consts = {"HEAD_DIM": d, "BLOCK_D": d, "IS_INT8": int8, "UPCAST": False, "PDL": pdl,
                          "NEW_ROW": new_row, **cfg.kwargs}
                regs, spill = compile_for(cc, da._split_kv_kernel, sig, consts, cfg.num_warps, cfg.num_stages, strides)
                print("split", cc, int8, d, cfg.kwargs["BLOCK_N"], cfg.kwargs["USE_DOT"], cfg.num_warps, regs, spill)
    store = {"K": f, "V": f, "KQ": "*i8", "VQ": "*i8", "KS": "*fp32", "VS": "*fp32", "Pos": "*i64",
             **ints("stride_kb", "stride_kh", "stride_vb", "stride_vh", "stride_qb", "stride_qh", "stride_qn",
                    "stride_sb", "stride_sh", "H"), "HEAD_DIM": "constexpr", "BLOCK_D": "constexpr"}
    print("store", cc, *compile_for(cc, kq._quantize_store_kernel, store, {"HEAD_DIM": 64, "BLOCK_D": 64}, 1))

    # The fused step: every role, both batch tilings (16 rows; 64 rows), GPT-2's head_dim of 64.
    pdl = cc >= 90
    # As the launcher passes them (fused_linear._launch_options): GPT-2's (K, N) weights are row-major.
    common = {"UPCAST": False, "PDL": pdl, "PREFETCH": fl.TUNING.prefetch_tiles if pdl else 0, "W_ROW_MAJOR": True,
              "RESET_STORE": fl.TUNING.reset_by_store}
    ws = {"Work": "*fp32", "Counter": "*i32", "split_k": "i32"}
    stats_in = {"StatIn": "*fp32", **ints("stat_tiles", "stat_width", "stride_st")}

    def reduce(t):  # the step's statistics buffer (GPT-2: 12 tiles) and this tiling's split count
        return {"STAT_P": 16, "SPLIT_P": triton.next_power_of_2(t.split_k)}

    dev = fl.Device(132, divmod(cc, 10))
    for rows in (16, 64):
        t = fl.qkv_tiling(rows, 768, 12, 64, dev)  # the same tiles a GPU of this generation gets
        for int8, kv_store in ((False, 0), (True, 1), (True, 2)):  # float cache, int8 cache, handed to the attention
            c = "*i8" if kv_store == 1 else f
            s = "*fp32" if int8 else f
            qkv = {"X": f, "stride_xb": "i32", "W": f, **ints("stride_wk", "stride_wn"), "Bias": f,
                   **ints("B", "K", "N"), "eps": "fp32", "LnW": f, "LnB": f, **stats_in,
                   "Q": f, "KC": c, "VC": c, "KS": s, "VS": s,
                   "Pos": "*i64", **ints("H_QKV", "stride_cb", "stride_ch", "stride_cn", "stride_sb", "stride_sh"), **ws,
                   **{k: "constexpr" for k in ("KV_STORE", "HEAD_DIM", "BLOCK_B", "BLOCK_N", "BLOCK_K", "STAT_P",
                                               "SPLIT_P", "UPCAST", "PDL", "PREFETCH", "W_ROW_MAJOR", "RESET_STORE")}}
            consts = {"KV_STORE": kv_store, "HEAD_DIM": 64, "BLOCK_B": t.block_b, "BLOCK_N": t.block_n,
                      "BLOCK_K": t.block_k, **reduce(t), **common}
            print("qkv", cc, rows, kv_store, *compile_for(cc, fl._ln_qkv_kernel, qkv, consts, t.num_warps, t.num_stages,
                                                       ("stride_xb", "stride_wk", "stride_cb", "stride_ch", "stride_cn", "K", "N")))
        lin = {"X": f, "stride_xb": "i32", "W": f, **ints("stride_wk", "stride_wn"), "Bias": f, "Y": f,
               "stride_yb": "i32", **ints("B", "K", "N"), "eps": "fp32", "LnW": f, "LnB": f, **stats_in, **ws,
               **{k: "constexpr" for k in ("EPILOGUE", "HAS_BIAS", "BLOCK_B", "BLOCK_N", "BLOCK_K", "STAT_P", "SPLIT_P",
                                           "UPCAST", "PDL", "PREFETCH", "W_ROW_MAJOR", "RESET_STORE")}}
        t = fl.linear_tiling(rows, 768, 3072, dev)
        consts = {"EPILOGUE": 1, "HAS_BIAS": True, "BLOCK_B": t.block_b, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k,
                  **reduce(t), **common}
        print("fc", cc, rows, *compile_for(cc, fl._ln_linear_kernel, lin, consts, t.num_warps, t.num_stages,
                                            ("stride_xb", "stride_wk", "stride_yb", "K", "N")))
        # the LM head: the (vocab, width) table read in place (unit stride along K), fp32 logits
        head = dict(lin, Y="*fp32", stride_wk="constexpr")
        t = fl.linear_tiling(rows, 768, 50257, dev)
        consts = {"EPILOGUE": 0, "HAS_BIAS": False, "BLOCK_B": t.block_b, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k,
                  "stride_wk": 1, **reduce(t), **common, "W_ROW_MAJOR": False,
                  "PDL": int(fl.PDL_LATE) if pdl else 0}  # its 77 MB table: dependents start late
        print("head", cc, rows, *compile_for(cc, fl._ln_linear_kernel, head, consts, t.num_warps, t.num_stages,
                                              ("stride_xb", "stride_wn", "stride_yb", "K")))
        res = {"X": f, "stride_xb": "i32", "W": f, **ints("stride_wk", "stride_wn"), "Bias": f, "Y": f,
               "stride_yb": "i32", **ints("B", "K", "N"), "StatOut": "*fp32", "stride_st": "i32", **ws,
               **{k: "constexpr" for k in ("STATS_OUT", "BLOCK_B", "BLOCK_N", "BLOCK_K", "SPLIT_P", "UPCAST", "PDL",
                                           "PREFETCH", "W_ROW_MAJOR", "RESET_STORE")}}
        for role, k in (("proj", 768), ("out", 3072)):
            t = fl.linear_tiling(rows, k, 768, dev)
            consts = {"STATS_OUT": True, "BLOCK_B": t.block_b, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k,
                      "SPLIT_P": triton.next_power_of_2(t.split_k), **common}
            print(role, cc, rows, *compile_for(cc, fl._linear_residual_kernel, res, consts, t.num_warps, t.num_stages,
                                                ("stride_xb", "stride_wk", "stride_yb", "K", "N")))
    emb = {"History": "*i64", "stride_hb": "i32", "Pos": "*i64", "Wte": f, "Wpe": f, "X": f, "C": "i32",
           "Stats": "*fp32", "B": "i32", "stride_st": "i32", "BLOCK_C": "constexpr"}
    print("embed", cc, *compile_for(cc, gf._embed_kernel, emb, {"BLOCK_C": 2048}, 4))
    adv = {"Next": "*i64", "History": "*i64", "stride_hb": "i32", "Pos": "*i64", "Lens": "*i32", "B": "i32",
           "WRITE": "constexpr", "BLOCK_B": "constexpr"}
    print("advance", cc, *compile_for(cc, gf._advance_kernel, adv, {"WRITE": True, "BLOCK_B": 64}, 1))
    am = {"Logits": "*fp32", **ints("stride_lb", "V", "chunk"), "PartV": "*fp32", "PartI": "*i32", "Counter": "*i32",
          "History": "*i64", "stride_hb": "i32", "Pos": "*i64", "Lens": "*i32", "B": "i32",
          **{k: "constexpr" for k in ("WRITE", "BLOCK", "CHUNKS", "BLOCK_B")}}
    print("argmax", cc, *compile_for(cc, gf._argmax_advance_kernel, am,
                                     {"WRITE": True, "BLOCK": 2048, "CHUNKS": 32, "BLOCK_B": 64}, 4))
'''

TARGETS = (75, 80, 90)


def test_kernels_compile_for_t4_a100_and_h100_without_spills():
    require_ptxas()
    lines = run_script_per_target(SCRIPT, TARGETS)
    kinds = {}
    for line in lines:
        kinds.setdefault(line[0], set()).add(int(line[1]))
    # every kernel compiled for every target
    assert all(kinds.get(k) == set(TARGETS) for k in
               ("split", "store", "qkv", "fc", "head", "proj", "out", "embed", "advance", "argmax")), kinds
    # int8 tensor-core configs (the fast-widening path) on every target that runs them
    assert {int(x[1]) for x in lines if x[0] == "split" and x[2] == "True" and x[5] == "True"} == {80, 90}
    spilled = [line for line in lines if int(line[-1]) != 0]
    assert not spilled, f"kernels spill to local memory: {spilled}"
