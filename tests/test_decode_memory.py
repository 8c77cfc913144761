"""Decode memory as each loop holds it: the other models the phase keeps loaded are taken out where
the run says what they held, and the pages say so either way."""
from __future__ import annotations

import dataclasses
import re
import base64
from types import SimpleNamespace

import numpy as np
import pandas as pd

from collect.jsonio import write_json_atomic
from render.decode_memory import others_resident, own_memory
from render.pages.compare import ComparePage
from render.runs import load_runs
from test_compare import plot_data
from test_decode_page import MiB, W2, WXL, decode_file, write
from test_home import write_run


def _values(y) -> list[float]:
    """A trace's values, as plotly writes them: a list, or a typed array in base64."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"])).tolist()
    return list(y)


def _models(**held):
    return [SimpleNamespace(name=k, resident_bytes=v) for k, v in held.items()]


def test_each_model_loses_the_others_bytes_and_only_those():
    assert others_resident(_models(a=10, b=200, c=3000)) == {"a": 3200, "b": 3010, "c": 210}
    rows = pd.DataFrame({"model": ["a", "b", "c"], "peak_mem_bytes": [5000, 5000, 5000],
                         "mem_at_start_bytes": [4000, 4000, None], "kv_cache_bytes": [7, 7, 7]})
    own, ok = own_memory(rows, _models(a=10, b=200, c=3000))
    assert ok and list(own["peak_mem_bytes"]) == [1800, 1990, 4790]
    assert list(own["mem_at_start_bytes"][:2]) == [800, 990] and pd.isna(own["mem_at_start_bytes"][2])
    assert list(own["kv_cache_bytes"]) == [7, 7, 7]  # the cache is the loop's own already
    assert list(rows["peak_mem_bytes"]) == [5000, 5000, 5000]  # the caller's frame is left alone


def test_without_every_models_figure_nothing_is_taken_out_and_that_is_said():
    rows = pd.DataFrame({"model": ["a", "b"], "peak_mem_bytes": [5000, 5000], "mem_at_start_bytes": [1, 1]})
    own, ok = own_memory(rows, _models(a=10, b=None))
    assert not ok and own["peak_mem_bytes"].tolist() == [5000, 5000]
    assert others_resident(_models(a=10, b=None)) is None
    assert own_memory(rows, _models(a=None))[1]  # one model: nothing else was loaded


def _two_models_loaded(resident: bool, run_id: str = "synthetic-20261129"):
    """The synthetic run's rows as the phase records them: each also holds the other model's weights."""
    f = decode_file(run_id)
    held = {"gpt2": W2 + 3 * MiB, "gpt2-xl": WXL + 5 * MiB}
    other = {"gpt2": held["gpt2-xl"], "gpt2-xl": held["gpt2"]}
    f.models = [dataclasses.replace(m, resident_bytes=held[m.name] if resident else None) for m in f.models]
    f.rows = [dataclasses.replace(r, peak_mem_bytes=r.peak_mem_bytes + other[r.model],
                                  mem_at_start_bytes=r.mem_at_start_bytes + other[r.model])
              if r.peak_mem_bytes is not None else r for r in f.rows]
    return f


def test_the_decode_page_draws_and_prints_each_loops_own_memory(tmp_path):
    own = write(tmp_path / "own", _two_models_loaded(True))
    plain = write(tmp_path / "plain", decode_file("synthetic-20261129"))  # rows that never held another model
    assert own.memory_finding() == plain.memory_finding()
    assert own.rows_table("gpt2") == plain.rows_table("gpt2")
    drawn = {t["name"]: t["y"] for t in plot_data(own.memory_figure())}
    assert drawn == {t["name"]: t["y"] for t in plot_data(plain.memory_figure())}
    # gpt2's "weights and other live tensors" bar is its own weights and the 40 MiB the rows add, not gpt2-xl's
    rest = _values(plot_data(own.memory_figure())[0]["y"])  # the first panel's (gpt2's) first part
    assert rest and all(abs(v - (W2 + 40 * MiB) / MiB) < 1 for v in rest)
    assert "left out of each panel" in own.memory_figure() and "leaves the other models" in own.memory_basis()


def test_a_run_that_does_not_say_what_each_model_held_is_captioned_as_such(tmp_path):
    p = write(tmp_path, _two_models_loaded(False))
    assert "does not record how much each one held" in p.memory_basis()
    assert "includes the other models&#x27; weights" in p.memory_figure()
    # its figures are drawn as recorded: gpt2's bar carries gpt2-xl's weights
    assert min(_values(plot_data(p.memory_figure())[0]["y"])) > WXL / MiB


def test_the_comparison_shares_are_of_each_loops_own_peak(tmp_path):
    run_dir = write_run(tmp_path, "r-own")
    write_json_atomic(run_dir / "decode.json", _two_models_loaded(True, "r-own"))
    run_dir = write_run(tmp_path, "r-old", created="2026-11-30T08:00:00+00:00")
    write_json_atomic(run_dir / "decode.json", _two_models_loaded(False, "r-old"))
    runs = load_runs(tmp_path)
    html = ComparePage(runs[-1], runs, []).int8_figure()
    peaks = {t["name"]: _values(t["x"]) for t in plot_data(html)}
    graph = peaks["peak memory, int8 read by a kernel in a CUDA graph"]
    ticks = plot_data(html)[0]["y"]
    own, old = graph[ticks.index(next(t for t in ticks if "r-own" in t))], graph[ticks.index(next(t for t in ticks if "r-old" in t))]
    assert own < old < 100  # gpt2-xl's weights in both peaks pull the old run's share towards 100%
    caption = re.search(r"<figcaption>(.*?)</figcaption>", html, flags=re.S).group(1)
    assert "The peaks of r-old also hold the other models" in caption and "r-own also" not in caption
