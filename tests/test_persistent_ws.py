"""Issue 44's warp-specialized persistent step (kernels/decode/persistent_ws.py), host side: its tiles cover the
step's bytes, the producer and the consumers agree on every item's ring stages, the plan gives no SM more than its
even share of an operation, the ring fits an SM, and the step says why where it cannot run. The kernel itself runs
only on a Hopper GPU (Gluon has no interpreter); the compile matrix builds it for sm90 (tests/test_compile_matrix.py)
and scripts/sweep_persistent.py --ws-warps times it."""
import math

import pytest
import torch

from kernels.decode.gpt2 import CACHES, GPT2, PRESETS, ModelArgs
from kernels.decode.persistent_plan import check_plan, plan_step
from kernels.decode.persistent_ws import (BOX_K, BOX_N, CHUNK, KEYS, MAX_ROWS, WarpSpecializedStep, stages_for,
                                          tile_operations, unsupported_reason)

XL = PRESETS["gpt2-xl"]
H100_SMEM = 227 * 1024


def step_bytes(args, batch, capacity):
    """Weights (four products a layer and the tied logits) and a full cache, counted apart from the tiling."""
    c = args.n_embd
    return (args.n_layer * (12 * c * c + 2 * batch * capacity * c) + args.vocab_size * c) * 2


@pytest.mark.parametrize("name", ["gpt2", "gpt2-xl"])
def test_the_tiles_read_the_steps_bytes_and_count_to_their_targets(name):
    a = PRESETS[name]
    ops = tile_operations(a, 4, 1024, 2)
    assert len(ops) == 5 * a.n_layer + 1 and [op.role for op in ops[:5]] == ["qkv", "attention", "proj", "fc", "out"]
    want = step_bytes(a, 4, 1024)
    # whole boxes: K=1600 takes 7 boxes of 256 (1,792 columns), the logits' last box 16 rows past the vocabulary
    assert want <= sum(op.bytes for op in ops) <= 1.13 * want
    for op in ops:
        if op.role == "attention":
            assert op.tiles == 4 * a.n_head * math.ceil(1024 / CHUNK) and op.finishers == 4 * a.n_head
        else:
            assert op.finishers == op.tiles  # every product tile raises its operation's counter once
    assert ops[-1].tiles == math.ceil(a.vocab_size / BOX_N.value)


@pytest.mark.parametrize("name", ["gpt2", "gpt2-xl"])
def test_the_capped_plan_gives_no_sm_more_than_its_even_share_and_keeps_the_bytes_balanced(name):
    ops = tile_operations(PRESETS[name], 4, 1018, 2)
    for cap in (False, True):
        plan = plan_step(ops, 132, per_op_cap=cap)
        check_plan(plan)  # every tile once, each list in operation order
    per_sm = [[0] * len(ops) for _ in range(132)]
    for sm, tiles in enumerate(plan.per_sm):
        for t in tiles:
            per_sm[sm][t.op] += 1
    assert all(per_sm[sm][o] <= math.ceil(op.tiles / 132) for sm in range(132) for o, op in enumerate(ops))
    loads = [sum(ops[t.op].tile_bytes for t in tiles) for tiles in plan.per_sm]
    assert max(loads) <= 1.05 * sum(loads) / len(loads)


def test_the_uncapped_plan_is_what_overloaded_gpt2_xls_qkv_product():
    """The case the cap was written for: after the second projection's 100 tiles, the SMs it left out took more than
    their share of the next qkv product."""
    ops = tile_operations(XL, 4, 1018, 2)
    plan = plan_step(ops, 132)
    qkv = 5  # layer 1's qkv product
    most = max(sum(t.op == qkv for t in tiles) for tiles in plan.per_sm)
    assert most > math.ceil(ops[qkv].tiles / 132)


def test_a_cap_of_one_operation_larger_than_the_sms_still_deals_every_tile():
    from kernels.decode.persistent_plan import Operation

    ops = [Operation("a", 5, 10), Operation("b", 3, 1000), Operation("c", 7, 1)]
    plan = plan_step(ops, 2, per_op_cap=True)
    check_plan(plan)
    assert sorted(sum(t.op == 1 for t in tiles) for tiles in plan.per_sm) == [1, 2]


@pytest.mark.parametrize("name", ["gpt2", "gpt2-xl"])
def test_the_ring_and_the_rows_fit_an_sm(name):
    c = PRESETS[name].n_embd
    stages = stages_for(c, H100_SMEM)
    rows = math.ceil(4 * c / BOX_K.value) * MAX_ROWS * BOX_K.value * 2
    assert stages >= 16  # deep enough to hold most of an operation's share of an SM
    assert stages * BOX_N.value * BOX_K.value * 2 + rows <= H100_SMEM - 2048
    assert KEYS.value * KEYS.value == BOX_N.value * BOX_K.value  # an attention box fills a stage exactly


def test_it_says_why_it_cannot_run():
    assert "compute capability 9.0" in unsupported_reason(4, "cpu")
    assert unsupported_reason(4, "meta") is None  # how kernels/aot.py compiles it for sm90
    assert "at most 4 sequences" in unsupported_reason(8, "meta")
    a = ModelArgs(n_layer=1, n_head=2, n_embd=128)
    with pytest.raises(ValueError, match="compute capability 9.0"):
        WarpSpecializedStep(GPT2.zeros(a, "cpu", torch.bfloat16), CACHES["bf16"](a, 4, 64, "cpu", torch.bfloat16), 4)


def test_it_refuses_what_its_kernel_does_not_implement():
    meta = "meta"
    narrow = ModelArgs(n_layer=1, n_head=4, n_embd=128)  # head_dim 32
    with pytest.raises(ValueError, match="64 wide"):
        WarpSpecializedStep(GPT2.zeros(narrow, meta, torch.bfloat16), CACHES["bf16"](narrow, 4, 64, meta), 4)
    a = ModelArgs(n_layer=1, n_head=2, n_embd=128)
    with pytest.raises(ValueError, match="16-bit model"):
        WarpSpecializedStep(GPT2.zeros(a, meta, torch.float32), CACHES["bf16"](a, 4, 64, meta, torch.float32), 4)
    with pytest.raises(ValueError, match="consumer_warps 4 or 8"):
        WarpSpecializedStep(GPT2.zeros(a, meta, torch.bfloat16), CACHES["bf16"](a, 4, 64, meta), 4, consumer_warps=6)


def test_its_descriptors_and_buffers_follow_the_model():
    a = ModelArgs(n_layer=2, n_head=2, n_embd=128)
    model = GPT2.zeros(a, "meta", torch.bfloat16)
    step = WarpSpecializedStep(model, CACHES["bf16"](a, 3, 100, "meta"), 3)
    # the transposed weights stack the layers: rows are output columns, columns the inner dimension
    assert step.w_qkv.shape == (2 * 3 * 128, 128) and step.w_out.shape == (2 * 128, 4 * 128)
    assert [list(d.block_shape) for d in step.descs] == [[16, 256]] * 5 + [[1, 64, 64]] * 2
    assert step.chunks == 1 and step.part_o.numel() == 3 * 2 * 1 * 64
    assert step.targets.shape == (len(step.ops),) == (5 * 2 + 1,)
    assert step.work.shape[0] == 4  # the meta device stands for 4 SMs (fused_linear.device_facts)
