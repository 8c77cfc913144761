"""The last-arriver handshake the decode kernels share: many programs each leave a partial result,
and the last of them to finish combines them all inside the same launch, so no second kernel is
launched to do it. The split-K products, split-KV attention and the argmax all use it. And the wait
the persistent step's tiles use (issue 44, kernels/decode/persistent_step.py): a bounded spin on a
counter that fails with a name instead of hanging."""
import triton
import triton.language as tl


@triton.jit
def arrive(counter, total):
    """Count this program's arrival at `counter`, once every thread's partial is stored; true for the
    last of `total` programs. acq_rel at GPU scope: the last arriver sees every earlier partial."""
    tl.debug_barrier()
    return tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == total - 1


@triton.jit
def reset(counter, BY_STORE: tl.constexpr = False):
    """Zero a counter for the next launch: the last arriver's final step (a CUDA graph replays it). BY_STORE: a
    plain store instead of an atomic exchange. Either is safe, since nothing in the same launch reads the counter
    after the last arrival and the next launch's atomics come after the kernel boundary; the store sets no
    scoreboard, where ptxas waits for the exchange's return beside the epilogue's loads (kernels/decode/notes.md,
    "Static SASS of the graph step's kernels")."""
    if BY_STORE:
        tl.store(counter, 0)
    else:
        tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")


@triton.jit
def wait_for(counter, target, max_polls, Status, code):
    """Spin until `counter` reaches `target`, reading it at most `max_polls` times; true once it has.
    A wait that times out records `code` in `Status` (the first to time out wins) and returns false, so
    the host can name what never arrived (check_waits) instead of the GPU hanging: the persistent
    step's blocks wait on counters that other blocks raise, and a block that is not resident, or a tile
    no list holds, would leave them spinning for ever.

    The first read is an acquire at GPU scope: a counter already at its target (most waits of a step)
    costs one round trip, and once it is seen the tiles that raised it are visible. The polls after it
    are relaxed and one acquire follows them: on an H200 an acquire read is a strong load plus an
    invalidation of the whole L1 (CCTL.IVALL), which Nsight Compute sampled at 3-5% of the persistent
    step's warps, once per poll (scripts/profile_persistent.py). A relaxed read that sees the last
    increment, then an acquire of the same counter, reads from the same release sequence (every raise
    is an atomic add), so the tiles stay visible."""
    seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
    polls = 1
    while (seen < target) & (polls < max_polls):
        seen = tl.atomic_add(counter, 0, sem="relaxed", scope="gpu")
        polls += 1
    if (seen >= target) & (polls > 1):
        # Its value is used: Triton drops an atomic add of 0 whose result is not, and the acquire with it (the
        # warp-specialized step met that on the GPU; kernels/decode/notes.md, persistent_ws). The counter only
        # grows within a launch, so it still reads at least the target.
        seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
    ok = seen >= target
    if not ok:
        tl.atomic_cas(Status, 0, code, sem="relaxed", scope="gpu")
    return ok


@triton.jit
def wait_probe(Counters, Targets, Ok, Status, MAX_POLLS: tl.constexpr):
    """Program i waits for counter i to reach target i, its time-out code i + 1, as a tile of the persistent
    step waits on the operation before it: wait_for alone, for the tests to run under the interpreter (the
    persistent step's kernel is too large to make each wait's outcome visible)."""
    i = tl.program_id(0)
    ok = wait_for(Counters + i, tl.load(Targets + i), MAX_POLLS, Status, i + 1)
    tl.store(Ok + i, ok.to(tl.int32))


def check_waits(status, names) -> None:
    """Raise RuntimeError naming the counter a launch timed out on: `status` is the Status word wait_for
    wrote (0: every wait returned), `names[code - 1]` what that code's counter counts."""
    code = int(status.item())
    if code:
        what = names[code - 1] if 0 < code <= len(names) else f"counter code {code}"
        raise RuntimeError(f"the persistent step timed out waiting for {what}: a block that should raise it never "
                           "ran (not resident at once with the others) or never got its tile. Check the grid with "
                           "persistent_plan.check_resident and the lists with persistent_plan.check_plan.")


def compile_specs(target):
    """wait_for, through wait_probe (kernels/aot.py): acquire loads in a bounded loop and one compare-and-swap,
    no tensor cores."""
    import torch

    from ..aot import CompileSpec, meta

    def launch():
        counters = meta(2, dtype=torch.int32)
        wait_probe[(2,)](counters, counters, counters, counters, MAX_POLLS=1 << 20)

    return [CompileSpec("int32 counters", launch, tensor_cores=False)]
