"""A compact GPT-2 decoder with a preallocated KV cache, in the spirit of gpt-fast.

Weights come from a transformers GPT2LMHeadModel and are shared with it (no copy), so the
transformers baselines and our loop run on the very same tensors. The loops that drive it (greedy
or teacher-forced, eager or captured in a CUDA graph) are in kernels/decode/session.py; faster
versions of its step are in kernels/decode/gpt2_fused.py. Three cache layouts:

  Bf16Cache          the cache as bf16, read by the split-KV Triton kernel
  Int8DequantCache   int8 + scales, dequantized in full to a bf16 copy at the start of every step
                     (the straightforward approach; its peak memory is the point)
  Int8Cache          int8 + scales, read directly by the Triton kernel; no bf16 copy ever exists

Every limit is checked on the host before the GPU sees anything: an index past GPT-2's 1024
positions would otherwise surface as an asynchronous device-side assert far from its cause.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention import SplitBuffers, decode_attention
from .kv_quant import SCALE_BYTES, SCALE_DTYPE, dequantize, quantize, quantize_store_
from .split_kv_config import default_num_splits


# --- configuration ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelArgs:
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    vocab_size: int = 50257
    n_positions: int = 1024
    layer_norm_epsilon: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def to_hf_config(self):
        GPT2Config = transformers_module().GPT2Config
        # No token ids: random prompts need none, and a small test vocabulary would reject 50256.
        return GPT2Config(
            n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd, vocab_size=self.vocab_size,
            n_positions=self.n_positions, layer_norm_epsilon=self.layer_norm_epsilon,
            bos_token_id=None, eos_token_id=None,
        )

    @classmethod
    def from_hf_config(cls, cfg) -> "ModelArgs":
        if getattr(cfg, "model_type", "gpt2") != "gpt2":
            raise ValueError(f"expected a GPT-2 checkpoint, found model_type {cfg.model_type!r}.")
        unsupported = [k for k in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention")
                       if getattr(cfg, k, False)]
        if unsupported or not getattr(cfg, "scale_attn_weights", True):
            raise ValueError(f"this decoder implements plain GPT-2 attention; the checkpoint sets {unsupported or ['scale_attn_weights=False']}.")
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd {cfg.n_embd} is not a multiple of n_head {cfg.n_head}.")
        return cls(cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.n_positions, cfg.layer_norm_epsilon)


# The published GPT-2 shapes; weights are random unless a checkpoint is given.
PRESETS = {
    "gpt2": ModelArgs(n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": ModelArgs(n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": ModelArgs(n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": ModelArgs(n_layer=48, n_head=25, n_embd=1600),
}


def check_limits(args: ModelArgs, prompt_len: int, new_tokens: int, batch: int = 1) -> None:
    """Refuse, on the host, a request the model cannot serve."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}.")
    if prompt_len < 1:
        raise ValueError(f"the prompt needs at least one token, got {prompt_len}.")
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be at least 1, got {new_tokens}.")
    if prompt_len + new_tokens > args.n_positions:
        raise ValueError(
            f"prompt ({prompt_len}) + new tokens ({new_tokens}) = {prompt_len + new_tokens} exceeds the model's "
            f"{args.n_positions} positions (n_positions); shorten the prompt or generate at most "
            f"{max(0, args.n_positions - prompt_len)} tokens."
        )


def check_tokens(tokens: torch.Tensor, vocab_size: int) -> None:
    """Token ids out of range would be a device-side assert in the embedding lookup; catch them here."""
    if tokens.dtype != torch.int64 or tokens.dim() != 2:
        raise ValueError(f"tokens must be an int64 (batch, length) tensor, got {tokens.dtype} {tuple(tokens.shape)}.")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}); found {lo}..{hi}.")


def decode_dtype(device) -> torch.dtype:
    """bf16 where the GPU computes it natively (Ampere and newer), else fp16 (a T4); fp32 on the CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16


# --- transformers models ----------------------------------------------------------------------

def transformers_module():
    """transformers, imported with a clear error where it cannot be: from 5.25 on it depends on Hugging Face's
    `kernels` package and imports it by that name, which this project's own kernels/ package shadows."""
    try:
        import transformers
        from transformers import GPT2LMHeadModel  # noqa: F401 - the import that reaches hub kernels
    except ImportError as exc:
        if "'kernels'" in str(exc):
            raise ImportError("this transformers (5.25 or later) imports Hugging Face's `kernels` package, whose name "
                              "this project's kernels/ package shadows. Install transformers "
                              "below 5.25: pip install 'transformers<5.25' (the project's extras pin it).") from exc
        raise
    return transformers


