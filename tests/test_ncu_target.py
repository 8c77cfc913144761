"""collect/ncu_target.py, the program Nsight Compute launches, without a GPU: each case's failure
becomes its status (out of memory, unsupported, error), the others still run, and the result file
holds every case finished so far."""
import json

import pytest

from collect import ncu_target
from kernels.attention.dispatch import PathUnsupported


class OutOfResources(Exception):
    """Stands in for triton.runtime.errors.OutOfResources (matched by name)."""


@pytest.mark.parametrize("exc, status", [
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (RuntimeError("No available kernel. Aborting execution."), "unsupported"),
    (ValueError("head_dim must be one of (16, 32, 64, 128, 256), got 96"), "unsupported"),
    (PathUnsupported("the Gluon path cannot run here: it does not compile with Triton 3.9.0"), "unsupported"),
    (OutOfResources("out of resource: shared memory"), "unsupported"),
    (RuntimeError("CUDA error: an illegal memory access was encountered"), "error"),
])
def test_a_failure_is_the_cases_status(exc, status):
    assert ncu_target._status_of(exc) == status


def test_every_case_gets_a_result_and_the_file_is_written_after_each(tmp_path, monkeypatch, capsys):
    spec, result = tmp_path / "spec.json", tmp_path / "result.json"
    spec.write_text(json.dumps({"cases": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}))
    seen = []

    def run_case(case):
        if seen:  # the file already holds every earlier case when the next one starts
            assert [r["id"] for r in json.loads(result.read_text())["cases"]] == seen
        seen.append(case["id"])
        if case["id"] == "b":
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return {"id": case["id"], "status": "ok", "reason": None, "config": {"BLOCK_M": 64}}

    monkeypatch.setattr(ncu_target, "run_case", run_case)
    assert ncu_target.main([str(spec), str(result)]) == 0
    cases = json.loads(result.read_text())["cases"]
    assert [(c["id"], c["status"]) for c in cases] == [("a", "ok"), ("b", "oom"), ("c", "ok")]
    assert cases[1]["reason"].startswith("RuntimeError: CUDA out of memory") and cases[1]["config"] is None
    assert "ncu_target: b: oom" in capsys.readouterr().err


def test_it_says_how_to_call_it():
    assert ncu_target.main(["only-one.json"]) == 2
