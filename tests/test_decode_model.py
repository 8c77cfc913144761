"""Our GPT-2 decoder against transformers on a tiny random config, and the host-side limit guard."""
import os

os.environ["TRITON_INTERPRET"] = "1"  # before kernels/ is imported: @triton.jit reads it then

import pytest
import torch

from kernels.gpt2 import (
    CACHES, GPT2, PRESETS, ModelArgs, cache_bytes_per_token, check_limits, generate, generate_hf, random_hf_model,
    teacher_forced_logits,
)

TINY = ModelArgs(n_layer=2, n_head=4, n_embd=64, vocab_size=97, n_positions=32)


@pytest.fixture(scope="module")
def tiny():
    hf = random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32)
    return hf, GPT2.from_hf(hf)


def _tokens(shape, seed=1):
    return torch.randint(0, TINY.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


def test_weights_are_shared_not_copied(tiny):
    hf, ours = tiny
    assert ours.blocks[0].attn_w.data_ptr() == hf.transformer.h[0].attn.c_attn.weight.data_ptr()
    assert ours.parameter_count() == sum(p.numel() for p in hf.parameters())
    # tied LM head counted once; the position table is not read in full by a step
    n = ours.parameter_count() - TINY.n_positions * TINY.n_embd
    assert ours.weight_bytes_per_step() == n * 4


def test_logits_match_transformers_through_prefill_and_cache(tiny):
    hf, ours = tiny
    seq = _tokens((2, 10))
    with torch.inference_mode():
        ref = hf(input_ids=seq).logits[:, 5:9]
    ours_logits = teacher_forced_logits(ours, seq, prompt_len=6)  # prefill 6, then 3 cached steps
    assert ours_logits.shape == ref.shape
    assert (ours_logits - ref).abs().max() < 1e-4


def test_int8_caches_stay_close_and_agree_with_each_other(tiny):
    hf, ours = tiny
    seq = _tokens((2, 8), seed=2)
    base = teacher_forced_logits(ours, seq, 6)
    kernel = teacher_forced_logits(ours, seq, 6, "int8")
    dequant = teacher_forced_logits(ours, seq, 6, "int8-dequant")
    assert 0 < (kernel - base).abs().max() < 1e-2  # quantized (not identical) yet close
    assert (kernel - dequant).abs().max() < 1e-5  # one cache, read two ways


def test_greedy_loops_agree_with_transformers_loop(tiny):
    hf, ours = tiny
    prompt = _tokens((2, 5), seed=3)
    res = generate(ours, prompt, 4, warmup_steps=1)
    ref = generate_hf(hf, prompt, 4, warmup_steps=1)
    assert res.tokens.shape == (2, 4) and len(res.step_ms) == 3
    assert torch.equal(res.tokens, ref.tokens)
    assert (res.last_logits - ref.last_logits).abs().max() < 1e-4
    assert res.cache_bytes == (5 + 4 - 1) * cache_bytes_per_token(TINY, 2, int8=False, dtype_bytes=4)


def test_cache_sizes():
    gpt2 = PRESETS["gpt2"]
    # 12 layers x (k, v) x 12 heads x 64 dims x 2 bytes = 36,864 bytes per token per sequence
    assert cache_bytes_per_token(gpt2, 1, int8=False) == 36_864
    # int8: 64 one-byte values plus a 4-byte scale per vector
    assert cache_bytes_per_token(gpt2, 4, int8=True) == 4 * 2 * 12 * 12 * 68
    c = CACHES["int8"](TINY, 2, 7, "cpu")
    assert c.nbytes() == 7 * cache_bytes_per_token(TINY, 2, int8=True)


def test_position_limit_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match=r"prompt \(1000\) \+ new tokens \(65\) = 1065 exceeds the model's 1024 "
                                         r"positions.*at most 24"):
        check_limits(PRESETS["gpt2"], 1000, 65)
    check_limits(PRESETS["gpt2"], 1000, 24)  # exactly at the limit is fine
    for bad in [(0, 5, 1), (5, 0, 1), (5, 5, 0)]:
        with pytest.raises(ValueError):
            check_limits(PRESETS["gpt2"], *bad)


def test_limits_are_checked_before_any_device_work():
    # A model on the meta device cannot compute anything: reaching the device would raise another error.
    hf = random_hf_model(TINY, device="meta", dtype=torch.float32)
    ours = GPT2.from_hf(hf)
    prompt = torch.zeros((1, 30), dtype=torch.int64)
    for call in (lambda: generate(ours, prompt, 5), lambda: generate_hf(hf, prompt, 5),
                 lambda: teacher_forced_logits(ours, torch.zeros((1, 40), dtype=torch.int64), 30)):
        with pytest.raises(ValueError, match="exceeds the model's 32 positions"):
            call()


def test_out_of_range_token_ids_are_refused(tiny):
    _, ours = tiny
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 97\)"):
        generate(ours, torch.full((1, 4), 97, dtype=torch.int64), 2)


def test_unsupported_requests_are_refused(tiny):
    _, ours = tiny
    with pytest.raises(ValueError, match="CUDA graph"):
        generate(ours, _tokens((1, 4)), 3, cuda_graph=True)
    with pytest.raises(ValueError, match="unknown cache"):
        generate(ours, _tokens((1, 4)), 3, cache_kind="fp8")
    cfg = TINY.to_hf_config()
    cfg.scale_attn_by_inverse_layer_idx = True
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        ModelArgs.from_hf_config(cfg)
