"""Launching Triton kernels again without paying Triton's per-call host work.

Each call of a ``@triton.jit`` function binds its arguments, works out how the compiled kernel
is specialised on them (each tensor's dtype, each pointer's 16-byte alignment, each integer's
type, whether it equals 1 or divides by 16), hashes that into a key and only then launches. A
repeated attention call gives the same answers every time, and that work dominates its cost
on the host. So a wrapper runs its first call for a key through a :class:`Recorder`, which launches
through Triton and notes what each launch received, and keeps the resulting :class:`Replay` in a
:class:`LaunchCache`. A later call with the same key hands the CompiledKernel its arguments
directly, with the new tensors' addresses in place of the old.

The key (see :func:`tensor_key`) covers everything a kernel here is specialised on or a wrapper
decides from: shape, strides, dtype, device and the 16-byte alignment of each input, plus what
the caller adds (causal, sm_scale, path, config). Host-side TMA descriptors embed the base
address, so each replay builds them again over the new tensors; descriptors built on the device
need only the scratch allocator, which the replay sets as the first call did.

Triton's launcher encodes every host descriptor into a CUtensorMap on every launch (one driver
call and a few Python lists each: about 4 us, so 16 us for an attention call's four). A replay's
descriptors differ only in their base address, so a replay keeps the encoded maps by address and
calls Triton's launch function below that encoding step (:func:`_tma_launch_of`).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import triton
from triton import knobs
from triton.runtime import _allocation
from triton.runtime.autotuner import Autotuner
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from ..common import interpreting

try:  # host-side tensor descriptors arrived in Triton 3.3
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - the pinned Triton has them
    TensorDescriptor = None
try:  # Gluon's own descriptor class (it carries a shared-memory layout), not a subclass of Triton's
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
except ImportError:  # pragma: no cover - the pinned Triton has Gluon
    GluonTensorDescriptor = None
# Every host descriptor class a launch may pass: each embeds its tensor's address, so a replay
# builds a new one over the new tensor.
DESCRIPTOR_TYPES = tuple(t for t in (TensorDescriptor, GluonTensorDescriptor) if t is not None)

# Replays are on by default on a GPU and off under the CPU interpreter (where Triton compiles
# nothing); replays_off turns them off for a block. Tests switch them on under the interpreter
# (_under_interpreter): a replay then re-runs the interpreted kernel, so the cache's bookkeeping is
# exercised on the CPU.
_enabled = True
_under_interpreter = False


class replays_off:
    """A block in which every call goes through Triton's JIT (a context manager): a caller that needs the
    CompiledKernel a launch returns (its registers and shared memory) must not be handed a replay of an
    earlier call with the same key, which launches it without returning it."""

    def __enter__(self):
        global _enabled
        self._was, _enabled = _enabled, False
        return self

    def __exit__(self, *exc):
        global _enabled
        _enabled = self._was
        return False


def replay_allowed() -> bool:
    """Whether a call may be recorded for replay now."""
    return _enabled and (_under_interpreter or not interpreting())


def tensor_key(t: torch.Tensor) -> tuple:
    """What a replay of a call depends on about one tensor: shape, strides, dtype, device and
    whether its address is 16-byte aligned (Triton specialises pointers on that, and a TMA
    descriptor requires it). Raises AttributeError for a non-tensor, which the caller takes as
    "not cacheable"."""
    return (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0)


def config_key(config) -> Any:
    """A hashable stand-in for a config argument (a dict, a dataclass or None)."""
    if isinstance(config, dict):
        return tuple(sorted(config.items()))
    return config


class Launcher:
    """How a wrapper gets its inputs ready, allocates per-call tensors and launches kernels.
    This plain one does what the code would do inline; a Recorder also takes notes."""

    def input(self, name: str, t: torch.Tensor, copy: bool) -> torch.Tensor:
        """An input as the kernel reads it: `t`, or if `copy` a fresh contiguous copy (fresh storage,
        so also aligned: .contiguous() would return a contiguous but misaligned view unchanged)."""
        return _copy(t) if copy else t

    def empty(self, name: str, shape, dtype, device) -> torch.Tensor:
        """A tensor every call allocates afresh (the output, a scratch buffer)."""
        return torch.empty(shape, dtype=dtype, device=device)

    def launch(self, fn, grid, *args, **kwargs):
        """fn[grid](*args, **kwargs): returns Triton's CompiledKernel (None under the interpreter)."""
        return fn[grid](*args, **kwargs)

    def on_replay(self, remember: Callable[[Any], None], value: Any) -> None:
        """Have each replay call remember(value) (a wrapper's record of its last launch)."""


