"""The decode phase's bookkeeping: its arithmetic, its rows on a tiny CPU run, limits and the time budget."""
import dataclasses
import gc
import json
import time
import types
import weakref

import pytest

from collect.schema import SCHEMA_VERSION
import torch

from collect import decode as phase
from collect.decode import baselines as phase_baselines, compiling as phase_compiling, rows as phase_rows
from collect.decode import sessions as phase_sessions
from collect import host_profile as phase_host
from collect.jsonio import write_json_atomic
from collect.schema.decode import VARIANTS, DecodeFile, DecodeRow
from kernels.decode.gpt2 import ModelArgs
from render.validate import load_validated

TINY = ModelArgs(n_layer=1, n_head=2, n_embd=32, vocab_size=50, n_positions=16)
PLAN = phase.Plan(
    models=(phase.ModelPlan("tiny", ((2, 8),), ((1, 4), (1, 15)), agreement=True, args=TINY),),
    micro_contexts=(24,), micro_batches=(1,), micro_heads=1, micro_head_dim=16,
    steps=6, warmup_steps=1, profile_steps=2, agreement_batch=2, agreement_steps=4, free_steps=3, warmup_shape=(1, 4),
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    saved = []
    result = phase.collect_decode("cpu-test", PLAN, "cpu", 1e9, "test constant", save=lambda f: saved.append(len(f.rows)))
    assert gc.get_freeze_count() == 0  # what the rows' clean-ups froze is collectable again after the phase
    path = tmp_path_factory.mktemp("run") / "decode.json"
    write_json_atomic(path, result)
    return result, path, saved


def test_steps_respect_the_position_limit():
    assert phase.steps_for(1024, 1000, 64) == 23  # the last generated token needs a position too
    assert phase.steps_for(1024, 512, 64) == 64
    assert phase.steps_for(1024, 1023, 64) == 0


def test_loop_shape_keeps_an_untimed_loop_and_a_few_steps_per_loop():
    assert phase.loop_shape(64) == (4, 16)   # 1 untimed + 3 timed loops of 16 steps
    assert phase.loop_shape(23) == (4, 5)    # context 1000: 20 of the 23 steps
    assert phase.loop_shape(2) == (2, 1)
    with pytest.raises(ValueError, match="at least 2"):
        phase.loop_shape(1)


def test_kv_bytes_average_over_the_timed_steps():
    # steps 2..4 attend over 13, 14, 15 keys: mean 14 = 10 + 1 + (2 + 4) / 2
    assert phase.kv_bytes_per_step(100, 10, 2, 4) == 1400
    assert phase.floor_ms(4e9, 4e12) == pytest.approx(1.0)
    assert phase.floor_ms(4e9, None) is None


def test_agreement_counts_near_ties_apart():
    # bf16 at 2.0: one unit in the last place is 2^-6 = 0.015625.
    ref_v = torch.tensor([[[2.0, 1.5], [2.0, 1.99], [3.0, 1.0], [2.0, 1.0]]])
    ref_i = torch.tensor([[[1, 2], [3, 4], [5, 6], [7, 8]]])
    test_v = torch.tensor([[[2.0, 0.0], [2.0, 0.0], [3.25, 0.0], [2.0, 0.0]]])
    test_i = torch.tensor([[[1, 0], [4, 0], [5, 0], [9, 0]]])  # flips the near-tie and one clear position
    f = phase.agreement_fields(ref_v, ref_i, test_v, test_i, mantissa_bits=8)
    assert f["positions"] == 4 and f["near_ties"] == 1 and f["near_tie_fraction"] == 0.25
    assert f["agreement"] == pytest.approx(2 / 3) and f["disagreements"] == 1
    assert f["agreement_at_near_ties"] == 0.0
    assert f["max_margin_at_disagreement"] == pytest.approx(1.0)
    assert f["max_top1_logit_diff"] == pytest.approx(0.25)  # over the positions where both chose one token
    # more mantissa bits: the 0.01 gap is no longer a near-tie
    assert phase.agreement_fields(ref_v, ref_i, test_v, test_i, mantissa_bits=24)["near_ties"] == 0


def test_ulp_follows_the_binade():
    assert float(phase.ulp(1.0, 8)) == 2**-7 and float(phase.ulp(1.99, 8)) == 2**-7 and float(phase.ulp(-2.0, 8)) == 2**-6


def test_free_running_counts_and_finds_the_first_difference():
    ref = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    got = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    assert phase.free_running_fields(got, ref) == {"free_running_match": 0.75, "free_running_tokens": 8,
                                                   "free_running_first_mismatch": 2}
    assert phase.free_running_fields(ref, ref)["free_running_first_mismatch"] is None
    with pytest.raises(ValueError, match="shape"):
        phase.free_running_fields(got[:, :3], ref)


def test_variant_specs_cover_the_schema_and_choose_the_graph_step(monkeypatch):
    specs = phase.variant_specs("inductor")
    assert tuple(specs) == VARIANTS
    assert specs["graph"].step == specs["int8-graph"].step == "inductor" and specs["eager"].step == "torch"
    assert specs["hf-compiled"].key_only and specs["hf-compiled"].step_impl == "transformers-compiled"
    assert [v for v, sp in specs.items() if sp.host_bound] == ["hf-eager", "hf-generate"]
    assert specs["hf-generate"].generate and specs["hf-generate"].step_impl == "transformers-generate"
    # the eager transformers loop warms every position it times; our loops plan no kernel per shape
    assert [v for v, sp in specs.items() if sp.warm_every_step] == ["hf-eager"]
    monkeypatch.setenv(phase.GRAPH_STEP_ENV, "nonsense")
    with pytest.raises(ValueError, match=phase.GRAPH_STEP_ENV):
        phase.graph_step_from_env()


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
    # key shapes first, the compiled transformers loop after the agreement check, then the sweeps: our CUDA-graph
    # steps at every sweep shape before the other loops, and last the host-bound rows (what a slow machine's spent
    # budget should cut first)
    key = [(8, v) for v in VARIANTS if v != "hf-compiled"] + [(8, "hf-compiled")]
    host = ("hf-eager", "hf-generate")
    graph = ("graph", "int8-graph")
    sweep = [(c, v) for c in (4, 15) for v in VARIANTS if v not in ("hf-compiled", "persistent", *host)]  # key-only
    sweep = [r for r in sweep if r[1] in graph] + [r for r in sweep if r[1] not in graph]
    assert [(r.context, r.variant) for r in result.rows] == key + sweep + [(c, v) for c in (4, 15) for v in host]
    assert saved and saved[-1] == len(result.rows)  # progress was checkpointed
    loaded = load_validated(path, DecodeFile)  # what render/ will read
    assert len(loaded.rows) == len(result.rows) and loaded.models[0].name == "tiny"
    assert loaded.models[0].resident_bytes is None  # no allocator to ask without a GPU: unknown, never a guess
    assert loaded.graph_step == phase.GRAPH_STEP and loaded.dtype == "float32" and "no GPU" in loaded.dtype_reason


def test_tiny_run_rows_are_measured_or_say_why(tiny_run):
    result, _, _ = tiny_run
    by = {(r.context, r.variant): r for r in result.rows}
    for v in ("graph", "int8-graph", "hf-compiled"):
        assert by[(8, v)].status == "unsupported" and "CUDA" in by[(8, v)].reason
    for v in ("eager", "hf-eager", "int8-dequant"):
        r = by[(8, v)]
        # the plan's 6 steps fit (16 positions, context 8): 2 loops of 3, the first untimed; 1 + 6 tokens generated
        assert r.status == "ok" and (r.loops_timed, r.steps_per_loop, r.steps_timed, r.new_tokens) == (1, 3, 3, 7)
        assert r.floor_ms == pytest.approx(r.bytes_per_step / 1e9 * 1e3)
        assert r.achieved_over_floor == pytest.approx(r.step_ms_median / r.floor_ms)
        assert r.step_ms_p10 <= r.step_ms_median <= r.step_ms_p90
    assert by[(8, "eager")].step_impl == "torch" and by[(8, "hf-eager")].step_impl == "transformers"
    # the eager transformers loop's warm-up pass covered the positions it timed, and its time is kept apart
    hf = by[(8, "hf-eager")]
    assert hf.cold_step_ms > 0 and hf.cache_class == "DynamicCache" and by[(8, "eager")].cold_step_ms is None
    assert by[(8, "int8-dequant")].kv_cache_bytes < by[(8, "eager")].kv_cache_bytes
    # context 15 of 16 positions leaves no step: refused with the reason, not crashed
    assert by[(15, "eager")].status == "unsupported" and "16 positions" in by[(15, "eager")].reason


def test_tiny_run_agreement_and_microbenchmark(tiny_run):
    result, _, _ = tiny_run
    by = {a.variant: a for a in result.agreement}
    assert set(by) == set(VARIANTS) - {"graph", "hf-generate"}  # generate cannot be teacher-forced
    assert by["hf-compiled"].status == "unsupported"
    for v in ("hf-eager", "eager", "persistent", "int8-graph", "int8-dequant"):  # graph steps run uncaptured on the CPU
        a = by[v]
        assert a.status == "ok" and a.reference == "graph" and a.positions == 2 * 4 == a.batch * PLAN.agreement_steps
        assert a.prompt_len == 15 - 4 and a.free_running_tokens == 2 * (PLAN.free_steps + 1)
    # fp32 on the CPU: transformers and our steps agree everywhere
    assert by["hf-eager"].agreement == 1.0 and by["eager"].agreement == 1.0 and by["persistent"].agreement == 1.0
    assert by["eager"].max_top1_logit_diff < 1e-4 and by["persistent"].max_top1_logit_diff < 1e-4
    assert {m.impl for m in result.micro} == {"triton-bf16", "triton-int8", "sdpa"}
    for m in result.micro:
        assert m.status == "ok" and m.bandwidth_fraction == pytest.approx(m.achieved_bytes_per_s / 1e9)
        assert m.max_abs_diff_vs_sdpa < (0.05 if m.impl == "triton-int8" else 1e-4)


def test_no_other_variants_session_is_alive_when_a_row_or_check_builds_its_own(monkeypatch):
    # The key shape is the agreement's own (batch 2, prompt 9 + 6 steps = capacity 15): sessions there
    # used to be kept for the check, and every later row's peak memory counted the earlier ones.
    import gc
    import weakref

    plan = dataclasses.replace(PLAN, models=(phase.ModelPlan("tiny", ((2, 9),), (), agreement=True, args=TINY),),
                               micro_contexts=())
    real, built, crowded = phase_sessions.open_session, [], []

    def spy(spec, m, batch, capacity, env, keep):
        gc.collect()
        alive = [r() for r in built if r() is not None]
        s = real(spec, m, batch, capacity, env, keep)
        others = [a for a in alive if a is not s]
        if others:
            crowded.append((spec.name, [type(a).__name__ for a in others]))
        built.append(weakref.ref(s))
        return s

    monkeypatch.setattr(phase_sessions, "open_session", spy)
    result = phase.collect_decode("cpu-test", plan, "cpu", 1e9, "test constant")
    ok_rows = [r for r in result.rows if r.status == "ok"]
    assert len(ok_rows) >= 3 and sum(a.status == "ok" for a in result.agreement) >= 3
    assert len(built) >= len(ok_rows) + 3  # the check builds its own sessions
    assert crowded == [], crowded


def test_a_later_session_of_a_judged_variant_and_shape_adopts_its_attention():
    # The agreement check's session must run the kernels its row timed, not judge again (and maybe
    # pick another config, with other rounding).
    from kernels.decode.split_kv_config import AttentionLaunch
    from kernels.decode.session import AttentionChoice
    from kernels.decode.gpt2 import GPT2, random_hf_model

    ours = GPT2.from_hf(random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32))
    choice = AttentionChoice({"BLOCK_N": 16, "num_warps": 1, "num_stages": 1}, "CUDA cores, BLOCK_N=16",
                             AttentionLaunch(True, 64), {"CUDA cores, BLOCK_N=16 | pdl-prefetch64": 0.1})
    specs = phase.variant_specs("fused")
    m = types.SimpleNamespace(sessions={}, judged={("int8-graph", 2, 15): choice}, ours=ours, hf=None)
    env = types.SimpleNamespace(cuda=False, device=torch.device("cpu"))
    s = phase_sessions.open_session(specs["int8-graph"], m, 2, 15, env, keep=False)
    assert s.attention_choice() == choice and s.step_fn.attention_launch == AttentionLaunch(True, 64)
    assert phase_sessions.open_session(specs["int8-graph"], m, 2, 14, env, keep=False).attention_choice() is None  # other shape
    with pytest.raises(ValueError, match="no attention choice"):
        phase_sessions.open_session(specs["eager"], m, 2, 15, env, keep=False).adopt_attention(choice)


