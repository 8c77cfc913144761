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
    commits = list(dict.fromkeys((r.git_commit or m.git_commit) for r in m.phases)) or [m.git_commit]
    if len(commits) > 1:  # written by several collects: the Reproduce page lists which phase ran where
        commit = ", ".join((c or "unknown")[:12] for c in commits) + " (which phase ran where: Reproduce page)"
    else:
        commit = (commits[0] or "unknown")[:12] + (" (uncommitted changes)" if m.git_dirty else "")
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
