"""flash_attention: one entry point over the kernel paths, and the rule that picks one.

Each path registers itself here with :func:`register_path`: the portable kernel
(kernels/attention.py, every GPU from sm75 and the CPU interpreter) and the Hopper kernel
(kernels/attention_hopper.py, compute capability 9.x). A further path (a Gluon kernel) registers
the same way; it runs when asked for by name until measurements put it in :data:`AUTO_ORDER`.
This module imports no kernel file, so no kernel file imports another.

A repeated call (same shapes, strides, dtype, alignment, causal, sm_scale, path and config) skips
validation, the path choice and Triton's argument binding: it replays the launches recorded on
the first call with that key (kernels/launcher.py).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

import torch

from .common import check_inputs, interpreting
from .launcher import PLAIN, LaunchCache, Recorder, config_key, replay_allowed


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


_PATHS: dict[str, KernelPath] = {}

# Paths flash_attention picks by itself, best first, when it is not told which: the first one
# available for the inputs' device and dtype wins, else the portable path.
AUTO_ORDER = ("hopper",)

@dataclass(frozen=True)
class ShapeRule:
    """Where a path in AUTO_ORDER is available, inputs of this head_dim and masking whose seq_len
    lies in [min_len, max_len] take `path` instead (if it is available too). `evidence` is the
    measurement the rule comes from; flash_attention reports it as the reason for its choice."""

    path: str
    head_dim: int
    causal: bool
    min_len: int = 1
    max_len: int | None = None
    evidence: str = ""

    def matches(self, shape, causal: bool) -> bool:
        n, d = shape[2], shape[3]
        return (d == self.head_dim and bool(causal) == self.causal and n >= self.min_len
                and (self.max_len is None or n <= self.max_len))


# Measured on the H200, 2026-11-30, every path side by side in one process (loop time at B=2 H=8
# d=64, with the launch cache; device time at the d=128 goal shapes, B=4 H=32). First match wins.
SHAPE_RULES: tuple[ShapeRule, ...] = (
    ShapeRule("portable", 64, False, min_len=2048,
              evidence="d=64 non-causal from N=2048: the portable kernel's loop time was 0.93-0.95x the Hopper "
                       "kernel's at N=2048, 4096 and 8192"),
    ShapeRule("portable", 64, True, max_len=1024,
              evidence="d=64 causal up to N=1024: the portable kernel's loop time was 0.76x the Hopper kernel's"),
    ShapeRule("portable", 64, True, min_len=8192,
              evidence="d=64 causal from N=8192: the portable kernel's loop time was 0.86x the Hopper kernel's"),
    ShapeRule("gluon", 128, False,
              evidence="d=128 non-causal: the Gluon kernel (g3) ran 1.01-1.04x cuDNN's speed at N=4096 and 16384, "
                        "where the Hopper kernel ran about 0.99x"),
    ShapeRule("gluon", 128, True,
              evidence="d=128 causal: the Gluon kernel (g3) ran 0.95x cuDNN's speed at N=4096 against the Hopper "
                       "kernel's 0.88x, and 0.90x against 0.88x at N=16384"),
)

PORTABLE_ONLY_ENV = "ATTN_PORTABLE_ONLY"


def register_path(path: KernelPath) -> None:
    """Add (or replace) a kernel path; flash_attention(path=path.name) runs it."""
    _PATHS[path.name] = path
    _CACHE.clear()  # a replaced path must not be replayed from an entry of the old one


def path_names() -> tuple:
    """The values flash_attention's `path` accepts."""
    return (None, *_PATHS)


@functools.lru_cache(maxsize=None)
def portable_only() -> bool:
    """ATTN_PORTABLE_ONLY=1: flash_attention(path=None) takes the portable path everywhere (e.g. to
    rehearse on one GPU what another without the Hopper path would run). Read once per process."""
    return os.environ.get(PORTABLE_ONLY_ENV, "0") not in ("", "0")


def choose_path(q, causal=False) -> tuple[str, str]:
    """(path, the rule that chose it) for flash_attention(path=None) on these inputs."""
    if portable_only():
        return "portable", f"{PORTABLE_ONLY_ENV}=1"
    if interpreting() or not q.is_cuda:
        return "portable", "the CPU interpreter runs the portable path only"
    name = _first_available(q.device, q.dtype)
    if name is None:
        return "portable", "no faster path is available for this dtype and device"
    for rule in SHAPE_RULES:
        if rule.matches(q.shape, causal) and _runs_here(rule.path, q.device, q.dtype):
            return rule.path, f"measured rule: {rule.evidence}"
    return name, f"{name}: available for {str(q.dtype).replace('torch.', '')} on this device"


def _runs_here(name: str, device, dtype) -> bool:
    path = _PATHS.get(name)
    return path is not None and dtype in path.dtypes and path.available(device)[0]


def _first_available(device, dtype) -> str | None:
    """The first path of AUTO_ORDER that can run `dtype` on `device` (the SHAPE_RULES then refine it)."""
    return next((name for name in AUTO_ORDER if _runs_here(name, device, dtype)), None)


def resolve_path(q, path=None, causal=False) -> str:
    """The kernel path flash_attention runs for these inputs: `path` when given, else see choose_path."""
    return path if path is not None else choose_path(q, causal)[0]


def path_runs(name: str, device=None, dtype=torch.float16) -> bool:
    """Whether flash_attention(path=None) takes path `name` for `dtype` inputs on `device` (default:
    the current CUDA device), at sizes where no size rule applies."""
    if portable_only() or interpreting() or not torch.cuda.is_available():
        return name == "portable"
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return (_first_available(torch.device(device), dtype) or "portable") == name


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
        name, rule = choose_path(q, causal)
    else:
        name, rule = path, "asked for"
        ok, why = _PATHS[name].available(q.device)
        if not ok:
            raise ValueError(f"the {_PATHS[name].title} path cannot run here: {why}; use path='portable'")
    recorder = Recorder() if key is not None and replay_allowed() else PLAIN
    o, info = _PATHS[name].run(q, k, v, causal, sm_scale, config, recorder)
    info = dict(info, path=name, path_rule=rule)
    if recorder is not PLAIN:
        _CACHE.put(key, recorder.replay(o, info, q.device))
    _last_config = info
    return o
