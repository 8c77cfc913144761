"""No Nsight Compute, or no permission to profile: the profile phase says why and how to fix it,
and the Profiling page shows the fix. On the CPU, with stand-in `ncu` scripts."""
import sys

import pytest

from collect import ncu_parse, ncu_setup, profile
from collect.ncu_parse import NcuFailure
from collect.schema import SCHEMA_VERSION
from collect.schema.profile import ProfileFile
from render import escape
from test_profile_phase import render_page, write_run

CASES = profile.main_cases(quick=True, tiny=True)


def _script(folder, name, body):
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return path


def test_ncu_set_to_a_missing_binary_means_no_profiler_even_with_ncu_on_path(tmp_path, monkeypatch):
    on_path = tmp_path / "bin"
    on_path.mkdir()
    _script(on_path, "ncu", "print('Version 2025.1')")
    monkeypatch.setenv("PATH", f"{on_path}:/usr/bin:/bin")
    monkeypatch.delenv("NCU", raising=False)
    assert profile.find_ncu() == str(on_path / "ncu")
    monkeypatch.setenv("NCU", str(tmp_path / "no-ncu-here"))
    assert profile.find_ncu() is None
    path, why = ncu_setup.locate_ncu()
    assert path is None and "NCU" in why and "no-ncu-here" in why


def test_ncu_set_to_a_binary_is_used(tmp_path, monkeypatch):
    exe = _script(tmp_path, "my-ncu", "print('Version 2025.1')")
    monkeypatch.setenv("NCU", str(exe))
    assert profile.find_ncu() == str(exe)


def test_without_ncu_every_case_says_why_and_the_file_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("NCU", str(tmp_path / "missing"))
    pf = profile.profile_cases(CASES, tmp_path / "work", "r", cuda_version="12.8")
    assert pf.status == "unsupported" and "missing" in pf.reason
    assert "apt-get install -y cuda-nsight-compute-12-8" in pf.fix and "NCU=" in pf.fix
    assert "PHASES=profile" in pf.fix  # only the profile phase needs running again
    assert [r.status for r in pf.impls] == ["unsupported"] * len(CASES)


def test_no_ncu_on_a_stock_machine_names_the_places_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu_setup, "INSTALL_FOLDERS", (str(tmp_path / "nowhere" / "ncu"),))
    why, fix = profile.ncu_missing(None)
    assert "not installed" in why and "PATH" in why
    assert "cuda-nsight-compute-<major>-<minor>" in fix


PERMISSION_DENIED = """\
import json, os
a = sys.argv[1:]
if a == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)"); sys.exit(0)
if a == ["--query-metrics"]:
    sys.exit(1)
print("==PROF== Connected to process 123")
print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
      "on the target device 0.")
sys.exit(1)
"""


def test_no_permission_to_profile_records_the_modprobe_option_and_root(tmp_path, monkeypatch):
    exe = _script(tmp_path, "ncu", PERMISSION_DENIED)
    monkeypatch.setenv("NCU", str(exe))
    pf = profile.profile_cases(CASES, tmp_path / "work", "r")
    assert pf.status == "error" and "ERR_NVGPUCTRPERM" in pf.reason
    assert "NVreg_RestrictProfilingToAdminUsers=0" in pf.fix and "root" in pf.fix and "modprobe.d" in pf.fix
    assert all(r.status == "error" for r in pf.impls)


def test_the_console_check_carries_the_fix():
    with pytest.raises(NcuFailure) as exc:
        ncu_parse.check_console("==ERROR== ERR_NVGPUCTRPERM - no permission", 1)
    assert exc.value.fix == ncu_setup.permission_fix()


@pytest.mark.parametrize("fix, shown", [
    (ncu_setup.permission_fix(), escape.text("NVreg_RestrictProfilingToAdminUsers=0")),
    (ncu_setup.install_fix("12.8"), escape.text("cuda-nsight-compute-12-8")),
])
def test_the_profiling_page_shows_the_fix(tmp_path, fix, shown):
    pf = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="unsupported",
                     reason="Nsight Compute was not found", fix=fix)
    write_run(tmp_path, pf)
    text = render_page(tmp_path)
    assert "How to get a profile" in text and shown in text


def test_a_fix_from_the_data_is_shown_as_text_not_markdown(tmp_path):
    pf = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="error",
                     reason="no permission", fix="<script>alert(1)</script> [a](javascript:x) **bold**")
    write_run(tmp_path, pf)
    text = render_page(tmp_path)
    assert "<script>alert" not in text and "](javascript" not in text and "**bold**" not in text
