"""The fused attention kernel and its PyTorch counterparts, on the CPU through Triton's
interpreter. Shapes are tiny: this checks the maths and the input checks, not speed."""
import dataclasses
from types import SimpleNamespace

import pytest
import torch

from attention_inputs import LAYOUTS, odd_layout, qkv

from kernels import attention
from kernels.attention import portable
from kernels.attention import (
    IMPLEMENTATIONS,
    SDPA_BACKENDS,
    candidate_configs,
    check_dtype_supported,
    flash_attention,
    get_impl,
    kernel_config_of_last_call,
    naive_attention,
    reference_attention,
    sdpa_attention,
)

# The interpreter's own numpy code warns about a deprecated array-to-int conversion.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

# Largest |error| against the float64 reference. Outputs are O(1): the half-precision ones are
# a few units of the last place of the output dtype (P is rounded to it before P @ V too).
ATOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def max_err(out, q, k, v, causal, sm_scale=None):
    assert out.shape == q.shape
    return (out.double() - reference_attention(q, k, v, causal, sm_scale)).abs().max().item()


# --- the Triton kernel against the float64 reference -----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len", [1, 17, 33, 70])
@pytest.mark.parametrize("head_dim", [16, 32])
def test_flash_matches_reference(dtype, causal, seq_len, head_dim):
    q, k, v = qkv((1, 2, seq_len, head_dim), dtype)
    out = flash_attention(q, k, v, causal)
    assert out.dtype == dtype
    assert max_err(out, q, k, v, causal) <= ATOL[dtype]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_head_dim_64_batch_2(causal):
    q, k, v = qkv((2, 1, 40, 64), torch.float16, seed=1)
    assert max_err(flash_attention(q, k, v, causal), q, k, v, causal) <= ATOL[torch.float16]


@pytest.mark.parametrize("config", [
    dict(BLOCK_M=32, BLOCK_N=16),                          # two masked sub-tiles on the diagonal
    dict(BLOCK_M=64, BLOCK_N=16, num_warps=8, num_stages=3),
    dict(BLOCK_M=32, BLOCK_N=32, maxnreg=128),             # the register-cap experiment's knob
], ids=["32x16", "64x16", "32x32-maxnreg"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_fixed_config(config, causal):
    q, k, v = qkv((1, 2, 70, 16), torch.bfloat16, seed=2)
    out = flash_attention(q, k, v, causal, config=config)
    assert max_err(out, q, k, v, causal) <= ATOL[torch.bfloat16]
    used = kernel_config_of_last_call()
    assert used["autotuned"] is False
    assert {k: used[k] for k in config} == config


def test_flash_custom_scale_and_strided_inputs():
    # q, k, v as views into one packed (batch, seq, 3, heads, dim) projection: not contiguous.
    packed = torch.randn(2, 33, 3, 2, 32)
    q, k, v = packed.permute(2, 0, 3, 1, 4).unbind(0)
    assert not q.is_contiguous()
    out = flash_attention(q, k, v, True, sm_scale=0.3)
    assert max_err(out, q, k, v, True, sm_scale=0.3) <= ATOL[torch.float32]


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_odd_layouts_and_ragged_lengths(kind, causal):
    # 37 is not a multiple of any tile; 3 heads and 2 batches so a stride mix-up shows.
    q, k, v = odd_layout(kind, 2, 3, 37, 32, torch.float16, seed=11)
    assert not q.is_contiguous() or q.data_ptr() % 16
    out = flash_attention(q, k, v, causal)
    assert out.shape == q.shape and out.is_contiguous()
    assert max_err(out, q, k, v, causal) <= ATOL[torch.float16]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_causal_first_row_copies_v0(dtype):
    # Row 0 sees only key 0: softmax over one score is exactly 1, so o[0] is v[0] in the output
    # dtype, up to one rounding. This is the constant error floor of causal attention.
    q, k, v = qkv((1, 2, 33, 16), dtype, seed=3)
    out = flash_attention(q, k, v, causal=True)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], rtol=eps, atol=0)


def test_kernel_config_of_last_call_reports_interpreter_tile():
    q, k, v = qkv((1, 1, 17, 16), torch.float32)
    flash_attention(q, k, v)
    used = kernel_config_of_last_call()
    assert set(used) == {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "maxnreg", "autotuned", "path", "path_rule"}
    assert used["path"] == "portable" and "interpreter" in used["path_rule"]
    assert (used["BLOCK_M"], used["BLOCK_N"]) == (16, 16)
    flash_attention(q, k, v, path="portable")
    assert kernel_config_of_last_call()["path_rule"] == "asked for"


