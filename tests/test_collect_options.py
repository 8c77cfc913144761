"""The collect options a T4 user (and a rehearsal of a T4) needs, on the CPU with faked phases:
--force-portable, --max-memory, the rehearsal setting, a phase that does not apply, and a Python
without torch."""
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import synthetic
from collect import cli, device_choices, env, runner
from collect.budget import PHASE_BUDGET_ENVS
from collect.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
KERNEL_ENV = (device_choices.PORTABLE_ONLY_ENV, device_choices.TUNE_AS_ENV, device_choices.REHEARSE_ENV,
              device_choices.REHEARSE_TARGET_ENV)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """cli.apply_environment writes os.environ (for child processes): restore it after each test."""
    for k in KERNEL_ENV:
        monkeypatch.delenv(k, raising=False)
    yield
    for k in KERNEL_ENV:
        os.environ.pop(k, None)


@pytest.fixture
def phases(monkeypatch):
    """Fake phases on a fake H200; each records what its RunContext offered."""
    seen = {}
    caps = []
    monkeypatch.setattr(env, "describe_device", lambda: synthetic.device("NVIDIA H200"))
    monkeypatch.setattr(env, "software_versions", lambda: {"python": "3.x"})
    monkeypatch.setattr(runner, "limit_memory", lambda device, limit: caps.append(limit))

    def env_run(ctx):
        return env.EnvResult(device=synthetic.device(), software={}, clocks=[], datasheet=None, measured_ceilings=[])

    def phase(name):
        def run(ctx):
            seen[name] = dict(facts=ctx.facts, memory=ctx.memory_limit_bytes)
            if name == "iterations":
                why = device_choices.iterations_unsupported(ctx.facts)
                if why:
                    ctx.unsupported(why)
            return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": []}
        return run

    modules = {name: types.SimpleNamespace(run=phase(name)) for name in runner.PHASE_ORDER}
    modules["env"] = types.SimpleNamespace(run=env_run)
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    return types.SimpleNamespace(seen=seen, caps=caps)


def test_force_portable_reaches_child_processes_through_the_environment():
    cfg = cli.parse_args(["bench", "--force-portable"])
    assert cfg.force_portable and cfg.phases == ["bench"]
    cli.apply_environment(cfg)
    assert os.environ[device_choices.PORTABLE_ONLY_ENV] == "1"
    child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ['{device_choices.PORTABLE_ONLY_ENV}'])"],
                           capture_output=True, text=True)
    assert child.stdout.strip() == "1"


def test_max_memory_takes_a_size_and_refuses_nonsense(capsys):
    assert cli.parse_args(["--max-memory", "15GiB"]).max_memory == 15 * 2**30
    assert cli.parse_args([]).max_memory is None
    with pytest.raises(SystemExit):
        cli.parse_args(["--max-memory", "a lot"])
    assert "15GiB" in capsys.readouterr().err


def test_max_memory_caps_the_phases_and_is_recorded(tmp_path, phases):
    cap = 15 * 2**30
    assert runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="r", max_memory=cap)) == 0
    assert phases.caps == [cap]
    assert all(s["memory"] == cap for s in phases.seen.values())
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert any("capped" in n and str(cap) in n for n in m["notes"]) and m["rehearsal"] is None
    assert {p["name"]: p["status"] for p in m["phases"]}["iterations"] == "complete"  # an H200 runs it


def test_without_options_nothing_is_capped(tmp_path, phases):
    runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="r"))
    assert phases.caps == [None]
    assert phases.seen["bench"]["memory"] == synthetic.device().memory_bytes


def test_a_t4_rehearsal_chooses_as_a_t4_and_says_it_is_a_rehearsal(tmp_path, phases, monkeypatch):
    monkeypatch.setenv(device_choices.REHEARSE_ENV, "t4")
    cfg = cli.parse_args(["--max-memory", "15GiB", "--out", str(tmp_path)])
    cli.apply_environment(cfg)
    # A T4's paths (its Turing kernel through its sm75 PTX), not only the portable kernel.
    assert os.environ[device_choices.REHEARSE_TARGET_ENV] == "sm75"
    assert device_choices.PORTABLE_ONLY_ENV not in os.environ
    assert os.environ[device_choices.TUNE_AS_ENV] == "7.5:65536"  # the portable autotuner's T4 tiles
    assert runner.run_collect(cfg) == 0
    (run_dir,) = tmp_path.iterdir()
    assert "rehearse-t4" in run_dir.name
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["rehearsal"] == "t4" and m["device"]["name"] == "NVIDIA H200"  # measured on the H200, labelled
    assert any(n.startswith("Rehearsal:") and "Tesla T4" in n for n in m["notes"])
    assert all(s["facts"].name == "Tesla T4" for s in phases.seen.values())
    assert phases.caps == [device_choices.T4.memory_bytes]  # a T4's memory, below the 15 GiB asked for
    it = {p["name"]: p for p in m["phases"]}["iterations"]
    assert it["status"] == "unsupported" and "Hopper" in it["reason"] and it["error"] is None
    assert all(p["status"] == "complete" for p in m["phases"] if p["name"] != "iterations")


def test_an_unknown_rehearsal_device_is_refused(monkeypatch, capsys):
    monkeypatch.setenv(device_choices.REHEARSE_ENV, "v100")
    with pytest.raises(SystemExit):
        cli.parse_args([])
    assert "t4" in capsys.readouterr().err


def test_a_python_without_torch_is_told_what_is_needed(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert cli.main(["env"]) == 2
    err = capsys.readouterr().err
    assert "torch" in err and "PYTHON=" in err and "Traceback" not in err


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_collect_with_a_torchless_python_names_python(tmp_path):
    bare = tmp_path / "python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")  # no site-packages: no torch
    bare.chmod(0o755)
    proc = subprocess.run(["make", "-s", "collect", f"PYTHON={bare}", "PHASES=env"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "PYTHON=" in proc.stderr and "torch" in proc.stderr and "ModuleNotFoundError" not in proc.stderr


def test_a_rehearsals_recorded_command_says_it_was_one(tmp_path, phases, monkeypatch):
    monkeypatch.setenv(device_choices.REHEARSE_ENV, "t4")
    assert cli.main(["bench", "--out", str(tmp_path), "--run-id", "r"]) == 0
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["command"].startswith("COLLECT_REHEARSE_DEVICE=t4 python -m collect bench")


def test_a_budget_override_is_part_of_the_recorded_command(tmp_path, phases, monkeypatch):
    # Run h200-20261201e's decode pass ran with DECODE_BUDGET_S=0; its recorded command left that out,
    # so the Reproduce page's re-run would have skipped rows the run holds.
    monkeypatch.delenv(device_choices.REHEARSE_ENV, raising=False)
    for name in PHASE_BUDGET_ENVS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DECODE_BUDGET_S", "0")
    assert cli.main(["bench", "--out", str(tmp_path), "--run-id", "r"]) == 0
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["command"] == "DECODE_BUDGET_S=0 python -m collect bench --out " + str(tmp_path) + " --run-id r"
    monkeypatch.delenv("DECODE_BUDGET_S")
    assert cli.recorded_command(["decode"]) == "python -m collect decode"
