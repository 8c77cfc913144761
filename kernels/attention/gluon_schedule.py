"""How the Gluon kernels' walks hand out causal query tiles (g5-g7 and the steps on g7's walk, g11-g15;
g9), planned on the host before the launch: pure Python, no GPU and no Gluon.

A causal query tile's work grows with its index (tile m sees m + 1 key tiles), so a persistent
program that takes every programs-th tile in order ends up with more work than another. Two plans
are kept, each a step of the journey (kernels/attention/gluon_versions.py GLUON_VERSIONS):

- :func:`plan_schedule` (g5, g6): a static strided walk, heads in groups that share the L2, with
  or without a snake order; :func:`schedule_makespan` scores a walk.
- :func:`plan_list_schedule` (g7): a list schedule (:class:`ListSchedule`) handed to the kernel
  as a table, each tile to the program with the least work so far.

g9 runs no persistent programs: one program per tile, on a grid in the walk's order with
:func:`lpt_head_group`'s head group, and the hardware's hand-out balances them.

A tile's work is modelled as its key tiles plus one; the makespan is the busiest program's work
over the average program's (1.0: a perfect balance).
"""
from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass

import torch

# A causal schedule keeps the key and value tiles of the heads worked on at once within this share
# of the L2 (see plan_schedule).
L2_SHARE = 0.75


def schedule_makespan(num_bh, tiles_m, programs, head_group, snake):
    """The busiest program's causal work over the average program's, for the static strided walk of
    gluon_parts.tile_coords (a query tile's work: its key tiles, m + 1). 1.0 is a perfect balance."""
    total = num_bh * tiles_m
    t = torch.arange(total)
    rank = t
    if snake:
        r, pos = t // programs, t % programs
        last = torch.clamp(total - r * programs, max=programs)
        rank = r * programs + torch.where(r % 2 == 1, last - 1 - pos, pos)
    span = head_group * tiles_m
    g = rank // span
    size = torch.clamp(num_bh - g * head_group, max=head_group)
    m = tiles_m - 1 - (rank - g * span) // size
    load = torch.bincount(t % programs, weights=(m + 1).double(), minlength=programs)
    return float(load.max() / load.mean())


def _head_groups(num_bh, kv_head_bytes, l2_bytes):
    """The head-group sizes a causal walk may use: 1, the powers of two below num_bh and num_bh itself,
    those above 1 only where the group's keys and values fit in L2_SHARE of the L2."""
    groups = sorted({1, num_bh} | {2**i for i in range(1, num_bh.bit_length()) if 2**i < num_bh})
    return [g for g in groups if g == 1 or g * kv_head_bytes <= L2_SHARE * l2_bytes]


def lpt_head_group(num_bh, kv_head_bytes, l2_bytes):
    """g9's head group: the largest of _head_groups, so the largest whose keys and values fit in
    L2_SHARE of this device's L2 (the caller reads it from the GPU). A one-dimensional grid hands a
    group's query tiles out longest first across its heads, so the programs running at once read
    the keys and values of all the group's heads: a group that fits keeps each key tile in L2 for
    the group's other query tiles (read from memory about once), and the larger the group the more
    heads share the longest-first order. At the d=64 goal shapes (B=2 H=8, 60 MiB of L2): all 16
    heads up to N=8192, 8 heads (32 MiB) at N=16384. No makespan model chooses among the groups (as
    g5-g7's plans do): the hardware's hand-out, not a static walk, balances the programs."""
    return max(_head_groups(num_bh, kv_head_bytes, l2_bytes))


@functools.lru_cache(maxsize=256)
def plan_schedule(num_bh, tiles_m, programs, kv_head_bytes, l2_bytes, l2_weight=0.0):
    """(head_group, snake) for a causal call: the walk whose busiest program has the least work, among
    head groups whose key and value tiles fit in L2_SHARE of the L2 (a group is worked on at once,
    and each of its tiles is read by several programs), with and without the snake. Ties keep the
    plainer walk. Head by head (1, False) is always a candidate: it is g3's walk.

    l2_weight > 0 (g6) also charges a walk for the L2 its group fills: cost = makespan x (1 +
    l2_weight x group bytes / L2 bytes), so a group must buy more balance than it costs in re-reads."""
    groups = _head_groups(num_bh, kv_head_bytes, l2_bytes)

    def cost(g, snake):
        footprint = min(g, num_bh) * kv_head_bytes / l2_bytes
        return schedule_makespan(num_bh, tiles_m, programs, g, snake) * (1 + l2_weight * footprint)

    best = (cost(1, False), 1, False)
    for g in groups:
        for snake in (False, True):
            c = cost(g, snake)
            if c < best[0] - 1e-9:
                best = (c, g, snake)
    return best[1], best[2]


def _list_assign(num_bh, tiles_m, programs, head_group, kv_per_m):
    """List scheduling of a causal walk, as a dynamic scheduler would run it if a query tile's time were
    its key tiles plus one: heads in groups of `head_group`, each group's query tiles longest first
    and interleaved across its heads, each tile to the program with the least work so far (ties: the
    lowest index). Returns (codes per program, work per program); a code is bh x tiles_m + m."""
    loads = [(0, p) for p in range(programs)]
    codes = [[] for _ in range(programs)]
    work = [0] * programs
    for g0 in range(0, num_bh, head_group):
        for m in range(tiles_m - 1, -1, -1):
            for bh in range(g0, min(num_bh, g0 + head_group)):
                load, p = heapq.heappop(loads)
                cost = (m + 1) * kv_per_m + 1
                codes[p].append(bh * tiles_m + m)
                work[p] += cost
                heapq.heappush(loads, (load + cost, p))
    return codes, work


@dataclass(frozen=True)
class ListSchedule:
    """g7's causal walk at one shape (see _list_assign), handed to the kernel as a table: each
    program's count of query tiles, then round by round one code per program (-1 past its count)."""

    num_bh: int
    tiles_m: int
    programs: int
    head_group: int
    kv_per_m: int  # key tiles per step of the query tile index (ws: 128 query rows over 128-key tiles, 1)

    @functools.cached_property
    def assignment(self):
        """(codes per program, work per program): simulated once, read by makespan and table."""
        return _list_assign(self.num_bh, self.tiles_m, self.programs, self.head_group, self.kv_per_m)

    @property
    def makespan(self) -> float:
        """The busiest program's modelled work over the average program's (1.0: perfect balance)."""
        _, work = self.assignment
        return max(work) * len(work) / sum(work)

    def table(self) -> list[int]:
        codes, _ = self.assignment
        rounds = max(len(c) for c in codes)
        return [len(c) for c in codes] + [c[r] if r < len(c) else -1 for r in range(rounds) for c in codes]


@functools.lru_cache(maxsize=64)
def plan_list_schedule(num_bh, tiles_m, programs, kv_head_bytes, l2_bytes, kv_per_m, l2_weight=0.1):
    """g7's ListSchedule for a causal call: the head group whose list schedule costs least, as g6 counts
    cost (makespan x (1 + l2_weight x the group's share of the L2)), among groups whose keys and values
    fit in L2_SHARE of the L2. Ties keep the smaller group."""
    best = None
    for g in _head_groups(num_bh, kv_head_bytes, l2_bytes):
        plan = ListSchedule(num_bh, tiles_m, programs, g, kv_per_m)
        cost = plan.makespan * (1 + l2_weight * min(g, num_bh) * kv_head_bytes / l2_bytes)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, plan)
    return best[1]
