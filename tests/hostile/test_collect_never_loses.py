"""Collect never loses a saved row: --resume continues from them, nothing overwrites them, a run
belongs to one GPU, a manifest it does not fully know survives, and files land whole and readable."""
import os

# Must precede the first import of triton (collect.bench imports the kernels): @triton.jit picks the
# interpreter at decoration time, and other test modules run the kernels under it.
os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402
import stat  # noqa: E402
import types  # noqa: E402

import pytest  # noqa: E402

import synthetic  # noqa: E402
from collect import bench, cli, correctness, env, jsonio, runner  # noqa: E402
from collect.schema import SCHEMA_VERSION  # noqa: E402
from collect.schema.bench import BenchFile, BenchRow  # noqa: E402
from collect.schema.manifest import MeasuredCeiling  # noqa: E402

SEQ = (64, 128, 256, 512, 1024)


def bench_cases():
    return [bench.Case("naive", "float16", False, 1, 2, n, 64) for n in SEQ]


@pytest.fixture
def gpu(monkeypatch):
    """A fake GPU and phase modules; the bench phase is real bookkeeping around a fake measurement
    that crashes the process after `crash_after` cases, like a killed collect."""
    state = types.SimpleNamespace(device="NVIDIA H200", crash_after=None, measured=[])
    monkeypatch.setattr(env, "describe_device", lambda: synthetic.device(state.device))
    monkeypatch.setattr(env, "software_versions", lambda: {"python": "3.x"})

    def env_run(ctx):
        return env.EnvResult(device=synthetic.device(state.device), software={}, clocks=[], datasheet=None,
                             measured_ceilings=[MeasuredCeiling(name="copy_bandwidth", quantity="bytes", status="ok",
                                                                per_s_median=1e12)])

    def measure(case):
        if state.crash_after is not None and len(state.measured) >= state.crash_after:
            raise KeyboardInterrupt  # a kill: not a case failure, the phase stops here
        state.measured.append(case.seq_len)
        from collect.timing import CallTimes, DeviceTiming, summarize
        return bench.Measurement(times=CallTimes(device=DeviceTiming(summarize([1.0] * 60)),
                                                 host=summarize([0.04] * 3), loop=None), peak_mem_bytes=1000)

    def bench_run(ctx):
        """collect/bench.py's run() minus the GPU: the same opt-in to saved rows."""
        result = BenchFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, profile=ctx.profile, timing_method="t",
                           backend_choice_method="b", min_timed_runs=50)
        saved = ctx.saved_cases(BenchRow)

        def on_row(row):
            result.rows.append(row)
            ctx.checkpoint(result)
        bench.measure_cases(bench_cases(), measure, on_row, saved=saved, free=lambda: None)
        return result

    def other(name):
        return lambda ctx: {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": []}

    modules = {n: types.SimpleNamespace(run=other(n)) for n in runner.PHASE_ORDER}
    modules["env"] = types.SimpleNamespace(run=env_run)
    modules["bench"] = types.SimpleNamespace(run=bench_run)
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    return state


def collect(tmp_path, *phases, **kw):
    return runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="r-1", phases=list(phases) or ["env", "bench"],
                                                   **kw))


def rows(tmp_path):
    return json.loads((tmp_path / "r-1" / "bench.json").read_text())["rows"]


def test_resume_continues_an_unfinished_phase_from_its_saved_rows(tmp_path, gpu):
    gpu.crash_after = 3
    with pytest.raises(KeyboardInterrupt):
        collect(tmp_path)
    saved = rows(tmp_path)
    assert [r["seq_len"] for r in saved] == [64, 128, 256]
    gpu.crash_after, gpu.measured = None, []
    assert collect(tmp_path, "bench", resume=True) == 0
    assert gpu.measured == [512, 1024]  # only the cases not saved
    after = rows(tmp_path)
    assert [r["seq_len"] for r in after] == list(SEQ) and after[:3] == saved  # saved rows kept as they were
    m = json.loads((tmp_path / "r-1" / "manifest.json").read_text())
    rec = next(p for p in m["phases"] if p["name"] == "bench")
    assert rec["status"] == "complete" and rec["rows"] == 5


def test_a_crash_after_saving_rows_is_recorded_as_partial(tmp_path, gpu):
    gpu.crash_after = 2
    with pytest.raises(KeyboardInterrupt):
        collect(tmp_path)
    m = json.loads((tmp_path / "r-1" / "manifest.json").read_text())
    rec = next(p for p in m["phases"] if p["name"] == "bench")
    assert rec["status"] == "partial" and rec["rows"] == 2 and "interrupted" in rec["error"]


def test_a_phase_without_resume_support_keeps_saved_rows_it_has_not_redone(tmp_path, gpu, monkeypatch):
    gpu.crash_after = 3
    with pytest.raises(KeyboardInterrupt):
        collect(tmp_path)
    saved = rows(tmp_path)
    gpu.crash_after, gpu.measured = 1, []
    # a phase that ignores its saved rows and starts over, then crashes after one case
    monkeypatch.setattr(bench, "measure_cases", _ignoring_saved(bench.measure_cases))
    with pytest.raises(KeyboardInterrupt):
        collect(tmp_path, "bench", resume=True)
    after = rows(tmp_path)
    assert len(after) >= len(saved)  # never fewer rows than were saved
    assert {r["seq_len"] for r in after} == {64, 128, 256}