PLAIN = Launcher()

# The CUDA device and stream a direct launch goes to (the raw stream handle, as Triton asks it).
_current_device = torch.cuda.current_device
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)




def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.clone(memory_format=torch.contiguous_format)


_PTR, _DESC = 0, 1

# Encoded tensor maps a replay keeps per descriptor argument (one per distinct base address; a loop
# over fresh outputs from PyTorch's caching allocator cycles through a few).
_MAPS_PER_ARGUMENT = 32


@dataclass(frozen=True)
class _TmaLaunch:
    """Triton's launch function under the step that encodes host descriptors, for one kernel."""

    launch: Callable        # the compiled launcher's C entry point
    cooperative: bool
    pdl: bool
    encode: Callable        # (descriptor, its metadata) -> the flat arguments that replace it
    meta: dict              # argument index -> that descriptor's metadata


def _tma_launch_of(compiled) -> _TmaLaunch | None:
    """The launch below Triton's descriptor-encoding wrapper, for a kernel taking host TMA
    descriptors that it lowered to CUtensorMaps; None where that structure is not there (another
    backend or Triton version, descriptors passed as pointers) or the kernel needs scratch memory,
    and the replay then goes through compiled.run as Triton's own launch does. The wrapper is a
    closure of Triton 3.6's nvidia driver (wrap_handle_tensordesc); tests check its shape."""
    try:
        from triton.backends.nvidia.driver import make_tensordesc_arg
        run = compiled.run
        wrapper = run.launch
        # Triton 3.6 hands the entry point the kernel's arguments flat after _BASE_ARGS_FORMAT_LEN base
        # ones; 3.7 passes more base arguments and the kernel's as one trailing tuple. Only the layout
        # this replay was written for (and measured with) is called directly.
        if "_BASE_ARGS_FORMAT_LEN" not in wrapper.__code__.co_names:
            return None
        cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
        raw, indices, metas = cells["launcher"], cells["tensordesc_indices"], cells["tensordesc_meta"]
        if run.global_scratch_size or run.profile_scratch_size:
            return None
    except (ImportError, AttributeError, KeyError, TypeError):
        return None
    if not metas or any(m is None for m in metas) or len(metas) != len(indices):
        return None
    return _TmaLaunch(raw, bool(run.launch_cooperative_grid), bool(run.launch_pdl), make_tensordesc_arg,
                      dict(zip(sorted(indices), metas)))


def _descriptor_over(template, base):
    """A copy of a host descriptor with a new base tensor. Both descriptor classes are plain
    dataclasses; filling the instance dict directly is about 4x cheaper than copy.copy, which
    matters at four descriptors per replayed call."""
    desc = object.__new__(type(template))
    desc.__dict__.update(template.__dict__)
    desc.base = base
    return desc


