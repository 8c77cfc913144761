"""flash_attention: one entry point over the kernel paths, and the rule that picks one.

Each path registers itself here with :func:`register_path`: the portable kernel
(kernels/attention/portable.py, every GPU from sm75 and the CPU interpreter), the Hopper kernel
(kernels/attention/hopper.py, compute capability 9.x), the Gluon kernels (kernels/attention/gluon.py,
which :data:`SHAPE_RULES` route Hopper's shapes to) and the Turing tensor-core kernel
(kernels/attention/turing_path.py, compute capability 7.5 only, behind a first-call self-check: a path may
have a `gate` that can send a call back to the portable kernel, with the reason).
This module imports no kernel file, so no kernel file imports another.

Which kernel serves which shape on compute capability 9.x (float16 and bfloat16; first match wins,
a rule whose path cannot run here passes to the next), from :data:`SHAPE_RULES` by
``python -m kernels.attention.route_table`` and checked against them by tests/test_route_table.py::

    shape class                                    path    version  kernel function (kernels/attention/)
    ---------------------------------------------  ------  -------  ------------------------------------
    d 40-64, causal, N >= 8192, B*H*N >= 2^17      gluon   g36      gluon_ws._ws_kernel
    d 40-64, causal, any N                         gluon   g38      gluon_tile._g1_kernel
    d 40-64, non-causal, N <= 2047                 gluon   g10      gluon_tile._g1_kernel
    d 40-64, non-causal, N >= 2048, B*H*N >= 2^18  gluon   g33      gluon_ws._ws_kernel
    d 40-64, non-causal, N >= 2048                 gluon   g8       gluon_tile._g1_kernel
    d 72-80, non-causal, any N                     gluon   g30      gluon_ws._ws_kernel
    d 88-96, non-causal, N >= 2048                 gluon   g41      gluon_ws._ws_kernel
    d 88-96, non-causal, N <= 2047                 gluon   g27      gluon_ws._ws_kernel
    d 104-128, non-causal, N <= 2047               gluon   g37      gluon_ws._ws_kernel
    d 104-128, non-causal, N >= 2048               gluon   g32      gluon_ws._ws_kernel
    d 104-128, causal, any N                       gluon   g42      gluon_ws._ws_kernel
    d 72-96, causal, any N                         gluon   g37      gluon_ws._ws_kernel
    any other shape                                hopper  -        hopper._hopper_fwd_ws_persistent, or hopper._hopper_fwd_ws + hopper._diag_merge (causal from hopper.SPLIT_FROM_SEQ_LEN)

A head size runs in the tile of the next power of two (d=80 in the d=128 tile, kernels/common.py),
so a rule for a tile covers every head size that runs in it. Elsewhere flash_attention takes the
Turing path (7.5, float16) or the portable kernel.

A repeated call (same shapes, strides, dtype, alignment, causal, sm_scale, path and config) skips
validation, the path choice and Triton's argument binding: it replays the launches recorded on
the first call with that key (kernels/attention/launcher.py).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

import torch

from ..common import HEAD_DIMS, check_inputs, head_dim_tile, interpreting
from .launcher import PLAIN, LaunchCache, Recorder, config_key, replay_allowed
from ..supported import triton_version, unmeasured_reason


@dataclass(frozen=True)
class KernelPath:
    """One way flash_attention can run.

    available(device) -> (ok, reason): whether the path can run on that device at all.
    run(q, k, v, causal, sm_scale, config, launcher) -> (o, info): inputs already passed
    kernels.common.check_inputs; the path checks the rest (its dtypes, sm_scale, config), launches
    through `launcher`, and returns the output and what kernel_config_of_last_call reports.
    """

    name: str
    title: str  # for messages: "the {title} path cannot run here"
    dtypes: tuple
    available: Callable[[torch.device], tuple[bool, str]]
    run: Callable
    # gate(q, causal) -> (ok, reason): asked before an automatic choice of this path runs; not ok
    # sends the call to the portable kernel with the reason (e.g. a failed first-call self-check).
    gate: Callable | None = None
    # The GPU generations ("sm75", "sm90") whose choice this path is, for a rehearsal of one of them
    # on another GPU ($ATTN_REHEARSE_TARGET): there only these paths are chosen automatically.
    targets: tuple = ()


_PATHS: dict[str, KernelPath] = {}

# Paths flash_attention picks by itself, best first, when it is not told which: the first one
# available for the inputs' device and dtype wins (and passes its gate), else the portable path.
AUTO_ORDER = ("hopper", "turing")

@dataclass(frozen=True)
class ShapeRule:
    """Where the Hopper path is available, inputs of this head_dim (or of a head size that runs in
    its tile, e.g. 80 and 96 in 128) and masking whose seq_len lies in [min_len, max_len] take `path` instead (if it is available too), with `config` unless
    the caller passes one (the Gluon path reads a step name: {"version": "g5"}). `evidence` is the
    measurement the rule comes from; flash_attention reports it as the reason for its choice."""

    path: str
    head_dim: int
    causal: bool
    min_len: int = 1
    max_len: int | None = None
    evidence: str = ""
    config: tuple = ()  # (key, value) pairs: hashable, so a rule stays a frozen constant
    # (smallest, largest) head size of the tile the rule takes, where a step was measured on part of it
    # (g27 at d=72-96); None: every head size that runs in the tile.
    head_sizes: tuple | None = None
    # Query rows over the batch and heads (B x H x N) from which the rule applies: a kernel with few, large
    # tiles wins only where they fill the GPU many times over (g31's 192-row tiles at d=64).
    min_rows: int = 0

    def matches(self, shape, causal: bool) -> bool:
        n, d = shape[2], shape[3]
        if shape[0] * shape[1] * n < self.min_rows:
            return False
        # A padded head size runs the very kernels of its tile (every path pads in the kernel, see
        # kernels/common.py), so the tile's measurements choose for it too; and the Hopper path
        # could not take it warp-specialized, so falling through to it would cost more.
        return (d in HEAD_DIMS and head_dim_tile(d) == self.head_dim and bool(causal) == self.causal
                and (self.head_sizes is None or self.head_sizes[0] <= d <= self.head_sizes[1])
                and n >= self.min_len and (self.max_len is None or n <= self.max_len))


# Measured on the H200, 2026-11-30 (d=64 causal, d=64 below N=2048 and d=128: 2026-12-03; g27-g33: 2026-12-04; g41-g42: 2026-12-05), with Triton 3.6.0 (so only that Triton applies them by itself:
# kernels/supported.py): device time of every path and Gluon step beside SDPA's cuDNN and flash
# backends in one process, at the goal shapes (d=64: B=2 H=8; d=128: B=4 H=32), fp16 and bf16.
# First match wins.
SHAPE_RULES: tuple[ShapeRule, ...] = (
    ShapeRule("gluon", 64, True, min_len=8192, min_rows=2 ** 17, config=(("version", "g36"),),
              evidence="d=64 causal from N=8192 and 2^17 query rows (2026-12-04, beside FlashAttention-4, B=2 H=8): "
                       "g33 (three consumer warpgroups, P packed, row sums per lane, each tile's store left in "
                       "flight) with the lean mask (g36) ran 1.039x g33 at N=8192 and 1.019-1.021x at N=16384 "
                       "(0.994-0.997x and 0.986-0.987x FlashAttention-4); g33 ran 1.029-1.035x g28 at N=8192, and "
                       "0.87-0.92x g28 at N=2048-4096, where each tile's walk is short"),
    ShapeRule("gluon", 64, True, config=(("version", "g38"),),
              evidence="d=64 causal (2026-12-04, beside FlashAttention-4): the 64-row tile longest first with row sums "
                       "per lane (g28) and the lean mask (g38) ran 1.029-1.035x g28 at B=2 H=8 N=2048, "
                       "1.031-1.032x at 4096 and 1.041-1.043x at B=8 H=16 N=2048 (1.03-1.06x FlashAttention-4); "
                       "g28's kernel ran 1.18x and 1.08x cuDNN at N=512 and 1024 (2026-12-03)"),
    ShapeRule("gluon", 64, False, max_len=2047, config=(("version", "g10"),),
              evidence="d=64 non-causal below N=2048 (2026-12-03, bf16, B=2 H=8): the 64-row tile (g10's kernel, "
                       "a two-dimensional grid when non-causal) ran 1.26x cuDNN at N=512 and 1.05x at 1024, where "
                       "g8's 128-row tile ran 0.97x and 0.85x and the Hopper kernel 0.90x and 0.87x"),
    ShapeRule("gluon", 64, False, min_len=2048, min_rows=2 ** 18, config=(("version", "g33"),),
              evidence="d=64 non-causal from 2^18 query rows (2026-12-04, beside FlashAttention-4, three sweeps): "
                       "the 192-row tiles of g31 ran 1.042-1.069x g8 at B=2 H=8 N=16384 and 1.025-1.039x at B=8 H=16 "
                       "N=2048 (10.4 and 10.7 waves of tiles), 0.96-0.97x at B=2 H=8 N=4096 and 8192 (2.7 and 5.2 "
                       "waves) and 0.73x at N=2048; g33 ran 1.000-1.007x g31, g36 0.990-0.991x g33"),
    ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),),
              evidence="d=64 non-causal from N=2048: the Gluon kernel's one-warpgroup tile (g8) ran 1.06-1.08x "
                       "the fastest SDPA backend, g1 0.97-1.00x and the portable kernel 0.95-0.97x; g8 with the row "
                       "sums per lane (g29) ran 0.99-1.00x g8 (2026-12-04)"),
    ShapeRule("gluon", 128, False, head_sizes=(72, 80), config=(("version", "g30"),),
              evidence="d=72-80 non-causal (2026-12-04, beside FlashAttention-4, B=4 H=32 N=4096): g27 with the "
                       "row sums per lane (g30) ran 1.034-1.039x g27 at d=80, fp16 and bf16, where the head's "
                       "second chunk is 16 columns; g32 ran 0.984x g30"),
    ShapeRule("gluon", 128, False, min_len=2048, head_sizes=(88, 96), config=(("version", "g41"),),
              evidence="d=88-96 non-causal from N=2048 (2026-12-05, B=4 H=32 N=4096, three sweeps, beside "
                       "FlashAttention-4 in two): g32 with the counted release (g41) ran 1.006-1.010x g27, fp16 and "
                       "bf16, whichever ran first (0.927-0.932x FlashAttention-4 against 0.920-0.925x); not timed "
                       "below N=2048, where g27 stays"),
    ShapeRule("gluon", 128, False, max_len=2047, head_sizes=(88, 96), config=(("version", "g27"),),
              evidence="d=88-96 non-causal (2026-12-04, beside FlashAttention-4, B=4 H=32 N=4096): g30 ran "
                       "0.993-0.994x g27 at d=96 (a 32-column second chunk) and g32 0.979-0.980x; g27 ran 1.008x "
                       "g15 there"),
    ShapeRule("gluon", 128, False, max_len=2047, head_sizes=(104, 128), config=(("version", "g37"),),
              evidence="d=104-128 non-causal below N=2048, where each query tile walks at most 15 key tiles after the "
                       "first, which this kernel masks always (2026-12-04, beside FlashAttention-4 and cuDNN, B=4 "
                       "H=32): g32 with the lean mask (g37) ran 1.008x g32 at N=512 and 1.007-1.009x at 1024; "
                       "g37 with the counted release (g42) ran 0.954-0.964x g37 at N=512 (2026-12-05, three sweeps)"),
    ShapeRule("gluon", 128, False, min_len=2048, head_sizes=(104, 128), config=(("version", "g32"),),
              evidence="d=104-128 non-causal from N=2048 (2026-12-04, beside FlashAttention-4): g32 ran 1.017-1.018x g30 at B=4 "
                       "H=32 N=512, 1.010-1.011x at 1024, 1.004-1.011x at 4096 and 16384, 1.003x at B=1 H=16 "
                       "N=8192 and 1.006-1.009x at B=1 H=32 N=32768; g37 ran 0.957-0.990x g32 at B=4 H=32 N=16384 "
                       "and 0.977-0.978x at B=1 H=32 N=32768, each timed after g32 at a lower clock; g32 with the "
                       "counted release (g41) ran 0.969-0.987x g32 at N=16384, 0.989-0.992x at 4096 and 0.995-1.014x "
                       "at B=1 H=32 N=32768 (2026-12-05, three sweeps, one timing each kernel before and after the other)"),
    ShapeRule("gluon", 128, True, head_sizes=(104, 128), config=(("version", "g42"),),
              evidence="d=104-128 causal (2026-12-05, B=4 H=32, three sweeps, beside FlashAttention-4 in two): g37 "
                       "with the counted release (g42) ran 1.012-1.015x g37 at d=128 N=4096 and 1.008-1.020x at "
                       "N=16384, whichever ran first (1.036x and 0.994-1.010x FlashAttention-4 bf16)"),
    ShapeRule("gluon", 128, True, config=(("version", "g37"),),
              evidence="d=72-96 causal (2026-12-04, B=4 H=32, beside FlashAttention-4): g32 with the lean mask (g37) "
                       "ran 1.015-1.022x g32 at d=80 and 1.013-1.015x at d=128 N=4096; g32 ran 1.004-1.005x g27 at "
                       "d=96; g42 ran 0.989-0.993x g37 at d=80 (2026-12-05, three sweeps)"),
)


def rule_route(rules, head_dim: int, causal: bool, seq_len: int, otherwise=("hopper", None), *,
               batch_heads: int = 1) -> tuple:
    """(path, config) the first of `rules` matching this head_dim, masking and length gives, else
    `otherwise` (where no rule matched, the Hopper path was the first of AUTO_ORDER): how a version
    that shipped with rules of its own still routes after SHAPE_RULES moved on."""
    for rule in rules:
        if rule.matches((1, batch_heads, seq_len, head_dim), causal):
            return rule.path, dict(rule.config) or None
    return otherwise


PORTABLE_ONLY_ENV = "ATTN_PORTABLE_ONLY"
# Set by a collect rehearsal of another GPU (collect/device_choices.py): the automatic choice is
# the one that GPU generation would make ("sm75"), and a path chosen for it runs that generation's
# code through its PTX (kernels/retarget.py).
REHEARSE_TARGET_ENV = "ATTN_REHEARSE_TARGET"


class PathUnsupported(ValueError):
    """A kernel path this Triton cannot compile (or could not import): the collect phases record its
    rows as unsupported with this reason, and flash_attention stops choosing the path by itself."""


# name -> why: paths that failed to compile in this process, or whose module could not be imported.
_BROKEN: dict[str, str] = {}


def mark_unsupported(name: str, reason: str) -> None:
    """From now on flash_attention refuses path `name` with `reason`, and never chooses it by itself."""
    _BROKEN[name] = reason
    _CACHE.clear()


def _refusal(name: str) -> PathUnsupported:
    return PathUnsupported(f"the {_PATHS[name].title} path cannot run here: {_BROKEN[name]}; use path='portable'")


def _compile_failure(exc: BaseException) -> bool:
    """Whether an exception is Triton failing to compile a kernel (its front end, an MLIR pass or
    ptxas), as opposed to a bad input or a launch that went wrong."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import PTXASError

    return isinstance(exc, (CompilationError, PTXASError)) or (
        isinstance(exc, RuntimeError) and "PassManager::run failed" in str(exc))


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and ln.strip() != "^"]
    return f"{type(exc).__name__}: {(lines[-1] if lines else '')[:300]}"


