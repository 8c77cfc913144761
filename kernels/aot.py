"""
Compile the Triton kernels for a GPU that is not here, and read what their code uses
===================================================================================

Triton's compiler needs no GPU: given a target (``GPUTarget("cuda", 75, 32)``) it lowers a kernel
to PTX and runs the ``ptxas`` that ships in the wheel. That is how the test suite proves, on a
CPU, that every kernel a collect phase may launch compiles for every GPU the report supports,
and records whether the compiled code uses the tensor cores.

**The hook.** A module of ``kernels/`` (or of its packages) takes part by defining::

    def compile_specs(target: Target) -> list[CompileSpec]:
        ...

returning one :class:`CompileSpec` per kernel variant a phase may launch on that target, with
the dtypes and tile configs the code picks there (nothing where the kernel never runs, e.g. a
Hopper kernel on sm80). A spec's ``launch`` calls the module's *own* launcher on tensors of the
``meta`` device: nothing runs, and no GPU is needed. Every ``@triton.jit`` (or Gluon) launch it
makes is caught and compiled for the target instead, specialised exactly as the launcher would
have specialised it on a real GPU (argument types, 16-byte divisibility, constexprs, warps,
stages). So the specs follow the launcher when it changes, and a launcher that makes two
launches (a kernel and its merge) is compiled whole. Launch with fixed configs, not through
``triton.autotune`` (the autotuner would time its candidates): list the candidates instead.

**At run time** :func:`uses_tensor_cores` reads a compiled kernel's PTX (or SASS) for tensor-core
instructions (``mma.sync``, ``wgmma``, ``tcgen05.mma``; ``HMMA``/``HGMMA`` in SASS), so a phase
can store beside the config that ran whether the tensor cores ran it.

No file I/O beyond the compiler's own cache and temporary cubins for ``cuobjdump``.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import pkgutil
import re
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# ---------------------------------------------------------------------------------------------
# 1. Targets and specs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A GPU generation the report supports, with the device limits the launchers' choices read."""

    name: str                    # "sm75"
    capability: tuple[int, int]  # (7, 5)
    smem_per_block: int          # opt-in shared memory per block of the representative GPU, bytes
    example: str                 # the representative GPU

    @property
    def arch(self) -> int:
        return self.capability[0] * 10 + self.capability[1]

    @property
    def bf16(self) -> bool:
        """bfloat16 tensor-core maths arrived with Ampere (8.0)."""
        return self.capability >= (8, 0)


# One representative GPU per compute capability; the shared-memory figure is the CUDA
# programming guide's opt-in maximum per block for that capability.
TARGETS = {
    "sm75": Target("sm75", (7, 5), 64 * 1024, "T4"),
    "sm80": Target("sm80", (8, 0), 163 * 1024, "A100"),
    "sm86": Target("sm86", (8, 6), 99 * 1024, "A10 / RTX 30xx"),
    "sm89": Target("sm89", (8, 9), 99 * 1024, "L4 / RTX 40xx"),
    "sm90": Target("sm90", (9, 0), 227 * 1024, "H100 / H200"),
}


@dataclass(frozen=True)
class CompileSpec:
    """One kernel variant a phase may launch: `launch()` calls the real launcher on meta tensors."""

    label: str                       # what varies, e.g. "fp16 d=64 causal 64x32/w8/s1"
    launch: Callable[[], object]
    # What the test asserts about the compiled code: True/False, or None for "record only".
    tensor_cores: bool | None = None
    # In the default test run. The rest (more configs of a kind already covered) compile with
    # COMPILE_MATRIX=full: the whole matrix takes tens of minutes on a CPU.
    core: bool = True


@dataclass
class Build:
    """What compiling one launch for one target produced."""

    module: str
    kernel: str
    label: str
    target: str
    ok: bool
    error: str | None = None
    tensor_core_ops: list[str] = field(default_factory=list)
    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None
    expected_tensor_cores: bool | None = None

    @property
    def tensor_cores(self) -> bool | None:
        return bool(self.tensor_core_ops) if self.ok else None


def kernel_modules() -> list[str]:
    """Every module of the kernels package and its subpackages (imported lazily by specs_for)."""
    import kernels

    return sorted(m.name for m in pkgutil.walk_packages(kernels.__path__, "kernels.")
                  if not m.ispkg and m.name != "kernels.aot")