@dataclass
class _Launch:
    """One recorded launch: the compiled kernel, its grid, and its arguments in parameter order
    (constexprs included, as Triton passes them), with the places of the per-call tensors."""

    fn: Any                 # the JITFunction (or InterpretedFunction) launched
    compiled: Any           # its CompiledKernel, None under the interpreter
    grid: tuple
    args: list
    patches: list           # (argument index, tensor name, _PTR or _DESC)
    options: dict = field(default_factory=dict)
    keep: list = field(default_factory=list)  # constant buffers whose addresses are in `args`

    def __post_init__(self):
        self.tma = None
        if self.compiled is not None:
            self.run = self.compiled.run  # loads the module on first use: done once, here
            self.function = self.compiled.function
            self.packed_metadata = self.compiled.packed_metadata
            if any(kind == _DESC for _, _, kind in self.patches):
                self.maps = {i: {} for i, _, kind in self.patches if kind == _DESC}
                tma = _tma_launch_of(self.compiled)
                self.tma = tma if tma is not None and set(tma.meta) == set(self.maps) else None
            if self.tma is not None:
                self._flatten_template()

    def _flatten_template(self) -> None:
        """The C entry point's argument list with each descriptor expanded in place (its map, shape and
        strides: 1 + 2 x rank values), and where each patched argument lands in it, so a replay only
        overwrites those places instead of expanding every argument again."""
        flat, self.where = [], {}
        for i, a in enumerate(self.args):
            self.where[i] = len(flat)
            flat.extend([None] * (1 + 2 * len(a.shape)) if i in self.tma.meta else [a])
        self.flat = flat

    def replay(self, tensors: dict, stream) -> None:
        if self.tma is not None:
            return self._replay_tma(tensors, stream)
        args = list(self.args)
        direct = self.compiled is not None
        for i, name, kind in self.patches:
            t = tensors[name]
            if kind == _PTR:
                args[i] = t.data_ptr() if direct else t
            else:  # a host descriptor embeds the base address: a new one over the new tensor
                args[i] = _descriptor_over(args[i], t)
        if direct:
            g = self.grid
            self.run(g[0], g[1], g[2], stream, self.function, self.packed_metadata, None, None, None, *args)
        else:
            self.fn[self.grid](*args, **self.options)

    def _replay_tma(self, tensors: dict, stream) -> None:
        """replay() for a kernel with host descriptors: Triton's launch with each descriptor's
        encoded map taken from this launch's maps by base address (encoded on first sight)."""
        tma, flat = self.tma, list(self.flat)
        for i, name, kind in self.patches:
            t, at = tensors[name], self.where[i]
            if kind == _PTR:
                flat[at] = t.data_ptr()
                continue
            maps = self.maps[i]
            encoded = maps.get(t.data_ptr())
            if encoded is None:
                if len(maps) >= _MAPS_PER_ARGUMENT:
                    maps.clear()
                encoded = maps[t.data_ptr()] = tma.encode(_descriptor_over(self.args[i], t), tma.meta[i])
            flat[at:at + len(encoded)] = encoded
        g = self.grid
        tma.launch(g[0], g[1], g[2], stream, self.function, tma.cooperative, tma.pdl, None, None,
                   self.packed_metadata, None, None, None, *flat)


@dataclass
class Replay:
    """A recorded call, ready to run again on new tensors of the same key."""

    inputs: tuple           # (name, copy) per input, in the order the caller passes them
    outputs: tuple          # (name, shape, dtype, device) allocated afresh per call
    launches: tuple
    result: str             # the name of the tensor returned
    info: dict              # what the wrapper reports about the call (its config, path, ...)
    remember: tuple = ()    # (callable, value) pairs run on each replay
    device_index: int | None = None
    allocator: Any = None   # Triton's scratch allocator, for kernels that build descriptors on the device

    def __call__(self, *inputs):
        """The call's result, or None when the replay cannot run here and now (a launch hook is
        installed, e.g. by a profiler that wants Triton's own launch path): then the caller runs
        the slow path."""
        if self.device_index is not None and (knobs.runtime.launch_enter_hook.calls
                                              or knobs.runtime.launch_exit_hook.calls):
            return None
        tensors = {}
        for (name, copy_first), t in zip(self.inputs, inputs):
            tensors[name] = _copy(t) if copy_first else t
        for name, shape, dtype, device in self.outputs:
            tensors[name] = torch.empty(shape, dtype=dtype, device=device)
        if self.device_index is None:  # the interpreter (tests)
            for launch in self.launches:
                launch.replay(tensors, None)
        else:
            if self.allocator is not None and _allocation._allocator.get() is not self.allocator:
                triton.set_allocator(self.allocator)
            if _current_device() == self.device_index:
                self._launch_all(tensors)
            else:
                with torch.cuda.device(self.device_index):
                    self._launch_all(tensors)
        for remember, value in self.remember:
            remember(value)
        return tensors[self.result]

    def _launch_all(self, tensors):
        stream = _current_stream(self.device_index)
        for launch in self.launches:
            launch.replay(tensors, stream)


