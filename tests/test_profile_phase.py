"""The profile phase without a GPU: ncu's CSV and console parsed, kernels attributed and summed,
every failure mode turned into a recorded reason, the occupancy model, and the page's escaping.

tests/fixtures/ncu/ holds a small real export recorded on an H200 by scripts/gpu_profile_fixture.sh.
"""
import csv
import io
import html
import json
import re
import stat
import sys
from pathlib import Path

import pytest

import synthetic
from collect import ncu_parse, profile
from collect.schema import occupancy
from collect.jsonio import write_json_atomic
from collect.ncu_parse import NcuFailure
from collect.schema.occupancy import SmLimits
from collect.schema import SCHEMA_VERSION
from collect.schema.profile import ProfileFile
from collect import ncu_source
from collect.schema import limiter
from render import escape
from render.runs import load_run
from render.site import Report

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
TINY_CASES = profile.main_cases(quick=True, tiny=True)
NAIVE, SDPA, TRITON = (c.id for c in TINY_CASES)
EVIL = "void at::native::softmax<c10::Half, float, <script>alert(1)</script>>(c10::Half*, int)"

H200 = SmLimits(regs_per_sm=65536, regs_per_block=65536, smem_per_sm_bytes=233472, smem_per_block_optin_bytes=232448,
                smem_reserved_per_block_bytes=1024, max_warps_per_sm=64, max_blocks_per_sm=32)
T4 = SmLimits(regs_per_sm=65536, regs_per_block=65536, smem_per_sm_bytes=65536, smem_per_block_optin_bytes=65536,
              smem_reserved_per_block_bytes=0, max_warps_per_sm=32, max_blocks_per_sm=16)


# --- a synthetic raw-page CSV in ncu's layout --------------------------------------------------

NVTX_COL = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def raw_csv(kernels, preamble="==PROF== Connected to process 123 (python3)\n"):
    """kernels: list of (case_id, name, {metric: value}); values printed with thousands separators."""
    metrics = sorted({m for _, _, ms in kernels for m in ms})
    header = ["ID", "Process ID", "Kernel Name", "Block Size", "Grid Size", NVTX_COL, *metrics]
    units = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "Kbyte"}
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    w.writerow(["", "", "", "", "", "", *[units.get(m, "") for m in metrics]])
    for i, (case_id, name, ms) in enumerate(kernels):
        def cell(m):
            v = ms.get(m)
            return "n/a" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))
        w.writerow([str(i), "123", name, "(128, 1, 1)", "(16, 2, 1)", f"<default domain>:case={case_id}:none:none",
                    *[cell(m) for m in metrics]])
    return preamble + out.getvalue()


