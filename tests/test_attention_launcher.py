"""The cache of recorded launches (kernels/attention/launcher.py): what its key tells apart, what a replay
hands the compiled kernel, and that a replayed call is right and is a replay (or is not) when it
should be. On the CPU: replays through the interpreter, and direct launches into a stand-in for
Triton's CompiledKernel."""
import gc
import weakref
from collections import namedtuple

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from attention_inputs import odd_layout, qkv

from kernels import attention
from kernels.attention import dispatch, launcher, portable
from kernels.attention import hopper as attention_hopper
from kernels.attention import reference_attention

pytestmark = [
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log2:RuntimeWarning"),
]

ATOL = 4e-3  # float16, as the kernel tests


def err(out, q, k, v, causal, sm_scale=None):
    return (out.double() - reference_attention(q, k, v, causal, sm_scale)).abs().max().item()


# --- the key -----------------------------------------------------------------------------------


def test_key_is_blind_to_the_address_but_not_to_its_alignment():
    a, b = torch.zeros(2, 3, 8, 16, dtype=torch.float16), torch.zeros(2, 3, 8, 16, dtype=torch.float16)
    assert a.data_ptr() != b.data_ptr() and launcher.tensor_key(a) == launcher.tensor_key(b)
    storage = torch.zeros(2 * 3 * 8 * 16 + 8, dtype=torch.float16)
    aligned = storage[8:].view(2, 3, 8, 16)  # 16 bytes in
    misaligned = storage[1:2 * 3 * 8 * 16 + 1].view(2, 3, 8, 16)  # 2 bytes in
    assert launcher.tensor_key(aligned) == launcher.tensor_key(a)
    assert launcher.tensor_key(misaligned) != launcher.tensor_key(a)


@pytest.mark.parametrize("other", [
    lambda: torch.zeros(2, 3, 9, 16, dtype=torch.float16),                  # shape
    lambda: torch.zeros(2, 8, 3, 16, dtype=torch.float16).transpose(1, 2),  # strides
    lambda: torch.zeros(2, 3, 8, 16, dtype=torch.bfloat16),                 # dtype
    lambda: torch.zeros(2, 3, 8, 16, dtype=torch.float16, device="meta"),   # device
], ids=["shape", "strides", "dtype", "device"])
def test_key_tells_apart_what_a_kernel_is_specialised_on(other):
    base = launcher.tensor_key(torch.zeros(2, 3, 8, 16, dtype=torch.float16))
    try:
        assert launcher.tensor_key(other()) != base
    except RuntimeError:  # a meta tensor has no address: no key, so never a replay
        pass


def test_config_key_is_hashable_and_order_blind():
    assert launcher.config_key(dict(BLOCK_M=64, BLOCK_N=32)) == launcher.config_key(dict(BLOCK_N=32, BLOCK_M=64))
    assert launcher.config_key(None) is None
    hash(launcher.config_key(dict(BLOCK_M=64, maxnreg=None)))


def test_cache_counts_and_evicts_the_oldest():
    cache = launcher.LaunchCache(max_entries=2)
    assert cache.get("a") is None
    cache.put("a", "A")
    cache.put("b", "B")
    cache.put(None, None)  # a call that cannot be replayed stores nothing
    cache.put("c", "C")
    assert cache.get("a") is None and cache.get("c") == "C"
    assert cache.info() == dict(hits=1, misses=2, entries=2)


# --- direct launches, into a stand-in for Triton's CompiledKernel --------------------------------


def _kernel(X, Y, Out, n, scale, Rows, BLOCK: tl.constexpr = 16):  # never compiled: launches go to FakeCompiled
    pass


