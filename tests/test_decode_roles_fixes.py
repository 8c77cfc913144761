"""The Decode page's kernel-role section, against the defects an expert found in run h200-20261206a: the range said
"without" a role that included it, a trend claimed from the two ends alone, the persistent step's spans read as a
cost beyond its own bytes, a trace blamed for a gap the profiler made, a largest part outweighed by the other two,
and a table titled for the graph steps alone."""
from __future__ import annotations

import dataclasses

import pytest

from collect.schema.decode import KernelClassRow
from render.pages.decode import DecodePage
from render.runs import load_run
from render.site import REPO_ROOT, Report
from test_decode_page import _persistent_with_split, _with_roles, decode_file, set_step, write

RUN = REPO_ROOT / "data" / "runs" / "h200-20261206a"
needs_run = pytest.mark.skipif(not RUN.exists(), reason="the narrated run is not in this checkout")


@pytest.fixture(scope="module")
def narrated() -> DecodePage:
    run = load_run(RUN)
    return DecodePage(run, [run])


def _line(p: DecodePage, shape: str) -> str:
    return next(line for line in p.role_finding().splitlines() if f"**{shape}.**" in line)


@needs_run
def test_a_range_said_without_a_role_leaves_that_role_out(narrated):
    """A: gpt2's int8 graph step said "without it ... from 3.29 to 5.80 µs", 5.80 being the attention itself."""
    line = _line(narrated, "gpt2, batch 4, context 1000, int8 graph")
    assert "the trend rests on the attention alone" in line
    assert "from 3.29 to 4.47 µs over the other four (the attention 5.80 µs)" in line
    assert "from 3.29 to 5.80" not in line


@needs_run
def test_a_trend_with_the_bytes_needs_the_excess_in_their_order(narrated):
    """B: gpt2's persistent step's qkv product (0.84 µs of bytes) paid 6.04 µs above them, more than the MLP products
    (1.12 µs) at 5.89 and 5.06: no trend across all five, whatever the two ends say."""
    line = _line(narrated, "gpt2, batch 4, context 1000, bf16 persistent")
    assert "grows with the bytes" not in line
    assert ("the excess does not rise with the bytes in order: the norm + qkv product + cache write reads fewer bytes "
            "than the second MLP product + residual yet pays 6.04 µs above them against 5.06 µs, so the excess varies "
            "by operation, not with its bytes: from 3.02 to 6.96 µs.") in line


def test_a_trend_in_the_bytes_order_is_still_claimed(tmp_path):
    growing = write(tmp_path, _with_roles(decode_file("synthetic-20261129"),
                                          {"qkv": 4.0, "attention": 1.0, "proj": 2.0, "fc": 6.0, "out": 5.8}))
    assert "the excess grows with the bytes across all five" in growing.role_finding()
    # the ends as before, the middle out of order: qkv (3.5 MB) pays more than both MLP products (4.7 MB)
    flipped = write(tmp_path / "flip", _with_roles(decode_file("synthetic-20261129"),
                                                   {"qkv": 6.0, "attention": 1.0, "proj": 2.0, "fc": 5.8, "out": 5.0}))
    words = flipped.role_finding()
    assert "grows with the bytes" not in words and "does not rise with the bytes in order" in words


@needs_run
def test_the_warp_specialized_steps_spans_are_not_a_cost_beyond_its_own_bytes(narrated):
    """C: its producer warp reads later operations' weights during earlier operations' spans."""
    said = "a span can hold less than its own bytes' reading, or more"
    for shape in ("gpt2, batch 4, context 1000, bf16 persistent", "gpt2-xl, batch 4, context 1000, bf16 persistent"):
        assert said in _line(narrated, shape)
    for shape in ("gpt2, batch 4, context 1000, bf16 graph", "gpt2-xl, batch 4, context 1000, int8 graph"):
        assert "producer warp" not in _line(narrated, shape)
    out = Report.load(REPO_ROOT / "data").render_markdown((REPO_ROOT / "docs" / "decode.md").read_text(), "decode.md")
    intro = out.split("### Kernel by kernel")[1].split("- **")[0]
    assert "In the warp-specialized persistent step a span is not what an operation costs beyond reading" in intro
    assert "not of what the operation moved in that span" in intro


