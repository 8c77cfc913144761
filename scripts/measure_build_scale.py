"""How `mkdocs build` scales with more runs and with more rows per run, in a temp data dir.

A measurement, not a test: run it after changing a page or the schema to check the build still
scales (the target: a run with ten times the committed rows builds in under 30 s on two cores).

    .venv/bin/python scripts/measure_build_scale.py                    # 1x and 10x rows, one run
    .venv/bin/python scripts/measure_build_scale.py --rows 1 10 --runs 1 5
    .venv/bin/python scripts/measure_build_scale.py --rows 10 --pages  # also time each page's rendering

More rows are distinct cases: each measured table is copied `factor` times with its case key
changed (a longer sequence or context, another launch or case id), so no row is a duplicate and the
build must keep every one. More runs are copies of the run under new ids, created one minute apart
so the original stays the newest (the narrated run). data/reference/ is copied too.
"""
from __future__ import annotations

import argparse
import copy
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
sys.path.insert(0, str(ROOT))

from collect.saved import record_tables  # noqa: E402
from collect.schema import FILE_SPECS, site_pages  # noqa: E402
from collect.schema.reader import GZIP_SUFFIX, read_json  # noqa: E402

# Tables that describe the run (versions, models, tolerances) are not multiplied: only measurements.
MEASURED = {"bench.json": ("rows",), "correctness.json": ("rows",), "iterations.json": ("rows",),
            "decode.json": ("rows", "checks", "micro"),
            "profile.json": ("impls", "kernels", "stalls", "regcap", "clock_check")}
# The key field a copy changes, in order of preference: a sweep axis, else an id, else any number.
SWEEP = ("case_id", "seq_len", "context", "launch")


def newest_run(data_dir: Path) -> Path:
    runs = sorted(p for p in (data_dir / "runs").iterdir() if (p / "manifest.json").exists())
    if not runs:
        raise SystemExit(f"no runs under {data_dir / 'runs'}; pass --source <run folder>")
    return max(runs, key=lambda p: datetime.fromisoformat(json.loads((p / "manifest.json").read_text())["created_utc"]))


def _vary(row: dict, key: tuple, k: int) -> dict:
    """Copy k of a row, with one case-key field changed so it is a distinct case."""
    row = copy.deepcopy(row)
    name = next((f for f in SWEEP if f in key), None) or next(
        (f for f in key if isinstance(row.get(f), int) and not isinstance(row.get(f), bool)), None) or next(
        f for f in key if isinstance(row.get(f), str))
    row[name] = f"{row[name]}-x{k}" if isinstance(row[name], str) else row[name] + k
    return row


def multiply_rows(data: dict, filename: str, factor: int) -> dict:
    """Every measured table of one phase file `factor` times as long, all cases distinct."""
    spec = next((s for s in FILE_SPECS.values() if s.filename == filename), None)
    if factor <= 1 or spec is None or filename not in MEASURED:
        return data
    tables = record_tables(spec.dataclass())
    for table in MEASURED[filename]:
        rows = data.get(table) or []
        key = tables[table].CASE_KEY
        data[table] = rows + [_vary(r, key, k) for k in range(1, factor) for r in rows]
    return data


def copy_run(src: Path, dst_root: Path, run_id: str, minutes_earlier: int, factor: int) -> dict[str, int]:
    """The run's JSON files under `run_id`, rows multiplied; returns the row count per file."""
    dst = dst_root / run_id
    dst.mkdir(parents=True)
    counts = {}
    for f in sorted([*src.glob("*.json"), *src.glob("*.json" + GZIP_SUFFIX)]):
        name = f.name.removesuffix(GZIP_SUFFIX)  # written back plain
        data = multiply_rows(read_json(f), name, factor)
        data["run_id"] = run_id
        if name == "manifest.json" and minutes_earlier:
            t = datetime.fromisoformat(data["created_utc"]) - timedelta(minutes=minutes_earlier)
            data["created_utc"] = t.isoformat()
        counts[name] = sum(len(data.get(t) or []) for t in MEASURED.get(name, ()))
        (dst / name).write_text(json.dumps(data))
    return counts


def build(data_dir: Path, site: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the build process)."""
    env = {**os.environ, "REPORT_DATA_DIR": str(data_dir), "NO_MKDOCS_2_WARNING": "1"}
    env.pop("REPORT_RUN", None)
    t0, c0 = time.perf_counter(), os.times()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall, c1 = time.perf_counter() - t0, os.times()
    if proc.returncode != 0:
        raise SystemExit(f"mkdocs build failed with {data_dir}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall, (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)


def page_times(data_dir: Path) -> list[tuple[str, float]]:
    """CPU seconds to load the data, then to render each page's Markdown (no MkDocs)."""
    from render.site import Report

    t = time.process_time()
    report = Report.load(data_dir)
    out = [("load + validate", time.process_time() - t)]
    for md in [p.doc for p in site_pages()]:
        t = time.process_time()
        report.render_markdown((ROOT / "docs" / md).read_text(), md)
        out.append((md, time.process_time() - t))
    return out


def site_bytes(site: Path) -> int:
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, help="run folder to copy (default: the newest in data/runs)")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 10], help="row multipliers to build with")
    ap.add_argument("--runs", type=int, nargs="+", default=[1], help="run counts to build with")
    ap.add_argument("--pages", action="store_true", help="also time each page's rendering (CPU seconds)")
    ap.add_argument("--reference", type=Path, default=ROOT / "data" / "reference",
                    help="published figures to include (default: data/reference)")
    args = ap.parse_args()
    src = args.source or newest_run(ROOT / "data")
    print(f"source run: {src} ({', '.join(sorted(p.name for p in src.glob('*.json')))})")
    print(f"{'rows':>5} {'runs':>5} {'wall (s)':>9} {'cpu (s)':>8} {'largest file':>13} {'site':>9}  rows per file")
    for factor in args.rows:
        for n in args.runs:
            with tempfile.TemporaryDirectory(prefix="build-scale-") as tmp:
                data = Path(tmp) / "data"
                counts = {}
                for i in range(n):
                    counts = copy_run(src, data / "runs", src.name if i == 0 else f"{src.name}-copy{i:02d}", i, factor)
                if args.reference.is_dir():
                    shutil.copytree(args.reference, data / "reference")
                largest = max(p.stat().st_size for p in (data / "runs" / src.name).glob("*.json"))
                site = Path(tmp) / "site"
                wall, cpu = build(data, site)
                print(f"{factor:>4}x {n:>5} {wall:>9.1f} {cpu:>8.1f} {largest / 2**20:>9.1f} MiB "
                      f"{site_bytes(site) / 2**20:>5.1f} MiB  {counts}", flush=True)
                if args.pages:
                    for name, sec in page_times(data):
                        print(f"{'':>12}{name:<22} {sec:>6.2f} s", flush=True)


if __name__ == "__main__":
    main()
