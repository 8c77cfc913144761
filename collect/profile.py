"""Phase profile: Nsight Compute counters for every implementation, and what limits each kernel.

One `ncu` process profiles every case: collect/ncu_target.py warms each case up with the profiler
off, then runs one call between cudaProfilerStart/Stop inside an NVTX range "case=<id>".
`--profile-from-start off` keeps warm-up and autotuning out of the profile; the NVTX range (read
back from the raw CSV) says which case each kernel belongs to. Clocks are left alone
(`--clock-control none`): ncu's default locks them to base, which inflates durations.

What limits a kernel: the Speed-of-Light and Compute Workload sections give each pipe's busy share
of its peak and the issue slots used; collect/schema/limiter.py turns them and the stall reasons
into a verdict. The SourceCounters section samples where warps wait; the source page
(`--page source --print-source sass`) gives, per kernel of our kernel and its peers at the four
limiter shapes, the SASS instructions with the most samples (collect/ncu_source.py).

The register-cap experiment of earlier runs is retired: the shipped kernels' shared memory already
caps their blocks per SM at what their registers allow (the Profiling page shows both limits), so
no register cap could add a block.

Standalone, for the GPU fixture: `python -m collect.profile --tiny --keep DIR` runs the same ncu
command on a tiny case set and keeps every raw file in DIR.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ncu_parse, ncu_setup, ncu_source
from .budget import PHASE_BUDGET_ENVS, budget_seconds as shared_budget_seconds, no_limit_hint
from .calls import flash_route
from .ncu_parse import KernelRecord, NcuFailure
from .schema import SCHEMA_VERSION
from .schema.limiter import UNIT_FIELDS, judge
from .schema.common import attention_flops
from .schema.profile import ClockCheckRow, HotSpotRow, ImplRow, KernelRow, ProfileFile, StallRow
from .shapes import AttentionCase
from .ncu_metrics import (  # noqa: F401 - the phase uses some; tests read all as profile.<NAME>
    CORE_METRICS,
    LIMITER_METRICS,
    TENSOR_INST_METRICS,
    TENSOR_INST_FALLBACK,
    TENSOR_FLOP_METRICS,
    TENSOR_FLOPS_PER_OP,
    SHARED_BYTES_METRICS,
    LOCAL_BYTES_METRICS,
    OPTIONAL_METRICS,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
NCU_TIMEOUT_S = 240  # a hung profile must not eat the whole collect budget (typical run: under a minute)
# The pipe and Speed-of-Light figures the limiter needs are asked for by name (ncu_metrics.LIMITER_METRICS):
# their whole sections would add replay passes to every kernel. PC sampling (SourceCounters) runs in a
# second, small ncu run over the hot-spot cases only.
SECTIONS = ["LaunchStats", "Occupancy", "WarpStateStats"]
HOTSPOT_SECTIONS = ["SourceCounters"]
HOTSPOTS_PER_KERNEL = 20

IMPLS = ["naive", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "fa4", "triton"]
# On a GPU where flash_attention takes the Hopper path, the portable kernel is profiled beside it,
# and the register-cap experiment (a portable-kernel knob) runs on it.
PORTABLE = "triton-portable"
HEADLINE = dict(batch=2, heads=8, seq_len=2048, head_dim=64, dtype="float16", causal=False)
# d=128 at the kernel's goal shape (B=4 H=32 N=4096), where its limiter is judged too.
LARGE_D128 = dict(batch=4, heads=32, seq_len=4096, head_dim=128, dtype="float16", causal=False)
TINY = dict(batch=1, heads=2, seq_len=256, head_dim=64, dtype="float16", causal=False)
# The kernel's goal shapes (B=4 H=32 N=4096 d=128) and the study shape, causal and not: where the
# limiter of our kernel and its peers is judged and their SASS hot spots recorded.
GOAL = LARGE_D128
GOAL_CAUSAL = dict(GOAL, causal=True)
HEADLINE_CAUSAL = dict(HEADLINE, causal=True)
LIMITER_SHAPES = (HEADLINE, HEADLINE_CAUSAL, GOAL, GOAL_CAUSAL)
# Our kernel and the fastest fused kernels a user can have: SDPA's cuDNN and FlashAttention-2, and
# FlashAttention-4 where it is installed.
LIMITER_IMPLS = ("triton", "sdpa-cudnn", "sdpa-flash", "fa4")


@dataclass(frozen=True)
class Plan:
    """What a profile profiles: every implementation at the headline shape, some at d=128, and our
    kernel with its peers at the limiter shapes."""

    headline_impls: tuple[str, ...]
    d128_impls: tuple[str, ...]
    limiter_shapes: tuple[dict, ...] = ()
    limiter_impls: tuple[str, ...] = LIMITER_IMPLS


PLANS = {
    "quick": Plan(headline_impls=tuple(IMPLS), d128_impls=("naive", "sdpa", "triton"),
                  limiter_shapes=(GOAL_CAUSAL,)),
    "full": Plan(headline_impls=tuple(IMPLS), d128_impls=tuple(IMPLS), limiter_shapes=LIMITER_SHAPES),
}


@dataclass(frozen=True)
class ProfileCase:
    """One profiled call: an attention case, the experiment it belongs to, and a pinned tile config."""

    case: AttentionCase
    group: str  # "main" (implementations compared); "regcap" in runs before the experiment was retired
    config: dict | None = field(default=None, hash=False, compare=False)

    @property
    def id(self) -> str:
        c = self.case
        tag = f"b{c.batch}h{c.heads}n{c.seq_len}d{c.head_dim}" + ("-causal" if c.causal else "")
        return f"{self.group}-{tag}-{c.impl}" + (f"-{config_tag(self.config)}" if self.group == "regcap" and self.config else "")

    def __getattr__(self, name):  # the attention case's fields read through: case.impl, case.seq_len, ...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "case"), name)

    def with_config(self, config: dict | None) -> "ProfileCase":
        return ProfileCase(self.case, self.group, config)

    @classmethod
    def from_spec(cls, spec: dict) -> "ProfileCase":
        """The case a spec (as written to cases.json) describes; its id must be the one it would get."""
        c = cls(AttentionCase(spec["impl"], spec["dtype"], spec["causal"], spec["batch"], spec["heads"],
                              spec["seq_len"], spec["head_dim"]), spec["group"], spec.get("config"))
        if c.id != spec["id"]:
            raise ValueError(f"case spec id {spec['id']!r} does not match its fields (expected {c.id!r})")
        return c

    def spec(self) -> dict:
        """What collect/ncu_target.py reads for this case."""
        c = self.case
        return dict(id=self.id, group=self.group, impl=c.impl, config=self.config, batch=c.batch, heads=c.heads,
                    seq_len=c.seq_len, head_dim=c.head_dim, dtype=c.dtype, causal=c.causal)


# ------------------------------------------------------------------------------------------------
# Finding and asking ncu
# ------------------------------------------------------------------------------------------------


def find_ncu() -> str | None:
    """$NCU when set (only it), else ncu on PATH, else the usual install folders (collect/ncu_setup.py)."""
    return ncu_setup.locate_ncu()[0]


NCU_MISSING = "Nsight Compute (`ncu`) is not installed or not on PATH"


def ncu_missing(cuda_version: str | None = None) -> tuple[str, str]:
    """(why there is no profile, how to get one) when no ncu was found."""
    why = ncu_setup.locate_ncu()[1] or NCU_MISSING
    return f"{why}, so nothing was profiled.", ncu_setup.install_fix(cuda_version)


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else (out.strip().splitlines() or [None])[-1]


def available_metrics(ncu: str) -> set[str] | None:
    """Base metric names this GPU has, or None when ncu cannot say (then ask for all and retry)."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    names = ncu_parse.parse_query_metrics(out.stdout)
    return names if len(names) > 50 else None


