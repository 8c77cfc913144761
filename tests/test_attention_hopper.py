"""The Hopper path on the CPU: its availability logic, config pruning and input checks, and the
numerics of its kernels through Triton's interpreter (which models tensor descriptors, though not
TMA or warpgroups). Tiny shapes; behaviour, never speed."""
import pytest
import torch

from attention_inputs import LAYOUTS, odd_layout, qkv

from kernels.attention import hopper as H
from kernels.attention import reference_attention

pytestmark = [
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    # log2(0) = -inf is how the split causal schedule marks a query tile with no key below the diagonal.
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log2:RuntimeWarning"),
]

ATOL = {torch.float16: 4e-3, torch.bfloat16: 3e-2}
TMA = H.Features()
OVERLAP = H.Features(overlap=True)
WS = H.Features(warp_spec=True)
SPLIT = H.Features(warp_spec=True, causal_split=True)
PERSIST = H.Features(warp_spec=True, persistent=True)
PERSIST_TILE = H.Features(warp_spec=True, persistent=True, flat_descs=False)
PAIRS_LEAN = H.Features(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=True)


# --- numerics through the interpreter ----------------------------------------------------------


@pytest.mark.parametrize("features", [TMA, OVERLAP, WS, SPLIT, PERSIST, PERSIST_TILE],
                         ids=["tma", "overlap", "warp_spec", "causal_split", "persistent", "persistent_per_tile"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len", [1, 17, 48])
def test_kernels_match_reference(features, dtype, causal, seq_len):
    # 17 leaves a ragged tail tile (masked); 48 is three whole 16-row tiles, so the overlapped loop
    # runs its steady state and its epilogue; 1 is a single query seeing a single key.
    q, k, v = qkv((1, 2, seq_len, 32), dtype, seed=seq_len)
    out = H.run_for_test(q, k, v, causal, features=features)
    assert out.shape == q.shape and out.dtype == dtype
    err = (out.double() - reference_attention(q, k, v, causal)).abs().max().item()
    assert err < ATOL[dtype], f"{features.label()} {dtype} causal={causal} N={seq_len}: max error {err:.2e}"


def test_batches_and_heads_are_not_mixed_up():
    # Distinct batch and head counts, and a non-default scale: a (b, h) index mix-up or a dropped
    # scale would change the output.
    q, k, v = qkv((2, 3, 20, 16), torch.float16, seed=7)
    for feats in (TMA, WS, SPLIT, PERSIST, PERSIST_TILE):
        out = H.run_for_test(q, k, v, True, sm_scale=0.3, features=feats)
        ref = reference_attention(q, k, v, True, sm_scale=0.3)
        assert (out.double() - ref).abs().max().item() < ATOL[torch.float16], feats.label()


def test_strided_views_are_read_in_place_or_copied():
    # (B, N, H, d) memory viewed as (B, H, N, d): unit stride along d, 16-byte strides elsewhere,
    # so a descriptor reads it in place.
    q, k, v = (t.transpose(1, 2) for t in qkv((1, 20, 2, 32), torch.float16, seed=3))
    assert H._tma_compatible(q)
    out = H.run_for_test(q, k, v, False)
    assert (out.double() - reference_attention(q, k, v, False)).abs().max().item() < ATOL[torch.float16]
    # d not contiguous: no descriptor can describe it, so the wrapper copies it first.
    q2, k2, v2 = (t.transpose(-1, -2) for t in qkv((1, 2, 32, 20), torch.float16, seed=4))
    assert not H._tma_compatible(q2)
    out = H.run_for_test(q2, k2, v2, True)
    assert (out.double() - reference_attention(q2, k2, v2, True)).abs().max().item() < ATOL[torch.float16]


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("features", [TMA, WS, SPLIT, PERSIST, PAIRS_LEAN], ids=["tma", "warp_spec", "causal_split",
                                                                            "persistent", "pairs_lean"])
def test_odd_layouts_and_ragged_lengths(kind, features):
    # 37 is not a multiple of any tile. A view a descriptor cannot describe (d not unit-stride, an
    # address off 16 bytes) is copied first; a (B, N, H, d) view is read in place.
    q, k, v = odd_layout(kind, 2, 3, 37, 32, torch.float16, seed=12)
    assert H._tma_compatible(q) == (kind == "bnhd")
    for causal in (False, True):
        out = H.run_for_test(q, k, v, causal, features=features)
        err = (out.double() - reference_attention(q, k, v, causal)).abs().max().item()
        assert err < ATOL[torch.float16], f"{kind} {features.label()} causal={causal}: max error {err:.2e}"


def test_last_launch_records_config_and_features():
    q, k, v = qkv((1, 1, 16, 16), torch.float16)
    H.run_for_test(q, k, v, False, features=WS, config=dict(BLOCK_M=16, BLOCK_N=16))
    last = H.last_launch()
    assert last["config"]["BLOCK_M"] == 16 and last["features"] == WS
    assert last["autotuned"] is False and last["kernel"] is None  # no compiled kernel under the interpreter


# --- availability and input checks ---------------------------------------------------------


def test_unavailable_under_the_interpreter_with_a_reason():
    ok, why = H.hopper_available()
    assert ok is False and "TRITON_INTERPRET" in why


def test_public_function_refuses_when_unavailable():
    q, k, v = qkv((1, 1, 16, 16), torch.float16)
    with pytest.raises(ValueError, match="Hopper path cannot run here"):
        H.hopper_attention(q, k, v)


def test_run_for_test_is_interpreter_only(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, k, v = qkv((1, 1, 16, 16), torch.float16)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        H.run_for_test(q, k, v)


@pytest.mark.parametrize("dtype", [torch.float32])
def test_float32_is_refused(dtype):
    q, k, v = qkv((1, 1, 16, 16), dtype)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        H.run_for_test(q, k, v)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf")])
def test_non_positive_scale_is_refused(scale):
    q, k, v = qkv((1, 1, 16, 16), torch.float16)
    with pytest.raises(ValueError, match="sm_scale"):
        H.run_for_test(q, k, v, sm_scale=scale)


def test_shape_mismatch_is_refused_like_the_portable_path():
    q, k, _ = qkv((1, 1, 16, 16), torch.float16)
    v = torch.zeros(1, 1, 17, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="same shape"):
        H.run_for_test(q, k, v)


@pytest.mark.parametrize("config, match", [
    (dict(BLOCK_M=48, BLOCK_N=16), "power of two"),
    (dict(BLOCK_N=16), "needs BLOCK_M and BLOCK_N"),
    (dict(BLOCK_M=64, BLOCK_N=64, maxnreg=128), "maxnreg"),
    (dict(BLOCK_M=64, BLOCK_N=64, waves=2), "config keys"),
    ("128x64", "dict or TileConfig"),
])
def test_bad_configs_are_refused(config, match):
    with pytest.raises(ValueError, match=match):
        H._config_from(config, causal=False)


def test_causal_needs_whole_key_tiles_per_query_tile():
    with pytest.raises(ValueError, match="multiple of BLOCK_N"):
        H._config_from(dict(BLOCK_M=64, BLOCK_N=128), causal=True)
    assert H._config_from(dict(BLOCK_M=64, BLOCK_N=128), causal=False).BLOCK_N == 128


def test_portable_style_config_with_empty_maxnreg_is_accepted():
    # The correctness phase passes the portable path's config dicts, which carry maxnreg=None.
    cfg = H._config_from(dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, maxnreg=None), causal=True)
    assert cfg == H.TileConfig(128, 64, 8, 3)


# --- the config space --------------------------------------------------------------------------


@pytest.mark.parametrize("head_dim", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("features", [TMA, WS], ids=["tma", "warp_spec"])
def test_candidates_fit_and_respect_the_diagonal_split(head_dim, causal, features):
    cands = H.candidate_configs(head_dim, torch.float16, causal, 4096, features)
    assert cands, "there is always at least one candidate"
    for c in cands:
        assert H.smem_bytes(c, head_dim, 2) <= H.SMEM_LIMIT_SM90
        assert not causal or c.BLOCK_M % c.BLOCK_N == 0


def test_warp_specialized_candidates_only_where_triton_splits_them():
    ws = H.candidate_configs(128, torch.bfloat16, False, 4096, WS)
    assert all(H.ws_capable(c, 128) for c in ws)
    # head_dim 256 has no warp-specialized table: the descriptor kernel's configs instead.
    assert H.candidate_configs(256, torch.float16, False, 4096, WS) == H.candidate_configs(256, torch.float16, False, 4096, TMA)
    assert not any(H.ws_capable(c, 256) for c in H.candidate_configs(256, torch.float16, False, 4096, WS))


@pytest.mark.parametrize("features", [TMA, WS], ids=["tma", "warp_spec"])
def test_short_sequences_prune_tall_tiles(features):
    # The warp-specialized tiles are all 128 rows tall: a 17-long sequence gets the descriptor
    # kernel's smaller ones instead.
    cands = H.candidate_configs(64, torch.float16, False, 17, features)
    assert cands and all(c.BLOCK_M <= 64 and c.BLOCK_N <= 64 for c in cands)
    assert not any(H.ws_capable(c, 64) for c in cands)


def test_a_tiny_shared_memory_keeps_the_smallest_tile():
    cands = H.candidate_configs(128, torch.float16, False, 4096, TMA, smem_limit=1024)
    assert len(cands) == 1
    smallest = min(H._TMA_CONFIGS["128"], key=lambda c: c[0] * c[1])
    assert (cands[0].BLOCK_M, cands[0].BLOCK_N) == smallest[:2]


def test_unknown_head_dim_is_refused():
    with pytest.raises(ValueError, match="head_dim"):
        H.candidate_configs(100, torch.float16, False, 4096)


def test_register_estimate_counts_only_consumers_when_warp_specialized():
    cfg = H.TileConfig(128, 128, 4, 2)
    # 128x128 accumulator + 128x128 scores over two consumer warpgroups (256 threads).
    assert H.acc_regs_per_thread(cfg, 128, True) == (128 * 128 * 2) // 256
    assert H.acc_regs_per_thread(cfg, 128, False) == (128 * 128 * 2) // 128


# --- what hopper_attention runs by default ----------------------------------------------------


def test_non_causal_takes_the_persistent_kernel_and_causal_the_paired_one_below_the_split():
    f = H.best_features(False, 4096)
    assert f.warp_spec and f.persistent and not f.causal_split and not f.causal_pairs
    c = H.best_features(True, 4096)
    assert c.warp_spec and c.persistent and c.causal_pairs and c.lean_mask and not c.causal_split


def test_long_causal_sequences_take_the_split_schedule():
    assert not H.best_features(True, H.SPLIT_FROM_SEQ_LEN - 1).causal_split
    assert H.best_features(True, H.SPLIT_FROM_SEQ_LEN).causal_split
    assert not H.best_features(False, 10 * H.SPLIT_FROM_SEQ_LEN).causal_split
