"""The last-arriver handshake the decode kernels share: many programs each leave a partial result,
and the last of them to finish combines them all inside the same launch, so no second kernel is
launched to do it. The split-K products, split-KV attention and the argmax all use it."""
import triton
import triton.language as tl


@triton.jit
def arrive(counter, total):
    """Count this program's arrival at `counter`, once every thread's partial is stored; true for the
    last of `total` programs. acq_rel at GPU scope: the last arriver sees every earlier partial."""
    tl.debug_barrier()
    return tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == total - 1


@triton.jit
def reset(counter):
    """Zero a counter for the next launch: the last arriver's final step (a CUDA graph replays it)."""
    tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
