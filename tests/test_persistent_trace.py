"""Reading a persistent step's trace: spans that add up to the step, by operation and by role, and a
clear refusal of a trace the launch did not finish."""
import pytest
import torch

from kernels.decode.persistent_plan import Tile, StepPlan
from kernels.decode.persistent_plan import KernelOp
from kernels.decode.persistent_trace import op_spread, op_times, role_ms, straggler_summary

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
