"""
Fused attention forward for Hopper (sm90), written in Gluon
===========================================================

The online-softmax algorithm of :mod:`kernels.attention.portable` once more, this time in Gluon
(``triton.experimental.gluon``), Triton's lower-level dialect. Where ``tl.dot`` leaves the
schedule to the compiler, Gluon states it: which warps run which code, which shared-memory
buffer holds which tile, when a TMA copy is issued, and which mbarrier says it has landed.
That is what FlashAttention-3's recipe for Hopper needs and Triton 3.6's automatic warp
specialization cannot express (it pipelines one inner loop, so the pipeline drains and refills
at every query tile):

- **TMA copies, mbarriers and warpgroup MMA.** Every tile moves by one bulk copy (rows past
  ``seq_len`` arrive as zeros, stores past it are clipped); the copy signals an mbarrier; the
  score matmul ``Q Kᵀ`` reads both operands from shared memory and ``P V`` reads ``P`` from
  registers (``wgmma``).
- **A producer warp with cross-tile prefetch** (``g2`` on): a persistent program walks its list
  of query tiles; one warp only issues copies into a ring of K/V buffers (and a pair of Q
  buffers), so it fetches the next query tile's first keys while the consumers finish the last.
- **Two consumer warpgroups**, each owning 64 of a tile's 128 query rows, in separate
  partitions: each releases a buffer as soon as its own matmul has read it.
- **Softmax/GEMM overlap** (``g3`` on): a consumer issues ``Q K_{j+1}ᵀ`` and ``P_j V_j``
  back to back and computes the softmax of tile j+1 while ``P_j V_j`` runs.
- **Ping-pong** (``g4``): the two consumers take turns issuing their matmuls (a pair of
  mbarriers passes the turn), so one runs its softmax while the other's matmuls occupy the
  tensor cores.
- **A balanced causal walk** (``g5``-``g7``): causal query tiles carry unequal work, so the host
  plans which program takes which tile; ``g7`` list-schedules them and hands the kernel a table.
- **One warpgroup per tile at d=64** (``g8``): ``g1``'s non-persistent kernel with its 128-row tile
  on 4 warps, two programs to an SM.
- **Longest first across heads** (``g9``, causal): ``g8`` on a one-dimensional grid whose programs
  take the query tiles longest first across the heads of a group that fits the L2, so the
  hardware, handing out programs in index order, list-schedules the whole grid; ``g10`` does the
  same on a 64-row tile, three programs to an SM; ``g16`` adds the softmax/GEMM overlap inside its
  one warpgroup (slower than ``g10``: the notes say why).
- **Masks only where needed:** key tiles wholly visible to every query row of the tile run
  without a mask; only the diagonal tile (causal) or the ragged last tile computes one.

Later steps add, to the warp-specialized kernel: ping-pong turns passed by hardware named barriers (``g11``),
a head of 72-96 columns in two chunks (``g15``), three consumer warpgroups on a 192-row tile (``g12``,
``g31``), P rounded in pairs before the wait for the previous P V (``g27``), the softmax's row sums kept per
lane (``g30``; ``g28`` in the tile kernel), each tile's output store left in flight (``g32``) and each tile's
last P V beside the next tile's first scores (``g34``).

The kernels are in gluon_tile.py (the tile kernel) and gluon_ws.py (the warp-specialized one); this file
holds availability and input checks, the launcher and the public :func:`gluon_attention`, a compile-only
entry point for machines without a GPU (:func:`compile_for_target`; :func:`compile_specs` for the compile
matrix), and the path flash_attention takes here. Each step of the journey (``GLUON_VERSIONS``) and the tiles each
kernel runs with are in gluon_versions.py, its notes (the change, the prediction written before it
was measured, the outcome) in kernels/attention/notes.md. Gluon's Hopper operations do not run
under Triton's CPU interpreter: on the CPU these kernels can only be compiled.
"""

from __future__ import annotations

import functools
import math

import torch
import triton

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..common import (HALF_DTYPES, HEAD_DIMS as ANY_HEAD_DIMS, LOG2E, PADDED_HEAD_DIMS, capability, device_index,
                     device_sm_count, head_dim_tile, interpreting, l2_bytes)
# The kernels keep their private names: the profiler and the report know them as _g1_kernel and _ws_kernel.
from .gluon_tile import _g1_kernel
from .gluon_ws import _ws_kernel
from .gluon_schedule import ListSchedule, lpt_head_group, plan_list_schedule, plan_schedule
from .gluon_versions import DEFAULT_VERSION, GLUON_VERSIONS, HEAD_DIMS, get_version, version_plan
from .launcher import PLAIN

