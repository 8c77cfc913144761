"""Three ways to run one GPT-2 decode step over our cache, for the CUDA-graph loop to capture.

  torch     `GPT2.step` as written: cuBLAS products and PyTorch's small kernels, about fourteen
            launches per layer
  fused     the Triton kernels of kernels/decode/fused_linear.py and the split-KV attention: five launches
            per layer (norm + qkv + cache write; attention with its merge; projection + residual;
            norm + fc + GELU; projection + residual)
  inductor  `GPT2.step` compiled by torch.compile (inductor, no CUDA graphs of its own), with our
            attention and cache writes as opaque custom ops so the whole step is one graph

Every step reads the token at `pos` from `history`, attends over `lens` = pos + 1 keys, and
returns the logits; the loop's bookkeeping (argmax, history, pos) is `advance`, one small kernel.

The MLP stays two launches. One launch was tried (H200, 2026-12-01, batch 4): each program computed
a slice of the hidden units over the whole width, multiplied it by the matching rows of the second
weight, and the programs met at a barrier (one per SM) to add up their shares by column chunks. It
was correct and deterministic, and the step lost a launch per layer, but it ran slower: gpt2 0.425
against 0.366 ms, gpt2-xl 2.63 against 2.31 ms, at the best of six tilings. With one program per SM,
each SM streams its slice through one pipeline; the two products spread theirs over two to three
programs per SM (split-K), which keeps more loads in flight.

The qkv product and the attention stay two launches too. One launch was tried (H200, 2026-12-02, batch 4): the
attention's programs, numbered after the product's so that they were dispatched last, asked L2 for their chunk of
the cache and then spun on a per-head counter that the last split of each q, k and v tile raised. It was correct
(q, k and v bit-identical to the two launches, the attention output within one bf16 step: the same arithmetic
compiled differently) but slower: gpt2 0.366 -> 0.404-0.416 ms, gpt2-xl 2.26 -> 2.47-2.58 ms, least when the
programs asked for 64 keys ahead instead of their whole chunk and backed off with nanosleep while spinning. Their
requests compete with the weights the product streams, which they wait on, and the attention's own chain of round
trips still follows the product's.
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from . import fused_linear as fl
from .arrival import arrive, reset
from ..common import interpreting
from .attention import split_kv_attention
from .fused_linear import tile_stats
from .split_kv_config import PLAIN_LAUNCH, as_launch_config, compiled_launches, tunable_configs


# --- the loop's small kernels -----------------------------------------------------------------

@triton.jit(do_not_specialize=["C", "stride_hb", "B", "stride_st"])
def _embed_kernel(History, stride_hb, Pos, Wte, Wpe, X, C, Stats, B, stride_st, BLOCK_C: tl.constexpr):
    """x[b] = wte[history[b, pos]] + wpe[pos], rounded as PyTorch's add rounds, and the row's mean and
    sum of squared deviations for the first LayerNorm (fused_linear.RowStats, one tile)."""
    b = tl.program_id(0).to(tl.int64)
    pos = tl.load(Pos)
    tok = tl.load(History + b * stride_hb + pos)
    offs = tl.arange(0, BLOCK_C)
    mask = offs < C
    e = tl.load(Wte + tok * C + offs, mask=mask, other=0.0).to(tl.float32)
    p = tl.load(Wpe + pos * C + offs, mask=mask, other=0.0).to(tl.float32)
    x = (e + p).to(X.dtype.element_ty)
    tl.store(X + b * C + offs, x, mask=mask)
    mean, m2 = tile_stats(x.to(tl.float32), mask, C)
    tl.store(Stats + b * stride_st, mean)
    tl.store(Stats + (B + b) * stride_st, m2)


@triton.jit
def _move_on(nxt, rows, mask_r, History, stride_hb, Pos, Lens, WRITE: tl.constexpr):
    """history[rows, pos + 1] = nxt (unless teacher-forced), then pos += 1, lens = pos + 1."""
    pos = tl.load(Pos)
    if WRITE:
        tl.store(History + rows.to(tl.int64) * stride_hb + pos + 1, nxt.to(tl.int64), mask=mask_r)
    tl.store(Pos, pos + 1)
    tl.store(Lens, (pos + 2).to(tl.int32))


@triton.jit(do_not_specialize=["B", "stride_hb"])
def _advance_kernel(Next, History, stride_hb, Pos, Lens, B, WRITE: tl.constexpr, BLOCK_B: tl.constexpr):
    """One program: the loop's bookkeeping with the next tokens given."""
    offs = tl.arange(0, BLOCK_B)
    nxt = tl.load(Next + offs, mask=offs < B, other=0)
    _move_on(nxt, offs, offs < B, History, stride_hb, Pos, Lens, WRITE)


