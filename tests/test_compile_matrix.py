"""Every Triton kernel a collect phase may launch compiles for every GPU the report supports.

Compiled ahead of time on this CPU (kernels/aot.py: Triton's own ptxas, no GPU) for sm75 (T4),
sm80, sm86, sm89 and sm90, with the dtypes and tile configs the launchers pick on each. A kernel
that cannot compile where it would run fails here instead of on the user's GPU. The default run
builds each module's core variants; COMPILE_MATRIX=full builds every one (tens of minutes).

Also recorded, and checked where it is known: whether the compiled code uses the tensor cores.
"""
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernels.aot import TARGETS, tensor_core_ops, uses_tensor_cores
from offline_compile import require_ptxas

ROOT = Path(__file__).resolve().parent.parent
FULL = os.environ.get("COMPILE_MATRIX", "") == "full"


def _env():
    # Compile for real: under the interpreter @triton.jit makes no JITFunction to compile.
    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}


def _build(target: str, out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kernels.aot", "--targets", target, "--json", str(out)] + (["--full"] if FULL else [])
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=3600)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    require_ptxas()
    out = tmp_path_factory.mktemp("aot")
    # One process per target, as many at once as there are cores: Triton compiles on one thread.
    with ThreadPoolExecutor(max(1, min(len(TARGETS), os.cpu_count() or 1))) as pool:
        procs = dict(zip(TARGETS, pool.map(lambda t: _build(t, out / f"{t}.jsonl"), TARGETS)))
    rows = []
    for t, proc in procs.items():
        path = out / f"{t}.jsonl"
        assert path.exists(), f"{t}: the compile matrix did not run:\n{proc.stderr[-3000:]}"
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def test_every_kernel_compiles_for_every_target(builds):
    failed = [f"{b['target']} {b['module']}.{b['kernel']} [{b['label']}]: {b['error']}" for b in builds if not b["ok"]]
    assert not failed, "kernels that do not compile where they would run:\n" + "\n".join(failed)
    for t in TARGETS:
        assert any(b["target"] == t and b["module"] == "kernels.attention.portable" for b in builds), f"nothing built for {t}"