def choose_metrics(available: set[str] | None) -> list[str]:
    """Core metrics always; optional ones only where the GPU lists them (all of them if it cannot say)."""
    if available is None:
        return CORE_METRICS + OPTIONAL_METRICS
    return CORE_METRICS + [m for m in OPTIONAL_METRICS if ncu_parse.base_name(m) in available]


def ncu_flags(metrics: list[str], sections: list[str] | None = None) -> list[str]:
    """Every ncu option the phase uses; the manifest records exactly these."""
    flags = [
        "--clock-control", "none",          # never touch the clocks (the default locks them to base)
        "--profile-from-start", "off",      # only between cudaProfilerStart/Stop: no warm-up, no autotuning
        "--nvtx",                           # record NVTX ranges: each kernel is tagged "case=<id>"
        "--target-processes", "application-only",
        "--replay-mode", "kernel",
        "--cache-control", "all",           # flush caches before each replay pass: every pass starts cold
    ]
    for s in SECTIONS if sections is None else sections:
        flags += ["--section", s]
    return flags + ["--metrics", ",".join(metrics)]


def target_command(spec: Path, result: Path) -> list[str]:
    return [sys.executable, "-m", "collect.ncu_target", str(spec), str(result)]


def subprocess_env() -> dict[str, str]:
    """The target imports kernels/ and collect/ from the repository root whatever the caller's cwd."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_tool(cmd: list[str], log: Path | None, timeout: float) -> tuple[int, str]:
    """Run a command; stdout+stderr as one text (also written to `log`)."""
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True,
                              timeout=timeout)
        rc, text = proc.returncode, proc.stdout + ("\n" + proc.stderr if proc.stderr else "")
    except subprocess.TimeoutExpired as exc:
        def _s(x):
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        rc, text = 124, _s(exc.stdout) + _s(exc.stderr) + f"\n==ERROR== timed out after {timeout:.0f} s\n"
    if log is not None:
        log.write_text(text, encoding="utf-8")
    return rc, text


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------


def config_tag(cfg: dict) -> str:
    cap = cfg.get("maxnreg")
    return (f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}w{cfg['num_warps']}s{cfg['num_stages']}"
            f"-r{cap if cap is not None else 'none'}")


def config_text(cfg: dict | None) -> str | None:
    if not cfg:
        return None
    cap = cfg.get("maxnreg")
    return (f"BLOCK_M={cfg['BLOCK_M']} BLOCK_N={cfg['BLOCK_N']} warps={cfg['num_warps']} "
            f"stages={cfg['num_stages']} maxnreg={cap if cap is not None else 'none'}")


def make_case(group: str, impl: str, shape: dict, config: dict | None = None) -> ProfileCase:
    return ProfileCase(AttentionCase(impl=impl, **shape), group, config)


def main_cases(quick: bool, tiny: bool = False, hopper: bool = False) -> list[ProfileCase]:
    extra = (PORTABLE,) if hopper else ()
    if tiny:
        return [make_case("main", i, TINY) for i in ("naive", "sdpa", "triton", *extra)]
    plan = PLANS["quick" if quick else "full"]
    groups = [(HEADLINE, plan.headline_impls), (LARGE_D128, plan.d128_impls)]
    groups += [(shape, plan.limiter_impls) for shape in plan.limiter_shapes]
    # The lightest shapes first. Clocks are not locked, and a short kernel profiled right after the d=128 block
    # (naive attention and SDPA's math backend replayed for seconds) runs hot-throttled: our kernel at the causal
    # study shape, the first case after that block, ran at 1,549 and 1,587 MHz in runs h200-20261204f and g, where
    # the three cases after it ran at 1,770-1,811 MHz.
    # Causal or not alike (stable: a shape's non-causal group, then its causal one), so that a causal group follows
    # kernels of its own size, not the GPU's first idle moments.
    groups.sort(key=lambda g: attention_flops(g[0]["batch"], g[0]["heads"], g[0]["seq_len"], g[0]["head_dim"], False))
    cases = [make_case("main", i, shape) for shape, impls in groups for i in impls + extra]
    seen: set[str] = set()
    return [c for c in cases if not (c.id in seen or seen.add(c.id))]  # the headline's peers are listed twice



# Limiter rows without hot spots. FlashAttention-4's would add its cases to the second ncu run, which already
# gives way first when the 9 minutes run short (in h200-20261203b, before FA4 compiled ahead into its disk
# cache, the hot-spot run with it pushed the collect past them). Its limiter row stays.
NO_HOTSPOTS = ("fa4",)


# The phase's time budget (PROFILE_BUDGET_S overrides it, 0: none), shrunk like every phase's to what is left
# of the collect's limit. The main ncu run is the phase: it is never cut (NCU_TIMEOUT_S only guards against a
# hang). The second, optional run (PC sampling for the SASS hot spots) needs about HOTSPOT_MIN_S (22 s in run
# h200-20261203f) and starts only if that is left both of the budget and of the collect's limit once the
# decode phase's budget is set aside: in that run it started anyway and left decode 83 s of its 150.
BUDGET_S = {"quick": 90.0, "full": 100.0}
BUDGET_ENV = PHASE_BUDGET_ENVS["profile"]
HOTSPOT_MIN_S = 30.0


def budget_seconds(profile: str, scale: float = 1.0) -> float | None:
    return shared_budget_seconds(BUDGET_ENV, BUDGET_S, profile, scale)


def hotspots_skip_reason(left_s: float | None, need_s: float = HOTSPOT_MIN_S) -> str | None:
    """Why the hot-spot run is skipped (`left_s`, what RunContext.optional_seconds leaves it, is less than it
    needs), or None."""
    if left_s is None or left_s >= need_s:
        return None
    return (f"skipped: {max(0.0, left_s):.0f} s were left for it, of the profile phase's time budget and of the "
            f"collect's time limit once the later phases' budgets are set aside, less than the {need_s:.0f} s "
            f"the hot-spot run needs ({no_limit_hint(BUDGET_ENV)})")


def hotspot_case(case: ProfileCase, portable: str) -> bool:
    """Whether the case's SASS hot spots are kept: our kernel and its peers at a limiter shape."""
    c = case.case
    return (case.group == "main" and case.impl in LIMITER_IMPLS + (portable,) and case.impl not in NO_HOTSPOTS
            and shape_of(c) in LIMITER_SHAPES)


