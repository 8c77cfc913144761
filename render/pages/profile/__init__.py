"""Profiling: what Nsight Compute measured per kernel, and what it says about the bottleneck.

The page is assembled from one module per section of docs/profiling.md; a reader starts at data.py (the
profiled calls and kernels, looked up by shape and case) and then reads the section the page shows:

    summary.py       what this run shows, how it was measured
    clocks.py        one clock: our device time against Nsight Compute's
    rates.py         what each implementation did: calls, kernels, their two rates
    tensor_cores.py  whether the tensor cores ran, and on what evidence
    roofline.py      the hierarchical roofline and the roof that binds each call
    occupancy.py     theoretical against achieved occupancy, the occupancy curves
    limiter.py       what limits each kernel, from its pipe and Speed-of-Light counters
    hotspots.py      where the warps wait, instruction by instruction
    stalls.py        where the warps wait, by stall reason
    bytes.py         measured bytes against the byte arithmetic
    register_cap.py  whether a register cap could add a block per SM
    ws_steps.py      our warp-specialized kernel's partitions and turns per Gluon step (kernels/ cannot be imported)

Each section is a class over ProfileData; a section asks another for what it needs through `self` (the
opening findings quote the roofline, the limiter and occupancy), so the page is their union.
"""
from __future__ import annotations

from .bytes import Bytes
from .clocks import Clocks
from .hotspots import Hotspots
from .limiter import Limiter
from .occupancy import Occupancy
from .rates import Rates
from .register_cap import RegisterCaps
from .roofline import Roofline
from .stalls import Stalls
from .summary import Summary
from .tensor_cores import TensorCores


class ProfilePage(Summary, Clocks, Rates, TensorCores, Roofline, Occupancy, Limiter, Hotspots, Stalls, Bytes,
                  RegisterCaps):
    """The Profiling page's context (`{{ profile.roofline_figure() }}`): every section's methods."""
