"""Whether the stamped spin's SM clock readings (collect/spin_clock.py) are right where they pass the device's
reported maximum: the spin's cycles over the GPU timer against the host's clock, and nvidia-smi's sampled SM clock,
at idle, right after heavy work, and inside a copy of the bench's timed loop (L2 flush, rest spin, call); then a
second spin on another stream beside each call, which reads the clock while the call runs.

Writes probe.json (every reading) and smi.csv (nvidia-smi every 20 ms) under --out and prints a summary. On an H100
(2026-12-06) it showed the counters agreeing with the host within 0.02% over a 1 s spin, and the loop's readings on
the clock's own 15 MHz steps from 1,965 to 2,084 MHz while nvidia-smi reported 1,965 (render/clock_reading.py).

    python3 scripts/probe_spin_clock.py --out $OUT          # on the GPU; reads clocks, never sets them
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMI_FIELDS = "timestamp,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,clocks_event_reasons.active"


def spin_against_host(kernel, cycles: int) -> dict:
    """One stamped spin between two synchronizes: its clock by the GPU timer and by the host's clock (which also
    counts the launch and the synchronize, negligible over a long spin)."""
    import torch
    from collect.spin_clock import StampedSpins

    s = StampedSpins(1, kernel)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    s.spin(0, cycles)
    torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    c0, c1, g0, g1 = s.stamps.tolist()
    return {"cycles": c1 - c0, "gpu_ns": g1 - g0, "host_ns": t1 - t0, "mhz_gpu_timer": (c1 - c0) * 1e3 / (g1 - g0),
            "mhz_host": (c1 - c0) * 1e3 / (t1 - t0)}


def _loop_setup(call, max_mhz: float):
    """What the bench's loop sets up before timing `call`: the L2 flush's buffer, the call's synchronised wall time,
    and the rest spin's cycles (collect/timing.rest_us)."""
    import torch
    from triton import runtime
    from collect.timing import rest_us

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    return driver, cache, wall_ms, int(rest_us(wall_ms) * max_mhz)


def bench_loop(kernel, call, calls: int, max_mhz: float) -> dict:
    """The bench's timed loop (collect/timing.device_time) with each spin's stamps and events kept apart."""
    import torch
    from collect.spin_clock import StampedSpins

    driver, cache, wall_ms, cycles = _loop_setup(call, max_mhz)
    spins = StampedSpins(calls, kernel)
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(calls)]
    for i in range(calls):
        driver.clear_cache(cache)
        ev[i][0].record()
        spins.spin(i, cycles)
        ev[i][1].record()
        call()
        ev[i][2].record()
    torch.cuda.synchronize()
    flat = spins.stamps.tolist()
    rows = []
    for i in range(calls):
        c0, c1, g0, g1 = flat[4 * i:4 * i + 4]
        rows.append({"mhz": (c1 - c0) * 1e3 / max(g1 - g0, 1), "spin_gpu_us": (g1 - g0) / 1e3,
                     "spin_event_us": ev[i][0].elapsed_time(ev[i][1]) * 1e3,
                     "call_ms": ev[i][1].elapsed_time(ev[i][2])})
    return {"wall_ms": wall_ms, "cycles": cycles, "rows": rows}


