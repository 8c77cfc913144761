"""The fused decode-step kernels under TRITON_INTERPRET=1 against PyTorch references, at tiny shapes."""
import pytest
import torch
import torch.nn.functional as F

from kernels import fused_linear as fl
from kernels.decode_attention import reference_decode_attention, split_kv_partials
from kernels.gpt2_fused import advance, embed
from kernels.kv_quant import quantize


def _rand(*shape, seed=0, scale=1.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def _ws():
    return fl.Workspace("cpu", 200_000, 64)


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("activation", [None, "gelu_tanh", "gelu"])
def test_ln_linear_matches_layer_norm_then_linear(split, activation):
    B, K, N = 3, 80, 72  # K and N not multiples of the tiles: the tails are masked
    x, w, b = _rand(B, K, seed=1) * 3 + 1, _rand(K, N, seed=2, scale=0.1), _rand(N, seed=3)
    g, beta = _rand(K, seed=4).abs() + 0.5, _rand(K, seed=5)
    out = torch.empty(B, N)
    ws = _ws()
    fl.ln_linear(x, g, beta, 1e-5, w, b, out, ws, activation, tiles=fl.Tiling(16, 32, 32, split))
    ref = F.linear(F.layer_norm(x, (K,), g, beta, 1e-5), w.T, b)
    if activation:
        ref = F.gelu(ref, approximate="tanh" if activation == "gelu_tanh" else "none")
    assert (out - ref).abs().max() < 1e-5
    assert int(ws.counter.abs().sum()) == 0  # the last split resets its counter for the next launch


def test_split_k_sums_in_a_fixed_order():
    # Deterministic: the same inputs give the same bits, whatever order the splits finish in.
    x, w = _rand(2, 128, seed=6), _rand(128, 40, seed=7)
    outs = []
    for _ in range(2):
        out = torch.empty(2, 40)
        fl.ln_linear(x, torch.ones(128), torch.zeros(128), 1e-5, w, None, out, _ws(), tiles=fl.Tiling(16, 16, 16, 8))
        outs.append(out)
    assert torch.equal(outs[0], outs[1])


def test_lm_head_reads_the_transposed_table_in_place():
    B, C, V = 2, 48, 70
    x, table = _rand(B, C, seed=8), _rand(V, C, seed=9)  # (vocab, width), as the embedding is stored
    out = torch.empty(B, V)
    fl.ln_linear(x, torch.ones(C), torch.zeros(C), 1e-5, table.t(), None, out, _ws(), tiles=fl.Tiling(16, 32, 16, 1))
    assert (out - F.linear(F.layer_norm(x, (C,)), table)).abs().max() < 1e-5


def test_bf16_stays_within_a_few_bf16_steps_of_fp32():
    B, K, N = 2, 64, 64
    x, w, b = (t.bfloat16() for t in (_rand(B, K, seed=10), _rand(K, N, seed=11, scale=0.2), _rand(N, seed=12)))
    g, beta = torch.ones(K, dtype=torch.bfloat16), torch.zeros(K, dtype=torch.bfloat16)
    out = torch.empty(B, N, dtype=torch.bfloat16)
    fl.ln_linear(x, g, beta, 1e-5, w, b, out, _ws(), "gelu_tanh", tiles=fl.Tiling(16, 32, 32, 2))
    exact = F.gelu(F.linear(F.layer_norm(x.float(), (K,)), w.float().T, b.float()), approximate="tanh")
    torch_bf16 = F.gelu(F.linear(F.layer_norm(x, (K,), g, beta), w.T, b), approximate="tanh")
    # Both round to bf16 three times (norm, product, activation). The interpreter truncates fp32 -> bf16
    # where a GPU rounds to nearest, so allow it a bit more than PyTorch's own bf16 error.
    ours, theirs = (out.float() - exact).abs().max(), (torch_bf16.float() - exact).abs().max()
    assert 0 < ours <= 2.5 * theirs


@pytest.mark.parametrize("split", [1, 2])
def test_linear_residual_adds_in_place(split):
    h, w, b, x = _rand(3, 96, seed=13), _rand(96, 40, seed=14, scale=0.1), _rand(40, seed=15), _rand(3, 40, seed=16)
    ref = x + F.linear(h, w.T, b)
    fl.linear_residual(h, w, b, x, _ws(), tiles=fl.Tiling(16, 16, 32, split))
    assert (x - ref).abs().max() < 1e-5


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("split", [1, 2])
def test_ln_qkv_store_writes_q_and_the_cache_at_pos(int8, split):
    B, H, D, L = 2, 3, 16, 6
    C = H * D
    x, w, b = _rand(B, C, seed=17), _rand(C, 3 * C, seed=18, scale=0.2), _rand(3 * C, seed=19)
    g, beta = _rand(C, seed=20).abs() + 0.5, _rand(C, seed=21)
    q = torch.empty(B, H, D)
    kc = torch.zeros(B, H, L, D, dtype=torch.int8 if int8 else torch.float32)
    vc = torch.zeros_like(kc)
    scales = {"k_scale": torch.zeros(B, H, L), "v_scale": torch.zeros(B, H, L)} if int8 else {}
    fl.ln_qkv_store(x, g, beta, 1e-5, w, b, q, kc, vc, torch.tensor([4]), _ws(),
                    tiles=fl.Tiling(16, 16, 16, split), **scales)
    ref = F.linear(F.layer_norm(x, (C,), g, beta), w.T, b).view(B, 3, H, D)
    assert (q - ref[:, 0]).abs().max() < 1e-5
    for cache, part, scale in ((kc, 1, "k_scale"), (vc, 2, "v_scale")):
        if int8:
            qv, s = quantize(ref[:, part])
            # the fused product may differ from F.linear in the last bit: at most one int8 step apart
            assert (cache[:, :, 4].int() - qv.int()).abs().max() <= 1
            assert torch.allclose(scales[scale][:, :, 4], s, rtol=1e-5)
        else:
            assert (cache[:, :, 4] - ref[:, part]).abs().max() < 1e-5
        assert cache[:, :, [0, 1, 2, 3, 5]].abs().sum() == 0  # no other position written


def test_merge_proj_residual_equals_attention_then_projection():
    B, H, D, L, splits = 2, 3, 16, 40, 4
    q, k, v = _rand(B, H, D, seed=22), _rand(B, H, L, D, seed=23), _rand(B, H, L, D, seed=24)
    lens = torch.tensor([29], dtype=torch.int32)
    o_part, lse = torch.empty(B * H * splits, D), torch.empty(B * H * splits)
    split_kv_partials(q, k, v, lens, o_part, lse, splits)
    w, b, x = _rand(H * D, 24, seed=25, scale=0.1), _rand(24, seed=26), _rand(B, 24, seed=27)
    attn = reference_decode_attention(q, k, v, lens).float().reshape(B, H * D)
    ref = x + F.linear(attn, w.T, b)
    fl.merge_proj_residual(o_part, lse, H, D, splits, w, b, x, _ws(), tiles=fl.Tiling(16, 16, 16, 2))
    assert (x - ref).abs().max() < 1e-5


def test_embed_and_advance_keep_the_loop_on_the_device():
    wte, wpe = _rand(10, 8, seed=28), _rand(6, 8, seed=29)
    history = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 0, 0]])
    pos, lens = torch.tensor([2]), torch.tensor([3], dtype=torch.int32)
    x = torch.empty(2, 8)
    embed(history, pos, wte, wpe, x)
    assert torch.allclose(x, wte[torch.tensor([3, 6])] + wpe[2])
    advance(torch.tensor([7, 8]), history, pos, lens)
    assert history[:, 3].tolist() == [7, 8] and int(pos) == 3 and int(lens) == 4
    advance(torch.tensor([9, 9]), history, pos, lens, write=False)  # teacher-forced: history is the input
    assert history[:, 4].tolist() == [0, 0] and int(pos) == 4 and int(lens) == 5


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="workspace too small"):
        fl.linear_residual(_rand(2, 64), _rand(64, 32), _rand(32), _rand(2, 32), fl.Workspace("cpu", 8, 1),
                           tiles=fl.Tiling(16, 16, 16, 4))
    with pytest.raises(ValueError, match="rows exceed"):
        fl.tiling(fl.MAX_ROWS + 1, 4, 4, 100, 64, 128)
    with pytest.raises(ValueError, match="one head per program"):
        fl.ln_qkv_store(_rand(1, 32), torch.ones(32), torch.zeros(32), 1e-5, _rand(32, 96), _rand(96),
                        torch.empty(1, 2, 16), torch.zeros(1, 2, 4, 16), torch.zeros(1, 2, 4, 16), torch.tensor([0]),
                        _ws(), tiles=fl.Tiling(16, 32, 16, 1))