def kmetrics(t_ns=1000, dram_kb=100, tensor=0, regs=32, **extra):
    m = {"gpu__time_duration.sum": t_ns, "dram__bytes_read.sum": dram_kb, "dram__bytes_write.sum": 50_000,
         "lts__t_bytes.sum": 400_000, "l1tex__t_bytes.sum": 800_000, "launch__registers_per_thread": regs,
         "launch__block_size": 128, "launch__grid_size": 32, "launch__occupancy_limit_registers": 16,
         "launch__occupancy_limit_shared_mem": 32, "launch__occupancy_limit_warps": 16,
         "launch__occupancy_limit_blocks": 32, "launch__shared_mem_per_block_static": 0,
         "launch__shared_mem_per_block_dynamic": 16384, "sm__warps_active.avg.pct_of_peak_sustained_active": 40.5,
         "sm__maximum_warps_per_active_cycle_pct": 100, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1_000,
         "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 10, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 0,
         "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 0, "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum": 0,
         "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 5,
         "sm__inst_executed_pipe_tensor_op_hmma.sum": tensor,
         "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32_sparsity_off.sum": tensor * 4096,
         "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 3.0,
         "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 1.0,
         "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 1.0}
    m.update(extra)
    return m


SYNTH = [
    (NAIVE, "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_tn", kmetrics(t_ns=2000, tensor=100)),
    (NAIVE, EVIL, kmetrics(t_ns=3000)),
    (NAIVE, "void at::native::unrolled_elementwise_kernel<direct_copy>()", kmetrics(t_ns=500)),
    (SDPA, "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>()", kmetrics(t_ns=900, tensor=50)),
    (TRITON, "_attn_fwd", kmetrics(t_ns=1500, tensor=60, regs=213)),
]
RESULTS = [{"id": NAIVE, "status": "ok", "reason": None, "config": None},
           {"id": SDPA, "status": "ok", "reason": None, "config": None},
           {"id": TRITON, "status": "ok", "reason": None,
            "config": {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "maxnreg": None}}]
CONSOLE = "\n".join(f'==PROF== Profiling "{n}" - {i}: 0%....50%....100% - 12 passes' for i, (_, n, _) in enumerate(SYNTH))


def new_file():
    return ProfileFile(schema_version=SCHEMA_VERSION, run_id="r", status="ok")


# --- parsing -----------------------------------------------------------------------------------


def test_numbers_units_and_thousands_separators():
    assert ncu_parse.parse_number("1,234,567") == 1234567.0
    assert ncu_parse.parse_number(" 12.5 ") == 12.5
    assert ncu_parse.parse_number("n/a") is None and ncu_parse.parse_number("") is None
    assert ncu_parse.to_base(1.5, "Kbyte") == 1500
    assert ncu_parse.to_base(2.0, "usecond") == pytest.approx(2e-6)
    assert ncu_parse.to_base(1.98, "Ghz") == pytest.approx(1.98e9)
    assert ncu_parse.to_base(3.0, "cycle/nsecond") == pytest.approx(3e9)
    assert ncu_parse.to_base(16.0, "Kbyte/block") == 16000
    assert ncu_parse.to_base(7.0, "register/thread") == 7.0 and ncu_parse.to_base(50.0, "%") == 50.0
    assert ncu_parse.block_dims("(128, 2, 1)") == 256


def test_raw_csv_attributes_kernels_to_cases_and_converts_units():
    recs = ncu_parse.parse_raw_csv(raw_csv(SYNTH))
    assert [r.case_id for r in recs] == [NAIVE, NAIVE, NAIVE, SDPA, TRITON]
    assert recs[1].name == EVIL  # kept verbatim; escaping is the page's job
    assert recs[0].metrics["gpu__time_duration.sum"] == pytest.approx(2000e-9)  # nsecond -> s
    assert recs[0].metrics["dram__bytes_read.sum"] == 100_000  # Kbyte -> byte
    assert recs[0].metrics["dram__bytes_write.sum"] == 50_000  # "50,000" with a separator
    assert ncu_parse.stall_reasons(recs[0]) == {"long_scoreboard": 3.0, "selected": 1.0, "barrier": 1.0}


def test_csv_without_a_header_is_a_clear_failure():
    with pytest.raises(NcuFailure, match="no CSV header"):
        ncu_parse.parse_raw_csv("==PROF== Disconnected from process 1\n")


def test_passes_and_query_metrics():
    assert [n for _, n in ncu_parse.parse_passes(CONSOLE)] == [12] * 5
    q = "Device NVIDIA H200 (GH100)\n----\nMetric Name     Metric Description\ndram__bytes_read   # of bytes read\n" \
        "sm__inst_executed_pipe_tensor_op_gmma  # of warp instructions\n"
    assert ncu_parse.parse_query_metrics(q) == {"dram__bytes_read", "sm__inst_executed_pipe_tensor_op_gmma"}
    chosen = profile.choose_metrics({"sm__inst_executed_pipe_tensor_op_gmma"})
    assert "sm__inst_executed_pipe_tensor_op_gmma.sum" in chosen and "sm__inst_executed_pipe_tensor_op_hmma.sum" not in chosen
    assert set(profile.CORE_METRICS) <= set(chosen)
    assert set(profile.choose_metrics(None)) == set(profile.CORE_METRICS + profile.OPTIONAL_METRICS)


# --- failure modes -----------------------------------------------------------------------------


@pytest.mark.parametrize("console, words", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
     ["ERR_NVGPUCTRPERM", "root", "NVreg_RestrictProfilingToAdminUsers=0"]),
    ("==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.", ["no kernel matched the profiling filter"]),
    ('==ERROR== Failed to find metric sm__bogus.sum', ["sm__bogus.sum"]),
    ("==ERROR== something else broke", ["something else broke"]),
    ("==PROF== Connected to process 1", ["wrote no report", "exit status 1"]),
])
def test_console_failures_have_reasons(console, words):
    with pytest.raises(NcuFailure) as exc:
        ncu_parse.check_console(console, 1)
    assert all(w in exc.value.reason for w in words)


def test_clean_console_passes():
    ncu_parse.check_console(CONSOLE, 0, report_exists=True)


def test_ncu_not_installed_marks_every_case(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "find_ncu", lambda: None)
    pf = profile.profile_cases(TINY_CASES, tmp_path, "r")
    assert pf.status == "unsupported" and "not installed" in pf.reason and "PATH" in pf.reason
    assert [r.status for r in pf.impls] == ["unsupported"] * 3
    assert all("ncu" in r.reason for r in pf.impls)


