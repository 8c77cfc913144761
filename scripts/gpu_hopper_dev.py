"""Hopper kernel development run: correctness, then TFLOP/s, registers and shared memory of every
kernel version (kernels/attention_hopper.py VERSIONS) and a few candidate variants, side by side
with SDPA's cuDNN and flash backends at the goal shapes.

    python3 scripts/gpu_hopper_dev.py            # on an H100/H200, < 150 s
    python3 scripts/gpu_hopper_dev.py --only sdpa-cudnn,v4-warpspec   # a subset
    python3 scripts/gpu_hopper_dev.py --cpu-smoke  # exercise this script on a CPU (interpreter)

A supervisor process runs the measurements in a worker process and reads one JSON line per item:
a kernel that crashes the process or hangs costs its own item (and that implementation's later
items), never the whole run. Items run most important first and stop at --budget seconds.
Results go to stdout and, as results.json, to --out (default: $OUT when set).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GOAL_SHAPES = [(4, 32, 4096, 128), (4, 32, 16384, 128)]  # what the bench phase sweeps: B=4, H=32, d=128
# Ragged lengths (masked tails), and one whole-tile shape with several heads (the persistent
# kernel's flat descriptors over all heads).
CORRECT_SHAPES = [(1, 2, 1000, 128), (1, 2, 4097, 128), (2, 3, 1024, 128)]
# The final path at other head dims (fp16): one ragged length each, first candidate config.
EXTRA_HEAD_DIMS = [(1, 3, 17, 16), (1, 3, 1000, 32), (1, 3, 1000, 64), (2, 3, 128, 64), (1, 3, 1000, 256)]
DTYPES = ("float16", "bfloat16")
TOL = {"float16": 4e-3, "bfloat16": 3e-2}
SDPA = ("sdpa-cudnn", "sdpa-flash")

# Candidates beyond the registered versions: name -> (Features keywords, config, maskings); the
# config applies to every masking tried.
_WS = dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=2)
CANDIDATES = {
    # Run 3: the causal gap. v4 with the cheaper mask; plus the unmasked loop below the diagonal
    # and a masked one on it, in one kernel; plus a longest-first order over groups of 8 heads;
    # and the persistent kernel with each.
    "cand-lean": (dict(warp_spec=True, lean_mask=True), _WS, ("causal",)),
    "cand-two-loops": (dict(warp_spec=True, lean_mask=True, two_loops=True), _WS, ("causal",)),
    "cand-two-loops-g8": (dict(warp_spec=True, lean_mask=True, two_loops=True, head_group=8), _WS, ("causal",)),
    "cand-lean-g8": (dict(warp_spec=True, lean_mask=True, head_group=8), _WS, ("causal",)),
    "cand-persist-lean": (dict(warp_spec=True, persistent=True, lean_mask=True), _WS, ("causal",)),
    "cand-persist-two-loops": (dict(warp_spec=True, persistent=True, lean_mask=True, two_loops=True), _WS,
                               ("causal",)),
    # Run 4: query tiles i and n-1-i as one unit of n+1 key tiles; persistent, or one program per unit.
    "cand-pairs-persist": (dict(warp_spec=True, persistent=True, causal_pairs=True), _WS, ("causal",)),
    "cand-pairs-grid": (dict(warp_spec=True, causal_pairs=True), _WS, ("causal",)),
    "cand-pairs-persist-lean": (dict(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=True), _WS,
                                ("causal",)),
    # Run 5: let Triton see across tiles: flatten the persistent loop nest, or warp-specialize the tile loop.
    "cand-persist-flatten": (dict(warp_spec=True, persistent=True, outer=1), _WS, ("non-causal", "causal")),
    "cand-persist-outer-ws": (dict(warp_spec=True, persistent=True, outer=2), _WS, ("non-causal", "causal")),
    "cand-pairs-flatten": (dict(warp_spec=True, persistent=True, causal_pairs=True, outer=1), _WS, ("causal",)),
    "cand-pairs-outer-ws": (dict(warp_spec=True, persistent=True, causal_pairs=True, outer=2), _WS, ("causal",)),
    # Run 6: the mask as a min() against an arithmetic bound (no boolean tile): the sm90 SASS of the
    # consumer loop drops from 737 to 598 instructions per 64x128 tile (non-causal: 451).
    "cand-pairs-lean2": (dict(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=2), _WS, ("causal",)),
    "cand-lean2": (dict(warp_spec=True, lean_mask=2), _WS, ("causal",)),
}
# Run 1 (2026-11-29) also tried: ws 128x64/s3 (NaN outputs), tma 128x128/w8/s3 (0.73-0.85x cuDNN),
# tma 128x32/w4/s3, two CTAs per SM (0.65-0.71x cuDNN). Run 2: tma 128x64/w8/s4, as fast as v1
# (0.69-0.79x): v1's deficit is not its pipeline depth.
# Past this max |out - SDPA's out| at the goal shapes, a perf row's output is wrong (two correct
# kernels differ by about 1e-3).
WRONG = {"float16": 1e-2, "bfloat16": 5e-2}
SPIN_CYCLES = 1_000_000  # ~0.5 ms of GPU spin before each timed call: launch overhead is not timed
AUTO = "hopper-auto"  # hopper_attention(config=None): the pruned candidates timed, best kept
FIRST = "hopper-first"  # hopper_attention with the first pruned candidate config (no tuning)
STARTUP_S = 120.0  # a worker's imports and CUDA initialisation, before its first item


# ------------------------------------------------------------------------------------------
# worker: measures items, one JSON line each
# ------------------------------------------------------------------------------------------


def _impls():
    from kernels import attention_hopper as H

    out = {name: v for name, v in H.VERSIONS.items()}
    for name, (feats, cfg, maskings) in CANDIDATES.items():
        out[name] = H.KernelVersion(name=name, change="candidate", prediction="", predicted_at="", path="hopper",
                                    features=H.Features(**feats), configs={False: cfg, True: cfg},
                                    maskings=maskings)
    return out


def _kernel_facts(kernel):
    """The iterations phase's facts of a CompiledKernel, plus what this script also prints."""
    from collect.iterations import kernel_facts

    facts = kernel_facts(kernel)
    if facts:
        md = kernel.metadata
        facts.update(shared=facts.pop("shared_bytes"), num_stages=getattr(md, "num_stages", None),
                     kernel_name=getattr(md, "name", None))
    return facts