def specs_for(target: Target, modules: list[str] | None = None, full: bool = True) -> dict[str, list[CompileSpec]]:
    """{module: its compile specs for `target`} for each module that defines `compile_specs`
    (only the core ones unless `full`)."""
    out = {}
    for name in modules or kernel_modules():
        hook = getattr(importlib.import_module(name), "compile_specs", None)
        if hook is not None:
            out[name] = [s for s in hook(target) if full or s.core]
    return out


def _jitted(module_name: str) -> dict:
    """The @triton.jit (or Gluon) functions a module defines (not those it imports)."""
    from triton.runtime.jit import JITFunction

    mod = importlib.import_module(module_name)
    return {name: obj for name, obj in vars(mod).items()
            if isinstance(obj, JITFunction) and getattr(obj, "module", None) == module_name}


@functools.lru_cache(maxsize=1)
def _called_names() -> frozenset[str]:
    """Every name the package's jitted functions call (or hand over as a warp_specialize partition):
    those functions are compiled inside their callers, whichever module defines them."""
    called = set()
    for m in kernel_modules():
        for fn in _jitted(m).values():  # names in the code, not in docstrings
            called |= {n.id for n in ast.walk(ast.parse(textwrap.dedent(fn.src))) if isinstance(n, ast.Name)}
    return frozenset(called)


def launchable_kernels(module_name: str) -> list[str]:
    """The jitted functions of a module that no jitted function of the package calls: the kernels a
    launcher launches, each of which should appear in the module's compile specs. (A module of device
    helpers, such as kernels/decode/arrival.py, has none.)"""
    return sorted(_kernel_name(fn) for name, fn in _jitted(module_name).items() if name not in _called_names())


def meta(*shape, dtype):
    """An input of the given shape on the meta device: a shape, strides and a dtype, no memory."""
    import torch

    return torch.empty(*shape, dtype=dtype, device="meta")


# ---------------------------------------------------------------------------------------------
# 2. Catching launches and compiling them for a target
# ---------------------------------------------------------------------------------------------


@dataclass
class Launch:
    fn: object       # the JITFunction
    args: tuple
    kwargs: dict
    grid: object = None  # a tuple, or a function of the bound arguments, as the launcher gave it


@contextlib.contextmanager
def caught_launches():
    """Within the block, launching any @triton.jit function records it instead of running it."""
    from triton.runtime.jit import JITFunction

    launches: list[Launch] = []
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        launches.append(Launch(self, args, kwargs, grid))
        return None

    JITFunction.run = run
    try:
        yield launches
    finally:
        JITFunction.run = original


def prepare(launch: Launch, target: Target):
    """(source, options, key) of one caught launch as the JIT would specialise it on `target`'s GPU:
    argument types, 16-byte divisibility, constexprs, warps, stages. Equal keys compile alike."""
    return bind(launch, target)[1:]