def _ignoring_saved(fn):
    def measure_cases(*a, saved=None, **kw):
        return fn(*a, **kw)
    return measure_cases


def test_without_resume_saved_rows_are_never_overwritten(tmp_path, gpu, capsys):
    collect(tmp_path)
    before = (tmp_path / "r-1" / "bench.json").read_bytes()
    gpu.measured = []
    assert collect(tmp_path, "bench") == 1
    assert gpu.measured == [] and (tmp_path / "r-1" / "bench.json").read_bytes() == before
    err = capsys.readouterr().err
    assert "bench.json" in err and "5 rows" in err and "--run-id" in err


def test_a_run_from_another_gpu_is_refused(tmp_path, gpu):
    collect(tmp_path)
    gpu.device = "NVIDIA A100-SXM4-80GB"
    with pytest.raises(RuntimeError, match=r"NVIDIA H200.*NVIDIA A100-SXM4-80GB|NVIDIA A100-SXM4-80GB.*NVIDIA H200"):
        collect(tmp_path, "decode")
    m = json.loads((tmp_path / "r-1" / "manifest.json").read_text())
    assert m["device"]["name"] == "NVIDIA H200" and "decode" not in {p["name"] for p in m["phases"]}


def test_the_cli_says_why_a_run_from_another_gpu_is_refused(tmp_path, gpu, capsys):
    collect(tmp_path)
    gpu.device = "NVIDIA A100-SXM4-80GB"
    assert cli.main(["decode", "--run-id", "r-1", "--out", str(tmp_path)]) == 2
    assert "another GPU" in capsys.readouterr().err


def test_manifest_keys_this_code_does_not_know_are_kept(tmp_path, gpu):
    collect(tmp_path, "env")
    path = tmp_path / "r-1" / "manifest.json"
    m = json.loads(path.read_text())
    m["future_field"] = {"kept": [1, 2]}
    m["device"]["future_device_fact"] = 7
    path.write_text(json.dumps(m))
    collect(tmp_path, "decode")
    m = json.loads(path.read_text())
    assert m["future_field"] == {"kept": [1, 2]} and m["device"]["future_device_fact"] == 7


def test_a_newer_schema_version_is_refused(tmp_path, gpu):
    collect(tmp_path, "env")
    path = tmp_path / "r-1" / "manifest.json"
    m = json.loads(path.read_text())
    m["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(m))
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="schema_version"):
        collect(tmp_path, "decode")
    assert path.read_bytes() == before


def test_atomic_write_fsyncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    synced = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (synced.append("replace"), real_replace(a, b))[1])
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"),
                                                 real_fsync(fd))[1])
    jsonio.write_json_atomic(tmp_path / "a.json", {"a": 1})
    assert synced == ["file", "replace", "dir"]


def test_files_are_created_0644(tmp_path):
    old = os.umask(0o022)
    try:
        path = jsonio.write_json_atomic(tmp_path / "a.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_stale_temp_files_are_removed_and_ignored_by_git(tmp_path, gpu):
    run_dir = tmp_path / "r-1"
    run_dir.mkdir()
    stale = run_dir / ".bench.json.abc123.tmp"
    stale.write_text("{half a fi")
    collect(tmp_path, "env")
    assert not stale.exists()
    from conftest import ROOT
    import subprocess
    ignored = subprocess.run(["git", "check-ignore", "-q", "data/runs/x-1/.bench.json.k2j3.tmp"], cwd=ROOT)
    assert ignored.returncode == 0, "temp files of an interrupted write must be git-ignored"


def test_correctness_resume_skips_saved_cases(tmp_path, monkeypatch):
    """collect/correctness.py's own loop, on the CPU: a saved case is not run again."""
    cases = [correctness.Case("triton", "float16", c, 1, 3, n, 64) for n in (1, 17) for c in (False, True)]
    monkeypatch.setattr(correctness, "build_grid", lambda profile, hopper=False, ported=(): cases)
    ran = []

    def fake_case(case, device, tol, configs=None, facts=None):
        ran.append(case)
        return correctness.CorrectnessRow(impl=case.impl, dtype=case.dtype, causal=case.causal, batch=case.batch,
                                          heads=case.heads, seq_len=case.seq_len, head_dim=case.head_dim, status="ok")
    monkeypatch.setattr(correctness, "run_case", fake_case)
    from collect.context import RunContext
    m = synthetic.manifest("c-1")
    saved = {"schema_version": SCHEMA_VERSION, "run_id": "c-1",
             "rows": [jsonio.to_jsonable(fake_case(cases[2], None, None)) | {"reason": "saved"}]}
    ran.clear()
    ctx = RunContext(run_id="c-1", out_dir=tmp_path, profile="quick", manifest=m, phase="correctness",
                     filename="correctness.json", saved=saved)
    result = correctness.run(ctx)
    assert cases[2] not in ran and len(ran) == 3
    assert [r.seq_len for r in result.rows] == [c.seq_len for c in cases] and result.rows[2].reason == "saved"