FAKE_NCU = r'''#!{python}
"""A stand-in for ncu: --version, --query-metrics, a profiling run, and --import of a CSV."""
import json, os, sys
a = sys.argv[1:]
mode = os.environ["FAKE_NCU_MODE"]
if a == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 1)"); sys.exit(0)
if a == ["--query-metrics"]:
    sys.exit(1)
if a[0] == "--import" and "source" in a:  # the source page: two sampled instructions per kernel
    cases = json.load(open(os.path.join(os.path.dirname(a[1]), "cases.json")))["cases"]
    for i, c in enumerate(cases):
        print('"Kernel Name","_attn_fwd",')
        print('"Address","Source","Warp Stall Sampling (All Samples)","stall_barrier","stall_long_sb"')
        print('"0x10","      HMMA.16816.F32 R4, R8, R12, R4","30","5","25"')
        print('"0x20","      BAR.SYNC 0x0","10","10","0"')
    sys.exit(0)
if a[0] == "--import":
    if os.environ["FAKE_NCU_CSV"] != "auto":
        sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read()); sys.exit(0)
    # One kernel per case; the Triton configs use 122 registers unless capped.
    cases = json.load(open(os.path.join(os.path.dirname(a[1]), "cases.json")))["cases"]
    print('"ID","Kernel Name","thread Domain:Push/Pop_Range","gpu__time_duration.sum","launch__registers_per_thread"')
    print('"","","","ns","register/thread"')
    for i, c in enumerate(cases):
        regs = (c.get("config") or {}).get("maxnreg") or 122
        cid = c["id"]
        print(f'"{i}","_attn_fwd","<default domain>:case={cid}:none","1,000","{regs}"')
    sys.exit(0)
with open(os.environ["FAKE_NCU_ARGS"], "w") as f:
    json.dump(a, f)
cases = json.load(open(a[-2]))["cases"]
res = [dict(id=c["id"], status="ok", reason=None, config=None) for c in cases]
res[0].update(status="unsupported", reason="RuntimeError: No available kernel") if mode == "one-unsupported" else None
json.dump(dict(cases=res), open(a[-1], "w"))
if mode not in ("perm", "nomatch"):
    open(a[a.index("--export") + 1] + ".ncu-rep", "w").write("report")
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "nomatch":
    print("==WARNING== No kernels were profiled."); sys.exit(0)
print(open(os.environ["FAKE_NCU_CONSOLE"]).read())
if mode == "crash":
    print("==ERROR== The application returned an error code (1)."); sys.exit(1)
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.replace("{python}", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "raw.csv").write_text(raw_csv(SYNTH))
    (tmp_path / "console.txt").write_text(CONSOLE)
    monkeypatch.setenv("FAKE_NCU_CSV", str(tmp_path / "raw.csv"))
    monkeypatch.setenv("FAKE_NCU_CONSOLE", str(tmp_path / "console.txt"))
    monkeypatch.setenv("FAKE_NCU_ARGS", str(tmp_path / "args.json"))

    def run(mode):
        monkeypatch.setenv("FAKE_NCU_MODE", mode)
        flags = []
        pf = profile.profile_cases(TINY_CASES, tmp_path / "work", "r", ncu=str(exe), on_flags=flags.append)
        return pf, flags, json.loads((tmp_path / "args.json").read_text())
    return run


def test_permission_error_is_recorded_with_the_fix(fake_ncu):
    pf, _, _ = fake_ncu("perm")
    assert pf.status == "error"
    assert "ERR_NVGPUCTRPERM" in pf.reason and "NVreg_RestrictProfilingToAdminUsers=0" in pf.reason
    assert all(r.status == "error" and "ERR_NVGPUCTRPERM" in r.reason for r in pf.impls)


def test_no_kernel_matched_is_recorded(fake_ncu):
    pf, _, _ = fake_ncu("nomatch")
    assert pf.status == "error" and "no kernel matched" in pf.reason
    assert len(pf.impls) == 3 and not pf.kernels


def test_successful_run_records_flags_and_the_target_command(fake_ncu):
    pf, flags, args = fake_ncu("ok")
    assert pf.status == "ok" and pf.ncu_version == "2025.3.1.0"
    assert flags and flags[0][:2] == ["--clock-control", "none"]
    assert args[:len(flags[0])] == flags[0]
    for f in ("--profile-from-start", "--nvtx", "--metrics"):
        assert f in args
    assert args[-4:-2] == ["-m", "collect.ncu_target"]
    assert pf.ncu_command[0] == "ncu" and "--clock-control" in pf.ncu_command
    assert [r.status for r in pf.impls] == ["ok"] * 3


def test_a_crash_after_profiling_keeps_the_data_and_says_so(fake_ncu):
    pf, _, _ = fake_ncu("crash")
    assert pf.status == "ok" and len(pf.kernels) == 5
    assert "status 1" in pf.reason and "application returned an error" in pf.reason


def test_one_unsupported_case_keeps_its_own_reason(fake_ncu):
    pf, _, _ = fake_ncu("one-unsupported")
    naive = next(r for r in pf.impls if r.impl == "naive")
    assert naive.status == "unsupported" and "No available kernel" in naive.reason
    assert pf.status == "ok"


# --- aggregation -------------------------------------------------------------------------------


def test_naive_kernels_are_summed_per_implementation():
    pf = profile.assemble(TINY_CASES, RESULTS, raw_csv(SYNTH), CONSOLE, new_file())
    naive = next(r for r in pf.impls if r.impl == "naive")
    assert naive.kernels == 3
    assert naive.duration_ms == pytest.approx((2000 + 3000 + 500) * 1e-6)
    assert naive.dram_read_bytes == pytest.approx(3 * 100_000)
    assert naive.tensor_inst == 100
    per_kernel_fp32 = 10 + 0 + 2 * 1000
    per_kernel_fp16 = 4 * 5
    assert naive.flops_counted == pytest.approx(3 * (per_kernel_fp32 + per_kernel_fp16) + 100 * 4096)
    assert naive.flops_model == 4.0 * 1 * 2 * 256 ** 2 * 64
    assert pf.flops_source == "counters"
    tri = next(r for r in pf.impls if r.impl == "triton")
    assert tri.config == "BLOCK_M=64 BLOCK_N=64 warps=4 stages=2 maxnreg=none"
    k = next(k for k in pf.kernels if k.impl == "triton")
    assert k.registers_per_thread == 213 and k.smem_per_block_bytes == 16384 and k.replay_passes == 12
    assert k.block_size == 128 and k.block_limit_registers == 16
    assert [s.reason for s in pf.stalls if s.case_id == TRITON] == ["barrier", "long_scoreboard", "selected"]


def test_case_that_ran_but_launched_nothing_is_an_error():
    only_naive = [k for k in SYNTH if k[0] == NAIVE]
    pf = profile.assemble(TINY_CASES, RESULTS, raw_csv(only_naive), "", new_file())
    tri = next(r for r in pf.impls if r.impl == "triton")
    assert tri.status == "error" and "no kernel matched the profiling range" in tri.reason


def test_kernels_without_nvtx_tags_cannot_be_attributed():
    text = raw_csv(SYNTH).replace("case=", "range=")
    with pytest.raises(NcuFailure, match="NVTX"):
        profile.assemble(TINY_CASES, RESULTS, text, "", new_file())


def test_no_tensor_op_counters_means_analytical_flops():
    plain = [(c, n, {k: v for k, v in m.items() if not k.startswith("sm__ops_path")}) for c, n, m in SYNTH]
    pf = profile.assemble(TINY_CASES, RESULTS, raw_csv(plain), "", new_file())
    assert pf.flops_source == "analytical"
    assert all(r.flops_counted is None for r in pf.impls)


def test_register_allocation_rounds_per_warp_and_per_subpartition():
    # 213 registers -> 216 per thread (a multiple of 8) -> 6912 per warp; 16384 per sub-partition holds 2 warps.
    assert occupancy.blocks_by_registers(H200, 128, 213) == 2
    assert occupancy.blocks_by_registers(H200, 256, 213) == 1
    assert occupancy.blocks_by_registers(H200, 128, 255) == 2
    assert occupancy.blocks_by_registers(H200, 128, 256) == 0  # over the per-thread maximum
    assert occupancy.blocks_by_registers(H200, 1024, 128) == 0  # 128 x 1024 > 65536 per block
    o = occupancy.occupancy(H200, 128, 213, 16384)
    assert (o.active_blocks, o.active_warps, o.limiters) == (2, 8, ("registers",))
    assert o.occupancy_pct == pytest.approx(12.5)


def test_t4_like_limits_give_the_seed_studys_25_percent():
    o = occupancy.occupancy(T4, 128, 213, 16384)
    assert o.blocks_by_registers == 2 and o.occupancy_pct == pytest.approx(25.0)


def test_shared_memory_includes_the_driver_reserve_and_granularity():
    assert occupancy.smem_allocated(H200, 16384) == 17408
    assert occupancy.blocks_by_smem(H200, 16384) == 233472 // 17408 == 13
    assert occupancy.blocks_by_smem(H200, 100) == 233472 // 1152
    assert occupancy.blocks_by_smem(H200, 232449) == 0
    assert occupancy.blocks_by_smem(H200, 16384, carveout_bytes=102400) == 5
    o = occupancy.occupancy(H200, 128, 32, 110 * 1024)
    assert o.active_blocks == 2 and o.limiters == ("shared memory",)


def test_caps_and_curves():
    assert occupancy.register_cap_for_blocks(H200, 128, 3) == 168
    assert occupancy.register_cap_for_blocks(H200, 256, 2) == 128
    assert occupancy.register_cap_for_blocks(H200, 256, 3) == 80
    curve = occupancy.occupancy_vs_registers(H200, 128, 0)
    ys = [y for _, y in curve]
    assert ys == sorted(ys, reverse=True) and ys[0] == 100.0 and curve[-1][0] == 255
    smem = occupancy.occupancy_vs_smem(H200, 128, 32)
    assert smem[0] == (0, 100.0) and smem[-1][0] == H200.smem_per_block_optin_bytes
    with pytest.raises(ValueError, match="threads_per_block"):
        occupancy.occupancy(H200, 0, 32, 0)


def test_limits_from_manifest_device():
    lim = occupancy.limits_from_device(synthetic.device())
    assert lim.regs_per_sm == 65536 and lim.max_warps_per_sm == 64 and lim.smem_reserved_per_block_bytes == 1024
    d = synthetic.device()
    d.max_blocks_per_sm = None
    assert occupancy.limits_from_device(d) is None


# --- the page ----------------------------------------------------------------------------------


# Unit utilisation (% of peak) of every fused kernel unless a test says otherwise: no unit at 80%, so the
# verdict is the largest stall share (long_scoreboard in kmetrics).
UNITS = dict(pipe_tensor_pct=70.0, pipe_xu_pct=40.0, pipe_fma_pct=20.0, pipe_alu_pct=25.0, pipe_lsu_pct=3.0,
             issue_slots_pct=40.0, sol_sm_pct=70.0, sol_memory_pct=45.0, sol_dram_pct=12.0, sol_l2_pct=45.0,
             sol_l1_pct=48.0)


def unit_metrics(units: dict) -> dict:
    return {profile.LIMITER_METRICS[f]: v for f, v in units.items()}


def profile_file_for_page(status="ok", reason=None, cases=None, units=None, our_units=None):
    cases = cases or profile.main_cases(quick=True)  # headline (all impls) + the d=128 shape + the causal goal
    ours = ("triton", "triton-portable")
    recs = []
    for c in cases:
        n = 3 if c.impl == "naive" else 1
        for i in range(n):
            name = EVIL if (c.impl == "naive" and i == 1) else ("_attn_fwd" if c.impl in ours else "flash_fwd<64>")
            fused = c.impl not in ("naive", "sdpa-math")
            u = (our_units if c.impl in ours and our_units else units or UNITS) if fused else {}
            recs.append((c.id, name, kmetrics(t_ns=10_000 * (i + 1), dram_kb=4_000, tensor=10,
                                              regs=168 if c.impl in ours else 64, **unit_metrics(u))))
    results = [dict(id=c.id, status="ok", reason=None,
                    config=dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, maxnreg=None) if c.impl in ours else None)
               for c in cases]
    results[-1] = dict(id=cases[-1].id, status="oom", reason="OutOfMemoryError: <b>CUDA</b> out of memory", config=None)
    pf = profile.assemble(cases, results, raw_csv(recs), "", new_file())
    pf.ncu_command = ["ncu", "--clock-control", "none", "--metrics", "a,b"]
    pf.status, pf.reason = status, reason
    return pf


def write_run(tmp_path, pf):
    run_dir = synthetic.make_run(tmp_path)
    m = json.loads((run_dir / "manifest.json").read_text())
    m["phases"].append(dict(name="profile", status="complete", file="profile.json"))
    (run_dir / "manifest.json").write_text(json.dumps(m))
    pf.run_id = run_dir.name  # a phase file belongs to its run's folder
    write_json_atomic(run_dir / "profile.json", pf)
    return load_run(run_dir)


def page_for(tmp_path, pf):
    from render.pages.profile import ProfilePage
    run = write_run(tmp_path, pf)
    return ProfilePage(run, [run])


def test_profile_json_validates_against_the_schema(tmp_path):
    run = write_run(tmp_path, profile_file_for_page())
    p = run.phase("profile")
    assert isinstance(p, ProfileFile) and len(p.impls) == len(profile.main_cases(quick=True))
    assert p.impls[-1].status == "oom"


def test_kernel_names_are_escaped_in_tables_and_hover(tmp_path):
    page = page_for(tmp_path, profile_file_for_page())
    html = page.kernel_table()
    assert "&lt;script&gt;" in html and "<script>" not in html
    fig = page.roofline_fig()
    hover = json.dumps([t.customdata.tolist() if hasattr(t.customdata, "tolist") else t.customdata for t in fig.data],
                       default=str)
    assert "&lt;script&gt;" in hover and "<script>" not in hover and "c10::Half" in hover
    for fig in (page.occupancy_figure(), page.stalls_figure(), page.roofline_figure(), page.bytes_figure()):
        assert "<script>alert" not in fig
    assert escape.text("<b>CUDA") in page.status_note() and "<b>" not in page.status_note()  # a tool's reason is escaped too


def test_page_findings_are_computed(tmp_path):
    page = page_for(tmp_path, profile_file_for_page())
    assert page.ok and page.headline == (2, 8, 2048, 64, "float16", False)
    assert "Tensor cores ran for" in page.tensor_core_sentence()
    occ = page.occupancy_finding()
    assert "168 registers per thread" in occ and "limited by" in occ
    limit = html.unescape(page.limiter_finding())
    assert "limited by **stalls, chiefly long_scoreboard" in limit and "busiest: tensor pipe, 70.0%" in limit
    assert "long_scoreboard" in page.limiter_headline()
    # registers allow 16 blocks per SM, shared memory 32: a cap could add a block, and the page says it is untested
    assert "a register cap could add a block there" in page.register_cap_note()
    assert "Left of the DRAM ridge" in page.roofline_finding() or "Right of the DRAM ridge" in page.roofline_finding()
    assert page.occupancy_curves_fig() is not None
    assert "re-reads" in page.bytes_gap_explained()
    assert "long_scoreboard" in html.unescape(page.stall_finding())


def render_page(tmp_path):
    report = Report.load(tmp_path)
    return report.render_markdown((Path(__file__).parent.parent / "docs" / "profiling.md").read_text(), "profiling.md")


def test_whole_page_renders(tmp_path):
    write_run(tmp_path, profile_file_for_page())
    text = render_page(tmp_path)
    assert "fig-profile-roofline-2048-64" in text and "fig-profile-utilisation" in text and "fig-profile-stalls" in text
    assert "register-cap experiment" not in text.lower() or "could add a block" in text
    assert "<script>alert" not in text


def test_page_shows_why_there_is_no_data(tmp_path):
    pf = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="error",
                     reason=ncu_parse.PERMISSION_FIX)
    write_run(tmp_path, pf)
    text = render_page(tmp_path)
    assert "No Nsight Compute data" in text and "NVreg_RestrictProfilingToAdminUsers=0" in html.unescape(text)
    assert "fig-profile-roofline" not in text


def test_missing_phase_renders_the_missing_note(tmp_path):
    synthetic.make_run(tmp_path)
    assert "Not collected in this run" in render_page(tmp_path)


def test_short_kernel_names():
    from render.pages.profile.data import short_kernel_name
    assert short_kernel_name(EVIL) == "softmax"
    assert short_kernel_name("_attn_fwd") == "_attn_fwd"
    assert short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)") == "cunn_SoftMaxForward"
    assert short_kernel_name("void <unnamed>::softmax_warp_forward<c10::Half, float>(T2 *)") == "softmax_warp_forward"


# --- the real export (H200, ncu 2025.3.1) ------------------------------------------------------


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def fixture_profile(which="tiny"):
    cases = [profile.ProfileCase.from_spec(c) for c in json.loads(fixture_text(f"{which}_cases.json"))["cases"]]
    results = json.loads(fixture_text(f"{which}_target_result.json"))["cases"]
    return cases, profile.assemble(cases, results, fixture_text(f"{which}_raw.csv"),
                                   fixture_text(f"{which}_console.txt"), new_file())


def test_real_csv_parses_and_agrees_with_ncus_python_module():
    recs = ncu_parse.parse_raw_csv(fixture_text("tiny_raw.csv"))
    report = json.loads(fixture_text("tiny_ncu_report_excerpt.json"))
    from render.pages.profile.data import short_kernel_name
    assert [short_kernel_name(r.name) for r in recs] == [a["name"] for a in report]
    assert [f"case={r.case_id}" for r in recs] == [a["nvtx"][0]["push_pop"][-1] for a in report]
    assert [r.case_id for r in recs] == [NAIVE] * 5 + [SDPA, TRITON]
    assert report[0]["units"]["gpu__time_duration.sum"] == "ns"
    assert recs[0].metrics["gpu__time_duration.sum"] == pytest.approx(3776e-9)  # "3,776" ns
    assert recs[0].metrics["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1_836_033_802.0)
    assert [n for _, n in ncu_parse.parse_passes(fixture_text("tiny_console.txt"))] == [12] * 7


def test_real_tiny_profile_sums_and_counts():
    _, pf = fixture_profile("tiny")
    assert pf.flops_source == "counters"
    by = {r.impl: r for r in pf.impls}
    assert [by[i].kernels for i in ("naive", "sdpa", "triton")] == [5, 1, 1]
    # The fused kernels' tensor-op counters equal 4·B·H·N²·d exactly: one counted op is one FLOP.
    assert by["triton"].flops_tensor == by["triton"].flops_model == 4 * 1 * 2 * 256 ** 2 * 64
    assert by["sdpa"].flops_tensor == by["sdpa"].flops_model
    assert by["naive"].flops_tensor >= by["naive"].flops_model  # cuBLAS tiles pad the QKᵀ product
    naive_k = [k for k in pf.kernels if k.impl == "naive"]
    assert by["naive"].duration_ms == pytest.approx(sum(k.duration_ms for k in naive_k))
    assert by["naive"].dram_read_bytes == sum(k.dram_read_bytes for k in naive_k)
    assert [k.launch for k in naive_k] == [0, 1, 2, 3, 4]
    tri = next(k for k in pf.kernels if k.impl == "triton")
    assert tri.kernel_name == "_attn_fwd" and tri.tensor_inst == 1024  # generic counter, not hmma + gmma
    assert tri.duration_ms == pytest.approx(7.36e-3) and tri.replay_passes == 12
    assert (tri.registers_per_thread, tri.smem_per_block_bytes, tri.block_limit_registers) == (150, 40960, 3)
    assert {"long_scoreboard", "gmma", "barrier"} <= {s.reason for s in pf.stalls if s.case_id == TRITON}
    assert any("<" in k.kernel_name for k in naive_k)  # real C++ template names, escaped by the page


def test_occupancy_model_reproduces_nsight_compute_on_every_real_kernel():
    lim = occupancy.limits_from_device(synthetic.device())
    kernels = fixture_profile("tiny")[1].kernels + fixture_profile("headline")[1].kernels
    assert len(kernels) == 19
    for k in kernels:
        o = occupancy.occupancy(lim, k.block_size, k.registers_per_thread, k.smem_per_block_bytes, k.smem_config_bytes)
        assert (o.blocks_by_registers, o.blocks_by_smem, o.blocks_by_warps, o.blocks_by_blocks) == (
            k.block_limit_registers, k.block_limit_smem, k.block_limit_warps, k.block_limit_blocks), k.kernel_name
        assert o.occupancy_pct == pytest.approx(k.theoretical_occupancy_pct), k.kernel_name


def test_real_headline_bytes_match_the_reread_model():
    _, pf = fixture_profile("headline")
    tri = next(r for r in pf.impls if r.impl == "triton" and r.head_dim == 64)
    one = 2 * 8 * 2 * 2048 * 64  # bytes of one of Q, K, V
    assert tri.dram_read_bytes == pytest.approx(3 * one, rel=0.01)  # Q, K, V each read from DRAM once
    assert tri.l1_bytes == (2 + 2 * 2048 // 128) * one  # every query block requests all of K and V


def test_real_no_match_console():
    with pytest.raises(NcuFailure) as exc:
        ncu_parse.check_console(fixture_text("nomatch_console.txt"), 0)
    assert "no kernel matched" in exc.value.reason and "softmax_warp_forward" in exc.value.reason


def test_real_query_metrics():
    names = ncu_parse.parse_query_metrics(fixture_text("query_metrics_excerpt.txt"))
    assert {"dram__bytes_read", "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off",
            "sm__inst_executed_pipe_tensor_op_gmma"} <= names
    chosen = profile.choose_metrics(names)
    assert "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum" in chosen


def test_real_export_through_the_whole_pipeline(fake_ncu, tmp_path, monkeypatch):
    (tmp_path / "raw.csv").write_text(fixture_text("tiny_raw.csv"))
    (tmp_path / "console.txt").write_text(fixture_text("tiny_console.txt"))
    pf, _, _ = fake_ncu("ok")
    assert pf.status == "ok" and len(pf.kernels) == 7 and pf.reason is None


def test_page_on_real_headline_data(tmp_path):
    cases, pf = fixture_profile("headline")
    page = page_for(tmp_path, pf)
    assert page.headline == (2, 8, 2048, 64, "float16", False)
    assert page.tensor_core_sentence().startswith("Tensor cores ran for naive PyTorch and Triton (ours), by the tensor "
                                                  "FLOP counters")
    assert "Left of the DRAM ridge" in page.roofline_finding() or "Right of the DRAM ridge" in page.roofline_finding()
    gap = page.bytes_gap_explained()
    assert "16 query blocks of 128 rows" in gap and "1.00×" in gap  # L1 saw exactly the re-read traffic
    assert "write-back" in gap  # O was still in the 60 MB L2 when the kernel ended
    occ = page.occupancy_finding()
    assert "122 registers per thread" in occ and "theoretical occupancy 25.0%" in occ
    html_table = page.kernel_table()
    assert "&lt;8, at::AUnaryFunctor&lt;c10::Half" in html_table
    render_page(tmp_path)


def test_run_profiles_once_and_checks_our_clock_on_every_call(tmp_path, monkeypatch):
    """The phase entry point with a stand-in ncu: one ncu run, no register-cap runs, hot spots from the
    source page for our kernel and its peers, and our device time beside ncu's for every main call."""
    from collect.context import RunContext
    from collect.timing import summarize

    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.replace("{python}", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "console.txt").write_text("")
    for k, v in dict(FAKE_NCU_MODE="ok", FAKE_NCU_CSV="auto", FAKE_NCU_CONSOLE=str(tmp_path / "console.txt"),
                     FAKE_NCU_ARGS=str(tmp_path / "args.json")).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(profile, "find_ncu", lambda: str(exe))
    monkeypatch.setattr(profile, "available_metrics", lambda ncu: None)
    monkeypatch.setattr(profile, "autotuned_config",
                        lambda shape, path="portable": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3))

    from collect.timing import DeviceTiming

    def timing(case, max_clock_mhz=None):  # the fake profiler says every kernel took 1,000 ns
        return DeviceTiming(summarize([1.0e-3 * (1.05 if case.impl == "naive" else 1.0)] * 5), 1980.0)
    monkeypatch.setattr(profile, "our_device_time", timing)
    flags = []
    ctx = RunContext(run_id="r", out_dir=tmp_path / "run", profile="quick", manifest=synthetic.manifest("r"),
                     phase="profile", filename="profile.json", on_flags=flags.append)
    pf = profile.run(ctx)
    assert pf.status == "ok" and flags and flags[0][:2] == ["--clock-control", "none"]
    assert profile.LIMITER_METRICS["pipe_xu_pct"] in ",".join(flags[0])  # the limiter's counters, by name
    main_tri = next(r for r in pf.impls if r.impl == "triton" and r.group == "main" and r.head_dim == 64)
    assert main_tri.config == "BLOCK_M=128 BLOCK_N=64 warps=8 stages=3 maxnreg=none"
    assert pf.regcap == [] and all(r.group == "main" for r in pf.impls)
    assert not (tmp_path / "run" / "ncu" / "regcap").exists()
    assert (tmp_path / "run" / "profile.json").exists()  # checkpointed
    # hot spots for our kernel and its peers at the limiter shapes, none for the others
    spots = {h.case_id for h in pf.hotspots}
    assert spots and all(profile.hotspot_case(next(c for c in profile.main_cases(True) if c.id == cid), "triton")
                         for cid in spots)
    assert not any("naive" in cid for cid in spots)
    # every profiled main call has our device time beside ncu's
    check = {r.impl: r for r in pf.clock_check if r.head_dim == 64 and not r.causal}
    assert set(check) == {r.impl for r in pf.impls if r.head_dim == 64 and not r.causal and r.status == "ok"}
    assert check["triton"].device_over_ncu == pytest.approx(1.0) and check["triton"].ncu_ms == pytest.approx(1e-3)
    assert check["naive"].device_over_ncu == pytest.approx(1.05) and check["naive"].gap_ms == pytest.approx(5e-5)
    assert check["triton"].sm_clock_mhz == 1980.0


def test_every_autotuned_call_of_ours_is_pinned_to_this_process_config(monkeypatch):
    """The profiled process must run the kernel our clock times: configs the autotuner picked here."""
    asked = []

    def tuned(shape, path="portable"):
        asked.append((shape["head_dim"], shape["causal"], path))
        # as shipped, d=128 takes a path with no autotuner (Gluon): nothing to pin
        return None if path is None and shape["head_dim"] == 128 else dict(BLOCK_M=64, BLOCK_N=32, num_warps=4,
                                                                           num_stages=3)
    monkeypatch.setattr(profile, "autotuned_config", tuned)
    best = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)
    cases = profile.pin_tuned_configs(profile.main_cases(quick=False, hopper=True), "triton-portable", best)
    config = {(c.impl, c.head_dim, c.causal): c.config for c in cases}
    assert config[("triton-portable", 64, False)] == dict(best, maxnreg=None)  # tuned once by the phase itself
    assert config[("triton", 64, False)] == dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3, maxnreg=None)
    assert config[("triton-portable", 128, False)]["BLOCK_N"] == 32
    assert config[("triton", 128, False)] is None and config[("triton", 128, True)] is None
    assert all(cfg is None for (impl, _, _), cfg in config.items() if impl not in ("triton", "triton-portable"))
    # the headline's portable config is the one the phase already tuned: not tuned again
    assert (64, False, "portable") not in asked and (64, False, None) in asked


def test_full_profile_on_hopper_adds_the_portable_kernel_and_the_limiter_shapes(tmp_path):
    cases = profile.main_cases(quick=False, hopper=True)
    causal = [c for c in cases if c.causal]
    assert {c.impl for c in causal} == {"sdpa-cudnn", "sdpa-flash", "fa4", "triton", "triton-portable"}
    assert {(c.batch, c.heads, c.seq_len, c.head_dim) for c in causal} == {(2, 8, 2048, 64), (4, 32, 4096, 128)}
    assert len({c.id for c in cases}) == len(cases)  # causal and not are two cases, with two ids
    assert "triton-portable" in {c.impl for c in cases if not c.causal}
    assert "triton-portable" not in {c.impl for c in profile.main_cases(quick=False)}
    assert profile.portable_impl(True) == "triton-portable" and profile.portable_impl(False) == "triton"
    assert all(profile.hotspot_case(c, "triton-portable") == (c.impl in ("triton", "triton-portable", "sdpa-cudnn",
                                                                         "sdpa-flash")) for c in cases)
    assert any(c.impl == "fa4" for c in causal)  # FA4's limiter rows stay; its hot spots are not recorded
    write_run(tmp_path, profile_file_for_page(cases=cases))
    text = render_page(tmp_path)
    assert "fig-profile-roofline-4096-128-causal" in text and "fig-profile-roofline-4096-128\"" in text
    assert "fig-profile-stalls-4096-128-causal" in text
    ids = re.findall(r'id="(fig-[^"]+)"', text)
    assert len(ids) == len(set(ids))


def test_a_shape_routed_past_the_autotuner_is_not_run_to_find_out(monkeypatch):
    asked = []
    monkeypatch.setattr(profile, "autotuned_config", lambda shape, path="portable": asked.append(shape["head_dim"]))
    monkeypatch.setattr(profile, "flash_route", lambda case, device: ("gluon", {"version": "g3"})
                        if case.head_dim == 128 else ("portable", None))
    cases = profile.pin_tuned_configs(profile.main_cases(quick=False, hopper=True), "triton-portable", None)
    assert all(c.config is None for c in cases if c.impl == "triton" and c.head_dim == 128)
    # only the portable rows at d=128 and ours at d=64 are tuned; the headline reuses its (failed) tuning
    assert 128 in asked and asked.count(128) == len([c for c in cases if c.impl == "triton-portable"
                                                     and c.head_dim == 128])


def test_the_hot_spot_run_gives_way_when_the_phases_budget_is_spent():
    assert profile.hotspots_skip_reason(None) is None  # no budget
    assert profile.hotspots_skip_reason(profile.HOTSPOT_MIN_S) is None  # just enough left
    why = profile.hotspots_skip_reason(12.4)
    assert why.startswith("skipped: 12 s were left for it, of the profile phase's time budget and of the collect's")
    assert "PROFILE_BUDGET_S=0" in why and "--time-limit 0" in why
    assert profile.hotspots_skip_reason(-3.0).startswith("skipped: 0 s were left")  # overran: never negative


def test_optional_work_leaves_the_later_phases_their_budgets(monkeypatch):
    import time as _time

    from collect.context import RunContext

    ctx = RunContext(run_id="r", out_dir=".", profile="full", manifest=None, phase="profile", filename="profile.json")
    assert ctx.optional_seconds(40.0) == 40.0 and ctx.optional_seconds(None) is None  # no collect limit
    monkeypatch.setattr(_time, "perf_counter", lambda: 1000.0)
    ctx.deadline, ctx.reserved_after_s = 1000.0 + 180.0, 150.0  # 180 s left, decode's 150 set aside
    assert ctx.optional_seconds(60.0) == 30.0 and ctx.optional_seconds(None) == 30.0
    assert ctx.optional_seconds(10.0) == 10.0  # the phase's own budget is the tighter one
    # as in run h200-20261203f: 111 s left of the limit when the hot-spot run could start, decode's 150 s after it
    ctx.deadline = 1000.0 + 111.0
    assert profile.hotspots_skip_reason(ctx.optional_seconds(47.0)).startswith("skipped: 0 s were left")


def test_the_runner_reserves_the_later_phases_own_budgets(monkeypatch):
    from collect import runner

    for env in ("BENCH_BUDGET_S", "DECODE_BUDGET_S", "PROFILE_BUDGET_S", "ITERATIONS_BUDGET_S"):
        monkeypatch.delenv(env, raising=False)
    from collect import decode, iterations

    assert runner.reserved_seconds(("decode",), "full", 1.0) == decode.BUDGET_S["full"]
    assert runner.reserved_seconds(("iterations", "decode"), "full", 2.0) == 2 * (iterations.BUDGET_S["full"]
                                                                                   + decode.BUDGET_S["full"])
    monkeypatch.setenv("DECODE_BUDGET_S", "0")  # lifted: no limit, so nothing to reserve
    assert runner.reserved_seconds(("decode", "env"), "full", 1.0) == 0.0


def test_no_case_at_the_study_shape_is_profiled_after_the_d128_block():
    # Clocks are not locked: the first short kernel after seconds of d=128 replays ran 180-220 MHz slower than its
    # peers (runs h200-20261204f and g), so every case at the study shape, causal or not, comes first.
    for quick in (True, False):
        ids = [c.id for c in profile.main_cases(quick=quick, hopper=True)]
        first_large = next(i for i, cid in enumerate(ids) if "d128" in cid)
        assert all("d128" in cid for cid in ids[first_large:])
        assert any("b2h8n2048d64-causal" in cid for cid in ids) == (not quick)
