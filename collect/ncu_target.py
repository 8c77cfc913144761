"""The program Nsight Compute launches: run each case once inside a profiled range.

    python -m collect.ncu_target SPEC.json RESULT.json

SPEC lists cases ({"id", "impl", "batch", "heads", "seq_len", "head_dim", "dtype", "causal",
"config"}). Each case is warmed up first (compilation, autotuning, cuBLAS heuristics) with the
profiler off; then one call runs between cudaProfilerStart/Stop, inside an NVTX range named
"case=<id>" so every profiled kernel can be attributed to its case. ncu runs with
--profile-from-start off, so nothing outside those ranges is profiled.

RESULT records, per case, whether the call ran (ok / oom / unsupported / error + reason) and the
Triton config that ran. It is written after every case, so a crash keeps what finished.
"""
from __future__ import annotations

import json
import sys
import traceback

WARMUP_CALLS = 2


def _status_of(exc: BaseException) -> str:
    text = str(exc)
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower():
        return "oom"
    # A forced SDPA backend that cannot take this input, a dtype the GPU lacks, a config that
    # does not fit: the implementation does not support the case.
    if isinstance(exc, (ValueError, NotImplementedError)) or "No available kernel" in text:
        return "unsupported"
    if type(exc).__name__ in ("OutOfResources", "BaselineUnavailable", "PathUnsupported"):
        return "unsupported"
    return "error"


def run_case(case: dict) -> dict:
    import torch

    from collect.calls import call_for, forced_backend, pinned_kernel, seeded_inputs
    from collect.shapes import AttentionCase

    out = {"id": case["id"], "status": "ok", "reason": None, "config": None}
    c = AttentionCase(case["impl"], case["dtype"], case["causal"], case["batch"], case["heads"], case["seq_len"],
                      case["head_dim"])
    q, k, v = seeded_inputs(c)
    # A forced SDPA backend is entered outside the profiled range, as every timing phase does.
    with forced_backend(c):
        call = call_for(c, q, k, v, fn=pinned_kernel(c.impl, case.get("config")))
        for _ in range(WARMUP_CALLS):
            call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"case={case['id']}")
        torch.cuda.profiler.start()
        try:
            call()
            torch.cuda.synchronize()
        finally:
            torch.cuda.profiler.stop()
            torch.cuda.nvtx.range_pop()
    if case["impl"] in ("triton", "triton-portable"):
        from kernels import attention

        out["config"] = attention.kernel_config_of_last_call()
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m collect.ncu_target SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import torch

    results = []
    for case in spec["cases"]:
        try:
            res = run_case(case)
        except Exception as exc:  # noqa: BLE001 - one case failing must not lose the others
            res = {"id": case["id"], "status": _status_of(exc), "config": None,
                   "reason": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"}
            if res["status"] == "error":
                traceback.print_exc(file=sys.stderr)
        finally:
            torch.cuda.empty_cache()
        results.append(res)
        print(f"ncu_target: {case['id']}: {res['status']}", file=sys.stderr, flush=True)
        with open(result_path, "w", encoding="utf-8") as f:
            json.dump({"cases": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