def test_spent_budget_turns_remaining_rows_into_skipped(monkeypatch):
    plan = phase.Plan(models=(), micro_contexts=(8, 16), micro_batches=(1,), micro_heads=1, micro_head_dim=16)
    monkeypatch.setattr(time, "perf_counter", iter(range(0, 10**6, 1000)).__next__)
    result = phase.collect_decode("cpu-test", plan, "cpu", None, None, budget_s=1.0)
    assert result.micro and all(m.status == "skipped" and "time budget" in m.reason for m in result.micro)
    assert any("not run" in n for n in result.notes)
    json.dumps([m.reason for m in result.micro])


def test_migration_renames_the_transformers_loop_and_nothing_else():
    from collect.schema.migrate import rename_decode_hf_variant

    doc = {"schema_version": 1, "rows": [{"variant": "hf", "batch": 4}, {"variant": "eager", "batch": 4}],
           "checks": [{"reference": "eager"}]}
    out = rename_decode_hf_variant(json.loads(json.dumps(doc)))
    assert [r["variant"] for r in out["rows"]] == ["hf-eager", "eager"]
    assert out["checks"] == doc["checks"] and out["schema_version"] == 1
    assert rename_decode_hf_variant(json.loads(json.dumps(out))) == out  # idempotent


@pytest.mark.parametrize("version", [3, 4, 5])
def test_a_version_step_changes_only_the_version_and_reaches_it_from_version_1(tmp_path, version):
    from collect.schema import migrate

    step = getattr(migrate, f"to_version_{version}")
    before = {"schema_version": version - 1, "rows": [{"variant": "graph", "batch": 4, "note": "Q K\u1d40"}]}
    out = step(json.loads(json.dumps(before)))
    assert out == {**before, "schema_version": version} and step(json.loads(json.dumps(out))) == out
    v1 = {"schema_version": 1, "rows": [{"variant": "hf", "batch": 4}]}
    assert step(v1) == {"schema_version": version, "rows": [{"variant": "hf-eager", "batch": 4}]}
    # Written back as it was read: escaped where the file was ASCII, raw UTF-8 where it was not.
    for ascii_file in (True, False):
        path = tmp_path / f"f{ascii_file}.json"
        path.write_text(json.dumps(before, indent=1, ensure_ascii=ascii_file) + "\n", encoding="utf-8")
        assert migrate.main([f"to_version_{version}", str(path)]) == 0
        text = path.read_text(encoding="utf-8")
        assert json.loads(text)["schema_version"] == version and text.isascii() == ascii_file


