"""What the Profiling page states about a step of our Gluon warp-specialized kernel: how its warps split into
partitions, the registers setmaxnreg gives each, and how its consumers take turns.

render/ cannot import kernels/ (they need torch), so these few facts of kernels/attention/gluon_ws.py and
gluon_versions.py are kept here as data; tests/test_profile_findings.py checks them against those files step
by step and head size by head size, so a new step or a changed budget fails there rather than misleading here.
"""
from __future__ import annotations

from typing import NamedTuple

from ...vocab import GLUON_STEP_KERNEL

# _ws_kernel's partitions (gl.warp_specialize(..., [4, 1] or [4, 4, 1], ...)): each consumer is one warpgroup,
# the producer that issues the TMA copies is one warp, and the launch pads the producer to a whole warpgroup.
CONSUMER_WARPS = 4
PRODUCER_WARPS = 1
WARPGROUP = 4
# Steps on three consumer warpgroups where they change the head size (gluon_versions.version_plan): at the
# d=64 tile, and g24/g25 only where they split a head of 72-96 columns; elsewhere two.
THREE_AT_TILE_64 = frozenset({"g12", "g14", "g31", "g33", "g35", "g36", "g40"})
THREE_AT_SPLIT_HEAD = frozenset({"g24", "g25"})
SPLIT_HEAD_DIMS = range(72, 97, 8)
# setmaxnreg's budgets by consumer count (gluon_versions.tile_plan): registers a consumer and a producer
# thread keep at run time, out of the same register file the launch figure divides evenly.
REGS = {2: (240, 24), 3: (160, 32)}
# Steps whose consumer warpgroups pass the tensor-core turn by hardware named barriers (named_turns, g11 on),
# and the two whose consumers also hand K/V slots back through named barriers (named_release, g13 and g14).
NAMED_TURNS = frozenset({"g11", "g12", "g13", "g14", "g15", "g19", "g23", "g24", "g25", "g26", "g27", "g30", "g31",
                         "g32", "g33", "g34", "g35", "g36", "g37", "g39", "g40", "g41", "g42", "g43"})
NAMED_RELEASE = frozenset({"g13", "g14"})


class WsPartition(NamedTuple):
    """How one step of the warp-specialized kernel runs at one head size."""

    consumers: int       # consumer warpgroups, which compute
    consumer_regs: int   # registers a consumer thread keeps after setmaxnreg
    producer_regs: int   # registers a producer thread keeps
    named_turns: bool    # consumers take turns at the tensor cores through named barriers (bar.sync)
    named_release: bool  # consumers release K/V slots through named barriers the producer syncs on

    @property
    def launched_warps(self) -> int:
        """Warps a block launches: the consumers' and the producer's, padded to whole warpgroups."""
        warps = self.consumers * CONSUMER_WARPS + PRODUCER_WARPS
        return -(-warps // WARPGROUP) * WARPGROUP

    @property
    def padding_warps(self) -> int:
        return self.launched_warps - self.consumers * CONSUMER_WARPS - PRODUCER_WARPS


def _consumers(step: str, head_dim: int) -> int:
    if step in THREE_AT_TILE_64 and head_dim <= 64:
        return 3
    if step in THREE_AT_SPLIT_HEAD and head_dim in SPLIT_HEAD_DIMS:
        return 3
    return 2


def ws_partition(step, head_dim) -> WsPartition | None:
    """The partition a recorded Gluon step ran at `head_dim`; None for a step of another kernel, or one this
    module does not know (a newer step: better unsaid than guessed)."""
    if not isinstance(step, str) or GLUON_STEP_KERNEL.get(step) != "gluon-ws":
        return None
    n = _consumers(step, int(head_dim))
    return WsPartition(n, *REGS[n], step in NAMED_TURNS, step in NAMED_RELEASE)
