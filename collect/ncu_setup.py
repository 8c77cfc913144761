"""Finding Nsight Compute, and what to tell the reader when it is missing or may not profile.

Standard library only. Where `ncu` comes from, in order: $NCU when it is set (and only it: a
path there that is not an executable means "no profiler", which is how a run is made without
one), else `ncu` on PATH, else the usual install folders, newest first.
"""
from __future__ import annotations

import glob
import os
import shutil

NCU_ENV = "NCU"
INSTALL_FOLDERS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu")

# What lets a non-root user read the GPU's performance counters (ERR_NVGPUCTRPERM).
PERMISSION_FIX = ("run the collect as root (e.g. `sudo make collect PHASES=profile RUN_ID=<run>`), or allow every "
                  "user to read the counters: add `options nvidia NVreg_RestrictProfilingToAdminUsers=0` to a file "
                  "in /etc/modprobe.d/, then reboot (or reload the nvidia kernel module); see "
                  "https://developer.nvidia.com/ERR_NVGPUCTRPERM")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def locate_ncu() -> tuple[str | None, str | None]:
    """(path of ncu, None), or (None, why none was found)."""
    setting = os.environ.get(NCU_ENV)
    if setting:
        if _executable(setting):
            return setting, None
        return None, f"${NCU_ENV} is set to {setting!r}, which is not an executable file"
    on_path = shutil.which("ncu")
    if on_path:
        return on_path, None
    found = sorted((p for pattern in INSTALL_FOLDERS for p in glob.glob(pattern)), reverse=True)
    for cand in found:
        if _executable(cand):
            return cand, None
    return None, "Nsight Compute (`ncu`) is not installed: not on PATH, not in " + ", ".join(INSTALL_FOLDERS)


def require_ncu() -> str:
    """ncu's path for a script that cannot go on without it; otherwise a SystemExit that says why and what to do."""
    ncu, why = locate_ncu()
    if ncu is None:
        raise SystemExit(f"{why}: install it, put it on PATH or set ${NCU_ENV}.")
    return ncu


def install_fix(cuda_version: str | None = None) -> str:
    """How to get Nsight Compute onto this machine, then rerun only the profile phase."""
    pkg = "cuda-nsight-compute-" + "-".join(cuda_version.split(".")[:2]) if cuda_version else "cuda-nsight-compute-<major>-<minor>"
    return (f"Install Nsight Compute: on Debian or Ubuntu with NVIDIA's CUDA repository, `sudo apt-get install -y {pkg}` "
            "(the CUDA version torch was built with), or NVIDIA's standalone installer from "
            "https://developer.nvidia.com/nsight-compute. Then put its folder on PATH (e.g. "
            "`export PATH=/usr/local/cuda/bin:$PATH`) or set NCU=/path/to/ncu, and profile this run again with "
            "`make collect PHASES=profile RUN_ID=<run>` (the other phases are kept).")


def permission_fix() -> str:
    return f"Nsight Compute may not read the GPU's performance counters as this user. To fix it, {PERMISSION_FIX}."