def register_path(path: KernelPath) -> None:
    """Add (or replace) a kernel path; flash_attention(path=path.name) runs it."""
    _PATHS[path.name] = path
    _CACHE.clear()  # a replaced path must not be replayed from an entry of the old one


def register_missing(name: str, title: str, exc: BaseException) -> None:
    """A path whose module does not import with this Triton: flash_attention(path=name) raises
    PathUnsupported saying why, and never chooses it by itself."""
    reason = f"its kernels do not import with Triton {triton_version()} ({_first_line(exc)})"

    def run(*args):
        raise _refusal(name)

    register_path(KernelPath(name=name, title=title, dtypes=(), available=lambda device: (False, reason), run=run))
    mark_unsupported(name, reason)


def path_names() -> tuple:
    """The values flash_attention's `path` accepts."""
    return (None, *_PATHS)


@functools.lru_cache(maxsize=None)
def portable_only() -> bool:
    """ATTN_PORTABLE_ONLY=1: flash_attention(path=None) takes the portable path everywhere (e.g. to
    rehearse on one GPU what another without the Hopper path would run). Read once per process."""
    return os.environ.get(PORTABLE_ONLY_ENV, "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def rehearsed_target() -> str | None:
    """The GPU generation a rehearsal chooses for ($ATTN_REHEARSE_TARGET), or None. Read once per process."""
    return os.environ.get(REHEARSE_TARGET_ENV, "").strip() or None


def choose_path(q, causal=False) -> tuple[str, str]:
    """(path, the rule that chose it) for flash_attention(path=None) on these inputs."""
    name, rule, _ = _choose(q, causal)
    return name, rule


def _choose(q, causal) -> tuple[str, str, dict | None]:
    """choose_path's answer and the config the choosing rule names (None: the path's default)."""
    if portable_only():
        return "portable", f"{PORTABLE_ONLY_ENV}=1", None
    if interpreting() or not q.is_cuda:
        return "portable", "the CPU interpreter runs the portable path only", None
    name = _first_available(q.device, q.dtype)
    if name is None:
        return "portable", "no faster path is available for this dtype and device", None
    if name == "hopper":  # the rules were measured against the Hopper kernel, on Hopper
        unmeasured = unmeasured_reason()
        if unmeasured:  # said only where a faster path could have run (a Hopper GPU), not on every GPU
            return "portable", unmeasured, None
        for rule in SHAPE_RULES:
            if rule.matches(q.shape, causal) and _runs_here(rule.path, q.device, q.dtype):
                d = q.shape[3]
                padded = "" if d == rule.head_dim else f" (head_dim {d} runs in the d={rule.head_dim} tile)"
                return rule.path, f"measured rule: {rule.evidence}{padded}", dict(rule.config) or None
    gate = _PATHS[name].gate
    if gate is not None:  # a path that checks itself first (the Turing kernel): its verdict is the reason
        ok, why = gate(q, causal)
        if not ok:
            return "portable", why, None
        return name, why, None
    return name, f"{name}: available for {str(q.dtype).replace('torch.', '')} on this device", None


@dataclass(frozen=True)
class _ShapeProbe:
    """What _choose reads of q, without a tensor."""

    shape: tuple
    dtype: torch.dtype
    device: torch.device

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"


def route(shape, dtype, device, causal=False) -> tuple[str, dict | None]:
    """(path, config) flash_attention(path=None) takes for inputs of this (batch, heads, seq_len,
    head_dim) shape and dtype on `device`: a compile worker runs a small stand-in with them, and
    so compiles the kernel the real shape will run."""
    name, _, config = _choose(_ShapeProbe(tuple(shape), dtype, torch.device(device)), causal)
    return name, config


def _runs_here(name: str, device, dtype) -> bool:
    path = _PATHS.get(name)
    if path is None or name in _BROKEN or dtype not in path.dtypes:
        return False
    target = rehearsed_target()
    if target is not None:  # the rehearsed GPU's choice, run here through that GPU's code
        return target in path.targets and path.available(device)[0]
    return path.available(device)[0]


def _first_available(device, dtype) -> str | None:
    """The first path of AUTO_ORDER that can run `dtype` on `device` (the SHAPE_RULES then refine it)."""
    return next((name for name in AUTO_ORDER if _runs_here(name, device, dtype)), None)


def resolve_path(q, path=None, causal=False) -> str:
    """The kernel path flash_attention runs for these inputs: `path` when given, else see choose_path."""
    return path if path is not None else choose_path(q, causal)[0]


def path_runs(name: str, device=None, dtype=torch.float16) -> bool:
    """Whether flash_attention(path=None) takes path `name` for `dtype` inputs on `device` (default:
    the current CUDA device), at sizes where no size rule applies (and before any gate)."""
    if portable_only() or interpreting() or not torch.cuda.is_available():
        return name == "portable"
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    first = _first_available(torch.device(device), dtype) or "portable"
    if first == "hopper" and unmeasured_reason():  # Hopper's paths are taken by themselves on the measured Triton only
        first = "portable"
    return first == name


def another_path_ships(device=None) -> bool:
    """Whether flash_attention's automatic choice for half-precision inputs on `device` is a kernel
    other than the portable one (the Hopper kernel on 9.x, the Turing kernel on 7.5): the phases
    then measure the portable kernel beside it."""
    return not path_runs("portable", device)


def hopper_path_runs(device=None) -> bool:
    """Whether flash_attention takes the Hopper path for half-precision inputs on `device` (default:
    the current CUDA device). The collect phases ask it to decide whether the portable path needs
    measuring separately."""
    return path_runs("hopper", device)


_CACHE = LaunchCache()
_last_config = None


def kernel_config_of_last_call():
    """What the last flash_attention call ran, or None before the first: dict(BLOCK_M, BLOCK_N,
    num_warps, num_stages, maxnreg, autotuned, path, path_rule, and the path's own extras)."""
    return None if _last_config is None else dict(_last_config)


def launch_cache_info() -> dict:
    """Hits, misses and entries of flash_attention's cache of recorded launches."""
    return _CACHE.info()


def clear_launch_cache() -> None:
    _CACHE.clear()


def flash_attention(q, k, v, causal=False, sm_scale=None, *, path=None, config=None):
    """softmax(q k^T * sm_scale [+ causal mask]) v with a fused Triton kernel.

    q, k, v: (batch, heads, seq_len, head_dim), float16/bfloat16 (float32 works too, mainly for
    the CPU interpreter). sm_scale defaults to 1/sqrt(head_dim). path: None to choose at run time
    (see choose_path), or a registered path's name ("portable", "hopper"). config: None to let
    the path choose (it tunes), or a fixed dict(BLOCK_M=, BLOCK_N=, num_warps=, num_stages=,
    maxnreg=) run without tuning (maxnreg: portable path only).
    """
    global _last_config
    key, replay, o = _CACHE.try_replay(q, k, v, (causal, sm_scale, path, config_key(config)))
    if o is not None:
        _last_config = replay.info
        return o

    if path is not None and path not in _PATHS:
        raise ValueError(f"path must be one of {path_names()}, got {path!r}")
    check_inputs(q, k, v)
    if path is None:
        name, rule, rule_config = _choose(q, causal)
        config = rule_config if config is None else config
    else:
        name, rule = path, "asked for"
        if name in _BROKEN:
            raise _refusal(name)
        ok, why = _PATHS[name].available(q.device)
        if not ok:
            raise ValueError(f"the {_PATHS[name].title} path cannot run here: {why}; use path='portable'")
    recorder = Recorder() if key is not None and replay_allowed() else PLAIN
    try:
        o, info = _PATHS[name].run(q, k, v, causal, sm_scale, config, recorder)
    except Exception as exc:
        # The portable kernel is tested on every supported Triton; a faster path that this Triton
        # cannot compile is a fact about the install, recorded once, not a crash of the caller.
        if name == "portable" or not _compile_failure(exc):
            raise
        mark_unsupported(name, f"it does not compile with Triton {triton_version()} ({_first_line(exc)})")
        raise _refusal(name) from exc
    info = dict(info, path=name, path_rule=rule)
    if recorder is not PLAIN:
        _CACHE.put(key, recorder.replay(o, info, q.device))
    _last_config = info
    return o
