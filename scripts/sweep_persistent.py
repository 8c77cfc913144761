"""The persistent decode step beside the graph step, per tiling, on one GPU, in one process.

For each model it builds our bf16 graph step (the decode phase's 'graph' variant) and the persistent step
at each candidate tiling (kernels/decode/persistent_step.CANDIDATE_TILINGS), each captured in a CUDA graph
after a warm-up, and times them side by side: rounds of replays from the same position, the best round
counting, as the decode phase judges attention choices (each round rewinds to the prompt). Each row also says how its greedy tokens compare
with the graph step's, the largest difference of its first step's logits, and its time over the bandwidth
floor (the step's bytes at the device-to-device copy bandwidth measured here first). A persistent row then
runs one step of the same tiling with the trace on (kernels/decode/persistent_trace.py): the critical
path by role, and the operations that took longest, each with its tiles' mean wait and work. Rows go to
--out after each one, so a timeout loses nothing.

--ws-warps adds rows of the warp-specialized persistent step (kernels/decode/persistent_ws.py, Hopper only), one per
consumer warp count, traced like the persistent rows; --ws-uncapped one more whose plan deals tiles by bytes alone.

--graph-tuning adds rows of the graph step built with fields of kernels/decode/fused_linear.TUNING changed (each
flag one row, e.g. max_registers=96), timed beside the graph step as set: how a Tuning field's setting is judged
before it becomes the default. --caches int8 builds the graph steps with the int8 KV cache as well (the persistent
step keeps bf16).

    python3 scripts/sweep_persistent.py --out $OUT/persistent.json      # on the GPU
    python3 scripts/sweep_persistent.py --models gpt2 --batch 64 --context 512 --caches bf16,int8 --tilings '' \
        --graph-tuning max_registers=96 --graph-tuning max_registers=128 --out $OUT/tuning.json
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402


@dataclasses.dataclass(frozen=True)
class SweepArgs:
    models: tuple[str, ...]
    batch: int
    context: int
    steps: int
    rounds: int
    out: Path | None
    trace: bool = True
    tilings: tuple[int, ...] | None = None  # indices into CANDIDATE_TILINGS; None: all
    graph_tunings: tuple[dict, ...] = ()  # each: Tuning fields -> values, one more graph row
    caches: tuple[str, ...] = ("bf16",)
    ws_warps: tuple[int, ...] = ()  # rows of the warp-specialized persistent step, one per consumer warp count
    ws_uncapped: bool = False  # and one whose plan deals tiles by bytes alone (plan_step's per_op_cap off)
    ws_rows: tuple[dict, ...] = ()  # every row of it, as WarpSpecializedStep options (the two above, then --ws-row)


def parse(argv=None) -> SweepArgs:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,gpt2-xl", help="comma-separated kernels.decode.gpt2.PRESETS names")
    ap.add_argument("--batch", type=int, default=4, help="sequences decoded together (the persistent step takes 16)")
    ap.add_argument("--context", type=int, default=1000, help="cached tokens when the timed steps start")
    ap.add_argument("--steps", type=int, default=16, help="replays per timed round")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per step; the best counts")
    ap.add_argument("--out", type=Path, help="write the rows here as JSON (after each row)")
    ap.add_argument("--no-trace", action="store_true", help="skip the traced step of each persistent row")
    ap.add_argument("--tilings", help="comma-separated indices into CANDIDATE_TILINGS (default: all; '' for none); "
                                      "each costs a cold compile per model, and one more for its traced step")
    ap.add_argument("--graph-tuning", action="append", default=[], metavar="FIELD=VALUE[,FIELD=VALUE]",
                    help="one more graph-step row built with these fused_linear.Tuning fields changed (ints, floats "
                         "or None); repeat for more rows")
    ap.add_argument("--ws-warps", default="", help="comma-separated consumer warp counts (4, 8): a row of the "
                    "warp-specialized persistent step (kernels/decode/persistent_ws.py, Hopper) for each")
    ap.add_argument("--ws-uncapped", action="store_true", help="add a row of the warp-specialized step (4 consumer "
                    "warps) whose plan does not cap each SM's share of an operation (persistent_plan.plan_step)")
    ap.add_argument("--ws-row", action="append", default=[], metavar="OPTION=VALUE[,OPTION=VALUE]",
                    help="a row of the warp-specialized step built with these options of WarpSpecializedStep "
                         "(consumer_warps, per_op_cap, stages), e.g. stages=16,per_op_cap=False")
    ap.add_argument("--caches", default="bf16", help="comma-separated KV caches of the graph rows: bf16, int8")
    a = ap.parse_args(argv)
    if a.tilings is None:
        tilings = None
    else:
        tilings = tuple(int(i) for i in a.tilings.split(",") if i.strip())
    caches = tuple(a.caches.split(","))
    if not set(caches) <= {"bf16", "int8"}:
        ap.error(f"--caches takes bf16 and int8, got {a.caches!r}")
    ws_warps = tuple(int(w) for w in a.ws_warps.split(",") if w.strip())
    ws_rows = tuple({"consumer_warps": w} for w in ws_warps)
    ws_rows += ({"consumer_warps": 4, "per_op_cap": False},) if a.ws_uncapped else ()
    ws_rows += tuple(ws_options(r, ap.error) for r in a.ws_row)
    return SweepArgs(tuple(a.models.split(",")), a.batch, a.context, a.steps, a.rounds, a.out, not a.no_trace, tilings,
                     tuple(tuning_overrides(t, ap.error) for t in a.graph_tuning), caches, ws_warps, a.ws_uncapped,
                     ws_rows)


WS_OPTIONS = ("consumer_warps", "per_op_cap", "stages")


def ws_options(text: str, error) -> dict:
    """'stages=16,per_op_cap=False' -> {'stages': 16, 'per_op_cap': False}: options of WarpSpecializedStep."""
    out = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in WS_OPTIONS or not value:
            error(f"--ws-row {item!r}: want OPTION=VALUE with OPTION one of {', '.join(WS_OPTIONS)}")
        if value in ("True", "False"):
            out[name] = value == "True"
        elif value.isdigit():
            out[name] = int(value)
        else:
            error(f"--ws-row {item!r}: a value is a whole number, True or False")
    return out


def tuning_overrides(text: str, error) -> dict:
    """'max_registers=96,prefetch_tiles=0' -> {'max_registers': 96, 'prefetch_tiles': 0}, each a field of
    fused_linear.Tuning that holds a number or None (the row tilings are not set from the command line)."""
    from kernels.decode.fused_linear import Tuning

    numeric = {f.name for f in dataclasses.fields(Tuning) if f.name not in ("few_rows", "many_rows")}
    out = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in numeric or not value:
            error(f"--graph-tuning {item!r}: want FIELD=VALUE with FIELD one of {', '.join(sorted(numeric))}")
        if value == "None":
            out[name] = None
        elif value in ("True", "False"):
            out[name] = value == "True"
        else:
            try:
                out[name] = int(value) if value.lstrip("-").isdigit() else float(value)
            except ValueError:
                error(f"--graph-tuning {item!r}: {value!r} is not a number, True, False or None")
    return out


@contextlib.contextmanager
def tuned(overrides: dict):
    """fused_linear.TUNING with `overrides` set for the block, then as it was. In place: the launch helpers bind
    the TUNING object as a default argument, so a new object would go unseen."""
    from kernels.decode import fused_linear

    before = {k: getattr(fused_linear.TUNING, k) for k in overrides}
    for k, v in overrides.items():
        setattr(fused_linear.TUNING, k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            setattr(fused_linear.TUNING, k, v)


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Bytes per second of a device-to-device copy (read and write counted), the best of five."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return 2 * nbytes / best


# The time model's parameters as run h200-20261203j fitted them (kernels/decode/notes.md): each row also
# says what the model predicts for its tiling, so that a sweep tests the model as well as the kernel.
MODEL_CHAIN_S, MODEL_BOUNDARY_S = 6e-6, 1.5e-6


def model_ms(step, bandwidth: float) -> float:
    """persistent_plan.predicted_step_s for this step's own plan, one streamed block ahead of each list."""
    from kernels.decode.persistent_plan import predicted_step_s

    t = step.tiling
    ahead = t.slice_k * t.block_n * step.model.dtype.itemsize
    return 1e3 * predicted_step_s(step.plan, bandwidth, MODEL_BOUNDARY_S, buffer_bytes=ahead, chain_s=MODEL_CHAIN_S)