def random_hf_model(args: ModelArgs, seed: int = 0, device: str | torch.device = "cuda", dtype=torch.bfloat16):
    """A GPT2LMHeadModel with transformers' own random init, built directly on `device` in `dtype`.

    Built in place because initializing 1.5B parameters on the CPU in fp32 and then moving them
    takes longer than the whole decode phase may.
    """
    GPT2LMHeadModel = transformers_module().GPT2LMHeadModel
    torch.manual_seed(seed)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = GPT2LMHeadModel(args.to_hf_config())
    finally:
        torch.set_default_dtype(prev)
    return model.to(device=device, dtype=dtype).eval()


def load_hf_model(path: str, device: str | torch.device = "cuda", dtype=torch.bfloat16):
    """A local GPT-2 checkpoint directory (config.json + weights); nothing is downloaded."""
    GPT2LMHeadModel = transformers_module().GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained(path, dtype=dtype, local_files_only=True)
    ModelArgs.from_hf_config(model.config)
    return model.to(device).eval()


def cache_kwarg(hf_model) -> str:
    """transformers renamed `past_key_values` to `cache` during 5.x; use whichever this version takes."""
    params = inspect.signature(hf_model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_of(output):
    return output["cache"] if "cache" in output else output["past_key_values"]


# --- the decoder ------------------------------------------------------------------------------

def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # transformers' Conv1D stores (in, out), so y = x @ w + b without any transpose or copy.
    return torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[1])


@dataclass
class Block:
    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    attn_w: torch.Tensor
    attn_b: torch.Tensor
    proj_w: torch.Tensor
    proj_b: torch.Tensor
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    fc_w: torch.Tensor
    fc_b: torch.Tensor
    out_w: torch.Tensor
    out_b: torch.Tensor


