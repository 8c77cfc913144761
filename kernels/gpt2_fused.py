"""Three ways to run one GPT-2 decode step over our cache, for the CUDA-graph loop to capture.

  torch     `GPT2.step` as written: cuBLAS products and PyTorch's small kernels, about fourteen
            launches per layer
  fused     the Triton kernels of kernels/fused_linear.py and the split-KV attention: five launches
            per layer (norm + qkv + cache write; attention; merge + projection + residual;
            norm + fc + GELU; projection + residual)
  inductor  `GPT2.step` compiled by torch.compile (inductor, no CUDA graphs of its own), with our
            attention and cache writes as opaque custom ops so the whole step is one graph

Every step reads the token at `pos` from `history`, attends over `lens` = pos + 1 keys, and
returns the logits; the loop's bookkeeping (argmax, history, pos) is `advance`, one small kernel.
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from . import fused_linear as fl
from .common import interpreting
from .decode_attention import default_num_splits, split_kv_partials


# --- the loop's small kernels -----------------------------------------------------------------

@triton.jit(do_not_specialize=["C", "stride_hb"])
def _embed_kernel(History, stride_hb, Pos, Wte, Wpe, X, C, BLOCK_C: tl.constexpr):
    """x[b] = wte[history[b, pos]] + wpe[pos], rounded as PyTorch's add rounds."""
    b = tl.program_id(0).to(tl.int64)
    pos = tl.load(Pos)
    tok = tl.load(History + b * stride_hb + pos)
    offs = tl.arange(0, BLOCK_C)
    mask = offs < C
    e = tl.load(Wte + tok * C + offs, mask=mask, other=0.0).to(tl.float32)
    p = tl.load(Wpe + pos * C + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(X + b * C + offs, (e + p).to(X.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["B", "stride_hb"])
def _advance_kernel(Next, History, stride_hb, Pos, Lens, B, WRITE: tl.constexpr, BLOCK_B: tl.constexpr):
    """One program: history[:, pos + 1] = next (unless teacher-forced), then pos += 1, lens = pos + 1."""
    pos = tl.load(Pos)
    offs = tl.arange(0, BLOCK_B)
    if WRITE:
        nxt = tl.load(Next + offs, mask=offs < B, other=0)
        tl.store(History + offs.to(tl.int64) * stride_hb + pos + 1, nxt.to(tl.int64), mask=offs < B)
    tl.store(Pos, pos + 1)
    tl.store(Lens, (pos + 2).to(tl.int32))


def embed(history, pos, wte, wpe, x) -> None:
    B, C = x.shape
    _embed_kernel[(B,)](history, history.stride(0), pos, wte, wpe, x, C, BLOCK_C=triton.next_power_of_2(C),
                        num_warps=1 if interpreting() else 4)


def advance(nxt, history, pos, lens, write: bool = True) -> None:
    """The loop's bookkeeping after a step, in one launch (a CUDA graph replays it too)."""
    B = nxt.shape[0]
    _advance_kernel[(1,)](nxt, history, history.stride(0), pos, lens, B, WRITE=write,
                          BLOCK_B=max(16, triton.next_power_of_2(B)), num_warps=1)


# --- the fused step ---------------------------------------------------------------------------

class FusedStep:
    """GPT-2's decode step in five launches per layer, over preallocated buffers (so a CUDA graph
    can capture it). Built for one model, one cache and one batch."""

    impl = "fused"

    def __init__(self, model, cache, batch: int):
        a = model.args
        if batch > fl.MAX_ROWS:
            raise ValueError(f"the fused step holds at most {fl.MAX_ROWS} sequences per program; batch {batch} "
                             "needs the torch step.")
        if model.gelu_approx not in ("tanh", "none"):
            raise ValueError(f"GELU approximation {model.gelu_approx!r} is not one the fused step implements.")
        self.model, self.cache = model, cache
        dev, dt = model.device, model.dtype
        C, H, D = a.n_embd, a.n_head, a.head_dim
        self.splits = default_num_splits(batch, H, cache.k.shape[3], dev)
        self.x = torch.empty((batch, C), device=dev, dtype=dt)
        self.h = torch.empty((batch, 4 * C), device=dev, dtype=dt)
        self.q = torch.empty((batch, H, D), device=dev, dtype=dt)
        self.o_part = torch.empty((batch * H * self.splits, D), device=dev, dtype=torch.float32)
        self.lse = torch.empty((batch * H * self.splits,), device=dev, dtype=torch.float32)
        # fp32 logits: the LM head accumulates in fp32 and nothing after it needs them rounded.
        self.logits = torch.empty((batch, a.vocab_size), device=dev, dtype=torch.float32)
        self.lm_head_t = model.lm_head.t()  # (C, V) view: the kernel reads the (V, C) table in place
        self.gelu = "gelu_tanh" if model.gelu_approx == "tanh" else "gelu"
        # Tilings fixed once per shape: the same launches every step, and a workspace sized for them.
        self.tiles = {
            "qkv": fl.qkv_tiling(batch, C, H, D, dev),
            "proj": fl.proj_tiling(batch, H, D, C, dev),
            "fc": fl.linear_tiling(batch, C, 4 * C, dev),
            "out": fl.linear_tiling(batch, 4 * C, C, dev),
            "head": fl.linear_tiling(batch, C, a.vocab_size, dev),
        }
        width = {"qkv": 3 * C, "proj": C, "fc": 4 * C, "out": C, "head": a.vocab_size}
        self.ws = fl.Workspace(dev, *fl.workspace_need(batch, [(t, width[k]) for k, t in self.tiles.items()]))

    def __call__(self, history, pos, lens):
        m, c, a = self.model, self.cache, self.model.args
        eps = a.layer_norm_epsilon
        int8 = c.k.dtype == torch.int8
        t, ws = self.tiles, self.ws
        embed(history, pos, m.wte, m.wpe, self.x)
        for i, blk in enumerate(m.blocks):
            scales = {"k_scale": c.k_scale[i], "v_scale": c.v_scale[i]} if int8 else {}
            fl.ln_qkv_store(self.x, blk.ln1_w, blk.ln1_b, eps, blk.attn_w, blk.attn_b, self.q, c.k[i], c.v[i], pos,
                            ws, tiles=t["qkv"], **scales)
            split_kv_partials(self.q, c.k[i], c.v[i], lens, self.o_part, self.lse, self.splits, **scales)
            fl.merge_proj_residual(self.o_part, self.lse, a.n_head, a.head_dim, self.splits, blk.proj_w, blk.proj_b,
                                   self.x, ws, tiles=t["proj"])
            fl.ln_linear(self.x, blk.ln2_w, blk.ln2_b, eps, blk.fc_w, blk.fc_b, self.h, ws, self.gelu, tiles=t["fc"])
            fl.linear_residual(self.h, blk.out_w, blk.out_b, self.x, ws, tiles=t["out"])
        fl.ln_linear(self.x, m.lnf_w, m.lnf_b, eps, self.lm_head_t, None, self.logits, ws, tiles=t["head"])
        return self.logits


# --- our step, compiled by inductor -----------------------------------------------------------
# Inductor fuses the norms, bias adds, GELU and residual adds around cuBLAS products. The
# attention kernel and the int8 cache write stay ours, as custom ops: opaque to the compiler, so
# the whole step is one graph with no breaks, and the cache is written in place.

@torch.library.custom_op("gpt2_decode::attend", mutates_args=())
def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    from .decode_attention import decode_attention

    return decode_attention(q, k, v, lens)


@_attend.register_fake
def _(q, k, v, lens):
    return torch.empty_like(q)


@torch.library.custom_op("gpt2_decode::attend_int8", mutates_args=())
def _attend_int8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor,
                 lens: torch.Tensor) -> torch.Tensor:
    from .decode_attention import decode_attention

    return decode_attention(q, k, v, lens, k_scale=ks, v_scale=vs)


@_attend_int8.register_fake
def _(q, k, v, ks, vs, lens):
    return torch.empty_like(q)


@torch.library.custom_op("gpt2_decode::store", mutates_args=("k_cache", "v_cache"))
def _store(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor) -> None:
    k_cache.index_copy_(2, pos, k.unsqueeze(2))
    v_cache.index_copy_(2, pos, v.unsqueeze(2))


@torch.library.custom_op("gpt2_decode::store_int8", mutates_args=("k_cache", "v_cache", "k_scale", "v_scale"))
def _store_int8(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                k_scale: torch.Tensor, v_scale: torch.Tensor, pos: torch.Tensor) -> None:
    from .kv_quant import quantize_store_

    quantize_store_(k, v, k_cache, v_cache, k_scale, v_scale, pos)


class OpaqueCache:
    """A cache whose writes and reads go through the custom ops, for torch.compile to trace."""

    def __init__(self, cache):
        self.inner = cache
        self.int8 = cache.k.dtype == torch.int8

    def store_token(self, i, pos, k, v):
        c = self.inner
        if self.int8:
            torch.ops.gpt2_decode.store_int8(k, v, c.k[i], c.v[i], c.k_scale[i], c.v_scale[i], pos)
        else:
            torch.ops.gpt2_decode.store(k.contiguous(), v.contiguous(), c.k[i], c.v[i], pos)

    def attend(self, i, q, lens):
        c = self.inner
        q = q.contiguous()
        if self.int8:
            return torch.ops.gpt2_decode.attend_int8(q, c.k[i], c.v[i], c.k_scale[i], c.v_scale[i], lens)
        return torch.ops.gpt2_decode.attend(q, c.k[i], c.v[i], lens)


class InductorStep:
    """`GPT2.step` through torch.compile (fullgraph, static shapes, no CUDA graphs of its own)."""

    impl = "inductor"

    def __init__(self, model, cache, batch: int):
        self.model, self.cache = model, OpaqueCache(cache)
        self._compiled = torch.compile(self._run, fullgraph=True, dynamic=False)

    def _run(self, history, pos, lens):
        return self.model.step(history, pos, lens, self.cache)

    def __call__(self, history, pos, lens):
        return self._compiled(history, pos, lens)


class TorchStep:
    """`GPT2.step` as written."""

    impl = "torch"

    def __init__(self, model, cache, batch: int):
        self.model, self.cache = model, cache

    def __call__(self, history, pos, lens):
        return self.model.step(history, pos, lens, self.cache)


STEPS = {s.impl: s for s in (TorchStep, FusedStep, InductorStep)}


# --- the compile matrix (kernels/aot.py) ------------------------------------------------------

def compile_specs(target):
    """The decode loop's small kernels as the decode phase launches them (kernels/aot.py), through
    `embed` and `advance` on meta tensors: the embedding in bfloat16, or float16 where the GPU has
    no bfloat16 (T4), at each model's width; the bookkeeping at each row tiling, writing the next
    token (greedy) and not (teacher-forced). The fused products are fused_linear's specs. Neither
    kernel multiplies: no tensor cores. Core: GPT-2, batch 4, greedy."""
    from .aot import CompileSpec, meta
    from .gpt2 import PRESETS

    dt = torch.bfloat16 if target.bf16 else torch.float16
    capacity = 1024  # history's row stride (capacity + 1) is a plain argument
    specs = []
    for name in fl.DECODE_MODELS:
        a = PRESETS[name]

        def emb(batch=4, C=a.n_embd, a=a):
            embed(meta(batch, capacity + 1, dtype=torch.int64), meta(1, dtype=torch.int64),
                  meta(a.vocab_size, C, dtype=dt), meta(a.n_positions, C, dtype=dt), meta(batch, C, dtype=dt))

        specs.append(CompileSpec(f"{str(dt).removeprefix('torch.')} {name} C={a.n_embd}", emb, tensor_cores=False,
                                 core=name == fl.DECODE_MODELS[0]))
    for batch in fl.DECODE_BATCHES:
        for write in (True, False):
            def adv(batch=batch, write=write):
                advance(meta(batch, dtype=torch.int64), meta(batch, capacity + 1, dtype=torch.int64),
                        meta(1, dtype=torch.int64), meta(1, dtype=torch.int32), write=write)

            specs.append(CompileSpec(f"B={batch} {'greedy' if write else 'teacher-forced'}", adv, tensor_cores=False,
                                     core=batch == fl.DECODE_BATCHES[0] and write))
    return specs
