"""Every head size a multiple of 8 from 8 to 256: the sizes between the kernels' power-of-two tiles
run in the next tile with the columns past the true size read as zeros and never stored, and every
other size is refused with the sizes allowed. On the CPU through Triton's interpreter, tiny shapes."""
import pytest
import torch

from attention_inputs import qkv

from kernels import flash_attention, kernel_config_of_last_call
from kernels.attention import reference_attention
from kernels.common import HEAD_DIM_TILES, HEAD_DIMS, head_dim_tile

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

ATOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
# Off the power-of-two tiles (24 in 32, 80 and 96 in 128, 192 in 256), and 8, below the smallest tile.
PADDED = (8, 24, 80, 96, 192)


def max_err(out, q, k, v, causal, sm_scale=None):
    assert out.shape == q.shape and out.dtype == q.dtype
    return (out.double() - reference_attention(q, k, v, causal, sm_scale)).abs().max().item()


def test_the_allowed_sizes_are_the_multiples_of_8_up_to_256_each_in_the_next_tile():
    assert HEAD_DIMS == tuple(range(8, 257, 8))
    assert [head_dim_tile(d) for d in PADDED] == [16, 32, 128, 128, 256]
    assert all(head_dim_tile(d) == d for d in HEAD_DIM_TILES)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", PADDED)
def test_the_portable_path_runs_every_padded_size(head_dim, causal):
    # 37 rows: a ragged last key tile, so the masked loads meet the head-size mask too.
    q, k, v = qkv((1, 2, 37, head_dim), torch.float16, seed=head_dim)
    out = flash_attention(q, k, v, causal)
    assert kernel_config_of_last_call()["path"] == "portable"
    assert max_err(out, q, k, v, causal) <= ATOL[torch.float16]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_padded_size_in_the_other_dtypes_and_with_its_own_scale(dtype):
    q, k, v = qkv((2, 1, 40, 80), dtype, seed=3)
    assert max_err(flash_attention(q, k, v), q, k, v, False) <= ATOL[dtype]
    assert max_err(flash_attention(q, k, v, True, 0.3), q, k, v, True, 0.3) <= ATOL[dtype]


def test_the_columns_past_the_head_size_are_never_read():
    # A (B, N, H, d) projection viewed as (B, H, N, d): the next head's columns follow each row's
    # last one, so a load past d would read them into the scores and the output.
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 33, 2, 80, generator=g).half().transpose(1, 2) for _ in range(3))
    for causal in (False, True):
        assert max_err(flash_attention(q, k, v, causal), q, k, v, causal) <= ATOL[torch.float16]


@pytest.mark.parametrize("head_dim", [0, 4, 12, 100, 264, 512])
def test_other_sizes_are_refused_naming_the_allowed_ones(head_dim):
    q = torch.zeros(1, 2, 8, head_dim, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"multiple of 8 from 8 to 256.*got " + str(head_dim) + ".*pad the head"):
        flash_attention(q, q, q)


# --- the Hopper path's descriptor kernel, whose boxes are the tile and whose tensors the true width ---


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [24, 80, 192])
def test_the_hopper_path_pads_in_its_descriptors(head_dim, causal):
    from kernels.attention import hopper as H

    q, k, v = qkv((1, 2, 37, head_dim), torch.float16, seed=head_dim)
    # What it ships (warp-specialized where it can be) falls back to the descriptor kernel here.
    feats = H.best_features(causal, 37)
    assert feats.warp_spec and not H.ws_capable(H.TileConfig(128, 128, 4, 2), head_dim)
    assert max_err(H.run_for_test(q, k, v, causal, features=feats), q, k, v, causal) <= ATOL[torch.float16]


def test_the_hopper_path_tunes_a_padded_size_as_its_tile():
    from kernels.attention import hopper as H

    for causal in (False, True):
        got = H.candidate_configs(80, torch.float16, causal, 4096, H.best_features(causal, 4096))
        assert got == H.candidate_configs(128, torch.float16, causal, 4096, H.Features())  # the descriptor kernel's


# --- which path a padded head size takes where the Hopper and Gluon paths run -------------------


@pytest.fixture
def fake_sm90(monkeypatch):
    """choose_path as on an H200 on the Triton the rules were measured on, without one."""
    import dataclasses

    from kernels.attention import dispatch

    for name in ("hopper", "gluon"):
        monkeypatch.setitem(dispatch._PATHS, name, dataclasses.replace(dispatch._PATHS[name],
                                                                       available=lambda device: (True, "")))
    monkeypatch.setattr(dispatch, "interpreting", lambda: False)
    monkeypatch.setattr(dispatch, "unmeasured_reason", lambda: None)
    dispatch.portable_only.cache_clear()
    yield lambda shape, causal=False: dispatch._choose(
        dispatch._ShapeProbe(shape, torch.float16, torch.device("cuda", 0)), causal)
    dispatch.portable_only.cache_clear()


def test_a_padded_head_size_takes_its_tiles_measured_path(fake_sm90):
    for d, step, causal_step in ((80, "g30", "g37"), (96, "g41", "g37"), (128, "g32", "g42")):
        assert fake_sm90((4, 32, 4096, d))[::2] == ("gluon", {"version": step})
        assert fake_sm90((4, 32, 4096, d), True)[::2] == ("gluon", {"version": causal_step})
    assert "head_dim 96 runs in the d=128 tile" in fake_sm90((4, 32, 4096, 96))[1]
    assert "runs in the" not in fake_sm90((4, 32, 4096, 128))[1]
    assert fake_sm90((2, 8, 4096, 48))[::2] == ("gluon", {"version": "g8"})
    assert fake_sm90((2, 8, 1024, 40), True)[::2] == ("gluon", {"version": "g38"})
    # No rule for the 16, 32 and 256 tiles: the Hopper path, whose descriptor kernel pads.
    assert fake_sm90((4, 32, 4096, 192))[0] == fake_sm90((4, 32, 4096, 24))[0] == "hopper"
