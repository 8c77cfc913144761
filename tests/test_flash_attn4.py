"""FlashAttention-4 as a baseline: where it cannot run, its rows say why; it is never one of our paths."""
from types import SimpleNamespace

import pytest
import torch

from collect import bench
from collect.shapes import AttentionCase
from collect.timing import is_unsupported
from kernels.attention import dispatch, flash_attn4
from kernels.attention import IMPLEMENTATIONS


@pytest.fixture(autouse=True)
def fresh_reasons():
    """Each test asks afresh: fa4_attention keeps one answer per device for the process."""
    flash_attn4._reason_on.cache_clear()
    yield
    flash_attn4._reason_on.cache_clear()


def test_without_a_gpu_the_reason_names_the_missing_device():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "no CUDA device" in flash_attn4.unavailable_reason()


def test_an_old_gpu_is_refused_with_its_capability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    why = flash_attn4.unavailable_reason()
    assert "8.0 or newer" in why and "7.5" in why


def test_a_missing_install_says_how_to_install(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(flash_attn4, "_import", lambda: (None, "FlashAttention-4 (flash-attn-4) is not importable: "
                                                               "ModuleNotFoundError: No module named 'flash_attn'"))
    why = flash_attn4.unavailable_reason()
    assert "No module named 'flash_attn'" in why and "pip install '.[fa4]'" in why and "fa4_wheels.sh" in why


def test_an_unavailable_baseline_becomes_an_unsupported_row_with_its_reason():
    q = torch.zeros(1, 1, 8, 64)
    with pytest.raises(flash_attn4.BaselineUnavailable) as info:
        IMPLEMENTATIONS["fa4"](q, q, q, False)
    assert is_unsupported(info.value)
    row = bench.failure_row(AttentionCase("fa4", "float16", False, 1, 1, 8, 64), info.value)
    assert row.status == "unsupported" and row.reason == str(info.value)


def test_the_reason_is_asked_once_per_device(monkeypatch):
    asked = []

    def probe(device=None):
        asked.append(device)
        return f"not on {device}"

    monkeypatch.setattr(flash_attn4, "unavailable_reason", probe)
    for index in (0, 0, 1, 0, 1):  # stand-ins on two GPUs: the reason is all a refused call reads of its inputs
        q = SimpleNamespace(device=torch.device("cuda", index))
        with pytest.raises(flash_attn4.BaselineUnavailable, match=f"not on cuda:{index}"):
            flash_attn4.fa4_attention(q, q, q)
    assert asked == [torch.device("cuda", 0), torch.device("cuda", 1)]


def test_the_layout_is_handed_over_as_views_and_back(monkeypatch):
    seen = {}

    def fake(q, k, v, softmax_scale=None, causal=False):
        seen.update(shape=tuple(q.shape), contiguous=q.is_contiguous(), causal=causal, scale=softmax_scale)
        return q * 2, None

    monkeypatch.setattr(flash_attn4, "unavailable_reason", lambda device=None: None)
    monkeypatch.setattr(flash_attn4, "_import", lambda: (fake, None))
    q = torch.randn(2, 3, 5, 8)
    out = flash_attn4.fa4_attention(q, q, q, causal=True, sm_scale=0.5)
    assert seen == dict(shape=(2, 5, 3, 8), contiguous=False, causal=True, scale=0.5)
    assert out.shape == q.shape and torch.equal(out, q * 2)


def test_our_dispatcher_never_routes_to_it():
    import kernels.attention  # noqa: F401 - registers every path

    assert dispatch._PATHS and not any("fa4" in name or "flash_attn4" in getattr(p.run, "__module__", "")
                                       for name, p in dispatch._PATHS.items())