class GPT2:
    """GPT-2 inference only: a prefill over the prompt and a one-token step over a cache."""

    def __init__(self, args: ModelArgs, wte, wpe, blocks: list[Block], lnf_w, lnf_b, lm_head, gelu_approx: str):
        self.args, self.wte, self.wpe, self.blocks = args, wte, wpe, blocks
        self.lnf_w, self.lnf_b, self.lm_head, self.gelu_approx = lnf_w, lnf_b, lm_head, gelu_approx

    @classmethod
    def from_hf(cls, hf_model) -> "GPT2":
        """Borrow the weights of a GPT2LMHeadModel; both models then read the same memory."""
        cfg = hf_model.config
        args = ModelArgs.from_hf_config(cfg)
        act = cfg.activation_function
        approx = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}.get(act)
        if approx is None:
            raise ValueError(f"activation {act!r} is not one this decoder implements (gelu_new, gelu).")
        t = hf_model.transformer
        blocks = [
            Block(*(p.detach() for p in (
                h.ln_1.weight, h.ln_1.bias, h.attn.c_attn.weight, h.attn.c_attn.bias, h.attn.c_proj.weight,
                h.attn.c_proj.bias, h.ln_2.weight, h.ln_2.bias, h.mlp.c_fc.weight, h.mlp.c_fc.bias,
                h.mlp.c_proj.weight, h.mlp.c_proj.bias)))
            for h in t.h
        ]
        return cls(args, t.wte.weight.detach(), t.wpe.weight.detach(), blocks, t.ln_f.weight.detach(),
                   t.ln_f.bias.detach(), hf_model.lm_head.weight.detach(), approx)

    @classmethod
    def zeros(cls, args: ModelArgs, device, dtype=torch.bfloat16, gelu_approx: str = "tanh") -> "GPT2":
        """A model of this shape with all-zero weights, built in an instant: enough to compile kernels."""
        def z(*shape):
            return torch.zeros(shape, device=device, dtype=dtype)

        C = args.n_embd
        blocks = [Block(z(C), z(C), z(C, 3 * C), z(3 * C), z(C, C), z(C), z(C), z(C), z(C, 4 * C), z(4 * C),
                        z(4 * C, C), z(C)) for _ in range(args.n_layer)]
        wte = z(args.vocab_size, C)
        return cls(args, wte, z(args.n_positions, C), blocks, z(C), z(C), wte, gelu_approx)

    @property
    def device(self) -> torch.device:
        return self.wte.device

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.dtype

    def weight_bytes_per_step(self) -> int:
        """Bytes of weights one decode step must read: every block, the final norm and the LM head.

        The position table and the token embedding contribute one row each, so they are left out;
        a tied LM head is the token embedding read in full, counted once.
        """
        seen, total = set(), 0
        tensors = [t for b in self.blocks for t in vars(b).values()] + [self.lnf_w, self.lnf_b, self.lm_head]
        for t in tensors:
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += t.numel() * t.element_size()
        return total

    def parameter_count(self) -> int:
        seen, total = set(), 0
        for t in [self.wte, self.wpe, self.lnf_w, self.lnf_b, self.lm_head] + [t for b in self.blocks for t in vars(b).values()]:
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += t.numel()
        return total

    def _ln(self, x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, self.args.layer_norm_epsilon)

    def _mlp(self, blk: Block, x):
        h = F.gelu(_linear(self._ln(x, blk.ln2_w, blk.ln2_b), blk.fc_w, blk.fc_b), approximate=self.gelu_approx)
        return x + _linear(h, blk.out_w, blk.out_b)

    def prefill(self, tokens: torch.Tensor, cache) -> torch.Tensor:
        """Run the prompt (B, T), fill cache positions [0, T), return the last position's logits (B, V).

        Attention here is ordinary causal SDPA on the prompt's own bf16 keys and values; an int8
        cache stores them quantized, so quantization first shows in the decode steps.
        """
        B, T = tokens.shape
        H, D = self.args.n_head, self.args.head_dim
        x = self.wte[tokens] + self.wpe[:T]
        for i, blk in enumerate(self.blocks):
            qkv = _linear(self._ln(x, blk.ln1_w, blk.ln1_b), blk.attn_w, blk.attn_b)
            q, k, v = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
            cache.store_prompt(i, k, v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + _linear(a.transpose(1, 2).reshape(B, T, H * D), blk.proj_w, blk.proj_b)
            x = self._mlp(blk, x)
        return F.linear(self._ln(x[:, -1], self.lnf_w, self.lnf_b), self.lm_head)

    def step(self, history: torch.Tensor, pos: torch.Tensor, lens: torch.Tensor, cache) -> torch.Tensor:
        """One token per sequence: the token at history[:, pos] (pos a (1,) int64 device tensor), attending
        over lens = pos + 1 keys ((1,) int32) -> logits (B, V).

        Position and length live on the device, so the same launches stay valid at every step (CUDA graphs).
        """
        B = history.shape[0]
        H, D = self.args.n_head, self.args.head_dim
        tok = history.index_select(1, pos).squeeze(1)
        x = self.wte[tok] + self.wpe[pos]
        for i, blk in enumerate(self.blocks):
            qkv = _linear(self._ln(x, blk.ln1_w, blk.ln1_b), blk.attn_w, blk.attn_b)
            q, k, v = qkv.view(B, 3, H, D).unbind(1)
            cache.store_token(i, pos, k, v)
            a = cache.attend(i, q, lens)
            x = x + _linear(a.reshape(B, H * D), blk.proj_w, blk.proj_b)
            x = self._mlp(blk, x)
        return F.linear(self._ln(x, self.lnf_w, self.lnf_b), self.lm_head)


# --- caches -----------------------------------------------------------------------------------

class Bf16Cache:
    """(layers, B, H, capacity, D) keys and values in the model's dtype."""

    kind = "bf16"
    # The attention kernel's split buffers, made on first use for the shape of q (split_buffers).
    _split: SplitBuffers | None = None
    _split_key: tuple | None = None

    def __init__(self, args: ModelArgs, batch: int, capacity: int, device, dtype=torch.bfloat16):
        shape = (args.n_layer, batch, args.n_head, capacity, args.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def tensors(self) -> list[torch.Tensor]:
        return [self.k, self.v]

    def bytes_per_token(self) -> int:
        """Bytes one cached position occupies across all layers and the batch."""
        return self.nbytes() // self.k.shape[3]

    def begin_step(self, n_cached: int) -> None:
        """Hook before an eager step; only the dequantizing cache needs it."""

    def end_step(self) -> None:
        pass

    def store_prompt(self, i, k, v):
        T = k.shape[2]
        self.k[i, :, :, :T].copy_(k)
        self.v[i, :, :, :T].copy_(v)

    def store_token(self, i, pos, k, v):
        self.k[i].index_copy_(2, pos, k.unsqueeze(2))
        self.v[i].index_copy_(2, pos, v.unsqueeze(2))

    def split_buffers(self, q) -> SplitBuffers:
        """The attention kernel's partials and counters, made once and shared by every layer (their
        launches run one after another): a step then allocates nothing, and a CUDA graph replays it."""
        key = (tuple(q.shape), q.device)
        if self._split_key != key:
            B, H, D = q.shape
            self._split = SplitBuffers(B, H, D, default_num_splits(B, H, self.k.shape[3], q.device), q.device)
            self._split_key = key
        return self._split

    def attend(self, i, q, lens):
        return decode_attention(q, self.k[i], self.v[i], lens, buffers=self.split_buffers(q))


class Int8Cache(Bf16Cache):
    """int8 keys and values with one fp32 scale per token per head, read by the int8 kernel."""

    kind = "int8"

    def __init__(self, args: ModelArgs, batch: int, capacity: int, device, dtype=torch.bfloat16):
        shape = (args.n_layer, batch, args.n_head, capacity, args.head_dim)
        self.dtype = dtype
        self.k = torch.zeros(shape, device=device, dtype=torch.int8)
        self.v = torch.zeros(shape, device=device, dtype=torch.int8)
        self.k_scale = torch.ones(shape[:-1], device=device, dtype=SCALE_DTYPE)
        self.v_scale = torch.ones(shape[:-1], device=device, dtype=SCALE_DTYPE)

    def tensors(self):
        return [self.k, self.v, self.k_scale, self.v_scale]

    def store_prompt(self, i, k, v):
        T = k.shape[2]
        for vals, scales, x in ((self.k, self.k_scale, k), (self.v, self.v_scale, v)):
            q, s = quantize(x)
            vals[i, :, :, :T].copy_(q)
            scales[i, :, :, :T].copy_(s)

    def store_token(self, i, pos, k, v):
        quantize_store_(k, v, self.k[i], self.v[i], self.k_scale[i], self.v_scale[i], pos)

    def attend(self, i, q, lens):
        return decode_attention(q, self.k[i], self.v[i], lens, k_scale=self.k_scale[i], v_scale=self.v_scale[i],
                                buffers=self.split_buffers(q))


class Int8DequantCache(Int8Cache):
    """int8 storage, but every step first dequantizes the whole cache (all layers) to bf16.

    This is the approach that needs no new kernel: attention code written for bf16 reads the copy.
    While a step runs, the int8 cache and a full bf16 copy are both alive, which is why its peak
    memory exceeds a plain bf16 cache. Eager only: the copy's length changes every step.
    """

    kind = "int8-dequant"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._k16 = self._v16 = None

    def begin_step(self, n_cached: int) -> None:
        # One slot more than what is cached: the step's own token is written into the copy too.
        n = n_cached + 1
        self._k16 = dequantize(self.k[:, :, :, :n], self.k_scale[:, :, :, :n], self.dtype)
        self._v16 = dequantize(self.v[:, :, :, :n], self.v_scale[:, :, :, :n], self.dtype)

    def end_step(self) -> None:
        self._k16 = self._v16 = None

    def store_token(self, i, pos, k, v):
        if self._k16 is None:
            raise RuntimeError("Int8DequantCache.begin_step must run before each step (it is eager-only).")
        super().store_token(i, pos, k, v)
        # The copy gets the token as the cache now holds it (quantized), so both int8 paths see one cache.
        for copy, vals, scales in ((self._k16, self.k, self.k_scale), (self._v16, self.v, self.v_scale)):
            tok = dequantize(vals[i].index_select(2, pos), scales[i].index_select(2, pos), self.dtype)
            copy[i].index_copy_(2, pos, tok)

    def attend(self, i, q, lens):
        return decode_attention(q, self._k16[i], self._v16[i], lens, buffers=self.split_buffers(q))


CACHES = {c.kind: c for c in (Bf16Cache, Int8Cache, Int8DequantCache)}


def cache_bytes_per_token(args: ModelArgs, batch: int, int8: bool, dtype_bytes: int = 2) -> int:
    """Bytes one cached position holds: keys and values, all layers, the whole batch."""
    per_vec = args.head_dim + SCALE_BYTES if int8 else args.head_dim * dtype_bytes
    return 2 * args.n_layer * batch * args.n_head * per_vec


__all__ = [
    "ModelArgs", "PRESETS", "check_limits", "check_tokens", "decode_dtype", "random_hf_model", "load_hf_model", "GPT2",
    "Bf16Cache", "Int8Cache", "Int8DequantCache", "CACHES", "cache_bytes_per_token", "cache_kwarg", "cache_of",
]
