"""The decode phase's bookkeeping: its arithmetic, its rows on a tiny CPU run, limits and the time budget."""
import os

os.environ["TRITON_INTERPRET"] = "1"  # before kernels/ is imported: @triton.jit reads it then

import json

import pytest
import torch

from collect import decode as phase
from collect.jsonio import write_json_atomic
from collect.schema.decode import VARIANTS, DecodeFile
from kernels.gpt2 import ModelArgs
from render.validate import load_validated

TINY = ModelArgs(n_layer=1, n_head=2, n_embd=32, vocab_size=50, n_positions=16)
PLAN = phase.Plan(
    models=(phase.ModelPlan("tiny", ((1, 6), (1, 15)), short=((2, 4),), args=TINY, check_shape=(1, 6)),),
    micro_contexts=(24,), micro_batches=(1,), micro_heads=1, micro_head_dim=16,
    new_tokens=3, short_tokens=2, warmup_steps=1, check_prompt=4, check_positions=2, warmup_shape=(1, 4),
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    saved = []
    result = phase.collect_decode("cpu-test", PLAN, "cpu", 1e9, "test constant", save=lambda f: saved.append(len(f.rows)))
    path = tmp_path_factory.mktemp("run") / "decode.json"
    write_json_atomic(path, result)
    return result, path, saved


def test_new_tokens_respect_the_position_limit():
    assert phase.new_tokens_for(1024, 1000, 65) == 24
    assert phase.new_tokens_for(1024, 512, 65) == 65
    assert phase.new_tokens_for(1024, 1024, 65) == 0


def test_kv_bytes_average_over_the_growing_cache():
    # steps attend over 11, 12, 13 keys: mean 12 = 10 + (3 + 1) / 2
    assert phase.kv_bytes_per_step(100, 10, 3) == 1200
    assert phase.floor_ms(4e9, 4e12) == pytest.approx(1.0)
    assert phase.floor_ms(4e9, None) is None


def test_token_agreement_counts_and_finds_the_first_difference():
    ref = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    got = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    assert phase.token_agreement(got, ref) == (0.75, 8, 2)
    assert phase.token_agreement(ref, ref) == (1.0, 8, None)
    with pytest.raises(ValueError, match="shape"):
        phase.token_agreement(got[:, :3], ref)


def test_logit_difference_only_where_inputs_matched():
    ref_t = torch.tensor([[1, 2], [3, 4]])
    got_t = torch.tensor([[1, 2], [3, 9]])
    ref_l = torch.zeros(2, 5)
    got_l = torch.tensor([[0.0, 0.25, 0, 0, 0], [100.0, 0, 0, 0, 0]])  # row 1 diverged: its logits do not count
    assert phase.logit_diff_where_matched(got_l, ref_l, got_t, ref_t) == 0.25
    assert phase.logit_diff_where_matched(got_l, ref_l, got_t + 1, ref_t) is None


def test_compare_logits_reports_margins_of_disagreements():
    ref = torch.tensor([[[3.0, 1.0, 0.0], [1.0, 0.9, 0.0]]])   # margins 2.0 and 0.1
    test = torch.tensor([[[3.0, 1.0, 0.0], [0.9, 1.0, 0.0]]])  # the near-tie flips
    c = phase.compare_logits(test, ref)
    assert c["top1_agreement"] == 0.5
    assert c["max_margin_at_disagreement"] == pytest.approx(0.1)
    assert c["median_top2_margin"] == pytest.approx(0.1)  # torch's lower median of two
    assert c["max_abs_diff"] == pytest.approx(0.1)


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.delenv(phase.BUDGET_ENV, raising=False)
    assert phase.budget_seconds("full") == phase.BUDGET_S["full"]
    monkeypatch.setenv(phase.BUDGET_ENV, "0")
    assert phase.budget_seconds("quick") is None
    monkeypatch.setenv(phase.BUDGET_ENV, "soon")
    with pytest.raises(ValueError, match=phase.BUDGET_ENV):
        phase.budget_seconds("quick")


def test_tiny_run_has_a_row_per_variant_and_shape(tiny_run):
    result, path, saved = tiny_run
    assert [(r.context, r.variant) for r in result.rows] == [(c, v) for c in (6, 15, 4) for v in phase.VARIANT_ORDER]
    assert set(phase.VARIANT_ORDER) == set(VARIANTS)
    assert saved and saved[-1] == len(result.rows)  # progress was checkpointed
    loaded = load_validated(path, DecodeFile)  # what render/ will read
    assert len(loaded.rows) == len(result.rows) and loaded.models[0].name == "tiny"


def test_tiny_run_rows_are_measured_or_say_why(tiny_run):
    result, _, _ = tiny_run
    by = {(r.context, r.variant): r for r in result.rows}
    graph = by[(6, "graph")]
    assert graph.status == "unsupported" and "CUDA" in graph.reason
    for v in ("eager", "hf", "int8-dequant", "int8-kernel"):
        r = by[(6, v)]
        assert r.status == "ok" and r.steps_timed == 2 and r.new_tokens == 3
        assert r.floor_ms == pytest.approx(r.bytes_per_step / 1e9 * 1e3)
        assert r.achieved_over_floor == pytest.approx(r.step_ms_median / r.floor_ms)
    assert by[(6, "eager")].token_match is None
    assert by[(6, "hf")].token_match == 1.0  # fp32 on the CPU: transformers and ours agree exactly
    assert by[(6, "int8-kernel")].kv_cache_bytes < by[(6, "eager")].kv_cache_bytes
    # a short shape generates fewer tokens; its token match is still against eager at that shape
    assert by[(4, "int8-kernel")].new_tokens == 2 and by[(4, "int8-kernel")].tokens_compared == 4
    # context 15 of 16 positions leaves one new token: refused with the reason, not crashed
    assert by[(15, "eager")].status == "unsupported" and "16 positions" in by[(15, "eager")].reason


def test_tiny_run_checks_and_microbenchmark(tiny_run):
    result, _, _ = tiny_run
    assert [(c.cache, c.reference, c.sequence) for c in result.checks] == [
        ("bf16", "transformers", "random"), ("bf16", "transformers", "greedy"),
        ("int8", "eager", "greedy"), ("int8-dequant", "eager", "greedy")]
    assert all(c.status == "ok" for c in result.checks)
    assert result.checks[0].max_abs_diff < 1e-4
    assert {m.impl for m in result.micro} == {"triton-bf16", "triton-int8", "sdpa"}
    for m in result.micro:
        assert m.status == "ok" and m.bandwidth_fraction == pytest.approx(m.achieved_bytes_per_s / 1e9)
        assert m.max_abs_diff_vs_sdpa < (0.05 if m.impl == "triton-int8" else 1e-4)


def test_spent_budget_turns_remaining_rows_into_not_run(monkeypatch):
    plan = phase.Plan(models=(), micro_contexts=(8, 16), micro_batches=(1,), micro_heads=1, micro_head_dim=16)
    monkeypatch.setattr(phase.time, "perf_counter", iter(range(0, 10**6, 1000)).__next__)
    result = phase.collect_decode("cpu-test", plan, "cpu", None, None, budget_s=1.0)
    assert result.micro and all(m.status == "error" and "time budget" in m.reason for m in result.micro)
    assert any("not run" in n for n in result.notes)
    json.dumps([m.reason for m in result.micro])
