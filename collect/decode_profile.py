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
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .schema.decode import KERNEL_CLASS_ORDER, LAYER_ROLES, ROLE_ORDER

# Checked in order; the first match names the class. Names come from cuBLAS, PyTorch, inductor
# (triton_poi_fused_..., triton_per_fused_..., named after the ops they fuse) and our kernels.
KERNEL_CLASSES: tuple[tuple[str, str], ...] = (
    ("persistent step", r"_persistent_step_kernel|_persistent_ws_kernel"),
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
if CLASS_ORDER != KERNEL_CLASS_ORDER:
    raise ImportError(f"kernel classes {CLASS_ORDER} differ from the schema's {KERNEL_CLASS_ORDER} (collect/schema/"
                      "decode.py), which is all the report accepts; change both")
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
class RoleShare:
    role: str
    kernels_per_step: float
    ms_per_step: float       # GPU time charged to the role's kernels (overlap charged to the earlier kernel)
    # A traced persistent step's operations only (kernels/decode/persistent_trace.RoleSplit): of ms_per_step, the
    # hand-off before the median SM has its inputs, and the wait for the last SM after the median one finished.
    handoff_ms_per_step: float | None = None
    late_ms_per_step: float | None = None


@dataclass
class StepProfile:
    steps: int
    kernels_per_step: float
    kernel_ms_per_step: float   # the GPU's busy time per step: the union of the kernels' intervals
    classes: list[ClassShare]
    roles: list[RoleShare] = field(default_factory=list)


# The fused step's launches in order (kernels/decode/gpt2_fused.py): the embedding, five per layer, the LM head and
# the argmax. A role is read off the kernel's position in the step and checked against its name, so a step
# launched any other way (another step implementation, a kernel more or less) gets no roles at all.
ROLE_NAMES = {"embed": r"_embed", "qkv": r"_ln_qkv", "attention": r"split_kv", "proj": r"_linear_residual",
              "fc": r"_ln_linear", "out": r"_linear_residual", "head": r"_ln_linear", "argmax": r"argmax"}


def fused_role_order(layers: int) -> list[str]:
    """The role of each kernel of a fused step of this many layers, in launch order."""
    return ["embed"] + [r for _ in range(layers) for r in LAYER_ROLES] + ["head", "argmax"]


def fused_roles(names: list[str], layers: int) -> list[str] | None:
    """The role of each kernel of one fused step, given in launch order, or None where the names do not
    follow the fused step's order for this many layers."""
    roles = fused_role_order(layers)
    if len(names) != len(roles):
        return None
    return roles if all(re.search(ROLE_NAMES[r], n) for r, n in zip(roles, names)) else None


def summarize_roles(kernels: Iterable[tuple[str, float, float]], steps: int, layers: int) -> list[RoleShare]:
    """(name, start, duration) of every kernel of `steps` fused steps -> GPU time per step by role, charged
    as the classes are. Copies (a graph's memsets) take no role; [] where any step does not read as a
    fused step of this many layers."""
    return _roles(charged_times(kernels), steps, layers)


def _roles(charged: list[tuple[str, float]], steps: int, layers: int) -> list[RoleShare]:
    charged = [(n, us) for n, us in charged if kernel_class(n) != "copy"]
    per = len(charged) // max(1, steps)
    if steps < 1 or per * steps != len(charged):
        return []
    n: dict[str, int] = {}
    us: dict[str, float] = {}
    for i in range(steps):
        chunk = charged[i * per:(i + 1) * per]
        roles = fused_roles([name for name, _ in chunk], layers)
        if roles is None:
            return []
        for role, (_, t) in zip(roles, chunk):
            n[role] = n.get(role, 0) + 1
            us[role] = us.get(role, 0.0) + t
    return [RoleShare(r, n[r] / steps, us[r] / steps / 1e3) for r in ROLE_ORDER if r in n]


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


def summarize_kernels(kernels: Iterable[tuple[str, float, float]], steps: int,
                      fused_layers: int | None = None) -> StepProfile:
    """(name, start, duration) in microseconds of every kernel over `steps` steps -> per-step figures; for
    a fused step of `fused_layers` layers, also by role (summarize_roles), from the same charged times."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    count: dict[str, int] = {}
    us: dict[str, float] = {}
    per_name: dict[str, dict[str, float]] = {}
    charged = charged_times(kernels)
    for name, dur in charged:
        c = kernel_class(name)
        count[c] = count.get(c, 0) + 1
        us[c] = us.get(c, 0.0) + dur
        per_name.setdefault(c, {})
        per_name[c][name] = per_name[c].get(name, 0.0) + dur
    classes = [ClassShare(c, count[c] / steps, us[c] / steps / 1e3, max(per_name[c], key=per_name[c].get))
               for c in CLASS_ORDER if c in count]
    roles = _roles(charged, steps, fused_layers) if fused_layers else []
    return StepProfile(steps, sum(count.values()) / steps, sum(us.values()) / steps / 1e3, classes, roles)


def profile_steps(step: Callable[[], None], steps: int, sync: Callable[[], None],
                  fused_layers: int | None = None) -> StepProfile:
    """Run `steps` steps under torch.profiler (CUDA activity) and summarize their kernels; for a fused
    step of `fused_layers` layers, also by role (summarize_roles)."""
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
    return summarize_kernels(kernels, steps, fused_layers)