class FakeCompiled:
    """What a Replay reads from Triton's CompiledKernel, recording each launch."""

    Metadata = namedtuple("Metadata", "global_scratch_size")

    def __init__(self, scratch=0):
        self.function, self.packed_metadata = 77, (4, 1, 0)
        self.metadata = self.Metadata(scratch)
        self.launches = []

    def run(self, *args):
        self.launches.append(args)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A JITFunction whose launches return a FakeCompiled, on a pretend CUDA device 0."""
    fn = JITFunction(_kernel)
    compiled = FakeCompiled()
    fn.run = lambda *args, grid, warmup, **kwargs: compiled  # what fn[grid](...) calls
    monkeypatch.setattr(launcher, "_current_device", lambda: 0)
    monkeypatch.setattr(launcher, "_current_stream", lambda index: 1234)
    monkeypatch.setattr(launcher, "interpreting", lambda: False)
    return fn, compiled


def _record(fn, x, y, rows, copy_y=False):
    rec = launcher.Recorder()
    x = rec.input("x", x, copy=False)
    y = rec.input("y", y, copy=copy_y)
    out = rec.empty("out", x.shape, x.dtype, x.device)
    desc = launcher.TensorDescriptor(x, list(x.shape), list(x.stride()), [1, 16])
    rec.launch(fn, (3, 2), desc, y, out, x.shape[1], 0.5, rows, BLOCK=16, num_warps=4)
    return rec.replay(out, dict(label="info"), torch.device("cuda", 0))


def test_a_replay_hands_the_kernel_new_addresses_and_new_descriptors(fake_gpu):
    fn, compiled = fake_gpu
    rows = torch.arange(16)
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(4, 32), rows)
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    out = replay(x, y)
    assert out.shape == (4, 32) and out.dtype == x.dtype
    (gx, gy, gz, stream, function, packed, meta, enter, leave, *args), = compiled.launches
    assert (gx, gy, gz, stream, function, packed) == (3, 2, 1, 1234, 77, (4, 1, 0))
    assert (meta, enter, leave) == (None, None, None)  # no launch hooks installed
    desc, y_ptr, out_ptr, n, scale, rows_ptr, block = args
    assert desc.base is x and desc.shape == [4, 32] and desc.block_shape == [1, 16]  # rebuilt over x
    assert (y_ptr, out_ptr) == (y.data_ptr(), out.data_ptr())  # the new tensors' addresses
    assert (n, scale, rows_ptr, block) == (32, 0.5, rows.data_ptr(), 16)  # constants as recorded
    out2 = replay(x, y)
    assert out2.data_ptr() != out.data_ptr()  # a fresh output per call


def test_a_replay_rebuilds_a_gluon_descriptor_over_the_new_tensor(fake_gpu):
    # Gluon's descriptor is its own class (it carries a shared-memory layout), not Triton's.
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    fn, compiled = fake_gpu
    rec = launcher.Recorder()
    x = rec.input("x", torch.zeros(4, 32), copy=False)
    out = rec.empty("out", x.shape, x.dtype, x.device)
    layout = gl.NVMMASharedLayout.get_default_for([1, 16], gl.float32)
    desc = GluonDescriptor(x, list(x.shape), list(x.stride()), [1, 16], layout)
    rec.launch(fn, (3, 2), desc, x, out, 32, 0.5, torch.arange(16), BLOCK=16, num_warps=4)
    replay = rec.replay(out, {}, torch.device("cuda", 0))
    assert replay is not None
    new_x = torch.randn(4, 32)
    replay(new_x)
    replayed = compiled.launches[-1][9]
    assert isinstance(replayed, GluonDescriptor) and replayed.base is new_x and replayed.layout == layout
    assert desc.base is x  # the recorded call's own descriptor is left as it was


# Triton 3.6's launch wrapper takes the kernel's arguments flat after the base ones, and a replay calls
# the entry point under it directly; from 3.7 on they come as one trailing tuple, and a replay leaves
# the launch to Triton (kernels/attention/launcher.py, _tma_launch_of).
RAW_TMA_LAYOUT = hasattr(__import__("triton.backends.nvidia.driver").backends.nvidia.driver, "_BASE_ARGS_FORMAT_LEN")


def kernel_args(received) -> list:
    """The kernel's own arguments among those the C entry point received (descriptors encoded)."""
    return list(received[13:]) if RAW_TMA_LAYOUT else list(received[-1])