def clock_during_call(kernel, call, calls: int, max_mhz: float) -> dict:
    """The bench loop with a second stamped spin on a second stream, started with each call and lasting about 70% of
    it, so its stamps give the SM clock while the call runs; each call is also timed alone beside it, alternating,
    so the spin's cost to the call shows."""
    import torch
    from collect.spin_clock import StampedSpins

    driver, cache, wall_ms, cycles = _loop_setup(call, max_mhz)
    during_cycles = int(0.7 * wall_ms * 1e3 * 0.85 * max_mhz)
    rest, during = StampedSpins(calls, kernel), StampedSpins(calls, kernel)
    side = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(calls)]
    for i in range(calls):
        driver.clear_cache(cache)
        rest.spin(i, cycles)
        ev[i][0].record()
        if i % 2 == 0:
            side.wait_event(ev[i][0])
            with torch.cuda.stream(side):
                during.spin(i, during_cycles)
        call()
        ev[i][1].record()
        main_stream.wait_stream(side)
    torch.cuda.synchronize()
    fr, fd = rest.stamps.tolist(), during.stamps.tolist()
    rows = []
    for i in range(calls):
        c0, c1, g0, g1 = fr[4 * i:4 * i + 4]
        d0, d1, h0, h1 = fd[4 * i:4 * i + 4]
        rows.append({"rest_mhz": (c1 - c0) * 1e3 / max(g1 - g0, 1),
                     "during_mhz": (d1 - d0) * 1e3 / (h1 - h0) if h1 > h0 else None,
                     "during_us": (h1 - h0) / 1e3, "call_ms": ev[i][0].elapsed_time(ev[i][1])})
    return {"wall_ms": wall_ms, "cycles": cycles, "during_cycles": during_cycles, "rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for probe.json and smi.csv")
    ap.add_argument("--calls", type=int, default=100, help="timed calls per length in the bench-loop copy")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from collect.spin_clock import _kernel

    args.out.mkdir(parents=True, exist_ok=True)
    kernel = _kernel()
    max_mhz = float(subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                                   capture_output=True, text=True, check=True).stdout.split()[0])
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=open(args.out / "smi.csv", "w"), stderr=subprocess.STDOUT)
    res = {"device": torch.cuda.get_device_name(), "max_mhz": max_mhz, "marks": []}
    try:
        spin_against_host(kernel, 1000)
        time.sleep(1.0)
        res["marks"].append(("idle", time.time()))
        res["idle_1s"] = [spin_against_host(kernel, int(max_mhz * 1e6)) for _ in range(2)]
        q, k, v = (torch.randn(1, 32, 16384, 128, device="cuda", dtype=torch.float16) for _ in range(3))

        def attention(n):
            qs = [t[:, :, :n].contiguous() for t in (q, k, v)]  # a strided view would add a copy to each call

            def call():
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(*qs)
            return call

        heavy = attention(16384)
        res["marks"].append(("after_heavy", time.time()))
        after = []
        for _ in range(10):
            for _ in range(15):
                heavy()
            torch.cuda.synchronize()
            after.append(spin_against_host(kernel, int(max_mhz * 1e4)))  # 10 ms
        res["after_heavy_10ms"] = after
        for n in (16384, 2048):
            res["marks"].append((f"loop_n{n}", time.time()))
            res[f"loop_n{n}"] = bench_loop(kernel, attention(n), args.calls, max_mhz)
        for n in (16384, 4096):
            res["marks"].append((f"during_n{n}", time.time()))
            res[f"during_n{n}"] = clock_during_call(kernel, attention(n), args.calls, max_mhz)
        time.sleep(0.3)
    finally:
        smi.terminate()
    (args.out / "probe.json").write_text(json.dumps(res))
    for key in ("idle_1s", "after_heavy_10ms"):
        xs = res[key]
        print(f"{key}: MHz by GPU timer {[round(x['mhz_gpu_timer'], 1) for x in xs]}, by host "
              f"{[round(x['mhz_host'], 1) for x in xs]}")
    for n in (16384, 2048):
        rows = res[f"loop_n{n}"]["rows"]
        m = sorted(x["mhz"] for x in rows)
        levels = sorted({round(x) for x in m})
        above = sum(x > max_mhz for x in m)
        print(f"bench loop N={n}: median {statistics.median(m):.1f} MHz, max {m[-1]:.1f}, {above} of {len(m)} above "
              f"{max_mhz:.0f}; GPU timer / events over the spin "
              f"{statistics.median(x['spin_gpu_us'] / x['spin_event_us'] for x in rows):.4f}; levels {levels[:12]}")
    for n in (16384, 4096):
        print(_during_summary(res, n))


def _during_summary(res: dict, n: int) -> str:
    rows = res[f"during_n{n}"]["rows"]
    med = statistics.median
    with_spin = [r for i, r in enumerate(rows) if i % 2 == 0 and r["during_mhz"]]
    alone = [r for i, r in enumerate(rows) if i % 2 == 1]
    return (f"during N={n}: rest before the call {med(r['rest_mhz'] for r in rows):.0f} MHz, during the call "
            f"{med(r['during_mhz'] for r in with_spin):.0f} MHz (range {min(r['during_mhz'] for r in with_spin):.0f}-"
            f"{max(r['during_mhz'] for r in with_spin):.0f}); call {med(r['call_ms'] for r in with_spin):.4f} ms with "
            f"the spin beside it, {med(r['call_ms'] for r in alone):.4f} ms alone")


if __name__ == "__main__":
    main()
