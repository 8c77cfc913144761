"""What limits a kernel: the rule (collect/schema/limiter.py), the counters the profile phase reads for it,
the SASS hot spots from the source page (collect/ncu_source.py), and the Profiling page's verdicts,
each flipped by synthetic counters.

tests/fixtures/ncu/limiter/ is a real export from an H200 (Nsight Compute 2025.3.1, --clock-control none):
our kernel and cuDNN at B=4 H=32 N=4096 d=128 causal, ours, SDPA's flash backend and naive PyTorch at
B=2 H=8 N=2048 d=64, with the SpeedOfLight, ComputeWorkloadAnalysis, WarpStateStats and SourceCounters
sections; source_sass.csv keeps each kernel's 100 most sampled instructions.
"""
import dataclasses
import html
import json
from pathlib import Path

import pytest

from collect import ncu_source, profile
from collect.schema import SCHEMA_VERSION
from collect.schema.limiter import BUSY_PCT, NEAR_PTS, UNIT_FIELDS, judge, near_line
from collect.schema.profile import ProfileFile
from render.errors import DataError

import test_profile_phase as tpp

FIX = Path(__file__).parent / "fixtures" / "ncu" / "limiter"
QUIET = {f: 10.0 for f in UNIT_FIELDS}
STALLS = {"selected": 5.0, "barrier": 1.0, "wait": 2.0, "long_scoreboard": 0.5}


@pytest.mark.parametrize("field, word", [
    ("pipe_tensor_pct", "tensor-pipe"), ("pipe_xu_pct", "exp-pipe"), ("pipe_fma_pct", "fma-pipe"),
    ("pipe_alu_pct", "alu-pipe"), ("pipe_lsu_pct", "lsu-pipe"), ("issue_slots_pct", "issue"),
    ("sol_dram_pct", "dram"), ("sol_l2_pct", "l2"), ("sol_l1_pct", "l1"),
])
def test_a_unit_at_its_limit_is_the_verdict(field, word):
    v = judge(dict(QUIET, **{field: BUSY_PCT}), STALLS)
    assert v.word == word and f"{BUSY_PCT:.1f}%" in v.evidence
    assert judge(dict(QUIET, **{field: BUSY_PCT - 0.1}), STALLS).word == "stall-wait"  # just below: waiting


def test_the_busiest_of_several_busy_units_wins():
    assert judge(dict(QUIET, pipe_tensor_pct=85.0, sol_dram_pct=92.0), STALLS).word == "dram"


def test_below_the_limit_the_largest_stall_share_names_the_wait_and_selected_is_not_a_stall():
    v = judge(QUIET, STALLS)
    assert v.word == "stall-wait" and "wait (57.1%" in v.evidence  # 2 of 3.5, 'selected' left out
    assert judge(QUIET, {"selected": 9.0}) is None
    assert judge({f: None for f in UNIT_FIELDS}, STALLS) is None  # no unit measured: an older run


def test_a_verdict_keeps_its_busiest_unit_and_says_how_near_the_line_it_sits():
    above = judge(dict(QUIET, pipe_tensor_pct=BUSY_PCT + 0.03), STALLS)
    below = judge(dict(QUIET, pipe_tensor_pct=BUSY_PCT - 4.3), STALLS)
    far = judge(dict(QUIET, pipe_tensor_pct=BUSY_PCT - NEAR_PTS - 0.1), STALLS)
    assert (above.word, below.word) == ("tensor-pipe", "stall-wait")  # the rule still names them apart
    assert above.busiest == below.busiest == "tensor pipe" and below.busiest_pct == BUSY_PCT - 4.3
    assert near_line(above) and near_line(below) and not near_line(far) and not near_line(None)
    # a share just above the line is printed apart from it, never as the line itself
    assert f"busy {BUSY_PCT + 0.03:.2f}% of its peak" in above.evidence


def test_the_phrase_home_and_profiling_print_carries_the_figure_and_the_nearness():
    from render.limits import verdict_phrase

    near = verdict_phrase(judge(dict(QUIET, pipe_tensor_pct=BUSY_PCT - 4.3), STALLS))
    assert near.startswith("stalls, chiefly wait") and "the tensor pipe, sits at 75.7%" in near  # wait: 57% of them
    # a stall verdict the line decides by a few points is said as a near thing
    assert (f"though only just: its busiest unit, the tensor pipe, sits at 75.7%, within {NEAR_PTS:g} points of the "
            f"{BUSY_PCT:g}% line that would make it the limit") in near
    far = verdict_phrase(judge(dict(QUIET, pipe_tensor_pct=50.0), STALLS))
    assert "only just" not in far and "its busiest unit the tensor pipe at 50.0%" in far
    above = verdict_phrase(judge(dict(QUIET, pipe_tensor_pct=BUSY_PCT + 2.0), STALLS))
    assert above == f"the tensor pipe, 82.0% busy, within {NEAR_PTS:g} points of the {BUSY_PCT:g}% line"
    busy = verdict_phrase(judge(dict(QUIET, pipe_tensor_pct=95.0), STALLS))
    assert busy == "the tensor pipe, 95.0% busy"  # clear of the line: no hedge


