"""data/reference/: published figures in our schema, valid, marked published, and faithful to the write-up."""
from __future__ import annotations

import json
import shutil

import pytest

from collect.schema import FILE_SPECS
from collect.schema.profile import ProfileFile
from conftest import ROOT
from render.errors import DataError
from render.runs import load_references
from render.validate import load_validated

REF = ROOT / "data" / "reference"
T4 = REF / "t4-published"
SPEC_BY_FILE = {s.filename: s for s in FILE_SPECS.values()}


def reference_files():
    return sorted(p for p in REF.glob("*/*.json"))


@pytest.mark.parametrize("path", reference_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_reference_file_validates_against_its_schema(path):
    assert path.name in SPEC_BY_FILE, f"{path}: not a data file this schema knows"
    obj = load_validated(path, SPEC_BY_FILE[path.name].dataclass())
    assert obj.run_id == path.parent.name


def test_references_load_and_say_they_are_published():
    refs = load_references(ROOT / "data")
    assert [r.id for r in refs] == sorted(p.name for p in REF.iterdir() if p.is_dir())
    for r in refs:
        m = r.manifest
        assert m.origin == "published" and m.measured_ceilings == []
        assert "github.com/akashg71/gpu-attention" in m.citation and "Tesla T4" in m.citation
        assert any("not re-measured" in n for n in m.notes)


def test_a_reference_that_claims_to_be_measured_is_refused(tmp_path):
    shutil.copytree(T4, tmp_path / "reference" / "t4-published")
    path = tmp_path / "reference" / "t4-published" / "manifest.json"
    m = json.loads(path.read_text())
    m["origin"] = "measured"
    path.write_text(json.dumps(m))
    with pytest.raises(DataError, match="published figures only"):
        load_references(tmp_path)


def test_t4_device_and_datasheet():
    m = load_references(ROOT / "data")[0].manifest
    d = m.device
    assert (d.name, d.compute_capability, d.sm_count, d.max_warps_per_sm, d.smem_per_sm_bytes) == ("Tesla T4", "7.5", 40, 32, 65536)
    assert d.memory_bytes is None and d.driver_version is None  # not given: null, not guessed
    assert m.datasheet.key == "t4" and m.datasheet.bf16_tensor_flops_per_s is None


def test_bench_matches_the_published_table_and_its_assumed_shape():
    ref = load_references(ROOT / "data")[0]
    rows = {(r.impl, r.seq_len): r for r in ref.phase("bench").rows}
    assert len(rows) == 9 and rows[("triton", 2048)].latency_ms_median == 12.528
    assert rows[("naive", 8192)].peak_mem_bytes == 10_055_000_000 and rows[("sdpa", 512)].tflops == 9.61
    assert {r.backend_used for r in ref.phase("bench").rows if r.impl == "sdpa"} == {"efficient"}
    for r in rows.values():
        # The assumed B=2, H=8, d=64 must reproduce the published TFLOP/s from the published latency.
        assert r.flops / (r.latency_ms_median * 1e-3) / 1e12 == pytest.approx(r.tflops, rel=0.02)
        assert r.latency_ms_p10 is None and r.warmup_s is None
    assert any("assumed" in n for n in ref.phase("bench").notes)


def test_decode_sweep_and_int8_figures():
    ref = load_references(ROOT / "data")[0]
    rows = ref.phase("decode").rows
    sweep = [r for r in rows if r.variant == "eager" and r.step_ms_median is not None]
    assert [(r.batch, r.context) for r in sweep] == [(4, 32), (4, 128), (4, 512), (4, 1000)]
    assert [r.step_ms_median for r in sweep] == [11.765, 12.022, 12.347, 13.728]
    for r in sweep:  # published tokens/s is per sequence, 1000 / step ms; ours counts the batch
        assert r.tokens_per_s == pytest.approx(4 * 1000 / r.step_ms_median, abs=0.1)
    cache = {r.variant: r for r in rows if r.kv_cache_bytes is not None}
    assert cache["int8-dequant"].kv_cache_bytes / cache["eager"].kv_cache_bytes == pytest.approx(0.5, abs=0.002)
    assert cache["int8-dequant"].peak_mem_bytes > cache["eager"].peak_mem_bytes
    assert cache["int8-dequant"].token_match == 1.0 and cache["int8-dequant"].step_ms_median is None
    assert all(r.floor_ms is None and r.achieved_over_floor is None for r in rows)
    notes = " ".join(ref.phase("decode").notes)
    assert "inferred" in notes and "not published" in notes


def test_published_profile_figures_are_transcribed():
    prof = json.loads((T4 / "profile.json").read_text())
    assert {r["impl"]: r["dram_bytes"] for r in prof["impls"]} == {"naive": 2.098e9, "triton": 1.013e9}
    k = prof["kernels"][0]
    assert (k["registers_per_thread"], k["smem_per_block_bytes"], k["block_limit_registers"], k["block_limit_smem"],
            k["theoretical_occupancy_pct"], k["achieved_occupancy_pct"]) == (213, 16384, 2, 2, 25.0, 24.7)
    for r in prof["impls"]:  # 4·B·H·N²·d over the published bytes gives the published intensities
        assert r["flops_model"] / r["dram_bytes"] == pytest.approx({"naive": 8.19, "triton": 16.96}[r["impl"]], abs=0.01)
    load_validated(T4 / "profile.json", ProfileFile)


def test_the_profiling_page_reads_a_published_dram_total():
    # The write-up gives one DRAM figure a call (dram_bytes), not reads and writes: the Profiling page takes it as
    # published, where it had shown no bytes at all for the T4 reference.
    from render.pages.profile import ProfilePage

    ref = load_references(ROOT / "data")[0]
    page = ProfilePage(ref, [ref])
    frame = page.bytes_frame()
    assert dict(zip(frame["impl"], frame["dram"])) == {"naive": 2.098e9, "triton": 1.013e9}
    first = page.findings_first()
    assert "2.07× fewer DRAM bytes" in first and "the total its source published" in first
    assert "at least each call's output" not in first
