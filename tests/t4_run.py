"""A synthetic Tesla T4 run, made from a committed H100 run as collect would have written it on a T4.

What a T4 changes, as collect decides it (collect/device_choices.py, collect/bench.py,
kernels/attention/flash_attn4.py): no bfloat16 (its rows `unsupported`), no FlashAttention-4 (compute
capability 8.0+), no SDPA flash or cuDNN backend (8.0+, so SDPA picks the efficient one), the iterations
phase `unsupported`, decode in float16, the float16 kernel the Turing one. Times are scaled to a T4's
bandwidth. Written to a tmp folder only, never to data/runs.
"""
from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from pathlib import Path

from collect.device_choices import T4, decode_dtype, iterations_unsupported, turing_path
from collect.schema.datasheets import lookup

SOURCE = Path(__file__).resolve().parent.parent / "data" / "runs" / "h100-20261205b"
RUN_ID = "t4-20261206"
CREATED = "2026-12-06T06:00:00+00:00"
SLOW = 10.0  # a T4 moves about a tenth of an H100's bytes per second
T4_MEMORY = T4.memory_bytes
FA4_REASON = "FlashAttention-4 needs compute capability 8.0 or newer; this GPU is 7.5"
BF16_REASON = "this GPU has no bfloat16 tensor-core support"
SDPA_REASON = {"flash": "No available kernel. Aborting execution. (Flash attention requires sm80 or newer here)",
               "cudnn": "No available kernel. Aborting execution. (cuDNN attention requires sm80 or newer)"}
TIMED = ("latency_ms_median", "latency_ms_p10", "latency_ms_p90", "loop_ms_median", "loop_ms_p10", "loop_ms_p90")


def _read(name: str) -> dict:
    return json.loads(gzip.decompress((SOURCE / f"{name}.json.gz").read_bytes()))


def _clear(row: dict, keep: tuple[str, ...], status: str, reason: str) -> dict:
    out = {k: (v if k in keep else None) for k, v in row.items()}
    out.update(status=status, reason=reason)
    if "latency_samples_ms" in out:
        out["latency_samples_ms"] = None
    if "kernel_config" in out:
        out["kernel_config"] = {}
    return out


CASE = ("impl", "backend_requested", "dtype", "causal", "batch", "heads", "seq_len", "head_dim", "flops",
        "input_bytes", "model", "variant", "context", "new_tokens", "series", "seed", "layout", "built_for", "ran_on")


def manifest() -> dict:
    m = json.loads((SOURCE / "manifest.json").read_text())
    m["run_id"], m["created_utc"], m["updated_utc"] = RUN_ID, CREATED, "2026-12-06T06:20:00+00:00"
    m["command"] = f"python -m collect --profile full --run-id {RUN_ID}"
    m["kernel_version"] = "v0-portable"
    dev = dataclasses.asdict(T4)
    dev.update(driver_version="550.54.15", cuda_version="12.4")
    m["device"] = {k: v for k, v in dev.items()}
    m["software"].pop("flash-attn-4", None)
    m["software"]["torch"] = "2.11.0+cu124"
    for c in m["clocks"]:
        c["sm_clock_mhz"] = min(c["sm_clock_mhz"], 1590.0)
        c["mem_clock_mhz"] = 5001.0
        c["power_w"] = min(c.get("power_w") or 30.0, 70.0)
    m["datasheet"] = dataclasses.asdict(lookup("Tesla T4"))
    for p in m["phases"]:  # a run collected now reads the clock from the stamped spin's counters
        p["sm_clock_method"] = "counters" if p.get("sm_clock_method") else None
    scale = {"copy_bandwidth": 0.08, "l2_bandwidth": 0.1, "smem_bandwidth": 0.1, "matmul_fp16": 0.055,
             "matmul_fp32": 0.15}
    ceilings = []
    for c in m["measured_ceilings"]:
        if c["name"] == "matmul_bf16":
            c = {**c, "status": "unsupported", "reason": "this GPU has no bfloat16 tensor cores", "per_s_median": None,
                 "per_s_p10": None, "per_s_p90": None, "sm_clock_mhz": None, "sweep": []}
        elif c["name"] in scale:
            s = scale[c["name"]]
            for k in ("per_s_median", "per_s_p10", "per_s_p90"):
                c[k] *= s
            for p in c.get("sweep") or []:
                p["per_s_median"] *= s
                p["sm_clock_mhz"] = min(p["sm_clock_mhz"], 1590.0)
            c["sm_clock_mhz"] = min(c["sm_clock_mhz"], 1590.0)
        ceilings.append(c)
    m["measured_ceilings"] = ceilings
    for p in m["phases"]:
        if p["name"] == "iterations":
            p.update(status="unsupported", file=None, rows=None, duration_s=0.01,
                     reason=iterations_unsupported(T4, force_portable=False))
    return m