DTYPES = HALF_DTYPES
_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
_SIG_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


# The tile kernel (g1, g8-g10, g16-g18, g20-g22, g28-g29) is in gluon_tile.py, the warp-specialized kernel (g2-g7,
# g11-g15, g19, g23-g27, g30-g35) in gluon_ws.py; gluon.py launches both.

# ---------------------------------------------------------------------------------------------
# 3. Availability and input checks
# ---------------------------------------------------------------------------------------------


def gluon_available(device=None):
    """(True, "") if these kernels can run on `device` (default: the current CUDA device), else
    (False, the reason). They need an sm90 GPU: wgmma exists on Hopper only."""
    if interpreting():
        return False, "Gluon's Hopper operations do not run under Triton's CPU interpreter (TRITON_INTERPRET=1)"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible to torch"
    device = torch.device("cuda") if device is None else torch.device(device)
    if device.type != "cuda":
        return False, f"needs a CUDA device, got {device.type}"
    major, minor = capability(device_index(device))  # asked once per device: flash_attention asks every call
    if (major, minor) != (9, 0):
        return False, f"needs an sm90 (Hopper) GPU for wgmma; {torch.cuda.get_device_name(device)} is sm{major}{minor}"
    return True, ""


def _check_inputs(q, k, v, sm_scale):
    """Everything that can be checked without a GPU, each with what to do about it."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"gluon_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"gluon_attention: {name} must be 4-D (batch, heads, seq_len, head_dim), "
                             f"got shape {tuple(t.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("gluon_attention: q, k and v must have the same shape (self-attention, as many key as "
                         f"query heads), got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError("gluon_attention: q, k and v must all be float16 or all bfloat16, got "
                         f"{q.dtype}, {k.dtype}, {v.dtype}; cast them with .to(torch.float16)")
    batch, heads, seq_len, head_dim = q.shape
    if not takes_head_dim(head_dim):
        raise ValueError(f"gluon_attention: head_dim must be a multiple of 8 from 40 to 128 (the sizes its 64 and "
                         f"128 tiles hold), got {head_dim}; use kernels.attention.flash_attention for other head sizes")
    if min(batch, heads, seq_len) < 1:
        raise ValueError(f"gluon_attention: batch, heads and seq_len must be at least 1, got {tuple(q.shape)}")
    if max(batch * heads, seq_len) >= 2**31:
        raise ValueError(f"gluon_attention: batch * heads and seq_len must be below 2**31, got {tuple(q.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"gluon_attention: q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if sm_scale is not None and not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"gluon_attention: sm_scale must be a finite number > 0 (or None for 1/sqrt(head_dim)), "
                         f"got {sm_scale!r}")
    if q.device.type != "cuda":
        raise ValueError(f"gluon_attention: runs on an sm90 CUDA GPU only, got tensors on {q.device}; "
                         "kernels.attention.flash_attention runs elsewhere")


def takes_head_dim(head_dim) -> bool:
    """Whether these kernels run a head size: one of their tiles, or a multiple of 8 whose next tile
    is one of them. The descriptors span the tensor's true width and their boxes the tile, so TMA
    reads zeros into the columns past it (they add nothing to a score or to P V) and the output's
    store stops at it; the kernels are the tile's, unchanged. (Below 40 the 64 tile would be mostly
    padding; the other paths' smaller tiles take those sizes.)"""
    return head_dim in ANY_HEAD_DIMS and head_dim_tile(head_dim) in HEAD_DIMS


# ---------------------------------------------------------------------------------------------
# 4. The launcher and the public entry point
# ---------------------------------------------------------------------------------------------


def _tma_ready(t):
    """A TMA descriptor needs a 16-byte aligned base, unit last stride, 16-byte multiple strides."""
    es = t.element_size()
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(s > 0 and (s * es) % 16 == 0 for s in t.stride()[:-1]))


def _tma_operand(t, name="q", launcher=PLAIN):
    """`t` itself if TMA can address it, else a copy with canonical strides (the launcher's copy;
    torch's .contiguous() would keep odd strides on size-1 dimensions, which TMA still refuses)."""
    return launcher.input(name, t, copy=not _tma_ready(t))


def _descriptor(t, rows, cols=None):
    """A 4-D descriptor over `t` at its true width whose box is `cols` columns wide, by default the
    head-size tile (see takes_head_dim)."""
    block = [1, 1, rows, cols or head_dim_tile(t.shape[-1])]
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def _l2_bytes(device):
    return l2_bytes(device_index(torch.device(device))) or H200_L2_BYTES


