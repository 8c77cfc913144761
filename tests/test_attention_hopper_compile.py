"""The Hopper kernels compile for sm90, through the same host code a GPU call runs.

The interpreter runs the kernels' maths but none of what makes them Hopper kernels (TMA,
wgmma, warp specialization), and the correctness grid runs only on an H200. Here the wrapper's
own host code runs on CPU tensors, with each launch turned into a compilation for sm90 (Triton's
ptxas compiles for a GPU this machine does not have): every kernel the shipped path and the
recorded versions launch, on odd inputs too, must compile, fit in shared memory where it ships,
and be warp-specialized where that is its point.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from offline_compile import require_ptxas

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r'''
import json, sys
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime import jit

TARGET = GPUTarget("cuda", 90, 32)
compiled = []


def compile_instead_of_launch(self, *args, grid, warmup, **kwargs):
    """JITFunction.run, up to the launch: bind and specialise the arguments as Triton does on a
    GPU (CPU tensors stand in: same dtypes, 16-byte aligned), then compile for sm90."""
    kwargs["debug"] = kwargs.get("debug", self.debug) or False
    kwargs["instrumentation_mode"] = ""
    backend = make_backend(TARGET)
    binder = jit.create_function_from_signature(self.signature, self.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
    kernel = triton.compile(ASTSource(self, signature, constexprs, attrs), target=TARGET, options=options.__dict__)
    compiled.append(kernel)
    return kernel


jit.JITFunction.run = compile_instead_of_launch

from kernels.attention import hopper as H  # noqa: E402
from kernels.attention import versions as V  # noqa: E402
from kernels.attention.launcher import PLAIN  # noqa: E402


def inputs(kind, b, h, n, d):
    g = torch.Generator().manual_seed(0)
    if kind == "bnhd":  # a (B, N, H, d) projection viewed as (B, H, N, d)
        return tuple(torch.randn(b, n, h, d, generator=g).half().transpose(1, 2) for _ in range(3))
    if kind == "misaligned":
        m = b * h * n * d
        return tuple(torch.randn(m + 1, generator=g).half()[1:].view(b, h, n, d) for _ in range(3))
    return tuple(torch.randn(b, h, n, d, generator=g).half() for _ in range(3))


def run(label, q, k, v, causal, feats, cfg):
    compiled.clear()
    n, d = q.shape[2], q.shape[3]
    cfg = cfg or H.candidate_configs(d, q.dtype, causal, n, feats)[0].as_dict()
    try:
        H._run(q, k, v, causal, H._hopper_scale(q, None), cfg, feats, PLAIN)
        out = [dict(name=k.name, shared=k.metadata.shared, num_warps=k.metadata.num_warps) for k in compiled]
        print(json.dumps(dict(label=label, causal=causal, features=feats.label(), kernels=out)), flush=True)
    except Exception as exc:
        print(json.dumps(dict(label=label, causal=causal, features=feats.label(),
                              error=f"{type(exc).__name__}: {exc}"[:500])), flush=True)


# What flash_attention ships: its choice per shape, at the goal shapes' head dims and on odd inputs.
shipped = [("d64 N2048", "plain", (2, 8, 2048, 64)), ("d128 N1000 (B,N,H,d) view", "bnhd", (1, 3, 1000, 128)),
           ("d64 N300 misaligned", "misaligned", (1, 2, 300, 64)), ("d64 N1", "plain", (1, 2, 1, 64)),
           ("d32 N40", "plain", (1, 2, 40, 32)), ("d256 N200", "plain", (1, 2, 200, 256)),
           # head sizes between the tiles: the boxes are the next tile, the tensors the true width
           ("d80 N1000 (B,N,H,d) view", "bnhd", (1, 3, 1000, 80)), ("d192 N300", "plain", (1, 2, 300, 192))]
for label, kind, shape in shipped:
    q, k, v = inputs(kind, *shape)
    for causal in (False, True):
        for n in (shape[2], 16384):  # the length decides the causal schedule; 16384: the split one
            run(f"shipped {label} as N={n}", q, k, v, causal, H.best_features(causal, n), None)
# Every recorded version with its own features and fixed config, at a goal shape.
q, k, v = inputs("plain", 2, 8, 2048, 64)
for name, ver in V.VERSIONS.items():
    if ver.path != "hopper":
        continue
    for masking in ver.maskings:
        causal = masking == "causal"
        feats = ver.features_for(causal, 2048) or H.best_features(causal, 2048)
        run(f"version {name}", q, k, v, causal, feats, ver.config_for(causal))
'''


def test_hopper_kernels_compile_for_sm90_through_the_host_code():
    require_ptxas()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for real, not interpret
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    failed = [r for r in rows if "error" in r]
    assert not failed, failed
    shipped = [r for r in rows if r["label"].startswith("shipped")]
    assert len(shipped) == 8 * 2 * 2 and len(rows) > len(shipped)
    for r in shipped:
        assert r["kernels"], r
        for k in r["kernels"]:
            assert k["shared"] <= 227 * 1024, r  # what ships must fit an H100/H200's shared memory
    # Warp specialization split the key loop (a producer and two consumer warpgroups: 12 warps)
    # wherever the shipped path runs a warp-specialized kernel.
    ws = [k for r in shipped for k in r["kernels"] if k["name"].startswith("_hopper_fwd_ws")]
    assert ws and all(k["num_warps"] == 12 for k in ws), ws
    # The goal head dims at full length take warp-specialized kernels; short or other head dims
    # the descriptor kernel.
    main = {(r["label"], r["causal"]): r["kernels"][0]["name"] for r in shipped}
    assert main[("shipped d64 N2048 as N=2048", False)] == "_hopper_fwd_ws_persistent"
    assert main[("shipped d64 N2048 as N=2048", True)] == "_hopper_fwd_ws_persistent"
    assert main[("shipped d64 N2048 as N=16384", True)] == "_hopper_fwd_ws"
    assert main[("shipped d64 N1 as N=1", False)] == "_hopper_fwd"
    assert main[("shipped d256 N200 as N=200", True)] == "_hopper_fwd"
    # A padded head size takes the descriptor kernel whatever its length (see ws_capable).
    assert {main[(f"shipped {label} as N={n}", c)] for label in ("d80 N1000 (B,N,H,d) view", "d192 N300")
            for n in (1000, 300, 16384) for c in (False, True) if (f"shipped {label} as N={n}", c) in main} \
        == {"_hopper_fwd"}
