"""
Fused attention on Turing's tensor cores (sm75), in Gluon: flash_attention's path on a T4
=========================================================================================

Triton 3.6 lowers ``tl.dot`` to FMA instructions before compute capability 8.0 ("Dot op using
MMA for compute capability 75 has been deprecated"), so on a T4 the portable kernel
(:mod:`kernels.attention`) multiplies on the CUDA cores, about an eighth of the T4's fp16 tensor
rate. The lowering itself still knows Turing: an MMA layout of version 2.1 becomes
``mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32``, the warp-level MMA the T4 has. Gluon lets a
kernel choose that layout itself, so this kernel is the portable kernel's algorithm (online
softmax over key tiles, see that file) with both matmuls on that layout.

On compute capability 7.5, flash_attention takes it for float16 after a first-call self-check
(kernels/attention/turing_path.py, which registers the path and imports this file only when it is first
needed: it uses Gluon's private API). No T4 has timed it here; its numbers are checked on newer
GPUs by running its sm75 build through its PTX (kernels/retarget.py; the correctness phase's
``triton-turing-sm75`` rows). ``turing_attention`` also runs it natively on any GPU of compute
capability 7.5 or newer (the m16n8k8 instruction exists on all of them).

float16 only (Turing has no bfloat16 tensor cores); head_dim 16 to 128.
"""
from __future__ import annotations

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin

from ..common import LOG2E, TURING_HEAD_DIMS as HEAD_DIMS
from .launcher import PLAIN

NUM_WARPS = 4
BLOCK_M = 16 * NUM_WARPS  # an m16n8k8 tile of rows per warp


def block_n(head_dim):
    """Keys per step: at head_dim 128 a 64-key score tile beside the 64x128 accumulator spills on sm75."""
    return 64 if head_dim <= 64 else 32


@builtin
def _mma_turing(a, b, acc, _semantic=None):
    """acc + a @ b on the warp-level MMA of acc's layout. Gluon's public mma_v2 accepts only the
    Ampere layout (version 2.0, m16n8k16, which sm75 lacks); the Turing one (2.1) lowers to
    m16n8k8 through the same dot."""
    handle = _semantic.dot(a, b, acc, input_precision=None, max_num_imprecise_acc=None, out_dtype=acc.dtype).handle
    return gl.tensor(handle, acc.type)


