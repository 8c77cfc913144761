"""Kernels per step and time by kernel class: the classification and the per-step arithmetic."""
import pytest

from collect.decode_profile import CLASS_ORDER, charged_times, kernel_class, summarize_kernels


@pytest.mark.parametrize("name, cls", [
    ("_split_kv_kernel", "attention"),
    ("pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64>>", "attention"),
    ("_ln_qkv_kernel", "linear"),              # our fused norm + product + cache write
    ("_attn_proj_residual_kernel", "linear"),  # our fused merge + projection + residual
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x32x64", "linear"),
    ("nvjet_hsh_64x8_64x16_2x1_v_bz_TNN", "linear"),
    ("_quantize_store_kernel", "cache write"),
    ("void at::native::index_copy_kernel_impl<at::native::OpaqueType<2>>", "cache write"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>", "layer norm"),
    ("triton_per_fused_add_native_layer_norm_1", "layer norm"),
    ("triton_poi_fused_addmm_gelu_view_3", "elementwise"),  # inductor's bias + GELU after a cuBLAS product
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, ArgMaxOps>>", "sampling"),
    ("_advance_kernel", "sampling"),
    ("_embed_kernel", "embedding"),
    ("_persistent_step_kernel", "persistent step"),  # issue 44: every product and attention of a step
    ("_persistent_ws_kernel", "persistent step"),  # its warp-specialized form (kernels/decode/persistent_ws.py)
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<>", "copy"),
    ("Memset (Device)", "copy"),
    ("something_new", "other"),
])
def test_kernel_names_land_in_their_class(name, cls):
    assert kernel_class(name) == cls and cls in CLASS_ORDER


def _back_to_back(named_durations):
    """(name, start, duration): each kernel starting where the one before ended."""
    out, t = [], 0.0
    for name, dur in named_durations:
        out.append((name, t, dur))
        t += dur
    return out


def test_summary_divides_by_the_steps_and_names_the_heaviest_kernel():
    kernels = _back_to_back([("_split_kv_kernel", 10.0), ("flash_decode_combine", 2.0), ("gemm_a", 30.0),
                             ("gemm_b", 50.0)] * 2)
    p = summarize_kernels(kernels, steps=2)
    assert p.kernels_per_step == 4 and p.kernel_ms_per_step == pytest.approx(0.092)
    by = {c.kernel_class: c for c in p.classes}
    assert [c.kernel_class for c in p.classes] == ["attention", "linear"]  # the report's order
    assert by["linear"].kernels_per_step == 2 and by["linear"].ms_per_step == pytest.approx(0.08)
    assert by["linear"].top_kernel == "gemm_b" and by["attention"].top_kernel == "_split_kv_kernel"


def test_summary_refuses_nonsense():
    with pytest.raises(ValueError, match="steps"):
        summarize_kernels([("k", 0.0, 1.0)], steps=0)
    with pytest.raises(ValueError, match="negative"):
        summarize_kernels([("k", 0.0, -1.0)], steps=1)


def test_overlapping_kernels_are_charged_once_to_the_one_that_started_first():
    # Programmatic dependent launch: gemm starts 3 us before attention ends and waits for it; a
    # kernel wholly inside another's interval is charged nothing; a gap is charged to no one.
    kernels = [("gemm_a", 8.0, 10.0), ("_split_kv_kernel", 0.0, 11.0), ("tiny_gemm", 2.0, 1.0),
               ("_advance_kernel", 30.0, 4.0)]
    assert sorted(charged_times(kernels)) == sorted([("_split_kv_kernel", 11.0), ("tiny_gemm", 0.0),
                                                     ("gemm_a", 7.0), ("_advance_kernel", 4.0)])
    p = summarize_kernels(kernels, steps=1)
    by = {c.kernel_class: c for c in p.classes}
    assert p.kernel_ms_per_step == pytest.approx(0.022)  # the union: 0-18 and 30-34 us
    assert by["linear"].ms_per_step == pytest.approx(0.007) and by["linear"].kernels_per_step == 2
    assert by["attention"].ms_per_step == pytest.approx(0.011) and p.kernels_per_step == 4


def _fused_step(layers: int, t0: float, us: float = 5.0) -> list[tuple[str, float, float]]:
    """One fused step's kernels as the profiler lists them: (name, start, duration) back to back."""
    names = (["_embed_kernel"] + ["_ln_qkv_kernel", "_split_kv_kernel", "_linear_residual_kernel", "_ln_linear_kernel",
                                  "_linear_residual_kernel"] * layers + ["_ln_linear_kernel", "_argmax_advance_kernel"])
    return [(n, t0 + i * us, us) for i, n in enumerate(names)]


def test_a_fused_step_reads_as_roles_by_place_and_name():
    from collect.decode_profile import fused_roles, summarize_roles
    names = [n for n, _, _ in _fused_step(2, 0.0)]
    assert fused_roles(names, 2) == ["embed", "qkv", "attention", "proj", "fc", "out", "qkv", "attention", "proj",
                                     "fc", "out", "head", "argmax"]
    assert fused_roles(names, 3) is None  # another layer count
    assert fused_roles(names[:1] + names[2:], 2) is None  # a kernel missing
    swapped = list(names)
    swapped[3], swapped[4] = swapped[4], swapped[3]
    assert fused_roles(swapped, 2) is None  # a kernel out of place
    # Two steps with a graph's memset between them: the copy takes no role; each layer role is charged its time.
    kernels = _fused_step(2, 0.0) + [("Memset (Device)", 70.0, 1.0)] + _fused_step(2, 100.0)
    roles = {r.role: r for r in summarize_roles(kernels, 2, 2)}
    assert list(roles) == ["embed", "qkv", "attention", "proj", "fc", "out", "head", "argmax"]
    assert roles["qkv"].kernels_per_step == 2 and roles["qkv"].ms_per_step == pytest.approx(0.010)
    assert roles["head"].kernels_per_step == 1 and roles["head"].ms_per_step == pytest.approx(0.005)
    # A step of another shape (the eager loop's kernels) gets no roles rather than wrong ones.
    assert summarize_roles(kernels + [("_split_kv_kernel", 200.0, 5.0)], 2, 2) == []


def test_one_summary_gives_the_classes_and_for_a_fused_step_the_roles():
    from collect.decode_profile import summarize_roles
    kernels = _fused_step(2, 0.0) + _fused_step(2, 100.0)
    with_roles = summarize_kernels(kernels, 2, fused_layers=2)
    assert with_roles.roles == summarize_roles(kernels, 2, 2) and len(with_roles.roles) == 8
    assert with_roles.classes == summarize_kernels(kernels, 2).classes  # the roles change nothing else
    assert summarize_kernels(kernels, 2).roles == []  # no layer count: no roles