def shape_of(c: AttentionCase) -> dict:
    """An attention case's shape as this module's shape constants write it (HEADLINE, GOAL, ...)."""
    return dict(batch=c.batch, heads=c.heads, seq_len=c.seq_len, head_dim=c.head_dim, dtype=c.dtype, causal=c.causal)


def portable_impl(hopper: bool) -> str:
    """The implementation name under which the portable kernel runs on this GPU."""
    return PORTABLE if hopper else "triton"


# ------------------------------------------------------------------------------------------------
# From ncu output to rows
# ------------------------------------------------------------------------------------------------


def _sum(rec: KernelRecord, names: list[str], weights: list[float] | None = None) -> float | None:
    vals = [(rec.metrics.get(n), w) for n, w in zip(names, weights or [1.0] * len(names))]
    vals = [(v, w) for v, w in vals if v is not None]
    return sum(v * w for v, w in vals) if vals else None


def _int(x: float | None) -> int | None:
    return None if x is None else int(round(x))


def _pct(x: float | None) -> float | None:
    """A share of peak as ncu prints it, kept within 0-100 (rounding can print 100.01)."""
    return None if x is None else min(100.0, max(0.0, x))


def kernel_row(case: ProfileCase, launch: int, rec: KernelRecord, passes: int | None,
               step: str | None = None) -> KernelRow:
    g = rec.get
    dur_s = g("gpu__time_duration.sum")
    clock = g("sm__cycles_elapsed.avg.per_second")
    smem_static, smem_dyn = g("launch__shared_mem_per_block_static"), g("launch__shared_mem_per_block_dynamic")
    # On Hopper the generic, HMMA and GMMA counters all report the same instructions: never add them.
    tensor_inst = g(TENSOR_INST_FALLBACK)
    if tensor_inst is None:
        per_op = [v for v in (g(m) for m in TENSOR_INST_METRICS) if v is not None]
        tensor_inst = max(per_op) if per_op else None
    tensor_ops = _sum(rec, TENSOR_FLOP_METRICS)
    p = "smsp__sass_thread_inst_executed_op_"
    row = KernelRow(
        case_id=case.id, impl=case.impl, launch=launch, ncu_id=rec.ncu_id, kernel_name=rec.name,
        block_size=_int(g("launch__block_size")) or ncu_parse.block_dims(rec.columns.get("Block Size")),
        grid_size=_int(g("launch__grid_size")) or ncu_parse.block_dims(rec.columns.get("Grid Size")),
        duration_ms=None if dur_s is None else dur_s * 1e3,
        sm_clock_mhz=None if clock is None else clock / 1e6,
        dram_read_bytes=g("dram__bytes_read.sum"), dram_write_bytes=g("dram__bytes_write.sum"),
        l2_bytes=g("lts__t_bytes.sum"), l2_hit_rate_pct=g("lts__t_sector_hit_rate.pct"),
        l1_bytes=g("l1tex__t_bytes.sum"), shared_bytes=_sum(rec, SHARED_BYTES_METRICS),
        local_bytes=_sum(rec, LOCAL_BYTES_METRICS),
        flops_fp32=_sum(rec, [p + "fadd_pred_on.sum", p + "fmul_pred_on.sum", p + "ffma_pred_on.sum"], [1, 1, 2]),
        flops_fp16=_sum(rec, [p + "hadd_pred_on.sum", p + "hmul_pred_on.sum", p + "hfma_pred_on.sum"], [2, 2, 4]),
        flops_tensor=None if tensor_ops is None else tensor_ops * TENSOR_FLOPS_PER_OP,
        tensor_inst=tensor_inst,
        achieved_occupancy_pct=g("sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_occupancy_pct=g("sm__maximum_warps_per_active_cycle_pct"),
        block_limit_registers=_int(g("launch__occupancy_limit_registers")),
        block_limit_smem=_int(g("launch__occupancy_limit_shared_mem")),
        block_limit_warps=_int(g("launch__occupancy_limit_warps")),
        block_limit_blocks=_int(g("launch__occupancy_limit_blocks")),
        registers_per_thread=_int(g("launch__registers_per_thread")),
        smem_per_block_bytes=None if smem_static is None and smem_dyn is None else _int((smem_static or 0) + (smem_dyn or 0)),
        smem_driver_bytes=_int(g("launch__shared_mem_per_block_driver")),
        smem_config_bytes=_int(g("launch__shared_mem_config_size")),
        waves_per_sm=g("launch__waves_per_multiprocessor"),
        replay_passes=_int(g("profiler__replayer_passes")) or passes,
        kernel_step=step,
        **{name: _pct(g(metric)) for name, metric in LIMITER_METRICS.items()},
    )
    verdict = judge({f: getattr(row, f) for f in UNIT_FIELDS}, ncu_parse.stall_reasons(rec))
    if verdict is not None:
        row.limiter, row.limiter_evidence = verdict.word, verdict.evidence
    return row


def flops_model(case: ProfileCase) -> float:
    return case.case.flops


def _total(rows: list[KernelRow], field: str) -> float | None:
    vals = [getattr(r, field) for r in rows]
    return None if not vals or any(v is None for v in vals) else float(sum(vals))


def impl_row(case: ProfileCase, result: dict | None, kernels: list[KernelRow], counted_tensor: bool) -> ImplRow:
    status, reason = "ok", None
    if result is None:
        status, reason = "error", "the target never reached this case (it crashed or timed out earlier)"
    elif result.get("status") != "ok":
        status, reason = result.get("status", "error"), result.get("reason")
    elif not kernels:
        status, reason = "error", ("no kernel matched the profiling range for this case: the call launched "
                                   "nothing between cudaProfilerStart and cudaProfilerStop")
    cfg = (result or {}).get("config") or case.config
    flops = None
    if kernels and counted_tensor:
        parts = [_total(kernels, "flops_fp32"), _total(kernels, "flops_fp16"), _total(kernels, "flops_tensor")]
        flops = None if any(x is None for x in parts) else sum(parts)
    return ImplRow(
        case_id=case.id, group=case.group, impl=case.impl, batch=case.batch, heads=case.heads,
        seq_len=case.seq_len, head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
        status=status, reason=reason, config=config_text(cfg) if case.impl in ("triton", PORTABLE) else None,
        kernels=len(kernels), duration_ms=_total(kernels, "duration_ms"),
        dram_read_bytes=_total(kernels, "dram_read_bytes"), dram_write_bytes=_total(kernels, "dram_write_bytes"),
        l2_bytes=_total(kernels, "l2_bytes"), l1_bytes=_total(kernels, "l1_bytes"),
        flops_counted=flops, flops_tensor=_total(kernels, "flops_tensor") if counted_tensor else None,
        tensor_inst=_total(kernels, "tensor_inst"), flops_model=flops_model(case),
        kernel_step=step_of(result),
    )


def step_of(result: dict | None) -> str | None:
    """The recorded step our kernel ran (the Gluon path's version), from the target's result."""
    cfg = (result or {}).get("config") or {}
    step = cfg.get("version") if isinstance(cfg, dict) else None
    return str(step) if step else None


def assemble(cases: list[ProfileCase], results: list[dict], csv_text: str, console: str,
             profile: ProfileFile) -> ProfileFile:
    """Fill `profile` with kernel, stall and implementation rows from ncu's CSV and console output."""
    records = ncu_parse.parse_raw_csv(csv_text)
    if records and all(r.case_id is None for r in records):
        raise NcuFailure("error", "the kernels in the report carry no NVTX range, so they cannot be attributed to "
                         "implementations; was ncu run with --nvtx?")
    passes = ncu_parse.parse_passes(console)
    pass_of = {i: n for i, (_, n) in enumerate(passes)} if len(passes) == len(records) else {}
    by_id = {r.get("id"): r for r in results}
    counted_tensor = any(r.get(*TENSOR_FLOP_METRICS) is not None for r in records)
    profile.flops_source = "counters" if counted_tensor else "analytical"
    order = sorted(range(len(records)), key=lambda i: records[i].ncu_id)
    for case in cases:
        mine = [i for i in order if records[i].case_id == case.id]
        step = step_of(by_id.get(case.id))
        rows = [kernel_row(case, n, records[i], pass_of.get(i), step) for n, i in enumerate(mine)]
        profile.kernels += rows
        for n, i in enumerate(mine):
            for reason, value in sorted(ncu_parse.stall_reasons(records[i]).items()):
                profile.stalls.append(StallRow(case_id=case.id, launch=n, reason=reason, warps_per_issue=value))
        profile.impls.append(impl_row(case, by_id.get(case.id), rows, counted_tensor))
    return profile


def add_hotspots(pf: ProfileFile, cases: list[ProfileCase], keep, rc: int, text: str) -> None:
    """Hot-spot rows from the source page (`text`, exit status `rc`) for the launches of the cases
    `keep` selects. The page lists kernels in report order, as the raw page numbers them; a page
    whose kernels do not match the raw page's by name is not used, and the file says why."""
    blocks = ncu_source.parse_source_csv(text) if rc == 0 else []
    kernels = sorted(pf.kernels, key=lambda k: k.ncu_id if k.ncu_id is not None else -1)
    pairs, i = [], 0
    for k in kernels:  # in order; the page may list more functions than the report has launches
        want = ncu_source.base_name(k.kernel_name)
        while i < len(blocks) and ncu_source.base_name(blocks[i].name) != want:
            i += 1
        if i == len(blocks):
            break
        pairs.append((k, blocks[i]))
        i += 1
    if rc != 0 or len(pairs) != len(kernels):
        why = (f"`ncu --page source` failed (status {rc})" if rc != 0 else
               f"the source page has no block for the report's kernel {len(pairs)} "
               f"({ncu_source.base_name(kernels[len(pairs)].kernel_name)[:80]}) in order")
        pf.reason = (pf.reason + "; " if pf.reason else "") + f"no SASS hot spots: {why}"
        return
    wanted = {c.id for c in cases if keep(c)}
    for k, block in pairs:
        if k.case_id not in wanted:
            continue
        for h in ncu_source.hotspots(block, HOTSPOTS_PER_KERNEL):
            pf.hotspots.append(HotSpotRow(case_id=k.case_id, launch=k.launch, rank=h.rank, address=h.address,
                                          opcode=h.opcode[:80], role=h.role, sass=h.sass, samples=h.samples,
                                          share_pct=h.share_pct, top_reason=h.top_reason,
                                          top_reason_pct=h.top_reason_pct))


# ------------------------------------------------------------------------------------------------
# Our kernel's tuned config, pinned in every process
# ------------------------------------------------------------------------------------------------


def autotuned_config(shape: dict, path: str | None = "portable") -> dict | None:
    """The tile config the portable kernel's autotuner picks in this process at `shape` (it times every
    candidate once: warm-up). path=None: flash_attention as shipped, which may take another path at
    this shape; then None, as for any call that did not run the autotuned portable kernel."""
    import torch

    from kernels import attention

    q, k, v = (torch.randn(shape["batch"], shape["heads"], shape["seq_len"], shape["head_dim"], device="cuda",
                           dtype=getattr(torch, shape["dtype"])) for _ in range(3))
    attention.flash_attention(q, k, v, causal=shape["causal"], path=path)
    torch.cuda.synchronize()
    cfg = attention.kernel_config_of_last_call()
    if cfg is None or cfg.get("path", "portable") != "portable" or cfg.get("autotuned") is False:
        return None
    return {k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")}


def pin_tuned_configs(cases: list[ProfileCase], portable: str, headline_best: dict | None) -> list[ProfileCase]:
    """Each main case of our kernel that runs the autotuned portable kernel, with the config this
    process's autotuner picks pinned, so the profiled process and our clock time the same kernel.
    Each process would otherwise tune for itself, and tuning is not deterministic: on 2026-11-30 the
    profiled process picked 128x128 tiles (70 us) at the study shape where this one picked 64x64
    (47 us), and the clock check compared two different kernels."""
    out = []
    for case in cases:
        if case.group == "main" and case.impl in ("triton", portable) and case.config is None:
            c = case.case
            shape = shape_of(c)
            headline = case.impl == portable and all(HEADLINE.get(k) == v for k, v in shape.items())
            if headline:  # tuned once already by run() (None: tuning failed; the case tunes for itself)
                cfg = headline_best
            elif case.impl != portable and flash_route(c, "cuda")[0] != "portable":
                cfg = None  # flash_attention takes a path without an autotuner here: nothing to pin
            else:
                cfg = autotuned_config(shape, path="portable" if case.impl == portable else None)
            if cfg is not None:
                case = case.with_config(dict(cfg, maxnreg=None))
        out.append(case)
    return out


def our_device_time(case: ProfileCase, max_clock_mhz: float | None = None):
    """Our device time (the one clock) of the same call the profiler timed: same shape, same seeded
    inputs as collect/ncu_target.py, same pinned config, a forced backend entered outside the call."""
    from . import timing
    from .calls import call_for, forced_backend, pinned_kernel, seeded_inputs

    c = case.case
    with forced_backend(c):
        call = call_for(c, *seeded_inputs(c), fn=pinned_kernel(c.impl, case.config))
        for _ in range(2):  # compilation, autotuning, cuBLAS heuristics
            call()
        return timing.device_time(call, timing.wall_ms(call), max_clock_mhz=max_clock_mhz)


def clock_check_rows(cases: list[ProfileCase], profile: ProfileFile, timings: dict) -> list[ClockCheckRow]:
    """ncu's time (its kernels' gpu__time_duration summed) beside our device time, per profiled call."""
    impl_by = {r.case_id: r for r in profile.impls}
    out = []
    for case in cases:
        row, t = impl_by.get(case.id), timings.get(case.id)
        if row is None or row.status != "ok" or not row.duration_ms or t is None:
            continue
        dev = t.timing.median_ms
        out.append(ClockCheckRow(case_id=case.id, impl=case.impl, batch=case.batch, heads=case.heads,
                                 seq_len=case.seq_len, head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
                                 kernels=row.kernels, ncu_ms=row.duration_ms, device_ms=dev,
                                 device_over_ncu=dev / row.duration_ms, gap_ms=dev - row.duration_ms,
                                 sm_clock_mhz=t.sm_clock_mhz, config=config_text(case.config)))
    return out


# ------------------------------------------------------------------------------------------------
# The whole profile
# ------------------------------------------------------------------------------------------------


def profile_cases(cases: list[ProfileCase], workdir: Path, run_id: str, ncu: str | None = None,
                  on_flags=None, extra_flags: list[str] | None = None,
                  metrics: list[str] | None = None, cuda_version: str | None = None,
                  hotspots_for=None, sections: list[str] | None = None) -> ProfileFile:
    """Run ncu once over `cases` and return the filled ProfileFile; never raises for ncu trouble:
    the file's status and reason say what went wrong. `hotspots_for(case)`: whether to keep that
    case's SASS hot spots (none when not given)."""
    workdir.mkdir(parents=True, exist_ok=True)
    pf = ProfileFile(schema_version=SCHEMA_VERSION, run_id=run_id, status="ok")
    ncu = ncu or find_ncu()
    if ncu is None:
        pf.reason, pf.fix = ncu_missing(cuda_version)
        pf.status = "unsupported"
        return _mark_all(pf, cases, "unsupported", pf.reason)
    pf.ncu_version = ncu_version(ncu)
    metrics = list(metrics) if metrics is not None else choose_metrics(available_metrics(ncu))
    spec, result, report = workdir / "cases.json", workdir / "target_result.json", workdir / "profile"
    spec.write_text(json.dumps({"cases": [c.spec() for c in cases]}, indent=1), encoding="utf-8")
    result.unlink(missing_ok=True)
    Path(str(report) + ".ncu-rep").unlink(missing_ok=True)  # a stale report must never pass for this run's
    t0 = time.perf_counter()
    for attempt in range(3):
        flags = ncu_flags(metrics, sections) + list(extra_flags or [])
        cmd = [ncu, *flags, "--export", str(report), "--force-overwrite", *target_command(spec, result)]
        pf.ncu_command = [Path(cmd[0]).name, *flags, "--export", "profile", "--force-overwrite",
                          "python", "-m", "collect.ncu_target", "cases.json", "target_result.json"]
        if on_flags is not None:
            on_flags(flags)
        rc, console = run_tool(cmd, workdir / "ncu_console.txt", NCU_TIMEOUT_S)
        missing = ncu_parse.missing_metrics(console)
        if missing and attempt < 2:  # this GPU lacks an optional metric: drop it and run again
            pf.metrics_missing = sorted(set(pf.metrics_missing) | set(missing))
            metrics = [m for m in metrics if m not in missing and ncu_parse.base_name(m) not in missing]
            continue
        break
    pf.wall_s = round(time.perf_counter() - t0, 2)
    results = json.loads(result.read_text(encoding="utf-8"))["cases"] if result.exists() else []
    try:
        ncu_parse.check_console(console, rc, report_exists=Path(str(report) + ".ncu-rep").exists())
        rc2, csv_text = run_tool([ncu, "--import", str(report) + ".ncu-rep", "--page", "raw", "--csv",
                                  "--print-units", "base"], None, 300)
        (workdir / "raw.csv").write_text(csv_text, encoding="utf-8")
        if rc2 != 0:
            raise NcuFailure("error", f"`ncu --import` failed (status {rc2}): {csv_text.strip()[-300:]}")
        assemble(cases, results, csv_text, console, pf)
        if hotspots_for is not None and any(hotspots_for(c) for c in cases):
            add_hotspots(pf, cases, hotspots_for, *run_tool(
                [ncu, "--import", str(report) + ".ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
                None, 300))
        trouble = ncu_parse.error_lines(console)
        if trouble or rc != 0:  # a report exists, so keep it, and say what else went wrong
            pf.reason = (f"ncu exited with status {rc}" + (f": {trouble[0][:300]}" if trouble else "")
                         + "; cases without kernels are marked below.")
    except NcuFailure as exc:
        pf.status, pf.reason, pf.fix = exc.status, exc.reason, exc.fix
        return _mark_all(pf, cases, exc.status, exc.reason, results)
    return pf


def _mark_all(pf: ProfileFile, cases: list[ProfileCase], status: str, reason: str, results=()) -> ProfileFile:
    """No profile at all: every case keeps its row with the reason (a case that failed on its own keeps its own)."""
    by_id = {r.get("id"): r for r in results}
    for case in cases:
        own = by_id.get(case.id)
        row = impl_row(case, own if own and own.get("status") != "ok" else {"status": status, "reason": reason},
                       [], False)
        pf.impls.append(row)
    return pf


def run(ctx) -> ProfileFile:
    """Phase entry point (see collect/runner.py): one ncu run over every case, then our clock on each
    main case outside the profiler (the cross-check of our device time against ncu's)."""
    import torch

    budget = ctx.own_budget(budget_seconds)
    t0 = time.perf_counter()
    best = None
    try:
        best = autotuned_config(HEADLINE)
    except Exception:  # noqa: BLE001 - the headline case then tunes for itself in each process
        best = None
    from kernels.attention.dispatch import another_path_ships

    hopper = another_path_ships()
    portable = portable_impl(hopper)
    # The same config in every process: the profiled process does not re-tune.
    cases = pin_tuned_configs(main_cases(ctx.quick, hopper=hopper), portable, best)
    torch.cuda.empty_cache()
    ncu = find_ncu()
    metrics = choose_metrics(available_metrics(ncu)) if ncu else None
    if metrics is not None and ctx.facts is not None:  # only what this GPU generation has (collect/device_choices.py)
        from .device_choices import ncu_metrics

        wanted = set(ncu_metrics(ctx.facts))
        metrics = [m for m in metrics if m in wanted]
    cuda = ctx.manifest.device.cuda_version if ctx.manifest.device else None
    workdir = Path(ctx.out_dir) / "ncu"
    pf = profile_cases(cases, workdir, ctx.run_id, ncu=ncu, on_flags=ctx.record_profiler_flags,
                       metrics=metrics, cuda_version=cuda)
    ctx.checkpoint(pf, force=True)  # after minutes of ncu: never deferred
    spots = [c for c in cases if hotspot_case(c, portable)]
    phase_left = None if budget is None else budget - (time.perf_counter() - t0)
    skip = hotspots_skip_reason(ctx.optional_seconds(phase_left))
    if spots and pf.status == "ok" and skip:
        pf.reason = (pf.reason + "; " if pf.reason else "") + f"SASS hot spots: {skip}"
    elif spots and pf.status == "ok":
        hot = profile_cases(spots, workdir / "hotspots", ctx.run_id, ncu=ncu, metrics=["gpu__time_duration.sum"],
                            cuda_version=cuda, hotspots_for=lambda c: True, sections=HOTSPOT_SECTIONS)
        pf.hotspots = hot.hotspots
        pf.wall_s = round((pf.wall_s or 0) + (hot.wall_s or 0), 2)
        if hot.status != "ok" or hot.reason:
            pf.reason = (pf.reason + "; " if pf.reason else "") + f"SASS hot spots: {hot.reason or hot.status}"
        ctx.checkpoint(pf, force=True)  # after minutes of ncu: never deferred

    max_clock = ctx.manifest.device.sm_clock_max_mhz if ctx.manifest.device else None
    latencies, errors = {}, {}
    for case in ctx.progress(cases, total=len(cases), desc="profile: our clock"):
        try:
            latencies[case.id] = our_device_time(case, max_clock)
        except Exception as exc:  # noqa: BLE001 - a case that cannot be timed keeps its profile
            errors[case.id] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            from .timing import free_cuda_memory

            free_cuda_memory()
    pf.clock_check = clock_check_rows(cases, pf, latencies)
    if errors:
        first = next(iter(errors.items()))
        pf.reason = (pf.reason + "; " if pf.reason else "") + (
            f"our clock could not time {len(errors)} profiled call(s), e.g. {first[0]}: {first[1]}")
    return pf


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect.profile",
                                 description="Run the profile phase's ncu command outside a collect run.")
    ap.add_argument("--tiny", action="store_true", help="naive, sdpa and triton at B=1 H=2 N=256 d=64 (the test fixture)")
    ap.add_argument("--keep", type=Path, required=True, help="folder for the raw ncu files and profile.json")
    ap.add_argument("--headline", action="store_true", help="the phase's main cases (quick profile) instead")
    ap.add_argument("--only", help="comma-separated implementations to keep, e.g. naive,triton")
    ap.add_argument("--extra-flag", action="append", default=[], help="extra ncu option (repeatable), "
                    "e.g. --extra-flag=--kernel-name --extra-flag=regex:^nothing$ to exercise the no-match path")
    a = ap.parse_args(argv)
    cases = main_cases(quick=True, tiny=not a.headline)
    if a.only:
        keep = a.only.split(",")
        cases = [c for c in cases if c.impl in keep]
    pinned = (dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, maxnreg=None) if a.headline
              else dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2, maxnreg=None))
    # pinned: a fixture must not depend on autotuning
    cases = [c.with_config(pinned) if c.impl == "triton" else c for c in cases]
    pf = profile_cases(cases, a.keep, "fixture", extra_flags=a.extra_flag)
    from .jsonio import write_json_atomic

    write_json_atomic(a.keep / "profile.json", pf)
    print(f"profile: status {pf.status}; {len(pf.kernels)} kernels; {pf.reason or ''}", file=sys.stderr)
    return 0 if pf.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