def bench() -> dict:
    b = _read("bench")
    rows = []
    for r in b["rows"]:
        r["sm_clock_mhz"] = r["sm_clock_min_mhz"] = r["sm_clock_max_mhz"] = None
        for k in ("board_power_w", "power_limit_w", "power_sm_clock_mhz", "power_loop_ms", "energy_mj_per_call"):
            r[k] = None
        backend = r["impl"].removeprefix("sdpa-") if r["impl"].startswith("sdpa-") else None
        if r["dtype"] == "bfloat16":
            r = _clear(r, CASE, "unsupported", BF16_REASON)
        elif r["impl"] == "fa4":
            r = _clear(r, CASE, "unsupported", FA4_REASON)
        elif backend in SDPA_REASON:
            r = _clear(r, CASE, "unsupported", SDPA_REASON[backend])
        elif r["status"] == "ok" and (r["peak_mem_bytes"] or 0) > T4_MEMORY:
            r = _clear(r, CASE, "oom", "CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity "
                                       "of 14.75 GiB")
        elif r["status"] == "ok":
            slow = SLOW if r["impl"] == "naive" else 2.5 * SLOW  # a T4 has a fifteenth of the H100's tensor maths
            for k in TIMED:
                if r[k] is not None:
                    r[k] *= slow
            r["latency_samples_ms"] = [x * slow for x in r["latency_samples_ms"]]
            r["tflops"] = r["flops"] / (r["latency_ms_median"] * 1e-3) / 1e12
            r["sm_clock_mhz"] = r["sm_clock_min_mhz"] = r["sm_clock_max_mhz"] = 1590.0
            if r["impl"] == "sdpa":
                r["backend_used"] = "efficient"
            if r["impl"] == "triton":
                r.update(kernel_path="turing", path_rule=turing_path(T4, False).reason, kernel_step=None,
                         kernel_config={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 1})
            if r["impl"] == "triton-portable":
                r["tensor_cores"] = False
        rows.append(r)
    b["rows"], b["run_id"] = rows, RUN_ID
    b["notes"] = []
    return b


def correctness() -> dict:
    c = _read("correctness")
    for r in c["rows"]:
        if r["dtype"] == "bfloat16" and r["status"] == "ok":
            keep = CASE + ("tol_abs", "tol_rel", "route_case")
            r.update(_clear(r, keep, "unsupported",
                            "compute capability 7.5 has no bfloat16 tensor cores (they arrived with 8.0)"))
        if r["impl"] == "triton" and r["status"] == "ok":
            r["kernel_path"], r["kernel_step"] = "turing", None
        if r["impl"] == "sdpa" and r["status"] == "ok":
            r["backend_used"] = "efficient"
    c["run_id"] = RUN_ID
    return c


def profile() -> dict:
    p = _read("profile")
    gone = {"fa4", "sdpa-flash", "sdpa-cudnn"}
    drop = {i["case_id"] for i in p["impls"] if i["impl"] in gone or i["dtype"] == "bfloat16"}
    p["impls"] = [i for i in p["impls"] if i["case_id"] not in drop]
    p["kernels"] = [k for k in p["kernels"] if k["case_id"] not in drop]
    for k in p["kernels"]:
        k["kernel_name"] = k["kernel_name"].replace("sm90", "sm75")
        k["duration_ms"] *= SLOW
        k["sm_clock_mhz"] = min(k["sm_clock_mhz"] or 1590.0, 1590.0)
        k["smem_config_bytes"] = min(k.get("smem_config_bytes") or 65536, 65536)
    for k in p["kernels"]:
        k["kernel_step"] = None
    for i in p["impls"]:
        i["kernel_step"] = None
        if i.get("duration_ms"):
            i["duration_ms"] *= SLOW
    p["stalls"] = [s for s in p["stalls"] if s.get("case_id") not in drop]
    p["clock_check"] = [c for c in p["clock_check"] if c.get("case_id") not in drop]
    p["run_id"] = RUN_ID
    return p


def decode() -> dict:
    d = _read("decode")
    choice = decode_dtype(T4)
    d["dtype"], d["dtype_reason"], d["run_id"] = choice.value, choice.reason, RUN_ID
    d["floor_bandwidth_bytes_per_s"] *= 0.08
    for r in d["rows"]:
        for k in ("floor_ms", "read_floor_ms"):
            if r.get(k) is not None:
                r[k] /= 0.08
        if r.get("achieved_over_floor") is not None:
            r["achieved_over_floor"] *= SLOW * 0.08
        for k in ("step_ms_median", "step_ms_p10", "step_ms_p90", "cold_step_ms", "kernel_ms_per_step"):
            if r.get(k) is not None:
                r[k] *= SLOW
        if r.get("step_samples_ms"):
            r["step_samples_ms"] = [x * SLOW for x in r["step_samples_ms"]]
        if r.get("tokens_per_s"):
            r["tokens_per_s"] /= SLOW
    for m in d["models"]:
        m["dtype"] = choice.value
    for m in d["micro"]:
        if m.get("status") == "ok":
            for k in ("latency_ms_median", "latency_ms_p10", "latency_ms_p90"):
                m[k] *= SLOW
            m["achieved_bytes_per_s"] /= SLOW
            m["bandwidth_fraction"] = m["achieved_bytes_per_s"] / d["floor_bandwidth_bytes_per_s"]
            m["sm_clock_mhz"] = min(m["sm_clock_mhz"], 1590.0)
    for k in d["kernel_classes"]:
        k["ms_per_step"] *= SLOW
        k["top_kernel"] = k["top_kernel"].replace("sm90", "sm75").replace("sm80", "sm75")
    d["notes"] = []
    return d


def write(data_dir: Path, run_id: str = RUN_ID) -> Path:
    """The T4 run under data_dir/runs/<run_id>/, with the published T4 reference beside it."""
    out = Path(data_dir) / "runs" / run_id
    out.mkdir(parents=True, exist_ok=True)
    files = {"manifest": manifest(), "bench": bench(), "correctness": correctness(), "profile": profile(),
             "decode": decode()}
    for name, obj in files.items():
        obj = copy.deepcopy(obj)
        obj["run_id"] = run_id
        (out / f"{name}.json").write_text(json.dumps(obj))
    return out