def _call(name, impls, q, k, v, causal):
    from kernels import attention as A
    from kernels import attention_hopper as H

    if name in SDPA:
        return A.get_impl(name)(q, k, v, causal), {}
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if name == FIRST:
        b, h, n, d = q.shape
        cfg = H.candidate_configs(d, q.dtype, causal, n)[0]
        o = H.run_for_test(q, k, v, causal) if interp else H.hopper_attention(q, k, v, causal, config=cfg.as_dict())
        last = H.last_launch()
        return o, dict(config=last["config"], ws=last["warp_specialized"])
    if name == AUTO:
        o = H.run_for_test(q, k, v, causal) if interp else H.hopper_attention(q, k, v, causal)
        last = H.last_launch()
        return o, dict(config=last["config"], ws=last["warp_specialized"], autotuned=True)
    ver = impls[name]
    if interp and ver.path == "hopper":
        o = H.run_for_test(q, k, v, causal, features=ver.features_for(causal, q.shape[2]))
        return o, dict(config=H.last_launch()["config"])
    o = ver(q, k, v, causal)
    if ver.path == "hopper":
        last = H.last_launch()
        return o, dict(config=last["config"], ws=last["warp_specialized"])
    return o, dict(config=A.kernel_config_of_last_call())


_INPUTS: dict = {}


def _inputs(shape, dtype, device, seed=0):
    """q, k, v drawn on the device (a 4x32x16384x128 draw on the CPU takes seconds), kept for the
    next item with the same shape and dtype."""
    import torch

    key = (tuple(shape), dtype, seed)
    if key not in _INPUTS:
        _INPUTS.clear()
        g = torch.Generator(device=device).manual_seed(seed)
        _INPUTS[key] = tuple(torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(getattr(torch, dtype))
                             for _ in range(3))
    return _INPUTS[key]


