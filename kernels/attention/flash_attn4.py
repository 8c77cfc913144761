"""FlashAttention-4 (the `flash-attn-4` package, written in the CuTe DSL) as a baseline we measure against.

It is a yardstick, never a path: `flash_attention` does not call it (kernels/attention/dispatch.py runs only our
own kernels). The collect phases time it beside SDPA's backends where it is installed.

FA4 takes (batch, seq_len, heads, head_dim) tensors whose last dimension is contiguous; ours are
(batch, heads, seq_len, head_dim). A transposed view gives it that layout without a copy, and its
output is handed back through the same view, so no timed call pays for a layout change.

Installing it: `pip install '.[fa4]'` on a machine with a package index. A GPU machine without one
can carry the wheels: scripts/fa4_wheels.sh packs them, scripts/fa4_unpack.sh unpacks them there.
"""
from __future__ import annotations

import functools
import importlib

import torch

PACKAGE = "flash-attn-4"
# FA4's own rule (flash_attn/cute/interface.py): compute capability 8.x and newer.
MIN_CAPABILITY = (8, 0)
INSTALL_HINT = ("pip install '.[fa4]' (it needs a CUDA 12.8+ driver), or on a machine without a package index "
                "carry the wheels: scripts/fa4_wheels.sh packs them, scripts/fa4_unpack.sh unpacks them")


class BaselineUnavailable(RuntimeError):
    """A third-party implementation that is not installed here or does not run on this GPU: its rows are
    `unsupported` with this reason, not errors."""


@functools.lru_cache(maxsize=1)
def _import():
    """FA4's entry point, or the reason it cannot be imported (the CuTe DSL pulls in large native libraries,
    so a broken install fails here, once, rather than at every case)."""
    try:
        module = importlib.import_module("flash_attn.cute")
    except Exception as exc:  # noqa: BLE001 - any import failure means: not usable here
        return None, f"FlashAttention-4 ({PACKAGE}) is not importable: {type(exc).__name__}: {exc}"[:400]
    return module.flash_attn_func, None


def version() -> str | None:
    """The installed flash-attn-4 version, or None."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    for name in (PACKAGE, "flash_attn_4"):
        try:
            return dist_version(name)
        except PackageNotFoundError:
            continue
    return None


def unavailable_reason(device: torch.device | int | None = None) -> str | None:
    """Why FA4 cannot run on `device` here, or None when it can."""
    if not torch.cuda.is_available():
        return "FlashAttention-4 runs on NVIDIA GPUs only, and no CUDA device is visible"
    cap = torch.cuda.get_device_capability(device)
    if cap < MIN_CAPABILITY:
        return (f"FlashAttention-4 needs compute capability {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer; "
                f"this GPU is {cap[0]}.{cap[1]}")
    fn, why = _import()
    if fn is None:
        return f"{why}. Install it with: {INSTALL_HINT}"
    return None


@functools.lru_cache(maxsize=None)
def _reason_on(device: torch.device) -> str | None:
    """unavailable_reason, asked once per device (a CUDA device index): neither the GPU nor the install changes
    within a process, and a timed loop calls fa4_attention many times. A probe that raises is not cached."""
    return unavailable_reason(device)


def fa4_attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """FA4's forward on (batch, heads, seq_len, head_dim) tensors; the output has the same layout (a view)."""
    why = _reason_on(q.device)
    if why is not None:
        raise BaselineUnavailable(why)
    fn, _ = _import()
    out = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=sm_scale, causal=causal)
    out = out[0] if isinstance(out, tuple) else out
    return out.transpose(1, 2)


__all__ = ["BaselineUnavailable", "fa4_attention", "unavailable_reason", "version"]
