"""The split-KV decode-attention kernel under TRITON_INTERPRET=1 against a float64 reference."""
import pytest
import torch

from kernels.decode.attention import decode_attention, reference_decode_attention
from kernels.decode.kv_quant import quantize
from kernels.decode.split_kv_config import default_num_splits


def _inputs(B, H, L, D, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(dtype) for shape in ((B, H, D), (B, H, L, D), (B, H, L, D))]


@pytest.mark.parametrize("splits", [1, 3, 7, 20])  # 1: no merge; 20: more splits than one merge chunk
def test_matches_float64_at_every_split_count(splits):
    q, k, v = _inputs(2, 3, 70, 32)
    lens = torch.tensor([70, 23], dtype=torch.int32)  # per-sequence lengths; the tail of sequence 1 is ignored
    out = decode_attention(q, k, v, lens, num_splits=splits)
    ref = reference_decode_attention(q, k, v, lens)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert (out.double() - ref).abs().max() < 1e-5


# fp32 inputs: the float cache to fp32 rounding. The int8 cache to about 12 bits of the outputs: the
# CUDA-core schedule's widened values carry an offset about 2^8 times the signal, so its fp32 sums keep
# fewer bits, and its scores hold the query to 16 bits of its largest entry (still far finer than
# int8's own steps of 1/254 of each vector's max).
_TOL = {False: 1e-5, True: 3e-4}


@pytest.mark.parametrize("use_dot", [False, True])
@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("head_dim", [32, 40])
def test_both_schedules_agree_with_the_reference(use_dot, int8, head_dim):
    # Lengths that leave a partial last tile (45, 30) and one that fills whole tiles (32).
    q, k, v = _inputs(3, 2, 45, head_dim, seed=7)
    lens = torch.tensor([45, 30, 32], dtype=torch.int32)
    kw = {}
    if int8:
        (k, kw["k_scale"]), (v, kw["v_scale"]) = quantize(k), quantize(v)
    cfg = {"BLOCK_N": 16, "USE_DOT": use_dot, "num_warps": 1, "num_stages": 1}
    out = decode_attention(q, k, v, lens, num_splits=2, config=cfg, **kw)
    assert (out.double() - reference_decode_attention(q, k, v, lens, **kw)).abs().max() < _TOL[int8]


@pytest.mark.parametrize("int8", [False, True])
def test_two_tiles_per_iteration_give_the_same_answer(int8):
    # 16-key tiles: 45 keys in one split = 2 tiles in the paired loop, none left, a ragged tail of 13;
    # 30 = 1 whole tile left over for the single-tile loop; 96 keys in two splits = 3 tiles per split.
    q, k, v = _inputs(3, 2, 96, 32, seed=9)
    lens = torch.tensor([45, 30, 96], dtype=torch.int32)
    kw = {}
    if int8:
        (k, kw["k_scale"]), (v, kw["v_scale"]) = quantize(k), quantize(v)
    ref = reference_decode_attention(q, k, v, lens, **kw)
    outs = [decode_attention(q, k, v, lens, num_splits=splits, config={"BLOCK_N": 16, "USE_DOT": False, "UNROLL": u,
                                                                       "num_warps": 1, "num_stages": 1}, **kw)
            for u in (1, 2) for splits in (1, 2)]
    assert all((o.double() - ref).abs().max() < _TOL[int8] for o in outs)


def test_splits_past_the_live_length_are_ignored():
    # 8 splits of a 5-key cache: most splits get no key and must not disturb the merge.
    q, k, v = _inputs(1, 2, 40, 16, seed=1)
    lens = torch.tensor([5], dtype=torch.int32)
    out = decode_attention(q, k, v, lens, num_splits=8)
    assert (out.double() - reference_decode_attention(q, k, v, lens)).abs().max() < 1e-5


def test_single_key_returns_its_value():
    q, k, v = _inputs(2, 2, 9, 16, seed=2)
    out = decode_attention(q, k, v, torch.tensor([1], dtype=torch.int32), num_splits=2)
    assert torch.allclose(out, v[:, :, 0], atol=1e-6)


def test_keys_beyond_the_length_do_not_leak():
    q, k, v = _inputs(1, 2, 48, 16, seed=3)
    lens = torch.tensor([20], dtype=torch.int32)
    a = decode_attention(q, k, v, lens, num_splits=2)
    k[:, :, 20:] = 1e4
    v[:, :, 20:] = float("nan")
    b = decode_attention(q, k, v, lens, num_splits=2)
    assert torch.equal(a, b)


def test_non_power_of_two_head_dim_and_custom_scale():
    q, k, v = _inputs(1, 2, 33, 40, seed=4)
    lens = torch.tensor([33], dtype=torch.int32)
    out = decode_attention(q, k, v, lens, sm_scale=0.3)
    assert (out.double() - reference_decode_attention(q, k, v, lens, sm_scale=0.3)).abs().max() < 1e-5


