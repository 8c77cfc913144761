"""What a new user meets before any report: the package builds without warnings, and `make test`
can take a CPU-only torch."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_builds_without_deprecation_warnings(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("collect", "render", "kernels"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "Deprecat" not in out and "deprecated" not in out, [ln for ln in out.splitlines() if "eprecat" in ln][:5]
    import zipfile

    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    licenses = [n for n in zipfile.ZipFile(wheel).namelist() if "/licenses/" in n]
    assert [n.rsplit("/", 1)[1] for n in licenses] == ["LICENSE"], "pyproject says MIT: the wheel carries its text"
    assert "MIT License" in (ROOT / "LICENSE").read_text()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_test_takes_the_cpu_wheel_when_asked(tmp_path):
    venv = tmp_path / "venv"  # not created: `make -n` only prints what it would run
    # Under `make test TORCH=cpu` the outer make hands TORCH=cpu down through MAKEFLAGS and the
    # environment: the dry runs must see only the variables each one is given.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES",
                                                                "TORCH")}
    cpu = subprocess.run(["make", "-n", "test", "TORCH=cpu", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                         env=env)
    default = subprocess.run(["make", "-n", "test", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, env=env)
    import tomllib

    pin = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
               if d.startswith("torch=="))
    assert f"pip install -q '{pin}' --index-url https://download.pytorch.org/whl/cpu" in cpu.stdout
    assert cpu.stdout.index("whl/cpu") < cpu.stdout.index(".[test]")  # torch first, so .[test] keeps it
    assert "download.pytorch.org" not in default.stdout and ".[test]" in default.stdout