def bind(launch: Launch, target: Target):
    """(bound arguments, source, options, key): prepare's answer plus every argument by name, in the
    order a compiled kernel's launcher takes them (kernels/retarget.py launches with them)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = launch.fn
    backend = make_backend(GPUTarget("cuda", target.arch, 32))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(launch.kwargs)
    kwargs.setdefault("debug", getattr(fn, "debug", False) or False)
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    source_cls = ASTSource
    if getattr(fn, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource as source_cls
    key = repr((fn.cache_key, signature, sorted(constexprs.items(), key=repr), sorted(attrs.items(), key=repr),
                sorted(options.__dict__.items(), key=repr)))
    return bound, source_cls(fn, signature, constexprs, attrs), options, key


def compile_launch(launch: Launch, target: Target):
    """Compile one caught launch for `target`; the CompiledKernel."""
    import triton
    from triton.backends.compiler import GPUTarget

    src, options, _ = prepare(launch, target)
    return triton.compile(src, target=GPUTarget("cuda", target.arch, 32), options=options.__dict__)


def _kernel_name(fn) -> str:
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "?")


def _failed(module: str, kernel: str, spec: CompileSpec, target: Target, why: str) -> Build:
    """The Build of a spec or launch that did not compile, and why."""
    return Build(module, kernel, spec.label, target.name, False, why, expected_tensor_cores=spec.tensor_cores)


def build_specs(target: Target, modules: list[str] | None = None, full: bool = True) -> list[Build]:
    """Compile every spec for `target`: one Build per launch, failures included (never raises for
    a kernel that does not compile: its Build says why). A launch identical to one already built
    (same kernel, specialisation and options) reuses that build."""
    import triton
    from triton.backends.compiler import GPUTarget

    builds: list[Build] = []
    done: dict[str, Build] = {}
    for spec_module, specs in specs_for(target, modules, full).items():
        for spec in specs:
            try:
                with caught_launches() as launches:
                    spec.launch()
            except Exception as exc:  # noqa: BLE001 - the launcher itself refused: that is the result
                builds.append(_failed(spec_module, "?", spec, target, _one_line(exc)))
                continue
            if not launches:
                builds.append(_failed(spec_module, "?", spec, target, "the spec launched no kernel"))
            for launch in launches:
                name = _kernel_name(launch.fn)
                # A kernel is filed under the module that defines it, whichever module's spec launched it.
                module = getattr(launch.fn, "module", None) or spec_module
                try:
                    src, options, key = prepare(launch, target)
                    if key not in done:
                        kernel = triton.compile(src, target=GPUTarget("cuda", target.arch, 32),
                                                options=options.__dict__)
                        regs, spill = resource_usage(kernel.asm["cubin"])
                        done[key] = Build(module, name, spec.label, target.name, True,
                                          tensor_core_ops=tensor_core_ops(kernel.asm.get("ptx", "")),
                                          registers=regs, spill_bytes=spill, shared_bytes=kernel.metadata.shared)
                except Exception as exc:  # noqa: BLE001 - a compile error is what the matrix reports
                    builds.append(_failed(module, name, spec, target, _one_line(exc)))
                    continue
                b = done[key]
                builds.append(Build(module, name, spec.label, target.name, True, None, b.tensor_core_ops,
                                    b.registers, b.spill_bytes, b.shared_bytes, spec.tensor_cores))
    return builds


def _one_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    # Triton's compile errors end with the message; ptxas's start with it.
    text = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
    return f"{type(exc).__name__}: {text.strip()[:300]}"


# ---------------------------------------------------------------------------------------------
# 3. What the compiled code uses
# ---------------------------------------------------------------------------------------------

# PTX tensor-core instructions: mma.sync (Turing to Hopper's warp-level MMA), wgmma (Hopper's
# warpgroup MMA), tcgen05.mma (Blackwell). ldmatrix and the like feed them but compute nothing.
_PTX_TENSOR = re.compile(r"\b(mma\.sync\.aligned\.[\w.]+|wgmma\.mma_async[\w.]*|tcgen05\.mma[\w.]*)")
# SASS: HMMA/IMMA/DMMA (warp MMA), HGMMA/IGMMA/QGMMA (warpgroup), UTC*MMA (Blackwell).
_SASS_TENSOR = re.compile(r"\b(HMMA|IMMA|DMMA|HGMMA|IGMMA|QGMMA|UTC\w*MMA)(\.[\w.]+)?")


def tensor_core_ops(code: str) -> list[str]:
    """The distinct tensor-core instructions in PTX or SASS text, sorted (empty: none)."""
    found = {m.group(0) for m in _PTX_TENSOR.finditer(code)}
    found |= {m.group(1) + (m.group(2) or "") for m in _SASS_TENSOR.finditer(code)}
    return sorted(found)


def uses_tensor_cores(kernel) -> bool | None:
    """Whether a compiled kernel's code issues tensor-core instructions.

    `kernel`: a Triton CompiledKernel (what a launch returns), or its PTX or SASS text. None when
    there is no code to read (the CPU interpreter, a failed launch, a library kernel).
    """
    if kernel is None:
        return None
    if isinstance(kernel, str):
        return bool(tensor_core_ops(kernel)) if kernel.strip() else None
    asm = getattr(kernel, "asm", None)
    if asm is None:
        return None
    code = asm.get("ptx") if hasattr(asm, "get") else None
    if not code:
        try:
            code = asm["sass"]  # disassembled from the cubin on demand (cuobjdump)
        except Exception:  # noqa: BLE001 - no cubin or no cuobjdump: unknown, not False
            return None
    return bool(tensor_core_ops(code))


_RES_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)")


def resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers per thread, spilled bytes per thread) from `cuobjdump -res-usage`; None where
    cuobjdump is missing. ptxas puts spilled registers on the stack frame, so stack + local
    memory is the spill (a Triton kernel that does not spill has neither)."""
    from triton import knobs

    try:
        exe = knobs.nvidia.cuobjdump.path
    except Exception:  # noqa: BLE001 - a Triton without the NVIDIA tools
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            out = subprocess.run([exe, "-res-usage", str(path)], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return None, None
    m = _RES_USAGE.search(out)
    if not m:
        return None, None
    regs, stack, local = map(int, m.groups())
    return regs, stack + local


# ---------------------------------------------------------------------------------------------
# 4. The matrix as a table: python -m kernels.aot [--full] [--targets sm75,sm90] [--json FILE]
# ---------------------------------------------------------------------------------------------


def matrix_rows(builds: list[Build]) -> list[dict]:
    """One row per (module, kernel, target): variants built, failures, tensor-core use, the most
    registers and spilled bytes seen."""
    rows: dict[tuple, dict] = {}
    for b in builds:
        r = rows.setdefault((b.module, b.kernel, b.target), dict(
            module=b.module, kernel=b.kernel, target=b.target, variants=0, failed=0, tensor_cores=set(),
            ops=set(), max_registers=0, spilling=0))
        r["variants"] += 1
        r["failed"] += not b.ok
        if b.ok:
            r["tensor_cores"].add(b.tensor_cores)
            r["ops"].update(op.split(".")[0] + ("." + op.split(".")[3] if op.startswith("mma.sync") else "")
                            for op in b.tensor_core_ops)
            r["max_registers"] = max(r["max_registers"], b.registers or 0)
            r["spilling"] += bool(b.spill_bytes)
    return list(rows.values())


def markdown_table(builds: list[Build], targets: list[str]) -> str:
    """Kernels down, targets across; each cell: variants compiled, and whether they use tensor cores."""
    by = {(r["module"], r["kernel"], r["target"]): r for r in matrix_rows(builds)}
    kernels = sorted({(m, k) for m, k, _ in by})
    lines = ["| kernel | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for m, k in kernels:
        cells = []
        for t in targets:
            r = by.get((m, k, t))
            if r is None:
                cells.append("not launched")
                continue
            tc = r["tensor_cores"]
            use = "tensor cores" if tc == {True} else "no tensor cores" if tc == {False} else "mixed"
            ops = f" ({', '.join(sorted(r['ops']))})" if r["ops"] else ""
            fail = f", **{r['failed']} failed**" if r["failed"] else ""
            spill = f", {r['spilling']} spill" if r["spilling"] else ""
            cells.append(f"{r['variants']} ok{fail}: {use}{ops}{spill}")
        lines.append(f"| `{m.removeprefix('kernels.')}.{k}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import dataclasses
    import json
    import os
    import sys

    ap = argparse.ArgumentParser(prog="python -m kernels.aot",
                                 description="Compile every kernel variant the collect phases may launch, for GPUs "
                                             "that are not here, and print which compile and which use tensor cores.")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, from {', '.join(TARGETS)}")
    ap.add_argument("--full", action="store_true", help="every variant, not only the core ones (tens of minutes)")
    ap.add_argument("--modules", help="comma-separated kernel modules (default: every module of kernels/)")
    ap.add_argument("--json", type=Path, help="also write every build as JSON lines to this file")
    ap.add_argument("--list-kernels", action="store_true",
                    help="print, as JSON, the launchable kernels of each module instead of compiling")
    a = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        ap.error("unset TRITON_INTERPRET: under the interpreter nothing is compiled")
    names = a.targets.split(",")
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    modules = a.modules.split(",") if a.modules else None
    if a.list_kernels:
        print(json.dumps({m: launchable_kernels(m) for m in modules or kernel_modules()}))
        return 0
    builds = []
    for n in names:
        builds += build_specs(TARGETS[n], modules, full=a.full)
        print(f"{n}: {sum(b.target == n for b in builds)} launches built", file=sys.stderr, flush=True)
    if a.json:
        a.json.write_text("".join(json.dumps(dataclasses.asdict(b)) + "\n" for b in builds), encoding="utf-8")
    print(markdown_table(builds, names))
    for b in builds:
        if not b.ok:
            print(f"FAILED {b.target} {b.module}.{b.kernel} [{b.label}]: {b.error}", file=sys.stderr)
    return 1 if any(not b.ok for b in builds) else 0


if __name__ == "__main__":
    raise SystemExit(main())
