"""The byte arithmetic of attention against values worked by hand.

Worked example (B=8, H=32, so 256 heads; d=128; fp16, e=2 bytes) as in the byte-arithmetic exercise
of the published study (its part on byte arithmetic); every expected value below is recomputed in the comment.
"""
import pytest

from render import model

MiB, GiB = 2**20, 2**30
HEADS = 8 * 32


def test_per_head_traffic_table():
    # N=1024: S = 2*1024^2 = 2 MiB; endpoints = 8*1024*128 = 1 MiB; naive = 1 + 4*2 = 9 MiB
    assert model.s_matrix_bytes(1024) == 2 * MiB
    assert model.endpoint_bytes(1024, 128) == 1 * MiB
    assert model.naive_traffic_bytes(1024, 128) == 9 * MiB
    assert model.fused_traffic_bytes(1024, 128) == 1 * MiB
    # N=4096: 8*4096*128 + 8*4096^2 = 4,194,304 + 134,217,728 = 138,412,032 B = 132 MiB
    assert model.naive_traffic_bytes(4096, 128) == 138_412_032 == 132 * MiB
    assert model.fused_traffic_bytes(4096, 128) == 4 * MiB
    # N=16384: S = 2*2^28 = 512 MiB; naive = 16 MiB + 4*512 MiB = 2064 MiB
    assert model.s_matrix_bytes(16384) == 512 * MiB
    assert model.naive_traffic_bytes(16384, 128) == 2064 * MiB


def test_all_heads_scale_linearly():
    # 256 heads: 9 MiB * 256 = 2.25 GiB; 132 MiB * 256 = 33 GiB; fused 4 MiB * 256 = 1 GiB
    assert model.naive_traffic_bytes(1024, 128, heads=HEADS) == 2.25 * GiB
    assert model.naive_traffic_bytes(4096, 128, heads=HEADS) == 33 * GiB
    assert model.fused_traffic_bytes(4096, 128, heads=HEADS) == 1 * GiB
    assert model.naive_traffic_bytes(16384, 128, heads=HEADS) == 516 * GiB


@pytest.mark.parametrize("n, ratio", [(1024, 9), (4096, 33), (16384, 129)])
def test_ratio_is_one_plus_n_over_d_and_matches_the_traffic(n, ratio):
    assert model.traffic_ratio(n, 128) == ratio
    for e in (1, 2, 4):  # the element size cancels
        assert model.naive_traffic_bytes(n, 128, e) / model.fused_traffic_bytes(n, 128, e) == ratio


def test_cache_fit_limits():
    # one head alone in 256 MiB: 2N^2 <= 2^28 -> N <= sqrt(2^27) = 11585.2
    assert model.max_n_s_fits(256 * MiB) == 11585
    # 256 heads sharing it: 2N^2 <= 1 MiB -> N <= sqrt(2^19) = 724.08
    assert model.max_n_s_fits(256 * MiB, heads=HEADS) == 724
    # boundary: the returned N fits, N+1 does not
    n = model.max_n_s_fits(256 * MiB, heads=HEADS)
    assert model.s_matrix_bytes(n, heads=HEADS) <= 256 * MiB < model.s_matrix_bytes(n + 1, heads=HEADS)


def test_oom_limit_with_two_live_score_tensors():
    # 2 tensors * 256 heads * 2 bytes * N^2 <= 192 GiB -> N^2 <= 201,326,592 -> N <= 14188.9
    # (the write-up rounds this to 14,189; the largest N that fits is 14,188: 14189^2 = 201,327,721 > the bound)
    assert model.max_n_before_oom(192 * GiB, HEADS) == 14188
    # N=16384: one tensor is 128 GiB, two are 256 GiB > 192 GiB
    assert 2 * model.s_matrix_bytes(16384, heads=HEADS) == 256 * GiB
    assert model.max_n_before_oom(192 * GiB, HEADS, live_s_tensors=1) == 20066  # sqrt(192 GiB / 512) = 20066.0


def test_arithmetic_intensity():
    # naive at N=4096, d=128: 4096*128 / (2*4224) = 524288 / 8448 = 62.06
    assert model.naive_intensity(4096, 128) == pytest.approx(62.06, abs=0.005)
    assert model.naive_intensity_limit(128) == 64
    assert model.naive_intensity(10**7, 128) == pytest.approx(64, rel=1e-4)
    assert model.naive_intensity(10**7, 128) < 64
    # fused: N/2
    assert model.fused_intensity(4096, 128) == 2048
    assert model.fused_intensity(4096, 64) == 2048  # independent of d


