"""One timed row per variant and shape: loop time, kernels by class and role, bytes and the floor."""
from __future__ import annotations

import time
from collections import Counter
from typing import Callable

from ..decode_profile import profile_steps
from ..schema.decode import DecodeFile, DecodeRow, KernelClassRow, KernelRoleRow
from ..timing import compact_samples, free_cuda_memory, is_oom, summarize
from .arithmetic import _role_bytes, floor_ms, kv_bytes_per_step, loop_shape, steps_for
from .baselines import _generate_row
from .plans import COMPILE_RESERVE_S, Plan, VariantSpec
from . import sessions
from .sessions import _clean, _Env, _error_reason, _Model, _prompt, _session_key, _unsupported


def _loop_time(step: Callable[[], None], per_loop: int, repeats: int, env: _Env):
    """Loop time on a GPU (the one clock); on the CPU the same loops timed by the host clock."""
    if env.cuda:
        from ..timing import loop_time

        return loop_time([step], per_loop, repeats)
    samples = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(per_loop):
            step()
        if r:
            samples.append((time.perf_counter() - t0) * 1e3 / per_loop)
    return summarize(samples)


def _profile(session, steps: int, env: _Env, result: DecodeFile, fused_layers: int | None = None):
    """Kernels of a few steps (and for a fused step of `fused_layers` layers, by role); a profiler that
    cannot run costs the counts, not the row."""
    if not env.cuda:
        return None
    try:
        return profile_steps(session.step, steps, env.sync, fused_layers)
    except Exception as exc:  # noqa: BLE001
        note = f"The torch profiler could not count kernels: {_error_reason(exc)}"
        if note not in result.notes:
            result.notes.append(note)
        return None


def _persistent_roles(session, result: DecodeFile, row: DecodeRow | None = None):
    """The persistent step's time by role from one traced step at the session's position (its trace:
    kernels/decode/persistent_trace.py): each role's operations and their spans of the critical path, each split
    into the hand-off, the median SM's work and the wait for the last SM, as RoleShares; and on `row`, how often
    one SM was the last to finish an operation. A trace that cannot run costs the breakdown and a note, not the
    row."""
    from kernels.decode.persistent_trace import (op_spread, op_times, role_ms, role_split, straggler_summary,
                                                 traced_op_times)

    from ..decode_profile import RoleShare

    def note(what: str, exc: BaseException) -> None:
        text = f"The persistent step's {what}: {_error_reason(exc)}"
        if text not in result.notes:
            result.notes.append(text)

    def read(*trace):
        # The spans first: a spread that cannot be read (its reading first ran on a GPU in this collect) costs the
        # split, not the spans the page already narrates.
        times = op_times(*trace)
        try:
            return times, op_spread(*trace)
        except Exception as exc:  # noqa: BLE001
            note("trace gave its spans but not how its SMs parted", exc)
            return times, None

    try:
        times, spreads = traced_op_times(session, read=read)
    except Exception as exc:  # noqa: BLE001
        note("trace could not be read", exc)
        return []
    operations = Counter(t.role for t in times)
    if spreads is None:
        return [RoleShare(role, float(operations[role]), ms) for role, ms in role_ms(times).items()]
    if row is not None:
        row.last_sm_share = straggler_summary(spreads)["its_share_of_operations"]
    split = role_split(spreads)
    return [RoleShare(role, float(operations[role]), ms, split[role].handoff_ms, split[role].late_ms)
            for role, ms in role_ms(times).items()]


def _pdl_fallback(spec: VariantSpec, exc: BaseException, result: DecodeFile) -> bool:
    """If a graph of the fused step failed while its kernels launch with programmatic dependent launch,
    turn that off for the rest of the phase (and say so); True if the row is worth running again."""
    from kernels.decode import fused_linear as fl
    from kernels.common import has_pdl

    import torch

    if not (spec.graph and spec.step == "fused" and fl.TUNING.pdl) or is_oom(exc):
        return False
    if not torch.cuda.is_available() or not has_pdl(torch.cuda.get_device_capability()):
        return False  # the kernels launch without it there anyway
    fl.TUNING.pdl = False
    result.notes.append(f"The fused step's kernels were launched without programmatic dependent launch from the "
                        f"{spec.name} rows on: with it, the step failed ({_error_reason(exc)}).")
    return True


