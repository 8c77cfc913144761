"""The Benchmarks page's power section (render/pages/bench/power.py): its words follow the rows, whichever way they
fall, and a run without the power case has no section."""
from __future__ import annotations

import dataclasses
import html

import synthetic_report as S
from render.pages.bench import BenchPage


def _with_power(rows, readings, limit=700.0):
    """rows, with impl -> (board W, back-to-back ms, NVML clock MHz) filled in at the longest N."""
    n = max(r.seq_len for r in rows)
    out = []
    for r in rows:
        if r.seq_len == n and r.impl in readings:
            w, ms, mhz = readings[r.impl]
            r = dataclasses.replace(r, board_power_w=w, power_limit_w=limit, power_sm_clock_mhz=mhz, power_loop_ms=ms,
                                    energy_mj_per_call=w * ms)
        out.append(r)
    return out


def _page(tmp_path, readings, **kw):
    run = S.make(tmp_path, bench=_with_power(S.bench_rows(), readings, **kw))
    return BenchPage(run, [run])


def _text(s):
    return html.unescape(s)


def test_at_the_limit_the_energy_is_split_into_cycles_and_energy_per_cycle(tmp_path):
    # ours: 27.4 ms at 1445 MHz (39.59 Mcycles), 696 W; FlashAttention-2 quicker: 27.07 ms at 1395 MHz (37.76 Mcycles)
    page = _page(tmp_path, {"triton": (696.0, 27.4, 1445.0), "sdpa-flash": (695.0, 27.07, 1395.0)})
    assert page.power_rows()
    words = _text(page.power_finding())
    assert "every implementation measured here held the board at its power limit (695 to 696 W of 700 W)" in words
    assert "the driver lowered the SM clock to 1,395 to 1,445 MHz" in words
    assert "Against FlashAttention-2 (SDPA), the quickest other implementation back to back" in words
    assert "ours spent 1.4% more energy per call (19,070 mJ against 18,814 mJ)" in words
    assert "It needed 4.8% more cycles per call and spent 3.3% less energy per cycle." in words
    # the clock a sentence of its own: with the split before it, five measured figures were one sentence
    assert "So the driver held ours at a 3.6% higher clock (1,445 MHz against 1,395 MHz)." in words
    assert "Its speed ratio is 0.988× back to back at the limit" in words
    table = _text(page.power_table())
    assert "696 W of 700 W" in table and "1,445 MHz (1,960 MHz)" in table and "1.00×" in table and "0.987×" in table
    figure = page.power_figure()
    assert "power-limit" in figure and "energy per cycle" in figure and "cycles per call" in figure


def test_the_words_turn_when_ours_is_the_leaner_and_below_the_limit(tmp_path):
    page = _page(tmp_path, {"triton": (500.0, 20.0, 1900.0), "sdpa-flash": (510.0, 20.5, 1900.0)})
    words = _text(page.power_finding())
    assert "none of FlashAttention-2 (SDPA) and Triton (ours) reached the board's power limit" in words or \
        "none of Triton (ours) and FlashAttention-2 (SDPA) reached the board's power limit" in words
    assert "the clock, not the power, sets their pace" in words
    assert "ours spent 4.4% less energy per call" in words and "2.4% fewer cycles per call" in words
    assert "Its speed ratio is 1.02× back to back and" in words  # not "at the limit": neither was
    assert "The driver held both at about the same clock" in words


def test_a_run_without_the_power_case_has_no_section(tmp_path):
    run = S.make(tmp_path, bench=S.bench_rows())
    page = BenchPage(run, [run])
    assert not page.power_rows() and page.power_finding() == "" and page.power_table() == "" and \
        page.power_figure() == ""


def test_without_a_clock_the_energy_is_not_split(tmp_path):
    rows = _with_power(S.bench_rows(), {"triton": (696.0, 27.4, 1445.0), "sdpa-flash": (695.0, 27.07, 1395.0)})
    rows = [dataclasses.replace(r, power_sm_clock_mhz=None) if r.board_power_w else r for r in rows]
    run = S.make(tmp_path, bench=rows)
    words = _text(BenchPage(run, [run]).power_finding())
    assert "ours spent 1.4% more energy per call" in words and "so the energy is not split" in words
    assert "cycles per call" not in words and "nan" not in words.lower() and "lowered the SM clock" not in words
    figure = BenchPage(run, [run]).power_figure()
    assert '"name":"energy per call"' in figure and '"name":"energy per cycle"' not in figure