def _time(fn, reps, device, spin=True):
    """Median ms of `reps` calls, L2 flushed before each (CUDA events), or wall time on the CPU.
    spin: the GPU first spins ~0.5 ms, so the host has queued the call before the start event
    and only device time is measured; without it, a wrapper slower to launch than the flush
    leaves the GPU idle inside the timed interval."""
    import torch

    if device == "cpu":
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[len(ts) // 2], ts
    from triton import runtime

    drv = runtime.driver.active
    cache = drv.get_empty_cache_for_benchmark()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        if spin:
            torch.cuda._sleep(SPIN_CYCLES)
        drv.clear_cache(cache)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return ts[len(ts) // 2], ts


_SDPA_OUT: dict = {}  # per perf case, the first SDPA backend's output: a sanity check at full size


def run_item(item, impls, device):
    import torch

    from collect.iterations import CaptureCompiled
    from collect.schema.common import attention_flops
    from kernels import attention as A
    from kernels import attention_hopper as H

    kind = item["kind"]
    if kind == "env":
        info = dict(torch=torch.__version__, python=sys.version.split()[0])
        import triton

        info["triton"] = triton.__version__
        if device != "cpu":
            p = torch.cuda.get_device_properties(0)
            info.update(device=p.name, capability=list(torch.cuda.get_device_capability(0)), sm_count=p.multi_processor_count,
                        smem_optin=getattr(p, "shared_memory_per_block_optin", None), cuda=torch.version.cuda,
                        hopper_available=list(H.hopper_available()))
        return info
    name, dtype, causal, shape = item["impl"], item["dtype"], item["causal"], tuple(item["shape"])
    capture = CaptureCompiled([A._attn_fwd, H._hopper_fwd, H._hopper_fwd_ws, H._hopper_fwd_ws_persistent, H._diag_merge])
    if kind == "corr":
        q, k, v = _inputs(shape, dtype, device, seed=shape[2])
        t0 = time.perf_counter()
        with capture:
            o, meta = _call(name, impls, q, k, v, causal)
        if device != "cpu":
            torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        ref = A.reference_attention(q, k, v, causal)
        err = (o.double() - ref).abs().max().item()
        ok = math.isfinite(err) and err <= TOL[dtype]
        return dict(max_abs_err=err, tol=TOL[dtype], passed=ok, first_call_s=round(first_s, 2), **meta,
                    **_kernel_facts(capture.first))
    if kind == "perf":
        q, k, v = _inputs(shape, dtype, device)
        t0 = time.perf_counter()
        with capture:
            o, meta = _call(name, impls, q, k, v, causal)  # compile (and tune) outside the timing
        if device != "cpu":
            torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        case = (dtype, causal, shape)
        if name in SDPA and case not in _SDPA_OUT:
            _SDPA_OUT[case] = o
            diff = None
        else:
            ref = _SDPA_OUT.get(case)
            diff = None if ref is None else (o.float() - ref.float()).abs().max().item()
        del o
        facts = _kernel_facts(capture.first)
        flops = attention_flops(*shape, causal)
        reps = item.get("reps", 10)
        fn = (lambda: _call(name, impls, q, k, v, causal))
        fn()
        med, ts = _time(fn, reps, device, item.get("spin", True))
        return dict(spin=item.get("spin", True), ms=med, ms_min=ts[0], ms_max=ts[-1], reps=reps, tflops=flops / (med * 1e-3) / 1e12, max_diff_vs_sdpa=diff,
                    first_call_s=round(first_s, 2), **meta, **facts)
    raise ValueError(f"unknown item kind {kind!r}")


def worker(items_path, device):
    impls = _impls()
    items = json.loads(Path(items_path).read_text())
    for item in items:
        print("BEGIN " + item["id"], flush=True)
        t0 = time.perf_counter()
        try:
            res = dict(status="ok", **run_item(item, impls, device))
        except Exception as exc:  # noqa: BLE001 - one failure is one item's result
            msg = " ".join(f"{type(exc).__name__}: {exc}".split())
            res = dict(status="error", error=msg[:700])
            try:
                import torch

                if device != "cpu":
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
            except Exception as exc2:  # noqa: BLE001 - a dead context: let the supervisor restart us
                print("RESULT " + json.dumps(dict(item, status="error", error=msg[:700], wall_s=0)), flush=True)
                print(f"FATAL {item['impl']} context lost: {exc2}", flush=True)
                return 3
        res["wall_s"] = round(time.perf_counter() - t0, 2)
        print("RESULT " + json.dumps(dict(item, **res), default=str), flush=True)
    return 0


# ------------------------------------------------------------------------------------------
# supervisor: builds the item list, runs workers, prints the summary
# ------------------------------------------------------------------------------------------


def _maskings(name):
    """Which maskings an implementation is tried on (a version declares it; the rest: both)."""
    sys.path.insert(0, str(ROOT))
    from kernels.attention_hopper import VERSIONS

    if name in CANDIDATES:
        return CANDIDATES[name][2]
    return VERSIONS[name].maskings if name in VERSIONS else ("non-causal", "causal")


def build_items(cpu_smoke, only=None):
    from kernels.attention_hopper import FINAL_VERSION as final

    versions = list(_version_names())
    impl_names = versions + list(CANDIDATES)
    if only:
        unknown = set(only) - set(impl_names) - set(SDPA) - {AUTO, FIRST}
        if unknown:
            raise SystemExit(f"--only: unknown implementations {sorted(unknown)}; valid: {impl_names + list(SDPA)}")
        versions = [v for v in versions if v in only]
        impl_names = [n for n in impl_names if n in only]
    items = [dict(id="env", kind="env", impl="env")]
    corr_shapes = [(1, 2, 40, 32), (1, 2, 33, 32)] if cpu_smoke else CORRECT_SHAPES
    goal = [(1, 2, 32, 32), (1, 2, 48, 32)] if cpu_smoke else GOAL_SHAPES

    def wanted(name, causal):
        return ("causal" if causal else "non-causal") in _maskings(name)

    for name in impl_names:
        for shape in corr_shapes:
            for dtype in DTYPES:
                for causal in (False, True):
                    if wanted(name, causal):
                        items.append(dict(id=f"corr:{name}:{dtype}:{int(causal)}:{shape[2]}", kind="corr",
                                          impl=name, dtype=dtype, causal=causal, shape=list(shape)))
    for shape in goal:  # the comparisons the goal is judged on, then the candidates
        reps = 2 if cpu_smoke else (30 if shape[2] <= 4096 else 8)
        for dtype in DTYPES:
            for causal in (False, True):
                for name in list(SDPA) + impl_names + [AUTO]:
                    if wanted(name, causal) and (not only or name in only):
                        items.append(dict(id=f"perf:{name}:{dtype}:{int(causal)}:{shape[2]}", kind="perf",
                                          impl=name, dtype=dtype, causal=causal, shape=list(shape), reps=reps))
    # The same calls timed without the GPU spin: how much launch overhead the usual timing sees.
    shape = goal[0]
    for causal in (False, True):
        for name in ("sdpa-cudnn", "v0-portable", final):
            if wanted(name, causal) and (not only or name in only):
                items.append(dict(id=f"perf-nospin:{name}:float16:{int(causal)}:{shape[2]}", kind="perf", impl=name,
                                  dtype="float16", causal=causal, shape=list(shape), reps=2 if cpu_smoke else 30,
                                  spin=False))
    extra = [(1, 2, 17, 16), (1, 2, 20, 32)] if cpu_smoke else EXTRA_HEAD_DIMS
    for shape in extra if not only or FIRST in only else []:  # the final path at other head dims
        for causal in (False, True):
            items.append(dict(id=f"corr:{FIRST}:float16:{int(causal)}:{shape[2]}x{shape[3]}", kind="corr", impl=FIRST,
                              dtype="float16", causal=causal, shape=list(shape)))
    # Correctness of what changed since run 1 first (warp-specialized causal), then every
    # performance case (all implementations of a case together, N=4096 first), then the rest.
    first = {final, *CANDIDATES}
    perf = [i for i in items if i["kind"] == "perf"]
    corr = [i for i in items if i["kind"] == "corr"]
    key_corr = [i for i in corr if i["impl"] in first]
    return items[:1] + key_corr + perf + [i for i in corr if i not in key_corr]


def _version_names():
    sys.path.insert(0, str(ROOT))
    from kernels.attention_hopper import VERSIONS

    return VERSIONS.keys()


def supervise(args):
    items = build_items(args.cpu_smoke, [x for x in args.only.split(",") if x] if args.only else None)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if args.cpu_smoke:
        env["TRITON_INTERPRET"] = "1"
    device = "cpu" if args.cpu_smoke else "cuda"
    t_start = time.monotonic()
    results, pending, bad_impls = {}, list(items), set()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"hopper_dev_items_{os.getpid()}.json"
    while pending:
        left = args.budget - (time.monotonic() - t_start)
        if left <= 0:
            break
        todo = [i for i in pending if i["impl"] not in bad_impls]
        pending = []
        if not todo:
            break
        tmp.write_text(json.dumps(todo))
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(tmp), "--device", device],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
        current, began = None, time.monotonic()
        while True:
            # Before the first BEGIN the worker is importing torch and triton: allow for that.
            limit = args.item_timeout if current is not None else max(args.item_timeout, STARTUP_S)
            wait = min(limit - (time.monotonic() - began), args.budget - (time.monotonic() - t_start))
            try:
                line = lines.get(timeout=max(0.1, wait))
            except queue.Empty:
                line = "TIMEOUT"
            if line is None:  # worker exited
                break
            if line == "TIMEOUT":
                over_budget = time.monotonic() - t_start >= args.budget
                proc.kill()
                if current is not None:
                    why = "budget spent" if over_budget else f"no result within {args.item_timeout:.0f} s (hang?)"
                    results[current["id"]] = dict(current, status="error", error=f"killed: {why}")
                    print(f"[TIMEOUT] {current['id']}: {why}", flush=True)
                    if not over_budget:
                        bad_impls.add(current["impl"])
                break
            line = line.rstrip("\n")
            if line.startswith("RESULT ") or line.startswith("BEGIN "):
                began = time.monotonic()
            if line.startswith("BEGIN "):
                iid = line[6:]
                current = next(i for i in todo if i["id"] == iid)
                began = time.monotonic()
            elif line.startswith("RESULT "):
                res = json.loads(line[7:])
                results[res["id"]] = res
                print(format_result(res), flush=True)
                current = None
            elif line.startswith("FATAL "):
                bad_impls.add(line.split()[1])  # it broke the CUDA context; its other items would too
                print(line, flush=True)
            elif line.strip():
                print("   | " + line[:400], flush=True)
        proc.wait()
        if current is not None and current["id"] not in results:  # crashed mid-item
            results[current["id"]] = dict(current, status="error", error=f"worker died (exit {proc.returncode})")
            print(f"[CRASH] {current['id']}: worker exit {proc.returncode}", flush=True)
            bad_impls.add(current["impl"])
        pending = [i for i in todo if i["id"] not in results]
    tmp.unlink(missing_ok=True)
    skipped = [i for i in items if i["id"] not in results]
    summary(items, results, skipped, time.monotonic() - t_start)
    out = args.out or os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "results.json").write_text(json.dumps(dict(items=items, results=results), indent=1, default=str))
        print(f"wrote {Path(out, 'results.json')}")