def test_autotuner_wiring_with_fake_timer():
    # The GPU path (prune -> time each config -> run the best) with a stand-in timer.
    tuner = portable._autotuned_kernel((9, 0), 227 * 1024)
    timed = []

    def fake_do_bench(fn, quantiles=None, **_):
        fn()
        timed.append(1)
        return [10.0 - len(timed)] * 3  # later configs "win"

    tuner.__dict__["do_bench"] = fake_do_bench
    q, k, v = qkv((1, 1, 20, 16), torch.float16, seed=4)
    out = torch.empty_like(q)
    portable._precompile_candidates(tuner, q, k, v, out, True, 0.25)  # no GPU: quietly does nothing
    portable._launch(tuner, q, k, v, out, True, 0.25)
    assert len(timed) == len(candidate_configs((9, 0), 16, torch.float16, 227 * 1024))
    assert portable._tuning_key(q, True) in tuner.cache  # how the wrapper knows tuning is done
    assert max_err(out, q, k, v, True, 0.25) <= ATOL[torch.float16]
    assert tuner.best_config.kwargs["BLOCK_M"] % tuner.best_config.kwargs["BLOCK_N"] == 0


@pytest.mark.parametrize("capability", [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0)])
@pytest.mark.parametrize("head_dim", [16, 32, 64, 128, 256])
def test_candidate_configs_fit(capability, head_dim):
    configs = candidate_configs(capability, head_dim, torch.float16)
    assert configs
    for c in configs:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        assert bm % bn == 0 and bn >= 16
        if capability == (7, 5):  # a T4 has 64 KB of shared memory per block
            assert portable._smem_bytes(bm, bn, c.num_stages, head_dim, 2) <= 64 * 1024


# --- the PyTorch implementations against the same reference ----------------------------------