def test_int8_cache_matches_the_dequantized_reference():
    q, k, v = _inputs(2, 2, 50, 32, seed=5)
    (kq, ks), (vq, vs) = quantize(k * 3), quantize(v)
    lens = torch.tensor([50, 17], dtype=torch.int32)
    out = decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs, num_splits=3)
    ref = reference_decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs)
    assert (out.double() - ref).abs().max() < _TOL[True]
    # and it stays close to attention over the unquantized cache
    assert (out.double() - reference_decode_attention(q, k * 3, v, lens)).abs().max() < 0.05


def test_int8_scores_keep_a_query_of_wide_range():
    # The integer dot products hold q to 16 bits of its largest entry: one entry 300 times the rest
    # leaves the others about 7 bits, still finer than the int8 keys they multiply.
    q, k, v = _inputs(2, 2, 40, 32, seed=11)
    q[:, :, 3] *= 300.0
    q *= 0.02
    (kq, ks), (vq, vs) = quantize(k), quantize(v)
    lens = torch.tensor([40, 9], dtype=torch.int32)
    out = decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs, num_splits=2)
    ref = reference_decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs)
    assert (out.double() - ref).abs().max() < _TOL[True]


def test_bf16_inputs_within_bf16_rounding():
    q, k, v = _inputs(1, 2, 64, 32, dtype=torch.bfloat16, seed=6)
    lens = torch.tensor([64], dtype=torch.int32)
    out = decode_attention(q, k, v, lens, num_splits=2)
    assert out.dtype == torch.bfloat16
    assert (out.double() - reference_decode_attention(q, k, v, lens)).abs().max() < 2e-2


def test_num_splits_heuristic_is_bounded():
    cpu = torch.device("cpu")
    assert default_num_splits(64, 32, 100_000, cpu) == 1  # plenty of programs already
    assert default_num_splits(1, 1, 64, cpu) == 1  # no chunk shorter than the minimum
    assert 1 <= default_num_splits(1, 1, 10**7, cpu) <= 256
    # Rounded down, never more programs than SPLITS.waves per SM: the CPU stands for 4 SMs, 16 programs,
    # and 3 (batch, head) rows would take 5.33 splits: 5, not the 6 that start a sixth of a wave more.
    assert default_num_splits(1, 3, 100_000, cpu) == 5


def test_row_streams_too_wide_for_the_head_dim_are_not_tunable():
    from kernels.decode import split_kv_config as sk

    def regs(c, d):  # accumulator registers a thread of the CUDA-core schedule holds
        return c.kwargs["BLOCK_N"] * d // (32 * c.num_warps)

    one_warp = next(c for c in sk.INT8_CONFIGS if c.num_warps == 1 and not c.kwargs["USE_DOT"])
    for int8 in (False, True):
        every = sk.INT8_CONFIGS if int8 else sk.BF16_CONFIGS
        for d in (64, 128):
            kept = sk.tunable_configs(int8, (9, 0), d)
            assert kept, (int8, d)
            for c in every:
                fits = c.kwargs["USE_DOT"] or regs(c, d) <= sk.MAX_ROW_STREAM_REGS
                assert (c in kept) == fits, (int8, d, c)
    assert one_warp in sk.tunable_configs(True, (9, 0), 64)
    assert one_warp not in sk.tunable_configs(True, (9, 0), 128)
    assert one_warp not in sk.tunable_configs(True, (7, 5), 100)  # padded to 128 columns


