"""The fused decode-step kernels under TRITON_INTERPRET=1 against PyTorch references, at tiny shapes."""
import pytest
import torch
import torch.nn.functional as F

from kernels.decode import fused_linear as fl
from kernels.decode.attention import SplitBuffers, reference_decode_attention, split_kv_attention
from kernels.decode.gpt2_fused import ArgmaxScratch, advance, argmax_advance, embed
from kernels.decode.kv_quant import quantize


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


@pytest.mark.parametrize("int8", [False, True])
def test_ln_qkv_store_can_hand_k_and_v_to_the_attention_instead(int8):
    # With new_kv, k and v land in that (2, B, H, D) buffer unquantized, and the cache stays as it was.
    B, H, D, L = 2, 3, 16, 6
    C = H * D
    x, w, b = _rand(B, C, seed=17), _rand(C, 3 * C, seed=18, scale=0.2), _rand(3 * C, seed=19)
    g, beta = _rand(C, seed=20).abs() + 0.5, _rand(C, seed=21)
    q, new_kv = torch.empty(B, H, D), torch.empty(2, B, H, D)
    kc = torch.zeros(B, H, L, D, dtype=torch.int8 if int8 else torch.float32)
    vc = torch.zeros_like(kc)
    scales = {"k_scale": torch.zeros(B, H, L), "v_scale": torch.zeros(B, H, L)} if int8 else {}
    fl.ln_qkv_store(x, g, beta, 1e-5, w, b, q, kc, vc, torch.tensor([4]), _ws(), tiles=fl.Tiling(16, 16, 16, 2),
                    new_kv=new_kv, **scales)
    ref = F.linear(F.layer_norm(x, (C,), g, beta), w.T, b).view(B, 3, H, D)
    assert (q - ref[:, 0]).abs().max() < 1e-5
    assert (new_kv - ref[:, 1:].transpose(0, 1)).abs().max() < 1e-5
    assert kc.abs().sum() == 0 and vc.abs().sum() == 0 and all(s.abs().sum() == 0 for s in scales.values())


def test_attention_then_projection_residual_with_row_statistics():
    # The step's middle: attention (merged in its own launch) into a buffer, then x += attn @ w + b,
    # leaving x's row statistics per output tile, which the next LayerNorm combines.
    B, H, D, L, splits = 2, 3, 16, 40, 4
    q, k, v = _rand(B, H, D, seed=22), _rand(B, H, L, D, seed=23), _rand(B, H, L, D, seed=24)
    lens = torch.tensor([29], dtype=torch.int32)
    attn = torch.empty(B, H, D)
    buffers = SplitBuffers(B, H, D, splits, "cpu")
    split_kv_attention(q, k, v, lens, attn, buffers)
    assert int(buffers.counter.abs().sum()) == 0  # the merging split resets its counter
    C = 40  # three 16-column tiles, the last one narrower
    w, b, x = _rand(H * D, C, seed=25, scale=0.1), _rand(C, seed=26), _rand(B, C, seed=27) * 4 + 3
    ref = x + F.linear(reference_decode_attention(q, k, v, lens).float().reshape(B, H * D), w.T, b)
    t = fl.Tiling(16, 16, 16, 2)
    stats_buf = fl.RowStats.buffer(B, 4, "cpu")
    fl.linear_residual(attn.view(B, -1), w, b, x, _ws(), tiles=t, stats_out=stats_buf)
    assert (x - ref).abs().max() < 1e-5
    stats = fl.residual_stats(stats_buf, t, C)
    assert (stats.tiles, stats.width) == (3, 16)
    # The next LayerNorm, fed the tiles' statistics, equals one fed whole-row statistics.
    g, beta, w2 = _rand(C, seed=30).abs() + 0.5, _rand(C, seed=31), _rand(C, 24, seed=32, scale=0.1)
    out = torch.empty(B, 24)
    fl.ln_linear(x, g, beta, 1e-5, w2, None, out, _ws(), tiles=fl.Tiling(16, 16, 16, 1), stats=stats)
    assert (out - F.linear(F.layer_norm(x, (C,), g, beta, 1e-5), w2.T)).abs().max() < 1e-5


def test_row_statistics_that_do_not_cover_the_row_are_refused():
    x = _rand(2, 40)
    with pytest.raises(ValueError, match="do not cover a row of 40"):
        fl.ln_linear(x, torch.ones(40), torch.zeros(40), 1e-5, _rand(40, 8), None, torch.empty(2, 8), _ws(),
                     tiles=fl.Tiling(16, 16, 16, 1), stats=fl.RowStats(fl.RowStats.buffer(2, 4, "cpu"), 2, 16))
    with pytest.raises(ValueError, match=r"\(2, 2, tiles\) fp32"):
        fl.RowStats(fl.RowStats.buffer(3, 4, "cpu"), 3, 16).check(2, 40)