def test_ridge_point_and_crossings():
    # round numbers: 1000 TFLOP/s over 5 TB/s = 200 FLOP/byte; fused crosses at N/2 = 200 -> N = 400
    r = model.ridge_point(1000e12, 5e12)
    assert r == 200
    assert model.fused_crosses_ridge_n(r) == 400
    assert model.fused_intensity(400, 128) == r
    # naive with d=128 saturates at 64 < 200: never compute-bound
    assert model.naive_crosses_ridge_n(r, 128) is None
    # with a ridge of 32 and d=128: N*128/(2(N+128)) = 32 -> 128N = 64N + 8192 -> N = 128
    assert model.naive_crosses_ridge_n(32, 128) == pytest.approx(128)
    assert model.naive_intensity(128, 128) == pytest.approx(32)
    with pytest.raises(ValueError):
        model.ridge_point(1e12, 0)


def test_roofline():
    assert model.attainable_flops(10, 1000e12, 5e12) == 50e12  # left of the ridge: 10 * 5e12
    assert model.attainable_flops(500, 1000e12, 5e12) == 1000e12


@pytest.mark.parametrize("t, frac", [(1, 1.0), (2, 0.75), (4, 0.625), (8, 9 / 16), (128, 129 / 256)])
def test_causal_fraction(t, frac):
    assert model.causal_fraction(t) == frac


def test_causal_block_count_matches_the_closed_form_and_handles_unequal_blocks():
    # BLOCK_M = BLOCK_N = 64, N = 512: T = 8, visited 1+2+...+8 = 36 of 64 = 9/16
    assert model.causal_blocks_visited(512, 64, 64) == (36, 64)
    # BLOCK_M = 128, BLOCK_N = 64, N = 512: query blocks visit 2, 4, 6, 8 of 8 key blocks = 20/32
    assert model.causal_blocks_visited(512, 128, 64) == (20, 32)
    assert 20 / 32 == model.causal_fraction(512 // 128)
    # ragged N=100, blocks of 64: block 0 sees key block 0, block 1 sees both -> 3 of 4
    assert model.causal_blocks_visited(100, 64, 64) == (3, 4)
    assert model.predicted_causal_speedup(512, 64, 64) == pytest.approx(64 / 36)
    # one diagonal block per query block with equal blocks (8 of the 36); two with BLOCK_M = 2 * BLOCK_N
    assert model.causal_diagonal_visits(512, 64, 64) == 8
    assert model.causal_diagonal_visits(512, 128, 64) == 8
    assert model.causal_diagonal_visits(100, 64, 64) == 2
    with pytest.raises(ValueError):
        model.causal_fraction(0)


def test_flops_convention():
    assert model.flops(4096, 128) == 4 * 4096**2 * 128
    assert model.flops(4096, 128, heads=16, causal=True) == 2 * 16 * 4096**2 * 128


def test_the_naive_code_as_written_moves_two_and_a_half_times_the_textbook_s_traffic():
    # fp16: product writes S (2 B), scaling reads and writes it (4), softmax reads it (2) and writes P in fp32 (4),
    # the cast reads that (4) and writes P (2), P @ V reads P (2): 20 bytes an element against the model's 8.
    n, d = 4096, 64
    s_bytes = model.naive_as_written_bytes(n, d, 2) - model.endpoint_bytes(n, d, 2)
    assert s_bytes == 20 * n * n
    assert model.naive_as_written_bytes(n, d, 2, heads=3) == 3 * model.naive_as_written_bytes(n, d, 2)
    assert 2.4 < model.naive_as_written_bytes(n, d, 2) / model.naive_traffic_bytes(n, d, 2) < 2.5


def test_the_traffic_finding_sets_the_time_against_the_code_as_written():
    from committed import latest_run
    from render.pages.byte_arithmetic import ByteArithmeticPage

    run = latest_run("bench.json")
    page = ByteArithmeticPage(run, [run])
    text = page.traffic_finding(page.shapes()[0])
    assert "scales the scores in a kernel of its own" in text
    # The factor over the model's bytes grows with N, so each time is set against its own length's bytes, and the
    # factor is given at both ends rather than at one length a range of times could be misread against.
    ns = sorted(page.bench.latency(page.shapes()[0], "float16", False, "naive").index)
    assert len(ns) > 1 and f"the model's bytes at N={ns[0]} and " in text and f"at N={ns[-1]}." in text
    assert "Against the bytes it moves at each length, it took" in text and "against those bytes" not in text
    assert "as a memory-bound kernel cannot" not in text  # not a lower bound where S stays in L2
