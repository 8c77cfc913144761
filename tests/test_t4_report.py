"""The report narrating a T4 run (tests/t4_run.py): no sentence claims what a T4 cannot have run."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import t4_run
from render.site import Report

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def t4(tmp_path_factory):
    data = tmp_path_factory.mktemp("t4data")
    t4_run.write(data)
    report = Report.load(data)
    assert report.run.id == t4_run.RUN_ID
    return report


def page(report, name: str) -> str:
    return report.render_markdown((ROOT / "docs" / name).read_text(), name)


def test_home_says_unsupported_where_a_rival_cannot_run_on_a_t4(t4):
    text = page(t4, "index.md")
    table = text[text.index("<table"):text.index("</table>")]
    # FlashAttention-4, SDPA cuDNN and SDPA flash all need 8.0+: their cells say so, not "not measured"
    assert "unsupported on this GPU" in table and "not measured" not in table


def test_benchmarks_lists_only_what_ran_and_names_the_rest_unsupported(t4):
    text = page(t4, "benchmarks.md")
    measured = re.search(r"This run measured \d+ cases of ([^:]*):", text).group(1)
    assert "FlashAttention-4" not in measured and "bf16" not in measured and "in fp16, causal" in measured
    assert "On this GPU no case of FlashAttention-2 (SDPA), SDPA cuDNN and FlashAttention-4, nor any bf16 case," in text


def test_byte_arithmetic_names_only_the_dtypes_and_rivals_that_ran(t4):
    text = page(t4, "byte-arithmetic.md")
    assert "Every element is two bytes (fp16)." in text and "bf16 alike" not in text
    assert "for Triton and for FlashAttention-2 (SDPA) alike" not in text
    assert "FlashAttention-2 (SDPA) measured" not in text  # no column of n/a


def test_correctness_rounding_lines_name_only_dtypes_with_cases(t4):
    text = page(t4, "correctness.md")
    lines = re.findall(r"^- (?:Causal|Non-causal), [^:]*:", text, flags=re.M)
    assert lines and all("bf16" not in line for line in lines)


def test_iterations_does_not_claim_the_portable_version_was_measured(t4):
    text = page(t4, "iterations.md")
    assert "only that one is measured" not in text
    assert "the phase does not run at all" in text


def test_home_names_sdpas_pick_as_the_pages_do_not_by_its_backend_word(t4):
    # On a T4 PyTorch's SDPA picks its memory-efficient backend; the headline said "(efficient)".
    speed = next(line for line in page(t4, "index.md").splitlines() if line.startswith("- **Speed.**"))
    assert "(efficient)" not in speed
    assert "(SDPA mem-efficient)" in speed or "(SDPA (PyTorch's choice): SDPA mem-efficient)" in speed