def traced_step(s) -> dict:
    """One step of the session's persistent step with its trace on (persistent_trace.traced_op_times):
    where its time went, by role and by its slowest operations, and how each operation's SMs parted (when the
    median SM started and finished, how late the last one was, and whether the same list is late every time)."""
    from kernels.decode.persistent_trace import (op_spread, op_times, role_ms, role_split, straggler_summary,
                                                 traced_op_times)

    times, spread = traced_op_times(s, read=lambda *trace: (op_times(*trace), op_spread(*trace)))
    spreads = {p.name: p for p in spread}
    slowest = sorted(times, key=lambda t: -t.span_ns)[:8]
    return {"traced_step_ms": times[-1].finish_ns / 1e6, "role_ms": role_ms(times),
            "stragglers": straggler_summary(list(spreads.values())),
            "role_split_ms": {role: dataclasses.asdict(part) for role, part in role_split(spread).items()},
            "slowest_operations": [{"name": t.name, "span_us": t.span_ns / 1e3, "tile_wait_us": t.wait_ns / 1e3,
                                    "tile_work_us": t.work_ns / 1e3, "tiles": t.tiles,
                                    "median_sm_start_us": spreads[t.name].start_ns / 1e3,
                                    "median_sm_done_us": spreads[t.name].sm_done_ns / 1e3,
                                    "last_sm_late_us": spreads[t.name].late_ns / 1e3,
                                    "last_sm": spreads[t.name].last_sm} for t in slowest]}