def format_result(r):
    if r["kind"] == "env":
        return "ENV " + json.dumps({k: v for k, v in r.items() if k not in ("id", "kind", "impl")})
    head = f"{r['impl']:<22} {r['dtype']:<8} {'causal' if r['causal'] else 'full  '} {tuple(r['shape'])!s:<20}"
    if r["status"] != "ok":
        return f"[ERROR] {head} {r.get('error', '')[:500]}"
    res = (f" regs={r.get('n_regs')} spills={r.get('n_spills')} smem={r.get('shared')} warps={r.get('num_warps')}"
           f" cfg={_cfg_text(r.get('config'))}{' WS' if r.get('ws') else ''}")
    if r["kind"] == "corr":
        tag = "PASS" if r["passed"] else "FAIL"
        return f"[{tag}] {head} err={r['max_abs_err']:.2e} (tol {r['tol']:.0e}) first={r['first_call_s']}s" + res
    diff = r.get("max_diff_vs_sdpa")
    dtxt = "" if diff is None else f" |d|={diff:.1e}" + (" WRONG" if not diff <= WRONG[r["dtype"]] else "")
    if r.get("spin") is False:
        dtxt += " (no spin: launch overhead included)"
    return (f"[PERF] {head} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s (n={r['reps']}, first={r['first_call_s']}s){dtxt}"
            + res)


