"""The glossary keeps up with the code: every step of our Gluon kernels is described."""
from __future__ import annotations

import re
from pathlib import Path

from kernels.attention.gluon_versions import GLUON_VERSIONS


def test_the_glossary_names_every_gluon_step():
    text = (Path(__file__).resolve().parent.parent / "docs" / "glossary.md").read_text()
    named = set(re.findall(r"\bg\d+\b", text))
    # "g2 to g7" names every step between; expand such ranges before checking.
    for lo, hi in re.findall(r"\bg(\d+) to g(\d+)\b", text):
        named |= {f"g{i}" for i in range(int(lo), int(hi) + 1)}
    missing = [v.name for v in GLUON_VERSIONS if v.name not in named]
    assert not missing, f"docs/glossary.md does not describe {missing}"


def _entry(title: str) -> str:
    text = (Path(__file__).resolve().parent.parent / "docs" / "glossary.md").read_text()
    return text.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]


def test_the_decode_loops_are_described_as_the_phase_runs_them():
    from collect.decode.plans import variant_specs

    specs = variant_specs()
    loops = " ".join(_entry("Decode loops").split())
    # our eager loop computes its step with PyTorch ops (its rows say 'torch'), not the graph step's fused kernels
    assert specs["eager"].step == "torch" and not specs["eager"].graph
    assert "*our eager loop* runs our compact decoder from Python, PyTorch ops with our split-KV attention" in loops
    assert "fused step's kernels from Python" not in loops
    # the persistent step's one kernel stops before the argmax, which runs apart (3 kernels a step)
    assert "between the embedding and the argmax" in loops


def test_the_bandwidth_floor_is_not_called_a_bound_that_reads_cannot_beat():
    # A copy's bandwidth counts reads and writes; run h200-20261205a's decode attention read at 106% of it, and the
    # Decode page calls the floor a yardstick, not a hard bound.
    floor = " ".join(_entry("Bandwidth floor").split())
    assert "No step can read them faster" not in floor and "yardstick rather than a hard bound" in floor
