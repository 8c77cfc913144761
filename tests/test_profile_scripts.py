"""The two Nsight Compute scripts of issues 41 and 44 read their exports right: the fused decode step's raw
page (scripts/profile_fused_step.py) and a SASS source page's executions by opcode
(scripts/profile_attention_sass.py), on real exports in tests/fixtures/ncu/."""
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures" / "ncu"


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(sys.modules[name])
    module = sys.modules[name]
    return module


def test_the_fused_step_summary_has_each_kernel_with_its_role_span_and_stalls():
    fused = _script("profile_fused_step")
    recs = fused.summarize((FIX / "fused_step" / "raw.csv").read_text())
    assert [r["role"] for r in recs] == ["embed", "qkv", "attention", "residual", "ln_linear", "residual"]
    for r in recs:
        assert r["duration_ns"] > 1000 and r["registers"] > 0 and r["grid"] >= 1
        assert 0 < r["sm_busy_share"] <= 1  # active cycles can never exceed the kernel's span
        reasons = [v for _, v in r["top_stalls"]]
        assert len(reasons) <= 4 and reasons == sorted(reasons, reverse=True)
    attention = recs[2]
    assert attention["dram_read_bytes"] > 10e6 and attention["sm_busy_share"] > recs[3]["sm_busy_share"]


def test_the_fused_step_summary_skips_a_ragged_row():
    fused = _script("profile_fused_step")
    text = (FIX / "fused_step" / "raw.csv").read_text().rstrip("\n") + '\n"99","cut short"\n'
    assert len(fused.summarize(text)) == 6


def test_the_sass_summary_counts_executions_per_tensor_instruction_by_opcode_family():
    sass = _script("profile_attention_sass")
    s = sass.summarize((FIX / "persistent" / "source_sass.csv").read_text())
    per = s["per_tensor_instruction"]
    assert per["HMMA"] == 1.0  # the unit: executions of each family per tensor-core instruction
    assert s["instructions"] == pytest.approx(sum(per.values()) * s["tensor_instructions"], rel=0.01)
    assert "MUFU" in per and not any("." in op for op in per)  # MUFU.EX2 counts as MUFU
    shares = list(s["sample_share_pct"].values())  # the 25 families sampled most, of all samples
    assert shares == sorted(shares, reverse=True) and 90 < sum(shares) <= 100.01


def test_the_sass_summary_of_a_page_without_rows_says_so():
    assert "error" in _script("profile_attention_sass").summarize('"Kernel Name","k"\n"Address","Source"\n')


def test_the_sweeps_checks_give_every_program_a_walk_of_several_tiles_at_odd_and_even_places():
    """A version whose hand-over between a program's query tiles is wrong (g34, g35: every odd place of a walk) passed
    checks where no program took a second tile; the checks must reach such walks for every tile size of the
    warp-specialized kernel, on a GPU with as many SMs as the H200, before the sweep times anything."""
    import math

    from kernels.attention.gluon_versions import GLUON_VERSIONS, version_plan

    sweep = _script("sweep_versions")
    sms = 132
    tile_rows = {version_plan(ver, d).block_m for ver in GLUON_VERSIONS if ver.kernel == "ws" for d in (64, 128)}
    assert tile_rows >= {128, 192}
    for rows in tile_rows:
        walks = [math.ceil(b * h * math.ceil(n / rows) / sms) for b, h, n in sweep.CHECKS]
        assert max(walks) >= 4, (rows, walks)  # places 0-3 at least: two odd, two even
    assert any(n % 64 for _, _, n in sweep.CHECKS)  # and a ragged end, where rows past seq_len are clipped


def test_the_sweep_measures_each_candidate_against_the_fastest_yardstick_timed_before_it():
    """Issue 41 judges ours against the fastest other implementation, FlashAttention-4 or cuDNN, whichever won at that
    shape: the sweep's rows carry that ratio beside the one against FlashAttention-4."""
    sweep = _script("sweep_versions")
    yard = {}
    assert sweep.against_yardsticks("fa4", 1.0, yard) == {}
    assert sweep.against_yardsticks("sdpa-cudnn", 0.8, yard) == {"fa4_over_ours": 1.25}  # cuDNN against FA4, as before
    row = sweep.against_yardsticks("g37", 0.9, yard)
    assert row["fa4_over_ours"] == 1.0 / 0.9 and row["fastest_other"] == "sdpa-cudnn"
    assert abs(row["fastest_other_over_ours"] - 0.8 / 0.9) < 1e-12
    # FlashAttention-4 not installed: cuDNN alone is the yardstick, and no FlashAttention-4 ratio is made up
    alone = {}
    sweep.against_yardsticks("sdpa-cudnn", 2.0, alone)
    assert sweep.against_yardsticks("g32", 1.0, alone) == {"fastest_other": "sdpa-cudnn", "fastest_other_over_ours": 2.0}
    assert sweep.against_yardsticks("g32", 1.0, {}) == {}


