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
            "flags": " ".join(m.profiler_flags) or "profile phase not run"}