@gluon.jit
def _attn_fwd_turing(Q, K, V, O, stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                     stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                     num_heads, seq_len, qk_scale,
                     HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """One program = BLOCK_M query rows of one (batch, head). Grid: (query tiles, batch*heads)."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 1], warps_per_cta=[gl.num_warps(), 1],
                                                  instr_shape=[16, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    b_op: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    # Loads: 8 consecutive fp16 (16 bytes) per thread along head_dim, which is contiguous.
    rows_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    cols_l: gl.constexpr = gl.BlockedLayout([8, 1], [8, 4], [1, gl.num_warps()], [0, 1])

    tile_m = gl.program_id(0)
    bh = gl.program_id(1)
    b = (bh // num_heads).to(gl.int64)
    h = (bh % num_heads).to(gl.int64)

    offs_m = tile_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, rows_l))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, rows_l))
    q = gl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :],
                mask=(offs_m < seq_len)[:, None], other=0.0)
    q = gl.convert_layout(q, a_op)

    # Kᵀ tiles are read as [HEAD_DIM, BLOCK_N] straight from K's rows.
    kt_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(1, cols_l))
    kt_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, cols_l))
    v_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, rows_l))
    K_head = K + b * stride_kb + h * stride_kh
    V_head = V + b * stride_vb + h * stride_vh

    rows = tile_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    cols0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, mma))
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, mma))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=mma)

    if CAUSAL:
        hi = gl.minimum((tile_m + 1) * BLOCK_M, seq_len)
    else:
        hi = seq_len
    for start_n in range(0, hi, BLOCK_N):
        kt = gl.load(K_head + (start_n + kt_n)[None, :] * stride_kn + kt_d[:, None],
                     mask=((start_n + kt_n) < seq_len)[None, :], other=0.0)
        s = _mma_turing(q, gl.convert_layout(kt, b_op), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma))
        cols = start_n + cols0
        visible = (cols < seq_len)[None, :]
        if CAUSAL:
            visible = visible & (rows[:, None] >= cols[None, :])
        s = gl.where(visible, s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1))
        p = gl.exp2(s - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)  # 0 on the first tile, where m_i is -inf
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = gl.load(V_head + (start_n + v_n)[:, None] * stride_vn + offs_d[None, :],
                    mask=((start_n + v_n) < seq_len)[:, None], other=0.0)
        # P is rounded to fp16 before the second matmul, as on every tensor-core path.
        acc = _mma_turing(gl.convert_layout(p.to(gl.float16), a_op), gl.convert_layout(v, b_op), acc)
        m_i = m_new

    out = gl.convert_layout(acc / l_i[:, None], rows_l).to(gl.float16)
    gl.store(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :], out,
             mask=(offs_m < seq_len)[:, None])


def _check(q, k, v):
    if not (isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape == k.shape == v.shape):
        raise ValueError("q, k, v must be 4-D tensors (batch, heads, seq_len, head_dim) of one shape")
    if not (q.dtype == k.dtype == v.dtype == torch.float16):
        raise ValueError(f"the Turing tensor-core path runs float16 only, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {q.shape[-1]}")
    if q.shape[2] < 1:
        raise ValueError("seq_len must be >= 1")


def _launch(q, k, v, o, causal, sm_scale, launcher=PLAIN):
    batch, heads, seq_len, head_dim = q.shape
    grid = (triton.cdiv(seq_len, BLOCK_M), batch * heads)
    return launcher.launch(
        _attn_fwd_turing, grid,
        q, k, v, o, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
        heads, seq_len, sm_scale * LOG2E, HEAD_DIM=head_dim, CAUSAL=bool(causal), BLOCK_M=BLOCK_M,
        BLOCK_N=block_n(head_dim), num_warps=NUM_WARPS)


def turing_attention(q, k, v, causal=False, sm_scale=None, launcher=PLAIN):
    """softmax(q kᵀ * sm_scale [+ causal mask]) v on Turing's m16n8k8 tensor-core MMA; float16
    CUDA tensors on a GPU of compute capability 7.5 or newer. `launcher` lets flash_attention
    record the launch for replay (kernels/attention/launcher.py)."""
    _check(q, k, v)
    if not q.is_cuda or torch.cuda.get_device_capability(q.device) < (7, 5):
        raise ValueError("the Turing tensor-core path needs a CUDA GPU of compute capability 7.5 or newer")
    # The kernel assumes unit stride along head_dim (the other three strides are free).
    q, k, v = (launcher.input(name, t, copy=t.stride(-1) != 1) for name, t in (("q", q), ("k", k), ("v", v)))
    o = launcher.empty("o", q.shape, q.dtype, q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    with torch.cuda.device(q.device):
        _launch(q, k, v, o, causal, scale, launcher)
    return o


def tile_config(head_dim: int) -> dict:
    """What kernel_config_of_last_call reports for this kernel at `head_dim` (its tiles are fixed)."""
    return dict(BLOCK_M=BLOCK_M, BLOCK_N=block_n(head_dim), num_warps=NUM_WARPS, num_stages=1, maxnreg=None,
                autotuned=False)


def compile_specs(target):
    """The experiment on every target from sm75 (kernels/aot.py): its code must use the tensor cores."""
    from ..aot import CompileSpec, meta

    if target.capability < (7, 5):
        return []
    out = []
    for d in HEAD_DIMS:
        for causal in (False, True):
            for n in (2048, 1000):
                def launch(d=d, causal=causal, n=n):
                    q = meta(2, 8, n, d, dtype=torch.float16)
                    _launch(q, q, q, torch.empty_like(q), causal, 1.0 / math.sqrt(d))

                core = target.name == "sm75" and d in (64, 128) and n == 2048
                out.append(CompileSpec(f"float16 d={d} {'causal' if causal else 'full'} N={n}", launch,
                                       tensor_cores=True, core=core))
    return out
