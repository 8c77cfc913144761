"""The stall summary of one kernel's SASS source page (collect/ncu_source.stall_summary), on a real export:
the persistent decode step on an H200 (tests/fixtures/ncu/persistent/, recorded by
scripts/profile_persistent.py)."""
from pathlib import Path

import pytest

from collect import ncu_source

FIX = Path(__file__).parent / "fixtures" / "ncu" / "persistent" / "source_sass.csv"


@pytest.fixture(scope="module")
def summary():
    (kernel,) = ncu_source.parse_source_csv(FIX.read_text())
    return ncu_source.stall_summary(kernel, top=10)


def test_the_shares_cover_every_sample(summary):
    assert summary["kernel"] == "_persistent_step_kernel" and summary["samples"] > 0
    assert sum(summary["by_role_pct"].values()) == pytest.approx(100, abs=0.1)
    shares = list(summary["by_reason_pct"].values())
    assert shares == sorted(shares, reverse=True) and all(v >= 0 for v in shares)


def test_it_finds_where_the_persistent_step_waits(summary):
    # Its warps wait most at one shared-memory load behind a barrier: the broadcast of a counter poll.
    first = summary["hotspots"][0]
    assert first["opcode"] == "LDS" and first["top_reason"] == "barrier" and first["share_pct"] > 10
    assert list(summary["by_reason_pct"])[:2] == ["long_scoreboard", "barrier"]
    # The default tiling spills: register stores to local memory stall on the long scoreboard.
    spills = [h for h in summary["hotspots"] if h["opcode"] == "STL"]
    assert spills and all(h["role"] == "store" and h["top_reason"] == "long_scoreboard" for h in spills)


def test_a_kernel_without_samples_has_empty_shares():
    empty = ncu_source.stall_summary(ncu_source.KernelSource("k", [ncu_source.Instruction("0", "NOP", 0.0)]))
    assert empty["by_role_pct"] == {} and empty["by_reason_pct"] == {} and empty["hotspots"] == []
