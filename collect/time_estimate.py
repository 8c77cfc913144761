"""How long each phase would take on another GPU, from a run measured here and that GPU's
published figures: the estimate method, written down as code.

    python -m collect.time_estimate data/runs/<run> [--reference data/reference/t4-published]

The run should be a rehearsal of the target GPU (COLLECT_REHEARSE_DEVICE=t4): its phases chose the
target's cases, tile configs and dtypes, so it compiled and tuned what the target would. Per phase:

    measured duration = fixed + device work
    device work       = sum over the phase's timed rows of calls(latency) x latency
    fixed             = what is left: imports, compilation, autotuning, allocation, Python

`calls(latency)` follows the one clock's own rules (collect/timing.py: warm-up, host-timed,
device-timed and loop calls, fewer for long calls). On the target, each row's latency is this
run's times the slowdown the reference shows at the same implementation and length (log-log
interpolation over N, clamped at the ends), and the calls are recounted for the new latency:

    estimate = fixed + sum of calls(latency') x latency'

Decode rows scale by the reference's decode step over this run's at the same context. SDPA's
flash and cuDNN backends need compute capability 8.0: on an older target they are refused at
once and cost nothing. Phases with no model of their device work (env, correctness, profile)
keep their measured duration; a phase the target does not run (iterations on a T4) costs nothing.
Standard library only.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from . import timing
from .schema.reader import read_json, stored_path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Rows of these implementations take the reference's slowdown of the named one.
SLOWDOWN_OF = {"naive": "naive", "sdpa-math": "naive", "triton": "triton", "triton-portable": "triton"}
NEEDS_AMPERE = ("sdpa-flash", "sdpa-cudnn")
# Around each timed set the bench phase makes one warm-up call, one peak-memory call and one wall-time call.
EXTRA_CALLS = 3


def calls_for(latency_ms: float) -> int:
    """Calls the bench phase makes of a case whose call takes `latency_ms` (collect/timing.py rules)."""
    loop = (timing.LOOP_REPEATS + 1) * timing.loop_calls(latency_ms)
    return EXTRA_CALLS + timing.host_calls(latency_ms) + timing.timed_calls(latency_ms) + loop


def interpolate(points: dict[int, float], n: int) -> float:
    """Log-log interpolation of {N: ratio} at n, clamped to the end points."""
    xs = sorted(points)
    if n <= xs[0]:
        return points[xs[0]]
    if n >= xs[-1]:
        return points[xs[-1]]
    hi = next(i for i, x in enumerate(xs) if x >= n)
    x0, x1 = xs[hi - 1], xs[hi]
    t = (math.log(n) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(points[x0]) + t * (math.log(points[x1]) - math.log(points[x0])))


def _load(path: Path) -> dict | None:
    """A run's data file, plain or kept compressed (path names the plain one); None where the run has neither."""
    stored = stored_path(path.parent, path.name)
    return read_json(stored) if stored is not None else None


def bench_slowdowns(run_rows: list[dict], ref_rows: list[dict]) -> dict[str, dict[int, float]]:
    """{implementation: {N: reference latency / this run's}} where both have the row. The reference's
    'sdpa' is matched with this run's row of the backend the reference used."""
    def key(r):
        return (r["dtype"], r["causal"], r["batch"], r["heads"], r["head_dim"], r["seq_len"])

    ours = {(r["impl"],) + key(r): r for r in run_rows if r["status"] == "ok" and r.get("latency_ms_median")}
    out: dict[str, dict[int, float]] = {}
    for ref in ref_rows:
        if ref["status"] != "ok" or not ref.get("latency_ms_median"):
            continue
        impl = ref["impl"]
        if impl == "sdpa" and ref.get("backend_used") not in (None, "unknown"):
            impl = f"sdpa-{ref['backend_used']}"
        mine = ours.get((impl,) + key(ref)) or ours.get((ref["impl"],) + key(ref))
        if mine:
            out.setdefault("sdpa" if impl.startswith("sdpa") else impl, {})[ref["seq_len"]] = (
                ref["latency_ms_median"] / mine["latency_ms_median"])
    return out


@dataclass
class PhaseEstimate:
    phase: str
    measured_s: float | None
    device_s: float | None     # this run's modelled device work
    estimate_s: float | None   # on the target
    how: str


