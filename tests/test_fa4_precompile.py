"""FlashAttention-4's ahead-of-time compile tasks: grouping, and when there is nothing to do."""
from collect import bench, fa4_precompile
from collect.shapes import AttentionCase


def test_one_task_per_dtype_head_size_and_mask_holding_each_shape_once():
    cases = [AttentionCase("fa4", "float16", False, 2, 8, 512, 64), AttentionCase("fa4", "float16", False, 2, 8, 512, 64),
             AttentionCase("fa4", "float16", False, 4, 32, 4096, 64), AttentionCase("fa4", "bfloat16", True, 2, 8, 512, 64),
             AttentionCase("triton", "float16", False, 2, 8, 512, 64)]
    assert fa4_precompile.compile_tasks(cases) == [
        ("bfloat16", 64, True, ((2, 8, 512),)),
        ("float16", 64, False, ((2, 8, 512), (4, 32, 4096))),
    ]
    # the bench phase's full plan: one task per class FA4 is timed in (2 dtypes x 2 masks x d64, d80, d96, d128)
    tasks = fa4_precompile.compile_tasks(bench.PLANS["full"].cases())
    assert len(tasks) == 16 and sum(len(t[3]) for t in tasks) == 4 * 16


def test_no_work_without_the_disk_cache_or_where_fa4_cannot_run(monkeypatch):
    cases = [AttentionCase("fa4", "float16", False, 2, 8, 512, 64)]
    monkeypatch.delenv(fa4_precompile.CACHE_ENV, raising=False)
    assert fa4_precompile.compile_work(cases, "bench") is None  # a worker's compile would be lost
    monkeypatch.setenv(fa4_precompile.CACHE_ENV, "1")
    monkeypatch.setattr("kernels.attention.flash_attn4.unavailable_reason", lambda device=None: "not installed")
    assert fa4_precompile.compile_work(cases, "bench") is None
    monkeypatch.setattr("kernels.attention.flash_attn4.unavailable_reason", lambda device=None: None)
    work = fa4_precompile.compile_work(cases, "bench")
    assert work.label == "bench" and work.heavy and work.tasks == (("float16", 64, False, ((2, 8, 512),)),)


def test_the_collect_turns_the_cache_on_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv(fa4_precompile.CACHE_ENV, raising=False)
    fa4_precompile.enable_persistent_cache()
    import os

    assert os.environ[fa4_precompile.CACHE_ENV] == "1"
    monkeypatch.setenv(fa4_precompile.CACHE_ENV, "0")
    fa4_precompile.enable_persistent_cache()
    assert os.environ[fa4_precompile.CACHE_ENV] == "0"