@triton.jit(do_not_specialize=["B", "V", "chunk", "stride_lb", "stride_hb"])
def _argmax_advance_kernel(Logits, stride_lb, V, chunk, PartV, PartI, Counter, History, stride_hb, Pos, Lens, B,
                           WRITE: tl.constexpr, BLOCK: tl.constexpr, CHUNKS: tl.constexpr, BLOCK_B: tl.constexpr):
    """next = argmax(logits) per row, then advance's bookkeeping, in one launch. Program (b, c) finds
    the largest logit of chunk c of row b and its first index; the last program of the grid to finish
    (counted with an atomic) picks each row's winner and moves the loop on. Ties go to the lowest
    index, as torch.argmax breaks them."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    offs = c * chunk + tl.arange(0, BLOCK)
    mask = (offs < V) & (tl.arange(0, BLOCK) < chunk)
    x = tl.load(Logits + b.to(tl.int64) * stride_lb + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    tl.store(PartV + b * CHUNKS + c, m)
    tl.store(PartI + b * CHUNKS + c, tl.min(tl.where(mask & (x == m), offs, V), axis=0))
    if arrive(Counter, B * CHUNKS):
        rows = tl.arange(0, BLOCK_B)
        cols = tl.arange(0, CHUNKS)
        at = rows[:, None] * CHUNKS + cols[None, :]
        mask_r = rows < B
        v = tl.load(PartV + at, mask=mask_r[:, None], other=float("-inf"), cache_modifier=".cg")
        i = tl.load(PartI + at, mask=mask_r[:, None], other=V, cache_modifier=".cg")
        best = tl.max(v, axis=1)
        nxt = tl.min(tl.where(v == best[:, None], i, V), axis=1)
        _move_on(nxt, rows, mask_r, History, stride_hb, Pos, Lens, WRITE)
        reset(Counter)


class ArgmaxScratch:
    """The per-chunk maxima and indices `argmax_advance` leaves between its programs, and its counter."""

    CHUNKS = 32  # programs per row: the vocabulary is read by B x 32 programs instead of B

    def __init__(self, batch: int, device):
        self.value = torch.empty((batch * self.CHUNKS,), device=device, dtype=torch.float32)
        self.index = torch.empty((batch * self.CHUNKS,), device=device, dtype=torch.int32)
        self.counter = torch.zeros((1,), device=device, dtype=torch.int32)


def argmax_advance(logits, history, pos, lens, scratch: ArgmaxScratch, write: bool = True) -> None:
    """advance(logits.argmax(-1), ...) in one launch. torch's argmax reads each row with one block of
    threads: on the H200 (2026-11-30) it took 13-16 us of a 0.46 ms gpt2 step for four rows."""
    B, V = logits.shape
    if scratch.value.numel() != B * scratch.CHUNKS or logits.stride(1) != 1:
        raise ValueError(f"argmax scratch for {scratch.value.numel() // scratch.CHUNKS} rows and logits "
                         f"{tuple(logits.shape)} (unit stride along the vocabulary needed) do not match.")
    chunk = triton.cdiv(V, scratch.CHUNKS)
    _argmax_advance_kernel[(B, scratch.CHUNKS)](
        logits, logits.stride(0), V, chunk, scratch.value, scratch.index, scratch.counter, history,
        history.stride(0), pos, lens, B, WRITE=write, BLOCK=triton.next_power_of_2(chunk), CHUNKS=scratch.CHUNKS,
        BLOCK_B=triton.next_power_of_2(B), num_warps=1 if interpreting() else 4)


def embed(history, pos, wte, wpe, x, stats: torch.Tensor) -> fl.RowStats:
    """x = the embedding of each sequence's token at pos, and x's row statistics into `stats` (a
    fl.RowStats.buffer), returned as the RowStats the first LayerNorm reads."""
    B, C = x.shape
    row_stats = fl.RowStats(stats, 1, C)
    row_stats.check(B, C)
    _embed_kernel[(B,)](history, history.stride(0), pos, wte, wpe, x, C, stats, B, stats.shape[-1],
                        BLOCK_C=triton.next_power_of_2(C), num_warps=1 if interpreting() else 4)
    return row_stats


def advance(nxt, history, pos, lens, write: bool = True) -> None:
    """The loop's bookkeeping after a step, in one launch (a CUDA graph replays it too)."""
    B = nxt.shape[0]
    _advance_kernel[(1,)](nxt, history, history.stride(0), pos, lens, B, WRITE=write,
                          BLOCK_B=max(16, triton.next_power_of_2(B)), num_warps=1)