def test_a_step_that_never_returns_ends_the_sweep_with_its_name_in_the_results(tmp_path):
    """A chained step that deadlocked spent a whole device call (2026-12-04): the watchdog ends the process after
    --hang-s, and the results name the step that hung beside the rows written before it."""
    import json
    import time

    sweep = _script("sweep_versions")
    res = sweep.Results(tmp_path / "sweep.json", dict(script="test"))
    res.add("rows", dict(impl="g33", status="ok"))
    exits = []
    dog = sweep.Watchdog(res, hang_s=0.2, exit=exits.append)
    dog.step("g35 d64 causal bf16 B2 H8 N8192")
    deadline = time.monotonic() + 10
    while not exits and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exits == [3]
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert doc["hung"]["step"] == "g35 d64 causal bf16 B2 H8 N8192" and doc["hung"]["after_s"] >= 0.2
    assert doc["rows"] == [dict(impl="g33", status="ok")] and doc["done"] is False


def test_steps_that_return_keep_the_watchdog_quiet(tmp_path):
    import time

    sweep = _script("sweep_versions")
    res = sweep.Results(tmp_path / "sweep.json", dict(script="test"))
    exits = []
    dog = sweep.Watchdog(res, hang_s=0.4, exit=exits.append)
    for i in range(6):
        dog.step(f"case {i}")
        time.sleep(0.1)
    dog.stop()
    time.sleep(0.3)
    assert exits == [] and "hung" not in res.doc
    assert sweep.Watchdog(res, hang_s=0, exit=exits.append).thread.is_alive() is False  # --hang-s 0: no watch


def test_the_persistent_sweep_takes_graph_tunings_and_restores_the_module_tuning():
    """--graph-tuning rows change fields of fused_linear.TUNING in place (the launch helpers bind that object as a
    default argument) for their row only; a field the command line cannot set, or a value that is no number, is an
    error that names the fields it takes."""
    from kernels.decode import fused_linear

    sweep = _script("sweep_persistent")
    a = sweep.parse(["--tilings", "", "--caches", "bf16,int8", "--graph-tuning", "max_registers=96",
                     "--graph-tuning", "prefetch_tiles=0,late_dependents_mib=None,pdl=False"])
    assert a.tilings == () and a.caches == ("bf16", "int8")
    assert a.graph_tunings == ({"max_registers": 96}, {"prefetch_tiles": 0, "late_dependents_mib": None, "pdl": False})
    before = dataclasses.asdict(fused_linear.TUNING)
    with pytest.raises(RuntimeError):
        with sweep.tuned({"max_registers": 96, "pdl": False}):
            assert fused_linear.TUNING.max_registers == 96 and fused_linear.TUNING.pdl is False
            raise RuntimeError("a row that fails")
    assert dataclasses.asdict(fused_linear.TUNING) == before
    for bad in ("few_rows=1", "max_registers=lots", "max_registers"):
        with pytest.raises(SystemExit):
            sweep.parse(["--graph-tuning", bad])


def test_the_persistent_sweep_takes_rows_of_the_warp_specialized_step():
    sweep = _script("sweep_persistent")
    a = sweep.parse(["--tilings", "", "--ws-warps", "4,8", "--ws-uncapped"])
    assert a.ws_warps == (4, 8) and a.ws_uncapped
    c = sweep.parse(["--ws-row", "stages=16,per_op_cap=False", "--ws-row", "stages=12"])
    assert c.ws_rows == ({"stages": 16, "per_op_cap": False}, {"stages": 12})
    for bad in ("tiling=3", "stages=lots", "per_op_cap", "l2_ahead=16"):  # l2_ahead measured slower and is gone
        with pytest.raises(SystemExit):
            sweep.parse(["--ws-row", bad])
    b = sweep.parse([])
    assert b.ws_warps == () and not b.ws_uncapped  # the plain-Triton tilings only, as before
    profile = _script("profile_persistent")
    assert profile.parse(["--step", "persistent-ws"]).step == "persistent-ws"
    with pytest.raises(SystemExit):
        profile.parse(["--step", "graph"])


def test_the_persistent_sweeps_trace_row_says_how_each_operations_sms_parted(monkeypatch):
    from kernels.decode import persistent_trace
    from kernels.decode.persistent_plan import KernelOp, StepPlan, Tile

    ops = (KernelOp("layer 0 qkv", 2, 100, 1, "qkv"), KernelOp("logits", 2, 100, 1, "head"))
    plan = StepPlan(ops, ((Tile(0, 0), Tile(1, 0)), (Tile(0, 1), Tile(1, 1))))
    trace = torch.tensor([[[1000, 1000, 1400], [1400, 1500, 1900]],
                          [[1000, 1000, 1600], [1600, 1700, 2000]]], dtype=torch.int64)
    monkeypatch.setattr(persistent_trace, "traced_op_times", lambda session, read: read(trace, plan, ops))
    row = _script("sweep_persistent").traced_step(object())
    assert row["traced_step_ms"] == pytest.approx(1e-3) and row["role_ms"] == pytest.approx({"qkv": 6e-4, "head": 4e-4})
    qkv = next(o for o in row["slowest_operations"] if o["name"] == "layer 0 qkv")
    assert (qkv["median_sm_done_us"], qkv["last_sm_late_us"], qkv["last_sm"]) == (pytest.approx(0.5), pytest.approx(0.1), 1)
    assert row["stragglers"]["most_often_last_sm"] == 1 and row["stragglers"]["its_share_of_operations"] == 1.0
    # the logits: the lists past their waits at 1500 and 1700 (median: qkv's end, 1600), done at 1900 and 2000
    head = row["role_split_ms"]["head"]
    assert (head["handoff_ms"], head["work_ms"], head["late_ms"]) == pytest.approx((0, 3.5e-4, 5e-5))