def test_embed_and_advance_keep_the_loop_on_the_device():
    wte, wpe = _rand(10, 8, seed=28), _rand(6, 8, seed=29)
    history = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 0, 0]])
    pos, lens = torch.tensor([2]), torch.tensor([3], dtype=torch.int32)
    x = torch.empty(2, 8)
    stats = embed(history, pos, wte, wpe, x, fl.RowStats.buffer(2, 3, "cpu"))
    ref = wte[torch.tensor([3, 6])] + wpe[2]
    assert torch.allclose(x, ref)
    # One whole-row tile of statistics for the first LayerNorm: the mean and the sum of squared deviations.
    assert (stats.tiles, stats.width) == (1, 8)
    assert torch.allclose(stats.buf[0, :, 0], ref.mean(1)) and torch.allclose(stats.buf[1, :, 0], ref.var(1) * 7)
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


def test_tiling_splits_k_only_to_fill_the_gpu_and_as_far_as_the_partials_allow():
    t = fl.Tuning(few_rows=fl.RowTiles(2.0, 2, 64, 128, 3, 4),
                  many_rows=fl.RowTiles(2.0, 2, 64, 128, 3, 8, max_partial_kib=32))
    wide = fl.tiling(4, k_tiles=6, n_tiles=800, sm_count=132, block_n=64, block_k=128, tuning=t)
    assert wide.split_k == 1  # plenty of output tiles already
    narrow = fl.tiling(4, k_tiles=24, n_tiles=12, sm_count=132, block_n=64, block_k=128, tuning=t)
    assert narrow.split_k == 12 and narrow.num_warps == 4  # capped by the inner tiles (at least two per split)
    # 64 rows: each split leaves 64 x 64 fp32 partial sums (16 KiB), and 32 KiB allow two of them.
    many = fl.tiling(64, k_tiles=24, n_tiles=12, sm_count=132, block_n=64, block_k=128, tuning=t)
    assert many.split_k == 2 and many.block_b == 64 and many.num_warps == 8
    assert fl.tiling(3, 6, 12, 132, 64, 128, t).block_b == 16 and fl.tiling(17, 6, 12, 132, 64, 128, t).block_b == 32


def test_deep_products_split_past_the_partials_cap_and_the_projection_after_attention_does_not():
    t = fl.Tuning(many_rows=fl.RowTiles(2.0, 2, 64, 128, 4, 8, max_partial_kib=32, max_split_depth=512,
                                        after_attention_split=1))
    # 64 rows: the 32 KiB cap allows two splits; the MLP's output product (3072 deep, 24 tiles of
    # 128) would then run twelve tiles a split, and splits to no deeper than 512 (six of four) instead.
    assert fl.tiling(64, k_tiles=24, n_tiles=12, sm_count=132, block_n=64, block_k=128, tuning=t).split_k == 6
    assert fl.tiling(64, k_tiles=6, n_tiles=36, sm_count=132, block_n=64, block_k=128, tuning=t).split_k == 2
    # the same depth in 32-deep tiles (before Ampere) gives the same six splits
    assert fl.tiling(64, k_tiles=96, n_tiles=12, sm_count=132, block_n=64, block_k=32, tuning=t).split_k == 6
    assert fl.tiling(64, 6, 12, 132, 64, 128, t, after_attention=True).split_k == 1
    assert fl.tiling(4, 12, 12, 132, 64, 64, t, after_attention=True).split_k > 1  # few rows: no such rule


def test_large_products_let_the_next_grid_launch_only_after_their_weights(monkeypatch):
    from kernels.aot import meta

    monkeypatch.setattr(fl, "interpreting", lambda: False)
    t, hopper = fl.Tiling(16, 64, 64, 1), fl.Device(132, (9, 0))
    mib = fl.TUNING.late_dependents_mib
    side = int((mib * 2**20 / 2) ** 0.5) + 1  # a square bf16 weight just over the threshold
    assert fl._launch_options(t, meta(side, side, dtype=torch.bfloat16), gpu=hopper)["PDL"] == fl.PDL_LATE
    assert fl._launch_options(t, meta(side - 2, side - 2, dtype=torch.bfloat16), gpu=hopper)["PDL"] == fl.PDL_EARLY
    # no programmatic dependent launch before Hopper, whatever the size
    assert fl._launch_options(t, meta(side, side, dtype=torch.bfloat16), gpu=fl.Device(108, (8, 0)))["PDL"] == 0


