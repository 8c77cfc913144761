"""The Benchmarks page's power section (render/pages/bench/power.py): its words follow the rows, whichever way they
fall, and a run without the power case has no section."""
from __future__ import annotations

import dataclasses
import html
import json

import synthetic_report as S
from render.pages.bench import BenchPage
from render.runs import load_run


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


def test_a_run_without_the_power_case_says_why_under_its_heading(tmp_path):
    # The section stays (the glossary links to it) and says why it is empty: the phase's own note where it wrote one.
    run = S.make(tmp_path, bench=S.bench_rows())
    page = BenchPage(run, [run])
    assert not page.power_rows() and page.power_finding() == "" and page.power_table() == "" and \
        page.power_figure() == ""
    assert "did not run the power case" in page.power_absent()
    path = next(run.path.glob("bench.json*"))
    data = json.loads(path.read_text())
    data["notes"] = ["Power at the limit: not measured, this GPU has no energy counter."]
    path.write_text(json.dumps(data))
    page = BenchPage(load_run(run.path), [])
    assert page.power_absent() == ("This run has no power measurement. Power at the limit: not measured, this GPU "
                                   "has no energy counter.")


def test_without_a_clock_the_energy_is_not_split(tmp_path):
    rows = _with_power(S.bench_rows(), {"triton": (696.0, 27.4, 1445.0), "sdpa-flash": (695.0, 27.07, 1395.0)})
    rows = [dataclasses.replace(r, power_sm_clock_mhz=None) if r.board_power_w else r for r in rows]
    run = S.make(tmp_path, bench=rows)
    words = _text(BenchPage(run, [run]).power_finding())
    assert "ours spent 1.4% more energy per call" in words and "so the energy is not split" in words
    assert "cycles per call" not in words and "nan" not in words.lower() and "lowered the SM clock" not in words
    figure = BenchPage(run, [run]).power_figure()
    assert '"name":"energy per call"' in figure and '"name":"energy per cycle"' not in figure


def _apart_clocks(rows):
    """Ours read at 1,770 MHz and FlashAttention-2 at 1,651 MHz before their rested calls, ours 0.981x as quick."""
    clock = {"triton": 1770.0, "sdpa-flash": 1651.0}
    return [dataclasses.replace(r, sm_clock_mhz=clock.get(r.impl, 1960.0), sm_clock_min_mhz=clock.get(r.impl, 1960.0) - 10,
                                sm_clock_max_mhz=clock.get(r.impl, 1960.0) + 10) for r in rows]


def test_the_power_phases_cycle_ratio_is_cited_from_the_clock_read_during_the_calls(tmp_path):
    from render import fmt

    readings = {"triton": (696.0, 27.4, 1445.0), "sdpa-flash": (695.0, 27.07, 1395.0)}
    rows = _apart_clocks(_with_power(S.bench_rows(triton_ms=0.004 / 0.981), readings))
    run = S.make(tmp_path / "a", bench=rows)
    said = _text(BenchPage(run, [run])._clock_gap_sentence())
    assert "equal clocks" not in said and "inverse-clock" not in said and "rested calls' readings" not in said
    looped = (27.4 * 1445.0) / (27.07 * 1395.0)
    assert ("The power phase ran one of these cases back to back, fp16, non-causal, B=2, H=8, d=64, N=4096, where "
            f"nvidia-smi read the clock during the calls: there ours needed {fmt.ratio(looped)} FlashAttention-2 "
            "(SDPA)'s cycles per call (time times that clock).") in said
    # no power case among the comparisons: no cycle ratio
    plain = S.make(tmp_path / "b", bench=_apart_clocks(S.bench_rows(triton_ms=0.004 / 0.981)))
    assert "power phase" not in _text(BenchPage(plain, [plain])._clock_gap_sentence())


def test_the_loop_above_device_time_cites_the_back_to_back_clock_of_its_masking_twin(tmp_path):
    from render import fmt

    # every loop 10% over its device time from N=2048, FlashAttention-2's causal call at N=4096 30% over; the power
    # phase ran FlashAttention-2's non-causal call at N=4096 back to back, at 1,395 MHz
    rows = S.bench_rows(causal=(False, True), loop_factor=lambda impl, n: 3.0 if n <= 1024 else 1.1)
    out = []
    for r in rows:
        if r.impl == "sdpa-flash" and r.seq_len == 4096:
            if r.causal:
                loop = 1.3 * r.latency_ms_median
                r = dataclasses.replace(r, loop_ms_median=loop, loop_ms_p10=0.98 * loop, loop_ms_p90=1.02 * loop)
            else:
                r = dataclasses.replace(r, board_power_w=695.0, power_limit_w=700.0, power_sm_clock_mhz=1395.0,
                                        power_loop_ms=1.15 * r.latency_ms_median,
                                        energy_mj_per_call=695.0 * 1.15 * r.latency_ms_median)
        out.append(r)
    run = S.make(tmp_path, bench=out)
    words = _text(BenchPage(run, [run]).small_n_finding())
    assert "a loop of calls runs up to 30% above the device time (FlashAttention-2 (SDPA) at N=4096, fp16, causal" in words
    assert (f"The power phase ran its non-causal twin (fp16, same shape and N) back to back: there FlashAttention-2 "
            f"(SDPA)'s SM clock averaged 1,395 MHz against 1,960 MHz read for its rested calls, and a call took "
            f"{fmt.ratio(1.15)} its rested device time.") in words
    # without the power case, the loop's clock stays unknown and nothing is cited
    bare = S.make(tmp_path / "b", bench=S.bench_rows(causal=(False, True), loop_factor=lambda impl, n: 1.1))
    assert "power phase" not in _text(BenchPage(bare, [bare]).small_n_finding())
