"""A decode step's kernel structure with no work in it: one plain read kernel per kernel of the step.

The bandwidth floor prices a step's bytes as one copy-speed stream. A real step moves them in many
kernels, and every kernel boundary costs something however well each kernel streams: the grid
ramps up, its last programs drain, the next kernel's first loads travel to DRAM and back. To see
how much of a step that structure alone costs on this GPU, `ReadSteps` launches the same number of
kernels in the same order, launched the same way (in a CUDA graph, with programmatic dependent
launch where the step has it), each reading exactly the bytes its counterpart must read and doing
nothing else. The step's time over this one is what its kernels lose to a plain read; this one's
over the bandwidth floor is what the kernel count costs.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common import has_pdl, interpreting
from .fused_linear import device_facts

WORD_BYTES = 4      # read as int32 words, sixteen bytes per thread and load
BLOCK = 2048        # words each program reads per iteration (8 KiB)
PROGRAM_BYTES = 16 << 10  # bytes per program: a few loads in flight each, and enough programs to fill the GPU


@triton.jit
def _read_kernel(Src, n_words, per_prog, Sink, BLOCK: tl.constexpr, PDL: tl.constexpr):
    pid = tl.program_id(0)
    if PDL:  # as the step's PDL launches do: start while the previous kernel drains, read after it ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    start = pid * per_prog
    end = tl.minimum(start + per_prog, n_words)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in range(start, end, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(Src + offs, mask=offs < end, other=0)
    tl.store(Sink + pid, tl.sum(acc, axis=0))  # a result, so the reads are not optimized away


def programs_for(nbytes: int, sms: int) -> int:
    """Programs one read of `nbytes` is planned for: one per PROGRAM_BYTES, and at least one per SM.
    ReadSteps then rounds each program's share up to whole BLOCK iterations, so a read of less than
    sms x 16 KiB can run on fewer programs than SMs (74 for 1.2 MB on 132 SMs), and more slowly than
    it could: the twin is a plain read, not the fastest one."""
    return max(sms, triton.cdiv(nbytes, PROGRAM_BYTES))


class ReadSteps:
    """One kernel per entry of `sizes` (bytes), each reading its own slice of one buffer, in order.
    `pdl`: launch as programmatic dependents (sm90+ only): one flag for all, or one per kernel, as
    FusedStep.kernel_pdl gives them."""

    def __init__(self, sizes: list[int], device, pdl: bool | list[bool] = False):
        if not sizes or any(s < 0 for s in sizes):
            raise ValueError(f"a read step needs one non-negative byte count per kernel, got {sizes!r}.")
        if isinstance(pdl, list) and len(pdl) != len(sizes):
            raise ValueError(f"{len(pdl)} PDL flags for {len(sizes)} kernels; give one per kernel.")
        device = torch.device(device)
        self.sizes = list(sizes)
        # Each slice starts 64-byte aligned so its words load as full vectors.
        words = [triton.cdiv(s, WORD_BYTES) for s in sizes]
        padded = [triton.cdiv(w, 16) * 16 for w in words]
        self.buf = torch.zeros(max(1, sum(padded)), device=device, dtype=torch.int32)
        gpu = device_facts(device)
        self.launches = []
        offset = 0
        for w, p in zip(words, padded):
            grid = programs_for(w * WORD_BYTES, gpu.sm_count)
            per_prog = triton.cdiv(max(1, triton.cdiv(w, grid)), BLOCK) * BLOCK
            self.launches.append((self.buf[offset:offset + max(1, w)], w, per_prog, triton.cdiv(max(1, w), per_prog)))
            offset += p
        self.sink = torch.zeros(max(g for *_, g in self.launches), device=device, dtype=torch.int32)
        flags = pdl if isinstance(pdl, list) else [pdl] * len(sizes)
        self.pdl = [bool(f) and not interpreting() for f in flags]

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    def __call__(self) -> None:
        for (src, w, per_prog, grid), pdl in zip(self.launches, self.pdl):
            opts = {"PDL": pdl, "num_warps": 1 if interpreting() else 8}
            if pdl:
                opts["launch_pdl"] = True
            _read_kernel[(grid,)](src, w, per_prog, self.sink, BLOCK=BLOCK, **opts)


def compile_specs(target):
    """The read kernel as the decode phase launches it (kernels/aot.py): with programmatic dependent
    launch from Hopper on, as the fused step's products are; word counts a multiple of 16 and not
    (the one property of them the compiler specialises on). It only reads: no tensor cores."""
    from ..aot import CompileSpec

    pdl = has_pdl(target.capability)
    return [CompileSpec(f"int32 words{' pdl' if pdl else ''}", lambda: ReadSteps([64 << 10, 1000], "meta", pdl=pdl)(),
                        tensor_cores=False)]
