"""The kernels the rows will launch, compiled ahead in spawned processes (collect/precompile.py), so no timed
row pays for Triton's compiler."""
from __future__ import annotations

from ..context import RunContext
from .arithmetic import steps_for
from .plans import Plan, PLANS, _dtype_choice, graph_step_from_env, native_dtype


PRECOMPILE_WORKERS = 8
PRECOMPILE_STALL_S = 120.0  # longest wait for the next task (includes a worker's start-up)


def compile_tasks(plan: Plan, graph_step: str, device_name: str, dtype_name: str = "") -> list[tuple]:
    """One task per kernel family a run needs: the microbenchmark's attention (bf16, int8), and per model,
    row tiling (16 or 64 rows a program, ...) and cache length modulo 16 (Triton specializes strides
    divisible by 16), the steps of every variant that runs our kernels; per model and key shape, the persistent
    step at the row's own capacity (the warp-specialized step's kernel is specialized to it). Each task ends with
    the device and the dtype the rows use ('' for the device's own choice), so the workers compile the variants
    the rows will launch."""
    from kernels.decode.gpt2 import PRESETS

    tasks = [("micro", int8, plan.micro_heads, plan.micro_head_dim, device_name, dtype_name) for int8 in (False, True)]
    seen = set()
    for mp in plan.models:
        args = mp.args or PRESETS[mp.name]
        for b, c in mp.key_shapes + mp.sweep_shapes:
            n = steps_for(args.n_positions, c, plan.steps)
            if n < 2:
                continue
            key = (args, max(16, 1 << (b - 1).bit_length()), (c + n) % 16)
            if key not in seen:
                seen.add(key)
                tasks.append(("step", args, b, key[2], graph_step, device_name, dtype_name))
        # The key shapes' capacity is also the agreement check's (the model's positions less one) at context 1000.
        for b, c in mp.key_shapes:
            n = steps_for(args.n_positions, c, plan.steps)
            key = ("persistent", args, b, c + n)
            if n >= 2 and key not in seen:
                seen.add(key)
                tasks.append((*key, device_name, dtype_name))
    return tasks


def _compile_task(task: tuple) -> str | None:
    """In a spawned process: run each kernel of a task once on tiny inputs (zero weights), so Triton's
    on-disk cache holds every variant the rows will launch."""
    try:
        import torch

        from kernels.decode.session import OurSession
        from kernels.decode.gpt2 import GPT2

        from kernels.decode.gpt2 import decode_dtype

        device = torch.device(task[-2])
        dtype = getattr(torch, task[-1]) if task[-1] else decode_dtype(device)
        if task[0] == "micro":
            from kernels.decode.attention import decode_attention
            from kernels.decode.kv_quant import quantize

            _, int8, heads, head_dim, _, _ = task
            q = torch.randn((1, heads, head_dim), device=device, dtype=dtype)
            k = torch.randn((1, heads, 64, head_dim), device=device, dtype=dtype)
            lens = torch.full((1,), 64, device=device, dtype=torch.int32)
            if int8:
                (kq, ks), (vq, vs) = (quantize(k),) * 2
                decode_attention(q, kq, vq, lens, k_scale=ks, v_scale=vs)
            else:
                decode_attention(q, k, k, lens)
        elif task[0] == "persistent":
            from kernels.decode.session import STEPS, persistent_step_for

            _, args, batch, capacity, _, _ = task
            step = persistent_step_for(batch, device)
            if STEPS[step].unsupported_reason(batch, device) is None:
                s = OurSession(GPT2.zeros(args, device, dtype), batch, capacity, "bf16", step)
                s.prepare(torch.zeros((batch, 8), dtype=torch.int64), 1)
                if device.type == "cuda":  # and the traced form the key rows read
                    s.step_fn.with_trace()(s.history, s.pos, s.lens)
        else:
            _, args, batch, cap_mod, graph_step, _, _ = task
            model = GPT2.zeros(args, device, dtype)
            capacity = 16 + cap_mod
            prompt = torch.zeros((batch, 8), dtype=torch.int64)
            # The graph steps and the eager steps; one pair each where the graph step is "torch" too.
            steps = (("bf16", graph_step), ("int8", graph_step), ("bf16", "torch"), ("int8", "torch"))
            for cache, step in dict.fromkeys(steps):
                s = OurSession(model, batch, capacity, cache, step)
                s.prepare(prompt, 1)
                if hasattr(s.step_fn, "compile_attention_launches"):  # what the graph sessions will measure
                    s.step_fn.compile_attention_launches(s.lens)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the rows will meet (and record) the same error
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _work(plan: Plan, graph_step: str, device, dtype_name: str):
    from ..precompile import CompileWork

    return CompileWork("decode", _compile_task, tuple(compile_tasks(plan, graph_step, str(device), dtype_name)),
                       PRECOMPILE_WORKERS, heavy=True)


def precompile(plan: Plan, graph_step: str, device, workers: int | None = None, dtype_name: str = "",
               pool=None) -> int | None:
    """Compile the kernels the rows need in parallel spawned processes before anything is timed: Triton
    compiles single-threaded, a second or two per variant, and a full run needs dozens. `pool`: the
    collect's shared compile pool, if it holds this work already. Best effort: whatever these miss,
    the rows compile for themselves (untimed, in their warm-up)."""
    from ..precompile import compile_ahead

    return compile_ahead(pool, _work(plan, graph_step, device, dtype_name), workers, PRECOMPILE_STALL_S)


def compile_work(ctx: RunContext):
    """The kernels the rows need, for the collect's compile pool (collect/precompile.py)."""
    import torch

    if ctx.profile not in PLANS or not torch.cuda.is_available():
        return None
    choice = _dtype_choice(ctx)
    dtype_name = choice[0] if choice else str(native_dtype(torch.device("cuda"))[0]).removeprefix("torch.")
    return _work(PLANS[ctx.profile], graph_step_from_env(), torch.device("cuda"), dtype_name)


