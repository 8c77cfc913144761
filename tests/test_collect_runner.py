"""The collect runner on the CPU: phases are faked, the bookkeeping is real."""
import json
import types

import pytest

import synthetic
from collect import cli, env, runner
from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.manifest import MeasuredCeiling


@pytest.fixture
def fake_gpu(monkeypatch):
    """A device and fake phase modules, so the runner's logic runs without CUDA."""
    calls = []
    monkeypatch.setattr(env, "describe_device", lambda: synthetic.device("NVIDIA H200"))
    monkeypatch.setattr(env, "software_versions", lambda: {"python": "3.x"})

    def env_run(ctx):
        calls.append("env")
        return env.EnvResult(device=synthetic.device(), software={"python": "3.x"}, clocks=[], datasheet=None,
                             measured_ceilings=[MeasuredCeiling(name="copy_bandwidth", quantity="bytes", status="ok",
                                                                per_s_median=1e12)])

    def ok_phase(name):
        def run(ctx):
            calls.append(name)
            assert ctx.measured("copy_bandwidth") == 1e12  # env's ceilings reach later phases
            return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": [{"x": 1}]}
        return run

    def crash(ctx):
        calls.append("bench")
        ctx.checkpoint({"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": [{"kept": True}]})
        raise RuntimeError("boom in the middle")

    modules = {name: types.SimpleNamespace(run=ok_phase(name)) for name in runner.PHASE_ORDER}
    modules["env"] = types.SimpleNamespace(run=env_run)
    modules["bench"] = types.SimpleNamespace(run=crash)
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    return calls


def test_failed_phase_is_recorded_and_others_still_run(tmp_path, fake_gpu):
    failed = runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-1"))
    assert failed == 1
    assert fake_gpu == runner.PHASE_ORDER
    m = json.loads((tmp_path / "t-1" / "manifest.json").read_text())
    status = {p["name"]: p for p in m["phases"]}
    # it saved a row before it crashed: partial, so --resume continues it
    assert status["bench"]["status"] == "partial" and "boom in the middle" in status["bench"]["error"]
    assert status["bench"]["rows"] == 1
    assert all(status[p]["status"] == "complete" for p in runner.PHASE_ORDER if p != "bench")
    assert all(status[p]["duration_s"] is not None for p in status)
    # the crashed phase's checkpoint survives: rows measured before the crash are not lost
    assert json.loads((tmp_path / "t-1" / "bench.json").read_text())["rows"] == [{"kept": True}]
    assert m["measured_ceilings"][0]["per_s_median"] == 1e12


def test_checkpoints_are_spaced_and_a_crash_writes_the_rows_since_the_last(tmp_path, monkeypatch):
    """A phase checkpoints after every row; the file is rewritten at most once per interval (each write
    serialises every row so far), and the rows since the last write still land when the phase crashes."""
    from collect import context

    writes = []
    real = context.write_phase_file
    monkeypatch.setattr(context, "write_phase_file", lambda path, result, saved, phase: writes.append(
        len(result["rows"])) or real(path, result, saved, phase))
    monkeypatch.setattr(env, "describe_device", lambda: synthetic.device("NVIDIA H200"))
    monkeypatch.setattr(env, "software_versions", lambda: {"python": "3.x"})

    def bench_run(ctx):
        ticks = iter(range(100))
        ctx.clock, ctx.checkpoint_every_s = lambda: float(next(ticks)), 3.0  # 1 s a call, a write every third
        result = {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": []}
        for n in range(8):
            result["rows"].append({"n": n})
            ctx.checkpoint(result)
        raise RuntimeError("crash after eight rows")

    modules = {name: types.SimpleNamespace(run=lambda ctx: {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id,
                                                            "rows": []}) for name in runner.PHASE_ORDER}
    modules["bench"] = types.SimpleNamespace(run=bench_run)
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    assert runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-c", phases=["bench"])) == 1
    assert writes == [1, 4, 7, 8]  # the first row at once, then every third call, then the crash's flush
    assert [r["n"] for r in json.loads((tmp_path / "t-c" / "bench.json").read_text())["rows"]] == list(range(8))
    rec = next(p for p in json.loads((tmp_path / "t-c" / "manifest.json").read_text())["phases"] if p["name"] == "bench")
    assert rec["status"] == "partial" and rec["rows"] == 8


def test_resume_skips_complete_phases_only(tmp_path, fake_gpu):
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-2"))
    fake_gpu.clear()
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-2", resume=True))
    assert fake_gpu == ["bench"]
    fake_gpu.clear()
    # a different profile is different data: it does not overwrite the quick rows (a new run id holds it)
    before = (tmp_path / "t-2" / "correctness.json").read_bytes()
    assert runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-2", resume=True, profile="full",
                                                   phases=["correctness"])) == 1
    assert fake_gpu == [] and (tmp_path / "t-2" / "correctness.json").read_bytes() == before


