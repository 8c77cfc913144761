"""The read-only twin of a decode step (kernels/decode/read_floor.py) under TRITON_INTERPRET=1: every kernel
reads exactly its own bytes, once."""
import pytest
import torch

from kernels.decode.read_floor import BLOCK, WORD_BYTES, ReadSteps, programs_for


@pytest.mark.parametrize("nbytes", [4, 1000, 4 * BLOCK * 3 + 36, 200_000])
def test_each_read_covers_its_slice_exactly_once(nbytes):
    steps = ReadSteps([nbytes], "cpu")
    src, words, _, grid = steps.launches[0]
    steps.buf.fill_(1)
    steps()
    # Every program sums the words it read; ones everywhere: the total is the words read.
    assert int(steps.sink[:grid].sum()) == words == -(-nbytes // WORD_BYTES)


def test_kernels_read_disjoint_aligned_slices_in_order():
    sizes = [1000, 0, 64, 70_000]
    steps = ReadSteps(sizes, "cpu")
    assert steps.nbytes == sum(sizes) and len(steps.launches) == len(sizes)
    starts = [src.data_ptr() - steps.buf.data_ptr() for src, *_ in steps.launches]
    assert all(s % 64 == 0 for s in starts) and starts == sorted(starts)
    for (src, words, *_), nxt in zip(steps.launches, starts[1:] + [steps.buf.numel() * WORD_BYTES]):
        assert src.data_ptr() - steps.buf.data_ptr() + words * WORD_BYTES <= nxt  # no slice runs into the next
    steps.buf.fill_(1)
    steps()  # a kernel with nothing to read still launches, as the step's embedding does
    src, words, _, grid = steps.launches[-1]
    assert int(steps.sink[:grid].sum()) == words


def test_programs_fill_the_gpu_and_grow_with_the_bytes():
    assert programs_for(1, 132) == 132
    assert programs_for(20 << 20, 132) == 1280


def test_bad_plans_are_refused():
    with pytest.raises(ValueError, match="one non-negative byte count per kernel"):
        ReadSteps([], "cpu")
    with pytest.raises(ValueError, match="one non-negative byte count per kernel"):
        ReadSteps([10, -1], "cpu")
    with pytest.raises(ValueError, match="give one per kernel"):
        ReadSteps([10, 20], "cpu", pdl=[True])
