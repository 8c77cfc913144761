"""Where transformers' decode loops spend host time per token, from cProfile: model.generate against the plain
greedy loop (hf-eager), at one shape.

Both loops are host-bound on a fast GPU (the GPU waits for the CPU to issue each kernel), so a per-token
difference between them is host work. cProfile counts each Python function's cumulative time; a call
generating `steps + 1` tokens minus one generating a single token leaves the cost of `steps` decode
tokens, prefill and set-up taken out, and the same subtraction for the loop (`steps` steps minus none).
The components below are transformers' own functions, matched by file and name. cProfile slows every
Python call, so its milliseconds are larger than the timed rows'; the page reads them as shares of the
profiled step, not as times. The attribution is plain Python, tested on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .schema.decode import HOST_NESTED, HOST_OTHER, HOST_PARTS_OVER_WHOLE

# (component, file name, function name). A component's time is the largest cumulative time among the
# functions it matches (the outermost of nested calls of one name, e.g. the model's forward over its
# blocks' forwards). "model forward" includes the causal mask, which is built inside it.
COMPONENTS: tuple[tuple[str, str, str], ...] = (
    ("model forward", "modeling_gpt2.py", "forward"),
    ("causal mask (inside the forward)", "masking_utils.py", "create_causal_mask"),
    ("prepare inputs", "utils.py", "prepare_inputs_for_generation"),
    ("update model kwargs", "utils.py", "_update_model_kwargs_for_generation"),
    ("logits processors", "logits_process.py", "__call__"),
    ("stopping criteria", "stopping_criteria.py", "__call__"),
    ("unfinished-sequence check", "utils.py", "_has_unfinished_sequences"),
)
# The function whose cumulative time is the whole per-token loop, per variant.
TOTALS = {"hf-generate": ("utils.py", "_sample"), "hf-eager": ("session.py", "step")}  # kernels/decode/session.py
# What none of the components covers, the components nested inside another (reported, not subtracted again from the
# total), and how far past the loop the others may add up (run h100-20261205a: the eager loop's forward 8.94 ms a
# token inside a loop of 8.34, two calls whose noise differed): the data contract's, which the pages read too.
OTHER, NESTED, PARTS_OVER_WHOLE = HOST_OTHER, HOST_NESTED, HOST_PARTS_OVER_WHOLE

# (file, line, function) -> (primitive calls, cumulative seconds): pstats.Stats(...).stats reduced.
Stats = Mapping[tuple[str, int, str], tuple[int, float]]


def reduce_stats(stats: Mapping) -> dict[tuple[str, int, str], tuple[int, float]]:
    """pstats.Stats.stats ((file, line, fn) -> (cc, nc, tt, ct, callers)) to (calls, cumulative seconds)."""
    return {key: (int(v[1]), float(v[3])) for key, v in stats.items()}


def _matches(key: tuple[str, int, str], file: str, fn: str) -> bool:
    path, _, name = key
    return name == fn and path.replace("\\", "/").rsplit("/", 1)[-1] == file


def _largest(stats: Stats, file: str, fn: str) -> tuple[int, float]:
    hits = [v for k, v in stats.items() if _matches(k, file, fn)]
    return max(hits, key=lambda v: v[1]) if hits else (0, 0.0)


class NoisyProfile(ValueError):
    """Two profiled calls too noisy to difference: profiling them again may do."""


@dataclass
class Attribution:
    ms_per_token: float                 # the whole loop's profiled time per token
    components: dict[str, float]        # component -> profiled ms per token (OTHER: what none of them covers)
    calls_per_token: dict[str, float]   # component -> calls per token


def attribute(long: Stats, short: Stats, steps: int, variant: str) -> Attribution:
    """Per-token profiled time of `variant`'s loop and its components: `long` ran `steps` more tokens than
    `short`. ValueError when the loop's own function is missing (a transformers that renamed it); NoisyProfile when
    the longer call took no longer."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    file, fn = TOTALS[variant]
    total_long, total_short = _largest(long, file, fn), _largest(short, file, fn)
    if total_long[0] == 0:
        raise ValueError(f"the profile has no {fn} in {file}: this transformers version runs its {variant} loop "
                         "elsewhere, so the host time cannot be attributed")
    total = (total_long[1] - total_short[1]) * 1e3 / steps
    if total <= 0:
        # On a loaded host the shorter call can take as long as the longer one. A component's such difference is
        # noise on a small share (clamped below); the whole loop's leaves nothing to attribute.
        raise NoisyProfile(f"under cProfile the {variant} call of {steps} more tokens took no longer than the "
                           "shorter one (host noise): nothing to attribute")
    comps, calls = {}, {}
    for name, cfile, cfn in COMPONENTS:
        a, b = _largest(long, cfile, cfn), _largest(short, cfile, cfn)
        ms = (a[1] - b[1]) * 1e3 / steps
        if a[0] - b[0] > 0:  # called more in the longer call: part of a token's work
            # Two calls' noise can make a tiny component's difference negative: it took no measurable time.
            comps[name], calls[name] = max(ms, 0.0), (a[0] - b[0]) / steps
    parts = sum(v for k, v in comps.items() if k not in NESTED)
    if parts > PARTS_OVER_WHOLE * total:
        raise NoisyProfile(f"under cProfile the {variant} loop's parts took {parts:.3g} ms a token, more than the "
                           f"{total:.3g} ms of the whole loop (host noise between the two calls): nothing to attribute")
    comps[OTHER] = max(0.0, total - parts)
    return Attribution(total, comps, calls)


def profile_call(fn) -> dict[tuple[str, int, str], tuple[int, float]]:
    """Run fn under cProfile and return its reduced statistics."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    return reduce_stats(pstats.Stats(prof).stats)


def count_device_work(fn, sync) -> tuple[int, int]:
    """(GPU kernels, device-to-host copies) fn launches, from the torch profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        fn()
        sync()
    kernels = copies = 0
    for ev in p.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if "Memcpy DtoH" in ev.name:
            copies += 1
        elif not ev.name.startswith("Memcpy") and not ev.name.startswith("Memset"):
            kernels += 1
    return kernels, copies
