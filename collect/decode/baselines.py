"""transformers' model.generate timed per token, and the host profile of its loops: why one costs more per
token than the other."""
from __future__ import annotations

import time
from typing import Callable

from ..schema.decode import DecodeFile, DecodeRow, HostProfileRow
from ..timing import compact_samples, free_cuda_memory, is_oom, summarize
from .arithmetic import floor_ms, kv_bytes_per_step, steps_for
from .sessions import _Env, _error_reason, _Model, _prompt


def _call_ms(fn: Callable[[], object], env: _Env) -> float:
    """One call's time on the phase's clock: CUDA events on a GPU, the host clock on the CPU."""
    if not env.cuda:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import torch

    env.sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _generate_row(row: DecodeRow, m: _Model, prompt, steps: int, pairs: int, env: _Env) -> DecodeRow:
    """transformers' model.generate per token: each timed pair is one call generating the prefill's token and
    `steps` more, and one generating the prefill's token alone; their difference over `steps` is the time of
    a token after the first, prefill and the call's own set-up taken out. One untimed pair first, over the
    same positions, so every shape the timed calls meet has been met (see VariantSpec.warm_every_step)."""
    import torch

    from kernels.decode.session import hf_generate
    from kernels.decode.gpt2 import cache_bytes_per_token

    a, context, batch = m.ours.args, prompt.shape[1], prompt.shape[0]
    t0 = time.perf_counter()
    samples = []
    try:
        for p in range(pairs + 1):
            if p == pairs and env.cuda:
                row.mem_at_start_bytes = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            long_ms = _call_ms(lambda: hf_generate(m.hf, prompt, steps + 1), env)
            short_ms = _call_ms(lambda: hf_generate(m.hf, prompt, 1), env)
            if p:
                samples.append((long_ms - short_ms) / steps)
        if env.cuda:
            row.peak_mem_bytes = torch.cuda.max_memory_allocated()
        tokens, cache = hf_generate(m.hf, prompt, steps + 1)
    except Exception as exc:  # one failed row is a row, not a failed phase
        row.status = "oom" if is_oom(exc) else "error"
        row.reason = _error_reason(exc)
        free_cuda_memory()
        return row
    if min(samples) <= 0:
        row.status = "error"
        row.reason = (f"a call generating {steps} more tokens took no longer than one generating the first alone "
                      f"(per-token differences {', '.join(f'{x:.3g}' for x in samples)} ms): too noisy to time")
        return row
    t = summarize(samples)
    row.wall_s = time.perf_counter() - t0
    row.cache_class = type(cache).__name__ if cache is not None else None
    row.new_tokens = steps + 1
    row.loops_timed, row.steps_per_loop, row.steps_timed = pairs, steps, pairs * steps
    row.step_ms_median, row.step_ms_p10, row.step_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
    row.step_samples_ms = compact_samples(t)
    row.tokens_per_s = batch / (t.median_ms * 1e-3)
    per_token = cache_bytes_per_token(a, batch, int8=False, dtype_bytes=m.ours.wte.element_size())
    row.kv_cache_bytes = per_token * (context + steps)  # the cache holds every position but the last token's
    row.weight_bytes_per_step = m.info.weight_bytes_per_step
    row.kv_bytes_per_step = kv_bytes_per_step(per_token, context, 0, steps - 1)
    row.bytes_per_step = row.weight_bytes_per_step + row.kv_bytes_per_step
    row.floor_ms = floor_ms(row.bytes_per_step, env.bandwidth)
    row.achieved_over_floor = t.median_ms / row.floor_ms if row.floor_ms else None
    row.distinct_tokens = int(tokens.unique().numel())
    return row


# Tokens the two profiled calls of each transformers loop differ by (collect/host_profile.py).
HOST_PROFILE_STEPS = 16
# Profiled pairs tried before a row says its host was too noisy to attribute (a CI run on a busy two-core machine
# drew a noisy pair twice in a row at the test model's 7 tokens).
PROFILE_TRIES = 3


def _host_profile_rows(m: _Model, batch: int, context: int, env: _Env, result: DecodeFile) -> None:
    """model.generate and the plain greedy loop under cProfile and the torch profiler at one shape: why one
    costs more per token than the other (collect/host_profile.py). A failure costs these rows, not the phase."""
    from kernels.decode.session import HfSession, hf_generate

    from ..host_profile import NoisyProfile, attribute, count_device_work, profile_call

    a = m.ours.args
    steps = steps_for(a.n_positions, context, HOST_PROFILE_STEPS)
    rows = {v: HostProfileRow(model=m.info.name, variant=v, batch=batch, context=context, steps=steps, status="ok")
            for v in ("hf-generate", "hf-eager")}
    result.host_profiles.extend(rows.values())
    if env.deadline.passed() or steps < 1:
        for r in rows.values():
            r.status = "skipped" if steps else "unsupported"
            r.reason = env.deadline.reason() if steps else f"context {context} leaves no room for a decode step"
        return
    prompt = _prompt(batch, context, a.vocab_size)
    session = HfSession(m.hf, batch, context + steps)
    calls = {"hf-generate": (lambda: hf_generate(m.hf, prompt, steps + 1), lambda: hf_generate(m.hf, prompt, 1)),
             "hf-eager": (lambda: _eager_tokens(session, prompt, steps), lambda: _eager_tokens(session, prompt, 0))}
    for variant, (long, short) in calls.items():
        row = rows[variant]
        try:
            long(), short()  # warm: every cache length and kernel the profiled calls meet
            for attempt in range(PROFILE_TRIES):  # a busy host's noise rarely strikes thrice; then the row says why
                try:
                    att = attribute(profile_call(long), profile_call(short), steps, variant)
                    break
                except NoisyProfile:
                    if attempt == PROFILE_TRIES - 1:
                        raise
            (k_long, c_long), (k_short, c_short) = count_device_work(long, env.sync), count_device_work(short, env.sync)
        except Exception as exc:  # noqa: BLE001
            row.status, row.reason = ("oom" if is_oom(exc) else "error"), _error_reason(exc)
            free_cuda_memory()
            continue
        row.ms_per_token, row.components, row.calls_per_token = att.ms_per_token, att.components, att.calls_per_token
        row.kernels_per_token = (k_long - k_short) / steps
        row.host_copies_per_token = (c_long - c_short) / steps
    env.save()


def _eager_tokens(session, prompt, steps: int) -> None:
    session.start(prompt)
    for _ in range(steps):
        session.step()


