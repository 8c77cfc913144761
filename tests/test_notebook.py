"""notebooks/collect.ipynb: a valid notebook whose shell commands are the Makefile's real targets,
variables and collect options, and whose Python runs (syntax) as written."""
import ast
import re
import shlex
from pathlib import Path

import nbformat
import pytest

from collect import cli

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


def code_lines(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            yield from cell.source.splitlines()


def shell_commands(nb, program):
    """The `!program ...` lines, with notebook variables ({NAME}) replaced by a stand-in value."""
    out = []
    for line in code_lines(nb):
        line = line.strip()
        if line.startswith(f"!{program} "):
            out.append(shlex.split(re.sub(r"\{[^}]*\}", "VALUE", line[1:]))[1:])
    return out


def test_the_notebook_is_valid_and_asks_for_a_gpu(notebook):
    assert notebook.metadata.get("accelerator") == "GPU"
    assert any(ln.strip().startswith("!make collect") for ln in code_lines(notebook))


def test_make_commands_use_real_targets_variables_and_collect_options(notebook):
    commands = shell_commands(notebook, "make")
    assert commands
    for args in commands:
        targets = [a for a in args if "=" not in a and not a.startswith("-")]
        assert targets and set(targets) <= TARGETS, f"make {args}: unknown target(s); the Makefile has {sorted(TARGETS)}"
        for name, value in (a.split("=", 1) for a in args if "=" in a):
            assert name in VARIABLES, f"make {args}: {name} is not a Makefile variable"
            if name == "PROFILE" and value != "VALUE":
                assert value in ("quick", "full")
            if name == "COLLECT_ARGS":
                cli.parse_args(shlex.split(value))  # exits on an option collect does not have


def test_python_m_collect_commands_parse(notebook):
    for args in shell_commands(notebook, "python"):
        if args[:2] == ["-m", "collect"]:
            cli.parse_args(args[2:])


def test_the_profile_choice_is_one_collect_accepts(notebook):
    source = "\n".join(code_lines(notebook))
    choices = re.search(r'PROFILE = "(\w+)"\s*#\s*@param\s*(\[.*\])', source)
    assert choices and choices.group(1) in ast.literal_eval(choices.group(2))
    for p in ast.literal_eval(choices.group(2)):
        assert cli.parse_args(["--profile", p]).profile == p


def test_python_cells_are_valid_python(notebook):
    for i, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        # Shell (!) and magic (%) lines are IPython's; stand a `pass` in their place, indentation kept.
        src = "\n".join(re.sub(r"^(\s*)[!%].*$", r"\1pass", ln) for ln in cell.source.splitlines())
        ast.parse(src, filename=f"code cell {i}")


def test_it_installs_what_collect_needs(notebook):
    import tomllib

    needed = {re.split(r"[<>=]", d)[0] for d in
              tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["collect"]}
    source = "\n".join(code_lines(notebook))
    assert all(f'"{m}"' in source for m in needed), needed
