"""
Fused attention forward in Triton, and the implementations it is measured against
==============================================================================

Every function here has the same signature and the same tensor layout:
``q, k, v`` of shape ``(batch, heads, seq_len, head_dim)``, self-attention (the query and
key sequences have the same length), returning ``o`` of the same shape and dtype as ``q``.

- :func:`flash_attention` (kernels/attention/dispatch.py): the fused kernel. Each program owns ``BLOCK_M``
  query rows of one head and streams the keys and values past them in tiles of ``BLOCK_N``,
  keeping a running maximum ``m``, a running denominator ``l`` and an unnormalised output ``acc``
  (the online softmax). The ``seq_len x seq_len`` score matrix never exists in memory. This file
  holds its portable path (any GPU from sm75, and the CPU interpreter). On compute capability 9.x
  flash_attention takes the path dispatch.py's SHAPE_RULES name for the shape: the Gluon kernels
  (gluon.py) at every d=128 shape and at d=64 from N=2048, this portable kernel at d=64 causal up
  to N=1024, and the Hopper kernel (hopper.py) for the rest.
- :func:`naive_attention`: what ordinary PyTorch code does; it materialises the scores.
- :func:`sdpa_attention`: ``torch.nn.functional.scaled_dot_product_attention``, optionally
  with one backend forced.
- :func:`reference_attention`: the same maths in float64, the yardstick for all of them.
- ``fa4_attention`` (kernels/attention/flash_attn4.py): FlashAttention-4, where it is installed; measured
  beside the others, never called by :func:`flash_attention`.

The file reads top to bottom: the kernel, its tile configurations, the wrapper that launches
it, then the PyTorch implementations and a name -> function registry.
No file I/O and no plotting live here; ``collect/`` does that.
"""

import functools
import math
import os

import torch
import triton
import triton.language as tl

from . import dispatch
from ..common import (  # noqa: F401 - the constants and check_dtype_supported stay importable from here
    DTYPES,
    HEAD_DIM_TILES,
    HEAD_DIMS,
    LOG2E,
    PADDED_HEAD_DIMS,
    check_dtype_supported,
    capability,
    check_tile,
    device_index,
    head_dim_tile,
    interpreting,
    quick_bench,
    smem_per_block,
    softmax_scale,
)
from .dispatch import flash_attention
from .flash_attn4 import fa4_attention
from .launcher import PLAIN

SDPA_BACKENDS = ("flash", "cudnn", "efficient", "math")


# ---------------------------------------------------------------------------------------------
# 1. The kernel
# ---------------------------------------------------------------------------------------------


@triton.jit
def _attend_to_keys(
    acc, l_i, m_i, q,
    K_head, V_head, stride_kn, stride_vn,
    offs_m, offs_n, offs_d, lo, hi, seq_len, qk_scale,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_TILE: tl.constexpr,
):
    """Fold the key/value tiles in [lo, hi) into the running softmax state of one query tile.

    MASKED=False is the hot loop: every key in range is real and visible to every query row,
    so there is no bounds check and no `where`. MASKED=True handles the tile that straddles
    the diagonal (CAUSAL) or the end of the sequence. A head size below its tile (offs_d runs
    past HEAD_DIM) reads zeros there, which add nothing to a score or to the output.
    """
    d_ok = offs_d < HEAD_DIM
    # Only scalars are carried from one iteration to the next: a loop-carried tensor of
    # pointers would cost 2 registers per element per thread.
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = K_head + start_n * stride_kn + k_offs
        v_ptrs = V_head + start_n * stride_vn + v_offs
        if MASKED:
            in_bounds = cols < seq_len
            k = tl.load(k_ptrs, mask=in_bounds[:, None] & d_ok[None, :], other=0.0)
        elif HEAD_DIM < HEAD_TILE:
            k = tl.load(k_ptrs, mask=d_ok[None, :], other=0.0)
        else:
            k = tl.load(k_ptrs)
        if UPCAST_DOT:
            k = k.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)

        if MASKED:
            visible = in_bounds[None, :]
            if CAUSAL:
                visible = visible & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(visible, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            # Scale after the row max so that scale-and-subtract fuse into one FMA per score.
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        p = tl.math.exp2(qk)

        # Rescale what was accumulated under the old maximum; exp2(-inf) = 0 on the first tile.
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]

        if MASKED:
            v = tl.load(v_ptrs, mask=in_bounds[:, None] & d_ok[None, :], other=0.0)
        elif HEAD_DIM < HEAD_TILE:
            v = tl.load(v_ptrs, mask=d_ok[None, :], other=0.0)
        else:
            v = tl.load(v_ptrs)
        # P is rounded to the input dtype before the second matmul, as on the tensor cores.
        p = p.to(v.dtype)
        if UPCAST_DOT:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = tl.dot(p, v, acc, input_precision=DOT_PRECISION)

        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["SEQ_BUCKET"])