# --- the fused step ---------------------------------------------------------------------------

def operation_bytes(model, cache_bytes_per_layer: float) -> list[int]:
    """What each operation of a step must read, in the fused step's launch order (the embedding, five a
    layer, the LM head, the argmax): the weights it multiplies, and each layer's attention its cache
    bytes. They add up to the bandwidth floor's bytes: the embedding and the argmax read nothing there
    (a row per sequence of the position and token tables; the logits this step wrote)."""
    def size(*ts):
        return sum(t.numel() * t.element_size() for t in ts)

    out = [0]  # embed
    for b in model.blocks:
        out += [size(b.ln1_w, b.ln1_b, b.attn_w, b.attn_b), round(cache_bytes_per_layer), size(b.proj_w, b.proj_b),
                size(b.ln2_w, b.ln2_b, b.fc_w, b.fc_b), size(b.out_w, b.out_b)]
    return out + [size(model.lnf_w, model.lnf_b, model.lm_head), 0]  # LM head, argmax


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
        self.x = torch.empty((batch, C), device=dev, dtype=dt)
        self.h = torch.empty((batch, 4 * C), device=dev, dtype=dt)
        self.q = torch.empty((batch, H, D), device=dev, dtype=dt)
        # The newest key and value, where the attention launch writes them into the cache
        # (AttentionLaunch.new_kv) and the qkv product leaves them here.
        self.new_kv = torch.zeros((2, batch, H, D), device=dev, dtype=dt)
        self.gpu = fl.device_facts(dev)  # what every choice below is made for
        self.split = cache.split_buffers(self.q)
        # Plain, and the autotuner's config (None), until a session judges the alternatives in the
        # captured step (kernels/decode/session.py).
        self.attention_launch = PLAIN_LAUNCH
        self.attention_config: dict | None = None
        self.attn = torch.empty((batch, H, D), device=dev, dtype=dt)
        # fp32 logits: the LM head accumulates in fp32 and nothing after it needs them rounded.
        self.logits = torch.empty((batch, a.vocab_size), device=dev, dtype=torch.float32)
        self.lm_head_t = model.lm_head.t()  # (C, V) view: the kernel reads the (V, C) table in place
        self.gelu = "gelu_tanh" if model.gelu_approx == "tanh" else "gelu"
        # Tilings fixed once per shape: the same launches every step, and a workspace sized for them.
        self.tiles = {
            "qkv": fl.qkv_tiling(batch, C, H, D, self.gpu),
            "proj": fl.linear_tiling(batch, C, C, self.gpu, after_attention=True),
            "fc": fl.linear_tiling(batch, C, 4 * C, self.gpu),
            "out": fl.linear_tiling(batch, 4 * C, C, self.gpu),
            "head": fl.linear_tiling(batch, C, a.vocab_size, self.gpu),
        }
        width = {"qkv": 3 * C, "proj": C, "fc": 4 * C, "out": C, "head": a.vocab_size}
        self.ws = fl.Workspace(dev, *fl.workspace_need(batch, [(t, width[k]) for k, t in self.tiles.items()]))
        # Row statistics for each LayerNorm, left by the kernel that wrote x (embed, or a residual product).
        self.stats = fl.RowStats.buffer(batch, fl.stats_capacity(batch, C, self.gpu), dev)
        self.after_proj = fl.residual_stats(self.stats, self.tiles["proj"], C)
        self.after_out = fl.residual_stats(self.stats, self.tiles["out"], C)

    def attention_candidates(self) -> list[dict]:
        """The split-KV configs this step's attention may run: those the autotuner may pick for this
        cache on this GPU (kernels/decode/split_kv_config.tunable_configs), as launch configs."""
        int8 = self.cache.k.dtype == torch.int8
        return [as_launch_config(c) for c in tunable_configs(int8, self.gpu.capability, self.q.shape[-1])]

    def compile_attention_launches(self, lens) -> None:
        """Launch the first layer's attention once per candidate config, as each compiled variant of
        the launch choices (kernels/decode/split_kv_config.py): the collect's compile workers call this, so
        a session that judges the choices finds them in Triton's cache, and a session calls it
        before its first capture, so no capture loads a kernel. A launch given the newest row writes
        `new_kv` into the first layer's cache at lens - 1: the next step there writes that row anew
        before anything reads it."""
        c = self.cache
        scales = {"k_scale": c.k_scale[0], "v_scale": c.v_scale[0]} if c.k.dtype == torch.int8 else {}
        launches = compiled_launches(fl.uses_pdl(self.gpu))
        for cfg in self.attention_candidates():
            for how in launches:
                split_kv_attention(self.q, c.k[0], c.v[0], lens, self.attn, self.split, config=cfg, launch=how,
                                   new_kv=self.new_kv if how.new_kv else None, **scales)

    def kernel_pdl(self) -> list[bool]:
        """Which kernels of a step, in launch order, launch as programmatic dependents: the products
        where the GPU has it, the attention as the session chose (the embedding and argmax never)."""
        p = fl.uses_pdl(self.gpu if self.q.is_cuda else None)
        layer = [p, self.attention_launch.pdl, p, p, p]
        return [False] + layer * len(self.model.blocks) + [p, False]

    def kernel_bytes(self, cache_bytes_per_layer: float) -> list[int]:
        """What each kernel of a step must read, in launch order (kernels/decode/read_floor.py times a step
        of plain reads of these): operation_bytes, one kernel each."""
        return self.operation_bytes(cache_bytes_per_layer)

    def operation_bytes(self, cache_bytes_per_layer: float) -> list[int]:
        """What each operation reads, in launch order (operation_bytes): the roles a profile sorts the
        kernels into."""
        return operation_bytes(self.model, cache_bytes_per_layer)

    def __call__(self, history, pos, lens):
        m, c, a = self.model, self.cache, self.model.args
        eps = a.layer_norm_epsilon
        int8 = c.k.dtype == torch.int8
        t, ws, st = self.tiles, self.ws, self.stats
        g = self.gpu if self.q.is_cuda else None  # the launches' facts, asked once per step, not per launch
        B = self.x.shape[0]
        new_kv = self.new_kv if self.attention_launch.new_kv else None
        x_stats = embed(history, pos, m.wte, m.wpe, self.x, st)
        for i, blk in enumerate(m.blocks):
            scales = {"k_scale": c.k_scale[i], "v_scale": c.v_scale[i]} if int8 else {}
            fl.ln_qkv_store(self.x, blk.ln1_w, blk.ln1_b, eps, blk.attn_w, blk.attn_b, self.q, c.k[i], c.v[i], pos,
                            ws, tiles=t["qkv"], gpu=g, stats=x_stats, new_kv=new_kv, **scales)
            split_kv_attention(self.q, c.k[i], c.v[i], lens, self.attn, self.split, config=self.attention_config,
                               launch=self.attention_launch, new_kv=new_kv, **scales)
            fl.linear_residual(self.attn.view(B, -1), blk.proj_w, blk.proj_b, self.x, ws, tiles=t["proj"],
                               gpu=g, stats_out=st)
            fl.ln_linear(self.x, blk.ln2_w, blk.ln2_b, eps, blk.fc_w, blk.fc_b, self.h, ws, self.gelu, tiles=t["fc"],
                         gpu=g, stats=self.after_proj)
            fl.linear_residual(self.h, blk.out_w, blk.out_b, self.x, ws, tiles=t["out"], gpu=g, stats_out=st)
            x_stats = self.after_out
        fl.ln_linear(self.x, m.lnf_w, m.lnf_b, eps, self.lm_head_t, None, self.logits, ws, tiles=t["head"],
                     gpu=g, stats=x_stats)
        return self.logits