@needs_run
def test_a_traced_span_no_longer_than_the_untraced_profiled_kernel_is_not_blamed_on_the_trace(narrated):
    """D: gpt2-xl's traced span, 3.171 ms, against the untraced kernel's 3.178 ms under the profiler."""
    line = _line(narrated, "gpt2-xl, batch 4, context 1000, bf16 persistent")
    assert "timer reads" not in line
    assert ("3.17 ms, 1.01× the timed step but no longer than the untraced kernel's 3.18 ms under the profiler: the "
            "gap to the timed loop is the profiler's") in line
    assert "not of the timed step. Of that span, 0.818 ms (25.8%) passes" in line


def test_a_traced_span_well_past_the_untraced_profiled_kernel_is_the_traces(tmp_path):
    f = _persistent_with_split(decode_file("synthetic-20261129"), 0.3, 0.2, None)
    p = next(r for r in f.rows if r.variant == "persistent")
    spans = sum(r.ms_per_step for r in f.kernel_roles if r.variant == "persistent")
    set_step(p, spans / 1.05)
    f.kernel_classes = [c for c in f.kernel_classes if c.variant != "persistent"]

    def untraced(ms):
        return KernelClassRow(model="gpt2", variant="persistent", batch=4, context=1000, kernel_class="persistent step",
                              kernels_per_step=1.0, ms_per_step=ms, top_kernel="_persistent_ws_kernel")
    slow = write(tmp_path / "slow", dataclasses.replace(f, kernel_classes=[*f.kernel_classes, untraced(spans / 1.04)]))
    said = slow.role_finding()
    assert "ms, 1.05× the timed step and 1.04× the untraced kernel's" in said
    assert "under the profiler: the trace's own timer reads slowed it, so the parts below are shares" in said
    near = write(tmp_path / "near", dataclasses.replace(f, kernel_classes=[*f.kernel_classes, untraced(spans / 1.005)]))
    words = near.role_finding()
    assert "timer reads" not in words and "within 1.00% of the untraced kernel's" in words


@needs_run
def test_a_largest_part_outweighed_by_the_other_two_together_says_so(narrated):
    """E: gpt2's median-SM work, 0.209 ms, is the largest part, but hand-off and last SM come to 0.224 ms."""
    line = _line(narrated, "gpt2, batch 4, context 1000, bf16 persistent")
    assert ("The median SM's work is the largest of the three: its tiles take longer than the hand-offs before them "
            "or the waits for the last SM after them, though the hand-off and the wait for the last SM together take "
            "more (0.224 ms against 0.209 ms).") in line
    assert "together take more" not in _line(narrated, "gpt2-xl, batch 4, context 1000, bf16 persistent")


@needs_run
def test_the_role_tables_title_and_time_column_name_the_persistent_steps_spans(narrated, tmp_path):
    """F: the table's persistent rows are traced operations, their time a span of the critical path."""
    assert narrated.role_table_title() == ("Every kernel role of the profiled fused graph steps and the persistent "
                                           "step's traced operations")
    assert "GPU time each (persistent step: the operation&#x27;s span of the critical path)" in narrated.role_table()
    graph_only = write(tmp_path, _with_roles(decode_file("synthetic-20261129"),
                                             {"qkv": 4.9, "attention": 4.4, "proj": 3.9, "fc": 4.6, "out": 4.4}))
    assert graph_only.role_table_title() == "Every kernel role of the profiled fused graph steps"
    assert "<th>GPU time each</th>" in graph_only.role_table()
    doc = (REPO_ROOT / "docs" / "decode.md").read_text()
    assert "{{ decode.role_table_title() }}" in doc