def _cache_bytes(session) -> int:
    return session.cache.nbytes() if hasattr(session.cache, "nbytes") else session.kv_cache_bytes()


def _decode_row(spec: VariantSpec, m: _Model, batch: int, context: int, plan: Plan, env: _Env, profile: bool,
                keep: bool, result: DecodeFile) -> DecodeRow:
    import torch

    from kernels.decode.gpt2 import cache_bytes_per_token, check_limits

    a = m.ours.args
    n = steps_for(a.n_positions, context, plan.steps)
    row = DecodeRow(model=m.info.name, variant=spec.name, batch=batch, context=context, new_tokens=0, status="ok",
                    step_impl=spec.impl_for(batch, env.device))
    if env.deadline.passed(COMPILE_RESERVE_S if spec.compiled else 0.0):
        row.status, row.reason = "skipped", env.deadline.reason()
        return row
    if n < 2:
        row.status = "unsupported"
        row.reason = (f"context {context} leaves room for {n} decode step(s) within the model's {a.n_positions} "
                      "positions; timing needs at least 2")
        return row
    why = _unsupported(spec, env, batch=batch)
    if why:
        row.status, row.reason = "unsupported", why
        return row
    timed_n = min(n, spec.max_steps or n)
    loops, per_loop = loop_shape(timed_n)
    capacity = context + n
    check_limits(a, context, n + 1, batch)
    _clean(env)
    prompt = _prompt(batch, context, a.vocab_size)
    if spec.generate:
        return _generate_row(row, m, prompt, timed_n, loops - 1, env)
    # Positions the row decodes after its prefill: the profiled steps, then the timed loops, each from the prompt.
    warm = max(loops * per_loop, min(plan.profile_steps, n) if profile else 0) if spec.warm_every_step else plan.warmup_steps
    class_rows: list[KernelClassRow] = []
    roles = []
    fused_graph = spec.graph and row.step_impl == "fused"
    t0 = time.perf_counter()
    try:
        s = sessions.open_session(spec, m, batch, capacity, env, keep)
        s.prepare(prompt, warm)
        row.compile_s = getattr(s, "compile_s", None)
        if spec.warm_every_step:
            row.cold_step_ms = s.warmup_step_ms
        if fused_graph:
            row.attention_launch = s.step_fn.attention_launch.label
            row.attention_config = s.attention_config
            if (choice := s.attention_choice()) is not None:
                m.judged[_session_key(spec, batch, capacity)] = choice
                row.attention_trials = dict(choice.ms)
        if profile:
            prof = _profile(s, min(plan.profile_steps, n), env, result, a.n_layer if fused_graph else None)
            if prof is not None:
                roles = prof.roles
                row.kernels_per_step, row.kernel_ms_per_step = prof.kernels_per_step, prof.kernel_ms_per_step
                class_rows.extend(
                    KernelClassRow(model=m.info.name, variant=spec.name, batch=batch, context=context,
                                   kernel_class=c.kernel_class, kernels_per_step=c.kernels_per_step,
                                   ms_per_step=c.ms_per_step, top_kernel=c.top_kernel[:300]) for c in prof.classes)
            if env.cuda and getattr(getattr(s, "step_fn", None), "roles_by_trace", False):  # one kernel: traced
                roles = _persistent_roles(s, result, row)
            s.start(prompt)
        if env.cuda:  # allocator counters, kept on the host: no sync needed; loop_time syncs around each loop
            row.mem_at_start_bytes = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t = _loop_time(s.step, per_loop, loops - 1, env)
        if hasattr(s, "check"):
            s.check()  # a persistent step whose waits timed out raises here, naming what never arrived
        if env.cuda:
            row.peak_mem_bytes = torch.cuda.max_memory_allocated()
        row.kv_cache_bytes = _cache_bytes(s)
        row.cache_class = getattr(s, "cache_class", None)
        tokens = s.generated(context, loops * per_loop + 1)
    except Exception as exc:  # one failed row is a row, not a failed phase
        row.status = "oom" if is_oom(exc) else "error"
        row.reason = _error_reason(exc)
        m.sessions.pop(_session_key(spec, batch, capacity), None)
        free_cuda_memory()
        return row
    row.wall_s = time.perf_counter() - t0
    result.kernel_classes.extend(class_rows)
    row.new_tokens = loops * per_loop + 1
    row.loops_timed, row.steps_per_loop = loops - 1, per_loop
    row.steps_timed = (loops - 1) * per_loop
    row.step_ms_median, row.step_ms_p10, row.step_ms_p90 = t.median_ms, t.p10_ms, t.p90_ms
    row.step_samples_ms = compact_samples(t)
    row.tokens_per_s = batch / (t.median_ms * 1e-3) if t.median_ms > 0 else None
    per_token = cache_bytes_per_token(a, batch, int8=spec.cache.startswith("int8") and spec.family == "ours",
                                      dtype_bytes=m.ours.wte.element_size())
    row.weight_bytes_per_step = m.info.weight_bytes_per_step
    row.kv_bytes_per_step = kv_bytes_per_step(per_token, context, per_loop, loops * per_loop - 1)
    row.bytes_per_step = row.weight_bytes_per_step + row.kv_bytes_per_step
    role_bytes = _role_bytes(s.step_fn, row.kv_bytes_per_step, a.n_layer) if roles else {}
    result.kernel_roles.extend(
        KernelRoleRow(model=m.info.name, variant=spec.name, batch=batch, context=context, role=r.role,
                      kernels_per_step=r.kernels_per_step, ms_per_step=r.ms_per_step,
                      bytes_per_step=role_bytes.get(r.role), handoff_ms_per_step=r.handoff_ms_per_step,
                      late_ms_per_step=r.late_ms_per_step) for r in roles)
    row.floor_ms = floor_ms(row.bytes_per_step, env.bandwidth)
    row.achieved_over_floor = t.median_ms / row.floor_ms if row.floor_ms else None
    row.distinct_tokens = int(tokens.unique().numel())
    if profile and env.cuda and fused_graph:
        row.read_floor_ms = _read_floor(s, row, a.n_layer, per_loop, loops - 1, result)
    return row


