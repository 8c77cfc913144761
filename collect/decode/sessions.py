"""What the rows share: the deadline, the device and how to save, the models built, and one session per
variant and shape (kernels/decode/session.py), built one at a time."""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..budget import no_limit_hint
from ..schema.decode import DecodeModel
from .plans import BUDGET_ENV, ModelPlan, Plan, SEED, VariantSpec


@dataclass
class _Deadline:
    at: float | None
    budget: float | None
    skipped: int = 0

    def passed(self, reserve_s: float = 0.0) -> bool:
        """Past the deadline, or within `reserve_s` of it (a row that cannot finish in time)."""
        return self.at is not None and time.perf_counter() + reserve_s > self.at

    def reason(self) -> str:
        self.skipped += 1
        return (f"not run: the decode phase's time budget of {self.budget:.0f} s was spent before this row "
                f"({no_limit_hint(BUDGET_ENV)})")


@dataclass
class _Env:
    """What rows share: device, floor bandwidth, the deadline, and how to save progress."""

    device: object
    bandwidth: float | None
    deadline: _Deadline
    save: Callable[[], None]
    specs: dict
    progress: Callable = field(default=lambda it, **kw: it)
    dtype: object = None  # the models' and caches' torch dtype

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()


@dataclass
class _Model:
    hf: object
    ours: object
    info: DecodeModel
    plan: ModelPlan
    # (variant, batch, capacity) -> session, kept for the agreement check: the compiled transformers
    # session only, whose cold compile costs tens of seconds. Every other session lives for one row or
    # one agreement check, so a row's memory figures never hold another variant's session.
    sessions: dict = field(default_factory=dict)
    # (variant, batch, capacity) -> the AttentionChoice a graph row's session was judged to, so that a
    # later session of that variant and shape (the agreement check's) runs the same kernels, unjudged.
    judged: dict = field(default_factory=dict)


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


@contextmanager
def heap_unfrozen_after():
    """What _clean froze is the collector's again when the block (or, as a decorator, the function) ends, however
    it ends."""
    try:
        yield
    finally:
        gc.unfreeze()


def _clean(env: _Env, full: bool = False) -> None:
    """Free what the last row or check left (its session's cache and graphs) before the next is built. What
    survives a collection is then frozen (gc.freeze), so the next one looks only at what was made since: a full
    collection over everything this process holds (torch, transformers, the compiled loop's graphs, half a million
    objects and more) took 0.28 s a call on the H200's host, 8 of a quick decode phase's 110 s (cProfile, run
    probe3, 2026-12-04). Whatever outlived a collection and is dropped later (the compiled session kept for the
    agreement check) needs `full`, which looks at the whole heap again; heap_unfrozen_after ends the phase's freezes."""
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    if env.cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _prompt(batch: int, context: int, vocab: int):
    import torch

    g = torch.Generator().manual_seed(SEED * 1_000_003 + batch * 10_007 + context)
    return torch.randint(0, vocab, (batch, context), generator=g)


def _build_model(mp: ModelPlan, model_path: str | None, env: _Env) -> _Model:
    from kernels.decode.gpt2 import GPT2, PRESETS, load_hf_model, random_hf_model

    t0 = time.perf_counter()
    dtype = env.dtype
    held_before = _allocated(env)
    if model_path:
        hf = load_hf_model(model_path, env.device, dtype)
        name, weights, seed, ckpt = Path(model_path).name, "checkpoint", None, Path(model_path).name
    else:
        hf = random_hf_model(mp.args or PRESETS[mp.name], seed=SEED, device=env.device, dtype=dtype)
        name, weights, seed, ckpt = mp.name, "random-init", SEED, None
    ours = GPT2.from_hf(hf)
    env.sync()
    a = ours.args
    info = DecodeModel(
        name=name, weights=weights, seed=seed, checkpoint=ckpt, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
        head_dim=a.head_dim, vocab_size=a.vocab_size, n_positions=a.n_positions, parameters=ours.parameter_count(),
        weight_bytes_per_step=ours.weight_bytes_per_step(), dtype=str(dtype).removeprefix("torch."),
        hf_attn_implementation=getattr(hf.config, "_attn_implementation", None),
        init_s=time.perf_counter() - t0,
        # Every model stays loaded through the phase: the pages take the others' bytes out of a row's figures.
        resident_bytes=None if held_before is None else max(0, _allocated(env) - held_before),
    )
    return _Model(hf, ours, info, mp)


def _allocated(env: _Env) -> int | None:
    if not env.cuda:
        return None
    import torch

    env.sync()
    return torch.cuda.memory_allocated(env.device)


def _unsupported(spec: VariantSpec, env: _Env, timing: bool = True, batch: int | None = None) -> str | None:
    """Why this variant cannot run here (at `batch` sequences, where given). Without a GPU our graph step
    still runs, uncaptured: the same numbers, so it can be checked, but its time would not be the graph's."""
    if spec.family == "ours":
        from kernels.decode.session import STEPS

        # A step that cannot run every shape or GPU says why itself (the persistent step: Ampere on, 16 rows).
        refuses = getattr(STEPS[spec.step_for(batch, env.device)], "unsupported_reason", None)
        why = refuses(batch, env.device) if refuses else None
        if why:
            return why
    if spec.graph and not env.cuda and timing:
        return "CUDA graphs need a CUDA device"
    if spec.compiled and not env.cuda:
        return "torch.compile(mode='reduce-overhead') replays CUDA graphs: it needs a CUDA device"
    return None


def _session_key(spec: VariantSpec, batch: int, capacity: int) -> tuple:
    """What _Model.sessions and _Model.judged are keyed by: one variant's sessions of one shape."""
    return spec.name, batch, capacity


def open_session(spec: VariantSpec, m: _Model, batch: int, capacity: int, env: _Env, keep: bool):
    """A session for this variant; a session kept for the agreement check is reused (a compiled one
    would otherwise compile again). Every session is built here, and the other stages call it as
    sessions.open_session, so one place sees them all (a test checks no two are alive at once)."""
    from kernels.decode.session import HfSession, OurSession

    key = _session_key(spec, batch, capacity)
    if key in m.sessions:
        s = m.sessions[key]
        s.set_mode(False, False)
        return s
    if spec.family == "hf":
        s = HfSession(m.hf, batch, capacity, compiled=spec.compiled)
    else:
        s = OurSession(m.ours, batch, capacity, spec.cache, spec.step_for(batch, env.device),
                       cuda_graph=spec.graph and env.cuda)
        if key in m.judged:
            s.adopt_attention(m.judged[key])
    if keep:
        m.sessions[key] = s
    return s


def _warm_up(m: _Model, plan: Plan, env: _Env) -> None:
    """Compile and autotune our kernels at a mid-sweep shape, so no row pays for it (and autotuning
    never chooses on a toy problem). The compiled transformers loop compiles in its own rows."""
    B, T = plan.warmup_shape
    T = min(T, m.ours.args.n_positions // 2)
    prompt = _prompt(B, T, m.ours.args.vocab_size)
    for spec in env.specs.values():
        if _unsupported(spec, env, batch=B) or spec.compiled or spec.generate:
            continue
        s = open_session(spec, m, B, T + 2, env, keep=False)
        s.prepare(prompt, 1)
        s.step()
        del s  # gone before the next variant's is built: one session at a time
    _clean(env)


