"""Our GPT-2 decoder and its loops against transformers on a tiny random config, and the host-side guards."""
import pytest
import torch

from kernels.decode.session import HfSession, OurSession
from kernels.decode.gpt2 import (
    CACHES, GPT2, PRESETS, ModelArgs, cache_bytes_per_token, check_limits, decode_dtype, random_hf_model,
)
from kernels.decode.gpt2_fused import FusedStep, OpaqueCache

TINY = ModelArgs(n_layer=2, n_head=4, n_embd=64, vocab_size=97, n_positions=32)


@pytest.fixture(scope="module")
def tiny():
    hf = random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32)
    return hf, GPT2.from_hf(hf)


def _tokens(shape, seed=1):
    return torch.randint(0, TINY.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


def _forced_top(session, seq, prompt_len, steps):
    session.start(seq, prompt_len=prompt_len)
    for _ in range(steps):
        session.step()
    return session.top2(prompt_len - 1, steps + 1)


def test_weights_are_shared_not_copied(tiny):
    hf, ours = tiny
    assert ours.blocks[0].attn_w.data_ptr() == hf.transformer.h[0].attn.c_attn.weight.data_ptr()
    assert ours.parameter_count() == sum(p.numel() for p in hf.parameters())
    # tied LM head counted once; the position table is not read in full by a step
    n = ours.parameter_count() - TINY.n_positions * TINY.n_embd
    assert ours.weight_bytes_per_step() == n * 4


@pytest.mark.parametrize("step_impl", ["torch", "fused", "persistent"])
def test_teacher_forced_steps_match_transformers_full_forward(tiny, step_impl):
    hf, ours = tiny
    seq = _tokens((2, 10))
    with torch.inference_mode():
        ref = hf(input_ids=seq).logits[:, 5:9]  # predictions at positions 5..8
    s = OurSession(ours, 2, 9, "bf16", step_impl, teacher_forced=True, record_top2=True)
    v, i = _forced_top(s, seq, 6, 3)  # prefill 6 tokens, then 3 cached steps
    assert torch.equal(i[..., 0], ref.argmax(-1))
    assert (v - ref.topk(2, -1).values).abs().max() < 1e-4


def test_fused_and_torch_steps_give_the_same_logits_on_an_int8_cache(tiny):
    _, ours = tiny
    seq = _tokens((2, 8), seed=2)
    tops = {impl: _forced_top(OurSession(ours, 2, 7, "int8", impl, teacher_forced=True, record_top2=True), seq, 5, 2)
            for impl in ("torch", "fused")}
    assert (tops["torch"][0] - tops["fused"][0]).abs().max() < 1e-4
    assert torch.equal(tops["torch"][1], tops["fused"][1])


def test_int8_caches_stay_close_and_agree_with_each_other(tiny):
    _, ours = tiny
    seq = _tokens((2, 8), seed=2)
    base, kernel, dequant = (_forced_top(OurSession(ours, 2, 7, c, teacher_forced=True, record_top2=True), seq, 5, 2)[0]
                             for c in ("bf16", "int8", "int8-dequant"))
    assert 0 < (kernel - base).abs().max() < 1e-2  # quantized (not identical) yet close
    assert (kernel - dequant).abs().max() < 1e-5  # one cache, read two ways


def test_greedy_loops_agree_with_transformers_loop(tiny):
    hf, ours = tiny
    prompt = _tokens((2, 5), seed=3)
    runs = {}
    for name, s in (("torch", OurSession(ours, 2, 8, "bf16", "torch")), ("fused", OurSession(ours, 2, 8, "bf16", "fused")),
                    ("hf", HfSession(hf, 2, 8))):
        s.prepare(prompt, warmup_steps=1)
        for _ in range(3):
            s.step()
        runs[name] = s.generated(5, 4)
    assert runs["torch"].shape == (2, 4)
    assert torch.equal(runs["torch"], runs["hf"]) and torch.equal(runs["fused"], runs["hf"])


def test_a_session_switches_to_teacher_forcing_and_back(tiny):
    _, ours = tiny
    s = OurSession(ours, 2, 8, "bf16", "fused")
    prompt = _tokens((2, 4), seed=4)
    s.prepare(prompt, 1)
    for _ in range(3):
        s.step()
    greedy = s.generated(4, 4)
    s.set_mode(True, True)
    v, i = _forced_top(s, torch.cat([prompt, greedy], 1), 4, 3)
    assert torch.equal(i[..., 0], greedy)  # fed its own output, it predicts it again


def test_inductor_step_traces_as_one_graph(tiny):
    # The custom ops keep attention and the cache write opaque: the whole step traces with no break.
    _, ours = tiny
    cache = CACHES["int8"](TINY, 2, 8, "cpu", torch.float32)
    hist, pos, lens = _tokens((2, 9)), torch.tensor([3]), torch.tensor([4], dtype=torch.int32)
    eager = ours.step(hist, pos, lens, OpaqueCache(cache))
    traced = torch.compile(lambda h, p, n: ours.step(h, p, n, OpaqueCache(cache)), backend="aot_eager",
                           fullgraph=True, dynamic=False)(hist, pos, lens)
    assert torch.equal(eager, traced)


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
    for make in (lambda: OurSession(ours, 1, 40), lambda: HfSession(hf, 1, 40)):
        with pytest.raises(ValueError, match="exceeds the model's 32 positions"):
            make()


def test_steps_past_the_capacity_are_refused(tiny):
    _, ours = tiny
    s = OurSession(ours, 1, 5)
    s.start(_tokens((1, 4)))
    s.step()
    with pytest.raises(ValueError, match="no room for another step"):
        s.step()


def test_out_of_range_token_ids_are_refused(tiny):
    _, ours = tiny
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 97\)"):
        OurSession(ours, 1, 6).start(torch.full((1, 4), 97, dtype=torch.int64))


