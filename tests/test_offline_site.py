"""`make offline`: a zip of the report that works unzipped and opened from disk (file://), with
nothing fetched from the network, while the Pages build keeps its directory URLs."""
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from browser import CHROMIUM, chromium

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def offline_zip(tmp_path_factory):
    """`make offline` run for real, with this Python standing in for the target's virtual environment."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    venv = tmp_path_factory.mktemp("venv")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    mkdocs = venv / "bin" / "mkdocs"
    mkdocs.write_text(f"#!/bin/sh\nexec {sys.executable} -m mkdocs \"$@\"\n")
    mkdocs.chmod(0o755)
    for stamp in ("bin/activate", ".report"):  # already "installed": make must not run pip
        (venv / stamp).touch()
        os.utime(venv / stamp, (time.time() + 60, time.time() + 60))
    out = tmp_path_factory.mktemp("offline")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("REPORT_RUN", None)
    zip_path = out / "report.zip"
    proc = subprocess.run(["make", "-s", "offline", f"VENV={venv}", f"OFFLINE_ZIP={zip_path}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    shutil.rmtree(ROOT / "site-offline", ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return zip_path


@pytest.fixture(scope="module")
def unzipped(offline_zip, tmp_path_factory):
    dest = tmp_path_factory.mktemp("unzipped")
    with zipfile.ZipFile(offline_zip) as z:
        z.extractall(dest)
    return dest


def test_the_zip_holds_a_site_with_file_urls(unzipped):
    index = (unzipped / "index.html").read_text()
    assert 'href="profiling.html"' in index and (unzipped / "profiling.html").exists()
    assert not (unzipped / "profiling").is_dir()  # no directory URLs: file:// would show a folder listing


def test_nothing_is_fetched_from_the_network(unzipped):
    # A canonical link names the published address; nothing loads it.
    remote = re.compile(r'<(?:script|link(?![^>]*rel="canonical")|img|iframe)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.I)
    offenders = [p.name for p in unzipped.glob("*.html") if remote.search(p.read_text())]
    assert offenders == [], f"pages that load something from the network: {offenders}"


def test_the_pages_build_keeps_directory_urls(built_site):
    assert (built_site / "profiling" / "index.html").exists()
    assert "unpkg" not in (built_site / "index.html").read_text()  # the shim ships with the site


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
def test_opened_from_disk_the_pages_plots_links_and_search_work(unzipped):
    with chromium() as browser:
        page = browser.new_page()
        errors, remote = [], []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda req: remote.append(req.url) if not req.url.startswith(("file:", "data:", "blob:",
                                                                                               "about:")) else None)
        page.goto((unzipped / "index.html").as_uri(), wait_until="load")
        page.locator("a[href='hardware.html']").first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("hardware.html")
        plot = page.locator("div.js-plotly-plot").first
        plot.locator("svg.main-svg").first.wait_for(timeout=20000)
        page.locator("input.md-search__input").click()  # the header's search box (desktop width)
        page.keyboard.type("memory", delay=50)  # key events: the search listens to them
        page.locator("li.md-search-result__item").first.wait_for(timeout=30000)
    assert errors == [] and remote == [], (errors, remote)
