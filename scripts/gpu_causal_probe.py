"""One attention call inside a profiler range, for Nsight Compute to look at (H200 development).

    ncu --profile-from-start off --clock-control none --section WarpStateStats ... \
        python3 scripts/gpu_causal_probe.py --impl v8-causal-pairs --causal

The call is made twice first with the profiler off (compilation), then once between
cudaProfilerStart and cudaProfilerStop. --impl: a kernels/attention_versions.py version name,
sdpa-cudnn, or triton / triton-portable (flash_attention as shipped / on the portable path).
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from anywhere

import torch  # noqa: E402

from kernels import attention as A  # noqa: E402
from kernels import attention_versions as V  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", required=True, help="a version name, sdpa-cudnn, triton or triton-portable")
    ap.add_argument("--causal", action="store_true", help="causal attention (default: non-causal)")
    ap.add_argument("--shape", default="4,32,4096,128", help="batch,heads,seq_len,head_dim")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    q, k, v = (torch.randn(shape, device="cuda", dtype=getattr(torch, a.dtype)) for _ in range(3))
    fn = V.get_version(a.impl) if a.impl in V.VERSIONS else A.get_impl(a.impl)
    for _ in range(2):
        fn(q, k, v, a.causal)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn(q, k, v, a.causal)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"{a.impl} causal={a.causal} shape={shape} {a.dtype}: profiled one call", file=sys.stderr)


if __name__ == "__main__":
    main()