def test_a_register_cap_reaches_the_compiler_and_leaves_the_results_alone(monkeypatch):
    from kernels.aot import meta

    t, hopper, w = fl.Tiling(16, 64, 64, 6), fl.Device(132, (9, 0)), meta(768, 768, dtype=torch.bfloat16)
    x, g, beta, wt = _rand(3, 80, seed=1), _rand(80, seed=4).abs() + 0.5, _rand(80, seed=5), _rand(80, 72, seed=2)
    outs = []
    for cap in (None, 96):
        monkeypatch.setattr(fl.TUNING, "max_registers", cap)
        out = torch.empty(3, 72)
        fl.ln_linear(x, g, beta, 1e-5, wt, None, out, _ws(), tiles=fl.Tiling(16, 32, 32, 3))
        outs.append(out)
    assert torch.equal(outs[0], outs[1])  # the interpreter: same bits, the cap dropped
    monkeypatch.setattr(fl, "interpreting", lambda: False)
    assert fl._launch_options(t, w, gpu=hopper)["maxnreg"] == 96
    monkeypatch.setattr(fl.TUNING, "max_registers", 0)
    assert "maxnreg" not in fl._launch_options(t, w, gpu=hopper)  # 0: no cap, ptxas chooses
    monkeypatch.setattr(fl.TUNING, "max_registers", None)
    # None: the row class's own cap, on Hopper alone (measured there): 96 at 16-row tiles, none at 64 rows or on
    # an older GPU
    assert fl._launch_options(t, w, gpu=hopper)["maxnreg"] == fl.TUNING.few_rows.max_registers == 96
    assert "maxnreg" not in fl._launch_options(fl.Tiling(64, 64, 128, 2, 8), w, gpu=hopper)
    assert "maxnreg" not in fl._launch_options(t, w, gpu=fl.Device(40, (7, 5)))


def test_a_counter_reset_by_store_leaves_the_counters_at_zero_and_the_results_alone(monkeypatch):
    # The opt-in reset by a plain store: the last split must still leave every arrival counter at zero, or the next
    # launch (a graph replay) would miscount its splits; two launches on one workspace check both.
    from kernels.aot import meta

    x, g, beta, wt = _rand(3, 80, seed=1), _rand(80, seed=4).abs() + 0.5, _rand(80, seed=5), _rand(80, 72, seed=2)
    outs = []
    for by_store in (False, True):
        monkeypatch.setattr(fl.TUNING, "reset_by_store", by_store)
        ws = _ws()
        for _ in range(2):
            out = torch.empty(3, 72)
            fl.ln_linear(x, g, beta, 1e-5, wt, None, out, ws, tiles=fl.Tiling(16, 32, 32, 3))
            assert not ws.counter.any()
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    t, hopper, w = fl.Tiling(16, 64, 64, 6), fl.Device(132, (9, 0)), meta(768, 768, dtype=torch.bfloat16)
    assert fl._launch_options(t, w, gpu=hopper)["RESET_STORE"] is True
    monkeypatch.setattr(fl.TUNING, "reset_by_store", False)
    assert fl._launch_options(t, w, gpu=hopper)["RESET_STORE"] is False
    assert fl.Tuning().reset_by_store is True  # the default since its sweep (kernels/decode/notes.md)


def test_layer_norm_statistics_survive_a_large_mean():
    # Tiles' statistics combined without cancellation: a sum of squares would lose the spread under a
    # mean of 1e4. Four tiles of 64 columns, the last one 8 wide, as a residual product leaves them.
    B, K, N = 2, 200, 32
    x = 1e4 + _rand(B, K, seed=30)
    w = _rand(K, N, seed=31, scale=0.1)
    buf = fl.RowStats.buffer(B, 4, "cpu")
    for t, cols in enumerate(x.split(64, dim=1)):
        buf[0, :, t] = cols.mean(1)
        buf[1, :, t] = (cols - cols.mean(1, keepdim=True)).square().sum(1)
    out = torch.empty(B, N)
    fl.ln_linear(x, torch.ones(K), torch.zeros(K), 1e-5, w, None, out, _ws(), tiles=fl.Tiling(16, 32, 64, 1),
                 stats=fl.RowStats(buf, 4, 64))
    ref = F.linear(F.layer_norm(x.double(), (K,)), w.double().T)
    # fp32 holds a mean near 1e4 only to half a step of 2^-10, an error every normalized value of the
    # row shares; lost cancellation would be errors of order one.
    assert (out.double() - ref).abs().max() < 5e-3


