"""The Decode page over synthetic runs: its words follow the data, and odd data never breaks it."""
from __future__ import annotations

import dataclasses

import pytest

from collect.jsonio import write_json_atomic
from collect.schema import SCHEMA_VERSION
from collect.schema.decode import DecodeFile, DecodeModel, DecodeRow, LogitCheck, MicroRow
from render.pages.decode import DecodePage, floor_words
from render.runs import load_run
from render.site import REPO_ROOT, Report
from synthetic import make_run

MiB = 2**20
BW = 4.0e12


def _model(name, layers, heads, width, wbytes):
    return DecodeModel(name=name, weights="random-init", seed=0, n_layer=layers, n_head=heads, n_embd=width,
                       head_dim=width // heads, vocab_size=50257, n_positions=1024, parameters=wbytes // 2,
                       weight_bytes_per_step=wbytes, dtype="bfloat16", hf_attn_implementation="sdpa", init_s=1.0)


STEP = {"hf": 40.0, "eager": 4.0, "graph": 0.15, "int8-dequant": 8.0, "int8-kernel": 4.5}


def _row(model, variant, batch, context, wbytes, peak_extra=None, match=1.0):
    n_new = min(65, 1024 - context)
    int8 = variant.startswith("int8")
    per_token = 2 * 12 * batch * 12 * (68 if int8 else 128)
    kv = per_token * (context + n_new / 2)
    cache = per_token * (context + n_new - 1)
    floor = (wbytes + kv) / BW * 1e3
    step = STEP[variant] * (1 + context / 4000) * (4 if model == "gpt2-xl" else 1)
    start = wbytes + cache + 40 * MiB
    extra = {"int8-dequant": 2 * cache, "hf": cache}.get(variant, 2 * MiB) if peak_extra is None else peak_extra
    ref = variant == "eager"
    return DecodeRow(model=model, variant=variant, batch=batch, context=context, new_tokens=n_new, status="ok",
                     steps_timed=n_new - 1, step_ms_median=step, step_ms_p10=step * 0.95, step_ms_p90=step * 1.1,
                     tokens_per_s=batch / step * 1e3, peak_mem_bytes=int(start + extra), mem_at_start_bytes=int(start),
                     kv_cache_bytes=int(cache), weight_bytes_per_step=wbytes, kv_bytes_per_step=kv,
                     bytes_per_step=wbytes + kv, floor_ms=floor, achieved_over_floor=step / floor,
                     token_match=None if ref else match, tokens_compared=None if ref else batch * n_new,
                     first_mismatch_step=None, distinct_tokens=30, max_abs_logit_diff=None if ref else 0.03,
                     logit_scale=2.7, wall_s=0.5)


def decode_file(run_id, int8_peak_extra=None, int8_match=1.0, micro_fraction=0.9, graph_scale=1.0) -> DecodeFile:
    w2, wxl = 250_000_000, 3_100_000_000
    rows = []
    for model, w, shapes in (("gpt2", w2, [(4, 128), (4, 1000), (1, 512), (16, 512), (4, 512)]),
                             ("gpt2-xl", wxl, [(4, 128), (4, 1000)])):
        for b, c in shapes:
            for v in ("eager", "hf", "graph", "int8-dequant", "int8-kernel"):
                r = _row(model, v, b, c, w, peak_extra=int8_peak_extra if v == "int8-kernel" else None,
                         match=int8_match if v == "int8-kernel" else 0.95)
                if v == "graph":
                    r.step_ms_median *= graph_scale
                    r.achieved_over_floor *= graph_scale
                rows.append(r)
    rows.append(DecodeRow(model="gpt2", variant="hf", batch=64, context=512, new_tokens=65, status="oom",
                          reason="OutOfMemoryError: <script>alert(1)</script>"))
    micro = [MicroRow(impl=i, batch=b, heads=32, head_dim=128, context=c, status="ok", latency_ms_median=0.1,
                      latency_ms_p10=0.09, latency_ms_p90=0.11, bytes_read=2 * b * 32 * c * 128 * (1 if "int8" in i else 2),
                      achieved_bytes_per_s=micro_fraction * BW, bandwidth_fraction=micro_fraction,
                      num_splits=4 if "triton" in i else None, kernel_config="BLOCK_N=64" if "triton" in i else None,
                      max_abs_diff_vs_sdpa=1e-3)
             for i in ("triton-bf16", "triton-int8", "sdpa") for b in (1, 4) for c in (1024, 8192, 65536)]
    checks = [LogitCheck(model="gpt2", cache="bf16", reference="transformers", sequence="random", batch=2,
                         prompt_len=128, positions=32, status="ok", max_abs_diff=0.03, logit_scale=2.7,
                         top1_agreement=0.97, median_top2_margin=0.1, max_margin_at_disagreement=0.01),
              LogitCheck(model="gpt2", cache="int8", reference="eager", sequence="greedy", batch=4, prompt_len=512,
                         positions=65, status="ok", max_abs_diff=0.04, logit_scale=2.7, top1_agreement=0.99,
                         median_top2_margin=0.1, max_margin_at_disagreement=0.02)]
    return DecodeFile(schema_version=SCHEMA_VERSION, run_id=run_id, prompt="random token ids",
                      floor_bandwidth_bytes_per_s=BW, floor_bandwidth_source="env copy_bandwidth", warmup_steps=2,
                      models=[_model("gpt2", 12, 12, 768, w2), _model("gpt2-xl", 48, 25, 1600, wxl)], rows=rows,
                      checks=checks, micro=micro, notes=["Weights: random."])


