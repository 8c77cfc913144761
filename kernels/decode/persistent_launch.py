"""What the two persistent decode steps (persistent_step.py in plain Triton, persistent_ws.py in Gluon) share on the
host: a step is three launches, the embedding, one persistent kernel that reads every weight and every layer's
cache, and the loop's argmax; and a traced copy of a step shares its weights, plan and buffers."""
from __future__ import annotations

import copy

import torch

from ..common import interpreting


def check_traceable(device) -> None:
    if interpreting() or torch.device(device).type == "cpu":
        raise ValueError("the persistent step's trace reads the GPU's timer: it needs a GPU, not the interpreter.")


class OneKernelStep:
    """The launches of a persistent step, for the decode phase's accounting. A subclass sets model, work, trace and
    _resident_checked, and compiles its kernel with a trace when `trace` is (lists, entries, 3)."""

    def with_trace(self):
        """This step with its trace on: the same weights, plan, buffers and counters (a second step would copy the
        weights again: 3 GiB at gpt2-xl), its own timer buffer, and a residency check of its own, since the traced
        kernel is compiled apart."""
        check_traceable(self.model.device)
        traced = copy.copy(self)
        traced.trace = torch.zeros((*self.work.shape, 3), dtype=torch.int64, device=self.work.device)
        traced._resident_checked = False
        return traced

    def kernel_pdl(self) -> list[bool]:
        """The embedding, the persistent kernel, the argmax: none launches as a programmatic dependent."""
        return [False, False, False]

    def kernel_bytes(self, cache_bytes_per_layer: float) -> list[int]:
        """What each launch of a step must read (kernels/decode/read_floor.py): the persistent kernel reads
        every weight and every layer's cache; the embedding and the argmax read nothing of the floor's."""
        return [0, sum(self.operation_bytes(cache_bytes_per_layer)), 0]

    def operation_bytes(self, cache_bytes_per_layer: float) -> list[int]:
        """What each operation reads, in the fused step's order (gpt2_fused.operation_bytes): the roles the
        trace times (kernels/decode/persistent_trace.py) are these operations."""
        from .gpt2_fused import operation_bytes

        return operation_bytes(self.model, cache_bytes_per_layer)
