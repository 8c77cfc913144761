"""Axis ticks: a byte axis labels its ticks in the binary units the prose writes bytes in."""
from __future__ import annotations

from render import fmt
from render.axes import byte_hover, byte_ticks, log_ticks


def test_byte_ticks_sit_at_powers_of_two_in_binary_units():
    t = byte_ticks([3e6, 2e9])
    assert all(v == 2.0 ** round(__import__("math").log2(v)) for v in t["tickvals"])
    assert t["ticktext"][0] == "4 MiB" and t["ticktext"][-1] == "1 GiB"
    assert not any("GB" in s or "MB" in s for s in t["ticktext"])


def test_byte_ticks_stay_under_the_cap_over_a_wide_range():
    t = byte_ticks([100, 1.5e11], max_ticks=5)
    assert 2 <= len(t["tickvals"]) <= 5
    assert byte_ticks([]) == {} and byte_ticks([None, 0]) == {}


def test_byte_hover_matches_the_prose():
    # The H200's memory: 150 GB in SI, which the Hardware page writes as 140 GiB.
    assert byte_hover([150e9]) == [fmt.bytes_(150e9)] and byte_hover([150e9])[0].endswith("GiB")


def test_log_ticks_write_full_values():
    assert log_ticks([1, 900])["ticktext"][-1] == "1,000"
