"""Loop time of a decode step's kernel structure with no work in it (kernels/decode/read_floor.py): the
same kernels as plain reads of their bytes, captured in a CUDA graph like the step and timed on
the one clock, back to back."""
from __future__ import annotations

from .timing import LOOP_REPEATS, loop_time


def read_floor_ms(sizes: list[int], device, pdl: list[bool], per_loop: int, repeats: int = LOOP_REPEATS) -> float:
    """Median per-step loop time (ms) of ReadSteps(sizes, pdl) replayed from a CUDA graph."""
    import torch

    from kernels.decode.read_floor import ReadSteps

    steps = ReadSteps(sizes, device, pdl)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        steps()  # compile before capture
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        steps()
    return loop_time([graph.replay], per_loop, repeats).median_ms
