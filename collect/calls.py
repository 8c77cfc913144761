"""One case's call and its inputs, as every timing phase makes them: nothing but the call is timed.

`CaptureCompiled` records the compiled kernels a call launches (their registers, shared memory
and whether their code uses the tensor cores). `call_for` gives a zero-argument call of an implementation on fixed inputs. A forced SDPA backend is
not inside it: `forced_backend` is the context manager the caller enters once around a whole
measurement, so its cost never lands in a timed call. `InputPool` holds one seeded input set plus
distinct sets for host and loop time, whose total exceeds twice the L2.
"""
from __future__ import annotations

import contextlib
from typing import Callable

from . import timing
from .shapes import AttentionCase
from .timing import free_cuda_memory, is_oom, release_cached_memory


def sdpa_call(q, k, v, causal: bool) -> Callable[[], object]:
    """Plain SDPA on fixed inputs; a forced backend is the caller's context manager, not this call's."""
    import torch.nn.functional as F

    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def forced_backend(case: AttentionCase):
    """The context manager that forces the case's SDPA backend (a no-op for anything else)."""
    if case.backend_requested is None:
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel

    from kernels.attention.portable import _sdpa_backend

    return sdpa_kernel(_sdpa_backend(case.backend_requested))


def seeded_inputs(case: AttentionCase):
    """q, k, v for `case` on the current CUDA device, standard normal from seed 0: the profiled process
    and the profile phase's own clock see the same numbers."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    return tuple(torch.randn(case.shape, device="cuda", dtype=getattr(torch, case.dtype), generator=gen)
                 for _ in range(3))


def pinned_kernel(impl: str, config: dict | None):
    """Our kernel with a pinned tile config (None: as flash_attention chooses), as call_for's `fn`;
    None for PyTorch's implementations (call_for makes those)."""
    if impl not in ("triton", "triton-portable"):
        return None
    from kernels import attention

    path = "portable" if impl == "triton-portable" else None
    return lambda q, k, v, causal: attention.flash_attention(q, k, v, causal=causal, config=config, path=path)


def call_for(case: AttentionCase, q, k, v, fn: Callable | None = None) -> Callable[[], object]:
    """One call of the case's implementation (or of `fn(q, k, v, causal)`, e.g. a recorded kernel
    version) on these inputs, with nothing else inside it."""
    if fn is None and case.is_sdpa:
        return sdpa_call(q, k, v, case.causal)
    if fn is None:
        from kernels import attention

        fn = attention.get_impl(case.impl)
    return lambda: fn(q, k, v, case.causal)


# Extra input sets for host and loop time may take at most this share of device memory.
POOL_MEMORY_SHARE = 0.2


def flash_route(case: AttentionCase, device):
    """(path, config) flash_attention's own choice takes for this case's shape and dtype on `device`
    (kernels.attention.dispatch.route), without running anything."""
    import torch

    from kernels.attention import dispatch

    return dispatch.route(case.shape, getattr(torch, case.dtype), torch.device(device), case.causal)


def device_memory_bytes(dev) -> int:
    """The device's memory: from its facts (a DeviceFacts), else as torch reports it."""
    import torch

    return dev.memory_bytes if dev and dev.memory_bytes else torch.cuda.get_device_properties(0).total_memory


class InputPool:
    """The case's inputs: one seeded set, plus distinct sets for host and loop time (together more
    than twice the L2), made once per shape and dtype and shared by the implementations."""

    def __init__(self, device: str, l2_bytes: int | None, budget_bytes: int | None):
        self.device, self.l2_bytes, self.budget_bytes = device, l2_bytes, budget_bytes
        self._key = None
        self.sets: list[tuple] = []

    def _make(self, case: AttentionCase, seed: int):
        import torch

        g = torch.Generator(device=self.device).manual_seed(seed)
        return tuple(torch.randn(case.shape, generator=g, device=self.device, dtype=getattr(torch, case.dtype))
                     for _ in range(3))

    def first(self, case: AttentionCase):
        key = (case.dtype, case.shape)
        if key != self._key:
            self._key, self.sets = None, []
            release_cached_memory()
            self.sets = [self._make(case, 0)]
            self._key = key
        return self.sets[0]

    def all(self, case: AttentionCase) -> list[tuple]:
        """Every set (made on first use); an allocation that fails ends the pool where it is."""
        set_bytes = case.input_bytes * 4 // 3  # inputs and the output each call allocates
        want = timing.pool_size(set_bytes, self.l2_bytes, self.budget_bytes)
        while len(self.sets) < want:
            try:
                self.sets.append(self._make(case, len(self.sets)))
            except Exception as exc:  # noqa: BLE001 - a smaller pool still measures; only OOM is expected
                if not is_oom(exc):
                    raise
                free_cuda_memory()
                break
        return self.sets


class CaptureCompiled:
    """Records the CompiledKernel each launch of the given @triton.jit functions returns (its
    registers and shared memory are what this phase reports). Restores them on exit. `first` is
    the main kernel of a version that launches two (the split causal schedule's second launch is
    a small diagonal-and-merge kernel)."""

    def __init__(self, fns):
        self.fns = list(fns)
        self.kernels = []

    @property
    def first(self):
        return self.kernels[0] if self.kernels else None

    def __enter__(self):
        for fn in self.fns:
            original = fn.run

            def run(*args, _original=original, **kwargs):
                kernel = _original(*args, **kwargs)
                self.kernels.append(kernel)
                return kernel

            fn.run = run  # an instance attribute shadows JITFunction.run for this object only
        return self

    def __exit__(self, *exc):
        for fn in self.fns:
            fn.__dict__.pop("run", None)
        return False


def kernel_facts(kernel) -> dict:
    """n_regs, n_spills, shared, num_warps of a CompiledKernel (its handles loaded if need be), and
    whether its code issues tensor-core instructions."""
    if kernel is None:
        return {}
    if getattr(kernel, "n_regs", None) is None and hasattr(kernel, "_init_handles"):
        kernel._init_handles()
    md = kernel.metadata
    from kernels.aot import uses_tensor_cores

    return dict(n_regs=getattr(kernel, "n_regs", None), n_spills=getattr(kernel, "n_spills", None),
                shared_bytes=getattr(md, "shared", None), num_warps=getattr(md, "num_warps", None),
                tensor_cores=uses_tensor_cores(kernel))


def our_kernels() -> list:
    """Every @triton.jit (and Gluon) attention kernel flash_attention may launch, for CaptureCompiled."""
    import importlib

    from kernels.attention import portable

    found = [portable._attn_fwd]
    for module, names in (("hopper", ("_hopper_fwd", "_hopper_fwd_ws", "_hopper_fwd_ws_persistent",
                                                "_diag_merge")),
                          ("gluon", ("_g1_kernel", "_ws_kernel"))):
        try:
            mod = importlib.import_module(f"kernels.attention.{module}")
        except Exception:  # noqa: BLE001 - a path this Triton cannot import is refused by flash_attention too
            continue
        found += [getattr(mod, name) for name in names]
    return found
