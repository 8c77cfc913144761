"""Test the kernels on every Triton of the supported range (kernels/supported.py), on this CPU.

A collect runs on whatever Triton the GPU box has, so each Triton in the range is installed beside
the test install (``pip install --no-deps --target``, cached between runs; torch's CPU wheel does not
depend on Triton) and put first on the path of child processes, which then:

- run tests/test_triton_support.py (imports, ``python -m collect --help``, the dispatch's fallback),
  the portable kernel's and the launcher's interpreter tests, and the persistent decode step's;
- compile, ahead of time (kernels/aot.py), the Hopper and Gluon kernels, the shared-memory
  microbenchmark and the persistent decode step for sm90, and the portable kernel for sm75 and sm80 (the core variants).

Prints one line per version and exits non-zero if anything failed. `make test-range` runs it; so
does .ci/run. Usage: python scripts/check_triton_range.py [--versions 3.6.0,3.9.0] [--cache DIR]
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
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels.supported import SUPPORTED  # noqa: E402 - the repository first, as the tests have it

TESTS = ["tests/test_triton_support.py", "tests/test_attention_kernel.py", "tests/test_attention_launcher.py",
         "tests/test_persistent_step.py"]
# (targets, modules): the faster paths where they run, the portable kernel where a T4 and an A100 run it.
COMPILES = [("sm90", "kernels.attention.gluon,kernels.attention.hopper,kernels.membench,kernels.decode.persistent_step,"
                     "kernels.decode.persistent_ws"),
            ("sm75,sm80", "kernels.attention.portable")]
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-report" / "triton"


def installed(version: str, cache: Path) -> Path | None:
    """A folder holding Triton `version` (installed there on first use), or None where this Python's
    own Triton is that version already."""
    import triton

    if triton.__version__ == version:
        return None
    target = cache / version
    if (target / "triton" / "__init__.py").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=cache))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(tmp),
                           f"triton=={version}"], capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"pip could not install triton=={version}:\n{proc.stderr[-2000:]}")
    tmp.rename(target)  # whole or not at all: an interrupted install is never mistaken for a cached one
    return target


def child_env(triton_dir: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (triton_dir, ROOT) if p)
    return env


def run_tests(env: dict, out: Path) -> dict:
    junit = out / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                           *TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
            counts["failed" if kind in ("failure", "error") else kind] += 1
    if proc.returncode != 0:
        counts["log"] = proc.stdout[-4000:] + proc.stderr[-2000:]
    return counts


def run_compiles(env: dict, out: Path) -> dict:
    counts = {"built": 0, "failed": 0}
    for i, (targets, modules) in enumerate(COMPILES):
        jsonl = out / f"aot{i}.jsonl"
        proc = subprocess.run([sys.executable, "-m", "kernels.aot", "--targets", targets, "--modules", modules,
                               "--json", str(jsonl)], cwd=ROOT, env=env, capture_output=True, text=True)
        builds = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
        counts["built"] += sum(b["ok"] for b in builds)
        counts["failed"] += sum(not b["ok"] for b in builds) + (not builds)
        if proc.returncode != 0:
            counts["log"] = counts.get("log", "") + proc.stderr[-3000:]
    return counts


def check(torch_version: str, version: str, cache: Path) -> dict:
    t0 = time.monotonic()
    env = child_env(installed(version, cache))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        tests = pool.submit(run_tests, env, Path(tmp))
        compiles = pool.submit(run_compiles, env, Path(tmp))
        result = dict(triton=version, torch=torch_version, tests=tests.result(), compiles=compiles.result())
    result["seconds"] = round(time.monotonic() - t0)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the kernels' tests and ahead-of-time compiles on every Triton "
                                             "of the supported range.")
    ap.add_argument("--versions", help="comma-separated Triton versions (default: the supported range, "
                                       f"{', '.join(v for _, v in SUPPORTED)})")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help=f"where each Triton is installed and kept between runs (default: {DEFAULT_CACHE})")
    a = ap.parse_args(argv)
    pairs = dict((t, torch) for torch, t in SUPPORTED)
    versions = a.versions.split(",") if a.versions else list(pairs)
    unknown = [v for v in versions if v not in pairs]
    if unknown:
        ap.error(f"not in the supported range: {', '.join(unknown)}; kernels/supported.py lists {', '.join(pairs)}")
    failed = False
    print("| Triton | its torch | tests passed / failed / skipped | compiles built / failed | seconds |")
    print("|---|---|---|---|---|")
    for version in versions:
        r = check(pairs[version], version, a.cache)
        t, c = r["tests"], r["compiles"]
        print(f"| {version} | {r['torch']} | {t['passed']} / {t['failed']} / {t['skipped']} | "
              f"{c['built']} / {c['failed']} | {r['seconds']} |", flush=True)
        for log in (t.get("log"), c.get("log")):
            if log:
                failed = True
                print(f"\n--- Triton {version} ---\n{log}", file=sys.stderr)
        failed |= bool(t["failed"] or t["skipped"] or c["failed"] or not t["passed"])
    if failed:
        print("check_triton_range: a Triton of the supported range failed (above); fix the kernel or its "
              "compat shim (kernels/gluon_compat.py), or narrow the range in kernels/supported.py", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
