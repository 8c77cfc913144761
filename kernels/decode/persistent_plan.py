"""Issue 44's persistent decode step, host side: which SM runs which tile of which operation, the
counter each tile waits on, and a model of what the schedule should take, written before any kernel
runs it.

A step is a chain of operations. Per layer: LayerNorm + the qkv product with the cache write, the
attention, the output projection + residual, LayerNorm + fc + GELU, the second projection +
residual; then the last LayerNorm and the logits. Each operation is cut into tiles (a block of
output columns and a slice of the inner dimension for a product, one head of one sequence and a
slice of its cache for the attention; persistent_step.kernel_operations is the one place that says
how). A tile may start once every tile of the operation before it has finished, which one counter
per operation in global memory tells (each finished tile raises it).
The weights a tile reads do not depend on the operation before it, so a producer warp can stream them
into shared memory while the consumers still wait on the counter: that overlap is the point of the
design. The graph step of today ends a kernel at each of these boundaries instead, and every kernel
costs 3.9-6.3 us more than reading its own bytes (kernels/decode/notes.md, the decode page).

Blocks that wait on counters deadlock unless every block of the grid is resident at once, so
`check_resident` refuses a grid larger than the GPU holds. Each SM's list runs in operation order and
every wait is on an earlier operation (`check_plan`): then the lowest unfinished operation can always
make progress, whatever order the SMs run in.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    """One operation of the step: `tiles` equal tiles, each reading `tile_bytes` that do not depend on
    the operation before (weights, the cache written by earlier steps)."""

    name: str
    tiles: int
    tile_bytes: int

    @property
    def bytes(self) -> int:
        return self.tiles * self.tile_bytes


@dataclass(frozen=True)
class KernelOp(Operation):
    """An operation as a persistent kernel tiles it: `finishers` of its tiles (a product's columns, the
    attention's heads) raise its counter, so that is the counter's target; `role` is what the graph
    step's kernel for it does (collect/schema/decode.py ROLE_ORDER)."""

    finishers: int = 0
    role: str = ""


@dataclass(frozen=True)
class Tile:
    op: int  # index into the plan's operations; the tile waits for every tile of op - 1
    index: int


@dataclass(frozen=True)
class StepPlan:
    """Every SM's list of tiles, in the order it runs them, and the value each operation's counter
    reaches when all its tiles are done (the kernel's waits compare against these)."""

    ops: tuple[Operation, ...]
    per_sm: tuple[tuple[Tile, ...], ...]

    @property
    def counter_targets(self) -> tuple[int, ...]:
        return tuple(op.tiles for op in self.ops)


def plan_step(ops: list[Operation], sm_count: int, per_op_cap: bool = False) -> StepPlan:
    """Deal each operation's tiles, in operation order, to the SM with the fewest bytes so far, so
    that every SM streams about the same share of the step and its list stays in operation order.

    per_op_cap: no SM takes more than its even share (rounded up) of any one operation's tiles. Without
    it, the SMs an operation of few tiles left out catch up on the next operation, which then waits on
    them: at gpt2-xl the second projection's 100 tiles leave 32 SMs idle, and the next qkv product gave
    those SMs 5 of its 300 tiles where 3 is the even share (the warp-specialized step's first runs)."""
    if sm_count < 1 or not ops:
        raise ValueError(f"a plan needs at least one SM and one operation, got {sm_count} and {len(ops)}.")
    loads = [(0, sm) for sm in range(sm_count)]
    lists: list[list[Tile]] = [[] for _ in range(sm_count)]
    for i, op in enumerate(ops):
        cap = -(-op.tiles // sm_count) if per_op_cap else op.tiles
        taken = [0] * sm_count
        full = []
        for t in range(op.tiles):
            load, sm = heapq.heappop(loads)
            while taken[sm] == cap:
                full.append((load, sm))
                load, sm = heapq.heappop(loads)
            lists[sm].append(Tile(i, t))
            taken[sm] += 1
            heapq.heappush(loads, (load + op.tile_bytes, sm))
        for item in full:
            heapq.heappush(loads, item)
    return StepPlan(tuple(ops), tuple(tuple(tiles) for tiles in lists))


def check_plan(plan: StepPlan) -> None:
    """Raise ValueError unless every tile of every operation is on exactly one SM's list and every list
    runs in operation order, the two facts that make the counters' waits deadlock-free."""
    seen = set()
    for sm, tiles in enumerate(plan.per_sm):
        for before, after in zip(tiles, tiles[1:]):
            if after.op < before.op:
                raise ValueError(f"SM {sm} runs {plan.ops[after.op].name} after {plan.ops[before.op].name}: a "
                                 "list out of operation order can wait on a tile queued behind it (deadlock).")
        for tile in tiles:
            if tile in seen:
                raise ValueError(f"tile {tile.index} of {plan.ops[tile.op].name} is on two SMs' lists.")
            seen.add(tile)
    want = sum(op.tiles for op in plan.ops)
    if len(seen) != want:
        raise ValueError(f"the lists hold {len(seen)} tiles of the step's {want}: a counter would never reach its "
                         "target (deadlock).")


def check_resident(grid: int, sm_count: int, blocks_per_sm: int) -> None:
    """Refuse a persistent grid that the GPU cannot hold at once: a block that is not yet resident never
    raises the counters that resident blocks spin on."""
    if blocks_per_sm < 1:
        raise ValueError("the persistent step's block does not fit an SM (registers or shared memory); shrink its "
                         "tiles or its stages.")
    if grid > sm_count * blocks_per_sm:
        raise ValueError(f"a persistent grid of {grid} blocks, but only {sm_count} SMs x {blocks_per_sm} can be "
                         "resident at once: blocks waiting on counters would deadlock. Launch at most "
                         f"{sm_count * blocks_per_sm}.")


def predicted_step_s(plan: StepPlan, bandwidth: float, boundary_s: float, prefetch: bool = True,
                     buffer_bytes: int = 192 << 10, chain_s: float = 0.0) -> float:
    """The step time the plan should take, from a model with three numbers: each SM streams at an equal
    share of `bandwidth` (bytes/s); a tile can start `boundary_s` after the last tile of the operation
    before it finishes (the counter's round trip through L2 and the consumers' epilogue); and an SM's
    producer runs ahead of its consumers by at most `buffer_bytes` of shared memory. With `prefetch`, an
    SM streams its next tiles' bytes while it waits on a counter; without, it starts once the wait is
    over, as a kernel per operation must. `chain_s`: what a tile's consumers spend after its bytes have
    arrived (its round trips through L2: partials, counters, the epilogue), one tile after another on
    its list, while the producer streams on. Each list streams at an equal share of the bandwidth, so two
    lists an SM (blocks_per_sm) are two lists here."""
    per_sm = bandwidth / len(plan.per_sm)
    done = [0.0] * len(plan.ops)  # when each operation's last tile finished
    streamed = [0.0] * len(plan.per_sm)  # when each SM's producer finished its latest tile's bytes
    finished: list[list[float]] = [[] for _ in plan.per_sm]  # each SM's consumers' finish times, in order
    by_op: list[list[int]] = [[] for _ in plan.ops]
    for sm, tiles in enumerate(plan.per_sm):
        for tile in tiles:
            by_op[tile.op].append(sm)
    for i, sms in enumerate(by_op):  # every list is in operation order: one pass over the operations
        ready = done[i - 1] + boundary_s if i else 0.0
        op = plan.ops[i]
        cost = op.tile_bytes / per_sm
        ahead = max(1, buffer_bytes // max(1, op.tile_bytes))  # tiles the buffer holds before it must drain
        for sm in sms:
            past = finished[sm]
            last = past[-1] if past else 0.0
            if prefetch:
                room = past[-ahead] if len(past) >= ahead else 0.0
                start = max(streamed[sm], room)
            else:
                start = max(last, ready)
            streamed[sm] = start + cost
            past.append(max(streamed[sm], ready, last) + chain_s)
            done[i] = max(done[i], past[-1])
    return done[-1]