def test_default_run_id_is_device_slug_and_date():
    assert runner.device_slug("NVIDIA H200") == "h200"
    assert runner.device_slug("Tesla T4") == "t4"
    assert runner.device_slug("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb"
    assert runner.default_run_id("NVIDIA L4").startswith("l4-20")


def test_cli_rejects_unknown_phase(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["warp-drive"])
    assert "unknown phase warp-drive" in capsys.readouterr().err


def test_cli_defaults_and_flags(tmp_path):
    cfg = cli.parse_args(["bench", "env", "--profile", "full", "--run-id", "x-1", "--resume", "--out", str(tmp_path)])
    assert cfg.phases == ["bench", "env"] and cfg.profile == "full" and cfg.run_id == "x-1" and cfg.resume
    assert cli.parse_args([]).phases == runner.PHASE_ORDER
    assert cli.parse_args(["decode", "--model-path", "/ckpt/gpt2"]).model_path == "/ckpt/gpt2"


def test_no_gpu_is_a_clear_error(monkeypatch, capsys):
    def no_gpu():
        raise RuntimeError("no CUDA GPU is visible to torch")
    monkeypatch.setattr(env, "describe_device", no_gpu)
    assert cli.main(["env"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_atomic_write_keeps_old_file_when_serialization_fails(tmp_path):
    path = write_json_atomic(tmp_path / "f.json", {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temp file left behind


def test_datasheet_lookup_order():
    from collect.schema.datasheets import lookup

    assert lookup("NVIDIA H100 PCIe").key == "h100-pcie"
    assert lookup("NVIDIA H100 80GB HBM3").key == "h100-sxm"
    assert lookup("NVIDIA H200").key == "h200-sxm"
    assert lookup("NVIDIA A100-SXM4-80GB").key == "a100-80gb"
    assert lookup("NVIDIA A100-PCIE-40GB").key == "a100-40gb"
    assert lookup("NVIDIA A10").key == "a10"
    assert lookup("Tesla T4").bf16_tensor_flops_per_s is None
    assert lookup("NVIDIA GeForce RTX 4090") is None


def test_a_later_collect_into_the_same_run_records_its_own_commit(tmp_path, fake_gpu, monkeypatch):
    monkeypatch.setenv("COLLECT_GIT_COMMIT", "a" * 40)
    monkeypatch.setenv("COLLECT_GIT_DIRTY", "0")
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-3",
                                            phases=[p for p in runner.PHASE_ORDER if p != "correctness"]))
    monkeypatch.setenv("COLLECT_GIT_COMMIT", "b" * 40)
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-3", phases=["correctness"]))
    m = json.loads((tmp_path / "t-3" / "manifest.json").read_text())
    assert m["git_commit"] == "b" * 40 and m["git_dirty"] is False
    by_phase = {p["name"]: p["git_commit"] for p in m["phases"]}
    assert by_phase["correctness"] == "b" * 40 and by_phase["env"] == "a" * 40


def test_resume_measures_the_rows_a_complete_phase_skipped_for_time(tmp_path, fake_gpu, monkeypatch):
    """A phase that completed with rows cut by its time budget is not 'done': --resume runs it again,
    handing it the saved rows, and a phase with no skipped row stays skipped."""
    seen = []

    def skips(ctx):
        seen.append(ctx.saved)
        return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id,
                "rows": [{"x": 1, "status": "ok"}, {"x": 2, "status": "skipped"}]}

    monkeypatch.setattr(runner, "phase_module", lambda name: types.SimpleNamespace(run=skips) if name == "correctness"
                        else types.SimpleNamespace(run=lambda ctx: {"schema_version": SCHEMA_VERSION,
                                                                   "run_id": ctx.run_id, "rows": [{"x": 1}]}))
    cfg = dict(out=tmp_path, run_id="t-skip", phases=["correctness", "bench"])
    runner.run_collect(runner.CollectConfig(**cfg))
    assert len(seen) == 1 and not seen[0]
    runner.run_collect(runner.CollectConfig(**cfg, resume=True))
    assert len(seen) == 2 and seen[1]  # run again, with the first run's rows to keep
    assert runner._has_skipped_rows(tmp_path / "t-skip" / "correctness.json")
    assert not runner._has_skipped_rows(tmp_path / "t-skip" / "bench.json")


def test_a_full_collect_fits_its_time_limit_and_each_phase_gets_what_is_left(tmp_path, fake_gpu, monkeypatch, capsys):
    from collect import budget

    clock = {"t": 1000.0}
    monkeypatch.setattr(runner.time, "perf_counter", lambda: clock["t"])  # the one time module budget.py reads too
    seen = {}

    def phase(name, takes):
        def run(ctx):
            seen[name] = ctx.phase_budget(200.0)  # a phase's own budget, as bench or decode asks
            clock["t"] += takes
            return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": []}
        return types.SimpleNamespace(run=run)

    # 530 s for the full profile, scaled for a GPU with less copy bandwidth than an H200 (1 TB/s here)
    limit = budget.TIME_LIMIT_S["full"] * runner.device_choices.budget_scale(1e12).value
    env_module = runner.phase_module("env")
    modules = {"env": env_module, "correctness": phase("correctness", limit - 150), "bench": phase("bench", 100),
               "iterations": phase("iterations", 100), "profile": phase("profile", 10), "decode": phase("decode", 1)}
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="t-limit", profile="full"))
    assert seen["correctness"] == 200.0  # plenty left: the phase keeps its own budget
    assert seen["bench"] == pytest.approx(150.0)  # what is left, below its own 200 s
    assert seen["iterations"] == pytest.approx(50.0)
    assert seen["profile"] == seen["decode"] == budget.MIN_BUDGET_S  # past the limit: they skip their cases
    assert "left of the collect's time limit" in capsys.readouterr().err