@pytest.mark.parametrize("stalls, lead", [
    ({"selected": 5.0, "wait": 1.01, "barrier": 0.99}, "chiefly"),           # just over half: "chiefly"
    ({"selected": 5.0, "wait": 1.0, "barrier": 1.0}, "led by"),   # half is not more than half
    ({"selected": 5.0, "wait": 3.31, "barrier": 2.64, "long_scoreboard": 2.0, "gmma": 2.05},
     "led by"),                                          # a third: the largest, not most
])
def test_a_stall_verdict_says_chiefly_only_where_its_reason_is_over_half_of_the_stalls(stalls, lead):
    from render.limits import verdict_phrase
    from render.vocab import CHIEFLY_PCT, limiter_words, verdict_words

    v = judge(QUIET, stalls)
    assert (v.stall_pct > CHIEFLY_PCT) == (lead == "chiefly")
    assert verdict_words(v).startswith(f"stalls, {lead} wait (")
    assert verdict_phrase(v).startswith(f"stalls, {lead} wait (") and "mostly" not in verdict_phrase(v)
    assert judge(dict(QUIET, pipe_tensor_pct=90.0), stalls).stall_pct is None  # a unit verdict has no stall share
    assert limiter_words("stall-wait").startswith("stalls, led by wait")  # share unknown: no claim


def _real():
    cases = [profile.ProfileCase.from_spec(c) for c in json.loads((FIX / "cases.json").read_text())["cases"]]
    results = json.loads((FIX / "result.json").read_text())["cases"]
    pf = ProfileFile(schema_version=SCHEMA_VERSION, run_id="r", status="ok")
    profile.assemble(cases, results, (FIX / "raw.csv").read_text(), (FIX / "ncu_console.txt").read_text(), pf)
    return cases, pf


def test_real_counters_give_each_kernel_its_units_step_and_verdict():
    _, pf = _real()
    k = {(r.case_id, r.launch): r for r in pf.kernels}
    ours = k[("main-b4h32n4096d128-causal-triton", 0)]
    assert ours.kernel_name == "_ws_kernel" and ours.kernel_step == "g7"
    assert ours.pipe_tensor_pct == pytest.approx(72.93) and ours.pipe_xu_pct == pytest.approx(37.91)
    assert ours.issue_slots_pct == pytest.approx(40.02) and ours.sol_dram_pct == pytest.approx(12.04)
    # no unit at 80%: the warps wait, mostly at barriers (the raw page's stall ratios, 'selected' left out)
    assert ours.limiter == "stall-barrier" and "tensor pipe, 72.9%" in ours.limiter_evidence
    d64 = k[("main-b2h8n2048d64-triton", 0)]
    assert d64.kernel_step == "g8" and d64.pipe_xu_pct > d64.pipe_tensor_pct  # the exponentials, not the MMAs
    # naive PyTorch's elementwise kernels run at the L2's limit
    assert k[("main-b2h8n2048d64-naive", 1)].limiter == "l2"
    assert all(r.limiter is not None for r in pf.kernels)


def test_real_source_page_gives_hot_spots_matched_to_the_report_kernels():
    cases, pf = _real()
    keep = lambda c: c.impl in profile.LIMITER_IMPLS  # noqa: E731
    profile.add_hotspots(pf, cases, keep, 0, (FIX / "source_sass.csv").read_text())
    assert pf.reason is None
    by = {}
    for h in pf.hotspots:
        by.setdefault(h.case_id, []).append(h)
    assert set(by) == {"main-b4h32n4096d128-causal-triton", "main-b4h32n4096d128-causal-sdpa-cudnn", "main-b2h8n2048d64-triton",
                       "main-b2h8n2048d64-sdpa-flash"}  # naive is not kept
    assert all(len(v) == profile.HOTSPOTS_PER_KERNEL and [h.rank for h in v] == list(range(len(v))) for v in by.values())
    cudnn = by["main-b4h32n4096d128-causal-sdpa-cudnn"]
    assert cudnn[0].opcode == "WARPGROUP.DEPBAR.LE" and cudnn[0].role == "mma-wait" and cudnn[0].top_reason == "barrier"
    flash = by["main-b2h8n2048d64-sdpa-flash"]
    assert any(h.role == "mma" and h.opcode.startswith("HMMA") for h in flash)
    # a source page that lists other kernels than the report is not used, and the file says why
    pf2 = dataclasses.replace(pf, hotspots=[], reason=None)
    profile.add_hotspots(pf2, cases, keep, 0, (FIX / "source_sass.csv").read_text().replace("_ws_kernel", "other"))
    assert pf2.hotspots == [] and "no block for the report's kernel 0 (_ws_kernel)" in pf2.reason


