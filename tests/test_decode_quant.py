"""int8 KV quantization: the round-trip error bound, edge cases, and the fused store kernel."""
import pytest
import torch

from kernels.decode.kv_quant import QMAX, dequantize, error_bound, quantize, quantize_store_


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_round_trip_within_half_a_step(dtype):
    torch.manual_seed(0)
    x = (torch.randn(3, 4, 50, 64) * torch.logspace(-3, 3, 50).view(1, 1, 50, 1)).to(dtype)
    q, s = quantize(x)
    assert q.dtype == torch.int8 and q.shape == x.shape
    assert s.dtype == torch.float32 and s.shape == x.shape[:-1]
    err = (dequantize(q, s, torch.float32) - x.float()).abs()
    bound = error_bound(x).unsqueeze(-1)
    assert (err <= bound * (1 + 1e-5)).all()  # fp32 rounding of scale * q
    # The bound is tight enough to mean something: a step of absmax/127, not absmax.
    assert (bound <= x.float().abs().amax(-1, keepdim=True) / (2 * QMAX) * (1 + 1e-6)).all()


def test_largest_element_is_exact_and_range_symmetric():
    x = torch.tensor([[3.0, -7.0, 0.5, 7.0], [-2.0, 1.0, 0.0, 0.25]])
    q, s = quantize(x)
    assert q.abs().max() == QMAX and q.min() >= -QMAX
    assert dequantize(q, s, torch.float32)[0, 1] == -7.0


def test_zero_vector_has_a_positive_scale_and_round_trips_to_zero():
    q, s = quantize(torch.zeros(2, 8))
    assert (s > 0).all() and (q == 0).all()
    assert (dequantize(q, s, torch.float32) == 0).all()


def test_per_token_scales_isolate_an_outlier():
    x = torch.ones(2, 16)
    x[1] *= 1000.0  # one loud token must not flatten the quiet one
    q, s = quantize(x)
    assert torch.allclose(dequantize(q, s, torch.float32)[0], x[0], atol=1e-6)


def test_dequantize_rejects_mismatched_inputs():
    q, s = quantize(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="int8"):
        dequantize(q.float(), s)
    with pytest.raises(ValueError, match="scale shape"):
        dequantize(q, s[:, :2])
    with pytest.raises(ValueError, match="floating"):
        quantize(torch.ones(2, 3, dtype=torch.int32))


def test_fused_store_matches_quantize_at_the_device_position():
    torch.manual_seed(1)
    B, H, L, D = 2, 3, 6, 40  # head_dim not a power of two: the kernel masks the tail
    _, k, v = (torch.randn(B, 3, H, D) * 4).unbind(1)  # strided views, as the model produces them
    kc = torch.zeros(B, H, L, D, dtype=torch.int8)
    vc = torch.zeros_like(kc)
    ks, vs = torch.zeros(B, H, L), torch.zeros(B, H, L)
    quantize_store_(k, v, kc, vc, ks, vs, torch.tensor([4]))
    (qk, sk), (qv, sv) = quantize(k), quantize(v)
    assert torch.equal(kc[:, :, 4], qk) and torch.equal(vc[:, :, 4], qv)
    assert torch.equal(ks[:, :, 4], sk) and torch.equal(vs[:, :, 4], sv)
    assert kc[:, :, [0, 1, 2, 3, 5]].abs().sum() == 0 and ks[:, :, 5].abs().sum() == 0


def test_fused_store_rounds_half_to_even_like_torch():
    x = torch.tensor([[[0.5, 1.5, 2.5, -0.5, -2.5, 127.0]]])
    kc = torch.zeros(1, 1, 2, 6, dtype=torch.int8)
    ks = torch.zeros(1, 1, 2)
    quantize_store_(x, x, kc, kc.clone(), ks, ks.clone(), torch.tensor([1]))
    assert kc[0, 0, 1].tolist() == quantize(x)[0][0, 0].tolist() == [0, 2, 2, 0, -2, 127]


def test_fused_store_rejects_a_float_cache():
    k = torch.randn(1, 2, 8)
    with pytest.raises(ValueError, match="int8"):
        quantize_store_(k, k, torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4),
                        torch.zeros(1, 2, 4), torch.tensor([0]))
