"""Where a persistent step's time goes, read from its trace (PersistentStep(..., trace=True)).

The kernel records, for every entry of every list, three readings of the GPU's global timer: when the
entry began (before it streamed the next entry's bytes), when its wait on the operation before was over,
and when it had raised its own counter (or finished its share, for a split that only left a partial). An
operation's finish is the last of its tiles' third readings; its span, the finish minus the finish of the
operation before, is its share of the step's critical path, so the spans add up to the step. The graph
step's profile charges each instant to one kernel; the spans charge it to one operation, which is the
same division of the step by role (qkv, attention, proj, fc, out, head) for the two to be compared.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OpTime:
    name: str
    role: str
    tiles: int
    finish_ns: float  # from the step's first reading
    span_ns: float    # finish minus the previous operation's finish (the first: minus the first reading)
    wait_ns: float    # per tile, mean: from its first reading to the end of its wait
    work_ns: float    # per tile, mean: from the end of its wait to its counter raised


def op_times(trace: torch.Tensor, plan, ops) -> list[OpTime]:
    """Each operation's finish, span and mean tile wait and work, from a (lists, entries, 3) trace of one
    launch of `plan` (a persistent_plan.StepPlan) over `ops` (its KernelOps). Raises ValueError where an
    entry holds no readings: the launch timed out, or the trace is of another plan."""
    t = trace.detach().to("cpu", torch.int64)
    if t.dim() != 3 or t.shape[0] != len(plan.per_sm) or t.shape[2] != 3:
        raise ValueError(f"a trace of shape {tuple(t.shape)} is not one of this plan's {len(plan.per_sm)} lists.")
    finish = [None] * len(ops)
    waits: list[list[int]] = [[] for _ in ops]
    works: list[list[int]] = [[] for _ in ops]
    first = None
    for sm, tiles in enumerate(plan.per_sm):
        for j, tile in enumerate(tiles):
            begin, ready, done = (int(v) for v in t[sm, j])
            if not (0 < begin <= ready <= done):
                raise ValueError(f"list {sm} entry {j} ({ops[tile.op].name}) holds no complete readings: the launch "
                                 "did not finish it (check the step's status) or the trace is of another plan.")
            first = begin if first is None else min(first, begin)
            finish[tile.op] = done if finish[tile.op] is None else max(finish[tile.op], done)
            waits[tile.op].append(ready - begin)
            works[tile.op].append(done - ready)
    out, before = [], first
    for i, op in enumerate(ops):
        out.append(OpTime(op.name, op.role, op.tiles, float(finish[i] - first), float(finish[i] - before),
                          sum(waits[i]) / len(waits[i]), sum(works[i]) / len(works[i])))
        before = finish[i]
    return out


def role_ms(times: list[OpTime]) -> dict[str, float]:
    """The spans added up by role, in ms: where the step's critical path went."""
    out: dict[str, float] = {}
    for t in times:
        out[t.role] = out.get(t.role, 0.0) + t.span_ns / 1e6
    return out


def traced_op_times(session) -> list[OpTime]:
    """One step of a session's persistent step with its trace on, at the session's position, read by
    op_times (the first call loads the traced kernel; the second is read). The traced step is the session's
    own with its trace on (PersistentStep.with_trace: the same packed weights, cache and buffers, which a
    step rewrites from its embedding on); the session is left at the position it was at."""
    at = session.host_pos
    traced = session.step_fn.with_trace()
    try:
        for _ in range(2):
            session.rewind(at)
            traced.trace.zero_()
            traced(session.history, session.pos, session.lens)
        torch.cuda.synchronize()
        traced.check()
        return op_times(traced.trace, traced.plan, traced.ops)
    finally:
        session.rewind(at)
