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
    # transformers' compiled loop needs a static cache to be compiled into CUDA graphs; the Decode page's label says so
    assert specs["hf-compiled"].compiled and "(`StaticCache`)" in loops


def test_the_bandwidth_floor_is_not_called_a_bound_that_reads_cannot_beat():
    # A copy's bandwidth counts reads and writes; run h200-20261205a's decode attention read at 106% of it, and the
    # Decode page calls the floor a yardstick, not a hard bound.
    floor = " ".join(_entry("Bandwidth floor").split())
    assert "No step can read them faster" not in floor and "yardstick rather than a hard bound" in floor
    # how much faster reading alone goes is the run's to say (the Decode page's ratio), not a word typed here
    assert "a little" not in floor and "may stream faster" in floor


def _glossary() -> str:
    return " ".join((Path(__file__).resolve().parent.parent / "docs" / "glossary.md").read_text().split())


def test_every_label_the_pages_give_an_implementation_is_defined():
    from render.vocab import IMPL_LABELS

    text = _glossary()
    missing = [label for label in IMPL_LABELS.values() if label not in text]
    assert not missing, f"docs/glossary.md never names {missing}"


def test_the_sm_clock_reading_is_described_as_the_spin_takes_it():
    import inspect

    from collect import spin_clock, timing

    spin, entry = inspect.getsource(spin_clock), " ".join(_entry("SM clock reading").split())
    # the spin stamps its own cycle counter and the GPU's timer; the events are the fallback, and older runs' way
    assert "%clock64" in spin and "%globaltimer" in spin and "torch.cuda._sleep(cycles)" in inspect.getsource(timing)
    assert "cycle counter (`clock64`)" in entry and "nanosecond timer (`globaltimer`)" in entry
    assert "in the short spin before each timed call, never during the call" in entry
    assert "between two CUDA events" in entry and "above the maximum SM clock the device reports" in entry
    assert "(hardware.md#clocks-seen)" in entry
    # device time is timed by events; the clock it runs at is not 'the GPU's own clock' the events keep
    assert "GPU's own clock" not in _entry("Device time")


def test_the_flop_convention_is_the_one_every_rate_uses():
    from collect.schema.common import attention_flops

    n, d = 256, 64
    assert attention_flops(1, 1, n, d, False) == 4 * n * n * d == 2 * attention_flops(1, 1, n, d, True)
    entry = " ".join(_entry("FLOPs and TFLOP/s").split())
    assert "4·N²·d floating-point operations per head" in entry and "half that when causal" in entry


def test_a_measured_roof_is_not_called_a_bound_no_kernel_passes():
    from committed import latest_run

    # run h100-20261205b: decode attention read its cache at 3.10 TB/s, above the 3.00 TB/s copy roof
    run = latest_run(prefix="h100")
    micro = run.frame("decode", "micro")
    copy = next(c for c in run.manifest.measured_ceilings if c.name == "copy_bandwidth").per_s_median
    assert micro["achieved_bytes_per_s"].max() > copy
    roof = " ".join(_entry("Roofline and ridge point").split())
    assert "can go no faster than" not in roof and "can sit above a measured roof" in roof
    assert "is bound by memory" not in roof  # a limiter is the counters' to name (Profiling), not the roofline's


def test_every_unit_whose_busy_share_the_profiling_page_weighs_is_defined():
    import re

    from render.pages.profile.limiter import SM_CYCLE_UNITS

    pipes = " ".join(_entry("Pipes and stall reasons").split())
    for unit in SM_CYCLE_UNITS:  # 'exponential (XU) pipe' is defined as XU, 'FMA pipe' as FMA
        short = re.search(r"\((\w+)\)", unit)
        assert (short.group(1) if short else unit.removesuffix(" pipe")) in pipes, unit


def test_stall_reasons_are_said_to_be_counted_as_the_profiling_page_reads_them():
    import inspect

    from render.pages.profile import stalls

    metric = "smsp__average_warps_issue_stalled_*_per_issue_active"
    assert metric in inspect.getsource(stalls)  # the stall chart's shares: counters per issued instruction
    pipes = " ".join(_entry("Pipes and stall reasons").split())
    assert metric in pipes and "samples it" not in pipes
