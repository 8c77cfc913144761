"""How split-KV decode attention (attention.py) is launched: the configs its autotuner may pick, how
finely a cache is split, and the launches a decode step measures.

Settings, and the rules that choose among them, apart from the kernels so that each reads beside the
measurement that chose it (kernels/decode/notes.md, under its name here); attention.py keeps the
kernels and their launchers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from ..common import device_sm_count


def _config(block_n, warps, dot=False, stages=1, unroll=1, ahead=0):
    return triton.Config({"BLOCK_N": block_n, "USE_DOT": dot, "UNROLL": unroll, "AHEAD": ahead}, num_warps=warps,
                         num_stages=stages)


def _same(c, d) -> bool:
    return c.kwargs == d.kwargs and c.num_warps == d.num_warps and c.num_stages == d.num_stages


# Few configs on purpose: the phase pays for every compile and every timing of them. CUDA-core
# schedules first, then tensor-core ones (where Triton's pipeliner keeps loads in flight). On an
# int8 cache the CUDA-core schedule was the fastest at every shape of a sweep on the H200 once it
# rescaled lazily and widened by byte permutes; one tensor-core config stays for other GPUs.
BF16_CONFIGS = [
    _config(32, 4),
    _config(64, 4),
    _config(64, 8),
    _config(64, 4, dot=True, stages=3),
    _config(128, 8, dot=True, stages=3),
]
# The fastest of H200 sweeps that compile without spills for the T4, A100 and H100 (the sweeps:
# kernels/decode/notes.md, "split_kv_config.INT8_CONFIGS").
INT8_CONFIGS = [
    _config(64, 2),
    _config(64, 2, ahead=1),
    _config(64, 1, ahead=1),
    _config(32, 4, unroll=2),
    _config(128, 4),
    _config(128, 4, dot=True, stages=4),
]
AUTOTUNE_CONFIGS = BF16_CONFIGS + [c for c in INT8_CONFIGS if not any(_same(c, d) for d in BF16_CONFIGS)]
# Under the interpreter (CPU tests) one fixed config runs; autotuning needs a GPU.
INTERPRET_CONFIG = {"BLOCK_N": 16, "USE_DOT": False, "UNROLL": 1, "AHEAD": 0, "num_warps": 1, "num_stages": 1}


# The CUDA-core schedule keeps a BLOCK_N x head_dim fp32 accumulator (one row stream per key row of
# a tile) spread over the program's threads. Past this many registers a thread, the loads and the
# rest of the loop no longer fit beside it and ptxas spills (64-key tiles on one warp at head_dim 128
# would hold 256).
MAX_ROW_STREAM_REGS = 128


def _fits_head_dim(c: triton.Config, head_dim: int) -> bool:
    if c.kwargs["USE_DOT"]:
        return True
    return c.kwargs["BLOCK_N"] * triton.next_power_of_2(head_dim) <= MAX_ROW_STREAM_REGS * 32 * c.num_warps


def tunable_configs(int8: bool, capability: tuple[int, int], head_dim: int) -> list[triton.Config]:
    """The configs the autotuner may pick for this cache and head_dim on a GPU of this capability."""
    configs = INT8_CONFIGS if int8 else BF16_CONFIGS
    # Tensor-core dots need Ampere or newer in Triton; a T4 keeps the CUDA-core schedules.
    return [c for c in configs if (capability >= (8, 0) or not c.kwargs["USE_DOT"]) and _fits_head_dim(c, head_dim)]


def prune_configs(configs, named_args, **kwargs):
    """The autotuner's early_config_prune: of its configs, those tunable_configs allows for this
    launch's cache, head_dim and GPU."""
    q = named_args.get("Q")
    capability = torch.cuda.get_device_capability(q.device) if q is not None and q.is_cuda else (9, 0)
    wanted = tunable_configs(bool(kwargs.get("IS_INT8")), capability, kwargs["HEAD_DIM"])
    return [c for c in configs if any(_same(c, d) for d in wanted)]


def as_launch_config(c: triton.Config) -> dict:
    """A config as split_kv_attention's `config` argument takes it."""
    return dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)