@pytest.mark.parametrize("name", ["naive", "sdpa", "sdpa-math"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_torch_impls_match_reference(name, dtype, causal):
    q, k, v = qkv((2, 2, 33, 32), dtype, seed=5)
    out = get_impl(name)(q, k, v, causal)
    assert out.dtype == dtype
    assert max_err(out, q, k, v, causal) <= ATOL[dtype]


def test_naive_and_sdpa_honour_sm_scale():
    q, k, v = qkv((1, 2, 17, 16), torch.float32, seed=6)
    for out in (naive_attention(q, k, v, True, 0.7), sdpa_attention(q, k, v, True, 0.7, backend="math")):
        assert max_err(out, q, k, v, True, 0.7) <= ATOL[torch.float32]


def test_reference_is_float64_and_causal_row0_is_v0():
    q, k, v = qkv((1, 1, 5, 16), torch.float16)
    ref = reference_attention(q, k, v, causal=True)
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref[..., 0, :], v[..., 0, :].double())


def test_registry_names():
    assert set(IMPLEMENTATIONS) == {"naive", "triton", "triton-portable", "sdpa", "sdpa-flash", "sdpa-cudnn",
                                    "sdpa-efficient", "sdpa-math", "fa4"}
    assert SDPA_BACKENDS == ("flash", "cudnn", "efficient", "math")
    assert get_impl("triton") is flash_attention
    with pytest.raises(ValueError, match="sdpa-cudnn"):
        get_impl("flashy")


def test_sdpa_unknown_backend():
    q, k, v = qkv((1, 1, 4, 16), torch.float32)
    with pytest.raises(ValueError, match="flash, cudnn, efficient, math"):
        sdpa_attention(q, k, v, backend="fast")


# --- bad input is refused on the host, with a message that says what was expected ------------


def _t(*shape, dtype=torch.float16, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


@pytest.mark.parametrize("args, match", [
    ((_t(1, 2, 8, 16), _t(1, 2, 9, 16), _t(1, 2, 8, 16)), "same shape"),
    ((_t(1, 2, 8, 16), _t(1, 2, 8, 16, dtype=torch.bfloat16), _t(1, 2, 8, 16)), "same dtype"),
    ((_t(1, 2, 8, 16), _t(1, 2, 8, 16, device="meta"), _t(1, 2, 8, 16)), "same device"),
    ((_t(2, 8, 16),) * 3, "4-D"),
    ((_t(1, 2, 8, 44),) * 3, "head_dim must be a multiple of 8"),
    ((_t(1, 2, 8, 512),) * 3, "head_dim must be a multiple of 8"),
    ((_t(1, 2, 8, 16, dtype=torch.float64),) * 3, "dtype must be one of"),
    ((_t(1, 2, 8, 16, dtype=torch.int32),) * 3, "dtype must be one of"),
    ((_t(1, 2, 0, 16),) * 3, "seq_len must be >= 1"),
    ((_t(0, 2, 8, 16),) * 3, "batch and heads"),
    (("q", "k", "v"), "torch.Tensor"),
], ids=["shape", "dtype", "device", "3d", "d44", "d512", "fp64", "int32", "seq0", "batch0", "not-tensor"])
def test_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        flash_attention(*args)


def test_cpu_tensor_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="set TRITON_INTERPRET=1 to run on the CPU"):
        flash_attention(*qkv((1, 1, 8, 16), torch.float16))


def test_bf16_refused_before_ampere():
    with pytest.raises(ValueError, match="compute capability >= 8.0"):
        check_dtype_supported(torch.bfloat16, (7, 5))
    check_dtype_supported(torch.bfloat16, (8, 0))
    check_dtype_supported(torch.float16, (7, 5))


@pytest.mark.parametrize("sm_scale", [0.0, -0.5, float("nan"), float("inf")])
def test_bad_sm_scale(sm_scale):
    with pytest.raises(ValueError, match="sm_scale must be finite and > 0"):
        flash_attention(*qkv((1, 1, 8, 16), torch.float16), sm_scale=sm_scale)


@pytest.mark.parametrize("path, match", [("hopper", "cannot run here.*TRITON_INTERPRET.*path='portable'"),
                                         ("fast", "path must be one of")])
def test_bad_path(path, match):
    with pytest.raises(ValueError, match=match):
        flash_attention(*qkv((1, 1, 8, 16), torch.float16), path=path)


def _fake_cuda(dtype, shape=(1, 1, 8, 16)):
    from types import SimpleNamespace

    # choose_path reads only these attributes
    return SimpleNamespace(dtype=dtype, is_cuda=True, device=torch.device("cuda", 0), shape=shape)


@pytest.fixture
def fake_hopper(monkeypatch):
    """A GPU where the Hopper path is available (or not: set `.ok`), with the interpreter off."""
    from kernels.attention import dispatch

    state = SimpleNamespace(ok=True)
    real = dispatch._PATHS["hopper"]
    monkeypatch.setitem(dispatch._PATHS, "hopper", dataclasses.replace(
        real, available=lambda device: (state.ok, "" if state.ok else "compute capability 8.0")))
    monkeypatch.setattr(dispatch, "interpreting", lambda: False)
    monkeypatch.setattr(dispatch, "unmeasured_reason", lambda: None)  # as on the Triton the rules were measured on
    dispatch.portable_only.cache_clear()
    yield state
    dispatch.portable_only.cache_clear()


def test_the_path_is_chosen_at_run_time(fake_hopper):
    from kernels.attention import dispatch

    assert dispatch.resolve_path(_fake_cuda(torch.float16)) == "hopper"
    assert dispatch.resolve_path(_fake_cuda(torch.bfloat16)) == "hopper"
    assert dispatch.resolve_path(_fake_cuda(torch.float32)) == "portable"  # the Hopper path is half precision
    assert dispatch.resolve_path(_fake_cuda(torch.float16), "portable") == "portable"  # an explicit path is kept
    fake_hopper.ok = False
    assert dispatch.choose_path(_fake_cuda(torch.float16)) == ("portable", "no faster path is available for this "
                                                                           "dtype and device")


def test_the_interpreter_takes_the_portable_path():
    q = qkv((1, 1, 8, 16), torch.float16)[0]
    assert attention.resolve_path(q) == "portable"  # a CPU tensor under the interpreter
    assert attention.hopper_path_runs() is False  # what the collect phases ask: no GPU here
    assert attention.resolve_path(q, "hopper") == "hopper"  # an explicit path is kept


def test_portable_only_env_is_read_once_and_wins(fake_hopper, monkeypatch):
    from kernels.attention import dispatch

    monkeypatch.setenv("ATTN_PORTABLE_ONLY", "1")
    assert dispatch.choose_path(_fake_cuda(torch.float16)) == ("portable", "ATTN_PORTABLE_ONLY=1")
    monkeypatch.setenv("ATTN_PORTABLE_ONLY", "0")  # read once per process: the first answer stays
    assert dispatch.resolve_path(_fake_cuda(torch.float16)) == "portable"
    dispatch.portable_only.cache_clear()
    assert dispatch.resolve_path(_fake_cuda(torch.float16)) == "hopper"


def test_measured_shape_rules_pick_the_path_and_say_why(fake_hopper, monkeypatch):
    from kernels.attention import dispatch

    gluon = SimpleNamespace(ok=True)
    monkeypatch.setitem(dispatch._PATHS, "gluon", dataclasses.replace(
        dispatch._PATHS["gluon"], available=lambda device: (gluon.ok, "" if gluon.ok else "not sm90")))
    choose = lambda shape, causal=False: dispatch.choose_path(_fake_cuda(torch.float16, shape), causal)  # noqa: E731
    step = lambda shape, causal=False: dispatch._choose(_fake_cuda(torch.float16, shape), causal)[2]  # noqa: E731
    name, why = choose((2, 8, 4096, 64))
    assert name == "gluon" and why.startswith("measured rule") and "d=64 non-causal" in why
    assert step((2, 8, 4096, 64)) == step((2, 8, 2048, 64)) == {"version": "g8"}  # the study shape too
    # below N=2048 non-causal, the 64-row tile; causal, g38 (g10 with row sums per lane and the lean mask) up to
    # short walks
    assert choose((2, 8, 1024, 64))[0] == "gluon" and step((2, 8, 1024, 64)) == step((2, 8, 2047, 64)) == \
        {"version": "g10"}
    assert step((2, 8, 1024, 64), True) == step((2, 8, 1536, 64), True) == step((2, 8, 128, 64), True) == \
        {"version": "g38"}
    assert choose((2, 8, 2048, 64), True)[0] == "gluon" and step((2, 8, 2048, 64), True) == {"version": "g38"}
    # long causal rows over enough heads, and many non-causal rows: three consumer warpgroups (g36 causal, with the
    # lean mask; g33 non-causal)
    assert step((2, 8, 8192, 64), True) == step((2, 8, 16384, 64), True) == {"version": "g36"}
    assert step((2, 8, 16384, 64)) == step((8, 16, 2048, 64)) == {"version": "g33"}
    assert step((1, 8, 8192, 64), True) == {"version": "g38"} and step((1, 8, 16384, 64)) == {"version": "g8"}
    assert choose((4, 32, 4096, 128))[0] == "gluon" and step((4, 32, 4096, 128)) == {"version": "g32"}
    assert step((4, 32, 512, 128)) == step((4, 32, 1024, 128)) == {"version": "g37"}  # short walks: the lean mask
    assert step((4, 32, 4096, 80)) == {"version": "g30"} and step((4, 32, 4096, 96)) == {"version": "g41"}
    assert step((4, 32, 1024, 96)) == {"version": "g27"}  # the counted release was timed from N=2048 alone
    assert step((4, 32, 4096, 128), True) == step((4, 32, 16384, 128), True) == {"version": "g42"}
    assert step((4, 32, 4096, 80), True) == step((4, 32, 4096, 96), True) == {"version": "g37"}  # the split head
    assert choose((4, 32, 4096, 32))[0] == "hopper"           # no rule for this head_dim
    # a rule's path that cannot run here leaves the choice to the available path
    gluon.ok = False
    assert choose((4, 32, 4096, 128))[0] == "hopper" and step((4, 32, 4096, 128)) is None
    # without the Hopper path (another GPU), no rule applies: they were measured against it
    fake_hopper.ok = False
    assert choose((2, 8, 16384, 64), True)[0] == "portable"
    assert choose((2, 8, 4096, 64))[0] == "portable"
    assert choose((2, 8, 2048, 64), True) == ("portable", "no faster path is available for this dtype and device")


def test_a_path_registers_itself_and_runs_by_name():
    from kernels.attention import dispatch

    calls = []

    def run(q, k, v, causal, sm_scale, config, launcher):
        calls.append((causal, sm_scale, config))
        return attention.portable_attention(q, k, v, causal, sm_scale, config, launcher)

    path = dispatch.KernelPath(name="test-path", title="test", dtypes=(torch.float32,),
                               available=lambda device: (True, ""), run=run)
    dispatch.register_path(path)
    try:
        assert "test-path" in dispatch.path_names()
        q, k, v = qkv((1, 1, 9, 16), torch.float32)
        out = flash_attention(q, k, v, True, 0.5, path="test-path")
        assert calls == [(True, 0.5, None)]
        assert max_err(out, q, k, v, True, 0.5) <= ATOL[torch.float32]
        assert kernel_config_of_last_call()["path"] == "test-path"
        assert dispatch.resolve_path(q) == "portable"  # not in AUTO_ORDER: only by name
    finally:
        dispatch._PATHS.pop("test-path")


@pytest.mark.parametrize("config, match", [
    (dict(BLOCK_M=16, BLOCK_N=32), "multiple of BLOCK_N"),
    (dict(BLOCK_M=24, BLOCK_N=16), "power of two"),
    (dict(BLOCK_M=16), "needs BLOCK_M and BLOCK_N"),
    (dict(BLOCK_M=16, BLOCK_N=16, warps=4), "config keys"),
])
def test_bad_config(config, match):
    with pytest.raises(ValueError, match=match):
        flash_attention(*qkv((1, 1, 8, 16), torch.float16), config=config)


def test_portable_path_is_the_default_kernel():
    q, k, v = qkv((1, 1, 17, 16), torch.float16)
    torch.testing.assert_close(flash_attention(q, k, v, path="portable"), flash_attention(q, k, v), rtol=0, atol=0)
