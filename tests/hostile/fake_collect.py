"""A collect on a stubbed GPU: the real runner, manifest, lock and checkpoints around fake phases.

Imports no torch, so a test can start it in a child process and kill it (`python fake_collect.py OUT
[--resume]`). Its bench phase writes one row per case through the runner's checkpoint, as the real
phase does; each row's `warmup_s` is the attempt that measured it, so a row measured again shows.
"""
from __future__ import annotations

import sys
import time
import types
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repo's packages first, as tests/conftest.py does
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from collect import env, runner  # noqa: E402
from collect.schema import SCHEMA_VERSION  # noqa: E402
from collect.schema.bench import BenchFile, BenchRow  # noqa: E402
from collect.schema.common import attention_flops  # noqa: E402
from collect.schema.manifest import DeviceFacts, MeasuredCeiling  # noqa: E402

RUN_ID = "fake-20261201"
SEQ = tuple(64 * i for i in range(1, 41))


def device(name: str = "NVIDIA H200") -> DeviceFacts:
    return DeviceFacts(name=name, compute_capability="9.0", sm_count=132)


def row(seq_len: int, attempt: int) -> BenchRow:
    flops = attention_flops(1, 2, seq_len, 64, False)
    return BenchRow(impl="naive", backend_requested=None, backend_used=None, dtype="float16", causal=False, batch=1,
                    heads=2, seq_len=seq_len, head_dim=64, status="ok", latency_ms_median=1.0, latency_ms_p10=0.9,
                    latency_ms_p90=1.1, n_timed_runs=60, flops=flops, tflops=flops / 1e9, warmup_s=float(attempt))


def install(set_attr, attempt: int = 0, delay_s: float = 0.0, wait_for: Path | None = None) -> None:
    """Stub the GPU and every phase module through `set_attr` (monkeypatch.setattr, or setattr). The bench
    phase sleeps `delay_s` per case; with `wait_for`, it creates that file and waits until it is gone."""
    set_attr(env, "describe_device", lambda: device())
    set_attr(env, "software_versions", lambda: {"python": "3.x"})

    def env_run(ctx):
        return env.EnvResult(device=device(), software={}, clocks=[], datasheet=None,
                             measured_ceilings=[MeasuredCeiling(name="copy_bandwidth", quantity="bytes", status="ok",
                                                                per_s_median=1e12)])

    def bench_run(ctx):
        result = BenchFile(schema_version=SCHEMA_VERSION, run_id=ctx.run_id, profile=ctx.profile, timing_method="t",
                           backend_choice_method="b", min_timed_runs=50)
        saved = ctx.saved_cases(BenchRow)
        if wait_for is not None:
            wait_for.touch()
            while wait_for.exists():
                time.sleep(0.02)
        for n in SEQ:
            key = ("naive", None, "float16", False, 1, 2, n, 64)
            if key not in saved:
                time.sleep(delay_s)
            result.rows.append(saved.get(key) or row(n, attempt))
            ctx.checkpoint(result)
        return result

    def other(ctx):
        return {"schema_version": SCHEMA_VERSION, "run_id": ctx.run_id, "rows": []}

    modules = {n: types.SimpleNamespace(run=other) for n in runner.PHASE_ORDER}
    modules["env"] = types.SimpleNamespace(run=env_run)
    modules["bench"] = types.SimpleNamespace(run=bench_run)
    set_attr(runner, "phase_module", lambda name: modules[name])


def collect(out: Path, *phases: str, resume: bool = False, run_id: str = RUN_ID) -> int:
    return runner.run_collect(runner.CollectConfig(out=Path(out), run_id=run_id, phases=list(phases) or ["env", "bench"],
                                                   resume=resume))


if __name__ == "__main__":
    out, args = Path(sys.argv[1]), sys.argv[2:]
    flag = lambda name: args[args.index(name) + 1] if name in args else None  # noqa: E731
    install(setattr, attempt=int(flag("--attempt") or 0), delay_s=float(flag("--delay") or 0),
            wait_for=Path(flag("--wait-for")) if flag("--wait-for") else None)
    sys.exit(collect(out, resume="--resume" in args))