def test_autotuning_classes_double_with_the_work():
    from kernels.decode.split_kv_config import len_bucket

    assert len_bucket(1, 2**14) == len_bucket(1, 1) == 0  # tiny problems: one class
    # gpt2 and gpt2-xl steps at batch 4 (12 and 25 heads, 1k keys) tune apart
    assert len_bucket(4 * 12, 1017) != len_bucket(4 * 25, 1017)
    # the microbenchmark's shapes (batch 1, 4 and 16 at 32 heads, 16k and 32k keys) each tune alone
    micro = {(b, n): len_bucket(b * 32, n) for b in (1, 4, 16) for n in (16384, 32768)}
    assert len(set(micro.values())) == len(micro)
    assert [len_bucket(1, 2**e) for e in range(14, 19)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("change, match", [
    (lambda a: {**a, "k": a["k"][:, :1]}, "must both be"),
    (lambda a: {**a, "seq_lens": a["seq_lens"].long()}, "int32"),
    (lambda a: {**a, "k": a["k"].to(torch.int8), "v": a["v"].to(torch.int8)}, "k_scale and v_scale"),
    (lambda a: {**a, "q": a["q"][..., :14], "k": a["k"][..., :14].to(torch.int8), "v": a["v"][..., :14].to(torch.int8),
                "k_scale": torch.ones(1, 2, 8), "v_scale": torch.ones(1, 2, 8)}, "multiples of 4"),
    (lambda a: {**a, "k": a["k"].double()}, "match q's dtype"),
    (lambda a: {**a, "k": a["k"].transpose(2, 3)}, "must both be|contiguous"),
])
def test_bad_inputs_are_refused_on_the_host(change, match):
    q, k, v = _inputs(1, 2, 8, 16)
    args = change({"q": q, "k": k, "v": v, "seq_lens": torch.tensor([8], dtype=torch.int32)})
    with pytest.raises(ValueError, match=match):
        decode_attention(**args)


def test_launch_choices_offer_pdl_only_where_the_step_uses_it(monkeypatch):
    from kernels.decode import fused_linear
    from kernels.decode.split_kv_config import PLAIN_LAUNCH, compiled_launches, launch_choices

    # Without PDL: plain, with the newest row written by the qkv product or by the attention.
    assert [(c.pdl, c.new_kv) for c in launch_choices(False)] == [(False, False), (False, True)]
    assert launch_choices(False)[0] == PLAIN_LAUNCH
    with_pdl = launch_choices(True)
    assert with_pdl[0] == PLAIN_LAUNCH and any(c.pdl for c in with_pdl) and any(c.new_kv for c in with_pdl)
    labels = [c.label for c in with_pdl]
    assert labels[0] == "plain" and len(set(labels)) == len(labels) > 2
    assert all(c.label.endswith("+new-kv") == c.new_kv for c in with_pdl)
    # The PDL choices differ only in runtime arguments: one compiled variant stands for them all, with
    # the newest row and without.
    assert {(c.pdl, c.new_kv) for c in compiled_launches(True)} == {(p, n) for p in (False, True) for n in (False, True)}
    assert compiled_launches(False) == launch_choices(False)
    # The products decide whether the step uses PDL: Hopper on, and not after the phase turned it off.
    monkeypatch.setattr(fused_linear, "interpreting", lambda: False)  # as on a GPU
    assert not fused_linear.uses_pdl(fused_linear.Device(108, (8, 0)))
    assert fused_linear.uses_pdl(fused_linear.Device(132, (9, 0)))
    monkeypatch.setattr(fused_linear.TUNING, "pdl", False)
    assert not fused_linear.uses_pdl(fused_linear.Device(132, (9, 0)))


def test_a_pdl_launch_where_there_is_none_is_refused():
    from kernels.decode.attention import SplitBuffers, split_kv_attention
    from kernels.decode.split_kv_config import AttentionLaunch

    q, k, v = _inputs(1, 2, 16, 16)
    with pytest.raises(ValueError, match="needs programmatic dependent launch"):
        split_kv_attention(q, k, v, torch.tensor([16], dtype=torch.int32), torch.empty_like(q),
                           SplitBuffers(1, 2, 16, 2, "cpu"), launch=AttentionLaunch(pdl=True, prefetch_keys=64))


@pytest.mark.parametrize("use_dot", [False, True])
@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("splits", [1, 3])
def test_the_newest_row_handed_over_is_written_into_the_cache_and_attended(use_dot, int8, splits):
    # A fused step may leave the newest key and value (row lens - 1 of each sequence) to the
    # attention: it reads the rows before it from the cache, writes the newest there, and attends to all.
    from kernels.decode.attention import SplitBuffers, split_kv_attention

    B, H, L, D = 2, 2, 40, 32
    q, k, v = _inputs(B, H, L, D, seed=11)
    lens = torch.tensor([29, 13], dtype=torch.int32)
    rows = torch.arange(B), lens.long() - 1
    new_kv = torch.stack([k[rows[0], :, rows[1]], v[rows[0], :, rows[1]]])  # (2, B, H, D)
    kw, want = {}, {}
    if int8:
        (k, kw["k_scale"]), (v, kw["v_scale"]) = quantize(k), quantize(v)
        want = {n: s.clone() for n, s in kw.items()}
    ref = reference_decode_attention(q, k, v, lens, **kw)
    want.update(k=k.clone(), v=v.clone())
    for t in [k, v, *kw.values()]:
        t[rows[0], :, rows[1]] = 0  # the newest row is not in the cache yet
    out = torch.empty_like(q)
    cfg = {"BLOCK_N": 16, "USE_DOT": use_dot, "num_warps": 1, "num_stages": 1}
    split_kv_attention(q, k, v, lens, out, SplitBuffers(B, H, D, splits, "cpu"), config=cfg, new_kv=new_kv, **kw)
    assert torch.equal(k, want["k"]) and torch.equal(v, want["v"])  # written, and nothing else touched
    for name, s in kw.items():
        assert torch.equal(s, want[name])
    assert (out.double() - ref).abs().max() < _TOL[int8]


def test_a_newest_row_of_the_wrong_shape_is_refused():
    from kernels.decode.attention import SplitBuffers, split_kv_attention

    q, k, v = _inputs(1, 2, 16, 16)
    with pytest.raises(ValueError, match=r"new_kv must be a contiguous \(2, 1, 2, 16\)"):
        split_kv_attention(q, k, v, torch.tensor([16], dtype=torch.int32), torch.empty_like(q),
                           SplitBuffers(1, 2, 16, 1, "cpu"), new_kv=torch.zeros(1, 2, 16))