def test_every_launchable_kernel_is_in_the_matrix(builds):
    proc = subprocess.run([sys.executable, "-m", "kernels.aot", "--list-kernels"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    built = {(b["module"], b["kernel"]) for b in builds}
    missing = [f"{m}.{k}" for m, ks in json.loads(proc.stdout).items() for k in ks if (m, k) not in built]
    assert not missing, ("kernels no compile_specs(target) hook builds (see kernels/aot.py): " + ", ".join(missing))


def test_tensor_core_use_is_what_each_spec_expects(builds):
    wrong = [f"{b['target']} {b['module']}.{b['kernel']} [{b['label']}]: expected tensor cores "
             f"{b['expected_tensor_cores']}, code has {b['tensor_core_ops'] or 'none'}"
             for b in builds if b["ok"] and b["expected_tensor_cores"] is not None
             and bool(b["tensor_core_ops"]) != b["expected_tensor_cores"]]
    assert not wrong, "\n".join(wrong)


def test_the_portable_kernel_runs_on_fma_units_on_a_t4(builds):
    # Triton 3.6 lowers tl.dot to FMA before compute capability 8.0: the report must say so for a T4.
    t4 = [b for b in builds if b["target"] == "sm75" and b["module"] == "kernels.attention.portable"]
    assert t4 and all(b["tensor_core_ops"] == [] for b in t4)
    ampere = [b for b in builds if b["target"] == "sm80" and b["module"] == "kernels.attention.portable"]
    assert ampere and all(any(op.startswith("mma.sync") for op in b["tensor_core_ops"]) for b in ampere)
    hopper = [b for b in builds if b["module"] == "kernels.attention.hopper"]
    assert hopper and {b["target"] for b in hopper} == {"sm90"}
    assert all(any(op.startswith("wgmma") for op in b["tensor_core_ops"]) for b in hopper)


# --- reading the compiled code ----------------------------------------------------------------

PTX_MMA = """
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r6, %r7}, {%f1, %f2, %f3, %f4};
"""
PTX_FMA = """
    ld.shared.v4.b32 {%r1, %r2, %r3, %r4}, [%r5];
    fma.rn.f32 %f1, %f2, %f3, %f1;
    // a comment mentioning mma is not an instruction
"""


def test_tensor_core_instructions_are_found_in_ptx_and_sass():
    assert tensor_core_ops(PTX_MMA) == ["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]
    assert tensor_core_ops(PTX_FMA) == []
    assert tensor_core_ops("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {...};") == [
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"]
    assert tensor_core_ops("        /*0a40*/  HMMA.1688.F32 R4, R8, R12, R4 ;") == ["HMMA.1688.F32"]
    assert tensor_core_ops("        /*0b00*/  HGMMA.64x128x16.F32 gdesc[UR4], RZ, !UPT ;") == ["HGMMA.64x128x16.F32"]
    assert tensor_core_ops("        /*0a40*/  FFMA R4, R8, R12, R4 ;") == []


class _Compiled:
    def __init__(self, asm):
        self.asm = asm


def test_uses_tensor_cores_reads_a_compiled_kernel_and_says_unknown_without_code():
    assert uses_tensor_cores(_Compiled({"ptx": PTX_MMA})) is True
    assert uses_tensor_cores(_Compiled({"ptx": PTX_FMA})) is False
    assert uses_tensor_cores(PTX_FMA) is False
    # No code to read (the CPU interpreter, a library kernel, a failed launch): unknown, not False.
    assert uses_tensor_cores(None) is None
    assert uses_tensor_cores(object()) is None
    assert uses_tensor_cores("") is None


def test_a_turing_tensor_core_path_is_within_reach_in_gluon(builds):
    # Gluon's MMA layout version 2.1 lowers to Turing's m16n8k8 MMA (HMMA.1688 in SASS), which
    # tl.dot no longer emits for sm75. The kernel is an opt-in experiment: no phase runs it.
    t4 = [b for b in builds if b["target"] == "sm75" and b["module"] == "kernels.attention.turing"]
    assert t4 and all(b["tensor_core_ops"] == ["mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"] for b in t4)
    assert all(not b["spill_bytes"] for b in t4)


def test_the_turing_kernel_loads_only_when_first_needed():
    """It uses Gluon's private API: a Triton that lacks it must cost the Turing path, not `import kernels`."""
    code = "import sys, kernels; print('kernels.attention.turing' in sys.modules, 'turing' in kernels.attention.dispatch.path_names())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]


def test_every_config_a_t4_would_choose_fits_a_t4(tmp_path):
    """Each portable-kernel candidate of sm75 (what a T4's autotuner may pick), and the Turing kernel,
    as ptxas builds them for sm75: within a T4's 64 KB of shared memory per block. d=256 is the known
    exception (its smallest tile needs more than a T4 has), with d=192, which runs in d=256's tile; so
    they are checked to be the only ones."""
    require_ptxas()
    out = tmp_path / "sm75.jsonl"
    proc = subprocess.run([sys.executable, "-m", "kernels.aot", "--targets", "sm75", "--modules",
                           "kernels.attention.portable,kernels.attention.turing", "--json", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    builds = [json.loads(line) for line in out.read_text().splitlines()]
    assert builds and all(b["ok"] for b in builds)
    over = {b["label"] for b in builds if b["shared_bytes"] > TARGETS["sm75"].smem_per_block}
    # d=256, and the head sizes that run padded to its tile (d=192 in the matrix)
    assert all(re.search(r"d=(192|256) ", label) for label in over), over
    turing = [b for b in builds if b["kernel"] == "_attn_fwd_turing"]
    assert turing and all(b["spill_bytes"] == 0 for b in turing)


@pytest.mark.parametrize("shape, dtype, match", [
    ((1, 2, 16, 64), "float32", "float16 only"),
    ((1, 2, 16, 256), "float16", "head_dim"),
    ((1, 2, 16), "float16", "4-D"),
])
def test_the_turing_path_refuses_what_it_cannot_run(shape, dtype, match):
    import torch

    from kernels.attention.turing import turing_attention

    q = torch.zeros(shape, dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match=match):
        turing_attention(q, q, q)


def test_the_turing_path_needs_a_gpu():
    import torch

    from kernels.attention.turing import turing_attention

    q = torch.zeros(1, 2, 16, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA GPU"):
        turing_attention(q, q, q)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_each_compiled_variant_has_a_label_of_its_own(target):
    # The matrix reports builds by label: two variants under one label (the split-KV configs that
    # differ only in asking L2 ahead did) would make a failure or a spill ambiguous.
    from kernels.aot import specs_for

    for module, specs in specs_for(TARGETS[target]).items():
        labels = [s.label for s in specs]
        assert len(labels) == len(set(labels)), (module, sorted(x for x in labels if labels.count(x) > 1))