class FakeTmaLauncher:
    """The installed Triton's CudaLauncher for a kernel whose first argument is a host TMA descriptor
    lowered to a CUtensorMap: its own encoding wrapper (wrap_handle_tensordesc) around a C entry
    point that records what it receives."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = False
    SIGNATURE = {"X": "tensordesc<fp32[1, 16]>", "Y": "*fp32", "Out": "*fp32", "n": "i32", "scale": "fp32",
                 "Rows": "*i64", "BLOCK": "constexpr"}

    def __init__(self):
        from triton.backends.nvidia.driver import wrap_handle_tensordesc

        self.received = []
        self.launch = wrap_handle_tensordesc(lambda *args: self.received.append(args), self.SIGNATURE,
                                             [dict(swizzle=0, elem_size=4, elem_type=7, block_size=[1, 16],
                                                   fp4_padded=False)])

    def __call__(self, gx, gy, gz, stream, function, *args):  # as CudaLauncher.__call__, without scratch
        if RAW_TMA_LAYOUT:
            self.launch(gx, gy, gz, stream, function, False, False, None, None, *args)
        else:  # metadata and hooks, scratch, argument annotations and signature, the kernel's arguments
            self.launch(gx, gy, gz, stream, function, False, False, *args[:4], None, None, None, None, args[4:])


@pytest.fixture
def fake_tma_gpu(fake_gpu, monkeypatch):
    """fake_gpu with a kernel taking a host descriptor, and a stand-in for the driver call that encodes
    one (it needs a GPU): it returns the base address, the shape and the strides, and counts its calls."""
    from triton.backends.nvidia import driver

    fn, compiled = fake_gpu
    encoded = []

    def encode(desc, meta, *_):  # Triton 3.9 passes one more argument
        encoded.append(desc.base.data_ptr())
        return [("map", desc.base.data_ptr(), tuple(meta["block_size"])), *desc.shape, *desc.strides]

    monkeypatch.setattr(driver, "make_tensordesc_arg", encode)
    compiled.run = FakeTmaLauncher()  # after the stand-in: Triton 3.8 on binds the encoder when it wraps
    return fn, compiled, encoded


def test_a_replay_keeps_encoded_tensor_maps_by_address(fake_tma_gpu):
    fn, compiled, encoded = fake_tma_gpu
    rows = torch.arange(16)
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(4, 32), rows)
    # found the C entry point under Triton's wrapper, where its layout is the one the replay knows
    assert (replay.launches[0].tma is not None) == RAW_TMA_LAYOUT
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    first_call = len(encoded)
    out = replay(x, y)
    direct = compiled.run.received[-1]
    # What Triton's own launch hands the C entry point for the same call.
    desc = launcher.TensorDescriptor(x, list(x.shape), list(x.stride()), [1, 16])
    compiled.run(3, 2, 1, 1234, 77, (4, 1, 0), None, None, None, desc, y.data_ptr(), out.data_ptr(), 32, 0.5,
                 rows.data_ptr(), 16)
    assert direct == compiled.run.received[-1]
    # the map over the new x, then its shape and strides
    assert kernel_args(direct)[0] == ("map", x.data_ptr(), (1, 16))
    encodes = len(encoded)
    assert encodes == first_call + 2  # one encode by the replay, one by Triton's launch above
    replay(x, torch.randn(4, 32))
    # same x: the kept map, no new encoding (Triton's own launch encodes every call)
    assert len(encoded) == encodes + (not RAW_TMA_LAYOUT)
    encodes = len(encoded)
    other = torch.randn(4, 32)
    replay(other, y)
    assert len(encoded) == encodes + 1 and kernel_args(compiled.run.received[-1])[0][1] == other.data_ptr()


def test_a_replay_keeps_a_bounded_number_of_maps(fake_tma_gpu):
    fn, compiled, encoded = fake_tma_gpu
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(4, 32), torch.arange(16))
    xs = [torch.randn(4, 32) for _ in range(launcher._MAPS_PER_ARGUMENT + 3)]
    for x in xs:
        replay(x, x)
    (maps,) = replay.launches[0].maps.values()
    assert (0 < len(maps) if RAW_TMA_LAYOUT else len(maps) == 0) and len(maps) <= launcher._MAPS_PER_ARGUMENT
    assert kernel_args(compiled.run.received[-1])[0][1] == xs[-1].data_ptr()


def test_a_kernel_that_needs_scratch_memory_replays_through_triton(fake_tma_gpu):
    fn, compiled, _ = fake_tma_gpu
    compiled.run.global_scratch_size = 128
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(4, 32), torch.arange(16))
    assert replay.launches[0].tma is None


def test_a_replay_copies_an_input_the_first_call_copied(fake_gpu):
    fn, compiled = fake_gpu
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(32, 4).t(), torch.arange(16), copy_y=True)
    y = torch.randn(32, 4).t()
    replay(torch.zeros(4, 32), y)
    y_ptr = compiled.launches[-1][9 + 1]
    assert y_ptr != y.data_ptr()  # the kernel read a contiguous copy, not the strided view


def test_a_replay_keeps_no_tensor_of_the_first_call_alive(fake_gpu):
    fn, _ = fake_gpu
    x, y = torch.zeros(4, 32), torch.zeros(4, 32)
    refs = [weakref.ref(x), weakref.ref(y)]
    rows = torch.arange(16)
    replay = _record(fn, x, y, rows)
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert replay is not None and any(rows is t for launch in replay.launches for t in launch.keep)


def test_a_launch_hook_sends_the_call_back_through_triton(fake_gpu):
    fn, compiled = fake_gpu
    replay = _record(fn, torch.zeros(4, 32), torch.zeros(4, 32), torch.arange(16))

    def hook(metadata):
        pass

    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        assert replay(torch.zeros(4, 32), torch.zeros(4, 32)) is None
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    assert replay(torch.zeros(4, 32), torch.zeros(4, 32)) is not None


def test_an_autotuned_launch_is_recorded_with_its_chosen_config(fake_gpu):
    fn, compiled = fake_gpu
    tuner = triton.autotune(configs=[triton.Config(dict(BLOCK=32), num_warps=8)], key=[])(fn)
    rec = launcher.Recorder()
    x = rec.input("x", torch.zeros(4, 32), copy=False)
    out = rec.empty("out", x.shape, x.dtype, x.device)
    desc = launcher.TensorDescriptor(x, [4, 32], [32, 1], [1, 16])
    rec.launch(tuner, lambda meta: (meta["BLOCK"], 1), desc, x, out, 32, 0.5, x)
    replay = rec.replay(out, {}, torch.device("cuda", 0))
    replay(torch.zeros(4, 32))
    launch = compiled.launches[-1]
    assert launch[:3] == (32, 1, 1)  # the grid from the chosen config's BLOCK
    assert launch[-1] == 32  # BLOCK, the constexpr, passed in its place as Triton does


def test_a_launch_the_recorder_cannot_follow_is_never_replayed(fake_gpu):
    rec = launcher.Recorder()
    out = rec.empty("out", (4,), torch.float32, torch.device("cpu"))

    class NotTriton:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    rec.launch(NotTriton(), (1,), out)
    assert rec.replay(out, {}, torch.device("cuda", 0)) is None


# --- replays under the interpreter, through the real wrappers -----------------------------------


@pytest.fixture
def replays(monkeypatch):
    """Replays switched on under the interpreter, with empty caches."""
    monkeypatch.setattr(launcher, "_under_interpreter", True)
    dispatch.clear_launch_cache()
    attention_hopper._CACHE.clear()
    yield
    dispatch.clear_launch_cache()
    attention_hopper._CACHE.clear()


def test_without_replays_under_the_interpreter_nothing_is_cached():
    dispatch.clear_launch_cache()
    q, k, v = qkv((1, 2, 20, 16), torch.float16)
    attention.flash_attention(q, k, v)
    attention.flash_attention(q, k, v)
    assert dispatch.launch_cache_info()["entries"] == 0


def test_portable_path_new_address_misaligned_view_and_new_scale(replays):
    shape = (2, 3, 37, 32)
    q, k, v = qkv(shape, torch.float16, seed=1)
    out1 = attention.flash_attention(q, k, v, True)
    assert err(out1, q, k, v, True) <= ATOL
    info1 = attention.kernel_config_of_last_call()
    assert dispatch.launch_cache_info() == dict(hits=0, misses=1, entries=1)

    # New tensors, same key: a replay, and it reads the new inputs, not the old.
    q2, k2, v2 = qkv(shape, torch.float16, seed=2)
    out2 = attention.flash_attention(q2, k2, v2, True)
    assert dispatch.launch_cache_info() == dict(hits=1, misses=1, entries=1)
    assert err(out2, q2, k2, v2, True) <= ATOL and not torch.equal(out1, out2)
    assert attention.kernel_config_of_last_call() == info1

    # A view whose address is off 16 bytes: another key (Triton specialises on alignment).
    qm, km, vm = odd_layout("misaligned", *shape, torch.float16, seed=3)
    out3 = attention.flash_attention(qm, km, vm, True)
    assert dispatch.launch_cache_info() == dict(hits=1, misses=2, entries=2)
    assert err(out3, qm, km, vm, True) <= ATOL

    # Another sm_scale: another key, and the new scale is used.
    out4 = attention.flash_attention(q2, k2, v2, True, sm_scale=0.3)
    assert dispatch.launch_cache_info()["entries"] == 3
    assert err(out4, q2, k2, v2, True, 0.3) <= ATOL

    # The misaligned layout again, in new storage: a replay of its own entry.
    qm, km, vm = odd_layout("misaligned", *shape, torch.float16, seed=4)
    out5 = attention.flash_attention(qm, km, vm, True)
    assert dispatch.launch_cache_info() == dict(hits=2, misses=3, entries=3)
    assert err(out5, qm, km, vm, True) <= ATOL


def test_a_strided_input_is_copied_again_on_replay(replays):
    for seed in (5, 6):
        q, k, v = odd_layout("d-strided", 1, 2, 20, 16, torch.float16, seed=seed)
        out = attention.flash_attention(q, k, v)
        assert err(out, q, k, v, False) <= ATOL
    assert dispatch.launch_cache_info()["hits"] == 1


def test_bad_input_is_refused_before_any_lookup_can_hide_it(replays):
    q, k, v = qkv((1, 1, 8, 16), torch.float16)
    attention.flash_attention(q, k, v)
    with pytest.raises(ValueError, match="sm_scale"):
        attention.flash_attention(q, k, v, sm_scale=float("nan"))
    with pytest.raises(ValueError, match="same shape"):
        attention.flash_attention(q, k, v[..., :4, :])
    with pytest.raises(ValueError, match="torch.Tensor"):
        attention.flash_attention("q", k, v)


@pytest.mark.parametrize("features", [
    attention_hopper.Features(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=True),
    attention_hopper.Features(warp_spec=True, causal_split=True),  # two launches, scratch, host descriptors
    attention_hopper.Features(),  # the descriptor kernel: host descriptors
], ids=["pairs_lean", "causal_split", "tma"])
def test_hopper_path_new_address_misaligned_view_and_new_scale(replays, features):
    shape = (1, 2, 37, 16)
    run = attention_hopper.run_for_test
    q, k, v = qkv(shape, torch.float16, seed=1)
    out1 = run(q, k, v, True, features=features)
    assert err(out1, q, k, v, True) <= ATOL
    q2, k2, v2 = qkv(shape, torch.float16, seed=2)
    out2 = run(q2, k2, v2, True, features=features)
    assert attention_hopper._CACHE.info() == dict(hits=1, misses=1, entries=1)
    assert err(out2, q2, k2, v2, True) <= ATOL
    assert attention_hopper.last_launch()["features"] == features  # the replay reports its launch too

    qm, km, vm = odd_layout("misaligned", *shape, torch.float16, seed=3)
    assert err(run(qm, km, vm, True, features=features), qm, km, vm, True) <= ATOL
    assert err(run(q2, k2, v2, True, sm_scale=0.3, features=features), q2, k2, v2, True, 0.3) <= ATOL
    assert attention_hopper._CACHE.info() == dict(hits=1, misses=3, entries=3)


def test_the_public_hopper_function_and_the_test_entry_keep_apart(replays):
    q, k, v = qkv((1, 1, 16, 16), torch.float16)
    attention_hopper.run_for_test(q, k, v)
    with pytest.raises(ValueError, match="Hopper path cannot run here"):
        attention_hopper.hopper_attention(q, k, v, config=attention_hopper._INTERPRETER_CONFIG)


def test_a_call_without_replays_goes_through_triton_and_replays_come_back_after(replays):
    # The iterations phase reads a version's registers from the CompiledKernel Triton returns; a version
    # routed to another's kernel and config has the same key, and must not be handed the other's replay.
    from collect.calls import CaptureCompiled

    q, k, v = qkv((1, 2, 20, 16), torch.float16, seed=3)
    attention.flash_attention(q, k, v)
    attention.flash_attention(q, k, v)
    assert dispatch.launch_cache_info()["hits"] == 1  # a replay (on a GPU it launches without returning the kernel)
    with CaptureCompiled([portable._attn_fwd]) as capture, launcher.replays_off():
        out = attention.flash_attention(q, k, v)
    assert len(capture.kernels) == 1 and err(out, q, k, v, False) <= ATOL
    assert dispatch.launch_cache_info()["hits"] == 1  # no replay inside the block
    attention.flash_attention(q, k, v)
    assert dispatch.launch_cache_info()["hits"] == 2  # and replays again after it
