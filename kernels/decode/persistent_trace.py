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
from statistics import median

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


def _readings(trace: torch.Tensor, plan, ops):
    """(sm, tile, begin, ready, done) for every entry of every list, from a (lists, entries, 3) trace of one launch
    of `plan`. Raises ValueError where an entry holds no readings: the launch timed out, or the trace is of another
    plan."""
    t = trace.detach().to("cpu", torch.int64)
    if t.dim() != 3 or t.shape[0] != len(plan.per_sm) or t.shape[2] != 3:
        raise ValueError(f"a trace of shape {tuple(t.shape)} is not one of this plan's {len(plan.per_sm)} lists.")
    out = []
    for sm, tiles in enumerate(plan.per_sm):
        for j, tile in enumerate(tiles):
            begin, ready, done = (int(v) for v in t[sm, j])
            if not (0 < begin <= ready <= done):
                raise ValueError(f"list {sm} entry {j} ({ops[tile.op].name}) holds no complete readings: the launch "
                                 "did not finish it (check the step's status) or the trace is of another plan.")
            out.append((sm, tile, begin, ready, done))
    return out


def op_times(trace: torch.Tensor, plan, ops) -> list[OpTime]:
    """Each operation's finish, span and mean tile wait and work, from a (lists, entries, 3) trace of one
    launch of `plan` (a persistent_plan.StepPlan) over `ops` (its KernelOps). Raises ValueError where an
    entry holds no readings: the launch timed out, or the trace is of another plan."""
    finish = [None] * len(ops)
    waits: list[list[int]] = [[] for _ in ops]
    works: list[list[int]] = [[] for _ in ops]
    first = None
    for _, tile, begin, ready, done in _readings(trace, plan, ops):
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


@dataclass(frozen=True)
class OpSpread:
    """How an operation's SMs part within its span (all from the finish of the operation before): when the median
    SM had its first tile under way (its wait and its input rows done), when the median SM had finished its share,
    and how much later the last SM finished, which ends the span."""
    name: str
    role: str
    span_ns: float
    start_ns: float   # median SM: its first tile of the operation past its wait
    sm_done_ns: float  # median SM: its last tile of the operation done
    late_ns: float    # the operation's finish minus the median SM's
    last_sm: int      # the list whose tile finished the operation


def op_spread(trace: torch.Tensor, plan, ops) -> list[OpSpread]:
    """Each operation's spread over its SMs (OpSpread), read from the same trace as op_times: whether a span is
    the SMs' shared work, the time before they start, or the wait for one late SM."""
    started: list[dict[int, int]] = [{} for _ in ops]
    done_by: list[dict[int, int]] = [{} for _ in ops]
    first = None
    for sm, tile, begin, ready, done in _readings(trace, plan, ops):
        first = begin if first is None else min(first, begin)
        started[tile.op][sm] = min(started[tile.op].get(sm, ready), ready)
        done_by[tile.op][sm] = max(done_by[tile.op].get(sm, done), done)
    out, before = [], first
    for i, op in enumerate(ops):
        last_sm = max(done_by[i], key=done_by[i].get)
        finish = done_by[i][last_sm]
        sm_done = median(done_by[i].values())
        out.append(OpSpread(op.name, op.role, float(finish - before), median(started[i].values()) - before,
                            sm_done - before, finish - sm_done, last_sm))
        before = finish
    return out


def straggler_summary(spreads: list[OpSpread]) -> dict:
    """A step's operations together: the shares of their spans before the median SM's first tile was under way
    (waits, input rows) and after the median SM had finished (one late SM), and the list that finished most
    operations last with the share it finished: near 1 / SMs where the late SM is a different one each time, near
    1 where one list is late every time (its place in the plan, or its SM)."""
    total = sum(s.span_ns for s in spreads)
    lasts = [s.last_sm for s in spreads]
    most = max(set(lasts), key=lasts.count)
    return {"start_share": sum(max(0.0, s.start_ns) for s in spreads) / total,
            "late_share": sum(max(0.0, s.late_ns) for s in spreads) / total,
            "most_often_last_sm": most, "its_share_of_operations": lasts.count(most) / len(lasts)}


@dataclass(frozen=True)
class RoleSplit:
    """A role's operations' spans of the critical path (ms a step), in three parts that add up to them: the
    hand-off, from the end of the operation before until the median SM has its first tile under way (the counter's
    release and the polls that see it, the input rows, the LayerNorm); the work, until the median SM has finished
    its share; and the wait for the last SM after it."""
    handoff_ms: float
    work_ms: float
    late_ms: float


def role_split(spreads: list[OpSpread]) -> dict[str, RoleSplit]:
    """The spreads added up by role (RoleSplit). The median SM's start and finish are clamped into its span, so
    the three parts add up to role_ms's figure for the same trace."""
    parts: dict[str, list[float]] = {}
    for s in spreads:
        start = min(max(0.0, s.start_ns), s.span_ns)
        done = min(max(start, s.sm_done_ns), s.span_ns)
        acc = parts.setdefault(s.role, [0.0, 0.0, 0.0])
        acc[0] += start / 1e6
        acc[1] += (done - start) / 1e6
        acc[2] += (s.span_ns - done) / 1e6
    return {role: RoleSplit(*v) for role, v in parts.items()}


def role_ms(times: list[OpTime]) -> dict[str, float]:
    """The spans added up by role, in ms: where the step's critical path went."""
    out: dict[str, float] = {}
    for t in times:
        out[t.role] = out.get(t.role, 0.0) + t.span_ns / 1e6
    return out


def traced_op_times(session, read=op_times) -> list:
    """One step of a session's persistent step with its trace on, at the session's position, read by `read`
    (op_times, op_spread, or a function of the same arguments that calls both; the first call loads the traced
    kernel, the second is read). The traced step is the session's own with its trace on (PersistentStep.with_trace: the same packed weights, cache and buffers, which a
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
        return read(traced.trace, traced.plan, traced.ops)
    finally:
        session.rewind(at)
