"""Issue 44's persistent decode step, host side: the schedule covers the step's bytes once, keeps each SM's
list in operation order (what makes the counters deadlock-free), refuses grids the GPU cannot hold, and
its time model behaves as its assumptions say."""
import dataclasses

import pytest
import torch

from kernels.decode.arrival import check_waits, wait_probe

from kernels.decode.gpt2 import ModelArgs
from kernels.decode.persistent_plan import Operation, check_plan, check_resident, plan_step, predicted_step_s
from kernels.decode.persistent_step import PersistentTiling, kernel_operations

GPT2 = ModelArgs()
SMS = 132
ELEM_BYTES = 2  # bf16


def gpt2_ops(args=GPT2, batch=4, context=1000, tiling=PersistentTiling()):
    """The operations of a step as the persistent kernel tiles them."""
    return kernel_operations(args, batch, context, tiling, ELEM_BYTES)


def step_bytes(args, batch, context):
    """Weights (four products a layer, 12 C^2 elements, and the tied logits) and the cache read by one step,
    counted apart from the planner."""
    c = args.n_embd
    layers = args.n_layer * (12 * c * c + 2 * batch * context * c)
    return (layers + args.vocab_size * c) * ELEM_BYTES


@pytest.mark.parametrize("args,batch,context", [(GPT2, 4, 1000), (GPT2, 64, 512),
                                                (ModelArgs(n_layer=48, n_head=25, n_embd=1600), 4, 1000)])
def test_the_operations_read_the_steps_bytes(args, batch, context):
    ops = gpt2_ops(args, batch, context)
    assert len(ops) == 5 * args.n_layer + 1 and ops[-1].name == "logits"
    want = step_bytes(args, batch, context)
    # tiles round up, and an attention tile reads a whole chunk of keys: a few percent at most
    assert want <= sum(op.bytes for op in ops) <= 1.03 * want
    # looped product tiles read the same bytes in fewer, larger tiles
    looped = gpt2_ops(args, batch, context, PersistentTiling(slice_k=128, chunks=8))
    products = lambda o: sum(op.tiles for op in o if op.role != "attention")  # noqa: E731
    assert products(looped) < products(ops)
    assert want <= sum(op.bytes for op in looped) <= 1.03 * want


def test_the_plan_deals_every_tile_once_in_operation_order_and_evenly():
    plan = plan_step(gpt2_ops(), SMS)
    check_plan(plan)
    assert len(plan.per_sm) == SMS and plan.counter_targets == tuple(op.tiles for op in plan.ops)
    loads = [sum(plan.ops[t.op].tile_bytes for t in tiles) for tiles in plan.per_sm]
    assert max(loads) - min(loads) <= max(op.tile_bytes for op in plan.ops)


def test_a_plan_that_could_deadlock_is_refused():
    plan = plan_step(gpt2_ops(), SMS)
    first = list(plan.per_sm[0])
    swapped = dataclasses.replace(plan, per_sm=(tuple([first[-1]] + first[:-1]),) + plan.per_sm[1:])
    with pytest.raises(ValueError, match="out of operation order"):
        check_plan(swapped)
    missing = dataclasses.replace(plan, per_sm=(tuple(first[1:]),) + plan.per_sm[1:])
    with pytest.raises(ValueError, match="would never reach"):
        check_plan(missing)
    twice = dataclasses.replace(plan, per_sm=(tuple(first),) * 2 + plan.per_sm[2:])
    with pytest.raises(ValueError, match="two SMs"):
        check_plan(twice)


def test_a_grid_the_gpu_cannot_hold_is_refused():
    check_resident(SMS, SMS, 1)
    check_resident(2 * SMS, SMS, 2)
    with pytest.raises(ValueError, match="deadlock. Launch at most 132"):
        check_resident(SMS + 1, SMS, 1)
    with pytest.raises(ValueError, match="does not fit an SM"):
        check_resident(1, SMS, 0)


def test_bad_shapes_say_what_is_wrong():
    with pytest.raises(ValueError, match="at least one SM"):
        plan_step([], SMS)
    with pytest.raises(ValueError, match="at least one SM"):
        plan_step(gpt2_ops(), 0)


def test_the_time_model_prices_the_boundaries_and_what_prefetch_hides():
    plan = plan_step(gpt2_ops(), SMS)
    bandwidth = 4e12
    floor = sum(op.bytes for op in plan.ops) / bandwidth
    free = predicted_step_s(plan, bandwidth, 0.0)
    assert floor <= free <= 1.05 * floor  # no boundary cost: the bytes alone, to the tiles' granularity
    times = [predicted_step_s(plan, bandwidth, b) for b in (0.5e-6, 1e-6, 2e-6, 4e-6)]
    assert times == sorted(times) and times[0] < times[-1]
    plain = [predicted_step_s(plan, bandwidth, b, prefetch=False) for b in (0.5e-6, 1e-6, 2e-6, 4e-6)]
    assert all(p > t for p, t in zip(plain, times))  # streaming during the wait hides part of every boundary
    # without prefetch every boundary adds its full cost to the critical path: 61 of them
    assert plain[-1] - plain[0] == pytest.approx(len(plan.ops) * 3.5e-6, rel=0.05)
    # a buffer of one tile at a time lets the producer run less far ahead: never faster
    assert predicted_step_s(plan, bandwidth, 2e-6, buffer_bytes=1) >= times[2]


def test_a_tile_chain_longer_than_its_stream_sets_the_pace_and_more_lists_hide_it():
    plan = plan_step(gpt2_ops(), SMS)
    bandwidth = 4e12
    tiles = max(len(t) for t in plan.per_sm)
    stream = max(op.tile_bytes for op in plan.ops) / (bandwidth / SMS)
    short = predicted_step_s(plan, bandwidth, 1e-6, chain_s=0.1 * stream)
    long = predicted_step_s(plan, bandwidth, 1e-6, chain_s=4 * stream)
    assert long > short and long >= tiles * 4 * stream  # every tile's chain runs one after another on its list
    # Two blocks an SM halve each list where every operation has tiles for all of them, and so the chains
    ops = [Operation(f"op {i}", 4 * SMS, 32 << 10) for i in range(10)]
    stream = (32 << 10) / (bandwidth / SMS)
    once, twice = (predicted_step_s(plan_step(ops, n), bandwidth, 1e-6, chain_s=4 * stream) for n in (SMS, 2 * SMS))
    assert once >= 40 * 4 * stream and twice < 0.6 * once



def test_a_wait_that_never_ends_fails_loudly_and_names_its_counter():
    names = ["0.qkv's tiles", "0.attention's tiles"]
    counters = torch.tensor([3, 0], dtype=torch.int32)
    targets = torch.tensor([3, 1], dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    status = torch.zeros(1, dtype=torch.int32)
    wait_probe[(1,)](counters, targets, out, status, MAX_POLLS=50)  # the counter already reached its target
    assert out.tolist() == [1, 0] and status.item() == 0
    check_waits(status, names)
    wait_probe[(2,)](counters, targets, out, status, MAX_POLLS=50)  # the second never will
    assert out.tolist() == [1, 0] and status.item() == 2
    with pytest.raises(RuntimeError, match="timed out waiting for 0.attention's tiles"):
        check_waits(status, names)