class Recorder(Launcher):
    """A Launcher that launches through Triton as usual and notes, per launch, which arguments
    are the call's own tensors (or host descriptors over them) and which are constants."""

    def __init__(self):
        self._names: dict[int, str] = {}  # id(tensor) -> name, for the tensors of this call
        self._keep: list = []  # keeps those tensors alive while recording, so their ids stay unique
        self._inputs: list = []
        self._outputs: list = []
        self._launches: list = []
        self._remember: list = []
        self._allocator = None
        self.cacheable = True

    def _name(self, name, t):
        self._names[id(t)] = name
        self._keep.append(t)

    def input(self, name, t, copy):
        self._inputs.append((name, bool(copy)))
        out = super().input(name, t, copy)
        self._name(name, out)
        return out

    def empty(self, name, shape, dtype, device):
        out = super().empty(name, shape, dtype, device)
        self._outputs.append((name, tuple(shape), dtype, device))
        self._name(name, out)
        return out

    def on_replay(self, remember, value):
        self._remember.append((remember, value))

    def launch(self, fn, grid, *args, **kwargs):
        compiled = fn[grid](*args, **kwargs)
        jit, kwargs = _jit_function(fn, kwargs)
        if jit is None or (compiled is None and not interpreting()):
            self.cacheable = False  # not a launch this recorder understands: never replayed
            return compiled
        names = jit.arg_names
        bound = inspect.signature(jit.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
        bound.apply_defaults()
        values = list(bound.arguments.values())
        options = {k: v for k, v in kwargs.items() if k not in names}
        if callable(grid):
            grid = grid(dict(bound.arguments))
        grid = tuple(grid) + (1,) * (3 - len(grid))
        # The call's own tensors leave the template (a replay must not keep them alive); constant
        # buffers stay, as addresses when launched directly, and the launch keeps them alive.
        patches, keep, direct = [], [], compiled is not None
        for i, a in enumerate(values):
            if isinstance(a, torch.Tensor):
                name = self._names.get(id(a))
                if name is not None:
                    patches.append((i, name, _PTR))
                    values[i] = None
                elif direct:
                    values[i] = a.data_ptr()
                    keep.append(a)
            elif isinstance(a, DESCRIPTOR_TYPES):
                name = self._names.get(id(a.base))
                if name is None:
                    self.cacheable = False  # a descriptor over a tensor of unknown lifetime
                else:
                    patches.append((i, name, _DESC))
                    values[i] = _descriptor_over(a, None)
        if compiled is not None and getattr(compiled.metadata, "global_scratch_size", 0):
            self._allocator = _allocation._allocator.get()
        self._launches.append(_Launch(jit, compiled, grid, values, patches, options, keep))
        return compiled

    def replay(self, result: torch.Tensor, info: dict, device: torch.device) -> Replay | None:
        """The Replay of this call, or None if it cannot be replayed."""
        name = self._names.get(id(result))
        if not self.cacheable or not self._launches or name is None:
            return None
        direct = self._launches[0].compiled is not None
        return Replay(inputs=tuple(self._inputs), outputs=tuple(self._outputs), launches=tuple(self._launches),
                      result=name, info=info, remember=tuple(self._remember),
                      device_index=(device.index if device.index is not None else _current_device())
                      if direct else None,
                      allocator=self._allocator)


def _jit_function(fn, kwargs):
    """The JITFunction under an Autotuner, and the kwargs it was last run with: the autotuner
    adds its chosen config's meta-parameters and options to the caller's."""
    if isinstance(fn, Autotuner):
        fn, kwargs = fn.fn, {**kwargs, **fn.best_config.all_kwargs()}
    return (fn if isinstance(fn, (JITFunction, InterpretedFunction)) else None), kwargs


class LaunchCache:
    """Replays by key, with hit and miss counts. Bounded: the oldest entry goes first."""

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._entries: dict = {}
        self.hits = 0
        self.misses = 0

    def try_replay(self, q, k, v, extra: tuple):
        """(key, replay, output) for a call on q, k, v with the other arguments `extra`: output is
        the replayed call's result, or None when there is no replay for the key (or it cannot run
        now), and the caller takes the slow path. key is None when the arguments cannot key a
        cache (not tensors, an unhashable argument): then nothing may be stored either."""
        try:
            key = (tensor_key(q), tensor_key(k), tensor_key(v)) + extra
            replay = self.get(key)
        except (AttributeError, TypeError):
            return None, None, None
        return key, replay, (None if replay is None else replay(q, k, v))

    def get(self, key) -> Replay | None:
        """The Replay filed under key (None if there is none, or replays are off)."""
        if not _enabled:
            return None
        replay = self._entries.get(key)
        if replay is None:
            self.misses += 1
        else:
            self.hits += 1
        return replay

    def put(self, key, replay: Replay | None) -> None:
        if replay is None:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = replay

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def info(self) -> dict:
        return dict(hits=self.hits, misses=self.misses, entries=len(self._entries))

    def __len__(self):
        return len(self._entries)
