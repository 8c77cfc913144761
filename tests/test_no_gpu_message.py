"""`make collect` with a Python that lacks torch: on a machine without a GPU it says so first and
points to `make serve`, instead of advising a multi-GB install that could not measure anything."""
import importlib.util

import pytest

from collect import cli


@pytest.fixture
def no_torch(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))


@pytest.mark.parametrize("gpu", [False, True], ids=["no-gpu", "gpu"])
def test_the_advice_depends_on_whether_there_is_a_gpu(no_torch, monkeypatch, capsys, gpu):
    monkeypatch.setattr(cli, "_nvidia_gpu", lambda: gpu)
    assert cli.main(["env"]) == 2
    err = capsys.readouterr().err
    assert "cannot import torch" in err and "PYTHON=" in err and "Traceback" not in err
    if gpu:
        assert "pip install torch" in err
    else:
        assert err.index("no NVIDIA GPU") < err.index("torch") and "make serve" in err and "pip install" not in err


def test_the_gpu_check_asks_nvidia_smi_without_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "NVIDIA_GPUS", tmp_path / "no-driver")  # no driver loaded here
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Tesla T4 (UUID: GPU-1234)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli._nvidia_gpu() is True
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver'\nexit 9\n")
    assert cli._nvidia_gpu() is False
    smi.unlink()
    assert cli._nvidia_gpu() is False