H200_L2_BYTES = 60 * 2**20  # for compiling without a GPU


@functools.lru_cache(maxsize=64)
def _schedule_table(plan: ListSchedule, device) -> torch.Tensor:
    """The plan's table on `device`, made once per shape and kept (a replayed launch reads its address)."""
    return torch.tensor(plan.table(), dtype=torch.int32, device=device)


def _on_device(scalars, device):
    """The launch's scalar arguments with a ListSchedule replaced by its table on `device`."""
    sched = scalars.get("sched")
    return {**scalars, "sched": _schedule_table(sched, torch.device(device))} if isinstance(sched, ListSchedule) \
        else scalars


def _launch_args(version, shape, causal, scale, sm_count, l2_bytes=H200_L2_BYTES):
    """(jit function, grid, scalar arguments, constexpr arguments, launch options) of one call."""
    batch, heads, seq_len, head_dim = shape
    plan = version_plan(version, head_dim)
    qk_scale = scale * LOG2E
    kv_head_bytes = 2 * seq_len * head_dim * 2  # one head's keys and values (fp16 or bf16)
    if plan.kernel == "g1":
        tiles_m = triton.cdiv(seq_len, plan.q_rows)
        lpt = version.lpt and causal and version.changes(head_dim)
        if lpt:  # g9: one program per (query tile, head), longest first across L2-sized head groups
            grid, head_group = (tiles_m * batch * heads, ), lpt_head_group(batch * heads, kv_head_bytes, l2_bytes)
        elif batch * heads > 65535:  # the grid's second axis; the first stays the query tiles, for L2
            raise ValueError(f"gluon_attention: version {version.name} runs at most 65535 batch x heads, "
                             f"got {batch * heads}; use a later version or split the batch")
        else:
            grid, head_group = (tiles_m, batch * heads), 1
        return (_g1_kernel, grid, dict(num_heads=heads, seq_len=seq_len, head_group=head_group, qk_scale=qk_scale),
                dict(CAUSAL=bool(causal), STAGES=plan.stages, LPT=lpt,
                     OVERLAP=version.overlap and version.changes(head_dim), **version.softmax_constexprs(head_dim)),
                dict(num_warps=plan.num_warps), plan)
    tiles_m = triton.cdiv(seq_len, plan.block_m)
    total = tiles_m * batch * heads
    grid = (min(sm_count, total), )
    head_group, snake, sched = 1, False, None
    if version.scheduled and causal:
        sched = plan_list_schedule(batch * heads, tiles_m, grid[0], kv_head_bytes, l2_bytes,
                                   plan.block_m / plan.kv_rows, version.l2_weight)
    elif version.balanced and causal:
        head_group, snake = plan_schedule(batch * heads, tiles_m, grid[0], kv_head_bytes, l2_bytes,
                                          version.l2_weight)
    return (_ws_kernel, grid, dict(sched=sched, num_heads=heads, seq_len=seq_len, tiles_m=tiles_m,
                                   total_tiles=total, head_group=head_group, snake=int(snake), qk_scale=qk_scale),
            dict(CAUSAL=bool(causal), STAGES=plan.stages, OVERLAP=version.overlap,
                 PINGPONG=2 if version.named_turns else int(version.pingpong), CONSUMER_REGS=plan.consumer_regs,
                 SCHEDULED=sched is not None, CONSUMERS=plan.consumers, PRODUCER_REGS=plan.producer_regs,
                 RELEASE=version.release_at(head_dim), SPLIT=int(bool(plan.head_b)),
                 PACK_P=version.packed_p if version.changes(head_dim) else 0,
                 LATE_RELEASE=version.late_release and version.changes(head_dim),
                 CHAINED=int(version.chained) if version.changes(head_dim) else 0,
                 DEFER_RESCALE=version.defer_rescale and version.changes(head_dim),
                 **version.softmax_constexprs(head_dim)),
            dict(num_warps=plan.num_warps), plan)


