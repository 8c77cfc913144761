"""notebooks/collect.ipynb: a valid notebook whose commands are the Makefile's real targets, variables
and collect options, and which, run unattended on this CPU with stand-ins for the GPU and for
`make collect`, stops on the placeholder address and on any failing step, and zips exactly the run
its collect wrote, never a committed one."""
import ast
import os
import re
import shlex
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest

from collect import cli
from collect.runner import RUN_STARTED

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "collect.ipynb"
MAKEFILE = (ROOT / "Makefile").read_text()
TARGETS = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, flags=re.M))
VARIABLES = set(re.findall(r"^([A-Z][A-Z_]*)\s*[?:]?=", MAKEFILE, flags=re.M))


@pytest.fixture(scope="module")
def notebook():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    return nb


def code(nb) -> str:
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")


def commands(nb, program):
    """The argument lists of the notebook's run(program, ...) calls, a formatted value as VALUE."""
    def text(node):
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.JoinedStr):
            return "".join(text(v) if isinstance(v, ast.Constant) else "VALUE" for v in node.values)
        return "VALUE"

    calls = [n for n in ast.walk(ast.parse(code(nb))) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "run" and n.args and text(n.args[0]) == program]
    return [[text(a) for a in call.args[1:]] for call in calls]


def test_the_notebook_is_valid_asks_for_a_gpu_and_has_no_shell_escapes(notebook):
    assert notebook.metadata.get("accelerator") == "GPU"
    assert commands(notebook, "make") and commands(notebook, "nvidia-smi")
    # `!cmd` ignores a failing exit status: every command goes through run(), which stops the notebook.
    assert not [ln for ln in code(notebook).splitlines() if ln.lstrip().startswith(("!", "%"))]


def test_make_commands_use_real_targets_variables_and_collect_options(notebook):
    for args in commands(notebook, "make"):
        targets = [a for a in args if "=" not in a and not a.startswith("-")]
        assert targets and set(targets) <= TARGETS, f"make {args}: unknown target(s); the Makefile has {sorted(TARGETS)}"
        for name, value in (a.split("=", 1) for a in args if "=" in a):
            assert name in VARIABLES, f"make {args}: {name} is not a Makefile variable"
            if name == "PROFILE" and value != "VALUE":
                assert value in ("quick", "full")
            if name == "COLLECT_ARGS":
                cli.parse_args(shlex.split(value))  # exits on an option collect does not have


def test_the_profile_choice_is_one_collect_accepts(notebook):
    choices = re.search(r'PROFILE = "(\w+)"\s*#\s*@param\s*(\[.*\])', code(notebook))
    assert choices and choices.group(1) in ast.literal_eval(choices.group(2))
    for p in ast.literal_eval(choices.group(2)):
        assert cli.parse_args(["--profile", p]).profile == p


def test_code_cells_are_valid_python(notebook):
    for i, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        ast.parse(cell.source, filename=f"code cell {i}")


def test_it_installs_what_collect_needs(notebook):
    import tomllib

    needed = {re.split(r"[<>=]", d)[0] for d in
              tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["collect"]}
    assert all(f'"{m}"' in code(notebook) for m in needed), needed


def test_the_notebook_reads_the_run_id_from_the_line_collect_prints(notebook):
    line = RUN_STARTED.format(run_id="t4-20261203", run_dir="data/runs/t4-20261203", profile="quick")
    pattern = re.search(r're\.findall\(r"(.+?)", out', code(notebook)).group(1)
    assert re.findall(pattern, f"collect: compiling\n{line}\ncollect: env: complete\n", flags=re.M) == ["t4-20261203"]


# --- run unattended ----------------------------------------------------------------------------

STUB_RUN = "tesla-t4-stub-20261203"
NVIDIA_SMI = """#!/bin/sh
echo "name, compute_cap, memory.total [MiB], driver_version"
echo "Tesla T4, 7.5, 15360 MiB, 550.54.15"
"""
# `make collect` as it behaves on a T4 that works (one phase written) or on one where collect stops
# before it starts a run; anything else goes to the real make.
MAKE = """#!/bin/sh
if [ "$1" != collect ]; then exec /usr/bin/make "$@"; fi
if [ "$STUB_COLLECT" = fail ]; then
  echo "collect: no CUDA GPU is visible to torch (torch.cuda.is_available() is False)" >&2
  exit 2
fi
mkdir -p data/runs/{run}
echo '{{"run_id": "{run}"}}' > data/runs/{run}/manifest.json
echo '{{"rows": []}}' > data/runs/{run}/bench.json
echo "{line}" >&2
"""


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """A file:// clone of this repository for the notebook to clone in turn."""
    path = tmp_path_factory.mktemp("origin") / "attention-report.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", f"file://{ROOT}", str(path)], check=True,
                   capture_output=True)
    return f"file://{path}"


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    line = RUN_STARTED.format(run_id=STUB_RUN, run_dir=f"data/runs/{STUB_RUN}", profile="quick")
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("make", MAKE.format(run=STUB_RUN, line=line))):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "work"
    work.mkdir()
    return work


def execute(notebook, work: Path, repo: str):
    """Run the notebook in `work` with REPO set in its form cell, as Run all would; returns the error
    that stopped it (None if none) and what every cell printed."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.from_dict(notebook)
    form = next(c for c in nb.cells if c.cell_type == "code" and "REPO = " in c.source)
    form.source = re.sub(r'^REPO = ".*?"', f"REPO = {repo!r}", form.source, flags=re.M)
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
        error = None
    except CellExecutionError as exc:
        error = str(exc)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return error, printed


def test_it_stops_on_the_placeholder_address_before_doing_anything(notebook, stubs):
    error, printed = execute(notebook, stubs, "https://github.com/your-name/attention-report")
    assert error and "set REPO in the cell above" in error
    assert "nvidia-smi" not in printed and list(stubs.iterdir()) == []


def test_a_collect_that_fails_early_stops_the_notebook_and_zips_nothing(notebook, stubs, origin, monkeypatch):
    monkeypatch.setenv("STUB_COLLECT", "fail")
    error, printed = execute(notebook, stubs, origin)
    assert error and "make collect" in error and "No run was started" in error
    assert "Tesla T4" in printed  # it got as far as the GPU and the clone
    assert list(stubs.rglob("*.zip")) == []


def test_a_collect_that_succeeds_zips_exactly_its_run(notebook, stubs, origin, monkeypatch):
    monkeypatch.setenv("STUB_COLLECT", "ok")
    committed = sorted(p.name for p in (ROOT / "data" / "runs").iterdir())
    assert committed, "the clone holds committed runs the zip must leave out"
    error, printed = execute(notebook, stubs, origin)
    assert error is None, error
    (archive,) = stubs.glob("*.zip")  # next to the notebook
    assert archive.name == f"{STUB_RUN}.zip"
    names = sorted(n for n in zipfile.ZipFile(archive).namelist() if not n.endswith("/"))
    assert names == [f"{STUB_RUN}/bench.json", f"{STUB_RUN}/manifest.json"]
    assert f"run: {STUB_RUN}" in printed
