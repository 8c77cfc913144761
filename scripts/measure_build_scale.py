"""How `mkdocs build` scales with the number of runs: copies of one run under new ids, in a temp data dir.

A measurement, not a test. Prints, for each run count, the build's wall time, the Device comparison
page's size and the whole site's size:

    .venv/bin/python scripts/measure_build_scale.py                      # newest run in data/runs, 1 5 20
    .venv/bin/python scripts/measure_build_scale.py --source data/runs/h200-20261129 --counts 1 5 20 40

The copies get new run ids (and created_utc one minute apart, so the original stays the newest and is
the narrated run). data/reference/ is copied too, so the published figures are part of every build.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def newest_run(data_dir: Path) -> Path:
    runs = sorted(p for p in (data_dir / "runs").iterdir() if (p / "manifest.json").exists())
    if not runs:
        raise SystemExit(f"no runs under {data_dir / 'runs'}; pass --source <run folder>")
    return max(runs, key=lambda p: json.loads((p / "manifest.json").read_text())["created_utc"])


def copy_run(src: Path, dst_root: Path, run_id: str, minutes_earlier: int) -> None:
    """The run's JSON files with run_id rewritten; created_utc moved back so copies sort before the original."""
    dst = dst_root / run_id
    dst.mkdir(parents=True)
    for f in sorted(src.glob("*.json")):
        data = json.loads(f.read_text())
        data["run_id"] = run_id
        if f.name == "manifest.json" and minutes_earlier:
            t = datetime.fromisoformat(data["created_utc"]) - timedelta(minutes=minutes_earlier)
            data["created_utc"] = t.isoformat()
        (dst / f.name).write_text(json.dumps(data))


def build(data_dir: Path, site: Path) -> float:
    env = {**os.environ, "REPORT_DATA_DIR": str(data_dir), "NO_MKDOCS_2_WARNING": "1"}
    env.pop("REPORT_RUN", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"mkdocs build failed with {data_dir}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall


def site_bytes(site: Path) -> int:
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, help="run folder to copy (default: the newest in data/runs)")
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 5, 20], help="run counts to build with")
    ap.add_argument("--reference", type=Path, default=ROOT / "data" / "reference",
                    help="published figures to include (default: data/reference)")
    args = ap.parse_args()
    src = args.source or newest_run(ROOT / "data")
    phases = sorted(p.name for p in src.glob("*.json"))
    print(f"source run: {src} ({', '.join(phases)})")
    print(f"{'runs':>5} {'build (s)':>10} {'compare.html':>13} {'index.html':>11} {'site':>9}")
    for n in args.counts:
        with tempfile.TemporaryDirectory(prefix="build-scale-") as tmp:
            data = Path(tmp) / "data"
            for i in range(n):
                copy_run(src, data / "runs", src.name if i == 0 else f"{src.name}-copy{i:02d}", i)
            if args.reference.is_dir():
                shutil.copytree(args.reference, data / "reference")
            site = Path(tmp) / "site"
            wall = build(data, site)
            compare = site / "compare" / "index.html"
            size = lambda p: f"{p.stat().st_size / 1024:.0f} KiB" if p.exists() else "absent"  # noqa: E731
            print(f"{n:>5} {wall:>10.1f} {size(compare):>13} {size(site / 'index.html'):>11} "
                  f"{site_bytes(site) / 2**20:>7.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