def len_bucket(batch_heads: int, capacity: int) -> int:
    """Problem-size classes (keys read per call) so autotuning runs once per doubling of the work, not
    once per shape: up to 2^14 keys one class, then one per power of two. Wider classes handed one
    shape the config tuned at another (kernels/decode/notes.md, "split_kv_config.len_bucket")."""
    return max(0, (batch_heads * capacity - 1).bit_length() - 14)


@dataclass
class SplitPolicy:
    """How finely the cache is split: at most `waves` programs per SM (default_num_splits rounds down),
    no chunk under `min_chunk` keys. Finer splits lost on the H200 (kernels/decode/notes.md,
    "split_kv_config.SplitPolicy")."""

    waves: float = 4.0
    min_chunk: int = 128


SPLITS = SplitPolicy()


@dataclass(frozen=True)
class AttentionLaunch:
    """How a step launches its attention. `pdl`: as a programmatic dependent of the launch before it
    (sm90+), which must not write the lengths or any cache row but the newest; the kernel reads the
    lengths and asks L2 for its first `prefetch_keys` keys and values while it waits, and lets the
    next launch start right after the wait (`early_trigger`) or after its loop. `new_kv`: the qkv
    product hands the newest key and value to the attention, which writes them into the cache
    (quantized there for an int8 cache; split_kv_attention's new_kv), instead of writing them itself.
    Which one wins depends on the model, the cache and the GPU, so the step measures them
    (kernels/decode/session.py)."""

    pdl: bool = False
    prefetch_keys: int = 0
    early_trigger: bool = True
    new_kv: bool = False

    @property
    def label(self) -> str:
        """'plain', or 'pdl' with what it does while waiting and when it lets the next launch start;
        '+new-kv' where the attention writes the newest key and value."""
        how = "plain" if not self.pdl else "pdl" + (f"-prefetch{self.prefetch_keys}" if self.prefetch_keys else "") + \
            ("" if self.early_trigger else "-late")
        return how + ("+new-kv" if self.new_kv else "")


PLAIN_LAUNCH = AttentionLaunch()
# What a step measures (kernels/decode/session.py): which launch wins depends on the model, the cache
# and the GPU, too close to fix by rule (kernels/decode/notes.md, "split_kv_config.LAUNCH_CHOICES").
LAUNCH_CHOICES = tuple(AttentionLaunch(how.pdl, how.prefetch_keys, how.early_trigger, new_kv)
                       for new_kv in (False, True)
                       for how in (AttentionLaunch(), AttentionLaunch(True, 64), AttentionLaunch(True, 64, False)))


def launch_choices(pdl: bool) -> tuple[AttentionLaunch, ...]:
    """The launches worth measuring: PDL ones only where the step launches with PDL at all (the
    products decide: fused_linear.uses_pdl)."""
    return tuple(how for how in LAUNCH_CHOICES if pdl or not how.pdl)


def compiled_launches(pdl: bool) -> tuple[AttentionLaunch, ...]:
    """One launch per compiled variant of the choices: plain or PDL, with the newest row or without
    (what tells the PDL launches apart are runtime arguments)."""
    return tuple({(how.pdl, how.new_kv): how for how in launch_choices(pdl)}.values())


def default_num_splits(batch: int, heads: int, capacity: int, device: torch.device) -> int:
    """As many programs as SPLITS.waves per SM, not more, and no chunk shorter than SPLITS.min_chunk keys.
    Rounded down: where that many programs fit on an SM they run in one wave, and one split more would
    start a second wave for a fraction of them."""
    want = max(1, math.floor(SPLITS.waves * device_sm_count(device) / max(1, batch * heads)))
    return max(1, min(want, math.ceil(capacity / SPLITS.min_chunk), 256))


def config_label(config: dict) -> str:
    """A launch config (as_launch_config's form) as the report names it."""
    kind = "tensor cores" if config.get("USE_DOT") else "CUDA cores"
    unroll = config.get("UNROLL", 1)
    ahead = config.get("AHEAD", 0)
    return (f"{kind}, BLOCK_N={config.get('BLOCK_N')}" + (f", {unroll} tiles per iteration" if unroll > 1 else "")
            + (f", rows asked of L2 {ahead} {'iteration' if ahead == 1 else 'iterations'} ahead" if ahead else "")
            + f", num_warps={config.get('num_warps')}, num_stages={config.get('num_stages')}")