def page(tmp_path, name="synthetic-20261129", **kw) -> DecodePage:
    run_dir = make_run(tmp_path, name)
    write_json_atomic(run_dir / "decode.json", decode_file(name, **kw))
    run = load_run(run_dir)
    return DecodePage(run, [run])


def all_output(p: DecodePage) -> str:
    parts = [p.summary(), p.models_table(), p.targets_table(), p.overhead_finding(), p.size_finding(),
             p.latency_figure(), p.floor_figure(), p.throughput_figure(), p.memory_finding(), p.memory_summary(),
             p.memory_figure(), p.accuracy_finding(), p.checks_finding(), p.micro_finding(), p.micro_figure(),
             p.micro_table(), p.failures_table()] + [p.rows_table(m) for m in p.models()]
    return "\n".join(parts)


def test_every_section_renders_and_escapes_tool_strings(tmp_path):
    text = all_output(page(tmp_path))
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert text.count('<figure class="report-figure"') == 5


def test_memory_words_follow_the_data(tmp_path):
    good = page(tmp_path / "a")
    mem = good.memory_finding()
    assert "dequantizing every step" in mem and "more than bf16" in mem.split("the int8 kernel")[0]
    assert "less than bf16" in mem.split("the int8 kernel")[1]
    assert "below at 7 of 7 shapes</td><td>met</td>" in good.targets_table()
    # an int8 kernel whose step allocates a whole extra cache no longer beats bf16
    bad = page(tmp_path / "b", int8_peak_extra=400 * MiB)
    assert "more than bf16" in bad.memory_finding().split("the int8 kernel")[1]
    assert "below at 0 of" in bad.targets_table()


def test_targets_report_met_and_not_met(tmp_path):
    met = page(tmp_path / "a").targets_table()
    missed = page(tmp_path / "b", int8_match=0.5, micro_fraction=0.5, graph_scale=20.0).targets_table()
    assert met.count("<td>met</td>") == 5 and "not met" not in met
    assert missed.count("<td>not met</td>") == 4  # token match, floor, two microbenchmark targets


def test_floor_words_pick_the_bound():
    assert "moving bytes sets the pace" in floor_words(1.2)
    assert "not all of it" in floor_words(2.5)
    assert "not bandwidth" in floor_words(9.0)


def test_int8_agreement_is_read_against_the_transformers_loop(tmp_path):
    assert "at least as often" in page(tmp_path / "a", int8_match=0.99).accuracy_finding()
    assert "less often" in page(tmp_path / "b", int8_match=0.5).accuracy_finding()


def test_a_run_without_decode_shows_the_missing_note(tmp_path):
    run = load_run(make_run(tmp_path))
    p = DecodePage(run, [run])
    assert not p.available and "Not collected" in p.missing()


def test_rows_with_no_memory_statistics_do_not_break_the_page(tmp_path):
    run_dir = make_run(tmp_path)
    f = decode_file("synthetic-20261129")
    f.rows = [dataclasses.replace(r, peak_mem_bytes=None, mem_at_start_bytes=None) for r in f.rows]
    f.floor_bandwidth_bytes_per_s = None
    f.micro = []
    write_json_atomic(run_dir / "decode.json", f)
    run = load_run(run_dir)
    text = all_output(DecodePage(run, [run]))
    assert "No peak-memory statistics" in text and "no measurement against a copy bandwidth" in text


@pytest.mark.parametrize("name", ["decode.md"])
def test_the_markdown_template_renders(tmp_path, name):
    make_run(tmp_path)
    write_json_atomic(tmp_path / "runs" / "synthetic-20261129" / "decode.json", decode_file("synthetic-20261129"))
    report = Report.load(tmp_path)
    out = report.render_markdown((REPO_ROOT / "docs" / name).read_text(), name)
    assert "## Peak memory" in out and "Not collected" not in out and "{{" not in out