def test_tiling_splits_k_only_to_fill_the_gpu():
    wide = fl.tiling(4, k_tiles=6, n_tiles=800, sm_count=132, block_n=64, block_k=128)
    assert wide.split_k == 1  # plenty of output tiles already
    narrow = fl.tiling(4, k_tiles=24, n_tiles=12, sm_count=132, block_n=64, block_k=128)
    assert narrow.split_k == 12  # capped by the inner tiles (at least two per split)
    assert fl.tiling(64, 6, 12, 132, 64, 128).block_b == 64 and fl.tiling(3, 6, 12, 132, 64, 128).block_b == 16


def test_layer_norm_statistics_survive_a_large_mean():
    # One pass over the row, yet no cancellation: a sum of squares would lose the spread under a mean of 1e4.
    B, K, N = 2, 200, 32
    x = 1e4 + _rand(B, K, seed=30)
    w = _rand(K, N, seed=31, scale=0.1)
    out = torch.empty(B, N)
    fl.ln_linear(x, torch.ones(K), torch.zeros(K), 1e-5, w, None, out, _ws(), tiles=fl.Tiling(16, 32, 64, 1))
    ref = F.linear(F.layer_norm(x.double(), (K,)), w.double().T)
    assert (out.double() - ref).abs().max() < 1e-3


def test_wide_outputs_get_wider_tiles():
    dev = fl.Device(132, (9, 0))
    assert fl.linear_tiling(4, 768, 50257, dev).block_n == 2 * fl.TUNING.block_n  # the LM head
    assert fl.linear_tiling(4, 768, 3072, dev).block_n == fl.TUNING.block_n
    assert fl.linear_tiling(4, 768, 3072, fl.Device(40, (7, 5))).block_k == fl.PRE_AMPERE_BLOCK_K  # a T4