def _read_floor(session, row: DecodeRow, layers: int, per_loop: int, repeats: int, result: DecodeFile) -> float | None:
    """The step's kernels as plain reads of their bytes (collect/read_floor.py); a failure costs this
    figure and a note, not the row."""
    from ..read_floor import read_floor_ms

    try:
        sizes = session.step_fn.kernel_bytes(row.kv_bytes_per_step / layers)
        return read_floor_ms(sizes, session.device, session.step_fn.kernel_pdl(), per_loop, repeats)
    except Exception as exc:  # noqa: BLE001
        note = f"The read-only twin of the fused step could not be timed: {_error_reason(exc)}"
        if note not in result.notes:
            result.notes.append(note)
        free_cuda_memory()
        return None


def _rows(m: _Model, shapes, plan: Plan, env: _Env, result: DecodeFile, key: bool, keep_shape=None,
          which: Callable[[VariantSpec], bool] = lambda spec: True) -> None:
    """Rows at these shapes of the variants `which` picks (a key-only variant at key shapes only)."""
    cases = [(b, c, spec) for b, c in shapes for spec in env.specs.values()
             if (key or not spec.key_only) and which(spec)]
    for b, c, spec in env.progress(cases, total=len(cases), desc=f"decode {m.info.name}"):
        keep = keep_shape is not None and (b, c) == keep_shape and spec.compiled
        row = _decode_row(spec, m, b, c, plan, env, profile=key, keep=keep, result=result)
        if row.status == "error" and _pdl_fallback(spec, RuntimeError(row.reason), result):
            row = _decode_row(spec, m, b, c, plan, env, profile=key, keep=keep, result=result)
        result.rows.append(row)
        env.save()