def gluon_attention(q, k, v, causal=False, sm_scale=None, *, version=None, allow_wrong=False):
    """softmax(q kᵀ * sm_scale [+ causal mask]) v for (batch, heads, seq_len, head_dim) fp16/bf16
    CUDA tensors, head_dim a multiple of 8 from 40 to 128 (takes_head_dim), on an sm90 GPU. `version`: a name in GLUON_VERSIONS (default
    DEFAULT_VERSION). Raises ValueError for anything it cannot run. Inputs TMA cannot address
    (misaligned, zero or odd strides) are copied to contiguous memory first. A step measured wrong (its record's
    wrong_output) is refused unless allow_wrong, which scripts/sweep_versions.py passes to check it again."""
    return _run(q, k, v, causal, sm_scale, version or DEFAULT_VERSION, PLAIN, allow_wrong)


def _run(q, k, v, causal, sm_scale, version, launcher, allow_wrong=False):
    """gluon_attention through `launcher` (kernels/attention/launcher.py): the plain one, or flash_attention's
    recorder, which keeps the launch for replay."""
    ver = get_version(version)
    if ver.wrong_output and not allow_wrong:
        raise ValueError(f"gluon_attention: version {ver.name} gives wrong output ({ver.wrong_output}; "
                         f"kernels/attention/notes.md, its outcome); use {ver.baseline}, the step it changed")
    _check_inputs(q, k, v, sm_scale)
    ok, reason = gluon_available(q.device)
    if not ok:
        raise ValueError(f"gluon_attention: {reason}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    q, k, v = (_tma_operand(t, name, launcher) for name, t in (("q", q), ("k", k), ("v", v)))
    o = launcher.empty("o", q.shape, q.dtype, q.device)
    with torch.cuda.device(q.device):
        _launch(ver, q, k, v, o, causal, scale, device_sm_count(q.device), _l2_bytes(q.device), launcher)
    return o


def _boxes(plan):
    """(operand index into q, k, v, o; box rows; box columns) of each TMA descriptor a launch takes, in the
    kernel's argument order: Q and O boxes of a query tile, K and V boxes of a key tile; for the ws kernel a
    second four, the boxes of a split head's second chunk (g15), else the first four again. Columns 0: the
    head-size tile."""
    rows = (plan.q_rows, plan.kv_rows, plan.kv_rows, plan.q_rows)
    first = [(i, r, plan.head_a) for i, r in enumerate(rows)]
    if plan.kernel == "g1":
        return first
    return first + [(i, r, plan.head_b or plan.head_a) for i, r in enumerate(rows)]


def _descriptors(plan, q, k, v, o):
    """The TMA descriptors a launch takes (_boxes); an unsplit ws launch passes the first four twice."""
    made = {}
    operands = (q, k, v, o)
    for box in _boxes(plan):
        if box not in made:
            made[box] = _descriptor(operands[box[0]], box[1], box[2])
    return [made[box] for box in _boxes(plan)]


def _launch(ver, q, k, v, o, causal, scale, sm_count, l2_bytes=H200_L2_BYTES, launcher=PLAIN):
    """One launch of `ver` writing o, over tensors TMA can address (checked by the caller), through
    `launcher` (kernels/attention/launcher.py)."""
    fn, grid, scalars, consts, options, plan = _launch_args(ver, tuple(q.shape), causal, scale, sm_count, l2_bytes)
    scalars = _on_device(scalars, q.device)
    return launcher.launch(fn, grid, *_descriptors(plan, q, k, v, o), *scalars.values(), **consts, **options)


def precompile(version, dtype, head_dim, causal, device=None):
    """Compile one version for this GPU without launching it (a compile cannot hang; a launch of
    a kernel with a deadlock can), so a caller can keep compiling out of what it times."""
    ok, reason = gluon_available(device)
    if not ok:
        raise ValueError(f"gluon_attention: {reason}")
    device = torch.device("cuda") if device is None else torch.device(device)
    ver = get_version(version)
    t = torch.zeros((1, 1, 16, head_dim), dtype=dtype, device=device)
    fn, grid, scalars, consts, options, plan = _launch_args(ver, tuple(t.shape), causal, 1.0, device_sm_count(device),
                                                            _l2_bytes(device))
    descs = _descriptors(plan, t, t, t, t)
    with torch.cuda.device(device):
        fn.warmup(*descs, *_on_device(scalars, device).values(), grid=grid, **consts, **options)


# ---------------------------------------------------------------------------------------------
# 5. Compiling without a GPU
# ---------------------------------------------------------------------------------------------


def _desc_signature(dtype, rows, head_dim, cols=None):
    block = [1, 1, rows, cols or head_dim_tile(head_dim)]
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[dtype])
    return f"tensordesc<{_SIG_DTYPES[dtype]}{block},{layout!r}>"