def _timed_session(model, a: SweepArgs, cache: str, impl: str, tiling, capacity: int, prompt):
    """One step built, warmed and captured, then timed: (best ms a step, the first step's logits, the greedy
    tokens, the session). Every round rewinds to the prompt (GPT-2 has 1024 positions)."""
    from kernels.decode.session import OurSession

    s = OurSession(model, a.batch, capacity, cache, "fused" if impl == "graph" else impl, cuda_graph=True,
                   step_options=tiling if isinstance(tiling, dict) else dict(tiling=tiling) if tiling else None)
    s.prepare(prompt, 2)
    s.step()
    torch.cuda.synchronize()
    first = s.last_logits.float().clone()
    s.start(prompt)
    best = float("inf")
    for _ in range(a.rounds + 1):
        s.rewind(a.context)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            s.step()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / a.steps)
    s.check()
    return best, first, s.generated(a.context, a.steps + 1), s


def main(argv=None) -> int:
    from kernels.decode.gpt2 import GPT2, PRESETS, cache_bytes_per_token, random_hf_model
    from kernels.decode.persistent_step import CANDIDATE_TILINGS

    a = parse(argv)
    if not torch.cuda.is_available():
        raise SystemExit("this sweep times CUDA graphs: it needs a CUDA GPU")
    bandwidth = copy_bandwidth()
    rows = []
    for name in a.models:
        args = PRESETS[name]
        model = GPT2.from_hf(random_hf_model(args, seed=0, device="cuda", dtype=torch.bfloat16))
        capacity = a.context + a.steps + 2  # every round rewinds to the prompt: GPT-2 has 1024 positions
        prompt = torch.randint(0, args.vocab_size, (a.batch, a.context), generator=torch.Generator().manual_seed(0))
        chosen = [CANDIDATE_TILINGS[i] for i in a.tilings] if a.tilings is not None else list(CANDIDATE_TILINGS)
        variants = [("graph", cache, None, tuning) for cache in a.caches for tuning in ({}, *a.graph_tunings)]
        variants += [("persistent", "bf16", t, {}) for t in chosen]
        variants += [("persistent-ws", "bf16", dict(options), {}) for options in a.ws_rows]
        ref = {}  # cache -> (tokens, first logits) of its graph step as set: what every row of that cache is held to
        for impl, cache, tiling, tuning in variants:
            floor_s = (model.weight_bytes_per_step()
                       + cache_bytes_per_token(args, a.batch, int8=cache == "int8") * a.context) / bandwidth
            row = {"model": name, "batch": a.batch, "context": a.context, "step": impl, "cache": cache,
                   "tuning": tuning or None,
                   "tiling": tiling if isinstance(tiling, dict) else dataclasses.asdict(tiling) if tiling else None,
                   "bandwidth_bytes_per_s": bandwidth, "floor_ms": floor_s * 1e3}
            try:
                with tuned(tuning):
                    best, first, tokens, s = _timed_session(model, a, cache, impl, tiling, capacity, prompt)
                ref_tokens, ref_logits = ref.setdefault(cache, (tokens, first))
                same = min(tokens.shape[1], ref_tokens.shape[1])
                row.update(status="ok", step_ms=best, over_floor=best / (floor_s * 1e3),
                           tokens_as_graph=float((tokens[:, :same] == ref_tokens[:, :same]).float().mean()),
                           first_logits_max_diff=float((first - ref_logits).abs().max()))
                if tiling is not None and impl == "persistent":
                    row["model_ms"] = model_ms(s.step_fn, bandwidth)
                if tiling is not None and a.trace:
                    try:
                        row.update(traced_step(s))
                    except Exception as exc:  # noqa: BLE001 - the timing stands without its trace
                        row["trace_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
                del s
            except Exception as exc:  # noqa: BLE001 - one failed row is a row
                row.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:500]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            if a.out:
                a.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
