"""Every fused decode product fits the shared memory its GPU gives a block, and fused_linear.smem_bytes,
which the tilings are chosen by, is never below what Triton really allocates.

A product whose tile needs more than the GPU gives fails at its first launch. The 64-row LM head did
on sm86/sm89 GPUs (A10, RTX 30xx/40xx, L4: 99 KiB), with twice-wide tiles chosen for the H200.
Compiled here for the T4 (64 KiB), an sm86 GPU (99 KiB) and Hopper (227 KiB), every variant the decode
phase may launch (the full compile specs, both batch tilings)."""
from offline_compile import require_ptxas, run_script_per_target

SCRIPT = r'''
import sys
from kernels import aot
from kernels.decode import fused_linear as fl
T = aot.TARGETS[sys.argv[1]]
for spec in fl.compile_specs(T):
    with aot.caught_launches() as launches:
        spec.launch()
    for l in launches:
        k = aot.compile_launch(l, T)
        kw = l.kwargs
        t = fl.Tiling(kw["BLOCK_B"], kw["BLOCK_N"], kw["BLOCK_K"], 1, kw["num_warps"], kw["num_stages"])
        print(T.name, k.metadata.shared, fl.smem_bytes(t, T.capability), T.smem_per_block, spec.label.replace(" ", "_"))
'''

TARGETS = ("sm75", "sm86", "sm90")


def test_every_fused_product_fits_its_gpu_and_the_estimate_bounds_it():
    require_ptxas()
    rows = run_script_per_target(SCRIPT, TARGETS)
    assert {r[0] for r in rows} == set(TARGETS)
    too_big = [r for r in rows if int(r[1]) > int(r[3])]
    assert not too_big, f"products that need more shared memory than their GPU gives a block: {too_big}"
    # The estimate is written for the tensor-core layouts (sm80 on); a T4's FMA dots lay out otherwise.
    under = [r for r in rows if r[0] != "sm75" and int(r[2]) < int(r[1])]
    assert not under, f"smem_bytes below what Triton allocates: {under}"