def _attn_fwd(
    Q, K, V, O,
    stride_qb, stride_qh, stride_qn,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_on,
    num_heads, seq_len, qk_scale,
    SEQ_BUCKET,  # unused by the code: the autotuner keys on it (seq_len rounded up)
    HEAD_DIM: tl.constexpr,  # the true head size
    HEAD_TILE: tl.constexpr,  # the power of two its tiles are built on (kernels.common.head_dim_tile)
    CAUSAL: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One program = BLOCK_M query rows of one (batch, head). Grid: (query tiles, batch*heads)."""
    tile_m = tl.program_id(0)
    if CAUSAL:
        # Query tiles near the end of the sequence see the most keys: launch them first so the
        # short ones fill the gaps at the tail of the grid.
        tile_m = tl.num_programs(0) - 1 - tile_m
    bh = tl.program_id(1)
    b = (bh // num_heads).to(tl.int64)  # int64: batch*heads*seq*dim can pass 2^31
    h = (bh % num_heads).to(tl.int64)

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_TILE)
    d_ok = offs_d < HEAD_DIM

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :]
    K_head = K + b * stride_kb + h * stride_kh
    V_head = V + b * stride_vb + h * stride_vh

    # Rows past the end of the sequence load zeros; they are computed and never stored.
    row_ok = offs_m < seq_len
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    if UPCAST_DOT:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_TILE], dtype=tl.float32)

    if CAUSAL:
        # Stage 1: key tiles wholly below the diagonal. All visible, all in bounds, no mask.
        # (BLOCK_M is a multiple of BLOCK_N, so the diagonal starts on a key tile boundary.)
        diag_lo = tile_m * BLOCK_M
        acc, l_i, m_i = _attend_to_keys(
            acc, l_i, m_i, q, K_head, V_head, stride_kn, stride_vn,
            offs_m, offs_n, offs_d, 0, diag_lo, seq_len, qk_scale,
            BLOCK_N, False, True, UPCAST_DOT, DOT_PRECISION, HEAD_DIM, HEAD_TILE)
        # Stage 2: the key tiles on the diagonal, masked. Tiles above it are never visited.
        diag_hi = tl.minimum(diag_lo + BLOCK_M, seq_len)
        acc, l_i, m_i = _attend_to_keys(
            acc, l_i, m_i, q, K_head, V_head, stride_kn, stride_vn,
            offs_m, offs_n, offs_d, diag_lo, diag_hi, seq_len, qk_scale,
            BLOCK_N, True, True, UPCAST_DOT, DOT_PRECISION, HEAD_DIM, HEAD_TILE)
    else:
        # Every full key tile without a mask, then the ragged tail (if any) with one.
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_to_keys(
            acc, l_i, m_i, q, K_head, V_head, stride_kn, stride_vn,
            offs_m, offs_n, offs_d, 0, full_hi, seq_len, qk_scale,
            BLOCK_N, False, False, UPCAST_DOT, DOT_PRECISION, HEAD_DIM, HEAD_TILE)
        acc, l_i, m_i = _attend_to_keys(
            acc, l_i, m_i, q, K_head, V_head, stride_kn, stride_vn,
            offs_m, offs_n, offs_d, full_hi, seq_len, seq_len, qk_scale,
            BLOCK_N, True, False, UPCAST_DOT, DOT_PRECISION, HEAD_DIM, HEAD_TILE)

    # Each real row saw at least key 0, so l_i > 0 there.
    acc = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :]
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


# ---------------------------------------------------------------------------------------------
# 2. Tile configurations per GPU generation
# ---------------------------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, num_warps, num_stages). BLOCK_M is always a multiple of BLOCK_N.
# Register and shared-memory figures quoted below come from compiling for each target with
# Triton 3.6 (ptxas -v), fp16, no GPU needed.
_CONFIGS_BY_ARCH = {
    # Turing (T4): Triton 3.6 lowers tl.dot to FMA on sm_75, not to tensor cores, so the
    # score and output tiles live in registers: small tiles (64x64 spills at d=64), and one
    # stage, as there is no cp.async to pipeline with. 64 KB of shared memory per block.
    "sm75": [
        (64, 32, 8, 1), (32, 32, 8, 1), (32, 32, 4, 1), (32, 16, 4, 1), (16, 16, 4, 1),
    ],
    # Ampere/Ada (A100: 163 KB per block; A10/L4/RTX: 99 KB): mma.sync with cp.async
    # pipelining. 128x64 with 8 warps compiles to ~210 registers at d=128, no spills.
    "sm80": [
        (128, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 3), (128, 128, 8, 2),
        (64, 64, 4, 3), (64, 64, 4, 4), (64, 32, 4, 2),
    ],
    # Hopper (H100/H200: 227 KB per block): wgmma from two warpgroups over a 128-row tile,
    # 64 or 128 keys per step, 2-4 stages. At d=128, 128x64/8 warps uses ~190 registers and
    # 128 KB (3 stages); 128x128 reaches 255 registers. 64x32 is the d=256 fallback.
    "sm90": [
        (128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 8, 4),
        (64, 64, 4, 3), (64, 32, 4, 2),
    ],
}

# Shared memory per block (opt-in maximum) when the driver cannot be asked.
_SMEM_FALLBACK = {"sm75": 64 * 1024, "sm80": 99 * 1024, "sm90": 227 * 1024}

# Used under TRITON_INTERPRET=1: one small tile, no tuning, so CPU tests stay fast.
_INTERPRETER_CONFIG = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1, maxnreg=None)


def arch_of(capability):
    """The config family for a CUDA compute capability (major, minor)."""
    major, minor = capability
    if major >= 9:
        return "sm90"  # Blackwell reuses the Hopper list until it gets its own path
    if major == 8:
        return "sm80"
    return "sm75"


def _smem_bytes(block_m, block_n, num_stages, head_dim, elem_bytes, arch="sm80"):
    """Shared memory of the kernel as Triton 3.6 lays it out: the Q tile plus K and V tiles
    for each pipeline buffer (num_stages of them on Hopper, num_stages - 1 before). A lower
    bound (a layout-conversion scratch can come on top): underestimating is safe, because
    the autotuner skips a config that does not fit when it is loaded."""
    buffers = num_stages if arch == "sm90" else max(1, num_stages - 1)
    return elem_bytes * head_dim * (block_m + 2 * buffers * block_n)


def _fp32_regs_per_thread(block_m, block_n, num_warps, head_dim):
    """Registers each thread needs just to hold its share of the fp32 accumulator and the
    fp32 score tile. Compiled for sm80/sm90, configs above 128 here used all 255 registers
    a thread may have and spilled; 96 compiles to ~190-210 registers."""
    return (block_m * head_dim + block_m * block_n) // (32 * num_warps)


_MAX_FP32_REGS = 128


def candidate_configs(capability, head_dim, dtype, smem_limit=None):
    """The configs the autotuner will time for this GPU, head_dim and dtype, as
    triton.Config objects: those whose tiles cannot fit in shared memory, or whose
    accumulators alone would crowd the register file, are dropped."""
    arch = arch_of(capability)
    head_dim = head_dim_tile(head_dim)  # the tiles, shared memory and registers are the padded size's
    limit = smem_limit or _SMEM_FALLBACK[arch]
    elem = torch.tensor([], dtype=dtype).element_size()
    table = _CONFIGS_BY_ARCH[arch]
    fits = [c for c in table
            if _smem_bytes(c[0], c[1], c[3], head_dim, elem, arch) <= limit
            and _fp32_regs_per_thread(c[0], c[1], c[2], head_dim) <= _MAX_FP32_REGS]
    if not fits:  # large head_dim on a small GPU: keep the smallest tile and let it try
        fits = [min(table, key=lambda c: _smem_bytes(c[0], c[1], c[3], head_dim, elem, arch))]
    return [triton.Config(dict(BLOCK_M=bm, BLOCK_N=bn), num_warps=w, num_stages=s)
            for bm, bn, w, s in fits]


def _smem_limit(device):
    """Opt-in shared memory per block of this device (kernels/common.smem_per_block)."""
    return smem_per_block(device_index(torch.device(device)))


def _tuning_target(device):
    """(compute capability, shared memory per block) the autotuner picks candidates for: this
    device's, or another GPU's where $ATTN_TUNE_AS = "<major>.<minor>:<bytes>" names one (set only
    by a collect rehearsal of that GPU's choices; the kernel still compiles for this one)."""
    forced = os.environ.get("ATTN_TUNE_AS")
    if forced:
        try:
            cc, smem = forced.split(":")
            major, minor = cc.split(".")
            return (int(major), int(minor)), int(smem)
        except ValueError:
            raise ValueError(f"ATTN_TUNE_AS must look like '7.5:65536', got {forced!r}") from None
    return torch.cuda.get_device_capability(device), _smem_limit(device)


@functools.lru_cache(maxsize=None)
def _autotuned_kernel(capability, smem_limit):
    """An autotuner over _attn_fwd for one GPU generation (built lazily: at import time there
    may be no GPU to ask). Keyed on the rounded sequence length, head_dim, causal and dtype
    (the autotuner adds the dtypes of tensor arguments to the key itself)."""
    arch = arch_of(capability)
    table = [triton.Config(dict(BLOCK_M=bm, BLOCK_N=bn), num_warps=w, num_stages=s)
             for bm, bn, w, s in _CONFIGS_BY_ARCH[arch]]

    def prune(configs, named_args, **kwargs):
        wanted = candidate_configs(capability, kwargs["HEAD_DIM"], named_args["Q"].dtype, smem_limit)
        wanted = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in wanted}
        return [c for c in configs
                if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) in wanted]

    return triton.autotune(
        configs=table,
        key=["SEQ_BUCKET", "HEAD_DIM", "CAUSAL"],
        prune_configs_by={"early_config_prune": prune},
        do_bench=quick_bench,
    )(_attn_fwd)


