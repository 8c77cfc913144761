"""The compile pools on the CPU: real spawned workers for the pool, fakes for the runner's use of it."""
import re
import types

import pytest
import torch

from collect import correctness, precompile, runner
from collect.precompile import CompileWork, SharedCompilePool, compile_ahead

CPU = torch.device("cpu")


def _work(label, *cases_and_configs):
    cases = [c for c, _ in cases_and_configs]
    configs = {c: cfg for c, cfg in cases_and_configs if cfg}
    return CompileWork(label, correctness._compile_variant, tuple(correctness.compile_tasks(cases, configs, "cpu")))


GOOD = correctness.Case("triton", "float16", True, 1, 3, 40, 16)
BAD = correctness.Case("triton", "float16", False, 1, 3, 64, 16)
BAD_TILE = [dict(BLOCK_M=24, BLOCK_N=16)]  # not a power of two: the kernel refuses it


def test_one_pool_serves_each_phase_its_own_results(capsys):
    first, second = _work("first", (GOOD, None)), _work("second", (GOOD, None), (BAD, BAD_TILE))
    pool = SharedCompilePool([first, second], workers=2)
    try:
        assert pool.covers("first") and pool.covers("second") and not pool.covers("third")
        assert pool.wait("second") == 1  # out of order: the queue keeps going
        assert pool.wait("first") == 0
    finally:
        pool.close()
    err = capsys.readouterr().err
    assert "second: compiled 2 kernel variants in the shared pool of 2 processes" in err
    # what each phase's work cost the workers, which sets when the first timed phase can start
    assert re.search(r"second: .* \d+ s of worker time, the slowest variant \d+\.\d s", err)
    # closed: a phase asking again gets the answer it had, without a pool
    assert pool.wait("second") == 1 and compile_ahead(pool, second) == 1
    assert "compiled" not in capsys.readouterr().err


def test_a_phase_without_the_shared_pool_compiles_alone(capsys):
    work = _work("alone", (GOOD, None), (BAD, BAD_TILE))
    assert compile_ahead(None, work, workers=2) == 1
    assert "alone: compiled 2 kernel variants with 2 processes" in capsys.readouterr().err
    assert compile_ahead(None, None) is None and compile_ahead(None, CompileWork("none", len, ())) is None


@pytest.fixture
def fake_pool(monkeypatch):
    """The runner with fake phases that compile ahead, and a pool that records what happens to it."""
    import synthetic
    from collect import env

    events = []

    class Pool:
        def __init__(self, works):
            self.labels = [w.label for w in works]
            self.workers = 3
            self.closed = False
            events.append(("start", tuple(self.labels)))

        def close(self):
            if not self.closed:
                events.append(("close",))
            self.closed = True

    monkeypatch.setattr(precompile, "SharedCompilePool", Pool)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(env, "describe_device", lambda: synthetic.device("NVIDIA H200"))
    monkeypatch.setattr(env, "software_versions", lambda: {"python": "3.x"})

    def phase(name, compiles):
        def run(ctx):
            events.append((name, "pool closed" if ctx.compile_pool is None or ctx.compile_pool.closed else "pool open"))
            if name == "env":
                return env.EnvResult(device=synthetic.device(), software={}, clocks=[], datasheet=None,
                                     measured_ceilings=[])
            return {"schema_version": 2, "run_id": ctx.run_id, "rows": [{"x": 1}]}

        mod = types.SimpleNamespace(run=run)
        if compiles:
            mod.compile_work = lambda ctx: CompileWork(name, len, (("task",),))
        return mod

    modules = {n: phase(n, n in ("correctness", "iterations", "decode")) for n in runner.PHASE_ORDER}
    monkeypatch.setattr(runner, "phase_module", lambda name: modules[name])
    return events


def test_the_runner_compiles_ahead_once_and_stops_before_anything_is_timed(tmp_path, fake_pool):
    assert runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="p-1")) == 0
    assert fake_pool == [
        ("env", "pool closed"),  # env measures first; the pool starts after it
        ("start", ("correctness", "iterations", "decode")),
        ("correctness", "pool open"),  # correctness times nothing: the workers keep compiling
        ("close",),
        ("bench", "pool closed"), ("iterations", "pool closed"), ("profile", "pool closed"),
        ("decode", "pool closed"),
    ]


def test_the_shared_pool_can_be_turned_off(tmp_path, fake_pool, monkeypatch):
    monkeypatch.setenv(runner.SHARED_COMPILE_ENV, "0")
    assert runner.run_collect(runner.CollectConfig(out=tmp_path, run_id="p-2", phases=["iterations"])) == 0
    assert fake_pool == [("iterations", "pool closed")]


def _append_label(task):
    """A compile task for the tests: write the task's label to its file, in the order the worker met it."""
    path, label = task
    with open(path, "a", encoding="utf-8") as f:
        f.write(label + "\n")


def test_heavy_work_is_queued_before_the_phases_before_it(tmp_path):
    log = tmp_path / "order.txt"
    light = CompileWork("correctness", _append_label, tuple((str(log), f"light{i}") for i in range(3)))
    heavy = CompileWork("decode", _append_label, ((str(log), "heavy0"), (str(log), "heavy1")), heavy=True)
    pool = SharedCompilePool([light, heavy], workers=1)  # one worker: it meets the tasks in queue order
    try:
        assert pool.wait("correctness") == 0 and pool.wait("decode") == 0
    finally:
        pool.close()
    assert log.read_text().split() == ["heavy0", "heavy1", "light0", "light1", "light2"]


def test_as_done_yields_every_task_once_and_leaves_the_answer_for_wait(capsys):
    work = _work("ordered", (GOOD, None), (BAD, BAD_TILE))
    pool = SharedCompilePool([work], workers=2)
    try:
        assert sorted(pool.as_done("ordered")) == [0, 1]
        assert pool.wait("ordered") == 1  # the bad tile raised in its worker
        assert list(pool.as_done("ordered")) == []  # nothing left to order
    finally:
        pool.close()
    err = capsys.readouterr().err
    assert "ordered: compiled 2 kernel variants in the shared pool of 2 processes" in err
    assert re.search(r"ordered: .*its cases running as each was ready; \d+ s of worker time", err)


def test_as_done_gives_up_on_a_stalled_pool_and_yields_what_is_left(capsys):
    class Stuck:
        def ready(self):
            return False

    pool = SharedCompilePool([], stall_s=0.05)
    pool._pending["stuck"] = [Stuck(), Stuck()]
    assert list(pool.as_done("stuck")) == [0, 1]
    assert pool.wait("stuck") is None  # broke down: the cases compile for themselves
    assert "stalled" in capsys.readouterr().err
