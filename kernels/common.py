"""What every attention kernel path shares: constants and the checks of its inputs.

A leaf module: it imports no kernel file, so each path (kernels/attention/portable.py,
kernels/attention/hopper.py, a Gluon path) can use it without importing another path.
"""
from __future__ import annotations

import functools
import math
import os

import torch

# softmax(x) = 2^(x * log2(e)) / sum(...): folding log2(e) into the scale lets a kernel call
# exp2, a single hardware instruction, instead of exp.
LOG2E = 1.4426950408889634

# Every head size FlashAttention and cuDNN take through SDPA: the multiples of 8 up to 256. (A multiple of 8
# also keeps every row of a half-precision tensor 16-byte aligned, which TMA descriptors need.)
HEAD_DIMS = tuple(range(8, 257, 8))
# The head sizes the kernels are built for. A tl.arange and a register tile need a power of two, so
# any other head size runs in the tile of the next one: loads read zeros past the true head size (a
# mask, or TMA's zero fill) and stores stop there, so the padded columns add to no score or output.
HEAD_DIM_TILES = (16, 32, 64, 128, 256)
# Padded head sizes of real models (80: Phi-2; 96: GPT-NeoX-20B; 192: the q/k size of DeepSeek-V3): the
# correctness grid checks them and the compile matrix builds them beside the tiles.
PADDED_HEAD_DIMS = (80, 96, 192)
# The head sizes the Turing kernel takes (kernels/attention/turing.py); its path (turing_path.py)
# reads them here, so checking a call does not load the kernel's Gluon code.
TURING_HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HALF_DTYPES = (torch.float16, torch.bfloat16)


def quick_bench(fn, quantiles=None, **kw):
    """The timer our autotuners use in place of Triton's default (25 ms warm-up, 100 ms of runs per
    candidate): tile configs differ by far more than the noise of 25 ms of runs, and a collect
    tunes dozens of keys."""
    import triton

    return triton.testing.do_bench(fn, warmup=5, rep=25, quantiles=quantiles, **kw)


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_inputs(q, k, v) -> None:
    """Raise ValueError, saying what was expected, for inputs no attention path can run."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq_len, head_dim), got shape {tuple(t.shape)}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError("q, k, v must have the same shape (self-attention), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on the same device, got {q.device}, {k.device}, {v.device}")
    if q.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of float16, bfloat16, float32, got {q.dtype}")
    batch, heads, seq_len, head_dim = q.shape
    check_head_dim(head_dim)
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    if batch < 1 or heads < 1:
        raise ValueError(f"batch and heads must be >= 1, got batch={batch}, heads={heads}")
    if interpreting():
        return
    if q.device.type == "cpu":
        raise ValueError("q, k, v are CPU tensors: the Triton kernel needs a CUDA GPU "
                         "(set TRITON_INTERPRET=1 to run on the CPU)")
    if q.device.type != "cuda":
        raise ValueError(f"q, k, v must be CUDA tensors, got device {q.device}")
    check_dtype_supported(q.dtype, capability(device_index(q.device)))


def check_head_dim(head_dim) -> None:
    """Raise ValueError, naming the sizes allowed and the fix, for a head size no path takes."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be a multiple of 8 from 8 to 256 (8, 16, 24, ..., 256), got {head_dim}; "
                         "pad the head dimension with zeros up to the next multiple of 8 (and pass sm_scale = "
                         "1/sqrt(true head_dim))")


def head_dim_tile(head_dim: int) -> int:
    """The kernels' tile for a head size: the smallest of HEAD_DIM_TILES that holds it."""
    check_head_dim(head_dim)
    return next(t for t in HEAD_DIM_TILES if t >= head_dim)


def softmax_scale(head_dim: int, sm_scale) -> float:
    """sm_scale as a float (1/sqrt(head_dim) when None). The kernels scale each row's maximum
    rather than every score, which needs a positive scale."""
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"sm_scale must be finite and > 0, got {sm_scale}")
    return scale


def device_index(device: torch.device) -> int:
    """The CUDA device index of `device` (the current device when it has none)."""
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.lru_cache(maxsize=None)
def capability(index: int) -> tuple[int, int]:
    """Compute capability of CUDA device `index`, asked once: every call checks it."""
    return tuple(torch.cuda.get_device_capability(index))


# Programmatic dependent launch (griddepcontrol, Triton's launch_pdl) needs Hopper or newer.
PDL_CAPABILITY = (9, 0)


def has_pdl(capability: tuple[int, int]) -> bool:
    """Whether a GPU of this compute capability has programmatic dependent launch. (The interpreter
    has none whatever GPU it stands for: launchers check interpreting() too.)"""
    return tuple(capability) >= PDL_CAPABILITY


@functools.lru_cache(maxsize=None)
def sm_count(index: int) -> int:
    """Streaming multiprocessors of CUDA device `index`, asked once: persistent grids size by it."""
    return torch.cuda.get_device_properties(index).multi_processor_count


def device_sm_count(device, cpu_programs: int = 4) -> int:
    """SMs of a CUDA `device` (a torch.device or its name); on the CPU (the interpreter) a small fixed
    number, so grids sized by it stay small there."""
    device = torch.device(device)
    return sm_count(device_index(device)) if device.type == "cuda" else cpu_programs


@functools.lru_cache(maxsize=None)
def smem_per_block(index: int) -> int:
    """Shared memory one block of CUDA device `index` may opt in to, in bytes, asked once: from torch,
    else from Triton's driver, else the least any GPU of its generation gives (T4 64 KiB, sm86/sm89
    99 KiB, Hopper 227 KiB)."""
    limit = getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", None)
    if limit:
        return int(limit)
    try:
        import triton

        return int(triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"])
    except Exception:  # noqa: BLE001 - an older driver module: assume the least
        major = capability(index)[0]
        return (64 if major < 8 else 99 if major < 9 else 227) * 1024


@functools.lru_cache(maxsize=None)
def l2_bytes(index: int) -> int:
    """L2 cache of CUDA device `index` in bytes (0 where torch does not say), asked once."""
    return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0))


def check_dtype_supported(dtype, cap) -> None:
    """Raise ValueError if a GPU of this compute capability cannot run the kernels in dtype."""
    if dtype == torch.bfloat16 and tuple(cap) < (8, 0):
        raise ValueError(f"bfloat16 needs a GPU of compute capability >= 8.0; this one is "
                         f"{cap[0]}.{cap[1]} (use float16)")


def check_tile(name: str, x) -> None:
    """A tile size must be a power of two of at least 16 (tl.dot's minimum)."""
    if not isinstance(x, int) or isinstance(x, bool) or x < 16 or x & (x - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {x!r}")