def _empty_file():
    return DecodeFile(schema_version=SCHEMA_VERSION, run_id="x")


def test_a_failing_profiler_costs_the_counts_not_the_row(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("the profiler recorded no GPU kernels")

    monkeypatch.setattr(phase_rows, "profile_steps", broken)
    env = types.SimpleNamespace(cuda=True, sync=lambda: None)
    result = _empty_file()
    assert phase_rows._profile(object(), 2, env, result) is None and phase_rows._profile(object(), 2, env, result) is None
    assert len(result.notes) == 1 and "could not count kernels" in result.notes[0]


def test_a_read_twin_that_cannot_run_costs_its_figure_not_the_row():
    class Broken:
        device = "cuda"
        step_fn = types.SimpleNamespace(kernel_bytes=lambda per_layer: (_ for _ in ()).throw(RuntimeError("no GPU")))

    row = types.SimpleNamespace(kv_bytes_per_step=1200.0)
    result = _empty_file()
    assert phase_rows._read_floor(Broken(), row, 12, 5, 2, result) is None
    assert phase_rows._read_floor(Broken(), row, 12, 5, 2, result) is None
    assert len(result.notes) == 1 and "read-only twin" in result.notes[0] and "no GPU" in result.notes[0]


def test_a_graph_that_fails_with_pdl_is_retried_without_it(monkeypatch):
    from kernels.decode import fused_linear as fl

    monkeypatch.setattr(fl.TUNING, "pdl", True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    specs, result = phase.variant_specs("fused"), _empty_file()
    assert not phase_rows._pdl_fallback(specs["eager"], RuntimeError("x"), result)  # not a graph of the fused step
    assert phase_rows._pdl_fallback(specs["graph"], RuntimeError("capture failed"), result)
    assert fl.TUNING.pdl is False and "without programmatic dependent launch" in result.notes[0]
    assert not phase_rows._pdl_fallback(specs["int8-graph"], RuntimeError("again"), result)  # already off: a real error


def test_precompile_tasks_cover_each_kernel_family_once():
    plan = phase.PLANS["full"]
    tasks = phase.compile_tasks(plan, "fused", "cuda:0")
    steps = [t for t in tasks if t[0] == "step"]
    assert [t[1] for t in tasks if t[0] == "micro"] == [False, True]
    # gpt2: 16-row programs at a capacity of 1023 (context 1000) and of a multiple of 16; 64-row programs.
    # gpt2-xl: 16-row programs at both residues.
    assert sorted((t[1].n_layer, t[2] if t[2] != 4 else 4, t[3]) for t in steps) == sorted(
        [(12, 4, 15), (12, 64, 0), (12, 4, 0), (48, 4, 15), (48, 4, 0)])
    # The persistent step at each key shape's own capacity (context 1000 plus its 23 steps: the agreement's too).
    assert sorted((t[1].n_layer, t[2], t[3]) for t in tasks if t[0] == "persistent") == [
        (12, 4, 1023), (12, 64, 576), (48, 4, 1023)]


def test_a_compile_task_runs_every_step_kernel_once():
    # In-process here (the interpreter); on a GPU it runs in a spawned worker and fills Triton's cache.
    roomy = dataclasses.replace(TINY, n_positions=64)
    assert phase_compiling._compile_task(("step", roomy, 2, 3, "fused", "cpu", "")) is None
    assert phase_compiling._compile_task(("micro", True, 1, 16, "cpu", "")) is None
    assert "Error" in phase_compiling._compile_task(("step", roomy, 2, 3, "no-such-step", "cpu", ""))
    assert phase_compiling._compile_task(("persistent", roomy, 2, 24, "cpu", "")) is None  # the plain-Triton step
    assert phase_compiling._compile_task(("persistent", roomy, 64, 24, "cpu", "")) is None  # refused: nothing to do


def test_the_persistent_variant_runs_the_warp_specialized_step_where_it_can():
    spec = phase.variant_specs("fused")["persistent"]
    assert spec.step_for(4, "meta") == "persistent-ws"  # how sm90 is compiled without a GPU
    assert spec.step_for(4, "cpu") == "persistent"
    assert spec.step_for(8, "meta") == "persistent"  # past the warp-specialized step's 4 rows
    assert spec.impl_for(4, "meta") == "persistent-ws"
    assert phase.variant_specs("fused")["graph"].step_for(4, "meta") == "fused"
    assert phase.variant_specs("fused")["hf-compiled"].impl_for(4, "meta") == "transformers-compiled"


def test_compile_tasks_carry_the_dtype_the_rows_use():
    # A rehearsal of a T4 decodes in float16 on a bf16 GPU: the spawned workers must compile that.
    tasks = phase.compile_tasks(phase.PLANS["quick"], "torch", "cuda:0", "float16")
    assert tasks and all(t[-2:] == ("cuda:0", "float16") for t in tasks)


def test_generate_is_timed_per_token_after_the_first(tiny_run):
    # model.generate greedy, its default cache: one token from the prefill, then steps_per_loop more per timed call
    result, _, _ = tiny_run
    by = {(r.context, r.variant): r for r in result.rows}
    for _ in range(2):
        # On a busy CPU the call generating 7 tokens can come out no slower than the one generating 1; the row then
        # says it is too noisy to time (the test below), and the phase is run again rather than the check skipped.
        if by[(8, "hf-generate")].status == "ok" or "too noisy" not in (by[(8, "hf-generate")].reason or ""):
            break
        by = {(r.context, r.variant): r for r in phase.collect_decode("cpu-test", PLAN, "cpu", 1e9, "test constant").rows}
    g, loop = by[(8, "hf-generate")], by[(8, "hf-eager")]
    assert g.status == "ok" and g.step_impl == "transformers-generate" and g.cache_class == "DynamicCache"
    assert (g.steps_per_loop, g.new_tokens) == (6, 7) and g.loops_timed >= 1 and g.steps_timed == 6 * g.loops_timed
    assert g.step_ms_p10 <= g.step_ms_median <= g.step_ms_p90 and g.step_ms_median > 0
    assert g.tokens_per_s == pytest.approx(g.batch / (g.step_ms_median * 1e-3))
    # over steps 0..5 after the prompt it reads the same weights, and a cache one key shorter on average
    assert g.weight_bytes_per_step == loop.weight_bytes_per_step and g.kv_bytes_per_step < loop.kv_bytes_per_step
    assert by[(15, "hf-generate")].status == "unsupported"


def test_generate_gives_the_loops_greedy_tokens():
    # the same model, prompt and greedy rule: transformers' generate and its model in our loop agree token for token
    from kernels.decode.session import HfSession, hf_generate
    from kernels.decode.gpt2 import random_hf_model

    hf = random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32)
    prompt = torch.randint(0, TINY.vocab_size, (2, 5), generator=torch.Generator().manual_seed(1))
    tokens, cache = hf_generate(hf, prompt, 6)
    s = HfSession(hf, 2, 11)
    s.prepare(prompt, 2)
    for _ in range(5):
        s.step()
    assert torch.equal(tokens.cpu(), s.generated(5, 6)) and cache.get_seq_length() == 5 + 5
    with pytest.raises(ValueError, match="positions"):
        hf_generate(hf, prompt, TINY.n_positions)  # refused on the host, before the model runs


def test_a_generate_row_too_noisy_to_time_is_an_error_not_a_negative_time(monkeypatch):
    import kernels.decode.session as ds

    calls = iter([5.0, 1.0, 1.0, 9.0])  # warm pair, then a timed pair whose long call is the faster one
    monkeypatch.setattr(phase_baselines, "_call_ms", lambda fn, env: next(calls))
    monkeypatch.setattr(ds, "hf_generate", lambda *a: (torch.zeros((1, 3), dtype=torch.int64), None))
    env = types.SimpleNamespace(cuda=False)
    m = types.SimpleNamespace(hf=None, ours=types.SimpleNamespace(args=TINY))
    row = DecodeRow(model="tiny", variant="hf-generate", batch=1, context=4, new_tokens=0, status="ok")
    out = phase_baselines._generate_row(row, m, torch.zeros((1, 4), dtype=torch.int64), 2, 1, env)
    assert out.status == "error" and "too noisy" in out.reason and out.step_ms_median is None


def test_the_host_profile_splits_each_loop_into_transformers_own_functions(tiny_run):
    result, path, _ = tiny_run
    rows = {r.variant: r for r in result.host_profiles}
    assert set(rows) == {"hf-generate", "hf-eager"}
    for r in rows.values():
        assert r.status == "ok", r.reason
        assert r.ms_per_token >= 0 and r.steps == 7
        # one forward per token; every component is a positive time. (Their sum is not compared with the loop's:
        # each is a difference of two profiled calls, and on a busy two-core machine the tiny model's calls vary
        # by more than its whole decode step. tests/test_host_profile.py checks the arithmetic exactly.)
        assert r.calls_per_token["model forward"] == pytest.approx(1.0)
        assert all(v >= 0 for v in r.components.values()) and "model forward" in r.components
    # generate prepares its inputs and updates its kwargs once a token; the plain loop does neither
    g, e = rows["hf-generate"].calls_per_token, rows["hf-eager"].calls_per_token
    assert g["prepare inputs"] == pytest.approx(1.0) and g["update model kwargs"] == pytest.approx(1.0)
    assert "prepare inputs" not in e and "update model kwargs" not in e
    assert load_validated(path, DecodeFile).host_profiles[0].components == rows["hf-generate"].components


def test_a_model_may_check_only_some_variants_and_the_full_plan_checks_gpt2_xl_on_our_graph_steps():
    plan = dataclasses.replace(PLAN, models=(phase.ModelPlan("tiny", ((2, 8),), (), agreement=True, args=TINY,
                                                             agreement_variants=("eager",)),), micro_contexts=())
    result = phase.collect_decode("cpu-test", plan, "cpu", 1e9, "test constant")
    assert [(a.variant, a.status) for a in result.agreement] == [("eager", "ok")]
    xl = next(m for m in phase.PLANS["full"].models if m.name == "gpt2-xl")
    assert [v for v in VARIANTS if xl.checks(v)] == ["persistent", "int8-graph"]
    gpt2 = next(m for m in phase.PLANS["full"].models if m.name == "gpt2")
    assert all(gpt2.checks(v) for v in VARIANTS)


def test_a_persistent_trace_that_cannot_run_costs_the_breakdown_and_a_note_not_the_row():
    """Without a GPU the traced step refuses to run (it reads the GPU's timer): the roles come back empty,
    the decode file says why, and the session is back where it was."""
    from kernels.decode.gpt2 import GPT2, random_hf_model
    from kernels.decode.session import OurSession

    model = GPT2.from_hf(random_hf_model(TINY, seed=0, device="cpu", dtype=torch.float32))
    s = OurSession(model, 2, 12, "bf16", "persistent")
    # the phase traces the steps whose roles live inside one kernel, and profiles the rest
    assert s.step_fn.roles_by_trace and not hasattr(OurSession(model, 2, 12, "bf16", "torch").step_fn, "roles_by_trace")
    s.start(torch.randint(0, TINY.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0)))
    result = types.SimpleNamespace(notes=[])
    assert phase_rows._persistent_roles(s, result) == []
    assert len(result.notes) == 1 and "trace could not be read" in result.notes[0] and "needs a GPU" in result.notes[0]
    assert s.host_pos == 5 and int(s.pos) == 5 and int(s.lens) == 6