def test_opcodes_and_roles():
    assert ncu_source.opcode("@!P0 HGMMA.64x128x16.F32 R24, gdesc[UR4], R24") == "HGMMA.64x128x16.F32"
    assert ncu_source.role("MUFU.EX2") == "exp" and ncu_source.role("SYNCS.PHASECHK.TRANS64.TRYWAIT") == "async-wait"
    assert ncu_source.role("UTMALDG.2D") == "tma" and ncu_source.role("BAR.SYNC.DEFER_BLOCKING") == "barrier"
    assert ncu_source.base_name("void at::native::vectorized_elementwise_kernel<(int)8, X>(int, T2)") == \
        ncu_source.base_name("void at::vectorized_elementwise_kernel<8, X>(int, T2)") == "vectorized_elementwise_kernel"


@pytest.mark.parametrize("units, words", [
    (dict(tpp.UNITS, pipe_tensor_pct=86.0), "limited by **the tensor pipe**"),
    (dict(tpp.UNITS, pipe_xu_pct=91.0), "limited by **the exponential (XU) pipe**"),
    (dict(tpp.UNITS, sol_dram_pct=88.0), "limited by **the DRAM bandwidth**"),
    (tpp.UNITS, "limited by **stalls, chiefly long_scoreboard"),  # 3 of 4 stall units ('selected' left out)
])
def test_the_page_verdict_flips_with_the_counters(tmp_path, units, words):
    page = tpp.page_for(tmp_path, tpp.profile_file_for_page(our_units=units))
    finding = html.unescape(page.limiter_finding())
    assert words in finding
    assert words.split("**")[1] in html.unescape(page.findings_first())  # the top of the page says it too


def test_the_page_says_the_largest_share_where_the_stall_reason_is_not_over_half(tmp_path):
    from collect.schema.profile import StallRow

    pf = tpp.profile_file_for_page()
    # long_scoreboard is 3 of 4 stall units ('selected' left out), "chiefly"; a wait of 2.5 more makes it 3 of 6.5,
    # the largest share but under half
    pf.stalls += [StallRow(case_id=s.case_id, launch=s.launch, reason="wait", warps_per_issue=2.5)
                  for s in pf.stalls if s.reason == "barrier"]
    page = tpp.page_for(tmp_path, pf)
    finding, top = html.unescape(page.limiter_finding()), html.unescape(page.limiter_headline())
    table = html.unescape(page.limiter_table())
    for text in (finding, top, table):
        assert "stalls, led by long_scoreboard" in text
        assert "mostly" not in text and "chiefly" not in text


def test_a_stored_verdict_the_counters_contradict_is_refused(tmp_path):
    pf = tpp.profile_file_for_page()
    ours = next(k for k in pf.kernels if k.impl == "triton")
    ours.limiter = "tensor-pipe"  # the counters say long_scoreboard
    page = tpp.page_for(tmp_path, pf)
    with pytest.raises(DataError, match=r"limiter: value 'tensor-pipe'.*stall-long_scoreboard"):
        page.limiter_finding()


def test_a_source_page_with_extra_functions_still_matches_in_order():
    cases, pf = _real()
    text = (FIX / "source_sass.csv").read_text()
    extra = '"Kernel Name","helper_fn",\n"Address","Source","Warp Stall Sampling (All Samples)"\n"0x1","      NOP","1"\n'
    profile.add_hotspots(pf, cases, lambda c: c.impl == "triton", 0, extra + text)
    assert pf.reason is None and {h.case_id for h in pf.hotspots} == {"main-b4h32n4096d128-causal-triton",
                                                                      "main-b2h8n2048d64-triton"}


def test_every_hot_spot_role_is_declared_once_and_worded():
    from collect.schema.profile import HOTSPOT_ROLES
    from render.vocab import HOTSPOT_ROLES as WORDS

    assert {name for name, _ in ncu_source.ROLES} | {"other"} == set(HOTSPOT_ROLES) == set(WORDS)


