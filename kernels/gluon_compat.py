"""Gluon's names across the supported Triton releases, in one place.

Gluon (``triton.experimental.gluon``) is Triton's experimental dialect and renames things between
releases. The kernels import what moved from here, so a rename is fixed once and every release in
the supported range (README, "Supported versions") compiles the same kernel source.

- ``thread_barrier()``: a barrier across the CTA's threads. Triton 3.6 spells it
  ``gl.thread_barrier()``; 3.7 replaced it with ``gl.barrier()`` (a CTA barrier unless
  ``cluster=True``).
- ``async_load`` / ``async_store``: TMA copies between global and shared memory. Triton 3.6 and
  3.7 call them ``tma.async_copy_global_to_shared`` / ``tma.async_copy_shared_to_global``; 3.8
  adds the short names as the same functions, and 3.9 turns the long ones into errors.
- ``reinterpret(smem, dtype, shape, layout)``: a shared-memory buffer seen with another shape and layout.
  Triton 3.6-3.8 spell the method ``_reinterpret``; 3.9 ``reinterpret``.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import shared_memory_descriptor as _shared_memory
from triton.experimental.gluon.language.nvidia.hopper import tma

thread_barrier = getattr(gl, "barrier", None) or gl.thread_barrier
async_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
async_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

_REINTERPRET_PUBLIC = gl.constexpr(hasattr(_shared_memory, "reinterpret"))


@gluon.jit
def reinterpret(smem, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
    if _REINTERPRET_PUBLIC:
        return smem.reinterpret(dtype, shape, layout)
    else:
        return smem._reinterpret(dtype, shape, layout)