def test_a_persistent_trace_gives_each_role_its_span_split_and_the_row_its_late_sm_share(monkeypatch):
    """The traced step's readings become, per role, the span with its hand-off and its late SM, and on the row the
    share of operations the most often late SM finished last (a fixed trace stands in for the GPU's)."""
    from kernels.decode import persistent_trace as pt
    from kernels.decode.persistent_plan import KernelOp, StepPlan, Tile

    ops = (KernelOp("layer 0 qkv", 2, 100, 1, "qkv"), KernelOp("layer 0 attention", 2, 100, 1, "attention"))
    plan = StepPlan(ops, ((Tile(0, 0), Tile(1, 0)), (Tile(0, 1), Tile(1, 1))))
    trace = torch.tensor([[[1000, 1000, 1400], [1400, 1700, 2000]],
                          [[1000, 1000, 1600], [1600, 1700, 2100]]], dtype=torch.int64)
    monkeypatch.setattr(pt, "traced_op_times", lambda session, read: read(trace, plan, ops))
    row = DecodeRow(model="tiny", variant="persistent", batch=2, context=8, new_tokens=0, status="ok")
    roles = {r.role: r for r in phase_rows._persistent_roles(object(), types.SimpleNamespace(notes=[]), row)}
    assert roles["attention"].ms_per_step == pytest.approx(5e-4) and roles["attention"].kernels_per_step == 1
    assert roles["attention"].handoff_ms_per_step == pytest.approx(1e-4)
    assert roles["attention"].late_ms_per_step == pytest.approx(5e-5)
    assert roles["qkv"].late_ms_per_step == pytest.approx(1e-4)  # list 1 finished 100 ns after the median
    assert row.last_sm_share == 1.0  # list 1 was last in both operations
    # a spread that cannot be read costs the split and says why; the spans stay
    monkeypatch.setattr(pt, "op_spread", lambda *trace: 1 / 0)
    result, bare = types.SimpleNamespace(notes=[]), DecodeRow(model="tiny", variant="persistent", batch=2, context=8,
                                                                new_tokens=0, status="ok")
    roles = {r.role: r for r in phase_rows._persistent_roles(object(), result, bare)}
    assert roles["attention"].ms_per_step == pytest.approx(5e-4) and roles["attention"].handoff_ms_per_step is None
    assert bare.last_sm_share is None and "not how its SMs parted" in result.notes[0]


