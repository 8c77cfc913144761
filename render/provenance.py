"""One-line provenance of a run for the site footer."""
from __future__ import annotations

from . import fmt
from .runs import Run


def provenance(run: Run) -> dict[str, str]:
    m = run.manifest
    sw = m.software
    versions = ", ".join(f"{k} {sw[k]}" for k in ("python", "torch", "triton", "transformers", "ncu") if sw.get(k))
    clocks = "; ".join(f"{c.moment}: SM {fmt.num(c.sm_clock_mhz)} MHz, memory {fmt.num(c.mem_clock_mhz)} MHz"
                       for c in m.clocks) or "not recorded"
    commit = (m.git_commit or "unknown")[:12] + (" (uncommitted changes)" if m.git_dirty else "")
    return {"run_id": run.id, "device": run.device_name, "profile": m.profile, "created": m.created_utc,
            "commit": commit, "versions": versions or "not recorded", "clocks": clocks,
            "flags": short_flags(m.profiler_flags)}


def short_flags(flags: list[str]) -> str:
    """ncu's flags with the long --metrics list counted, not spelled out (the Reproduce page has it whole)."""
    if not flags:
        return "profile phase not run"
    out, skip = [], False
    for i, f in enumerate(flags):
        if skip:
            skip = False
            continue
        if f == "--metrics" and i + 1 < len(flags):
            out.append(f"--metrics <{len(flags[i + 1].split(','))} metrics>")
            skip = True
        else:
            out.append(f)
    return " ".join(out)