def test_wide_outputs_get_wider_tiles():
    dev = fl.Device(132, (9, 0))
    assert fl.linear_tiling(4, 768, 50257, dev).block_n == 2 * fl.TUNING.few_rows.block_n  # the LM head
    assert fl.linear_tiling(4, 768, 3072, dev).block_n == fl.TUNING.few_rows.block_n
    assert fl.linear_tiling(4, 768, 3072, fl.Device(40, (7, 5))).block_k == fl.PRE_AMPERE_BLOCK_K  # a T4


def test_tiles_fit_the_shared_memory_the_gpu_gives_a_block():
    ada = fl.Device(58, (8, 9), 99 * 1024)  # an L4: sm89 gives a block 99 KiB
    hopper = fl.Device(132, (9, 0), 227 * 1024)
    # The LM head at 64 rows: twice-wide tiles need 116 KB before Hopper, so an sm89 GPU keeps narrow ones.
    assert fl.linear_tiling(64, 768, 50257, hopper).block_n == 2 * fl.TUNING.many_rows.block_n
    head = fl.linear_tiling(64, 768, 50257, ada)
    assert head.block_n == fl.TUNING.many_rows.block_n and head.num_stages >= 2
    for rows, k, n in ((4, 768, 50257), (64, 768, 50257), (64, 1600, 6400), (64, 6400, 1600)):
        for dev in (ada, hopper):
            t = fl.linear_tiling(rows, k, n, dev)
            assert fl.smem_bytes(t, dev.capability) <= dev.smem_per_block, (rows, k, n, dev, t)
    # Less memory: fewer stages first, down to two; below that, a refusal that says what to do instead.
    small = fl.Device(58, (8, 9), 60 * 1024)
    t = fl.qkv_tiling(64, 768, 12, 64, small)
    assert t.num_stages == 2 and fl.smem_bytes(t, small.capability) <= small.smem_per_block
    with pytest.raises(ValueError, match="shared memory.*DECODE_GRAPH_STEP=torch"):
        fl.qkv_tiling(64, 768, 12, 64, fl.Device(58, (8, 9), 32 * 1024))


def test_the_shared_memory_a_gpu_gives_is_read_from_torch_or_assumed_least(monkeypatch):
    from types import SimpleNamespace

    import triton

    from kernels import common
    from kernels.attention import portable

    def broken_driver(*a):
        raise RuntimeError("no such property")

    driver = SimpleNamespace(active=SimpleNamespace(utils=SimpleNamespace(get_device_properties=broken_driver)))
    monkeypatch.setattr(triton.runtime, "driver", driver)
    for props, cap, want in ((SimpleNamespace(shared_memory_per_block_optin=101376), (8, 9), 101376),
                             (SimpleNamespace(), (8, 6), 99 * 1024), (SimpleNamespace(), (7, 5), 64 * 1024),
                             (SimpleNamespace(), (9, 0), 227 * 1024)):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i, p=props: p)
        monkeypatch.setattr(common, "capability", lambda i, c=cap: c)
        common.smem_per_block.cache_clear()
        assert common.smem_per_block(0) == want
        # The training attention's configs read the same figure.
        assert portable._smem_limit(torch.device("cuda", 0)) == want
    common.smem_per_block.cache_clear()


def test_argmax_advance_picks_the_first_largest_logit_and_moves_the_loop_on():
    V = 1000  # not a multiple of the 32 chunks
    logits = _rand(3, V, seed=40)
    logits[0, 7] = logits[0, 900] = 50.0  # a tie across chunks: the lower index wins, as in torch.argmax
    logits[1, -1] = 60.0  # the last column of the last chunk
    logits[2, 45] = logits[2, 40] = 70.0  # a tie inside one chunk (columns 32-63)
    history = torch.zeros(3, 8, dtype=torch.int64)
    pos, lens = torch.tensor([2]), torch.tensor([3], dtype=torch.int32)
    scratch = ArgmaxScratch(3, "cpu")
    argmax_advance(logits, history, pos, lens, scratch)
    assert history[:, 3].tolist() == logits.argmax(-1).tolist() == [7, V - 1, 40]
    assert int(pos) == 3 and int(lens) == 4 and int(scratch.counter) == 0
    argmax_advance(logits, history, pos, lens, scratch, write=False)  # teacher-forced: history is the input
    assert history[:, 4].tolist() == [0, 0, 0] and int(pos) == 4 and int(lens) == 5
