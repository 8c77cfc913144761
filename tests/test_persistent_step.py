"""Issue 44's persistent decode step under the interpreter: one block runs every tile of a step in plan
order, and the logits and the cache match the torch step's; a wait that no block can satisfy times out,
names what it waited for and leaves the counters clean; what the step cannot run is refused by name."""
import pytest
import torch

from kernels.decode.gpt2 import CACHES, GPT2, ModelArgs, random_hf_model
from kernels.decode.persistent_step import SUMS, PersistentStep, PersistentTiling, _pack, kernel_operations

TINY = ModelArgs(n_layer=2, n_head=4, n_embd=64, vocab_size=97, n_positions=32)
# Small tiles, so that every product splits along its inner dimension (the last split adds them up, more
# than SUMS of them for the MLP's second product) and each head's cache spans three chunks (the last chunk
# merges them, over a power of two with one masked): the paths a GPU-sized tile takes.
SMALL = PersistentTiling(block_n=16, slice_k=16)
# Tiles that loop over several register blocks of rows: three (48 rows: a K=64 product splits into a whole tile
# and one whose last two blocks are past K) and four (64 rows: TINY's K=64 products do not split at all).
LOOPED = (PersistentTiling(block_n=16, slice_k=16, chunks=3), PersistentTiling(block_n=16, slice_k=16, chunks=4))


@pytest.fixture(scope="module")
def tiny():
    return GPT2.from_hf(random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32))