def test_unsupported_requests_are_refused(tiny):
    _, ours = tiny
    with pytest.raises(ValueError, match="CUDA graph"):
        OurSession(ours, 1, 6, cuda_graph=True)
    with pytest.raises(ValueError, match="unknown cache"):
        OurSession(ours, 1, 6, cache_kind="fp8")
    with pytest.raises(ValueError, match="unknown step"):
        OurSession(ours, 1, 6, step_impl="magic")
    with pytest.raises(ValueError, match="eager torch step only"):
        OurSession(ours, 1, 6, cache_kind="int8-dequant", step_impl="fused")
    with pytest.raises(ValueError, match="at most 128 sequences"):
        FusedStep(ours, CACHES["bf16"](TINY, 129, 4, "cpu", torch.float32), 129)
    cfg = TINY.to_hf_config()
    cfg.scale_attn_by_inverse_layer_idx = True
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        ModelArgs.from_hf_config(cfg)


def test_decode_dtype_on_the_cpu_is_fp32():
    assert decode_dtype("cpu") == torch.float32


def test_the_read_plan_lists_every_kernel_of_a_fused_step_and_the_floor_bytes(tiny, monkeypatch):
    # kernels/decode/read_floor.py times one plain read per kernel of the step: the plan must have exactly
    # the launches the step makes, and move exactly the bytes the bandwidth floor counts.
    import triton.runtime.interpreter as interp

    _, ours = tiny
    s = OurSession(ours, 2, 8, "bf16", "fused")
    s.prepare(_tokens((2, 4), seed=5), 1)
    launches = []
    run = interp.InterpretedFunction.run
    monkeypatch.setattr(interp.InterpretedFunction, "run",
                        lambda self, *a, **k: (launches.append(self.fn.__name__), run(self, *a, **k))[1])
    s.step()
    per_layer = cache_bytes_per_token(TINY, 2, int8=False, dtype_bytes=4) * 5 / TINY.n_layer
    plan = s.step_fn.kernel_bytes(per_layer)
    assert len(plan) == len(launches) == len(s.step_fn.kernel_pdl()) == 5 * TINY.n_layer + 3
    assert not any(s.step_fn.kernel_pdl())  # the interpreter has no programmatic dependent launch
    assert sum(plan) == ours.weight_bytes_per_step() + round(per_layer) * TINY.n_layer
    attention = [b for b, name in zip(plan, launches) if name == "_split_kv_kernel"]
    assert attention == [round(per_layer)] * TINY.n_layer  # the cache bytes sit on the attention launches
    # The decode profile reads each kernel's role off this launch order, and prices each role with these bytes.
    from collect.decode.arithmetic import _role_bytes
    from collect.decode_profile import fused_roles
    assert fused_roles(launches, TINY.n_layer) is not None
    by_role = _role_bytes(s.step_fn, per_layer * TINY.n_layer, TINY.n_layer)
    assert set(by_role) == {"qkv", "attention", "proj", "fc", "out", "head"} and sum(by_role.values()) == sum(plan)
    assert by_role["attention"] == round(per_layer) * TINY.n_layer


