"""Kernels per decode step and where a step's time goes, from the torch profiler.

A few steps run under torch.profiler; every kernel the GPU ran (including those replayed from a
CUDA graph) is put in a class by its name, and counts and durations are divided by the steps.
Kernels may overlap: with programmatic dependent launch a kernel starts while the one before it
drains, and waits for it on the device. Each instant of GPU time is therefore charged to one
kernel, the one that started first, so the classes add up to the GPU's busy time (the union of the
kernels' intervals) and never to more than the step. The classification and the arithmetic are
plain Python, tested on the CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

# Checked in order; the first match names the class. Names come from cuBLAS, PyTorch, inductor
# (triton_poi_fused_..., triton_per_fused_..., named after the ops they fuse) and our kernels.
KERNEL_CLASSES: tuple[tuple[str, str], ...] = (
    ("attention", r"split_kv|flash|fmha|attention|attend|sdpa|softmax"),
    ("cache write", r"quantize_store|index_copy|index_put|scatter"),
    ("layer norm", r"layer_norm|layernorm"),
    ("linear", r"gemm|gemv|cutlass|xmma|nvjet|sm\d+_|cublas|_linear|_ln_qkv|_attn_proj|triton_tem"),
    ("sampling", r"argmax|topk|sort|reduce_kernel|_advance"),
    ("embedding", r"_embed|embedding|index_select|index_elementwise"),
    ("copy", r"memcpy|memset|copy"),
    ("elementwise", r"elementwise|triton_poi|triton_per|triton_red|gelu|tanh|add|mul|fill"),
)
CLASS_ORDER = tuple(c for c, _ in KERNEL_CLASSES) + ("other",)
_PATTERNS = [(c, re.compile(p, re.IGNORECASE)) for c, p in KERNEL_CLASSES]


def kernel_class(name: str) -> str:
    """The class of a kernel, from its name."""
    for cls, pat in _PATTERNS:
        if pat.search(name):
            return cls
    return "other"


@dataclass
class ClassShare:
    kernel_class: str
    kernels_per_step: float
    ms_per_step: float
    top_kernel: str          # the kernel of this class that took the most time


@dataclass
class StepProfile:
    steps: int
    kernels_per_step: float
    kernel_ms_per_step: float   # the GPU's busy time per step: the union of the kernels' intervals
    classes: list[ClassShare]


def charged_times(kernels: Iterable[tuple[str, float, float]]) -> list[tuple[str, float]]:
    """(name, start, duration) of kernels -> (name, the GPU time charged to it). Where kernels overlap,
    the overlap is charged to the one that started first: the later one is waiting for it."""
    out = []
    covered = float("-inf")
    for name, start, dur in sorted(kernels, key=lambda k: k[1]):
        if dur < 0:
            raise ValueError(f"kernel {name!r} has a negative duration {dur}")
        end = start + dur
        out.append((name, max(0.0, end - max(start, covered))))
        covered = max(covered, end)
    return out


def summarize_kernels(kernels: Iterable[tuple[str, float, float]], steps: int) -> StepProfile:
    """(name, start, duration) in microseconds of every kernel over `steps` steps -> per-step figures."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    count: dict[str, int] = {}
    us: dict[str, float] = {}
    per_name: dict[str, dict[str, float]] = {}
    for name, dur in charged_times(kernels):
        c = kernel_class(name)
        count[c] = count.get(c, 0) + 1
        us[c] = us.get(c, 0.0) + dur
        per_name.setdefault(c, {})
        per_name[c][name] = per_name[c].get(name, 0.0) + dur
    classes = [ClassShare(c, count[c] / steps, us[c] / steps / 1e3, max(per_name[c], key=per_name[c].get))
               for c in CLASS_ORDER if c in count]
    return StepProfile(steps, sum(count.values()) / steps, sum(us.values()) / steps / 1e3, classes)


def profile_steps(step: Callable[[], None], steps: int, sync: Callable[[], None]) -> StepProfile:
    """Run `steps` steps under torch.profiler (CUDA activity) and summarize their kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    kernels = [(e.name, e.time_range.start, e.time_range.elapsed_us()) for e in prof.events()
               if e.device_type == DeviceType.CUDA]
    if not kernels:
        raise RuntimeError("the profiler recorded no GPU kernels (CUPTI unavailable?)")
    return summarize_kernels(kernels, steps)