def _tokens(shape, seed=1):
    return torch.randint(0, TINY.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


def test_the_small_tiles_take_every_path():
    ops = kernel_operations(TINY, 2, 24, SMALL, 4)
    products = [op for op in ops if "attention" not in op.name]
    assert all(op.tiles > op.finishers for op in products)  # split-K everywhere
    assert max(op.tiles // op.finishers for op in products) > SUMS.value  # two rounds of partial sums
    attention = [op for op in ops if "attention" in op.name]
    assert all(op.tiles == 3 * op.finishers for op in attention)  # three chunks per head
    assert all(op.finishers == 2 * TINY.n_head for op in attention)


def test_looped_tiles_split_only_past_their_rows():
    three, four = ([op for op in kernel_operations(TINY, 2, 24, t, 4) if "attention" not in op.name] for t in LOOPED)
    k64 = [i for i, op in enumerate(three) if "second projection" not in op.name]
    assert all(three[i].tiles == 2 * three[i].finishers for i in k64)  # 48 + 16 rows
    assert all(four[i].tiles == four[i].finishers for i in k64)  # 64 rows: one tile a column, no partials
    assert all(op.tiles == 4 * op.finishers for op in four if "second projection" in op.name)  # K = 256


@pytest.mark.parametrize("tiling", (SMALL,) + LOOPED, ids=("one block", "three blocks", "four blocks"))
def test_the_step_matches_the_torch_step_and_leaves_its_counters_at_zero(tiny, tiling):
    B, T, cap = 2, 17, 24
    seq = _tokens((B, 20))
    ref_cache = CACHES["bf16"](TINY, B, cap, "cpu", torch.float32)
    our_cache = CACHES["bf16"](TINY, B, cap, "cpu", torch.float32)
    step = PersistentStep(tiny, our_cache, B, tiling=tiling)
    with torch.inference_mode():
        tiny.prefill(seq[:, :T], ref_cache)
        tiny.prefill(seq[:, :T], our_cache)
        for p in range(T, T + 2):
            pos, lens = torch.tensor([p]), torch.tensor([p + 1], dtype=torch.int32)
            want = tiny.step(seq, pos, lens, ref_cache)
            got = step(seq, pos, lens)
            step.check()
            assert (got - want).abs().max() < 1e-5
            for t in (step.op_count, step.col_count, step.head_count):
                assert not t.any()
    assert torch.allclose(our_cache.k, ref_cache.k, atol=1e-6) and torch.allclose(our_cache.v, ref_cache.v, atol=1e-6)
    assert our_cache.k[:, :, :, T:T + 2].abs().sum() > 0  # the step wrote its own keys
    # Scratch for one partial per tile of the largest product, not the widest op's columns times the deepest's splits.
    largest = max(op.tiles for op in step.ops if op.role != "attention")
    assert step.part.numel() == largest * step.block_m * tiling.block_n


def test_a_wait_no_block_can_meet_times_out_by_name_and_clears_the_counters(tiny):
    # Two lists under the interpreter, which runs the second block only once the first has finished:
    # the first block's wait for the qkv product's other half can never be met.
    step = PersistentStep(tiny, CACHES["bf16"](TINY, 2, 24, "cpu", torch.float32), 2,
                          tiling=PersistentTiling(block_n=16, slice_k=32, max_polls=8), lists=2)
    step(_tokens((2, 8)), torch.tensor([3]), torch.tensor([4], dtype=torch.int32))
    assert step.status.item() != 0
    with pytest.raises(RuntimeError, match="timed out waiting for layer 0 qkv") as raised:
        step.check()
    # and where its counter ended the launch: at its target, since the interpreter ran the second list's half of
    # the product only after the first list had given up on it
    qkv = step.ops[0]
    assert f"counter ended the launch at {qkv.finishers} of {qkv.finishers}" in str(raised.value)
    assert not step.status.any() and not step.op_count.any() and not step.col_count.any()
    step.check()  # nothing left to report


def test_what_the_step_cannot_run_is_refused_by_name(tiny):
    with pytest.raises(ValueError, match="cache in the model's dtype"):
        PersistentStep(tiny, CACHES["int8"](TINY, 2, 8, "cpu", torch.float32), 2)
    with pytest.raises(ValueError, match="at most 16 sequences"):
        PersistentStep(tiny, CACHES["bf16"](TINY, 17, 8, "cpu", torch.float32), 17)
    with pytest.raises(ValueError, match="head_dim 16 is wider"):
        PersistentStep(tiny, CACHES["bf16"](TINY, 2, 8, "cpu", torch.float32), 2,
                       tiling=PersistentTiling(block_n=8, slice_k=32))


def test_the_traced_step_shares_the_packed_weights_and_buffers(tiny, monkeypatch):
    from kernels.decode import persistent_launch

    step = PersistentStep(tiny, CACHES["bf16"](TINY, 2, 24, "cpu", torch.float32), 2, tiling=SMALL)
    with pytest.raises(ValueError, match="GPU's timer"):  # the timer it reads is a GPU's
        step.with_trace()
    monkeypatch.setattr(persistent_launch, "check_traceable", lambda device: None)
    traced = step.with_trace()
    assert traced.w is step.w and traced.part is step.part and traced.op_count is step.op_count
    assert traced.trace.shape == (*step.work.shape, 3) and step.trace.dim() == 1  # the step itself stays untraced
    assert traced._meta()["TRACE"] and not step._meta()["TRACE"]


def test_packed_tiles_hold_their_block_of_the_weight():
    w = torch.arange(70 * 40, dtype=torch.float32).view(70, 40)  # 3 splits of 32 rows, 3 blocks of 16 columns
    packed = _pack(w, 32, 16).view(-1, 32, 16)
    assert packed.shape[0] == 9
    j, s = 2, 1  # tile j * 3 + s: columns 32..47 (40 exist), rows 32..63
    assert torch.equal(packed[j * 3 + s][:, :8], w[32:64, 32:40])
    assert not packed[j * 3 + s][:, 8:].any()  # the padding past N
    assert not packed[0 * 3 + 2][6:].any()  # and past K (70 = 64 + 6)


def test_a_session_builds_its_step_with_the_options_it_is_given(tiny):
    from kernels.decode.session import OurSession

    s = OurSession(tiny, 2, 24, "bf16", "persistent", step_options=dict(tiling=LOOPED[0]))
    assert s.step_fn.tiling == LOOPED[0] and s.step_fn.cache is s.cache