# --- our step, compiled by inductor -----------------------------------------------------------
# Inductor fuses the norms, bias adds, GELU and residual adds around cuBLAS products. The
# attention kernel and the int8 cache write stay ours, as custom ops: opaque to the compiler, so
# the whole step is one graph with no breaks, and the cache is written in place.

@torch.library.custom_op("gpt2_decode::attend", mutates_args=())
def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    from .attention import decode_attention

    return decode_attention(q, k, v, lens)


@_attend.register_fake
def _(q, k, v, lens):
    return torch.empty_like(q)


@torch.library.custom_op("gpt2_decode::attend_int8", mutates_args=())
def _attend_int8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor,
                 lens: torch.Tensor) -> torch.Tensor:
    from .attention import decode_attention

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



# --- the compile matrix (kernels/aot.py) ------------------------------------------------------

def compile_specs(target):
    """The decode loop's small kernels as the decode phase launches them (kernels/aot.py), through
    `embed`, `argmax_advance` and `advance` on meta tensors: the embedding in bfloat16, or float16 where
    the GPU has no bfloat16 (T4), at each model's width; the greedy argmax over fp32 and model-dtype
    logits, and the bookkeeping, at each row tiling, writing the next token (greedy) and not
    (teacher-forced). The fused products are fused_linear's specs. None of these kernels
    multiplies: no tensor cores. Core: GPT-2, batch 4, greedy."""
    from ..aot import CompileSpec, meta
    from .gpt2 import PRESETS

    dt = torch.bfloat16 if target.bf16 else torch.float16
    capacity = 1024  # history's row stride (capacity + 1) is a plain argument
    specs = []
    for name in fl.DECODE_MODELS:
        a = PRESETS[name]

        def emb(batch=4, C=a.n_embd, a=a):
            embed(meta(batch, capacity + 1, dtype=torch.int64), meta(1, dtype=torch.int64),
                  meta(a.vocab_size, C, dtype=dt), meta(a.n_positions, C, dtype=dt), meta(batch, C, dtype=dt),
                  meta(2, batch, 1, dtype=torch.float32))

        specs.append(CompileSpec(f"{str(dt).removeprefix('torch.')} {name} C={a.n_embd}", emb, tensor_cores=False,
                                 core=name == fl.DECODE_MODELS[0]))
    for batch in fl.DECODE_BATCHES:
        # Greedy steps end in argmax_advance: fp32 logits from the fused step, the model's dtype from the torch step.
        for logits_dtype in (torch.float32, dt):
            def am(batch=batch, logits_dtype=logits_dtype):
                argmax_advance(meta(batch, PRESETS["gpt2"].vocab_size, dtype=logits_dtype),
                               meta(batch, capacity + 1, dtype=torch.int64), meta(1, dtype=torch.int64),
                               meta(1, dtype=torch.int32), ArgmaxScratch(batch, "meta"))

            specs.append(CompileSpec(f"B={batch} argmax {str(logits_dtype).removeprefix('torch.')} logits", am,
                                     tensor_cores=False,
                                     core=batch == fl.DECODE_BATCHES[0] and logits_dtype == torch.float32))
        for write in (True, False):
            def adv(batch=batch, write=write):
                advance(meta(batch, dtype=torch.int64), meta(batch, capacity + 1, dtype=torch.int64),
                        meta(1, dtype=torch.int64), meta(1, dtype=torch.int32), write=write)

            specs.append(CompileSpec(f"B={batch} {'greedy' if write else 'teacher-forced'}", adv, tensor_cores=False,
                                     core=batch == fl.DECODE_BATCHES[0] and write))
    return specs