def test_the_time_limit_is_a_flag_with_profile_defaults(capsys):
    from collect.budget import TIME_LIMIT_S, collect_deadline, fit_budget

    assert cli.parse_args(["--profile", "full"]).time_limit() == TIME_LIMIT_S["full"]
    assert cli.parse_args([]).time_limit() is None  # quick: no limit
    assert cli.parse_args(["--profile", "full", "--time-limit", "0"]).time_limit() is None
    assert cli.parse_args(["--time-limit", "90"]).time_limit() == 90
    with pytest.raises(SystemExit):
        cli.parse_args(["--time-limit", "-5"])
    assert "--time-limit" in capsys.readouterr().err
    assert collect_deadline(10.0, None) is None and collect_deadline(10.0, 100.0, 2.0) == 210.0
    assert fit_budget(50.0, None) == 50.0 and fit_budget(None, None) is None
    assert fit_budget(50.0, 130.0, now=100.0) == 30.0 and fit_budget(None, 130.0, now=100.0) == 30.0
    assert fit_budget(50.0, 130.0, now=200.0) == 1.0  # past the limit: the phase still writes its skipped cases


def test_each_phase_records_how_its_timed_calls_read_the_clock(tmp_path, fake_gpu, monkeypatch):
    """A phase that timed calls records the spin's method (counters where the stamped spin runs, events where it
    cannot be built); one that timed none records nothing; a resumed phase's kept rows count with the new ones."""
    from collect import spin_clock

    works = {"now": False}
    monkeypatch.setattr(spin_clock, "_works", lambda: works["now"])

    def timed(ctx):  # where the stamped spin cannot run, stamped_spins is None and the events read the clock
        assert spin_clock.stamped_spins(4) is None
        return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": [{"x": 1, "status": "skipped"}]}

    untimed = types.SimpleNamespace(run=lambda ctx: {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id,
                                                     "rows": [{"x": 1}]})
    monkeypatch.setattr(runner, "phase_module", lambda name: types.SimpleNamespace(run=timed) if name == "bench"
                        else untimed)
    cfg = dict(out=tmp_path, run_id="t-clock", phases=["bench", "correctness"])
    runner.run_collect(runner.CollectConfig(**cfg))
    method = lambda: {p["name"]: p.get("sm_clock_method") for p in  # noqa: E731
                      json.loads((tmp_path / "t-clock" / "manifest.json").read_text())["phases"]}
    assert method() == {"bench": "events", "correctness": None}
    works["now"] = True
    monkeypatch.setattr(spin_clock, "StampedSpins", lambda n, kernel: object())
    monkeypatch.setattr(spin_clock, "_kernel", lambda: None)

    def timed_again(ctx):
        assert ctx.saved and spin_clock.stamped_spins(4) is not None
        return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": [{"x": 1, "status": "ok"}]}

    monkeypatch.setattr(runner, "phase_module", lambda name: types.SimpleNamespace(run=timed_again) if name == "bench"
                        else untimed)
    runner.run_collect(runner.CollectConfig(**cfg, resume=True))  # the bench rows it skipped, now with the counters
    assert method()["bench"] == "both"


def test_the_clock_method_of_older_runs_comes_from_when_each_phase_started():
    from collect.schema.migrate import to_version_11

    phases = [dict(name="bench", status="complete", started_utc="2026-12-05T22:40:00+00:00"),
              dict(name="decode", status="complete", started_utc="2026-12-06T05:00:00+00:00"),
              dict(name="iterations", status="failed", started_utc="2026-12-06T05:00:00+00:00"),
              dict(name="correctness", status="complete", started_utc="2026-12-06T05:00:00+00:00")]
    doc = to_version_11({"schema_version": 10, "run_id": "r", "created_utc": "2026-12-05T22:38:00+00:00",
                         "phases": phases})
    assert doc["schema_version"] == 11
    assert [p.get("sm_clock_method") for p in doc["phases"]] == ["events", "counters", None, None]
    assert to_version_11(doc) == doc  # idempotent
    rows = {"schema_version": 10, "run_id": "r", "rows": []}  # a phase file has no phases to mark
    assert to_version_11(rows) == {"schema_version": 11, "run_id": "r", "rows": []}
