"""flash_attention's path on a T4: the Turing tensor-core kernel, behind a first-call self-check.

On compute capability 7.5 Triton's ``tl.dot`` runs on the CUDA cores, so for float16 the default
path is kernels/attention/turing.py (Gluon, ``mma.sync.m16n8k8``). That kernel uses Gluon's private
API, which moves between Triton releases, and no T4 has run it for us; so before its first call
for each (dtype, head_dim, causal) the path checks it:

- outside any CUDA-graph capture (inside one, the call takes the portable kernel and the check
  waits for a later call), on a small input of the caller's head size and mask whose length is
  not a multiple of any key tile, so the masked tail runs;
- against SDPA on the same rounded inputs in float32, at the correctness grid's tolerance
  (4 unit roundoffs of float16, absolute plus relative, as collect/correctness.py judges);
- an import failure, a compile failure or a mismatch turns the path off for the rest of the
  process: every later call runs the portable kernel, and kernel_config_of_last_call's
  ``path_rule`` says why.

In a collect rehearsal of a T4 on another GPU ($ATTN_REHEARSE_TARGET=sm75) the path is chosen as
on a T4, and its sm75 build runs here through its PTX (kernels/retarget.py).
"""
from __future__ import annotations

import threading

import torch

from . import dispatch
from ..common import TURING_HEAD_DIMS, capability, device_index, softmax_scale

TARGET = "sm75"
DTYPES = (torch.float16,)
HEAD_DIMS = TURING_HEAD_DIMS  # the kernel's (kernels/common.py, which kernels/attention/turing.py reads too)
# Not a multiple of any key tile (32 or 64): the self-check runs the masked tail.
SELF_CHECK_LEN = 77
# The correctness grid's criterion: |out - ref| <= 4u + 4u |ref| elementwise.
SELF_CHECK_FACTOR = 4.0

_verdicts: dict[tuple, str] = {}  # (dtype, head_dim, causal, device) -> why the path runs
_disabled: str | None = None      # why the path is off for the rest of the process
_lock = threading.Lock()


def _kernel_module():
    """kernels.attention.turing, imported on first use: a Triton whose Gluon lacks what it uses
    costs this path (with the reason), not the import of kernels/."""
    from . import turing

    return turing


def available(device: torch.device) -> tuple[bool, str]:
    """The automatic choice on compute capability 7.5 (from 8.0 the portable kernel's tl.dot uses the
    tensor cores itself), or on a newer GPU rehearsing a T4."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return False, "it needs a CUDA GPU"
    try:
        cap = capability(device_index(device))
    except (AssertionError, RuntimeError) as exc:  # a torch without CUDA, or no driver
        return False, f"the GPU's compute capability could not be read ({exc})"
    if dispatch.rehearsed_target() == TARGET and cap >= (7, 5):
        return True, ""
    if cap != (7, 5):
        return False, (f"compute capability {cap[0]}.{cap[1]}: flash_attention takes the Turing kernel on 7.5 only "
                       "(call kernels.attention.turing.turing_attention to run it elsewhere)")
    return True, ""


def _tolerance_usage(out: torch.Tensor, ref: torch.Tensor, dtype) -> float:
    u = torch.finfo(dtype).eps / 2
    tol = SELF_CHECK_FACTOR * u * (1.0 + ref.abs())
    return float(((out.float() - ref).abs() / tol).max())


def self_check(head_dim: int, causal: bool, dtype, device) -> tuple[bool, str]:
    """Run the kernel once on a small ragged input and compare it with SDPA: (ok, what happened)."""
    import torch.nn.functional as F

    try:
        mod = _kernel_module()
        g = torch.Generator(device=device)
        g.manual_seed(0)
        q, k, v = (torch.randn(1, 2, SELF_CHECK_LEN, head_dim, generator=g, device=device).to(dtype)
                   for _ in range(3))
        out = _run(mod, q, k, v, causal, None)
        if out.is_cuda:
            torch.cuda.synchronize(device)  # an asynchronous launch error surfaces here, inside the check
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        usage = _tolerance_usage(out, ref, dtype)
    except Exception as exc:  # noqa: BLE001 - any failure means the portable kernel runs instead
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return False, f"the Turing kernel failed its first-call self-check ({type(exc).__name__}: {text})"
    if not usage <= 1.0:  # NaN fails too
        return False, (f"the Turing kernel's first-call self-check did not match SDPA (worst element at "
                       f"{usage:.3g}x the tolerance of {SELF_CHECK_FACTOR:g} unit roundoffs)")
    return True, (f"Turing tensor-core kernel: its first-call self-check matched SDPA at d={head_dim}"
                  f"{' causal' if causal else ''} (worst element at {usage:.2f}x the tolerance)")


def gate(q: torch.Tensor, causal: bool) -> tuple[bool, str]:
    """Whether this call may take the Turing kernel, with the reason flash_attention reports."""
    global _disabled
    fallback = "; the portable kernel runs instead"
    if _disabled is not None:
        return False, _disabled + fallback
    if q.shape[-1] not in HEAD_DIMS:  # a shape the kernel does not take: no verdict on the kernel
        return False, f"head_dim {q.shape[-1]}: the Turing kernel takes {', '.join(map(str, HEAD_DIMS))}" + fallback
    key = (q.dtype, q.shape[-1], bool(causal), q.device)
    with _lock:
        if key in _verdicts:
            return True, _verdicts[key]
    if torch.cuda.is_current_stream_capturing():  # a check here would be captured into the graph
        return False, "the Turing kernel's first-call self-check cannot run inside a CUDA-graph capture" + fallback
    ok, why = self_check(q.shape[-1], causal, q.dtype, q.device)
    with _lock:
        if ok:
            _verdicts[key] = why
        else:
            _disabled = why
    return ok, why if ok else why + fallback


def reset() -> None:
    """Forget every verdict (tests)."""
    global _disabled
    with _lock:
        _verdicts.clear()
        _disabled = None


def _ported_target(q) -> str | None:
    """The target whose build runs here through its PTX: a rehearsal's, on any GPU but a T4 itself."""
    target = dispatch.rehearsed_target()
    if target is None or not q.is_cuda or capability(device_index(q.device)) == (7, 5):
        return None
    return target


def _run(mod, q, k, v, causal, sm_scale, launcher=None):
    """The kernel's output; in a rehearsal, its sm75 build run here through its PTX."""
    from .launcher import PLAIN

    launcher = launcher or PLAIN
    target = _ported_target(q)
    if target is None:
        return mod.turing_attention(q, k, v, causal, sm_scale, launcher=launcher)
    from ..retarget import built_for

    with built_for(target):
        return mod.turing_attention(q, k, v, causal, sm_scale, launcher=launcher)


def run(q, k, v, causal, sm_scale, config, launcher):
    """The path's entry for flash_attention (see kernels/attention/dispatch.KernelPath)."""
    if config is not None:
        raise ValueError("the Turing path has fixed tiles and takes no config; use path='portable' to pass one")
    mod = _kernel_module()
    o = _run(mod, q, k, v, causal, softmax_scale(q.shape[-1], sm_scale), launcher)
    info = dict(mod.tile_config(q.shape[-1]), kernel="turing")
    if _ported_target(q):
        info["built_for"] = _ported_target(q)
    return o, info


dispatch.register_path(dispatch.KernelPath(
    name="turing", title="Turing tensor-core", dtypes=DTYPES, available=available, run=run, gate=gate,
    targets=(TARGET,)))
