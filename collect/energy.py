"""Energy per call: what ranks kernels once the GPU runs at its power limit.

A long call (attention at N=16384 takes 24 ms) holds the GPU at its power limit, where the driver lowers
the SM clock until the board draws no more than the limit. Two kernels that take the same cycles then run
at different clocks: the one that spends more energy per tile is clocked lower. Device time alone cannot
tell that apart from a kernel that needs more cycles; the board's power and clock while the call runs
back to back can.

The readings come from NVML (the driver's management library, the one nvidia-smi uses), loaded with
ctypes so that the GPU image needs no extra package. `Meter.measure` keeps the GPU busy with the call,
queued a few deep, and reads the board's energy counter, which the driver advances in steps: the window
starts and ends on a step, so its energy and its length belong to the same span, while the GPU never
idles inside it. Watts times the call's own back-to-back time is its energy per call.
"""
from __future__ import annotations

import ctypes
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

NVML_SUCCESS = 0
NVML_CLOCK_SM = 1
WARM_S = 0.5          # back-to-back calls before the window, so the clock has settled at the limit
DEFAULT_WINDOW_S = 3.0
# Calls kept in flight while the host polls the counter: enough for QUEUE_MS of GPU work, so that no poll (an
# NVML read takes tens of microseconds, a clock read more) leaves the GPU idle inside the window.
QUEUE_MS = 40.0
MIN_DEPTH, MAX_DEPTH = 2, 512
CLOCK_EVERY_S = 0.05  # the SM clock is sampled this often, not at every counter step


class EnergyUnavailable(RuntimeError):
    """NVML could not be loaded or does not report energy on this GPU."""


@dataclass(frozen=True)
class EnergyReading:
    watts: float              # mean board power over the window
    ms_per_call: float        # device time per call, back to back, over the same calls
    mj_per_call: float        # watts x ms_per_call
    sm_clock_mhz: float | None  # mean of the SM clock sampled in the window (None: NVML did not say)
    power_limit_w: float | None
    window_s: float
    calls: int

    def fields(self) -> dict:
        """The reading under the bench row's field names (collect/schema/bench.py), which a sweep's rows use too."""
        return dict(board_power_w=self.watts, power_limit_w=self.power_limit_w, power_sm_clock_mhz=self.sm_clock_mhz,
                    power_loop_ms=self.ms_per_call, energy_mj_per_call=self.mj_per_call)


def _load_nvml():
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.nvmlErrorString.restype = ctypes.c_char_p
        return lib
    raise EnergyUnavailable("NVML (libnvidia-ml) is not on this machine's library path: energy per call needs the "
                            "NVIDIA driver's management library, which comes with the driver")


class Meter:
    """The board's energy counter, power limit and SM clock of one CUDA device, through NVML."""

    def __init__(self, torch_device_index: int = 0, lib=None):
        self.lib = lib or _load_nvml()
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        self._check(self._handle_for(torch_device_index), "finding the GPU's NVML handle")
        self.energy_mj()  # fails here, with the reason, where the GPU keeps no energy counter (before Volta)

    def _handle_for(self, index):
        # CUDA's device order (and CUDA_VISIBLE_DEVICES) need not be NVML's: the PCI address is the same in both.
        try:
            import torch

            p = torch.cuda.get_device_properties(index)
            bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".encode()
            if self.lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(self.handle)) == 0:
                return NVML_SUCCESS
        except (ImportError, AttributeError, AssertionError, RuntimeError):
            pass  # no CUDA device in torch's view, or a torch without the PCI fields: NVML's own order
        return self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self.handle))

    def _check(self, ret, what):
        if ret != NVML_SUCCESS:
            reason = (self.lib.nvmlErrorString(ret) or b"?").decode(errors="replace")
            raise EnergyUnavailable(f"NVML failed at {what}: {reason} (error {ret})")

    def energy_mj(self) -> int:
        v = ctypes.c_ulonglong()
        self._check(self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(v)),
                    "reading the energy counter")
        return v.value

    def power_limit_w(self) -> float | None:
        v = ctypes.c_uint()
        ok = self.lib.nvmlDeviceGetEnforcedPowerLimit(self.handle, ctypes.byref(v)) == NVML_SUCCESS
        return v.value / 1000.0 if ok else None

    def sm_clock_mhz(self) -> int | None:
        v = ctypes.c_uint()
        ok = self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(v)) == NVML_SUCCESS
        return v.value if ok else None

    def measure(self, fn: Callable[[], object], window_s: float = DEFAULT_WINDOW_S, cuda=None) -> EnergyReading:
        """Board power, SM clock and back-to-back time of `fn` (already warm) over about `window_s`. `cuda`:
        torch.cuda, or a stand-in with its Event and synchronize (the tests')."""
        if cuda is None:
            import torch

            cuda = torch.cuda
        inflight: deque = deque()
        issued = 0
        depth = MIN_DEPTH

        def keep_busy():
            nonlocal issued
            while inflight and inflight[0].query():
                inflight.popleft()
            while len(inflight) < depth:
                fn()
                ev = cuda.Event()
                ev.record()
                inflight.append(ev)
                issued += 1

        def next_step(after):
            """Keep the GPU busy until the energy counter moves past `after`; its new value and the time."""
            while True:
                keep_busy()
                e = self.energy_mj()
                if e != after:
                    return e, time.perf_counter()

        begun = time.perf_counter()
        end = begun + WARM_S
        while time.perf_counter() < end:
            keep_busy()
        # The warm-up's pace sizes the queue: calls done per second, while the queue was still shallow.
        done = max(1, issued - len(inflight))
        depth = max(MIN_DEPTH, min(MAX_DEPTH, math.ceil(QUEUE_MS / (1e3 * (time.perf_counter() - begun) / done))))
        e0, t0 = next_step(self.energy_mj())
        start = cuda.Event(enable_timing=True)
        start.record()
        first = issued
        clocks = []
        e1, t1 = e0, t0
        sampled = t0
        while t1 - t0 < window_s:
            e1, t1 = next_step(e1)
            if t1 - sampled >= CLOCK_EVERY_S:
                sampled = t1
                clock = self.sm_clock_mhz()
                if clock:
                    clocks.append(clock)
        stop = cuda.Event(enable_timing=True)
        stop.record()
        calls = issued - first
        cuda.synchronize()
        watts = (e1 - e0) / 1000.0 / (t1 - t0)
        ms = start.elapsed_time(stop) / calls
        return EnergyReading(watts=watts, ms_per_call=ms, mj_per_call=watts * ms, window_s=t1 - t0, calls=calls,
                             sm_clock_mhz=sum(clocks) / len(clocks) if clocks else None,
                             power_limit_w=self.power_limit_w())
