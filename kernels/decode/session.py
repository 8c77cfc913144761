"""Decode loops: ours (eager or one CUDA graph per step) and transformers' (eager, or compiled with a
static cache), behind one interface, so every variant is timed, checked and compared the same way.

A session owns a batch of sequences and a cache of fixed capacity. `start(tokens)` prefills the
prompt; each `step()` decodes one token per sequence without synchronizing, so steps issued back
to back run as a user's generation loop runs. A greedy session feeds each step its own argmax. A
teacher-forced session is given the whole sequence up front and feeds its tokens instead; it
records every step's two largest logits, so its predictions can be compared position by position
with another variant's on exactly the same inputs.

Every limit is checked on the host before the GPU sees anything (see kernels.decode.gpt2.check_limits).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .gpt2 import (CACHES, GPT2, PRESETS, ModelArgs, cache_kwarg, cache_of, check_limits, check_tokens, random_hf_model,
                   transformers_module)
from .attention import last_config
from .fused_linear import device_facts, uses_pdl
from .gpt2_fused import ArgmaxScratch, FusedStep, InductorStep, TorchStep, advance, argmax_advance
from .persistent_step import PersistentStep
from .persistent_ws import WarpSpecializedStep
from .split_kv_config import AttentionLaunch, config_label, launch_choices

# Judging the attention choices in the captured step (OurSession._judge_attention): steps replayed
# to warm each graph, then timed, per round; the best round counts. With six configs (an int8 cache
# at head_dim 64) and six launches where the GPU has PDL, eleven captures (the configs, then five
# more launches of the fastest), timed twelve times over 16 steps each: about a second of a
# session's warm-up at gpt2-xl, less at gpt2.
TRIAL_WARM_STEPS = 2
TRIAL_STEPS = 6
TRIAL_ROUNDS = 2

Choice = tuple[int, AttentionLaunch]  # (index into the step's attention configs, launch)

# A step's implementations, by the name a session is asked for.
STEPS = {s.impl: s for s in (TorchStep, FusedStep, InductorStep, PersistentStep, WarpSpecializedStep)}


def persistent_step_for(batch: int | None, device) -> str:
    """Which persistent step runs `batch` sequences on `device`: the warp-specialized Gluon step where it can (compute
    capability 9.0, at most 4 sequences), since it streams its weights by TMA and measured faster than the
    plain-Triton step (kernels/decode/notes.md, "persistent_ws"); the plain-Triton step everywhere else, which then
    says itself where it cannot run either."""
    ws = WarpSpecializedStep.unsupported_reason(batch, device) is None
    return WarpSpecializedStep.impl if ws else PersistentStep.impl


@dataclass(frozen=True)
class AttentionChoice:
    """What a session's judge kept for its graph step's attention: the config (None: the autotuner's),
    its label, the launch, and every choice's time per step, by 'config | launch'."""

    config: dict | None
    label: str | None
    launch: AttentionLaunch
    ms: dict = field(default_factory=dict)


def pick_attention(n_configs: int, launches: Sequence[AttentionLaunch],
                   measure: Callable[[list[Choice]], dict]) -> tuple[Choice, dict]:
    """The attention config and launch whose captured step ran fastest, in two rounds: every config
    launched the first way (plainly), then the fastest config launched every way, re-timed side by
    side with the others. `measure(choices)` returns {choice: ms per step} for choices timed together.
    Returns the winner and every time measured (the second round's where a choice ran in both)."""
    if n_configs < 1 or not launches:
        raise ValueError(f"nothing to choose from: {n_configs} configs and {len(launches)} launches.")
    times: dict = {}
    best = (0, launches[0])
    if n_configs > 1:
        times.update(measure([(i, launches[0]) for i in range(n_configs)]))
        best = min(times, key=times.get)
    if len(launches) > 1:
        second = measure([(best[0], how) for how in launches])
        times.update(second)
        best = min(second, key=second.get)
    return best, times


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class Session:
    """What every loop offers the phase."""

    device: torch.device
    batch: int
    capacity: int          # positions the cache holds; a session decodes at most capacity + 1 - prompt tokens
    teacher_forced: bool
    record_top2: bool

    def start(self, tokens: torch.Tensor) -> None:
        raise NotImplementedError

    def step(self) -> None:
        raise NotImplementedError

    def generated(self, prompt_len: int, n: int) -> torch.Tensor:
        """(B, n) tokens after the prompt, on the CPU: the prefill's, then one per step."""
        return self.history[:, prompt_len:prompt_len + n].cpu()

    def top2(self, first: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Two largest logits (fp32) and their token ids, (B, n, 2) each, of the predictions made at
        positions first .. first + n - 1 (the token at position p predicts p + 1)."""
        return self.top_v[:, first:first + n].cpu(), self.top_i[:, first:first + n].cpu()

    def _buffers(self, device, batch: int, capacity: int, record_top2: bool, keep_history: bool = False) -> None:
        if not keep_history:
            self.history = torch.zeros((batch, capacity + 1), dtype=torch.int64, device=device)
        if record_top2:
            self.top_v = torch.zeros((batch, capacity + 1, 2), dtype=torch.float32, device=device)
            self.top_i = torch.zeros((batch, capacity + 1, 2), dtype=torch.int64, device=device)

    def _load(self, tokens: torch.Tensor, vocab: int) -> int:
        """Put a prompt (greedy) or a whole sequence (teacher-forced) into history; returns its length."""
        check_tokens(tokens, vocab)
        B, S = tokens.shape
        if B != self.batch:
            raise ValueError(f"this session decodes {self.batch} sequences; got {B}.")
        if S > self.capacity + 1:
            raise ValueError(f"{S} tokens do not fit a session of capacity {self.capacity} (at most {self.capacity + 1}).")
        self.history[:, :S].copy_(tokens.to(self.device))
        return S


class OurSession(Session):
    """Our decoder: prefill with PyTorch ops, then steps of the chosen implementation, eager or replayed
    from one CUDA graph (captured after warm-up, so compilation and autotuning are never captured)."""

    def __init__(self, model: GPT2, batch: int, capacity: int, cache_kind: str = "bf16", step_impl: str = "torch",
                 cuda_graph: bool = False, teacher_forced: bool = False, record_top2: bool = False,
                 step_options: dict | None = None):
        """step_options: keyword arguments for the step's class beyond (model, cache, batch), such as the
        persistent step's tiling."""
        check_limits(model.args, 1, capacity, batch)
        if cache_kind not in CACHES:
            raise ValueError(f"unknown cache {cache_kind!r}; choose one of {sorted(CACHES)}.")
        if step_impl not in STEPS:
            raise ValueError(f"unknown step {step_impl!r}; choose one of {sorted(STEPS)}.")
        if cuda_graph and model.device.type != "cuda":
            raise ValueError("a CUDA graph needs a CUDA device.")
        if cache_kind == "int8-dequant" and (cuda_graph or step_impl != "torch"):
            raise ValueError("the int8-dequant cache copies a length that changes every step: eager torch step only.")
        self.model, self.device, self.batch, self.capacity = model, model.device, batch, capacity
        self.teacher_forced, self.record_top2, self.cuda_graph = teacher_forced, record_top2, cuda_graph
        self.cache = CACHES[cache_kind](model.args, batch, capacity, self.device, model.dtype)
        self._buffers(self.device, batch, capacity, record_top2)
        self.pos = torch.zeros((1,), dtype=torch.int64, device=self.device)
        self.lens = torch.ones((1,), dtype=torch.int32, device=self.device)
        self.step_fn = STEPS[step_impl](model, self.cache, batch, **(step_options or {}))
        self.argmax = ArgmaxScratch(batch, self.device)
        self.graph = None
        self.host_pos = 0
        self.last_logits = None
        # Per-step time (ms) of each attention choice the graph step was timed with, by
        # "config | launch"; {} when none was judged.
        self.attention_ms: dict[str, float] = {}
        # The split-KV config the captured step runs (kernels/decode/split_kv_config.config_label).
        self.attention_config: str | None = None

    def set_mode(self, teacher_forced: bool, record_top2: bool) -> None:
        """Switch between greedy and teacher-forced decoding; a captured graph is captured again."""
        if (teacher_forced, record_top2) != (self.teacher_forced, self.record_top2):
            self.graph = None
        self.teacher_forced, self.record_top2 = teacher_forced, record_top2
        if record_top2 and not hasattr(self, "top_v"):
            self._buffers(self.device, self.batch, self.capacity, True, keep_history=True)

    def start(self, tokens: torch.Tensor, prompt_len: int | None = None) -> None:
        """Greedy: `tokens` is the prompt. Teacher-forced: the whole sequence, of which the first
        `prompt_len` tokens are prefilled."""
        S = self._load(tokens, self.model.args.vocab_size)
        T = prompt_len if self.teacher_forced else S
        if not 1 <= T <= S:
            raise ValueError(f"prompt length {T} must lie in [1, {S}].")
        logits = self.model.prefill(self.history[:, :T], self.cache)
        self._record(logits, torch.tensor([T - 1], device=self.device))
        if not self.teacher_forced:
            self.history[:, T] = logits.argmax(-1)
        self.pos.fill_(T)
        self.lens.fill_(T + 1)
        self.host_pos = T

    def _record(self, logits, at) -> torch.Tensor:
        if not self.record_top2:
            return logits.argmax(-1)
        v, i = logits.float().topk(2, dim=-1)
        self.top_v.index_copy_(1, at, v.unsqueeze(1))
        self.top_i.index_copy_(1, at, i.unsqueeze(1))
        return i[:, 0]

    def _body(self):
        logits = self.step_fn(self.history, self.pos, self.lens)
        if self.record_top2:
            advance(self._record(logits, self.pos), self.history, self.pos, self.lens, write=not self.teacher_forced)
        else:
            argmax_advance(logits, self.history, self.pos, self.lens, self.argmax, write=not self.teacher_forced)
        return logits

    def prepare(self, tokens: torch.Tensor, warmup_steps: int = 2, prompt_len: int | None = None) -> None:
        """Compile, autotune and (for a graph) capture, then restart at the prompt. A graph of the
        fused step is captured once per attention choice judged first, and the fastest kept."""
        self.start(tokens, prompt_len)
        if self.cuda_graph and self.graph is None:
            # Judged once per session: a capture again (another mode) keeps the choice.
            plan = None if self.attention_ms else self._judge_plan()
            if plan is not None:  # warm-up needs no autotuning: the judge times every config in the step
                configs, _, _ = plan
                self.step_fn.attention_config = configs[0]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(max(1, warmup_steps)):
                    self._eager_step()
            torch.cuda.current_stream().wait_stream(side)
            if plan is not None:
                self.graph, self.last_logits = self._judge_attention(*plan)
            else:
                self.graph, self.last_logits = self._capture()
                if not self.attention_ms:  # the capture's attention launches were the last tuned ones
                    self.attention_config = last_config()
        else:
            for _ in range(warmup_steps):
                self.step()
        self.start(tokens, prompt_len)
        _sync(self.device)
        self.check()

    def check(self) -> None:
        """Raise if the step reported a failure on the device since the last check (the persistent step's
        timed-out waits, kernels/decode/persistent_step.py); other steps have nothing to report."""
        if hasattr(self.step_fn, "check"):
            self.step_fn.check()

    def attention_choice(self) -> AttentionChoice | None:
        """The attention choice this session's graph step was judged to, or None where none was judged."""
        if not self.attention_ms:
            return None
        return AttentionChoice(self.step_fn.attention_config, self.attention_config, self.step_fn.attention_launch,
                               dict(self.attention_ms))

    def adopt_attention(self, choice: AttentionChoice) -> None:
        """Run the attention another session of this variant and shape was judged to, without judging
        again: a second session (the agreement check's) then runs the very kernels the first one timed."""
        if not hasattr(self.step_fn, "attention_candidates"):
            raise ValueError(f"the {self.step_fn.impl} step has no attention choice to adopt.")
        self.step_fn.attention_config, self.step_fn.attention_launch = choice.config, choice.launch
        self.attention_config, self.attention_ms = choice.label, dict(choice.ms)

    def _capture(self) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """The step captured in a graph, and its output: hold both for the graph's life, since the
        output lives in the graph's memory pool, which may hand freed blocks to other tensors while
        replays keep writing there."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self._body()
        return graph, logits

    def rewind(self, pos: int) -> None:
        """Back to the state right after the prefill: the steps since rewrote only later positions."""
        self.pos.fill_(pos)
        self.lens.fill_(pos + 1)
        self.host_pos = pos

    def _judge_plan(self) -> tuple[list[dict], tuple[AttentionLaunch, ...], int] | None:
        """(configs, launches, steps per trial) to judge the fused step's attention with on this GPU,
        or None when there is nothing to judge or the cache leaves no room for a trial; the step
        then runs the autotuner's config."""
        step = self.step_fn
        if not hasattr(step, "attention_candidates"):
            return None
        configs = step.attention_candidates()
        launches = launch_choices(uses_pdl(device_facts(self.device)))
        n = min(TRIAL_STEPS, self.capacity - self.host_pos - TRIAL_WARM_STEPS)
        return (configs, launches, n) if len(configs) * len(launches) >= 2 and n >= 1 else None

    def _judge_attention(self, configs: list[dict], launches: tuple[AttentionLaunch, ...],
                         n: int) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """Capture the fused step under each attention choice (every config, then the fastest with
        every launch: pick_attention), time the captures side by side from the same position over n
        steps, and keep the fastest: its capture, with the step set to its choice. The autotuner
        times one launch alone, on a warm cache, for 25 ms. At gpt2 batch 64 with an int8 cache
        (H200, 2026-11-30 and 12-01) the five configs' steps took 0.729-0.876 ms, and a process
        whose autotuner had picked a slow one ran 0.870 against another's 0.721."""
        step = self.step_fn
        at = self.host_pos
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # every variant loaded before any capture (the compile workers built them)
            step.compile_attention_launches(self.lens)
        torch.cuda.current_stream().wait_stream(side)
        captures: dict = {}

        def measure(choices: list[Choice]) -> dict:
            for c in choices:
                if c not in captures:
                    step.attention_config, step.attention_launch = configs[c[0]], c[1]
                    captures[c] = self._capture()
            return self._time_graphs({c: captures[c][0] for c in choices}, at, n)

        best, times = pick_attention(len(configs), launches, measure)
        step.attention_config, step.attention_launch = configs[best[0]], best[1]
        self.attention_config = config_label(configs[best[0]])
        self.attention_ms = {f"{config_label(configs[i])} | {how.label}": ms for (i, how), ms in times.items()}
        return captures[best]  # the other captures are freed with `captures`

    def _time_graphs(self, graphs: dict, at: int, n: int) -> dict:
        """Per-step replay time (ms) of each graph, n steps after a few to warm it, from position `at`,
        in alternating rounds; the best round counts. Leaves the session rewound to `at`."""
        best = dict.fromkeys(graphs, float("inf"))
        for _ in range(TRIAL_ROUNDS):
            for c, graph in graphs.items():
                self.rewind(at)
                for _ in range(TRIAL_WARM_STEPS):
                    graph.replay()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(n):
                    graph.replay()
                end.record()
                end.synchronize()
                best[c] = min(best[c], start.elapsed_time(end) / n)
        self.rewind(at)
        return best

    def _eager_step(self):
        self.cache.begin_step(self.host_pos)
        self.last_logits = self._body()
        self.cache.end_step()

    def step(self) -> None:
        if self.host_pos >= self.capacity:
            raise ValueError(f"the cache holds {self.capacity} positions; no room for another step.")
        if self.graph is not None:
            self.graph.replay()
        else:
            self._eager_step()
        self.host_pos += 1


class HfSession(Session):
    """transformers' model in a greedy loop: its default dynamic cache, eager (`compiled=False`), or a
    StaticCache with the forward compiled by torch.compile(mode="reduce-overhead"), which also replays
    CUDA graphs. The prefill is never compiled, as in transformers' own generate."""

    def __init__(self, hf_model, batch: int, capacity: int, compiled: bool = False, teacher_forced: bool = False,
                 record_top2: bool = False):
        self.args = ModelArgs.from_hf_config(hf_model.config)
        check_limits(self.args, 1, capacity, batch)
        self.hf, self.batch, self.capacity, self.compiled = hf_model, batch, capacity, compiled
        self.teacher_forced, self.record_top2 = teacher_forced, record_top2
        self.device = next(hf_model.parameters()).device
        self._buffers(self.device, batch, capacity, record_top2)
        self.kw = cache_kwarg(hf_model)
        self.cache = None
        self.forward = hf_model
        self.compile_s = None
        if compiled:
            self.cache = transformers_module().StaticCache(config=hf_model.config, max_cache_len=capacity)
        self.host_pos = 0
        # Mean time of a warm-up step (issued back to back, synchronized at the end); None before prepare.
        self.warmup_step_ms: float | None = None

    @property
    def cache_class(self) -> str | None:
        """The class name of the cache the model decodes with (None before the first prefill)."""
        return type(self.cache).__name__ if self.cache is not None else None

    def set_mode(self, teacher_forced: bool, record_top2: bool) -> None:
        """Switch between greedy and teacher-forced decoding (the compiled forward is unaffected)."""
        self.teacher_forced, self.record_top2 = teacher_forced, record_top2
        if record_top2 and not hasattr(self, "top_v"):
            self._buffers(self.device, self.batch, self.capacity, True, keep_history=True)

    def _compile(self, fullgraph: bool) -> None:
        """Build the compiled forward; the compile itself happens at its first call (in prepare)."""
        self.forward = torch.compile(self.hf.forward, mode="reduce-overhead", fullgraph=fullgraph, dynamic=False)

    @torch.inference_mode()
    def start(self, tokens: torch.Tensor, prompt_len: int | None = None) -> None:
        S = self._load(tokens, self.args.vocab_size)
        T = prompt_len if self.teacher_forced else S
        if not 1 <= T <= S:
            raise ValueError(f"prompt length {T} must lie in [1, {S}].")
        if self.compiled:
            self.cache.reset()
            out = self.hf(input_ids=self.history[:, :T], use_cache=True, **{self.kw: self.cache})
        else:
            out = self.hf(input_ids=self.history[:, :T], use_cache=True)
            self.cache = cache_of(out)
        logits = out.logits[:, -1]
        nxt = self._record(logits, T - 1)
        if not self.teacher_forced:
            self.history[:, T] = nxt
        self.host_pos = T

    def _record(self, logits, p: int) -> torch.Tensor:
        if not self.record_top2:
            return logits.argmax(-1)
        v, i = logits.float().topk(2, dim=-1)
        self.top_v[:, p] = v
        self.top_i[:, p] = i
        return i[:, 0]

    @torch.inference_mode()
    def step(self) -> None:
        p = self.host_pos
        if p >= self.capacity:
            raise ValueError(f"the cache holds {self.capacity} positions; no room for another step.")
        if self.compiled:
            torch.compiler.cudagraph_mark_step_begin()
        out = self.forward(input_ids=self.history[:, p:p + 1], use_cache=True, **{self.kw: self.cache})
        if not self.compiled:
            self.cache = cache_of(out)
        nxt = self._record(out.logits[:, -1], p)
        if not self.teacher_forced:
            self.history[:, p + 1] = nxt
        self.host_pos = p + 1

    def prepare(self, tokens: torch.Tensor, warmup_steps: int = 2, prompt_len: int | None = None) -> None:
        """Warm up; for the compiled loop the first calls compile and record its CUDA graphs, and
        `compile_s` keeps how long that took (it is never part of a step time)."""
        self.start(tokens, prompt_len)
        if self.compiled and self.compile_s is None:
            t0 = time.perf_counter()
            self._compile(fullgraph=True)
            try:
                self.step()  # tracing fails here, before anything runs, if the model cannot be one graph
            except Exception:  # noqa: BLE001 - a version that cannot be traced whole still compiles in pieces
                self._compile(fullgraph=False)
                self.start(tokens, prompt_len)
                self.step()
            for _ in range(max(2, warmup_steps - 1)):  # record the CUDA graphs, then replay once
                self.step()
            _sync(self.device)
            self.compile_s = time.perf_counter() - t0
        elif warmup_steps:
            # Every step of the warm-up decodes at a cache length new to this session. A backend that plans a
            # kernel per shape pays for it here (PyTorch's cuDNN attention builds a graph for each new key
            # length), so the time of these steps is kept: what the first pass over those lengths costs.
            _sync(self.device)
            t0 = time.perf_counter()
            for _ in range(warmup_steps):
                self.step()
            _sync(self.device)
            self.warmup_step_ms = (time.perf_counter() - t0) * 1e3 / warmup_steps
        self.start(tokens, prompt_len)
        _sync(self.device)

    def kv_cache_bytes(self) -> int:
        """Bytes the cache holds now: a static cache its whole capacity, a dynamic one what it has grown to."""
        a = self.args
        per_pos = 2 * a.n_layer * self.batch * a.n_embd * next(self.hf.parameters()).element_size()
        if self.compiled:
            return per_pos * self.capacity
        return per_pos * int(self.cache.get_seq_length()) if self.cache is not None else 0


def random_started_session(model_name: str, batch: int, context: int, cache_kind: str, step_impl: str,
                           headroom: int = 8, step_options: dict | None = None) -> OurSession:
    """Our eager session over a GPT-2 preset with transformers' random weights (seed 0, bf16, on the GPU), its
    cache filled with a seeded random prompt of `context` tokens and room for `headroom` more: what the profiling
    scripts (scripts/profile_*.py) step under Nsight Compute."""
    args = PRESETS[model_name]
    model = GPT2.from_hf(random_hf_model(args, seed=0, device="cuda", dtype=torch.bfloat16))
    s = OurSession(model, batch, context + headroom, cache_kind, step_impl, step_options=step_options)
    s.start(torch.randint(0, args.vocab_size, (batch, context), generator=torch.Generator().manual_seed(0)))
    return s


def hf_generate(hf_model, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, object]:
    """transformers' own `generate`, greedy, with the cache it picks by default: what a user calls. Returns
    the (B, new_tokens) tokens after the prompt (the first from the prefill) and the cache it built.

    A model whose generation config names an end token could stop early; `min_new_tokens` holds it to
    `new_tokens` (transformers then masks that token's logit until then: one small kernel a step)."""
    args = ModelArgs.from_hf_config(hf_model.config)
    check_tokens(prompt, args.vocab_size)
    check_limits(args, prompt.shape[1], new_tokens, prompt.shape[0])
    device = next(hf_model.parameters()).device
    prompt = prompt.to(device)
    extra = {"min_new_tokens": new_tokens} if hf_model.generation_config.eos_token_id is not None else {}
    out = hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens, do_sample=False,
                            return_dict_in_generate=True, **extra)
    tokens = out.sequences[:, prompt.shape[1]:]
    if tokens.shape[1] != new_tokens:
        raise RuntimeError(f"generate returned {tokens.shape[1]} new tokens, not the {new_tokens} asked for.")
    cache = out.get("cache") if "cache" in out else out.get("past_key_values")
    return tokens, cache


__all__ = ["Session", "OurSession", "HfSession", "hf_generate", "random_started_session"]
