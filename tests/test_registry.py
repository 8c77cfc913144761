"""Consistency by construction: one registry of phases behind everything that lists them, pages that never
import each other, render/ reaching collect/ only through the data contract, and one number per fact."""
from __future__ import annotations

import ast
import html
import re
from pathlib import Path

import yaml

from collect import phases, runner
from collect.schema import FILE_SPECS, PHASES, SCHEMA_VERSION, site_pages
from collect.schema.bench import BenchFile, BenchRow
from conftest import ROOT
from render.pages import PAGE_CLASSES
from render.site import Report


def imports(path: Path) -> list[tuple[int, str | None, list[str]]]:
    """(level, module, names) of every import in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(0, a.name, []) for a in node.names]
    return out


def test_collect_order_schema_files_and_pages_come_from_the_registry():
    assert phases.PHASE_ORDER == [p.name for p in PHASES] == ["env", "correctness", "bench", "iterations", "profile",
                                                              "decode"]
    assert list(FILE_SPECS) == phases.PHASE_ORDER
    assert [p.doc for p in FILE_SPECS["bench"].pages] == ["byte-arithmetic.md", "benchmarks.md"]
    for spec in PHASES:
        assert spec.rows_field in spec.schema.__dataclass_fields__, spec.name
        for page in spec.pages:
            assert (ROOT / "docs" / page.doc).exists() and page.context in PAGE_CLASSES
    assert {p.context for p in site_pages()} == set(PAGE_CLASSES)


def test_the_nav_is_the_registry_in_order():
    from render import mkdocs_hook

    # mkdocs.yml keeps no list of pages to drift: the hook hands MkDocs the registry's
    cfg = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    assert "nav" not in cfg
    config = mkdocs_hook.on_config({"extra": {}})
    nav = [(title, doc) for item in config["nav"] for title, doc in item.items()]
    assert nav == [(p.title, p.doc) for p in site_pages()]
    assert list(PAGE_CLASSES) == [p.context for p in site_pages()]


def test_every_phase_has_one_collector_loaded_without_import_strings(monkeypatch):
    import types
    assert list(phases.COLLECTORS) == phases.PHASE_ORDER  # in registry order, none missing or extra
    fake = types.SimpleNamespace(run=lambda ctx: None)
    monkeypatch.setitem(phases.COLLECTORS, "bench", lambda: fake)
    assert phases.phase_module("bench") is fake
    for path in [ROOT / "collect" / "phases.py", *sorted((ROOT / "collect" / "schema").glob("*.py")),
                 ROOT / "render" / "pages" / "__init__.py"]:
        assert "importlib" not in path.read_text(), path
    # the registry, which render/ imports, names no collector module
    registry = (ROOT / "collect" / "schema" / "registry.py").read_text()
    assert not re.search(r"from \.\. import|import collect\.", registry)


def test_row_counts_are_the_table_not_the_notes():
    rows = [BenchRow(impl="naive", backend_requested=None, backend_used=None, dtype="float16", causal=False, batch=1,
                     heads=1, seq_len=8, head_dim=8, status="ok")] * 2
    f = BenchFile(schema_version=SCHEMA_VERSION, run_id="r", profile="quick", timing_method="t",
                  backend_choice_method="b", min_timed_runs=50, rows=rows, notes=["a note"])
    assert runner._row_count("bench", f) == 2 == FILE_SPECS["bench"].row_count(f)


def test_pages_do_not_import_each_other():
    pages = ROOT / "render" / "pages"
    for path in sorted(pages.rglob("*.py")):
        if path == pages / "__init__.py":
            continue
        # A page is a module here or a package of section modules, which may import each other; above its own
        # package, a module reaches render/pages only for base.
        up = 1 if path.parent == pages else 2
        siblings = [m or ", ".join(names) for level, m, names in imports(path) if level == up and m not in ("base",)]
        assert siblings == [], (f"{path.relative_to(pages)} imports page modules {siblings}; shared words live in "
                                "render/vocab.py")


# Besides the contract, render/ may use the comparison of runs, which the CLI runs too (one verdict, not two), and
# the pace rule that comparison and every page judge host-bound calls by; they import no GPU stack (checked below).
SHARED_WITH_RENDER = ("collect.schema", "collect.diff", "collect.noise", "collect.pace")


def test_render_reaches_collect_only_through_the_data_contract():
    for path in sorted((ROOT / "render").rglob("*.py")):
        for level, module, _ in imports(path):
            if level == 0 and module and module.split(".")[0] == "collect":
                assert module.startswith(SHARED_WITH_RENDER), f"{path.relative_to(ROOT)} imports {module}"
            assert not (level == 0 and module and module.split(".")[0] in ("torch", "triton")), path


def test_home_and_compare_list_every_phase():
    report = Report.load()
    out = report.render_markdown((ROOT / "docs" / "index.md").read_text(), "index.md")
    for spec in PHASES:
        assert f"| `{spec.name}` |" in out, spec.name
    summary = report.context()["compare"].summary_table()
    row = next(r for r in summary.split("<tr>") if report.run.id in r)
    collected = [p.name for p in PHASES if report.run.has(p.name)]
    assert ", ".join(collected) in row


# ---- one number per fact, across the built site --------------------------------------------------

def page_text(site: Path, rel: str) -> str:
    t = (site / rel).read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", t))


def one(pattern: str, text: str) -> str:
    found = set(re.findall(pattern, text))
    assert len(found) == 1, (pattern, found)
    return found.pop()


def test_a_figure_quoted_on_two_pages_is_the_same_number(built_site):
    hw = page_text(built_site, "hardware/index.html")
    ba = page_text(built_site, "byte-arithmetic/index.html")
    prof = page_text(built_site, "profiling/index.html")
    bench = page_text(built_site, "benchmarks/index.html")
    repro = (built_site / "reproduce/index.html").read_text(encoding="utf-8")
    home = page_text(built_site, "index.html")
    # DRAM copy bandwidth
    copy = one(r"A large device-to-device copy sustained ([\d.,]+ TB/s)", hw)
    assert one(r"measured copy bandwidth of ([\d.,]+ TB/s)", ba) == copy
    # the measured fp16 ridge point
    ridge = one(r"needs at least ([\d.,]+) FLOP per byte", hw)
    assert one(r"measured fp16 ridge point at ([\d.,]+) FLOP/byte", ba) == ridge
    assert one(r"measured DRAM ridge point is ([\d.,]+) FLOP per byte", prof) == ridge
    # the number of bench rows
    cases = one(r"This run measured (\d+) cases", bench)
    assert one(r"<td>bench</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td><td>(\d+)</td>", repro) == cases
    # DRAM bytes of one call, naive and ours, on Home and Profiling
    naive, ours = re.search(r"one call of naive PyTorch moved ([\d.,]+ \w+) through DRAM and our fused Triton "
                            r"kernel ([\d.,]+ \w+)", home).groups()
    assert re.search(rf"\({re.escape(ours)} against {re.escape(naive)}[,)]", prof)
    # Home's speed headline against the Benchmarks speedup table
    ratio, n = re.search(r"our Triton kernel is ([\d.,]+× (?:faster|slower)) than naive PyTorch at N=(\d+)", home).groups()
    row = re.search(rf"<tr><td>fp16, non-causal</td><td>{n}</td>.*?</tr>",
                    (built_site / "benchmarks/index.html").read_text(encoding="utf-8")).group(0)
    assert f"<td>{ratio}</td>" in row


def test_the_comparison_of_runs_needs_no_gpu_stack_and_no_report_stack():
    import subprocess
    import sys

    code = ("import sys, collect.diff, collect.noise, collect.pace, collect.tools_cli; "
            "print([m for m in ('torch', 'triton', 'pandas', 'pydantic', 'plotly') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
