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


def mkdocs_build(site_dir: Path, data_dir: Path | None = None, strict: bool = True,
                 narrated: str | None = None) -> subprocess.CompletedProcess:
    """Build the site the way `make build` does, optionally from another data folder and narrating a given run
    (by default the newest whose every phase completed)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("REPORT_RUN", None)
    if narrated is not None:
        env["REPORT_RUN"] = narrated
    if data_dir is not None:
        env["REPORT_DATA_DIR"] = str(data_dir)
    cmd = [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site_dir)] + (["--strict"] if strict else [])
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, worker_id) -> Path:
    """The site built with --strict from the committed data (shared by the build and browser tests):
    once per session, also when pytest-xdist runs the tests in several workers."""
    from filelock import FileLock

    if worker_id == "master":  # one process
        return _build_site(tmp_path_factory.mktemp("site"))
    shared = tmp_path_factory.getbasetemp().parent  # this session's, common to its workers
    with FileLock(str(shared / "site.lock")):
        done = shared / "site.built"
        if not done.exists():
            _build_site(shared / "site")
            done.touch()
    return shared / "site"


def _build_site(site: Path) -> Path:
    proc = mkdocs_build(site)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return site


# --- tiers ------------------------------------------------------------------------------------
# `make test` runs the tests in no tier (a few minutes on two cores); `.ci/run` runs every tier too.
# A test joins a tier by its node id (file, or file::name prefix) or by a fixture it uses, so the
# test files themselves carry no tier marks. Every tier has a reason to leave the default run:
TIERS = {
    # compiling kernels for GPUs that are not here, with Triton's ptxas in child processes
    "aot": ("fixture:builds", "fixture:compiled",
            "tests/test_decode_compile.py::test_kernels_compile_for_t4_a100_and_h100_without_spills",
            "tests/test_fused_shared_memory.py::test_every_fused_product_fits_its_gpu_and_the_estimate_bounds_it",
            "tests/test_membench.py::test_kernels_compile_for_every_target_and_load_what_the_rates_assume",
            "tests/test_attention_hopper_compile.py::test_hopper_kernels_compile_for_sm90_through_the_host_code"),
    # site builds beyond the one strict build of the committed data that the default run keeps
    "site": ("fixture:hostile_site", "fixture:unzipped", "tests/hostile/test_scale.py",
             "tests/hostile/test_partial.py::test_no_page_calls_a_crashed_phase_complete",
             "tests/hostile/test_serve.py::test_mkdocs_serve_answers_while_the_data_is_broken",
             "tests/test_offline_site.py::test_the_pages_build_keeps_directory_urls"),
    # a real headless Chromium (required in CI, where REQUIRE_BROWSER=1)
    "browser": ("tests/test_browser.py", "tests/hostile/test_hostile_browser.py",
                "tests/test_offline_site.py::test_opened_from_disk"),
    # long runs of the interpreted kernels: whole decode sessions and phases, compile pools
    "slow": ("fixture:tiny_run",
             "tests/test_decode_phase.py::test_no_other_variants_session_is_alive",
             "tests/test_decode_phase.py::test_a_compile_task_runs_every_step_kernel_once",
             "tests/test_decode_phase.py::test_a_model_may_check_only_some_variants",
             "tests/test_decode_phase.py::test_a_profiled_key_row_keeps_its_kernel_classes",
             "tests/test_decode_model.py::test_a_rewound_session",
             "tests/test_decode_model.py::test_a_step_that_hands_the_newest_row",
             "tests/test_decode_model.py::test_a_session_switches_to_teacher_forcing",
             "tests/test_decode_model.py::test_greedy_loops_agree",
             "tests/test_decode_model.py::test_a_fused_step_runs_the_attention_config",
             "tests/test_decode_model.py::test_inductor_step_traces_as_one_graph",
             "tests/test_decode_model.py::test_int8_caches_stay_close",
             "tests/test_decode_model.py::test_fused_and_torch_steps_give_the_same_logits",
             "tests/test_decode_model.py::test_the_read_plan_lists_every_kernel",
             "tests/test_report_findings.py::test_each_versions_story_is_told_once",
             "tests/test_precompile.py::test_a_phase_without_the_shared_pool_compiles_alone",
             "tests/test_precompile.py::test_one_pool_serves_each_phase_its_own_results"),
}


def tiers_of(nodeid: str, fixtures) -> list[str]:
    """The tiers a test belongs to (none: the default run's)."""
    def names(entry: str) -> bool:
        if entry.startswith("fixture:"):
            return entry.removeprefix("fixture:") in fixtures
        return nodeid == entry or nodeid.startswith(entry + ("" if "::" in entry else "::"))

    return [tier for tier, entries in TIERS.items() if any(names(e) for e in entries)]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        for tier in tiers_of(item.nodeid, getattr(item, "fixturenames", ())):
            item.add_marker(getattr(pytest.mark, tier))
