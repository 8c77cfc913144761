"""The second round of hostile data: characters a reader cannot see, JSON written to break the parser,
files that are not files, strings long enough to blow up the site, values that contradict each other
or the code's own tables, and one run id in two places. Each is refused naming file, field and value;
none hangs the build, and no message carries a raw control character to a terminal."""
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import typing

import pytest

from collect.schema import records
from conftest import ROOT, mkdocs_build
from hostile import corpus
from render.errors import DataError
from render.runs import load_runs
from render.site import Report

# What a terminal must never receive raw from a message: controls (ESC starts its escape sequences) and
# the characters that reorder or hide text.
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _load_within(data_dir, seconds: float = 60):
    """load_runs(data_dir) in a thread: the exception it raised, or a failure if it did not return in time
    (a FIFO blocks a plain open until a writer comes, so the test gives it one then)."""
    box = {}

    def target():
        try:
            box["runs"] = load_runs(data_dir)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        for p in data_dir.rglob("*"):
            if p.is_fifo():
                os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))  # releases the blocked reader
        pytest.fail(f"loading the data did not finish in {seconds:.0f} s: it hangs")
    return box.get("error")


@pytest.mark.parametrize("case", corpus.SECOND_ROUND, ids=lambda c: c.name)
def test_second_round_is_refused_naming_file_field_and_value(tmp_path, case):
    run_dir = corpus.copy_run(tmp_path)
    field = case.mutate(run_dir)
    err = _load_within(tmp_path)
    assert isinstance(err, DataError), f"expected a DataError, got {err!r}"
    msg = str(err)
    assert case.file in msg, f"the message does not name the file: {msg[:400]}"
    assert field in msg, f"the message does not name {field}: {msg[:400]}"
    for words in case.says:
        assert words in msg, f"the message does not say {words!r}: {msg[:400]}"
    assert not _RAW.search(msg), f"the message carries a raw control or reordering character: {msg[:400]!r}"
    assert len(msg) < 2000, "the message quotes too much of the value"


def test_the_build_prints_no_raw_escape_sequence(tmp_path):
    run_dir = corpus.copy_run(tmp_path / "data")
    corpus.set_at("manifest.json", ("device", "name"), "NVIDIA \x1b[2J\x1b[31mH200")(run_dir)
    proc = mkdocs_build(tmp_path / "site", data_dir=tmp_path / "data")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "U+001B" in out and "device.name" in out, out[-2000:]
    assert "\x1b" not in out


def test_a_character_device_is_refused_without_reading_it(tmp_path):
    """/dev/zero never ends: read whole, it fills memory. The reader is run in a child process whose
    address space is capped, so the old behaviour fails the test instead of the machine."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from pathlib import Path; from render.validate import load_validated; "
            "from collect.schema.decode import DecodeFile; from render.errors import DataError\n"
            "try:\n    load_validated(Path('/dev/zero'), DecodeFile)\n"
            "except DataError as exc:\n    print(exc); sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "/dev/zero" in proc.stdout and "character device" in proc.stdout, proc.stdout


def test_one_run_id_in_runs_and_in_reference_is_refused_naming_both(tmp_path):
    shutil.copytree(corpus.DATA / "reference", tmp_path / "reference")
    ref = next(p.name for p in (tmp_path / "reference").iterdir() if p.is_dir())
    corpus.copy_run(tmp_path, ref)
    with pytest.raises(DataError) as err:
        Report.load(tmp_path)
    msg = str(err.value)
    assert str(tmp_path / "runs" / ref) in msg and str(tmp_path / "reference" / ref) in msg, msg


def test_the_datasheet_comes_from_the_codes_table_by_key(tmp_path):
    """Figures in the file are not trusted: the key picks the code's entry (and the device name must
    agree with the key, see SECOND_ROUND); a thousandfold bandwidth changes nothing on the pages."""
    from collect.schema.datasheets import lookup

    run_dir = corpus.copy_run(tmp_path)
    m = json.loads((run_dir / "manifest.json").read_text())
    table = lookup(m["device"]["name"])
    m["datasheet"]["memory_bandwidth_bytes_per_s"] *= 1000
    m["datasheet"]["sm_count"] = 16
    (run_dir / "manifest.json").write_text(json.dumps(m))
    sheet = load_runs(tmp_path)[0].manifest.datasheet
    assert sheet == table


def _string_fields():
    """(class, field) for every field of every schema dataclass that holds text (a string, a list of them, a
    mapping with string keys)."""
    for cls in records():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "str" in str(hints[f.name]):
                yield cls, f


def test_every_string_field_has_a_length_bound_beside_it():
    loose = [f"{cls.__name__}.{f.name}" for cls, f in _string_fields()
             if not f.metadata.get("max_len") and not f.metadata.get("choices")]
    assert loose == []


def test_length_bounds_fit_real_kernel_names():
    """Demangled CUTLASS and CuTe kernel names run to hundreds of characters, and more."""
    from collect.schema.profile import KernelRow

    bound = next(f for f in dataclasses.fields(KernelRow) if f.name == "kernel_name").metadata["max_len"]
    assert bound >= 4096


def test_every_spread_is_ordered_around_its_median():
    """A statistic added later gets its order too: each 10th percentile is declared at most its median,
    each 90th at least it, and each least and largest SM clock around the median clock."""
    pairs = {"_p10": ("at_most", "_median"), "_p90": ("at_least", "_median"),
             "_min_mhz": ("at_most", "_mhz"), "_max_mhz": ("at_least", "_mhz")}
    missing = []
    for cls in records():
        names = {f.name for f in dataclasses.fields(cls)}
        for f in dataclasses.fields(cls):
            for end, (rule, median_end) in pairs.items():
                median = f.name[: -len(end)] + median_end
                if f.name.endswith(end) and median in names and f.metadata.get(rule) != median:
                    missing.append(f"{cls.__name__}.{f.name} ({rule}={median!r})")
    assert missing == []
