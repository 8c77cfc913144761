"""The Turing tensor-core path: chosen on compute capability 7.5 for float16, behind a first-call
self-check that falls back to the portable kernel, with the reason, on any failure (kernels/attention/turing_path.py)."""
import dataclasses
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from kernels.attention import dispatch, turing_path


def _fake_cuda(dtype=torch.float16, shape=(1, 2, 512, 64)):
    # _choose and the gate read only these attributes
    return SimpleNamespace(dtype=dtype, is_cuda=True, device=torch.device("cuda", 0), shape=shape)


@pytest.fixture
def t4(monkeypatch):
    """A GPU of compute capability 7.5 (no Hopper path), with the interpreter off and a stub self-check."""
    monkeypatch.setattr(dispatch, "interpreting", lambda: False)
    monkeypatch.setattr(turing_path, "capability", lambda index: (7, 5))
    monkeypatch.setattr(turing_path.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(turing_path.torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setitem(dispatch._PATHS, "hopper", dataclasses.replace(
        dispatch._PATHS["hopper"], available=lambda device: (False, "compute capability 7.5")))
    state = SimpleNamespace(calls=[], result=(True, "Turing tensor-core kernel: matched"))

    def check(head_dim, causal, dtype, device):
        state.calls.append((head_dim, causal))
        return state.result

    monkeypatch.setattr(turing_path, "self_check", check)
    dispatch.portable_only.cache_clear()
    dispatch.rehearsed_target.cache_clear()
    turing_path.reset()
    yield state
    turing_path.reset()
    dispatch.rehearsed_target.cache_clear()


def test_float16_takes_the_turing_kernel_after_one_check_per_key(t4):
    assert dispatch.choose_path(_fake_cuda()) == ("turing", "Turing tensor-core kernel: matched")
    dispatch.choose_path(_fake_cuda())
    dispatch.choose_path(_fake_cuda(), causal=True)
    assert t4.calls == [(64, False), (64, True)]  # once per (dtype, head_dim, causal)
    # float32 and the measured Hopper rules do not apply (d=64 causal N=512 has a portable rule on Hopper)
    assert dispatch.choose_path(_fake_cuda(torch.float32))[0] == "portable"
    assert dispatch.choose_path(_fake_cuda(shape=(1, 2, 512, 64)), causal=True)[0] == "turing"


def test_a_failed_check_sends_every_later_call_to_the_portable_kernel(t4):
    t4.result = (False, "the Turing kernel failed its first-call self-check (CompilationError: boom)")
    name, why = dispatch.choose_path(_fake_cuda())
    assert name == "portable" and "CompilationError: boom" in why and why.endswith("the portable kernel runs instead")
    # another head size: no second check, the path stays off for the rest of the process
    name2, why2 = dispatch.choose_path(_fake_cuda(shape=(1, 2, 512, 128)))
    assert (name2, why2) == (name, why) and len(t4.calls) == 1


def test_no_check_inside_a_cuda_graph_capture(t4, monkeypatch):
    monkeypatch.setattr(turing_path.torch.cuda, "is_current_stream_capturing", lambda: True)
    name, why = dispatch.choose_path(_fake_cuda())
    assert name == "portable" and "CUDA-graph capture" in why and t4.calls == []
    monkeypatch.setattr(turing_path.torch.cuda, "is_current_stream_capturing", lambda: False)
    assert dispatch.choose_path(_fake_cuda())[0] == "turing"  # the check ran once outside it


def test_a_head_size_the_kernel_lacks_is_no_verdict_on_the_kernel(t4):
    name, why = dispatch.choose_path(_fake_cuda(shape=(1, 2, 512, 256)))
    assert name == "portable" and "head_dim 256" in why and t4.calls == []
    assert dispatch.choose_path(_fake_cuda())[0] == "turing"


def test_newer_gpus_keep_the_portable_kernel(t4, monkeypatch):
    monkeypatch.setattr(turing_path, "capability", lambda index: (8, 0))
    assert dispatch.choose_path(_fake_cuda())[0] == "portable" and t4.calls == []
    ok, why = turing_path.available(torch.device("cuda", 0))
    assert not ok and "7.5 only" in why


def test_a_t4_rehearsal_chooses_the_turing_kernel_on_a_hopper_gpu(t4, monkeypatch):
    monkeypatch.setattr(turing_path, "capability", lambda index: (9, 0))
    monkeypatch.setattr(dispatch, "unmeasured_reason", lambda: None)  # as on the Triton the H200 measured
    monkeypatch.setitem(dispatch._PATHS, "hopper", dataclasses.replace(
        dispatch._PATHS["hopper"], available=lambda device: (True, "")))
    assert dispatch.choose_path(_fake_cuda())[0] == "hopper"
    monkeypatch.setenv(dispatch.REHEARSE_TARGET_ENV, "sm75")
    dispatch.rehearsed_target.cache_clear()
    assert dispatch.choose_path(_fake_cuda())[0] == "turing"  # a T4's choice: no Hopper kernel


class _Kernel:
    """Stands in for kernels.attention.turing: returns SDPA's output, optionally spoiled."""

    def __init__(self, spoil=0.0):
        self.spoil = spoil

    def turing_attention(self, q, k, v, causal, sm_scale, launcher=None):
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal).to(q.dtype)
        out[..., -1, 0] += self.spoil  # the last (ragged-tail) query
        return out


@pytest.mark.parametrize("spoil, ok", [(0.0, True), (0.5, False)])
def test_the_self_check_compares_with_sdpa_at_the_grid_tolerance(monkeypatch, spoil, ok):
    monkeypatch.setattr(turing_path, "_kernel_module", lambda: _Kernel(spoil))
    got, why = turing_path.self_check(64, True, torch.float16, torch.device("cpu"))
    assert got is ok
    assert ("matched SDPA" in why) if ok else ("did not match SDPA" in why and "tolerance" in why)


def test_the_self_check_turns_an_exception_into_a_reason(monkeypatch):
    def broken():
        raise ImportError("cannot import name 'builtin' from 'triton.experimental.gluon.language._core'")

    monkeypatch.setattr(turing_path, "_kernel_module", broken)
    ok, why = turing_path.self_check(64, False, torch.float16, torch.device("cpu"))
    assert not ok and "ImportError" in why and "builtin" in why