def _peers_at_causal(ours: float, cudnn: float, flash: float):
    """The page's quick profile with the tensor pipe of ours, SDPA cuDNN and FlashAttention-2 at the d=128 causal
    shape busy as given (every other unit quiet, so the tensor pipe is each one's busiest unit)."""
    pf = tpp.profile_file_for_page()
    busy = {"triton": ours, "sdpa-cudnn": cudnn, "sdpa-flash": flash}
    for k in pf.kernels:
        if k.case_id.startswith("main-b4h32n4096d128-causal") and k.impl in busy:
            for f in UNIT_FIELDS:
                setattr(k, f, 10.0)
            k.pipe_tensor_pct, k.limiter = busy[k.impl], None  # the page judges the edited counters again
    return pf


def _causal_paragraph(page) -> str:
    return next(p for p in html.unescape(page.limiter_finding()).split("\n\n") if ", causal, our kernel" in p)


def test_near_the_line_is_said_of_the_peers_it_holds_for_and_not_of_their_whole_list(tmp_path):
    # ours and cuDNN within 5 points of the line, FlashAttention-2 far below it: all three wait on the same stall
    t = _causal_paragraph(tpp.page_for(tmp_path / "a", _peers_at_causal(BUSY_PCT - 2, BUSY_PCT - 3, 50.0)))
    assert "SDPA cuDNN and FlashAttention-2 (SDPA) are limited the same way, of them only SDPA cuDNN near the line too." in t
    assert "(near the line too)" not in t  # a mark beside one name of a list reads as the list's
    # both near: said of the pair as one; FlashAttention-2 over the line has another verdict, its group of one
    both = _causal_paragraph(tpp.page_for(tmp_path / "b", _peers_at_causal(BUSY_PCT - 2, BUSY_PCT - 3, BUSY_PCT - 1)))
    assert "are limited the same way, both near the line too." in both
    over = _causal_paragraph(tpp.page_for(tmp_path / "c", _peers_at_causal(BUSY_PCT - 2, 50.0, BUSY_PCT + 2)))
    assert "FlashAttention-2 (SDPA) by the tensor pipe, near the line too." in over
    # ours far from the line: a peer near it is not near it "too", and the line is named
    far = _causal_paragraph(tpp.page_for(tmp_path / "d", _peers_at_causal(50.0, BUSY_PCT - 3, 40.0)))
    assert f"of them only SDPA cuDNN within {NEAR_PTS:g} points of the {BUSY_PCT:g}% line." in far
    assert "too" not in far


def test_a_unit_that_is_also_the_calls_lowest_roof_has_both_its_shares_named(tmp_path):
    from render import fmt

    # ours busiest on DRAM (60% of Nsight Compute's peak), and the synthetic calls are bound by the DRAM roof
    page = tpp.page_for(tmp_path / "a", tpp.profile_file_for_page(
        our_units=dict(tpp.UNITS, pipe_tensor_pct=30.0, sol_dram_pct=60.0, sol_l2_pct=20.0, sol_l1_pct=20.0)))
    shape = page.headline
    level, share = page.binding_roofs(shape)["triton"]
    roof = page.roofs(shape)["dram"]
    assert level == "DRAM bandwidth" and roof.source == "measured"
    t = html.unescape(page.limiter_finding()).split("\n\n")[0]
    assert ("The 60.0% is a share of the peak Nsight Compute rates the DRAM bandwidth at; the roofline of this shape, "
            f"below, holds the same call to the DRAM bandwidth this run measured ({roof.text()}), its lowest roof, and "
            f"puts it at {fmt.pct(100 * share)} of that roof") in t
    # busiest on the tensor pipe while the DRAM roof binds: two different units, nothing to tell apart
    other = tpp.page_for(tmp_path / "b", tpp.profile_file_for_page())
    assert other.binding_roofs(other.headline)["triton"][0] == "DRAM bandwidth"
    assert "is a share of the peak" not in html.unescape(other.limiter_finding())


def test_the_limit_rule_at_the_top_says_its_peak_is_not_a_roof_where_the_roofs_are_named(tmp_path):
    page = tpp.page_for(tmp_path, tpp.profile_file_for_page())
    apart = "of its peak or more (the peak Nsight Compute rates the unit at, not a roof of the roofline above)"
    first = html.unescape(page.findings_first())
    assert "the lowest roof over each call is" in first and apart in first
    page.__dict__["_roof_caps_by_shape"] = {s: {} for s in page.shapes()}  # no roof over any call: none named above
    assert "roofline" not in html.unescape(page.limiter_headline())