# ---------------------------------------------------------------------------------------------
# 3. The wrapper
# ---------------------------------------------------------------------------------------------

_CONFIG_KEYS = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "maxnreg"}


def _check_config(config):
    """Fill defaults into a fixed tile config and reject ones the kernel cannot use."""
    unknown = set(config) - _CONFIG_KEYS
    if unknown:
        raise ValueError(f"config keys must be among {sorted(_CONFIG_KEYS)}, got {sorted(unknown)}")
    if "BLOCK_M" not in config or "BLOCK_N" not in config:
        raise ValueError("config needs BLOCK_M and BLOCK_N")
    cfg = {"num_warps": 4, "num_stages": 2, "maxnreg": None, **config}
    check_tile("BLOCK_M", cfg["BLOCK_M"])
    check_tile("BLOCK_N", cfg["BLOCK_N"])
    if cfg["BLOCK_M"] % cfg["BLOCK_N"]:
        raise ValueError(f"BLOCK_M must be a multiple of BLOCK_N, got {cfg['BLOCK_M']} and {cfg['BLOCK_N']}")
    return cfg


def portable_attention(q, k, v, causal=False, sm_scale=None, config=None, launcher=PLAIN):
    """The portable path of flash_attention, on inputs kernels.common.check_inputs passed.
    Returns (o, what kernel_config_of_last_call reports). `launcher` lets flash_attention record
    the launch for replay (kernels/attention/launcher.py)."""
    sm_scale = softmax_scale(q.shape[-1], sm_scale)
    fixed = _check_config(config) if config is not None else None

    # The kernel assumes unit stride along head_dim (the other three strides are free).
    q, k, v = (launcher.input(name, t, copy=t.stride(-1) != 1) for name, t in (("q", q), ("k", k), ("v", v)))
    o = launcher.empty("o", q.shape, q.dtype, q.device)

    if interpreting() and fixed is None:
        fixed = dict(_INTERPRETER_CONFIG)
    if fixed is not None:
        launch = dict(BLOCK_M=fixed["BLOCK_M"], BLOCK_N=fixed["BLOCK_N"],
                      num_warps=fixed["num_warps"], num_stages=fixed["num_stages"])
        if fixed["maxnreg"] is not None:
            launch["maxnreg"] = fixed["maxnreg"]
        _launch(_attn_fwd, q, k, v, o, causal, sm_scale, launcher=launcher, **launch)
        return o, dict(fixed, autotuned=False)
    index = device_index(q.device)
    tuner = _autotuned_kernel(*_tuning_target(q.device))
    if index == torch.cuda.current_device():
        _tune_and_launch(tuner, q, k, v, o, causal, sm_scale, launcher)
    else:  # the autotuner times on the current device: make it q's
        with torch.cuda.device(index):
            _tune_and_launch(tuner, q, k, v, o, causal, sm_scale, launcher)
    best = tuner.best_config
    return o, dict(BLOCK_M=best.kwargs["BLOCK_M"], BLOCK_N=best.kwargs["BLOCK_N"], num_warps=best.num_warps,
                   num_stages=best.num_stages, maxnreg=best.maxnreg, autotuned=True)