def test_a_rewound_session_decodes_the_same_tokens_again(tiny):
    # Judging the attention choices replays steps from one position several times
    # (OurSession._judge_attention): rewinding must restore what the next steps read.
    _, ours = tiny
    for cache in ("bf16", "int8"):
        s = OurSession(ours, 2, 10, cache, "fused")
        s.prepare(_tokens((2, 4), seed=6), 1)
        for _ in range(3):
            s.step()
        first = s.generated(4, 4)
        s.rewind(4)
        for _ in range(3):
            s.step()
        assert s.host_pos == 7 and int(s.pos) == 7 and int(s.lens) == 8
        assert torch.equal(s.generated(4, 4), first)


def test_a_fused_step_runs_the_attention_config_it_is_given(tiny):
    # A session judges each candidate config in the captured step by pinning it on the step.
    _, ours = tiny
    seq = _tokens((2, 8), seed=3)
    s = OurSession(ours, 2, 7, "bf16", "fused", teacher_forced=True, record_top2=True)
    ref_v, ref_i = _forced_top(s, seq, 5, 2)
    candidates = s.step_fn.attention_candidates()
    assert candidates and all({"BLOCK_N", "USE_DOT", "num_warps", "num_stages"} <= set(c) for c in candidates)
    calls = []
    import kernels.decode.gpt2_fused as gf
    real = gf.split_kv_attention

    def spy(*a, **k):
        calls.append(k.get("config"))
        return real(*a, **k)

    pinned = next(c for c in candidates if not c["USE_DOT"])
    s.step_fn.attention_config = pinned
    gf.split_kv_attention = spy
    try:
        v, i = _forced_top(s, seq, 5, 2)
    finally:
        gf.split_kv_attention = real
    assert calls and all(c == pinned for c in calls)
    assert torch.equal(i, ref_i) and (v - ref_v).abs().max() < 1e-4


def test_a_step_that_hands_the_newest_row_to_the_attention_decodes_the_same(tiny):
    # The launch choice AttentionLaunch.new_kv moves the cache write (and an int8 cache's quantizing)
    # from the qkv product into the attention: the same numbers up to rounding, the same tokens.
    from kernels.decode.split_kv_config import AttentionLaunch

    _, ours = tiny
    seq = _tokens((2, 8), seed=4)
    for cache in ("bf16", "int8"):
        s = OurSession(ours, 2, 7, cache, "fused", teacher_forced=True, record_top2=True)
        ref_v, ref_i = _forced_top(s, seq, 5, 2)
        s.step_fn.attention_launch = AttentionLaunch(new_kv=True)
        v, i = _forced_top(s, seq, 5, 2)
        assert torch.equal(i, ref_i) and (v - ref_v).abs().max() < 1e-4


def test_a_transformers_that_imports_hub_kernels_gets_a_clear_error(monkeypatch):
    """transformers 5.25 imports Hugging Face's `kernels` by that name, which this project's kernels/ shadows:
    the error says so and how to fix it, instead of 'cannot import name CUDAProperties'."""
    import builtins

    from kernels.decode import gpt2

    real_import = builtins.__import__

    def shadowed(name, *args, **kwargs):
        if name == "transformers":
            raise ImportError("cannot import name 'CUDAProperties' from 'kernels' (/repo/kernels/__init__.py)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", shadowed)
    with pytest.raises(ImportError, match=r"kernels/ package shadows\. Install transformers below 5\.25"):
        gpt2.transformers_module()