def test_a_profiled_key_row_keeps_its_kernel_classes(monkeypatch):
    """Every profiled key row records its kernels per step and its classes (on the CPU the profiler does not
    run, so a fixed profile stands in for it)."""
    from collect.decode_profile import ClassShare, StepProfile

    def profiled(session, steps, env, result, fused_layers=None):
        return StepProfile(steps, 3.0, 0.05, [ClassShare("linear", 2.0, 0.04, "_ln_linear_kernel"),
                                               ClassShare("sampling", 1.0, 0.01, "_advance_kernel")])

    monkeypatch.setattr(phase_rows, "_profile", profiled)
    plan = dataclasses.replace(PLAN, models=(phase.ModelPlan("tiny", ((2, 8),), (), args=TINY),), micro_contexts=())
    result = phase.collect_decode("cpu-test", plan, "cpu", 1e9, "test constant")
    ok = [r for r in result.rows if r.status == "ok" and r.variant in ("eager", "int8-dequant")]
    assert ok and all(r.kernels_per_step == 3.0 and r.kernel_ms_per_step == 0.05 for r in ok)
    assert {(c.variant, c.kernel_class) for c in result.kernel_classes} >= {(r.variant, "linear") for r in ok}


def test_the_agreement_check_runs_our_graph_steps_first_and_the_host_bound_loop_last():
    from collect.decode.agreement import agreement_order
    from collect.decode.plans import variant_specs

    specs = variant_specs()
    checked = ["hf-eager", "eager", "persistent", "int8-graph", "int8-dequant"]
    order = agreement_order(checked, specs)
    assert sorted(order) == sorted(checked)
    assert order[:2] == ["persistent", "int8-graph"] and order[-1] == "hf-eager"
    assert order.index("eager") < order.index("int8-dequant")  # the registry's order within a kind