def _tune_and_launch(tuner, q, k, v, o, causal, sm_scale, launcher):
    _precompile_candidates(tuner, q, k, v, o, causal, sm_scale)
    _launch(tuner, q, k, v, o, causal, sm_scale, launcher=launcher)


def _launch(kernel, q, k, v, o, causal, sm_scale, warmup=False, launcher=PLAIN, **launch):
    """Launch kernel (_attn_fwd, or an autotuner over it) writing o; inputs already checked.
    warmup=True compiles without launching."""
    batch, heads, seq_len, head_dim = q.shape

    def grid(meta):
        return (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    call = functools.partial(kernel.warmup, grid=grid) if warmup else functools.partial(launcher.launch, kernel, grid)
    call(
        q, k, v, o,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        o.stride(0), o.stride(1), o.stride(2),
        heads, seq_len, sm_scale * LOG2E,
        triton.next_power_of_2(seq_len),
        HEAD_DIM=head_dim,
        HEAD_TILE=head_dim_tile(head_dim),
        CAUSAL=bool(causal),
        # The interpreter multiplies bf16 tl.dot operands wrongly (raw bits) and fp16 ones
        # without fp32 accumulation: give it fp32 operands. Never on a GPU.
        UPCAST_DOT=interpreting(),
        # fp32 inputs mean fp32 maths, not TF32; fp16/bf16 ignore this.
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        **launch,
    )


# Compiling a config takes seconds and the autotuner compiles its candidates one after the
# other; compiling them first on a thread pool (Triton's own async-compile hook) divides the
# wait by the number of cores. ATTN_PARALLEL_COMPILE=0 turns it off.
_PARALLEL_COMPILE = os.environ.get("ATTN_PARALLEL_COMPILE", "1") != "0"


def _tuning_key(q, causal):
    """The key Triton's Autotuner.run files this call under (keys, then tensor dtypes)."""
    return (triton.next_power_of_2(q.shape[2]), q.shape[3], bool(causal)) + (str(q.dtype),) * 4


def _precompile_candidates(tuner, q, k, v, o, causal, sm_scale):
    """Compile every candidate config in parallel before the first tuning of this key.
    Best effort: on any failure the autotuner simply compiles them itself, serially."""
    if not _PARALLEL_COMPILE or _tuning_key(q, causal) in tuner.cache:
        return
    try:
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode

        workers = min(len(tuner.configs), os.cpu_count() or 1)
        if workers < 2:
            return
        with ThreadPoolExecutor(workers) as pool, AsyncCompileMode(pool, ignore_errors=True):
            _launch(tuner, q, k, v, o, causal, sm_scale, warmup=True)
    except Exception:
        pass


# flash_attention (kernels/attention/dispatch.py) runs this path where no faster one is available.
dispatch.register_path(dispatch.KernelPath(
    name="portable", title="portable", dtypes=DTYPES, available=lambda device: (True, ""),
    run=portable_attention))


# ---------------------------------------------------------------------------------------------
# 4. What it is compared against
# ---------------------------------------------------------------------------------------------


def _scale(q, sm_scale):
    return 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)


