import os

# Set before anything imports triton, for every test module: @triton.jit (and the helpers in
# triton.language) choose the CPU interpreter when they are defined, so no module may meet a
# kernel defined without it. Forced, not defaulted: the suite is CPU-only even where a GPU is.
# Tests that compile for a GPU target do it in a child process without this variable.
os.environ["TRITON_INTERPRET"] = "1"

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import os
import subprocess

import pytest


def mkdocs_build(site_dir: Path, data_dir: Path | None = None, strict: bool = True) -> subprocess.CompletedProcess:
    """Build the site the way `make build` does, optionally from another data folder."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("REPORT_RUN", None)
    if data_dir is not None:
        env["REPORT_DATA_DIR"] = str(data_dir)
    cmd = [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site_dir)] + (["--strict"] if strict else [])
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site built with --strict from the committed data (shared by the build and browser tests)."""
    site = tmp_path_factory.mktemp("site")
    proc = mkdocs_build(site)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return site