def test_the_compiled_loop_runs_between_the_graph_steps_check_and_the_eager_loops(tiny_run):
    # What a user would pick (transformers' compiled loop) is measured before the check's slow eager loops, which
    # in run h200-20261203k took the 20 s its 40 s compile reserve needed.
    result, _, _ = tiny_run
    assert [a.variant for a in result.agreement] == ["persistent", "int8-graph", "hf-compiled", "eager",
                                                     "int8-dequant", "hf-eager"]


def test_the_eager_loops_check_waits_behind_every_compiled_key_row_and_our_graph_sweeps(monkeypatch):
    # On a host whose CPU runs the host-bound loops slowly, the check's eager loops took the time gpt2-xl's compiled
    # key row needed (runs h100-20261206b and c); the order puts the rows the headline and figures need first.
    from collect.decode import phase as driver

    names, real_stage = [], driver.stage

    def recorded(phase_name, what):
        names.append(what)
        return real_stage(phase_name, what)

    monkeypatch.setattr(driver, "stage", recorded)
    second = dataclasses.replace(PLAN.models[0], name="tiny-2", agreement_variants=("persistent",))
    plan = dataclasses.replace(PLAN, models=(PLAN.models[0], second))
    result = phase.collect_decode("cpu-test", plan, "cpu", 1e9, "test constant")
    assert {(a.model, a.variant) for a in result.agreement if a.status == "ok"} >= {("tiny", "hf-eager"),
                                                                                  ("tiny-2", "persistent")}
    at = {n: i for i, n in enumerate(names)}
    eager_check = at["tiny agreement, eager loops"]
    assert "tiny-2 agreement, eager loops" not in at  # the second model checks only our graph step
    assert at["tiny-2 compiled transformers"] < at["host profile of transformers' loops"] < eager_check
    assert at["tiny-2 sweep, CUDA-graph steps"] < eager_check < at["tiny sweep, other loops"]
    assert at["tiny-2 sweep, other loops"] < at["tiny sweep, host-bound rows"]


