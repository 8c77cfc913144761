"""A Triton other than the one the kernels were measured on: everything imports, flash_attention keeps
to the portable kernel by itself and says why, and a faster path that does not compile or import
becomes an unsupported path with its reason, never a crash. `make test-range` runs this file with
every Triton of the supported range (kernels/supported.py)."""
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernels.attention import dispatch
from kernels import supported
from kernels.attention.dispatch import PathUnsupported

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with this repository first on the path, the interpreter off."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, *(("-c", code) if code else ()), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_kernels_collect_and_the_collect_cli_load_on_this_triton():
    proc = _python("import triton, kernels, collect, collect.cli, collect.env; print(triton.__version__)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == supported.triton_version()
    help_ = _python("", "-m", "collect", "--help")
    assert help_.returncode == 0 and "PHASE" in help_.stdout, help_.stderr[-3000:]


def test_a_gluon_that_does_not_import_costs_its_path_not_the_import():
    # A Triton release without Gluon (or with it moved): kernels, collect and the CLI still load, and
    # the Gluon path says why it cannot run.
    proc = _python("""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"  # CPU tensors reach the path check
sys.modules["triton.experimental.gluon"] = None  # makes every import of it fail
import torch, kernels, collect.cli, collect.env
from kernels.attention import dispatch
assert "gluon" in dispatch.path_names()
q = torch.zeros(1, 1, 8, 64, dtype=torch.float16)
try:
    kernels.flash_attention(q, q, q, path="gluon")
except dispatch.PathUnsupported as exc:
    print(exc)
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the Gluon path cannot run here: its kernels do not import with Triton" in proc.stdout
    assert "use path='portable'" in proc.stdout


def _fake_cuda(shape=(2, 8, 4096, 64)):
    return SimpleNamespace(dtype=torch.float16, is_cuda=True, device=torch.device("cuda", 0), shape=shape)


@pytest.fixture
def hopper_gpu(monkeypatch):
    """A GPU where the Hopper and Gluon paths are available, the interpreter off."""
    for name in ("hopper", "gluon"):
        monkeypatch.setitem(dispatch._PATHS, name, dataclasses.replace(dispatch._PATHS[name],
                                                                       available=lambda device: (True, "")))
    monkeypatch.setattr(dispatch, "interpreting", lambda: False)
    monkeypatch.setattr(dispatch.torch.cuda, "is_available", lambda: True)
    dispatch.portable_only.cache_clear()
    yield
    dispatch.portable_only.cache_clear()


@pytest.mark.parametrize("version", supported.SUPPORTED_TRITON)
def test_the_faster_paths_are_chosen_only_on_the_triton_they_were_measured_on(hopper_gpu, monkeypatch, version):
    monkeypatch.setattr(supported, "triton_version", lambda: version)
    name, why = dispatch.choose_path(_fake_cuda())
    if version in supported.MEASURED_TRITON:
        assert name == "gluon" and why.startswith("measured rule")
        assert dispatch.path_runs("hopper", torch.device("cuda", 0))
    else:
        assert name == "portable" and f"Triton {version}" in why and "measured on" in why
        assert dispatch.path_runs("portable", torch.device("cuda", 0))
        assert not dispatch.path_runs("hopper", torch.device("cuda", 0))
    assert dispatch.route((2, 8, 4096, 64), torch.float16, "cuda:0")[0] == name
    # A GPU where no faster path runs at all (a T4) is told that, whichever Triton it has.
    for path in ("hopper", "gluon"):
        monkeypatch.setitem(dispatch._PATHS, path, dataclasses.replace(dispatch._PATHS[path],
                                                                       available=lambda device: (False, "sm75")))
    assert dispatch.choose_path(_fake_cuda()) == ("portable", "no faster path is available for this dtype and device")


def test_the_supported_range_holds_the_measured_triton_and_the_test_install():
    import tomllib

    assert set(supported.MEASURED_TRITON) <= set(supported.SUPPORTED_TRITON)
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = {d.split("==")[0]: d.split("==")[1].split()[0] for d in test_extra if "==" in d}
    assert (pins["torch"], pins["triton"]) in supported.SUPPORTED
    readme = (ROOT / "README.md").read_text()
    for torch_version, triton_version in supported.SUPPORTED:
        assert f"| {torch_version} | {triton_version} |" in readme, "README's supported-versions table"


@pytest.fixture
def flaky_path():
    """A registered path whose run raises what the test puts in .exc (a compile failure by default)."""
    from triton.runtime.errors import PTXASError

    state = SimpleNamespace(exc=PTXASError("ptxas fatal: Unresolved extern function"), runs=0)

    def run(q, k, v, causal, sm_scale, config, launcher):
        state.runs += 1
        raise state.exc

    dispatch.register_path(dispatch.KernelPath(name="flaky", title="Flaky", dtypes=(torch.float32,),
                                               available=lambda device: (True, ""), run=run))
    yield state
    dispatch._PATHS.pop("flaky")
    dispatch._BROKEN.pop("flaky", None)


def test_a_path_that_does_not_compile_is_refused_with_its_reason_from_then_on(flaky_path):
    q = torch.zeros(1, 1, 8, 16)
    with pytest.raises(PathUnsupported, match=r"Flaky path cannot run here: it does not compile with Triton "
                                              r"[\d.]+ \(PTXASError: .*ptxas fatal.*use path='portable'"):
        dispatch.flash_attention(q, q, q, path="flaky")
    with pytest.raises(PathUnsupported, match="does not compile"):
        dispatch.flash_attention(q, q, q, path="flaky")
    assert flaky_path.runs == 1  # refused without trying again
    assert not dispatch._runs_here("flaky", q.device, q.dtype)  # and never chosen by itself


def test_any_other_failure_of_a_path_is_not_taken_for_a_compile_failure(flaky_path):
    flaky_path.exc = RuntimeError("CUDA error: an illegal memory access was encountered")
    q = torch.zeros(1, 1, 8, 16)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        dispatch.flash_attention(q, q, q, path="flaky")
    assert "flaky" not in dispatch._BROKEN


def test_a_path_this_triton_cannot_run_is_an_unsupported_row_in_every_phase():
    from test_bench_phase import case as bench_case
    from test_iterations import case as iterations_case

    from collect import bench, correctness, iterations

    exc = PathUnsupported("the Gluon path cannot run here: it does not compile with Triton 3.9.0 (...)")
    assert bench.failure_row(bench_case(), exc).status == "unsupported"
    row = iterations.failure_row(iterations_case(), exc)
    assert row.status == "unsupported" and "does not compile with Triton 3.9.0" in row.reason
    assert correctness.is_unsupported(exc) and not correctness.is_unsupported(ValueError("bad input"))
