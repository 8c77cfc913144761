"""What the two persistent decode steps (persistent_step.py in plain Triton, persistent_ws.py in Gluon) share on the
host: a step is three launches, the embedding, one persistent kernel that reads every weight and every layer's
cache, and the loop's argmax, with a memset of the operation counters before the persistent kernel (the decode
profile counts it: four kernels a step); a traced copy of a step shares its weights, plan and buffers; the grid is
refused unless every block is resident at once; and a wait that timed out is reported by the operation it waited
for."""
from __future__ import annotations

import copy

import torch
import triton.language as tl

from ..common import interpreting

REGISTERS_PER_SM = 65536  # every compute capability from 5.0 to 9.0

# Operation kinds, in a layer's order; the logits come after the last layer. Both kernels read them (Gluon's
# constexpr is Triton's).
QKV = tl.constexpr(0)
ATTN = tl.constexpr(1)
PROJ = tl.constexpr(2)
FC = tl.constexpr(3)
FC2 = tl.constexpr(4)
HEAD = tl.constexpr(5)
KINDS = tl.constexpr(5)  # operations a layer
ITEM_SHIFT = tl.constexpr(1 << 16)  # a list entry is op * ITEM_SHIFT + tile


def check_traceable(device) -> None:
    if interpreting() or torch.device(device).type == "cpu":
        raise ValueError("the persistent step's trace reads the GPU's timer: it needs a GPU, not the interpreter.")


class OneKernelStep:
    """The launches of a persistent step, for the decode phase's accounting. A subclass sets model, gpu (a
    fused_linear.Device), ops (KernelOps), work, trace, op_count, status and _resident_checked, and compiles its
    kernel with a trace when `trace` is (lists, entries, 3)."""

    def set_lists(self, ops, plan, trace: bool, device) -> None:
        """The kernel's inputs from a plan (persistent_plan.plan_step over `ops`): each SM's list of entries, padded
        with -1, and its length; each operation's counter target; and, traced, three timer readings per entry."""
        if max(op.tiles for op in ops) >= ITEM_SHIFT.value:
            raise ValueError("an operation of this model has more tiles than a list entry can name; widen the tiles.")
        self.ops, self.plan = ops, plan
        longest = max(len(tiles) for tiles in plan.per_sm)
        work = torch.full((len(plan.per_sm), max(1, longest)), -1, dtype=torch.int32)
        for sm, tiles in enumerate(plan.per_sm):
            work[sm, :len(tiles)] = torch.tensor([t.op * ITEM_SHIFT.value + t.index for t in tiles], dtype=torch.int32)
        self.work = work.to(device)
        self.count = torch.tensor([len(t) for t in plan.per_sm], dtype=torch.int32, device=device)
        self.targets = torch.tensor([op.finishers for op in ops], dtype=torch.int32, device=device)
        # The kernel indexes the readings as it indexes the lists (kernels/decode/persistent_trace.py reads them).
        self.trace = torch.zeros((*work.shape, 3) if trace else (1,), dtype=torch.int64, device=device)

    def handshake_counters(self) -> tuple:
        """The counters besides op_count that a launch's tiles raise and their last arriver resets (split-K columns,
        attention heads): left standing by a launch that timed out."""
        return ()

    def check(self) -> None:
        """Raise, naming the operation and where its counter ended the launch, if a wait of an earlier launch timed
        out: short of its target, a tile never raised it; at its target, the raisers ran only after the waiter gave
        up (a block that was not resident). The counters are zeroed first, so that the step can run again once the
        cause is fixed."""
        from .arrival import check_waits

        if int(self.status.item()):
            counts = self.op_count.tolist()
            names = [f"{op.name} (its counter ended the launch at {n} of {op.finishers})"
                     for op, n in zip(self.ops, counts)]
            for t in (self.op_count, *self.handshake_counters()):
                t.zero_()
            status = self.status.clone()
            self.status.zero_()
            check_waits(status, names)

    def check_resident_kernel(self, kernel, grid: int, warps: int) -> None:
        """Refuse a grid of `kernel` (compiled, `warps` warps a block) that the GPU cannot hold at once: blocks that
        wait on counters raised by blocks not yet resident would wait for ever."""
        from .persistent_plan import check_resident

        kernel._init_handles()
        regs = kernel.n_regs * 32 * warps
        # An SM's 64 Ki registers and its shared memory (the per-block opt-in stands in for the SM's).
        blocks = min(REGISTERS_PER_SM // max(1, regs), self.gpu.smem_per_block // max(1, kernel.metadata.shared))
        check_resident(grid, self.gpu.sm_count, blocks)
        self._resident_checked = True

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
