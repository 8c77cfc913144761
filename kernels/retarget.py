"""
Run code built for an older GPU on this one, through its PTX
===========================================================

PTX is forward compatible: what Triton writes for ``.target sm_75`` (a T4) assembles for every
later GPU. So the code a T4 or an A100 would run can have its numbers checked on the GPU at hand:

1. each ``@triton.jit`` (or Gluon) launch made inside :func:`built_for` is compiled for the older
   target exactly as kernels/aot.py compiles it (same specialisation, warps, stages, constexprs);
2. that build's PTX is assembled for this GPU by the NVIDIA backend's own ``make_cubin`` (the
   ptxas that ships with Triton, with the flags Triton passes it);
3. the result is launched through the compiled kernel's own launcher, with the grid and the
   arguments the native launch would have had.

What it proves: the instructions of the older target's code (the portable kernel's FMA-only
loops on sm75, the Turing kernel's ``mma.sync.m16n8k8``, sm80's ``m16n8k16`` with ``cp.async``)
compute the right thing. What it does not: their speed on that GPU, or that the SASS ptxas makes
for that GPU behaves like this GPU's SASS. The older target's own ptxas build is kept beside the
port for its resources (registers, spilled bytes, shared memory), which must fit that GPU:
:meth:`PortedBuild.fits`.

    with built_for("sm75") as port:
        o = turing_attention(q, k, v)   # every launch inside is ported
    port.builds                          # one PortedBuild per compiled variant

Both builds live in Triton's cache directory, so a compile worker that ran a variant leaves
nothing for the measuring process to build.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

from . import aot

# The most registers a thread can have on every generation the report supports.
MAX_REGISTERS_PER_THREAD = 255


@dataclass
class PortedBuild:
    """One kernel variant compiled for `target` and run here through its PTX."""

    kernel: str
    target: str                  # the GPU generation the code was written for, "sm75"
    ran_on: str                  # this GPU's, "sm90"
    registers: int | None        # of the target's own ptxas build
    spill_bytes: int | None
    shared_bytes: int
    tensor_core_ops: list[str] = field(default_factory=list)

    def fits(self) -> tuple[bool, str]:
        """Whether the target's own build fits that GPU (shared memory per block, registers), and
        if not, what overflows."""
        limit = aot.TARGETS[self.target].smem_per_block
        if self.shared_bytes > limit:
            return False, (f"{self.kernel} needs {self.shared_bytes} bytes of shared memory per block; "
                           f"{self.target} allows {limit}")
        if self.registers is not None and self.registers > MAX_REGISTERS_PER_THREAD:
            return False, f"{self.kernel} needs {self.registers} registers per thread"
        return True, ""


@dataclass
class Port:
    """What a :func:`built_for` block compiled: its target and one PortedBuild per variant."""

    target: str
    ran_on: str
    builds: list[PortedBuild] = field(default_factory=list)

    @property
    def tensor_cores(self) -> bool | None:
        """Whether the ported code issues tensor-core instructions (None before any launch)."""
        return any(b.tensor_core_ops for b in self.builds) if self.builds else None


# (target, here, aot key) -> (CompiledKernel holding this GPU's cubin, its PortedBuild)
_PORTED: dict[tuple, tuple] = {}
_LOCK = threading.Lock()


def _here_arch() -> int:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def _assemble_here(compiled, options, here: int) -> bytes:
    """This GPU's cubin from the older target's PTX, assembled the way Triton assembles its own,
    kept in Triton's cache directory beside the build it came from (compile workers fill it)."""
    import hashlib

    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.cache import get_cache_manager

    ptx = compiled.asm["ptx"]
    cache = get_cache_manager(hashlib.sha256(f"ported:sm{here}:{ptx}".encode()).hexdigest())
    name = f"{compiled.name}.sm{here}.cubin"
    path = cache.get_file(name)
    if path is not None:
        with open(path, "rb") as f:
            return f.read()
    backend = make_backend(GPUTarget("cuda", here, 32))
    opts = backend.parse_options({k: v for k, v in options.__dict__.items() if k != "arch"})
    cubin = backend.make_cubin(ptx, {}, opts, here)
    cache.put(cubin, name, binary=True)
    return cubin


def _port(launch: aot.Launch, target: aot.Target, here: int):
    """(CompiledKernel runnable here, bound arguments, PortedBuild) for one launch."""
    import triton
    from triton.backends.compiler import GPUTarget

    bound, src, options, key = aot.bind(launch, target)
    cache_key = (target.name, here, key)
    with _LOCK:
        hit = _PORTED.get(cache_key)
    if hit is None:
        compiled = triton.compile(src, target=GPUTarget("cuda", target.arch, 32), options=options.__dict__)
        regs, spill = aot.resource_usage(compiled.asm["cubin"])  # the older GPU's own build
        build = PortedBuild(aot._kernel_name(launch.fn), target.name, f"sm{here}", regs, spill,
                            int(compiled.metadata.shared), aot.tensor_core_ops(compiled.asm.get("ptx", "")))
        compiled.kernel = _assemble_here(compiled, options, here)  # what _init_handles loads
        hit = (compiled, build)
        with _LOCK:
            _PORTED[cache_key] = hit
    return hit[0], bound, hit[1]


def _grid3(grid, bound) -> tuple[int, int, int]:
    g = grid(bound) if callable(grid) else grid
    g = tuple(g)
    return (g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1)


@contextlib.contextmanager
def built_for(target_name: str):
    """Within the block, every Triton launch runs the code built for `target_name` ("sm75",
    "sm80", see kernels.aot.TARGETS), assembled for this GPU. Yields the Port that collects
    what was built. Needs a CUDA GPU at least as new as the target."""
    import torch
    from triton.runtime.jit import JITFunction

    if target_name not in aot.TARGETS:
        raise ValueError(f"unknown target {target_name!r}; choose from {', '.join(aot.TARGETS)}")
    if not torch.cuda.is_available():
        raise RuntimeError("running another target's code needs a CUDA GPU")
    target = aot.TARGETS[target_name]
    here = _here_arch()
    if here < target.arch:
        raise ValueError(f"PTX built for {target_name} cannot run on an older GPU (sm{here})")
    port = Port(target_name, f"sm{here}")
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        compiled, bound, build = _port(aot.Launch(self, args, kwargs, grid), target, here)
        if build not in port.builds:
            port.builds.append(build)
        if not warmup:
            compiled[_grid3(grid, bound)](*bound.values())
        return compiled

    JITFunction.run = run
    try:
        yield port
    finally:
        JITFunction.run = original
