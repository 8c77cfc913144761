"""The exponentials the Gluon kernels may compute on the FMA pipes (kernels/attention/fma_exp2.py): the
polynomial's accuracy, the edge values the softmax depends on, and that the PTX carries the same
coefficients the numpy model checks. The kernels themselves run on an sm90 GPU only (sweep_versions.py)."""
import numpy as np
import pytest

from kernels.attention import fma_exp2 as F


def test_polynomial_is_within_its_stated_error_over_the_softmax_range():
    x = np.linspace(-126.0, 0.0, 2_000_001, dtype=np.float32)
    rel = np.abs(F.emulated_exp2(x).astype(np.float64) / np.exp2(x.astype(np.float64)) - 1.0)
    assert rel.max() <= F.EX2_MAX_REL_ERROR
    # below half an ulp of fp16, the finer of the dtypes P is rounded to
    assert F.EX2_MAX_REL_ERROR < 2.0 ** -11


def test_whole_powers_are_exact_and_masked_scores_give_zero():
    whole = np.arange(-126, 1, dtype=np.float32)
    assert np.array_equal(F.emulated_exp2(whole), np.exp2(whole))
    # A masked score is -inf and a far smaller one underflows: both must come out 0, never a wrapped exponent.
    assert np.array_equal(F.emulated_exp2(np.array([-np.inf, -127.0, -1e30], np.float32)), np.zeros(3, np.float32))
    assert F.emulated_exp2(np.array([-126.5], np.float32))[0] < 2.0 ** -126


def test_ptx_holds_the_checked_coefficients_and_the_split():
    for emulated in range(F.GROUP + 1):
        asm = F.exp2_asm(emulated)
        assert asm.count("ex2.approx") == F.GROUP - emulated
        assert asm.count("add.s32") == emulated and asm.count("fma.rn") == 3 * emulated
        for c in F.EX2_POLY[1:]:
            assert emulated == 0 or "0f%08X" % int(np.float32(c).view(np.uint32)) in asm
        # every output $0-$3 is written once, from its own input $4-$7
        for i in range(F.GROUP):
            assert asm.count(f" ${i},") == 1 and f"${i + F.GROUP}" in asm
    with pytest.raises(ValueError, match="emulated must be"):
        F.exp2_asm(5)