def _cfg_text(c):
    if not c:
        return "-"
    return f"{c.get('BLOCK_M')}x{c.get('BLOCK_N')}/w{c.get('num_warps')}/s{c.get('num_stages')}"


def summary(items, results, skipped, elapsed):
    print("\n================ SUMMARY ================")
    corr = [r for r in results.values() if r["kind"] == "corr"]
    failed = [r for r in corr if r["status"] != "ok" or not r.get("passed")]
    print(f"correctness: {len(corr) - len(failed)} pass, {len(failed)} fail/error")
    for r in failed:
        print("   " + format_result(r))
    perf = [r for r in results.values() if r["kind"] == "perf" and r["status"] == "ok" and r.get("spin", True)]
    wrong = [r for r in perf if r.get("max_diff_vs_sdpa") is not None and not r["max_diff_vs_sdpa"] <= WRONG[r["dtype"]]]
    if wrong:
        print(f"{len(wrong)} perf rows have WRONG outputs (vs SDPA): "
              + ", ".join(sorted({r['impl'] + (' causal' if r['causal'] else ' full') for r in wrong})))
    nospin = [r for r in results.values() if r["kind"] == "perf" and r["status"] == "ok" and r.get("spin") is False]
    for r in nospin:
        twin = next((p for p in perf if p["impl"] == r["impl"] and p["dtype"] == r["dtype"]
                     and p["causal"] == r["causal"] and p["shape"] == r["shape"]), None)
        if twin:
            print(f"launch overhead seen without the spin: {r['impl']} {'causal' if r['causal'] else 'full'} "
                  f"{r['ms']:.3f} ms vs {twin['ms']:.3f} ms ({r['ms'] / twin['ms']:.3f}x)")
    cases = sorted({(r["dtype"], r["causal"], r["shape"][2]) for r in perf}, key=lambda c: (c[2], c[0], c[1]))
    present = {i["impl"] for i in items if i["kind"] == "perf"}
    names = [n for n in (*SDPA, *_version_names(), *CANDIDATES, AUTO) if n in present]
    print("\nTFLOP/s (ratio to the fastest SDPA backend of the same case)")
    short = {"float16": "fp16", "bfloat16": "bf16"}
    head = f"{'impl':<22}" + "".join(f"{short[d] + ('-causal' if c else '-full') + '-' + str(n):>16}" for d, c, n in cases)
    print(head)
    best = {}
    for case in cases:
        s = [r["tflops"] for r in perf if (r["dtype"], r["causal"], r["shape"][2]) == case and r["impl"] in SDPA]
        best[case] = max(s) if s else None
    for name in names:
        row = f"{name:<22}"
        for case in cases:
            r = next((r for r in perf if r["impl"] == name and (r["dtype"], r["causal"], r["shape"][2]) == case), None)
            if r is None:
                row += f"{'-':>16}"
            else:
                ratio = f"{r['tflops'] / best[case]:.2f}x" if best[case] else "?"
                row += f"{r['tflops']:9.0f} {ratio:>6}"
        print(row)
    goal_ok = []
    from kernels.attention_hopper import FINAL_VERSION as final
    for case in cases:
        r = next((r for r in perf if r["impl"] == final and (r["dtype"], r["causal"], r["shape"][2]) == case), None)
        if r and best[case]:
            goal_ok.append(r["tflops"] / best[case] >= 0.9)
    print(f"\nfinal version {final}: >= 0.9x fastest SDPA in {sum(goal_ok)} of {len(goal_ok)} goal cases")
    if skipped:
        print(f"{len(skipped)} items not run (budget or a crashed implementation): "
              + ", ".join(i["id"] for i in skipped[:12]) + (" ..." if len(skipped) > 12 else ""))
    print(f"total {elapsed:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=140.0, help="stop starting items after this many seconds")
    ap.add_argument("--item-timeout", type=float, default=45.0,
                    help="a single item (compile + run) slower than this is killed as a hang")
    ap.add_argument("--out", default=None, help="folder for results.json (default: $OUT if set)")
    ap.add_argument("--only", default="", help="comma-separated implementations to run (default: all), e.g. "
                                               "sdpa-cudnn,v4-warpspec")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="run on the CPU through TRITON_INTERPRET=1 with tiny shapes: tests this script, not kernels")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, str(ROOT))
        sys.exit(worker(args.worker, args.device))
    supervise(args)


if __name__ == "__main__":
    main()
