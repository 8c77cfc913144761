"""What the phases choose on a T4, from a T4's device facts, on a machine with no GPU.

A Tesla T4: compute capability 7.5, 40 SMs, 64 KiB of shared memory per block, 16 GB, no
bfloat16. Each choice is compared with the one on an H200, so a test fails if a choice stops
following the facts.
"""
import dataclasses

import pytest

import synthetic
from collect import device_choices as dc
from collect import profile

T4 = dc.T4
H200 = synthetic.device("NVIDIA H200")


def test_the_t4_facts_are_the_t4():
    assert (dc.capability(T4), T4.sm_count, dc.smem_limit_bytes(T4), dc.has_bf16(T4)) == ((7, 5), 40, 64 * 1024, False)
    assert 15e9 < T4.memory_bytes <= 16e9


def test_decode_takes_float16_on_a_t4_and_says_why():
    c = dc.decode_dtype(T4)
    assert c.value == "float16" and "7.5" in c.reason and "bfloat16" in c.reason
    assert dc.decode_dtype(H200).value == "bfloat16"
    # The device's own word wins over the capability when it gives one.
    assert dc.decode_dtype(dataclasses.replace(H200, supports_bf16=False)).value == "float16"


def test_bfloat16_rows_are_unsupported_on_a_t4_with_a_reason():
    run, why = dc.attention_dtypes(T4, ("float16", "bfloat16"))
    assert run == ("float16",) and "7.5" in why["bfloat16"]
    assert dc.attention_dtypes(H200, ("float16", "bfloat16")) == (("float16", "bfloat16"), {})


def test_no_hopper_path_and_no_iterations_on_a_t4():
    path = dc.hopper_path(T4, force_portable=False)
    assert path.value is False and "7.5" in path.reason and "9.x" in path.reason
    why = dc.iterations_unsupported(T4, force_portable=False)
    assert why and "Hopper" in why and "7.5" in why
    assert dc.hopper_path(H200, force_portable=False).value is True
    assert dc.iterations_unsupported(H200, force_portable=False) is None


def test_force_portable_holds_even_a_hopper_gpu_to_the_portable_kernel(monkeypatch):
    assert dc.hopper_path(H200, force_portable=True).value is False
    monkeypatch.setenv(dc.PORTABLE_ONLY_ENV, "1")
    assert dc.hopper_path(H200).value is False and "--force-portable" in dc.hopper_path(H200).reason
    monkeypatch.setenv(dc.PORTABLE_ONLY_ENV, "0")
    assert dc.hopper_path(H200).value is True


def test_out_of_memory_is_predicted_from_the_t4s_memory():
    # The study shape at N = 65536 naive: one fp16 score matrix of 2*8*65536^2 elements is 128 GiB.
    need = 2 * 8 * 65536**2 * 2
    assert dc.predicts_oom(T4, need) and "device memory" in dc.predicts_oom(T4, need)
    assert dc.predicts_oom(H200, 10 * 2**30) is None
    assert dc.predicts_oom(T4, 10 * 2**30) is None


def test_a_memory_cap_predicts_out_of_memory_sooner():
    cap = dc.parse_bytes("15GiB")
    assert cap == 15 * 2**30
    assert dc.memory_limit(H200, cap).value == cap and "--max-memory" in dc.memory_limit(H200, cap).reason
    assert dc.predicts_oom(H200, 20 * 2**30) is None
    assert "--max-memory" in dc.predicts_oom(H200, 20 * 2**30, cap)
    # A cap above the device's memory changes nothing.
    assert dc.memory_limit(T4, 100 * 2**30).value == T4.memory_bytes
    assert dc.memory_fraction(H200, cap) == pytest.approx(cap / H200.memory_bytes)
    assert dc.memory_fraction(H200, None) is None


@pytest.mark.parametrize("text, value", [("15GiB", 15 * 2**30), ("16 GB", 16 * 10**9), ("512MiB", 2**29),
                                         ("1.5e10", 15_000_000_000), ("2048", 2048)])
def test_memory_sizes_parse(text, value):
    assert dc.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "lots", "-1GiB", "0", "15 GiBs"])
def test_bad_memory_sizes_say_what_a_size_looks_like(text):
    with pytest.raises(ValueError, match="15GiB"):
        dc.parse_bytes(text)