def test_a_compiled_check_whose_row_was_skipped_is_skipped_not_compiled(monkeypatch):
    # The check reuses the row's compiled session; without it, it would pay a cold compile of its own.
    from collect.decode import phase as driver

    real_rows = driver._rows

    def rows_with_a_skipped_compiled_loop(m, shapes, plan, env, result, key, **kw):
        before = len(result.rows)
        real_rows(m, shapes, plan, env, result, key, **kw)
        for r in result.rows[before:]:
            if r.variant == "hf-compiled":
                r.status, r.reason = "skipped", "not run: budget"

    monkeypatch.setattr(driver, "_rows", rows_with_a_skipped_compiled_loop)
    monkeypatch.setattr(driver, "_agreement_shape", lambda m, plan: (2, 8))
    result = phase.collect_decode("cpu-test", PLAN, "cpu", 1e9, "test constant")
    check = next(a for a in result.agreement if a.variant == "hf-compiled")
    assert check.status == "skipped" and "was skipped" in check.reason
    assert next(a for a in result.agreement if a.variant == "eager").status == "ok"


def test_a_host_profile_too_noisy_at_every_try_is_an_error_row_the_schema_takes(monkeypatch, tmp_path):
    # On a busy host the longer profiled call can take no longer than the shorter one: profiled again, up to
    # PROFILE_TRIES pairs, then the row says so. It used to be written as 0 ms a token, which the decode file's schema refuses.
    from collect import host_profile

    calls = []

    def always_noisy(long, short, steps, variant):
        calls.append(variant)
        raise host_profile.NoisyProfile(f"under cProfile the {variant} call took no longer (test)")

    monkeypatch.setattr(host_profile, "attribute", always_noisy)
    result = phase.collect_decode("cpu-test", PLAN, "cpu", 1e9, "test constant")
    from collect.decode.baselines import PROFILE_TRIES

    assert PROFILE_TRIES >= 2 and sorted(calls) == ["hf-eager"] * PROFILE_TRIES + ["hf-generate"] * PROFILE_TRIES
    for r in result.host_profiles:
        assert r.status == "error" and "took no longer" in r.reason and r.ms_per_token is None
    path = tmp_path / "decode.json"
    write_json_atomic(path, result)
    assert [r.status for r in load_validated(path, DecodeFile).host_profiles] == ["error", "error"]


def test_a_clean_up_freezes_what_survives_and_a_full_one_looks_at_the_whole_heap_again():
    class Session:
        pass

    env = types.SimpleNamespace(cuda=False)
    kept = Session()
    kept.me = kept  # a cycle, as sessions hold: only the collector frees it
    gone = weakref.ref(kept)
    try:
        phase_sessions._clean(env)
        assert gc.get_freeze_count() > 0
        del kept  # dropped after a clean-up froze it (the compiled session kept for the agreement check)
        phase_sessions._clean(env)
        assert gone() is not None  # a plain clean-up looks only at what was made since the last one
        phase_sessions._clean(env, full=True)
        assert gone() is None
    finally:
        gc.unfreeze()
