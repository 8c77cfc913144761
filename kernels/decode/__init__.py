"""Decode: one token per step of GPT-2 against a KV cache, eager or as one CUDA graph per step.

A reader starts at ``session.py``: every decode loop the report times (ours eager, ours fused in
a CUDA graph, transformers' eager and compiled) behind one interface. Below it, one concern per
file:

- ``gpt2.py``: the compact GPT-2 decoder that borrows transformers' weights, and its cache;
- ``attention.py``: split-KV decode attention (bf16/fp16 or int8 cache), the one kernel a layer's
  attention takes, and ``split_kv_config.py``: the configs, split counts and launches it is run with;
- ``kv_quant.py``: the int8 cache's per-token, per-head quantization;
- ``gpt2_fused.py`` and ``fused_linear.py``: the fused step, its matrix products with the
  bias, GELU and residual folded in, and the argmax;
- ``read_floor.py``: the step's read-only twin, the loop time with no work in it;
- ``arrival.py`` and ``prefetch.py``: the last-arriver handshake and the L2 prefetch the kernels
  share.

Nothing here imports ``kernels/attention/``: the prefill kernels and these never meet.
"""