def _causal_mask(n, device):
    """True above the diagonal: the future keys a query must not see."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def naive_attention(q, k, v, causal=False, sm_scale=None):
    """Attention as ordinary PyTorch code writes it: the full score matrix is materialised
    in the input dtype, softmax runs in fp32 and is cast back before multiplying by v."""
    scores = (q @ k.transpose(-2, -1)) * _scale(q, sm_scale)
    if causal:
        scores = scores.masked_fill(_causal_mask(q.shape[-2], q.device), float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return probs @ v


def _sdpa_backend(name):
    from torch.nn.attention import SDPBackend

    members = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    if name not in members:
        raise ValueError(f"unknown SDPA backend {name!r}; valid: {', '.join(SDPA_BACKENDS)} "
                         "(or None to let PyTorch choose)")
    return members[name]


def sdpa_attention(q, k, v, causal=False, sm_scale=None, backend=None):
    """torch.nn.functional.scaled_dot_product_attention; backend None lets PyTorch choose,
    else one of SDPA_BACKENDS is forced. A forced backend that cannot run this input makes
    PyTorch raise RuntimeError ("No available kernel")."""
    import torch.nn.functional as F

    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(_sdpa_backend(backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)


def reference_attention(q, k, v, causal=False, sm_scale=None):
    """The yardstick: the same maths in float64 on the inputs' device; returns float64."""
    q, k, v = q.double(), k.double(), v.double()
    scores = (q @ k.transpose(-2, -1)) * _scale(q, sm_scale)
    if causal:
        scores = scores.masked_fill(_causal_mask(q.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# ---------------------------------------------------------------------------------------------
# 5. Registry for the benchmarks
# ---------------------------------------------------------------------------------------------

IMPLEMENTATIONS = {
    "naive": naive_attention,
    "triton": flash_attention,
    # The same kernel held to the portable path: on a Hopper GPU, what TMA and warp specialization buy.
    "triton-portable": functools.partial(flash_attention, path="portable"),
    "sdpa": sdpa_attention,
    **{f"sdpa-{b}": functools.partial(sdpa_attention, backend=b) for b in SDPA_BACKENDS},
    # A yardstick only (kernels/attention/flash_attn4.py): flash_attention never dispatches to it.
    "fa4": fa4_attention,
}


def get_impl(name):
    """The attention function registered under name, called as f(q, k, v, causal, sm_scale)."""
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {name!r}; valid: {', '.join(IMPLEMENTATIONS)}")
    return IMPLEMENTATIONS[name]


# ---------------------------------------------------------------------------------------------
# 6. What the compile matrix builds (kernels/aot.py): the variants a phase may launch per GPU
# ---------------------------------------------------------------------------------------------


def compile_specs(target):
    """The portable kernel as the phases launch it on `target` (a kernels.aot.Target): every
    autotuner candidate at every head_dim and masking in float16, and in bfloat16 where the GPU
    has it; plus the ragged and length-1 specialisations Triton makes of seq_len (correctness
    runs N = 1, 17, 1000, 4097), at every tile size and the padded head sizes of PADDED_HEAD_DIMS
    (the other padded sizes compile to the same tiles with other masks). Core (the default test,
    which must stay short): the candidate with the largest tiles at every head_dim, since a compile
    fails on shared memory or registers; causal and bfloat16 at the head_dims the benchmarks run;
    the ragged and length-1 variants."""
    from ..aot import CompileSpec, meta

    dtypes = (torch.float16, torch.bfloat16) if target.bf16 else (torch.float16,)
    # Tensor cores from Ampere on; Triton 3.6 lowers tl.dot to FMA on sm75.
    mma = target.capability >= (8, 0)

    def spec(dtype, head_dim, causal, cfg, core, seq_len=2048):
        q = meta(2, 8, seq_len, head_dim, dtype=dtype)
        launch = dict(BLOCK_M=cfg.kwargs["BLOCK_M"], BLOCK_N=cfg.kwargs["BLOCK_N"], num_warps=cfg.num_warps,
                      num_stages=cfg.num_stages)
        label = (f"{str(dtype).removeprefix('torch.')} d={head_dim} {'causal' if causal else 'full'} N={seq_len} "
                 f"{launch['BLOCK_M']}x{launch['BLOCK_N']}/w{cfg.num_warps}/s{cfg.num_stages}")
        return CompileSpec(label, lambda: _launch(_attn_fwd, q, q, q, torch.empty_like(q), causal,
                                                  1.0 / math.sqrt(head_dim), **launch), tensor_cores=mma, core=core)

    def weight(cfg, head_dim):
        bm, bn, w, st = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages
        return _smem_bytes(bm, bn, st, head_dim, 2, arch_of(target.capability)), _fp32_regs_per_thread(bm, bn, w, head_dim)

    out = []
    for dtype in dtypes:
        half = dtype == torch.float16
        for head_dim in HEAD_DIM_TILES + PADDED_HEAD_DIMS:
            cands = candidate_configs(target.capability, head_dim, dtype, target.smem_per_block)
            heaviest = max(cands, key=lambda c: weight(c, head_dim_tile(head_dim)))
            for causal in (False, True):
                core = half and not causal or (causal and head_dim in (64, 128) and (half or head_dim == 128))
                out += [spec(dtype, head_dim, causal, c, core and c is heaviest) for c in cands]
        first = candidate_configs(target.capability, 64, dtype, target.smem_per_block)[0]
        out += [spec(dtype, 64, causal, first, half and causal == (n == 17), n) for causal in (False, True)
                for n in (1, 17)]
    return out