def compile_for_target(version, dtype, head_dim, causal, target=None, seq_len=4096, batch=2, heads=4):
    """Compile one version for `target` (default sm90) with the arguments a call at that shape
    would pass, without a GPU (ptxas ships with Triton). Returns Triton's CompiledKernel, whose
    .asm holds 'ttgir', 'ptx' and 'cubin'."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    ver = get_version(version)
    target = target or GPUTarget("cuda", 90, 32)
    fn, _, scalars, consts, options, plan = _launch_args(ver, (batch, heads, seq_len, head_dim), causal,
                                                        1.0 / math.sqrt(head_dim), sm_count=132)
    names = ["q_desc", "k_desc", "v_desc", "o_desc", "qb_desc", "kb_desc", "vb_desc", "ob_desc"]
    signature = {name: _desc_signature(dtype, rows, head_dim, cols) for name, (_, rows, cols) in zip(names, _boxes(plan))}
    types = {float: "fp32", int: "i32", ListSchedule: "*i32", type(None): "constexpr"}
    signature.update({name: types[type(value)] for name, value in scalars.items()})
    signature.update({name: "constexpr" for name in consts})
    consts = {**consts, **{name: None for name, value in scalars.items() if value is None}}
    return triton.compile(GluonASTSource(fn, signature, consts), target=target, options=options)


def compile_specs(target):
    """Compute capability 9.0 only (wgmma exists on Hopper alone; gluon_available refuses the
    rest): every version at both dtypes, both head sizes and both maskings, through the launcher
    on meta tensors (kernels/aot.py). The sizes are plain arguments, so one shape stands for
    all. Core (the default test, which must stay short): g1, and g4 which carries every feature
    of the warp-specialized kernel, g7 and g8 at padded head sizes, and g9 (g1's kernel on its
    one-dimensional grid) and g10 (the same on a 64-row tile); the rest compile with COMPILE_MATRIX=full (and in
    tests/test_attention_gluon.py)."""
    if target.capability != (9, 0):
        return []
    from ..aot import CompileSpec, meta

    def launch(ver, dtype, head_dim, causal):
        q = meta(2, 4, 4096, head_dim, dtype=dtype)
        # The grid is min(SMs, tiles): an H100/H200's 132 SMs; the compiled code does not depend on it.
        _launch(ver, q, q, q, torch.empty_like(q), causal, 1.0 / math.sqrt(head_dim), sm_count=132)

    core = {("g1", torch.float16, 64, False), ("g4", torch.bfloat16, 128, True),
            ("g8", torch.float16, 48, False), ("g7", torch.bfloat16, 96, True), ("g9", torch.float16, 64, True),
            ("g10", torch.bfloat16, 64, True)}
    # The padded head sizes compile to their tile's kernel; built here for the host code's descriptors.
    head_dims = HEAD_DIMS + tuple(d for d in PADDED_HEAD_DIMS + (48,) if takes_head_dim(d))
    return [CompileSpec(f"{ver.name} {str(dtype).removeprefix('torch.')} d={head_dim} "
                        f"{'causal' if causal else 'full'}",
                        lambda ver=ver, dtype=dtype, head_dim=head_dim, causal=causal: launch(ver, dtype, head_dim,
                                                                                                 causal),
                        tensor_cores=True, core=(ver.name, dtype, head_dim, causal) in core)
            for ver in GLUON_VERSIONS for dtype in DTYPES for head_dim in head_dims for causal in (False, True)]


# ---------------------------------------------------------------------------------------------
# 6. The Gluon path of flash_attention (kernels/attention/dispatch.py)
# ---------------------------------------------------------------------------------------------


def _for_dispatch(q, k, v, causal, sm_scale, config, launcher):
    """flash_attention(path="gluon"): config may name a version, {"version": "g4"}. Launched through
    `launcher`, so a repeated call replays the compiled kernel with fresh descriptors (kernels/attention/launcher.py)."""
    version = config.get("version", DEFAULT_VERSION) if isinstance(config, dict) else DEFAULT_VERSION
    o = _run(q, k, v, causal, sm_scale, version, launcher)
    ver = get_version(version)
    plan = version_plan(ver, q.shape[-1])
    return o, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.kv_rows, num_warps=plan.num_warps, num_stages=plan.stages,
                   maxnreg=None, autotuned=False, version=version)


def _register():
    from . import dispatch

    dispatch.register_path(dispatch.KernelPath(name="gluon", title="Gluon", dtypes=DTYPES,
                                               available=gluon_available, run=_for_dispatch, targets=("sm90",)))


_register()