def test_the_profile_asks_a_t4_only_for_counters_turing_has():
    t4 = dc.ncu_metrics(T4)
    assert set(profile.CORE_METRICS) <= set(t4)
    assert not any(m.startswith("sm__ops_path_tensor") for m in t4)  # no per-type tensor op counters before Ampere
    assert not any("gmma" in m for m in t4)  # warpgroup MMA is Hopper's
    assert "sm__inst_executed_pipe_tensor_op_hmma.sum" in t4  # tensor instructions are still counted
    h = dc.ncu_metrics(H200)
    assert any(m.startswith("sm__ops_path_tensor") for m in h) and any("gmma" in m for m in h)
    ampere = dc.ncu_metrics(dataclasses.replace(H200, compute_capability="8.0"))
    assert any(m.startswith("sm__ops_path_tensor") for m in ampere) and not any("gmma" in m for m in ampere)


def test_the_t4_gets_turing_tiles_that_fit_64_kib():
    from kernels.attention.portable import _CONFIGS_BY_ARCH, _smem_bytes

    for d in (64, 128):
        cfgs = dc.portable_tile_configs(T4, d, "float16")
        assert cfgs and set(cfgs) <= set(_CONFIGS_BY_ARCH["sm75"])
        assert all(_smem_bytes(m, n, s, d, 2, "sm75") <= 64 * 1024 for m, n, w, s in cfgs)
        assert all(s == 1 for *_, s in cfgs)  # no cp.async pipelining on Turing
    assert set(dc.portable_tile_configs(H200, 128, "float16")) <= set(_CONFIGS_BY_ARCH["sm90"])
    assert dc.tuning_target(T4) == "7.5:65536"


def test_a_rehearsal_chooses_from_the_rehearsed_gpus_facts(monkeypatch):
    monkeypatch.delenv(dc.REHEARSE_ENV, raising=False)
    assert dc.choice_facts(H200) is H200 and dc.rehearsal_name() is None
    monkeypatch.setenv(dc.REHEARSE_ENV, "t4")
    facts = dc.choice_facts(H200)
    assert facts.name == "Tesla T4" and facts.compute_capability == "7.5" and facts.cuda_version == H200.cuda_version
    assert dc.decode_dtype(facts).value == "float16" and dc.iterations_unsupported(facts) is not None
    monkeypatch.setenv(dc.REHEARSE_ENV, "a100")
    with pytest.raises(ValueError, match="t4"):
        dc.rehearsal_name()


def test_a_bad_compute_capability_is_named():
    with pytest.raises(ValueError, match="compute_capability"):
        dc.capability(dataclasses.replace(T4, compute_capability="turing"))


def test_a_slower_gpu_gets_longer_phase_budgets_within_a_cap():
    assert dc.budget_scale(None).value == 1.0
    assert dc.budget_scale(4.3e12).value == 1.0  # an H200: the budgets were sized there
    t4 = dc.budget_scale(2.4e11)  # a T4's copy rate is a few hundred GB/s
    assert t4.value == dc.MAX_BUDGET_SCALE and "240 GB/s" in t4.reason
    assert 1.0 < dc.budget_scale(2.0e12).value < dc.MAX_BUDGET_SCALE


def test_the_budget_scale_applies_to_defaults_not_to_an_explicit_budget(monkeypatch):
    from collect.budget import budget_seconds

    monkeypatch.delenv("X_BUDGET_S", raising=False)
    assert budget_seconds("X_BUDGET_S", {"quick": 90.0}, "quick", 3.0) == 270.0
    monkeypatch.setenv("X_BUDGET_S", "100")
    assert budget_seconds("X_BUDGET_S", {"quick": 90.0}, "quick", 3.0) == 100.0


def test_every_phase_scales_its_budget_from_one_place(tmp_path):
    from collect.context import RunContext

    manifest = synthetic.manifest("r")
    copy = next(c for c in manifest.measured_ceilings if c.name == "copy_bandwidth")
    copy.per_s_median = 2.0e12  # a GPU about half the H200's speed
    ctx = RunContext(run_id="r", out_dir=tmp_path, profile="full", manifest=manifest)
    assert ctx.budget_scale() == dc.budget_scale(2.0e12).value > 1.0  # the env phase's copy bandwidth
    assert ctx.budget_scale(2.4e11) == dc.MAX_BUDGET_SCALE  # a phase that measured its own (a T4's)
    # A phase's own budget: its profile's default, scaled; then cut to the collect's limit, if any.
    asked = []
    own = ctx.own_budget(lambda profile, scale: asked.append((profile, scale)) or 100.0 * scale)
    assert asked == [("full", ctx.budget_scale())] and own == 100.0 * ctx.budget_scale()
    ctx.deadline = __import__("time").perf_counter() + 30.0
    assert 29.0 < ctx.own_budget(lambda profile, scale: 100.0 * scale) <= 30.0
    ctx.deadline = None
    manifest.measured_ceilings = [c for c in manifest.measured_ceilings if c.name != "copy_bandwidth"]
    assert ctx.budget_scale() == 1.0  # no env phase: the default budgets
