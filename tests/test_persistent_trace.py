"""Reading a persistent step's trace: spans that add up to the step, by operation and by role, and a
clear refusal of a trace the launch did not finish."""
import pytest
import torch

from kernels.decode.persistent_plan import Tile, StepPlan
from kernels.decode.persistent_plan import KernelOp
from kernels.decode.persistent_trace import op_spread, op_times, role_ms, role_split, straggler_summary

OPS = (KernelOp("layer 0 qkv", 2, 100, 1, "qkv"), KernelOp("layer 0 attention", 2, 100, 1, "attention"),
       KernelOp("logits", 1, 100, 1, "head"))
# Two lists: list 0 runs qkv 0, attention 0, logits 0; list 1 runs qkv 1, attention 1.
PLAN = StepPlan(OPS, ((Tile(0, 0), Tile(1, 0), Tile(2, 0)), (Tile(0, 1), Tile(1, 1))))


def _trace(readings):
    t = torch.zeros((2, 3, 3), dtype=torch.int64)
    for (sm, j), r in readings.items():
        t[sm, j] = torch.tensor(r)
    return t


def test_spans_add_up_to_the_step_and_name_where_it_went():
    trace = _trace({(0, 0): (1000, 1000, 1400), (1, 0): (1000, 1000, 1600),  # qkv ends at 1600
                    (0, 1): (1400, 1700, 2000), (1, 1): (1600, 1700, 2100),  # attention waits for it, ends 2100
                    (0, 2): (2000, 2200, 2600)})                             # logits
    times = op_times(trace, PLAN, OPS)
    assert [t.span_ns for t in times] == [600, 500, 500]
    assert times[-1].finish_ns == 1600 == sum(t.span_ns for t in times)
    assert times[1].wait_ns == (300 + 100) / 2 and times[1].work_ns == (300 + 400) / 2
    assert role_ms(times) == pytest.approx({"qkv": 6e-4, "attention": 5e-4, "head": 5e-4})


def test_a_trace_the_launch_did_not_finish_is_refused_by_name():
    trace = _trace({(0, 0): (1000, 1000, 1400), (1, 0): (1000, 1000, 1600), (0, 1): (1400, 1700, 2000),
                    (1, 1): (1600, 1700, 2100)})  # the logits' entry never ran
    with pytest.raises(ValueError, match=r"list 0 entry 2 \(logits\)"):
        op_times(trace, PLAN, OPS)
    with pytest.raises(ValueError, match="not one of this plan's 2 lists"):
        op_times(torch.zeros((3, 3, 3), dtype=torch.int64), PLAN, OPS)


def test_the_spread_says_when_the_sms_started_finished_and_which_one_came_last():
    # qkv: list 1 finishes last (1600); list 0 at 1400. attention: both past their waits at 1700 (100 after qkv),
    # list 1 last at 2100. logits: one list.
    trace = _trace({(0, 0): (1000, 1000, 1400), (1, 0): (1000, 1000, 1600),
                    (0, 1): (1400, 1700, 2000), (1, 1): (1600, 1700, 2100),
                    (0, 2): (2000, 2200, 2600)})
    qkv, attention, logits = op_spread(trace, PLAN, OPS)
    assert (qkv.start_ns, qkv.sm_done_ns, qkv.late_ns, qkv.last_sm) == (0, 500, 100, 1)
    assert (attention.start_ns, attention.sm_done_ns, attention.late_ns, attention.last_sm) == (100, 450, 50, 1)
    assert (logits.start_ns, logits.late_ns, logits.last_sm) == (100, 0, 0)
    summary = straggler_summary([qkv, attention, logits])
    assert summary["start_share"] == pytest.approx(200 / 1600)
    assert summary["late_share"] == pytest.approx(150 / 1600)
    assert summary["most_often_last_sm"] == 1 and summary["its_share_of_operations"] == pytest.approx(2 / 3)


def test_a_role_split_adds_up_to_the_roles_spans_in_hand_off_work_and_the_last_sm():
    trace = _trace({(0, 0): (1000, 1000, 1400), (1, 0): (1000, 1000, 1600),
                    (0, 1): (1400, 1700, 2000), (1, 1): (1600, 1700, 2100),
                    (0, 2): (2000, 2200, 2600)})
    spreads = op_spread(trace, PLAN, OPS)
    split = role_split(spreads)
    # attention: the median SM is past its wait 100 ns after qkv's end, done 450 ns after it, the last SM 50 later
    assert split["attention"].handoff_ms == pytest.approx(1e-4)
    assert split["attention"].work_ms == pytest.approx(3.5e-4) and split["attention"].late_ms == pytest.approx(5e-5)
    # the logits: one SM, past its wait 100 ns after the attention's end (2100), 400 of work, nothing late
    assert (split["head"].handoff_ms, split["head"].work_ms, split["head"].late_ms) == pytest.approx((1e-4, 4e-4, 0))
    spans = role_ms(op_times(trace, PLAN, OPS))
    for role, part in split.items():
        assert part.handoff_ms + part.work_ms + part.late_ms == pytest.approx(spans[role])


def test_a_role_split_keeps_its_parts_inside_the_span_when_the_median_sm_starts_before_it():
    """Op 0 has no operation before it: its median SM can be under way at the step's first reading, and a median
    of two SMs can fall between them; the parts stay non-negative and still add up to the span."""
    from kernels.decode.persistent_trace import OpSpread

    odd = [OpSpread("layer 0 qkv", "qkv", 600.0, -50.0, 700.0, -100.0, 1)]
    part = role_split(odd)["qkv"]
    assert min(part.handoff_ms, part.work_ms, part.late_ms) >= 0
    assert part.handoff_ms + part.work_ms + part.late_ms == pytest.approx(6e-4)