def estimate_bench(rows: list[dict], slowdowns: dict[str, dict[int, float]], target_cc: tuple[int, int],
                   duration_s: float) -> PhaseEstimate:
    here = there = 0.0
    for r in rows:
        if r["status"] != "ok" or not r.get("latency_ms_median"):
            continue
        ms = r["latency_ms_median"]
        here += calls_for(ms) * ms / 1e3
        if r["impl"] in NEEDS_AMPERE and target_cc < (8, 0):
            continue
        table = slowdowns.get(SLOWDOWN_OF.get(r["impl"], "sdpa")) or slowdowns.get("sdpa")
        if not table:
            return PhaseEstimate("bench", duration_s, here, None, "no reference row to scale by")
        ms2 = ms * interpolate(table, r["seq_len"])
        there += calls_for(ms2) * ms2 / 1e3
    fixed = max(0.0, duration_s - here)
    return PhaseEstimate("bench", duration_s, here, fixed + there,
                         "fixed part as measured; each row's calls at the reference's slowdown")


def estimate_decode(run: dict, ref: dict, duration_s: float) -> PhaseEstimate:
    """Decode steps scale by the reference's eager step time over this run's, nearest context."""
    mine = [r for r in run.get("rows", []) if r["status"] == "ok" and r.get("step_ms_median")]
    theirs = {r["context"]: r["step_ms_median"] for r in ref.get("rows", [])
              if r["status"] == "ok" and r.get("step_ms_median") and r["variant"] == "eager"}
    eager = {r["context"]: r["step_ms_median"] for r in mine if r["variant"] == "eager" and r["batch"] == 4}
    ratios = {c: theirs[c] / eager[c] for c in theirs if c in eager}
    if not ratios:
        common = sorted(set(theirs) | set(eager))
        return PhaseEstimate("decode", duration_s, None, None,
                             f"no eager step at a context both have (reference {sorted(theirs)}, run {sorted(eager)}); "
                             f"{common}")
    here = sum(r["step_ms_median"] * (r.get("new_tokens") or 0) for r in mine) / 1e3
    there = sum(r["step_ms_median"] * interpolate(ratios, r["context"]) * (r.get("new_tokens") or 0)
                for r in mine) / 1e3
    fixed = max(0.0, duration_s - here)
    return PhaseEstimate("decode", duration_s, here, fixed + there,
                         "decode steps at the reference's eager step ratio; the rest as measured")


def estimate_run(run_dir: Path, ref_dir: Path) -> list[PhaseEstimate]:
    manifest = _load(run_dir / "manifest.json")
    ref_manifest = _load(ref_dir / "manifest.json") or {}
    if manifest is None:
        raise ValueError(f"{run_dir} has no manifest.json: give a run folder under data/runs/")
    cc_text = (ref_manifest.get("device") or {}).get("compute_capability") or "0.0"
    target_cc = tuple(int(x) for x in cc_text.split("."))
    out = []
    for p in manifest.get("phases", []):
        d = p.get("duration_s")
        if p["status"] == "unsupported":
            out.append(PhaseEstimate(p["name"], d, None, 0.0, f"not run on the target: {p.get('reason') or ''}"))
        elif p["name"] == "bench" and d is not None:
            run = _load(run_dir / "bench.json") or {"rows": []}
            ref = _load(ref_dir / "bench.json") or {"rows": []}
            out.append(estimate_bench(run["rows"], bench_slowdowns(run["rows"], ref["rows"]), target_cc, d))
        elif p["name"] == "decode" and d is not None and stored_path(ref_dir, "decode.json") is not None:
            out.append(estimate_decode(_load(run_dir / "decode.json") or {}, _load(ref_dir / "decode.json"), d))
        else:
            out.append(PhaseEstimate(p["name"], d, None, d, "as measured (device work not modelled)"))
    return out


def table(estimates: list[PhaseEstimate]) -> str:
    def s(x):
        return "n/a" if x is None else f"{x:.0f} s"

    lines = ["| phase | measured here | modelled device work | estimate on the target | how |", "|---|---|---|---|---|"]
    lines += [f"| {e.phase} | {s(e.measured_s)} | {s(e.device_s)} | {s(e.estimate_s)} | {e.how} |" for e in estimates]
    known = [e.estimate_s for e in estimates if e.estimate_s is not None]
    lines.append(f"| all | {s(sum(e.measured_s or 0 for e in estimates))} | | {s(sum(known))} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect.time_estimate", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run folder, ideally a rehearsal of the target (data/runs/<run>)")
    ap.add_argument("--reference", type=Path, default=REPO_ROOT / "data" / "reference" / "t4-published",
                    help="the target GPU's published figures (default: data/reference/t4-published)")
    a = ap.parse_args(argv)
    try:
        print(table(estimate_run(a.run, a.reference)))
    except (ValueError, KeyError) as exc:
        print(f"time_estimate: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
